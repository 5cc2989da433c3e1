// matmul (NumPy rules) and dot_general (XLA DotGeneral), both as a batch of GEMMs
// out[b] = A[b] (m×k) · B[b] (k×n) over strided operand views: transposed and sliced
// operands reach the libraries through their transpose flags and leading dimensions, and
// are copied only when neither layout fits (or the dims of a dot_general group do not merge).
//
// Which code runs (measured with bench/matmul_libs.cpp on this 2-core AMD EPYC with
// AVX-512 and avx512_bf16, OPENBLAS_CORETYPE=Haswell as set here):
// - f32: oneDNN's dnnl_sgemm when oneDNN is found (1.6-2.4x OpenBLAS sgemm at 1024^3 and
//   2048^3), else OpenBLAS sgemm;
// - f64: OpenBLAS dgemm (oneDNN has no f64 GEMM; Debian's BLIS runs generic kernels here);
// - bf16: oneDNN's matmul primitive (avx512_bf16 dot products, f32 accumulation, 1.2-4x
//   widening to f32 + sgemm); else the f16 route;
// - f16: widened to f32 and multiplied by the f32 GEMM (oneDNN 2.6 has no f16 matmul here);
// - c64 / c128: OpenBLAS cgemm / zgemm;
// - integers, and every dtype when one matrix product is small: blocked loops here,
//   parallel over batches and row blocks. Integers accumulate in uint32 (uint64 for i64),
//   so the result is the exact product modulo 2^bits of the output dtype (what i64
//   accumulation followed by conversion gives).
#include <cblas.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#ifdef RLX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/fused.h"
#include "backend/cpu/isa.h"
#include "rlx/attrs.h"
#include "rlx/axes.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// Products below this many multiply-adds run in the loops here (a library call costs more).
constexpr int64_t kSmallGemm = 32 * 32 * 32;
// Library GEMMs below this size run one per thread, over batches.
constexpr int64_t kBatchParallelGemm = 64 * 64 * 64;
constexpr int64_t kLoopGrain = 1 << 16;  // multiply-adds per parallel chunk of the loops

// --- operands ------------------------------------------------------------------------------

// One operand as a batch of strided matrices.
struct Mat {
  const char* data = nullptr;    // element (0, 0) of batch 0
  std::vector<int64_t> bstride;  // per problem batch dim, in elements (0: broadcast)
  int64_t rows = 1, cols = 1, rs = 0, cs = 0;
};

// How a library reads a matrix: row-major (trans = false) or column-major with a leading
// dimension.
struct Layout {
  bool trans;
  int64_t ld;
};

std::optional<Layout> blas_layout(const Mat& m) {
  int64_t r = std::max<int64_t>(m.rows, 1), c = std::max<int64_t>(m.cols, 1);
  std::optional<Layout> l;
  if ((c == 1 || m.cs == 1) && (r == 1 || m.rs >= c))
    l = Layout{false, r == 1 ? c : m.rs};
  else if ((r == 1 || m.rs == 1) && (c == 1 || m.cs >= r))
    l = Layout{true, c == 1 ? r : m.cs};
  if (l && l->ld > INT_MAX) l.reset();  // cblas takes int
  return l;
}

// Dims [lo, hi) of v as one (size, stride); none when their strides do not chain. Size-1
// dims are skipped, so an empty group is (1, 0).
std::optional<std::pair<int64_t, int64_t>> merge_dims(const Tensor& v, size_t lo, size_t hi) {
  int64_t size = 1, stride = 0, next = -1;
  for (size_t d = hi; d-- > lo;) {
    int64_t n = v.shape()[d], s = v.strides()[d];
    if (n == 1) continue;
    if (next >= 0 && s != next) return std::nullopt;
    if (next < 0) stride = s;
    size *= n;
    next = s * n;
  }
  return std::pair{size, stride};
}

// Describes v = [its batch dims (nb_v), row dims (nr), column dims (nc)] for a problem of
// nb batch dims (v's right-aligned; size 1 broadcasts). v is replaced by a contiguous copy
// (kept alive in `keep`) when its row or column dims do not merge, or when `blas` asks for
// a layout a library reads and v has none.
Mat describe(Tensor v, size_t nb_v, size_t nr, size_t nc, size_t nb, bool blas,
             std::vector<Tensor>& keep) {
  for (int attempt = 0;; ++attempt) {
    auto r = merge_dims(v, nb_v, nb_v + nr), c = merge_dims(v, nb_v + nr, nb_v + nr + nc);
    Mat m;
    if (r && c) {
      std::tie(m.rows, m.rs) = *r;
      std::tie(m.cols, m.cs) = *c;
    }
    if ((r && c && (!blas || blas_layout(m))) || attempt > 0) {
      m.data = static_cast<const char*>(v.data());
      m.bstride.assign(nb, 0);
      for (size_t i = nb - std::min(nb, nb_v); i < nb; ++i) {
        size_t j = i - (nb - nb_v);
        if (v.shape()[j] != 1) m.bstride[i] = v.strides()[j];
      }
      return m;
    }
    v = v.contiguous();
    keep.push_back(v);
  }
}

struct Gemm {
  DType dtype;
  const MatmulEpilogue* post = nullptr;  // bias / activation for oneDNN to run
  bool post_done = false;                // ... and it did
  std::vector<int64_t> batch;            // the output's batch dims
  int64_t m = 1, n = 1, k = 1;
  Mat a, b;                  // m×k and k×n
  char* out = nullptr;       // [batch..., m, n], contiguous
  std::vector<Tensor> keep;  // copies the operands point into
};

// The element offset of batch t (row-major over `batch`) given per-dim strides.
int64_t batch_offset(const std::vector<int64_t>& batch, const std::vector<int64_t>& strides,
                     int64_t t) {
  int64_t off = 0;
  for (size_t d = batch.size(); d-- > 0;) {
    off += (t % batch[d]) * strides[d];
    t /= batch[d];
  }
  return off;
}

// Whether the product goes to a library (else the loops here).
bool use_library(DType dt, int64_t m, int64_t n, int64_t k) {
  if (!is_float(dt) && !is_complex(dt)) return false;
  for (int64_t d : {m, n, k})
    if (d > INT_MAX) return false;
  return m * n * k >= kSmallGemm;
}

// When B is shared by every batch and A's batches are evenly spaced rows, the batch is one
// GEMM of batch·m rows.
void fold_batches(Gemm& g, bool library) {
  if (g.batch.empty()) return;
  for (int64_t s : g.b.bstride)
    if (s != 0) return;
  int64_t rs = g.m > 1 ? g.a.rs : 0, next = g.m > 1 ? g.a.rs * g.m : -1;
  for (size_t d = g.batch.size(); d-- > 0;) {
    if (g.batch[d] == 1) continue;
    int64_t s = g.a.bstride[d];
    if (next < 0) rs = s;
    if (next >= 0 && s != next) return;
    next = s * g.batch[d];
  }
  Mat a = g.a;
  a.rows = g.m * dims_product(g.batch);
  a.rs = rs;
  a.bstride.clear();
  if (library && (a.rows > INT_MAX || !blas_layout(a))) return;
  g.a = a;
  g.m = a.rows;
  g.batch.clear();
  g.b.bstride.clear();
}

// --- the loops -----------------------------------------------------------------------------

// The accumulator: f32 for f32 / f16 / bf16, f64 for f64, and for integers unsigned of at
// least 32 bits (wrapping, no UB on overflow).
template <class T>
using gemm_acc_t =
    std::conditional_t<std::is_integral_v<T>,
                       std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>,
                       std::conditional_t<is_complex_v<T> || std::is_same_v<T, double>, T, float>>;

// Rows [i0, i1) of C = A·B for one batch, blocked so that a kKB×kNB block of B is reused
// across kMB rows.
template <class T>
void loop_gemm(const T* a, const Mat& ma, const T* b, const Mat& mb, T* c, int64_t n, int64_t k,
               int64_t i0, int64_t i1) {
  using W = gemm_acc_t<T>;
  constexpr int64_t kMB = 8, kNB = 256, kKB = 256;
  W acc[kMB][kNB];
  for (int64_t ib = i0; ib < i1; ib += kMB) {
    int64_t mh = std::min(kMB, i1 - ib);
    for (int64_t jb = 0; jb < n; jb += kNB) {
      int64_t w = std::min(kNB, n - jb);
      for (int64_t i = 0; i < mh; ++i)
        for (int64_t j = 0; j < w; ++j) acc[i][j] = W(0);
      for (int64_t kb = 0; kb < k; kb += kKB)
        for (int64_t i = 0; i < mh; ++i) {
          W* row = acc[i];
          for (int64_t p = kb; p < std::min(k, kb + kKB); ++p) {
            W av = W(load(a[(ib + i) * ma.rs + p * ma.cs]));
            const T* brow = b + p * mb.rs + jb * mb.cs;
            if (mb.cs == 1)
              for (int64_t j = 0; j < w; ++j) row[j] += av * W(load(brow[j]));
            else
              for (int64_t j = 0; j < w; ++j) row[j] += av * W(load(brow[j * mb.cs]));
          }
        }
      for (int64_t i = 0; i < mh; ++i) {
        T* out = c + (ib + i) * n + jb;
        for (int64_t j = 0; j < w; ++j) out[j] = store<T>(acc[i][j]);
      }
    }
  }
}

template <class T>
void run_loops(const Gemm& g) {
  constexpr int64_t kRows = 8;  // rows per parallel item
  int64_t nbatch = dims_product(g.batch), blocks = (g.m + kRows - 1) / kRows;
  int64_t work = std::max<int64_t>(1, kRows * g.n * g.k);
  parallel_for(
      nbatch * blocks, std::max<int64_t>(1, kLoopGrain / work), [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          int64_t t = s / blocks, i0 = (s % blocks) * kRows;
          const T* a = reinterpret_cast<const T*>(g.a.data) + batch_offset(g.batch, g.a.bstride, t);
          const T* b = reinterpret_cast<const T*>(g.b.data) + batch_offset(g.batch, g.b.bstride, t);
          T* c = reinterpret_cast<T*>(g.out) + t * g.m * g.n;
          loop_gemm(a, g.a, b, g.b, c, g.n, g.k, i0, std::min(g.m, i0 + kRows));
        }
      });
}

// --- the libraries -------------------------------------------------------------------------

CBLAS_TRANSPOSE cblas_trans(const Layout& l) { return l.trans ? CblasTrans : CblasNoTrans; }

// C (m×n, row-major, ldc = n) = A·B in f32.
void sgemm(const Layout& la, const Layout& lb, int64_t m, int64_t n, int64_t k, const float* a,
           const float* b, float* c) {
#ifdef RLX_HAVE_DNNL
  dnnl_status_t st = dnnl_sgemm(la.trans ? 'T' : 'N', lb.trans ? 'T' : 'N', m, n, k, 1.f, a, la.ld,
                                b, lb.ld, 0.f, c, n);
  if (st != dnnl_success)
    fail<NotSupported>("matmul", "expected dnnl_sgemm to run, got status ", int(st));
#else
  cblas_sgemm(CblasRowMajor, cblas_trans(la), cblas_trans(lb), int(m), int(n), int(k), 1.f, a,
              int(la.ld), b, int(lb.ld), 0.f, c, int(n));
#endif
}

void dgemm(const Layout& la, const Layout& lb, int64_t m, int64_t n, int64_t k, const double* a,
           const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, cblas_trans(la), cblas_trans(lb), int(m), int(n), int(k), 1.0, a,
              int(la.ld), b, int(lb.ld), 0.0, c, int(n));
}

// c64 / c128: BLAS's cgemm / zgemm (alpha and beta passed by address).
template <class C>
void complex_gemm(const Layout& la, const Layout& lb, int64_t m, int64_t n, int64_t k, const C* a,
                  const C* b, C* c) {
  const C one(1), zero(0);
  auto gemm = std::is_same_v<C, std::complex<float>> ? cblas_cgemm : cblas_zgemm;
  gemm(CblasRowMajor, cblas_trans(la), cblas_trans(lb), int(m), int(n), int(k), &one, a, int(la.ld),
       b, int(lb.ld), &zero, c, int(n));
}

// Calls f(a, b, c) per batch with that batch's typed pointers; in parallel over batches
// (each call then single-threaded) when the products are small and `concurrent` allows.
template <class T, class F>
void for_batches(const Gemm& g, bool concurrent, F&& f) {
  int64_t nbatch = dims_product(g.batch);
  auto one = [&](int64_t t) {
    f(reinterpret_cast<const T*>(g.a.data) + batch_offset(g.batch, g.a.bstride, t),
      reinterpret_cast<const T*>(g.b.data) + batch_offset(g.batch, g.b.bstride, t),
      reinterpret_cast<T*>(g.out) + t * g.m * g.n);
  };
  if (concurrent && nbatch > 1 && g.m * g.n * g.k < kBatchParallelGemm) {
    parallel_for(nbatch, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) one(t);
    });
  } else {
    for (int64_t t = 0; t < nbatch; ++t) one(t);
  }
}

// A strided m×k matrix of 16-bit floats widened into a row-major f32 buffer.
template <class T>
void widen_matrix(const T* src, const Mat& m, float* dst) {
  parallel_for(m.rows, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(m.cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t c = 0; c < m.cols; ++c)
                     dst[r * m.cols + c] = to_f32(src[r * m.rs + c * m.cs]);
               });
}

// f32 scratch of this thread, kept between calls up to kKeep floats per slot: a fresh large
// buffer costs a page fault per 4 KiB on every call.
float* scratch(int slot, int64_t n, std::vector<float>& own) {
  constexpr int64_t kKeep = int64_t(1) << 24;
  thread_local std::vector<float> kept[3];
  std::vector<float>& v = n <= kKeep ? kept[slot] : own;
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}

// f16 (and bf16 without oneDNN): widen each batch's operands (once for an operand shared by
// consecutive batches), sgemm, narrow.
template <class T>
void run_widened(const Gemm& g) {
  std::vector<float> own_a, own_b, own_c;
  float *wa = scratch(0, g.m * g.k, own_a), *wb = scratch(1, g.k * g.n, own_b),
        *wc = scratch(2, g.m * g.n, own_c);
  const T *last_a = nullptr, *last_b = nullptr;
  Layout la{false, std::max<int64_t>(g.k, 1)}, lb{false, std::max<int64_t>(g.n, 1)};
  for_batches<T>(g, false, [&](const T* a, const T* b, T* c) {
    if (a != last_a) widen_matrix(a, g.a, wa);
    if (b != last_b) widen_matrix(b, g.b, wb);
    last_a = a;
    last_b = b;
    sgemm(la, lb, g.m, g.n, g.k, wa, wb, wc);
    parallel_for(g.m * g.n, 1 << 15, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) c[i] = store<T>(wc[i]);
    });
  });
}

#ifdef RLX_HAVE_DNNL
// oneDNN matmul primitives, one per (dtype, m, n, k, layouts), created once: creating a
// primitive costs far more than running a small one.
class DnnlMatmul {
 public:
  static DnnlMatmul& get() {
    static DnnlMatmul instance;
    return instance;
  }

  // False when oneDNN offers only its reference implementation for this problem (slow).
  // `post`: a per-column bias and an activation to apply as post-ops.
  bool run(dnnl::memory::data_type dt, const Layout& la, const Layout& lb, int64_t m, int64_t n,
           int64_t k, const void* a, const void* b, void* c, const MatmulEpilogue* post = nullptr) {
    std::shared_ptr<Entry> e = find(dt, la, lb, m, n, k, post);
    if (!e->prim) return false;
    thread_local dnnl::stream stream(engine_);
    using dnnl::memory;
    memory ma(e->a, engine_, const_cast<void*>(a)), mb(e->b, engine_, const_cast<void*>(b)),
        mc(e->c, engine_, c);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (post && post->bias)
      args.emplace(DNNL_ARG_BIAS, memory(e->bias, engine_, const_cast<float*>(post->bias)));
    e->prim.execute(stream, args);
    stream.wait();
    return true;
  }

 private:
  struct Entry {
    dnnl::memory::desc a, b, c, bias;
    dnnl::matmul prim;  // empty: no fast implementation
  };
  using Key = std::array<int64_t, 10>;
  struct KeyHash {
    size_t operator()(const Key& key) const { return size_t(fnv1a64(key.data(), sizeof(Key))); }
  };
  static constexpr size_t kMaxEntries = 256;

  static dnnl::memory::desc desc(dnnl::memory::data_type dt, int64_t rows, int64_t cols,
                                 const Layout& l) {
    using dnnl::memory;
    memory::dims strides = l.trans ? memory::dims{1, l.ld} : memory::dims{l.ld, 1};
    return memory::desc({rows, cols}, dt, strides);
  }

  std::shared_ptr<Entry> find(dnnl::memory::data_type dt, const Layout& la, const Layout& lb,
                              int64_t m, int64_t n, int64_t k, const MatmulEpilogue* post) {
    int64_t act = post ? int64_t(post->act) : -1, bias = post && post->bias;
    Key key{int64_t(dt), m, n, k, la.trans, la.ld, lb.trans, lb.ld, act, bias};
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    auto e = std::make_shared<Entry>();
    e->a = desc(dt, m, k, la);
    e->b = desc(dt, k, n, lb);
    e->c = desc(dt, m, n, Layout{false, n});
    if (bias) e->bias = desc(dnnl::memory::data_type::f32, 1, n, Layout{false, n});
    try {
      dnnl::primitive_attr attr;
      if (post && post->act != Act::none) {
        dnnl::post_ops po;
        append_eltwise(po, post->act);
        attr.set_post_ops(po);
      }
      dnnl::matmul::desc md = bias ? dnnl::matmul::desc(e->a, e->b, e->bias, e->c)
                                   : dnnl::matmul::desc(e->a, e->b, e->c);
      dnnl::matmul::primitive_desc pd(md, attr, engine_);
      if (std::string_view(pd.impl_info_str()).substr(0, 3) != "ref") e->prim = dnnl::matmul(pd);
    } catch (const dnnl::error&) {
      // No implementation: the caller falls back.
    }
    if (cache_.size() >= kMaxEntries) cache_.clear();
    cache_.emplace(key, e);
    return e;
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  std::mutex mu_;
  std::unordered_map<Key, std::shared_ptr<Entry>, KeyHash> cache_;
};
#endif

#ifdef RLX_HAVE_DNNL
constexpr double kPrimitiveMin = 256.0 * 256.0 * 256.0;
#endif

void run_library(Gemm& g) {
  Layout la = *blas_layout(g.a), lb = *blas_layout(g.b);
  switch (g.dtype) {
    case DType::f32: {
#ifdef RLX_HAVE_DNNL
      constexpr bool kConcurrent = true;  // dnnl_sgemm nests under OpenMP
#else
      constexpr bool kConcurrent = false;  // OpenBLAS (pthreads) must not be called in parallel
#endif
      return for_batches<float>(g, kConcurrent, [&](const float* a, const float* b, float* c) {
#ifdef RLX_HAVE_DNNL
        // Large products: the matmul primitive scales over the cores better than dnnl_sgemm
        // (bench/RESULTS.md, "Large f32 products").
        // A bias and activation go along as post-ops (on the output while it is hot).
        if (double(g.m) * double(g.n) * double(g.k) >= kPrimitiveMin &&
            DnnlMatmul::get().run(dnnl::memory::data_type::f32, la, lb, g.m, g.n, g.k, a, b, c,
                                  g.post)) {
          g.post_done = g.post != nullptr;  // the same for every batch (one cached primitive)
          return;
        }
#endif
        sgemm(la, lb, g.m, g.n, g.k, a, b, c);
      });
    }
    case DType::f64:
      return for_batches<double>(g, false, [&](const double* a, const double* b, double* c) {
        dgemm(la, lb, g.m, g.n, g.k, a, b, c);
      });
    case DType::bf16:
#ifdef RLX_HAVE_DNNL
    {
      bool done = true;
      for_batches<bf16_t>(g, false, [&](const bf16_t* a, const bf16_t* b, bf16_t* c) {
        done = done &&
               DnnlMatmul::get().run(dnnl::memory::data_type::bf16, la, lb, g.m, g.n, g.k, a, b, c);
      });
      if (done) return;
    }
#endif
      return run_widened<bf16_t>(g);
    case DType::f16:
      return run_widened<f16_t>(g);
    case DType::c64:
    case DType::c128:
      return visit_complex(g.dtype, "matmul", [&](auto tag) {
        using C = typename decltype(tag)::type;
        for_batches<C>(g, false, [&](const C* a, const C* b, C* c) {
          complex_gemm(la, lb, g.m, g.n, g.k, a, b, c);
        });
      });
    default:
      fail<NotSupported>("matmul", "expected a float dtype for the GEMM libraries, got ", g.dtype);
  }
}

// `library`: the operands were described for a library (see use_library).
void run_gemm(Gemm& g, const Tensor& out, bool library) {
  if (out.numel() == 0) return;
  if (g.k == 0) {  // an empty sum
    std::memset(g.out, 0, out.nbytes());
    return;
  }
  fold_batches(g, library);
  if (library && use_library(g.dtype, g.m, g.n, g.k) && blas_layout(g.a) && blas_layout(g.b))
    return run_library(g);
  auto loops = [&](auto tag) { run_loops<typename decltype(tag)::type>(g); };
  if (is_complex(g.dtype))
    visit_complex(g.dtype, "matmul", loops);
  else
    visit(g.dtype, kNumeric, "matmul", loops);
}

// --- the ops -------------------------------------------------------------------------------

void matmul_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  matmul_into(in[0], in[1], out[0], nullptr);
}

void dot_general_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  // Each operand permuted to [batch, free, contracting] (lhs) / [batch, contracting, free]
  // (rhs): a view; describe() copies only if a group's dims do not merge.
  auto axes = [&](const char* key, int64_t rank) {
    std::vector<int64_t> v;
    for (int64_t a : ctx.attrs.get_ints(key)) v.push_back(norm_axis(a, rank));
    return v;
  };
  auto free_axes = [](int64_t rank, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(b.begin(), b.end(), d) == b.end() &&
          std::find(c.begin(), c.end(), d) == c.end())
        f.push_back(d);
    return f;
  };
  auto cat3 = [](std::vector<int64_t> x, const std::vector<int64_t>& y,
                 const std::vector<int64_t>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  auto size_of = [](const Tensor& t, const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= t.shape()[size_t(d)];
    return n;
  };
  const Tensor &lhs = in[0], &rhs = in[1];
  auto lb = axes("lhs_batch", lhs.rank()), lc = axes("lhs_contracting", lhs.rank());
  auto rb = axes("rhs_batch", rhs.rank()), rc = axes("rhs_contracting", rhs.rank());
  auto lf = free_axes(lhs.rank(), lb, lc), rf = free_axes(rhs.rank(), rb, rc);
  Gemm g;
  g.dtype = lhs.dtype();
  for (int64_t d : lb) g.batch.push_back(lhs.shape()[size_t(d)]);
  g.m = size_of(lhs, lf);
  g.k = size_of(lhs, lc);
  g.n = size_of(rhs, rf);
  g.out = static_cast<char*>(out[0].data());
  if (out[0].numel() == 0 || g.k == 0) return run_gemm(g, out[0], false);
  bool library = use_library(g.dtype, g.m, g.n, g.k);
  size_t nb = lb.size();
  g.a = describe(lhs.permute(cat3(lb, lf, lc)), nb, lf.size(), lc.size(), nb, library, g.keep);
  g.b = describe(rhs.permute(cat3(rb, rc, rf)), nb, rc.size(), rf.size(), nb, library, g.keep);
  run_gemm(g, out[0], library);
}

}  // namespace

bool matmul_into(const Tensor& a, const Tensor& b, Tensor& out, const MatmulEpilogue* post) {
  bool av = a.rank() == 1, bv = b.rank() == 1;
  Gemm g;
  g.dtype = a.dtype();
  if (g.dtype == DType::f32 && !bv) g.post = post;  // 1-D b: the output's columns are rows
  g.k = a.shape().back();
  g.m = av ? 1 : a.shape()[size_t(a.rank() - 2)];
  g.n = bv ? 1 : b.shape().back();
  size_t out_mat = (av ? 0 : 1) + (bv ? 0 : 1);
  g.batch.assign(out.shape().begin(), out.shape().end() - std::ptrdiff_t(out_mat));
  g.out = static_cast<char*>(out.data());
  if (out.numel() == 0 || g.k == 0) {
    run_gemm(g, out, false);
    return false;
  }
  // A B without batch dims usually lets the batch fold into m (fold_batches).
  int64_t m = b.rank() <= 2 ? g.m * dims_product(g.batch) : g.m;
  bool library = use_library(g.dtype, m, g.n, g.k);
  size_t nb = g.batch.size();
  g.a = describe(a, av ? 0 : size_t(a.rank() - 2), av ? 0 : 1, 1, nb, library, g.keep);
  g.b = describe(b, bv ? 0 : size_t(b.rank() - 2), 1, bv ? 0 : 1, nb, library, g.keep);
  run_gemm(g, out, library);
  return g.post_done;
}

void register_linalg(KernelRegistry& r) {
  KernelFlags strided{.strided_inputs = true};
  add_kernel(r, "matmul", matmul_kernel, dtype_in(kNumeric | kComplex), strided);
  add_kernel(r, "dot_general", dot_general_kernel, dtype_in(kNumeric | kComplex), strided);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
