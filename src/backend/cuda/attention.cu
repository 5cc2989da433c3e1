// attention(q, k, v, [bias]) = softmax(q k^T * scale + bias, masked) v, fused: scores are
// never stored. One warp per query row walks the keys it can see with an online softmax
// (running max and sum, the output rescaled as the max grows); each lane holds D / 32 of
// q and of the output. Masks are aligned bottom-right as on the CPU (backend/cpu/
// attention.cpp): query i sits at key position p = i + Sk - Sq, "causal" sees j <= p,
// "sliding_window" p - window < j <= p; a row that sees no key (or only -inf scores)
// gives 0. f16 / bf16 compute in f32. Head dims up to 256. f16 / bf16 with head dims 64
// and 128, and f32 with 64, take the tensor-core path instead (flash.cuh).
#include <cmath>
#include <cuda/std/limits>

#include "backend/cuda/copy.h"
#include "backend/cuda/dnn.h"
#include "backend/cuda/families.h"
#include "backend/cuda/flash.cuh"
#include "backend/cuda/flash_grad.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/linalg.h"
#include "ops/attention_layout.h"

namespace rlx::cuda {

namespace {

constexpr int kMaxPer = 8;  // head dim up to 32 * 8

struct Geometry {
  int64_t rows, sq, sk, d, dv;  // rows: batch entries * sq
  int64_t q_row, k_row, v_row;  // row strides
  int64_t o_row;                // the output's row stride
  int64_t b_row, b_col;         // bias strides over (i, j), 0 when broadcast
  Indexer<5> batch;             // out, q, k, v, bias offsets per batch entry
  double scale;
  int64_t window;  // 0: no lower limit
  bool causal;
};

// lse (may be null): attention_lse's statistics, [rows].
template <class T, int kPer>
__global__ void attention_rows(const T* q, const T* k, const T* v, const T* bias, T* out,
                               float* lse, Geometry g) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < g.rows;
       row += warps) {
    int64_t b = row / g.sq, i = row - b * g.sq;
    int64_t off[5];
    g.batch.offsets(b, off);
    const T* qr = q + off[1] + i * g.q_row;
    C qv[kPer], acc[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      int64_t c = lane + 32 * e;
      qv[e] = c < g.d ? C(load(qr[c])) * C(g.scale) : C(0);
      acc[e] = 0;
    }
    int64_t p = i + g.sk - g.sq, lo = 0, hi = g.sk;
    if (g.causal) {
      hi = p + 1 < g.sk ? (p + 1 > 0 ? p + 1 : 0) : g.sk;
      if (g.window) lo = p - g.window + 1 > 0 ? p - g.window + 1 : 0;
    }
    C m = -::cuda::std::numeric_limits<C>::infinity(), l = 0;
    for (int64_t j = lo; j < hi; ++j) {
      const T* kr = k + off[2] + j * g.k_row;
      C s = 0;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        int64_t c = lane + 32 * e;
        if (c < g.d) s += qv[e] * C(load(kr[c]));
      }
      for (int w = 16; w > 0; w /= 2) s += __shfl_xor_sync(0xffffffffu, s, w);
      if (bias) s += C(load(bias[off[4] + i * g.b_row + j * g.b_col]));
      if (s == -::cuda::std::numeric_limits<C>::infinity()) continue;
      C mn = s > m ? s : m;
      C corr = exp(m - mn), e_s = exp(s - mn);
      l = l * corr + e_s;
      const T* vr = v + off[3] + j * g.v_row;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        int64_t c = lane + 32 * e;
        acc[e] = acc[e] * corr + (c < g.dv ? e_s * C(load(vr[c])) : C(0));
      }
      m = mn;
    }
    T* o = out + off[0] + i * g.o_row;
    C inv = l > 0 ? C(1) / l : C(0);
    if (lse && lane == 0)
      lse[row] = l > 0 ? float(m + log(l)) : ::cuda::std::numeric_limits<float>::infinity();
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      int64_t c = lane + 32 * e;
      if (c < g.dv) o[c] = store<T>(acc[e] * inv);
    }
  }
}

// The tensor-core path: f16 / bf16 with head dims 64 and 128, f32 with 64, rows of 16-byte
// aligned contiguous elements.
bool flash_fits(const Tensor& q, const Tensor& k, const Tensor& v, const Geometry& g) {
  bool f32 = q.dtype() == DType::f32;
  if (g.d != g.dv || (g.d != 64 && (f32 || g.d != 128)) || g.o_row % 2 != 0) return false;
  for (const Tensor* t : {&q, &k, &v}) {
    const auto& st = t->strides();
    size_t r = st.size();
    if (st[r - 1] != 1 || st[r - 2] % (16 / int64_t(dtype_size(t->dtype()))) != 0 ||
        reinterpret_cast<uintptr_t>(t->data()) % 16 != 0)
      return false;
  }
  return true;
}

// Layout bshd ([..., s, h, d]) seen as bhsd: the sequence and head axes swapped, a view.
Tensor swap_sh(const Tensor& t) { return t.permute(detail::seq_head_swap(t.rank())); }

using detail::is_bshd;

void attention_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  // The kernels read q, k, v and write y through strides: bshd is bhsd views.
  const bool bshd = is_bshd(ctx.attrs);
  auto view = [&](const Tensor& t) { return bshd ? swap_sh(t) : t; };
  const Tensor y = view(out[0]);
  if (y.numel() == 0) return;
  const Tensor q = view(in[0]), k = view(in[1]), v = view(in[2]);
  size_t r = size_t(y.rank());
  std::vector<int64_t> batch(y.shape().begin(), y.shape().end() - 2);
  Geometry g{};
  g.sq = q.shape()[q.rank() - 2];
  g.sk = k.shape()[k.rank() - 2];
  g.d = q.shape()[q.rank() - 1];
  g.dv = v.shape()[v.rank() - 1];
  int64_t entries = 1;
  for (int64_t n : batch) entries *= n;
  g.rows = entries * g.sq;
  auto with = [&](std::vector<int64_t> s, int64_t a, int64_t b) {
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  Tensor qb = q.broadcast_to(with(batch, g.sq, g.d)), kb = k.broadcast_to(with(batch, g.sk, g.d)),
         vb = v.broadcast_to(with(batch, g.sk, g.dv));
  Tensor bb = in.size() > 3 ? in[3].broadcast_to(with(batch, g.sq, g.sk)) : Tensor();
  g.q_row = qb.strides()[r - 2];
  g.k_row = kb.strides()[r - 2];
  g.v_row = vb.strides()[r - 2];
  g.o_row = y.strides()[r - 2];
  std::vector<int64_t> zeros(r, 0);
  const std::vector<int64_t>& bs = bb.defined() ? bb.strides() : zeros;
  g.b_row = bs[r - 2];
  g.b_col = bs[r - 1];
  auto lead = [&](const std::vector<int64_t>& s) {
    return std::vector<int64_t>(s.begin(), s.end() - 2);
  };
  auto ys = lead(y.strides()), qs = lead(qb.strides()), ks = lead(kb.strides()),
       vs = lead(vb.strides()), bsl = lead(bs);
  g.batch = make_indexer<5>(batch, {&ys, &qs, &ks, &vs, &bsl});
  double scale = ctx.attrs.get_float("scale");
  g.scale = scale > 0 ? scale : 1.0 / std::sqrt(double(g.d));
  const std::string& mask = ctx.attrs.get_string("mask");
  g.causal = mask != "none";
  g.window = mask == "sliding_window" ? ctx.attrs.get_int("window") : 0;
  cudaStream_t s = stream_of(ctx);
  constexpr int kWarps = kThreads / 32;
  int grid = int(std::min<int64_t>((g.rows + kWarps - 1) / kWarps, int64_t(sm_count()) * 32));
  float* lse = out.size() > 1 ? static_cast<float*>(out[1].data()) : nullptr;  // attention_lse
  visit(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto p = [](const Tensor& t) {
        return t.defined() ? static_cast<const T*>(t.data()) : nullptr;
      };
      // cuDNN's flash attention (wgmma) where it takes the problem.
      if constexpr (is_half_v<T>)
        if (cudnn_attention(qb, kb, vb, bb.defined() ? &bb : nullptr, y, lse, g.scale, g.causal,
                            g.window, s))
          return;
      if constexpr (is_half_v<T> || std::is_same_v<T, float>) {
        if (flash_fits(qb, kb, vb, g)) {
          flash::Params fp{qb.data(),
                           kb.data(),
                           vb.data(),
                           bb.defined() ? bb.data() : nullptr,
                           y.data(),
                           g.sq,
                           g.sk,
                           entries,
                           g.q_row,
                           g.k_row,
                           g.v_row,
                           g.b_row,
                           g.b_col,
                           g.batch,
                           float(g.scale * 1.4426950408889634),
                           g.window,
                           g.causal};
          fp.o_row = g.o_row;
          fp.row_lse = lse;
          if (g.d == 64)
            flash::launch<T, 64>(fp, s);
          else if constexpr (is_half_v<T>)
            flash::launch<T, 128>(fp, s);
          return;
        }
      }
      if (std::max(g.d, g.dv) <= 128)
        attention_rows<T, 4><<<grid, kThreads, 0, s>>>(p(qb), p(kb), p(vb), p(bb),
                                                       static_cast<T*>(y.data()), lse, g);
      else
        attention_rows<T, kMaxPer><<<grid, kThreads, 0, s>>>(p(qb), p(kb), p(vb), p(bb),
                                                             static_cast<T*>(y.data()), lse, g);
    }
  });
  RLX_CUDA_LAUNCHED("attention");
}

bool fits(const KernelQuery& q) {
  if (!is_float(q.inputs[0].dtype)) return false;
  const Shape &qs = q.inputs[0].shape, &vs = q.inputs[2].shape;
  const Dim &d = qs.back(), &dv = vs.back();
  return d.is_static() && dv.is_static() && d.value() <= 32 * kMaxPer && dv.value() <= 32 * kMaxPer;
}

// Where attention_grad runs the tensor-core passes (f16 / bf16, head dim 64), which can
// take the forward's statistics: only there is attention_lse worth a kernel.
bool half64(const KernelQuery& q) {
  DType t = q.inputs[0].dtype;
  const Dim &d = q.inputs[0].shape.back(), &dv = q.inputs[2].shape.back();
  return (t == DType::f16 || t == DType::bf16) && d.is(64) && dv.is(64);
}

// ---- attention_grad -------------------------------------------------------------------
// The backward without a bias. f16 / bf16 with head dim 64 take the tensor-core passes of
// flash_grad.cuh. Otherwise FlashAttention's equations over stored scores: per chunk of
// batch entries, S = q kᵀ (f32), P = softmax(masked S * scale) (stored in T), dv = Pᵀ dy,
// dP = dy vᵀ (f32, over S), dS = P (dP - rowsum(P dP)) (over P), dq = scale dS k,
// dk = scale dSᵀ q. Five cuBLASLt GEMMs and two row kernels; no mask tensor is built.

// Which keys query i sees: [lo, hi).
struct Visible {
  int64_t sq, sk, window;
  bool causal;
  __device__ void range(int64_t i, int64_t& lo, int64_t& hi) const {
    int64_t p = i + sk - sq;
    lo = 0;
    hi = sk;
    if (!causal) return;
    hi = p + 1 < sk ? (p + 1 > 0 ? p + 1 : 0) : sk;
    if (window) lo = p - window + 1 > 0 ? p - window + 1 : 0;
  }
};

// P = softmax over the visible keys of s * scale (scale2 = scale * log2(e)), 0 elsewhere;
// one warp per row.
template <class T>
__global__ void probs_rows(const float* s, T* p, int64_t rows, float scale2, Visible vis) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows;
       row += warps) {
    const float* sr = s + row * vis.sk;
    T* pr = p + row * vis.sk;
    int64_t lo, hi;
    vis.range(row % vis.sq, lo, hi);
    float m = -::cuda::std::numeric_limits<float>::infinity();
    for (int64_t j = lo + lane; j < hi; j += 32) m = fmaxf(m, sr[j] * scale2);
    for (int d = 16; d > 0; d /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    float l = 0;
    for (int64_t j = lo + lane; j < hi; j += 32) l += exp2f(sr[j] * scale2 - m);
    for (int d = 16; d > 0; d /= 2) l += __shfl_xor_sync(0xffffffffu, l, d);
    float inv = l > 0 && isfinite(m) ? 1.0f / l : 0.0f;
    for (int64_t j = lane; j < vis.sk; j += 32)
      pr[j] = store<T>(j >= lo && j < hi ? exp2f(sr[j] * scale2 - m) * inv : 0.0f);
  }
}

// dS = P (dP - rowsum(P dP)), written over P; one warp per row.
template <class T>
__global__ void dscores_rows(const float* dp, T* p, int64_t rows, int64_t sk) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows;
       row += warps) {
    const float* dr = dp + row * sk;
    T* pr = p + row * sk;
    float sum = 0;
    for (int64_t j = lane; j < sk; j += 32) sum += float(load(pr[j])) * dr[j];
    for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    for (int64_t j = lane; j < sk; j += 32) {
      float pj = float(load(pr[j]));
      pr[j] = store<T>(pj * (dr[j] - sum));
    }
  }
}

// x broadcast to `shape`, contiguous (a copy only when it is not already).
Tensor dense(const Tensor& x, const std::vector<int64_t>& shape, cudaStream_t s) {
  Tensor b = x.broadcast_to(shape);
  if (b.is_contiguous()) return b;
  Tensor c = Tensor::empty(x.dtype(), shape, x.device());
  copy_strided(b, c, s);
  return c;
}

// The statistics flash_grad.cuh reads, from attention_lse's outputs instead of a second
// forward: per row delta = rowsum(dy * y) and the log-sum-exp in the log2 domain. A warp
// a row of [entries / heads, s, heads, 64] tensors (entry e = b * heads + h).
template <class T>
__global__ void saved_stats(const T* dy, const T* y, const float* lse, float* lse2, float* delta,
                            int64_t rows, int64_t sq, int64_t heads) {
  int lane = threadIdx.x % 32;
  int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  int64_t e = row / sq, i = row - e * sq, h = e % heads;
  int64_t at = ((e - h) * sq + i * heads + h) * 64 + 2 * lane;
  float dot =
      float(load(dy[at])) * float(load(y[at])) + float(load(dy[at + 1])) * float(load(y[at + 1]));
  for (int w = 16; w > 0; w /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, w);
  if (lane == 0) {
    delta[row] = dot;
    lse2[row] = lse[row] * 1.4426950408889634f;  // +inf stays +inf
  }
}

// The tensor-core passes (flash_grad.cuh) on [entries / heads, s, heads, 64] tensors with
// rows ld apart: dense [entries, s, 64] (heads 1, ld 64) or bshd. y and lse (both or
// neither): attention_lse's outputs, read instead of running the forward again.
void flash_grad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dy,
                const Tensor& dq, const Tensor& dk, const Tensor& dv, int64_t entries,
                int64_t heads, float scale, const Visible& vis, cudaStream_t s,
                const Tensor* y = nullptr, const Tensor* saved_lse = nullptr) {
  const int64_t sq = vis.sq, sk = vis.sk, d = 64, ld = heads * d;
  Tensor lse = Tensor::empty(DType::f32, {entries, sq}, q.device());
  Tensor delta = Tensor::empty(DType::f32, {entries, sq}, q.device());
  const std::vector<int64_t> q_at{sq * ld, d}, k_at{sk * ld, d}, none{0, 0};
  flash::Params fp{q.data(),
                   k.data(),
                   v.data(),
                   nullptr,
                   nullptr,
                   sq,
                   sk,
                   entries,
                   ld,
                   ld,
                   ld,
                   0,
                   0,
                   make_indexer<5>({entries / heads, heads}, {&q_at, &q_at, &k_at, &k_at, &none}),
                   float(scale * 1.4426950408889634),
                   vis.window,
                   vis.causal};
  fp.lse = static_cast<float*>(lse.data());
  fp.delta = static_cast<float*>(delta.data());
  fp.dy = dy.data();
  fp.o_row = ld;
  flash::GradParams gp{q.data(),  k.data(),      v.data(),   dy.data(), dq.data(), dk.data(),
                       dv.data(), fp.lse,        fp.delta,   sq,        sk,        entries,
                       scale,     fp.scale_log2, vis.window, vis.causal};
  gp.heads = heads;
  gp.ld = ld;
  visit(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_half_v<T>) {
      if (y) {
        int64_t rows = entries * sq;
        saved_stats<T><<<unsigned((rows + 7) / 8), 256, 0, s>>>(
            static_cast<const T*>(dy.data()), static_cast<const T*>(y->data()),
            static_cast<const float*>(saved_lse->data()), fp.lse, fp.delta, rows, sq, heads);
      } else {
        flash::launch<T, 64>(fp, s);
      }
      flash::launch_grad<T, 64>(gp, s);
    }
  });
}

void attention_grad_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                           std::span<Tensor> out) {
  cudaStream_t s = stream_of(ctx);
  const bool bshd = is_bshd(ctx.attrs);
  auto view = [&](const Tensor& t) { return bshd ? swap_sh(t) : t; };
  const Tensor q = view(in[0]), k = view(in[1]), v = view(in[2]), dy = view(in[3]);
  const Tensor y0 = view(out[0]);
  std::vector<int64_t> batch(y0.shape().begin(), y0.shape().end() - 2);
  int64_t sq = q.shape()[q.rank() - 2], sk = k.shape()[k.rank() - 2];
  int64_t d = q.shape().back(), dv = v.shape().back(), entries = 1;
  for (int64_t n : batch) entries *= n;
  if (entries == 0) return;
  if (sq == 0 || sk == 0) {  // no query or no key: nothing flows back
    for (Tensor& t : out) fill(t, 0, s);
    return;
  }
  double scale = ctx.attrs.get_float("scale");
  if (scale <= 0) scale = 1.0 / std::sqrt(double(d));
  const std::string& mask = ctx.attrs.get_string("mask");
  Visible vis{sq, sk, mask == "sliding_window" ? ctx.attrs.get_int("window") : 0, mask != "none"};
  const bool half = q.dtype() == DType::f16 || q.dtype() == DType::bf16;
  auto aligned = [](std::initializer_list<const Tensor*> ts) {
    bool ok = true;
    for (const Tensor* t : ts) ok = ok && reinterpret_cast<uintptr_t>(t->data()) % 16 == 0;
    return ok;
  };
  // attention_lse's output and statistics, where given (and laid out as the passes read).
  const bool saved =
      in.size() == 6 && in[5].is_contiguous() && in[4].is_contiguous() && aligned({&in[4]});
  const Tensor* y_in = saved ? &in[4] : nullptr;
  const Tensor* lse_in = saved ? &in[5] : nullptr;
  // cuDNN's fused backward where it takes the problem (f16 / bf16).
  if (half && in.size() == 6 &&
      cudnn_attention_grad(q, k, v, view(in[4]), dy, in[5], view(out[0]), view(out[1]),
                           view(out[2]), scale, vis.causal, vis.window, s))
    return;
  // bshd read in place: [b, s, h, 64] everywhere, nothing broadcast.
  if (bshd && half && d == 64 && dv == 64 && in[0].rank() == 4 &&
      aligned({&in[0], &in[1], &in[2], &in[3], &out[0], &out[1], &out[2]})) {
    bool same = true;
    for (const Tensor* t : {&in[0], &in[3]}) same = same && t->shape() == out[0].shape();
    for (const Tensor* t : {&in[1], &in[2]}) same = same && t->shape() == out[1].shape();
    if (same) {
      flash_grad(in[0], in[1], in[2], in[3], out[0], out[1], out[2], entries, out[0].shape()[2],
                 float(scale), vis, s, y_in, lse_in);
      return;
    }
  }
  auto flat = [&](const Tensor& x, int64_t rows, int64_t cols) {
    std::vector<int64_t> shape = batch;
    shape.insert(shape.end(), {rows, cols});
    return dense(x, shape, s).reshape({entries, rows, cols});
  };
  Tensor q3 = flat(q, sq, d), k3 = flat(k, sk, d), v3 = flat(v, sk, dv), dy3 = flat(dy, sq, dv);
  // The outputs dense [entries, s, d]: bshd ones through a bhsd copy, stored at the end.
  std::vector<Tensor> dense_out;
  for (Tensor& o : out) {
    Tensor b = view(o);
    dense_out.push_back(bshd ? Tensor::empty(b.dtype(), b.shape(), b.device()) : o);
  }
  Tensor dq3 = dense_out[0].reshape({entries, sq, d}), dk3 = dense_out[1].reshape({entries, sk, d}),
         dv3 = dense_out[2].reshape({entries, sk, dv});
  auto store_out = [&] {
    if (bshd)
      for (size_t i = 0; i < 3; ++i) copy_strided(dense_out[i], view(out[i]), s);
  };
  if (half && d == 64 && dv == 64 && aligned({&q3, &k3, &v3, &dy3, &dq3, &dk3, &dv3})) {
    Tensor y3 = saved ? flat(view(*y_in), sq, dv) : Tensor();
    flash_grad(q3, k3, v3, dy3, dq3, dk3, dv3, entries, 1, float(scale), vis, s,
               saved ? &y3 : nullptr, lse_in);
    return store_out();
  }
  // Scores of up to 512 MiB at a time.
  int64_t per_entry = sq * sk * int64_t(sizeof(float) + dtype_size(q.dtype()));
  int64_t chunk = std::clamp<int64_t>((int64_t(512) << 20) / per_entry, 1, entries);
  Tensor scores = Tensor::empty(DType::f32, {chunk, sq, sk}, q.device());
  Tensor probs = Tensor::empty(q.dtype(), {chunk, sq, sk}, q.device());
  constexpr int kWarps = kThreads / 32;
  visit(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_half_v<T> || std::is_same_v<T, float>) {
      for (int64_t e0 = 0; e0 < entries; e0 += chunk) {
        int64_t n = std::min(chunk, entries - e0);
        auto part = [&](const Tensor& t) { return t.slice(0, e0, e0 + n); };
        Tensor sc = scores.slice(0, 0, n), pc = probs.slice(0, 0, n);
        auto sp = static_cast<float*>(sc.data());
        auto pp = static_cast<T*>(pc.data());
        int64_t rows = n * sq;
        int grid = int(std::min<int64_t>((rows + kWarps - 1) / kWarps, int64_t(sm_count()) * 32));
        batched_gemm(part(q3), false, part(k3), true, sc, 1.0, s);
        probs_rows<T>
            <<<grid, kThreads, 0, s>>>(sp, pp, rows, float(scale * 1.4426950408889634), vis);
        batched_gemm(pc, true, part(dy3), false, part(dv3), 1.0, s);
        batched_gemm(part(dy3), false, part(v3), true, sc, 1.0, s);
        dscores_rows<T><<<grid, kThreads, 0, s>>>(sp, pp, rows, sk);
        batched_gemm(pc, false, part(k3), false, part(dq3), scale, s);
        batched_gemm(pc, true, part(q3), false, part(dk3), scale, s);
      }
    }
  });
  store_out();
  RLX_CUDA_LAUNCHED("attention_grad");
}

bool grad_fits(const KernelQuery& q) {
  DType t = q.inputs[0].dtype;
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16) return false;
  const Dim &d = q.inputs[0].shape.back(), &dv = q.inputs[2].shape.back();
  return d.is_static() && dv.is_static() && d.value() > 0 && dv.value() > 0;
}

}  // namespace

void register_attention(KernelRegistry& r) {
  add_kernel(r, "attention", attention_kernel, fits);
  add_kernel(r, "attention_lse", attention_kernel, half64);
  add_kernel(r, "attention_grad", attention_grad_kernel, grad_fits);
}

}  // namespace rlx::cuda
