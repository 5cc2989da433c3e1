// to_blocked and from_blocked on the CPU (f32): [N, C, H, W] <-> [N, ceil(C/L), H, W, L] (L
// 8 or 16, the blocked tensor's last dim), the lanes past C written as zeros; max_pool_blocked
// on the blocked tensor. conv_blocked runs in conv.cpp, beside the oneDNN machinery it shares
// with conv.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/window.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

void to_blocked_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], hw = x.shape()[2] * x.shape()[3];
  const int64_t cb = y.shape()[1], width = y.shape()[4];
  const float* xp = x.data_as<float>();
  float* yp = y.data_as<float>();
  parallel_for(n * cb, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      int64_t img = p / cb, c0 = p % cb * width, lanes = std::min(width, c - c0);
      const float* src = xp + (img * c + c0) * hw;
      float* dst = yp + p * hw * width;
      for (int64_t i = 0; i < hw; ++i) {
        float* d = dst + i * width;
        for (int64_t j = 0; j < lanes; ++j) d[j] = src[j * hw + i];
        for (int64_t j = lanes; j < width; ++j) d[j] = 0.f;
      }
    }
  });
}

void from_blocked_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t n = y.shape()[0], c = y.shape()[1], hw = y.shape()[2] * y.shape()[3];
  const int64_t cb = x.shape()[1], width = x.shape()[4];
  const float* xp = x.data_as<float>();
  float* yp = y.data_as<float>();
  parallel_for(n * cb, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      int64_t img = p / cb, c0 = p % cb * width, lanes = std::min(width, c - c0);
      const float* src = xp + p * hw * width;
      float* dst = yp + (img * c + c0) * hw;
      for (int64_t j = 0; j < lanes; ++j)
        for (int64_t i = 0; i < hw; ++i) dst[j * hw + i] = src[i * width + j];
    }
  });
}

#if defined(__AVX__)  // else max_pool_blocked runs as its decomposition

// Each output pixel's L lanes are the max over its window's pixels inside the input: the
// L-float vectors of the blocked layout, one vector max per tap. NaN wins, as in max_pool:
// vmaxps keeps its second operand where either is NaN, so NaNs are tracked apart and put
// back at the end.
template <int L>
void max_pool_planes(const Window& w, const DimTaps& th, const DimTaps& tw, const float* x,
                     float* y, int64_t planes) {
  static_assert(L % 8 == 0);
  constexpr int V = L / 8;  // 8-float vectors per pixel
  const int64_t h = w.in[1], wi = w.in[2], oh = w.out[1], ow = w.out[2];
  parallel_for(planes * oh, std::max<int64_t>(1, 4096 / (ow * w.ker_size * L + 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t p = r / oh, o = r % oh;
                   const float* xp = x + p * h * wi * L;
                   float* yp = y + (p * oh + o) * ow * L;
                   for (int64_t q = 0; q < ow; ++q) {
                     __m256 m[V], nan[V];
                     for (int v = 0; v < V; ++v)
                       m[v] = _mm256_set1_ps(-std::numeric_limits<float>::infinity()),
                       nan[v] = _mm256_setzero_ps();
                     for (int64_t kh = th.first[size_t(o)]; kh < th.last[size_t(o)]; ++kh) {
                       const float* row = xp + (th.start[size_t(o)] + kh * w.dil[1]) * wi * L;
                       for (int64_t kw = tw.first[size_t(q)]; kw < tw.last[size_t(q)]; ++kw) {
                         const float* px = row + (tw.start[size_t(q)] + kw * w.dil[2]) * L;
                         for (int v = 0; v < V; ++v) {
                           const __m256 a = _mm256_loadu_ps(px + 8 * v);
                           m[v] = _mm256_max_ps(a, m[v]);
                           nan[v] = _mm256_or_ps(nan[v], _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
                         }
                       }
                     }
                     for (int v = 0; v < V; ++v)
                       _mm256_storeu_ps(yp + q * L + 8 * v,
                                        _mm256_blendv_ps(m[v], _mm256_set1_ps(NAN), nan[v]));
                   }
                 }
               });
}

void max_pool_blocked_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                             std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const auto& xs = x.shape();
  const auto& ys = y.shape();
  const int64_t lanes = xs[4];
  // The window on the logical [N, C, H, W] shapes (C does not enter it).
  const IntList& kernel = ctx.attrs.get_ints("kernel_shape");
  Window w = make_window(ctx.attrs, {xs[0], xs[1] * lanes, xs[2], xs[3]},
                         {ys[0], ys[1] * lanes, ys[2], ys[3]}, kernel);
  const DimTaps th = dim_taps(w, 1), tw = dim_taps(w, 2);
  const int64_t planes = xs[0] * xs[1];
  if (lanes == 8)
    max_pool_planes<8>(w, th, tw, x.data_as<float>(), y.data_as<float>(), planes);
  else
    max_pool_planes<16>(w, th, tw, x.data_as<float>(), y.data_as<float>(), planes);
}

#endif

}  // namespace

bool f32_in(const KernelQuery& q) { return !q.inputs.empty() && q.inputs[0].dtype == DType::f32; }

void register_blocked(KernelRegistry& r) {
  add_kernel(r, "to_blocked", to_blocked_kernel, f32_in);  // other dtypes: decomposed
  add_kernel(r, "from_blocked", from_blocked_kernel, f32_in);
#if defined(__AVX__)
  add_kernel(r, "max_pool_blocked", max_pool_blocked_kernel, f32_in);
#endif
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
