// The complex family's kernels (ops/complex.cpp): complex(re, im), real, imag, conj, angle, with
// broadcasting and strided inputs through elementwise_loops.h.
#include <cmath>
#include <complex>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_loops.h"
#include "backend/cpu/families.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// f(tag) with the real type R of a complex or real dtype: float for c64 / f32, double for
// c128 / f64.
template <class F>
void by_precision(DType t, F&& f) {
  if (t == DType::c128 || t == DType::f64)
    f(Tag<double>{});
  else
    f(Tag<float>{});
}

void complex_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  by_precision(in[0].dtype(), [&](auto tag) {
    using R = typename decltype(tag)::type;
    ew::binary_loop<R, std::complex<R>>(in[0], in[1], out[0],
                                        [](R re, R im) { return std::complex<R>(re, im); });
  });
}

template <int kPart>  // 0: real, 1: imag
void part_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  by_precision(in[0].dtype(), [&](auto tag) {
    using R = typename decltype(tag)::type;
    ew::unary_loop<std::complex<R>, R>(
        in[0], out[0], [](std::complex<R> z) { return kPart == 0 ? z.real() : z.imag(); });
  });
}

void conj_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  by_precision(in[0].dtype(), [&](auto tag) {
    using R = typename decltype(tag)::type;
    ew::unary_loop<std::complex<R>, std::complex<R>>(
        in[0], out[0], [](std::complex<R> z) { return std::conj(z); });
  });
}

void angle_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  if (!is_complex(in[0].dtype())) {  // NumPy's atan2(0, x): pi for x < 0 and -0.0
    visit_float(in[0].dtype(), "angle", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      ew::unary_loop<T, T>(in[0], out[0], [](C x) { return std::atan2(C(0), x); });
    });
    return;
  }
  by_precision(in[0].dtype(), [&](auto tag) {
    using R = typename decltype(tag)::type;
    ew::unary_loop<std::complex<R>, R>(in[0], out[0],
                                       [](std::complex<R> z) { return std::arg(z); });
  });
}

}  // namespace

void register_complex(KernelRegistry& r) {
  add_kernel(r, "complex", complex_kernel, dtype_in(kFloat));
  add_kernel(r, "real", part_kernel<0>, dtype_in(kComplex));
  add_kernel(r, "imag", part_kernel<1>, dtype_in(kComplex));
  add_kernel(r, "conj", conj_kernel, dtype_in(kComplex));
  add_kernel(r, "angle", angle_kernel, dtype_in(kComplex | kFloat));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
