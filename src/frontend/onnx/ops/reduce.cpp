// onnx.det: the determinant of each trailing [M, M] matrix, by LU decomposition with
// partial pivoting (accumulated in double). No core op composes into it exactly.
#include "frontend/onnx/ops/reduce.h"

#include <cmath>
#include <mutex>
#include <utility>

#include "rlx/kernel.h"
#include "rlx/op.h"

namespace rlx::onnx_import {

namespace {

std::vector<TensorType> infer_det(const InferContext& ctx) {
  DType dt = ctx.dtype(0);
  if (dt != DType::f32 && dt != DType::f64)
    ctx.fail_type("expected an f32 or f64 input, got ", ctx.input(0).str());
  const Shape& s = ctx.shape(0);
  if (s.size() < 2) ctx.fail("expected square matrices [*, M, M], got ", ctx.input(0).str());
  const Dim &m = s[s.size() - 2], &n = s[s.size() - 1];
  if (m.is_static() && n.is_static() && m.value() != n.value())
    ctx.fail("expected square matrices [*, M, M], got ", ctx.input(0).str());
  return {{dt, Shape(s.begin(), s.end() - 2)}};
}

double lu_det(double* a, int64_t n) {
  double det = 1.0;
  for (int64_t k = 0; k < n; ++k) {
    int64_t piv = k;
    for (int64_t i = k + 1; i < n; ++i)
      if (std::abs(a[i * n + k]) > std::abs(a[piv * n + k])) piv = i;
    if (a[piv * n + k] == 0.0) return 0.0;
    if (piv != k) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[k * n + j], a[piv * n + j]);
      det = -det;
    }
    double d = a[k * n + k];
    det *= d;
    for (int64_t i = k + 1; i < n; ++i) {
      double f = a[i * n + k] / d;
      for (int64_t j = k + 1; j < n; ++j) a[i * n + j] -= f * a[k * n + j];
    }
  }
  return det;
}

template <class T>
void det_kernel(const Tensor& x, Tensor& y) {
  int64_t n = x.shape().back();
  int64_t count = y.numel();
  const T* src = x.data_as<T>();
  T* dst = y.data_as<T>();
  std::vector<double> a(size_t(n * n));
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < n * n; ++i) a[size_t(i)] = double(src[b * n * n + i]);
    dst[b] = T(lu_det(a.data(), n));
  }
}

}  // namespace

void register_reduce_onnx_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    OpDef d;
    d.name = "onnx.det";
    d.traits = Trait::nondifferentiable;
    d.arity(1);
    d.doc = "Determinant of each trailing [M, M] matrix of x (ONNX Det).";
    d.infer = infer_det;
    OpRegistry::global().add(std::move(d));
    KernelRegistry::global().add(
        "onnx.det", DeviceKind::cpu,
        [](const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
          if (in[0].dtype() == DType::f64)
            det_kernel<double>(in[0], out[0]);
          else
            det_kernel<float>(in[0], out[0]);
        });
  });
}

}  // namespace rlx::onnx_import
