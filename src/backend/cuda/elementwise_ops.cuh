// The elementwise ops as device functors over compute types (f16 / bf16 in float), with
// the CPU's semantics exactly (backend/cpu/elementwise_ops.h says what they are: integer
// ops wrap, integer division by zero gives 0, max / min propagate NaN and order -0 below
// +0, round is half to even, casts from float saturate and send NaN to 0).
#pragma once

#include <cuda/std/limits>

#include "backend/cuda/kernels.cuh"

namespace rlx::cuda::ewop {

template <class C>
constexpr bool is_fp = std::is_floating_point_v<C>;

template <class T>
using wide_u = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
template <class T>
__device__ __forceinline__ T wrap_add(T a, T b) {
  return T(wide_u<T>(a) + wide_u<T>(b));
}
template <class T>
__device__ __forceinline__ T wrap_sub(T a, T b) {
  return T(wide_u<T>(a) - wide_u<T>(b));
}
template <class T>
__device__ __forceinline__ T wrap_mul(T a, T b) {
  return T(wide_u<T>(a) * wide_u<T>(b));
}

// Float and double overloads, so a float never goes through the double routine.
#define RLX_MATH1(name, f, d)                                     \
  __device__ __forceinline__ float name(float x) { return f(x); } \
  __device__ __forceinline__ double name(double x) { return d(x); }
RLX_MATH1(m_exp, expf, exp)
RLX_MATH1(m_expm1, expm1f, expm1)
RLX_MATH1(m_log, logf, log)
RLX_MATH1(m_log1p, log1pf, log1p)
RLX_MATH1(m_sqrt, sqrtf, sqrt)
RLX_MATH1(m_rsqrt, rsqrtf, rsqrt)
RLX_MATH1(m_sin, sinf, sin)
RLX_MATH1(m_cos, cosf, cos)
RLX_MATH1(m_tan, tanf, tan)
RLX_MATH1(m_tanh, tanhf, tanh)
RLX_MATH1(m_erf, erff, erf)
RLX_MATH1(m_floor, floorf, floor)
RLX_MATH1(m_ceil, ceilf, ceil)
RLX_MATH1(m_rint, rintf, rint)
RLX_MATH1(m_fabs, fabsf, fabs)
#undef RLX_MATH1
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float m_atan2(float a, float b) { return atan2f(a, b); }
__device__ __forceinline__ double m_atan2(double a, double b) { return atan2(a, b); }
__device__ __forceinline__ float m_copysign(float a, float b) { return copysignf(a, b); }
__device__ __forceinline__ double m_copysign(double a, double b) { return copysign(a, b); }

template <class C>
__device__ __forceinline__ C m_sigmoid(C x) {
  C e = m_exp(-m_fabs(x));
  return x < C(0) ? e / (C(1) + e) : C(1) / (C(1) + e);
}
template <class C>
__device__ __forceinline__ C neg_inf() {
  return -::cuda::std::numeric_limits<C>::infinity();
}

// --- unary -------------------------------------------------------------------------------

#define RLX_UNARY(Name, dtypes, body)                       \
  struct Name {                                             \
    static constexpr unsigned set = dtypes;                 \
    template <class C>                                      \
    __device__ __forceinline__ auto operator()(C x) const { \
      body                                                  \
    }                                                       \
  };

RLX_UNARY(Neg, kNumeric, if constexpr (is_fp<C>) return -x; else return wrap_sub(C(0), x);)
RLX_UNARY(Abs, kNumeric, if constexpr (is_fp<C>) return m_fabs(x);
          else if constexpr (std::is_signed_v<C>) return x < 0 ? wrap_sub(C(0), x) : x;
          else return x;)
RLX_UNARY(Sign, kNumeric, if constexpr (std::is_unsigned_v<C>) return x > 0 ? C(1) : C(0);
          else return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);)
RLX_UNARY(Square, kNumeric, if constexpr (is_fp<C>) return x * x; else return wrap_mul(x, x);)
RLX_UNARY(Relu, kFloat | kInt, if constexpr (std::is_unsigned_v<C>) return x;
          else return x < C(0) ? C(0) : x;)
RLX_UNARY(Exp, kFloat, return m_exp(x);)
RLX_UNARY(Expm1, kFloat, return m_expm1(x);)
RLX_UNARY(Log, kFloat, return m_log(x);)
RLX_UNARY(Log1p, kFloat, return m_log1p(x);)
RLX_UNARY(Sqrt, kFloat, return m_sqrt(x);)
RLX_UNARY(Rsqrt, kFloat, return m_rsqrt(x);)
RLX_UNARY(Reciprocal, kFloat, return C(1) / x;)
RLX_UNARY(Sin, kFloat, return m_sin(x);)
RLX_UNARY(Cos, kFloat, return m_cos(x);)
RLX_UNARY(Tan, kFloat, return m_tan(x);)
RLX_UNARY(Tanh, kFloat, return m_tanh(x);)
RLX_UNARY(Sigmoid, kFloat, return m_sigmoid(x);)
RLX_UNARY(Erf, kFloat, return m_erf(x);)
RLX_UNARY(Floor, kFloat, return m_floor(x);)
RLX_UNARY(Ceil, kFloat, return m_ceil(x);)
RLX_UNARY(Round, kFloat, return m_rint(x);)
RLX_UNARY(Softplus, kFloat, return (x > C(0) ? x : C(0)) + m_log1p(m_exp(-m_fabs(x)));)
RLX_UNARY(Silu, kFloat, return x == neg_inf<C>() ? C(-0.0) : x * m_sigmoid(x);)
RLX_UNARY(GeluErf, kFloat,
          return x == neg_inf<C>() ? C(-0.0)
                                   : C(0.5) * x * (C(1) + m_erf(x * C(0.70710678118654752440)));)
RLX_UNARY(GeluTanh, kFloat,
          return x == neg_inf<C>() ? C(-0.0)
                                   : x * m_sigmoid(C(2 * 0.79788456080286535588) *
                                                   (x + C(0.044715) * x * x * x));)
RLX_UNARY(LogicalNot, kBool, return bool(x == 0);)
RLX_UNARY(IsNan, kFloat, return bool(x != x);)
RLX_UNARY(IsInf, kFloat, return bool(m_fabs(x) == ::cuda::std::numeric_limits<C>::infinity());)
#undef RLX_UNARY

struct Elu {
  static constexpr unsigned set = kFloat;
  double alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * m_expm1(x);
  }
};
struct LeakyRelu {
  static constexpr unsigned set = kFloat;
  double alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * x;
  }
};
struct HardSigmoid {
  static constexpr unsigned set = kFloat;
  double alpha, beta;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    C v = C(alpha) * x + C(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};

// --- binary ------------------------------------------------------------------------------

#define RLX_BINARY(Name, dtypes, body)                           \
  struct Name {                                                  \
    static constexpr unsigned set = dtypes;                      \
    template <class C>                                           \
    __device__ __forceinline__ auto operator()(C a, C b) const { \
      body                                                       \
    }                                                            \
  };

RLX_BINARY(Add, kNumeric, if constexpr (is_fp<C>) return a + b; else return wrap_add(a, b);)
RLX_BINARY(Sub, kNumeric, if constexpr (is_fp<C>) return a - b; else return wrap_sub(a, b);)
RLX_BINARY(Mul, kNumeric, if constexpr (is_fp<C>) return a * b; else return wrap_mul(a, b);)
RLX_BINARY(Div, kNumeric, if constexpr (is_fp<C>) return a / b;
           else if constexpr (std::is_signed_v<C>) return b == 0
               ? C(0)
               : (b == -1 ? wrap_sub(C(0), a) : C(a / b));
           else return b == 0 ? C(0) : C(a / b);)
RLX_BINARY(
    Max, kNumeric,
    if constexpr (is_fp<C>) {
      C r = a > b ? a : b;
      r = a == b ? (signbit(a) ? b : a) : r;
      return a != a || b != b ? a + b : r;
    } else return a > b
        ? a
        : b;)
RLX_BINARY(
    Min, kNumeric,
    if constexpr (is_fp<C>) {
      C r = a < b ? a : b;
      r = a == b ? (signbit(a) ? a : b) : r;
      return a != a || b != b ? a + b : r;
    } else return a < b
        ? a
        : b;)
RLX_BINARY(
    Mod, kNumeric,
    if constexpr (is_fp<C>) {
      C r = m_fmod(a, b);
      if (r != 0) return (r < 0) != (b < 0) ? r + b : r;
      return m_copysign(C(0), b);
    } else if constexpr (std::is_signed_v<C>) {
      if (b == 0 || b == -1) return C(0);
      C r = C(a % b);
      return r != 0 && ((r < 0) != (b < 0)) ? C(r + b) : r;
    } else return b == 0
        ? C(0)
        : C(a % b);)
RLX_BINARY(Fmod, kNumeric, if constexpr (is_fp<C>) return m_fmod(a, b);
           else if constexpr (std::is_signed_v<C>) return b == 0 || b == -1 ? C(0) : C(a % b);
           else return b == 0 ? C(0) : C(a % b);)
RLX_BINARY(Atan2, kFloat, return m_atan2(a, b);)
RLX_BINARY(LogicalAnd, kBool, return bool(a != 0 && b != 0);)
RLX_BINARY(LogicalOr, kBool, return bool(a != 0 || b != 0);)
RLX_BINARY(LogicalXor, kBool, return bool((a != 0) != (b != 0));)
RLX_BINARY(BitAnd, kInt | kBool, return C(a & b);)
RLX_BINARY(BitOr, kInt | kBool, return C(a | b);)
RLX_BINARY(BitXor, kInt | kBool, return C(a ^ b);)
RLX_BINARY(Eq, kAll, return bool(a == b);)
RLX_BINARY(Ne, kAll, return bool(a != b);)
RLX_BINARY(Lt, kAll, return bool(a < b);)
RLX_BINARY(Le, kAll, return bool(a <= b);)
RLX_BINARY(Gt, kAll, return bool(a > b);)
RLX_BINARY(Ge, kAll, return bool(a >= b);)
#undef RLX_BINARY

struct Pow {
  static constexpr unsigned set = kNumeric;
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (is_fp<C>) {
      return m_pow(a, b);
    } else {
      if constexpr (std::is_signed_v<C>) {
        if (b < 0) return a == 1 ? C(1) : (a == -1 ? C(b % 2 ? -1 : 1) : C(0));
      }
      C r = 1;
      for (C base = a; b; b = C(b >> 1), base = wrap_mul(base, base))
        if (b & 1) r = wrap_mul(r, base);
      return r;
    }
  }
};

// x (compute type C) converted to the compute type of storage U (see the CPU's convert).
template <class U, class C>
__device__ __forceinline__ auto convert(C x) {
  using R = compute_t<U>;
  if constexpr (std::is_same_v<U, bool>) {
    return bool(x != C(0));
  } else if constexpr (is_fp<R> || !is_fp<C>) {
    return R(x);
  } else {
    constexpr C lo = C(::cuda::std::numeric_limits<R>::min());
    constexpr C hi = C(::cuda::std::numeric_limits<R>::max());
    return x != x    ? R(0)
           : x <= lo ? ::cuda::std::numeric_limits<R>::min()
           : x >= hi ? ::cuda::std::numeric_limits<R>::max()
                     : R(x);
  }
}

}  // namespace rlx::cuda::ewop
