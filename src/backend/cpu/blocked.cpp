// to_blocked and from_blocked on the CPU (f32): [N, C, H, W] <-> [N, ceil(C/L), H, W, L] (L
// 8 or 16, the blocked tensor's last dim), the lanes past C written as zeros. conv_blocked runs in
// conv.cpp, beside the oneDNN machinery it shares with conv.
#include <algorithm>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"

namespace rlx::cpu {

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

}  // namespace

bool f32_in(const KernelQuery& q) { return !q.inputs.empty() && q.inputs[0].dtype == DType::f32; }

void register_blocked(KernelRegistry& r) {
  add_kernel(r, "to_blocked", to_blocked_kernel, f32_in);  // other dtypes: decomposed
  add_kernel(r, "from_blocked", from_blocked_kernel, f32_in);
}

}  // namespace rlx::cpu
