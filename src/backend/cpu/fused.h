// What the fused kernels (fused.cpp) share with the matmul (linalg.cpp) and conv
// (conv.cpp) kernels: the activations, applied in place as an epilogue, and entry points
// into the existing matmul and conv paths.
#pragma once

#include <cmath>
#include <limits>
#include <span>
#include <string_view>

#ifdef RLX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/elementwise_ops.h"
#include "backend/cpu/isa.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

// The `activation` attribute of the fused ops.
enum class Act : uint8_t { none, relu, relu6, gelu, gelu_tanh, silu, sigmoid, tanh, hard_swish };
Act parse_act(std::string_view name);  // NotSupported for an unknown name

// The activations exactly as the core elementwise ops compute them (elementwise.cpp):
// the same formulas over the same f32 fast math (f64: libm), so a fused op agrees with
// its unfused form to the bit in f32 and f64.
namespace act {

inline float sigmoid(float x) { return fm::sigmoid(x); }
inline double sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  return x < 0 ? e / (1 + e) : 1 / (1 + e);
}
inline float tanh(float x) { return fm::tanh(x); }
inline double tanh(double x) { return std::tanh(x); }
inline float erf(float x) { return fm::erf(x); }
inline double erf(double x) { return std::erf(x); }

template <class C>
constexpr C kNegInf = -std::numeric_limits<C>::infinity();

struct Identity {
  template <class C>
  C operator()(C x) const {
    return x;
  }
};
struct Relu {
  template <class C>
  C operator()(C x) const {
    return x < C(0) ? C(0) : x;  // NaN passes through
  }
};
struct Tanh {
  template <class C>
  C operator()(C x) const {
    return tanh(x);
  }
};
// min(max(x, 0), 6); NaN stays NaN, as clamp keeps it.
struct Relu6 {
  template <class C>
  C operator()(C x) const {
    return x < C(0) ? C(0) : x > C(6) ? C(6) : x;
  }
};
struct Sigmoid {
  template <class C>
  C operator()(C x) const {
    return sigmoid(x);
  }
};
// silu and gelu at -inf give -0 (their limit; x * sigmoid(x) would give NaN).
struct Silu {
  template <class C>
  C operator()(C x) const {
    return x == kNegInf<C> ? C(-0.0) : x * sigmoid(x);
  }
};
struct GeluErf {
  template <class C>
  C operator()(C x) const {
    return x == kNegInf<C> ? C(-0.0) : C(0.5) * x * (C(1) + erf(x * C(0.70710678118654752440)));
  }
};
struct GeluTanh {  // 0.5 (1 + tanh u) = sigmoid(2u)
  template <class C>
  C operator()(C x) const {
    return x == kNegInf<C>
               ? C(-0.0)
               : x * sigmoid(C(2 * 0.79788456080286535588) * (x + C(0.044715) * x * x * x));
  }
};

// x * hard_sigmoid(x) with alpha 1/6, beta 1/2, as those two core ops compute it.
struct HardSwish {
  template <class C>
  C operator()(C x) const {
    return x * ewop::HardSigmoid{1.0 / 6, 0.5}(x);
  }
};

// Calls f(functor) for the activation.
template <class F>
void visit(Act a, F&& f) {
  switch (a) {
    case Act::none:
      return f(Identity{});
    case Act::relu:
      return f(Relu{});
    case Act::relu6:
      return f(Relu6{});
    case Act::gelu:
      return f(GeluErf{});
    case Act::gelu_tanh:
      return f(GeluTanh{});
    case Act::silu:
      return f(Silu{});
    case Act::sigmoid:
      return f(Sigmoid{});
    case Act::tanh:
      return f(Tanh{});
    case Act::hard_swish:
      return f(HardSwish{});
  }
}

}  // namespace act

// y = act(y + bias) in place, over a contiguous float tensor y; bias (optional, any
// strides, same dtype) broadcasts onto y. f16 / bf16 compute in f32.
void epilogue(Tensor& y, const Tensor* bias, Act a);

// A bias (f32, one value per output column, contiguous; may be null) and an activation
// for the GEMM to apply as oneDNN post-ops.
struct MatmulEpilogue {
  const float* bias = nullptr;
  Act act = Act::none;
};

// out = a @ b with NumPy matmul semantics over strided views (linalg.cpp): a transposed
// view reaches BLAS as a transpose flag, not a copy. out is contiguous, of the product's
// shape. Returns true when `post` (f32 only) was applied too, which happens where the
// product runs as oneDNN's matmul primitive; otherwise the caller applies it.
bool matmul_into(const Tensor& a, const Tensor& b, Tensor& out,
                 const MatmulEpilogue* post = nullptr);

#ifdef RLX_HAVE_DNNL
// Appends the activation as a oneDNN eltwise post-op (silu is swish with alpha 1).
void append_eltwise(dnnl::post_ops& po, Act act);
#endif

// The conv (transpose = false) or conv_transpose kernel with an activation after it: a
// oneDNN post-op where oneDNN runs the conv, else an in-place epilogue (conv.cpp).
// `in_act` is applied to the input (fused_conv's input_activation) as the kernel reads it.
void conv_forward(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out,
                  bool transpose, Act act, Act in_act);

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
