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

#include "backend/cuda/families.h"
#include "backend/cuda/flash.cuh"
#include "backend/cuda/kernels.cuh"

namespace rlx::gpu {

namespace {

constexpr int kMaxPer = 8;  // head dim up to 32 * 8

struct Geometry {
  int64_t rows, sq, sk, d, dv;  // rows: batch entries * sq
  int64_t q_row, k_row, v_row;  // row strides
  int64_t b_row, b_col;         // bias strides over (i, j), 0 when broadcast
  Indexer<5> batch;             // out, q, k, v, bias offsets per batch entry
  double scale;
  int64_t window;  // 0: no lower limit
  bool causal;
};

template <class T, int kPer>
__global__ void attention_rows(const T* q, const T* k, const T* v, const T* bias, T* out,
                               Geometry g) {
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
    C m = -cuda::std::numeric_limits<C>::infinity(), l = 0;
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
      if (s == -cuda::std::numeric_limits<C>::infinity()) continue;
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
    T* o = out + off[0] + i * g.dv;
    C inv = l > 0 ? C(1) / l : C(0);
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
  if (g.d != g.dv || (g.d != 64 && (f32 || g.d != 128))) return false;
  for (const Tensor* t : {&q, &k, &v}) {
    const auto& st = t->strides();
    size_t r = st.size();
    if (st[r - 1] != 1 || st[r - 2] % (16 / int64_t(dtype_size(t->dtype()))) != 0 ||
        reinterpret_cast<uintptr_t>(t->data()) % 16 != 0)
      return false;
  }
  return true;
}

void attention_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& y = out[0];
  if (y.numel() == 0) return;
  const Tensor &q = in[0], &k = in[1], &v = in[2];
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
  visit(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto p = [](const Tensor& t) {
        return t.defined() ? static_cast<const T*>(t.data()) : nullptr;
      };
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
          if (g.d == 64)
            flash::launch<T, 64>(fp, s);
          else if constexpr (is_half_v<T>)
            flash::launch<T, 128>(fp, s);
          return;
        }
      }
      if (std::max(g.d, g.dv) <= 128)
        attention_rows<T, 4>
            <<<grid, kThreads, 0, s>>>(p(qb), p(kb), p(vb), p(bb), static_cast<T*>(y.data()), g);
      else
        attention_rows<T, kMaxPer>
            <<<grid, kThreads, 0, s>>>(p(qb), p(kb), p(vb), p(bb), static_cast<T*>(y.data()), g);
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

}  // namespace

void register_attention(KernelRegistry& r) { add_kernel(r, "attention", attention_kernel, fits); }

}  // namespace rlx::gpu
