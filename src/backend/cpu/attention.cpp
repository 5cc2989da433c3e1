// attention(q, k, v, [bias]) = softmax(q k^T * scale + bias, masked) v over the broadcast
// batch dims; q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv]; scale 0 means 1/sqrt(D).
//
// Masks are aligned bottom-right (as in FlashAttention and KV-cache decoding): query i
// sits at position p = i + Sk - Sq of the keys; "causal" lets it see keys j <= p and
// "sliding_window" keys p - window < j <= p. A row that sees no key, or whose visible
// scores are all -inf (e.g. from the bias), gives 0 rather than NaN.
//
// Work splits into (batch block, tile of query rows) tasks. The scores of a tile (only
// the key range its rows can see) and the product with v come from a register-blocked
// GEMM written here rather than OpenBLAS: the OpenBLAS build is the pthreads one, and its
// threads fight the OpenMP threads that run the tiles (16 heads x 512 x 64: 2.4 s against
// 0.16 s on the loaded 2-core box), while single-threaded it is no faster than this kernel
// on these shapes. k is transposed (and v widened for f16/bf16) once per batch block and
// thread; f16/bf16 compute in f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/nn_util.h"
#include "ops/attention_layout.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// c[m x n] = alpha * a[m x k] b[k x n], row-major with leading dims lda, ldb, ldc. Blocks
// of MR x NR outputs stay in registers (the loops over NR vectorise); the edges go a row
// at a time. k = 0 gives zeros.
template <class C, int MR, int NR>
inline void gemm_block(int64_t k, C alpha, const C* a, int64_t lda, const C* b, int64_t ldb, C* c,
                       int64_t ldc) {
  C acc[MR][NR] = {};
  for (int64_t p = 0; p < k; ++p) {
    const C* br = b + p * ldb;
    for (int r = 0; r < MR; ++r) {
      C av = a[r * lda + p];
#pragma omp simd
      for (int j = 0; j < NR; ++j) acc[r][j] += av * br[j];
    }
  }
  for (int r = 0; r < MR; ++r)
#pragma omp simd
    for (int j = 0; j < NR; ++j) c[r * ldc + j] = alpha * acc[r][j];
}

template <class C>
void gemm_rows(int64_t m, int64_t n, int64_t k, C alpha, const C* a, int64_t lda, const C* b,
               int64_t ldb, C* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    C* cr = c + i * ldc;
    std::fill(cr, cr + n, C(0));
    for (int64_t p = 0; p < k; ++p) {
      C av = a[i * lda + p];
      const C* br = b + p * ldb;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) cr[j] += av * br[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) cr[j] *= alpha;
  }
}

template <class C>
void gemm(int64_t m, int64_t n, int64_t k, C alpha, const C* a, int64_t lda, const C* b,
          int64_t ldb, C* c, int64_t ldc) {
  constexpr int MR = 8, NR = 128 / int(sizeof(C));  // 8 x (two 512-bit vectors)
  int64_t m0 = m / MR * MR, n0 = n / NR * NR;
  for (int64_t j = 0; j < n0; j += NR)
    for (int64_t i = 0; i < m0; i += MR)
      gemm_block<C, MR, NR>(k, alpha, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc);
  if (n0 < n) gemm_rows(m, n - n0, k, alpha, a, lda, b + n0, ldb, c + n0, ldc);
  if (m0 < m) gemm_rows(m - m0, n0, k, alpha, a + m0 * lda, lda, b, ldb, c + m0 * ldc, ldc);
}

// Strides (in elements) of a contiguous `shape` broadcast to `rank` dims: 0 where a dim
// is 1 or missing.
std::vector<int64_t> bcast_strides(const std::vector<int64_t>& shape, size_t rank) {
  std::vector<int64_t> st(rank, 0);
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[rank - shape.size() + i] = shape[i] == 1 ? 0 : s;
    s *= shape[i];
  }
  return st;
}

// Offset of flat batch block b under the strides of one input.
int64_t batch_offset(int64_t b, const std::vector<int64_t>& batch, const std::vector<int64_t>& st) {
  int64_t off = 0;
  for (size_t d = batch.size(); d-- > 0;) {
    off += (b % batch[d]) * st[d];
    b /= batch[d];
  }
  return off;
}

struct Problem {
  std::vector<int64_t> batch;             // output batch dims
  std::vector<int64_t> sq, sk, sv, sb;    // broadcast strides of q, k, v, bias
  int64_t nq = 0, nk = 0, d = 0, dv = 0;  // Sq, Sk, D, Dv
  int64_t window = 0;                     // 0: no lower limit
  bool causal = false, has_bias = false;
  double scale = 1;

  // The keys [lo, hi) query i sees.
  std::pair<int64_t, int64_t> keys(int64_t i) const {
    if (!causal) return {0, nk};
    int64_t p = i + nk - nq;
    int64_t hi = std::clamp<int64_t>(p + 1, 0, nk);
    int64_t lo = window ? std::clamp<int64_t>(p - window + 1, 0, hi) : 0;
    return {lo, hi};
  }
};

// Softmax of one row of scores over its visible keys [lo, hi) (w wide in all); the rest
// of the row becomes 0, and so does a row with no finite score. Returns the row's
// log-sum-exp (attention_lse's statistic): +inf where the sum is 0.
template <class C>
C masked_softmax(C* s, int64_t w, int64_t lo, int64_t hi) {
  C m = row_max(s + lo, hi - lo);
  if (m == -std::numeric_limits<C>::infinity()) m = 0;  // all -inf (or none): sum is 0
  C sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = lo; j < hi; ++j) {
    C e = exp_nonpos(s[j] - m);
    s[j] = e;
    sum += e;
  }
  C inv = sum == 0 ? C(0) : C(1) / sum;
  std::fill(s, s + lo, C(0));
#pragma omp simd
  for (int64_t j = lo; j < hi; ++j) s[j] *= inv;
  std::fill(s + hi, s + w, C(0));
  return sum > 0 ? m + std::log(sum) : std::numeric_limits<C>::infinity();
}

// The k and v of one batch block as compute values: k transposed to [D, Sk] (the GEMM
// streams rows of its right operand), v widened for f16/bf16. Kept per thread and reused
// while consecutive tasks share the block.
template <class T>
struct KvCache {
  using C = compute_t<T>;
  int64_t koff = -1, voff = -1;
  std::vector<C> kt;
  std::vector<float> v;
  const C* vp = nullptr;

  void load(const T* k, int64_t ko, const T* v0, int64_t vo, int64_t nk, int64_t d, int64_t dv) {
    if (ko != koff) {
      koff = ko;
      kt.resize(size_t(nk * d));
      const T* kb = k + ko;
      constexpr int64_t kB = 16;  // transpose in tiles that stay in cache
      for (int64_t j0 = 0; j0 < nk; j0 += kB)
        for (int64_t e0 = 0; e0 < d; e0 += kB)
          for (int64_t j = j0; j < std::min(nk, j0 + kB); ++j)
            for (int64_t e = e0; e < std::min(d, e0 + kB); ++e)
              kt[size_t(e * nk + j)] = cpu::load(kb[j * d + e]);
    }
    if (vo != voff) {
      voff = vo;
      vp = as_compute(v0 + vo, nk * dv, v);
    }
  }
};

// lse: attention_lse's statistics, [blocks, Sq] in the compute type (may be null).
template <class T>
void run_attention(const Problem& pb, std::span<const Tensor> in, Tensor& out, void* lse) {
  using C = compute_t<T>;
  const T *q = in[0].data_as<T>(), *k = in[1].data_as<T>(), *v = in[2].data_as<T>();
  const T* bias = pb.has_bias ? in[3].data_as<T>() : nullptr;
  T* o = out.data_as<T>();
  int64_t blocks = 1;
  for (int64_t b : pb.batch) blocks *= b;
  size_t r = pb.batch.size();
  // Query tiles: a power of two in [8, 128] that keeps a tile's scores near 64K values,
  // halved while there are too few tasks for the threads.
  int64_t tq = 128;
  while (tq > 8 && tq * pb.nk > (int64_t(1) << 16)) tq /= 2;
  int64_t threads = omp_get_max_threads();
  while (tq > 8 && blocks * ((pb.nq + tq - 1) / tq) < 4 * threads) tq /= 2;
  int64_t tiles = (pb.nq + tq - 1) / tq;
  parallel_for(blocks * tiles, 1, [&](int64_t t0, int64_t t1) {
    KvCache<T> kv;
    std::vector<float> qbuf, obuf;
    std::vector<C> s;
    for (int64_t t = t0; t < t1; ++t) {
      // Within a block, tiles go first, last, second, ...: with a causal mask the cost of a
      // tile grows with its index, and each thread gets a contiguous range of tasks.
      int64_t b = t / tiles, u = t % tiles, tile = u % 2 ? tiles - 1 - u / 2 : u / 2;
      int64_t i0 = tile * tq, i1 = std::min(pb.nq, i0 + tq), n = i1 - i0;
      // Keys any row of the tile sees (both bounds grow with i).
      int64_t k0 = pb.keys(i0).first, w = std::max<int64_t>(pb.keys(i1 - 1).second - k0, 0);
      kv.load(k, batch_offset(b, pb.batch, pb.sk), v, batch_offset(b, pb.batch, pb.sv), pb.nk, pb.d,
              pb.dv);
      const C* qc = as_compute(q + batch_offset(b, pb.batch, pb.sq) + i0 * pb.d, n * pb.d, qbuf);
      s.resize(size_t(n * w));
      gemm(n, w, pb.d, C(pb.scale), qc, pb.d, kv.kt.data() + k0, pb.nk, s.data(), w);
      for (int64_t ii = 0; ii < n; ++ii) {
        int64_t i = i0 + ii;
        C* row = s.data() + ii * w;
        auto [lo, hi] = pb.keys(i);
        lo -= k0, hi -= k0;
        if (bias) {
          const T* br = bias + batch_offset(b, pb.batch, pb.sb) + i * pb.sb[r] + k0 * pb.sb[r + 1];
          for (int64_t j = lo; j < hi; ++j) row[j] += load(br[j * pb.sb[r + 1]]);
        }
        C l = masked_softmax(row, w, lo, hi);
        if (lse) static_cast<C*>(lse)[b * pb.nq + i] = l;
      }
      T* ob = o + (b * pb.nq + i0) * pb.dv;
      const C* vc = kv.vp + k0 * pb.dv;
      if constexpr (is_half_v<T>) {
        obuf.resize(size_t(n * pb.dv));
        gemm(n, pb.dv, w, 1.0f, s.data(), w, vc, pb.dv, obuf.data(), pb.dv);
        narrow(obuf.data(), ob, n * pb.dv);
      } else {
        gemm(n, pb.dv, w, C(1), s.data(), w, vc, pb.dv, ob, pb.dv);
      }
    }
  });
}

void attention_bhsd(const Attrs& attrs, std::span<const Tensor> in, std::span<Tensor> out) {
  Problem pb;
  const auto& os = out[0].shape();
  pb.batch.assign(os.begin(), os.end() - 2);
  size_t rank = os.size();
  pb.sq = bcast_strides(in[0].shape(), rank);
  pb.sk = bcast_strides(in[1].shape(), rank);
  pb.sv = bcast_strides(in[2].shape(), rank);
  pb.has_bias = in.size() > 3;
  if (pb.has_bias) pb.sb = bcast_strides(in[3].shape(), rank);
  pb.nq = os[rank - 2];
  pb.dv = os[rank - 1];
  pb.nk = in[1].shape()[in[1].shape().size() - 2];
  pb.d = in[0].shape().back();
  const std::string& mask = attrs.get_string("mask");
  pb.causal = mask != "none";
  pb.window = mask == "sliding_window" ? attrs.get_int("window") : 0;
  double scale = attrs.get_float("scale");
  // scale 0: 1/sqrt(D); with D = 0 every score is 0 anyway, so use 1 (not inf * 0).
  pb.scale = scale != 0 ? scale : pb.d > 0 ? 1.0 / std::sqrt(double(pb.d)) : 1.0;
  void* lse = out.size() > 1 ? out[1].data() : nullptr;
  visit_float(in[0].dtype(), "attention",
              [&](auto tag) { run_attention<typename decltype(tag)::type>(pb, in, out[0], lse); });
}

// Layout bshd through bhsd copies (the CPU's pipeline leaves attention in bhsd; this is
// for graphs that ask for bshd).
void attention_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  if (!detail::is_bshd(ctx.attrs)) return attention_bhsd(ctx.attrs, in, out);
  auto swap_sh = [](const Tensor& t) { return t.permute(detail::seq_head_swap(t.rank())); };
  std::vector<Tensor> bin{swap_sh(in[0]).contiguous(), swap_sh(in[1]).contiguous(),
                          swap_sh(in[2]).contiguous()};
  if (in.size() > 3) bin.push_back(in[3]);
  Tensor y = swap_sh(out[0]);
  std::vector<Tensor> bout{Tensor::empty(y.dtype(), y.shape())};
  if (out.size() > 1) bout.push_back(out[1]);  // lse: [..., H, Sq] in both layouts
  Attrs attrs = ctx.attrs;
  attrs.set("layout", std::string("bhsd"));
  attention_bhsd(attrs, bin, bout);
  Tensor back = swap_sh(bout[0]).contiguous();
  if (back.nbytes()) std::memcpy(out[0].data(), back.data(), back.nbytes());
}

}  // namespace

void register_attention(KernelRegistry& r) {
  add_kernel(r, "attention", attention_kernel, dtype_in(kFloat));
  add_kernel(r, "attention_lse", attention_kernel, dtype_in(kFloat));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
