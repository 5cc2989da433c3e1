// The elementwise ops as device functors over compute types (f16 / bf16 in float), with
// the CPU's semantics exactly (backend/cpu/elementwise_ops.h says what they are: integer
// ops wrap, integer division by zero gives 0, max / min propagate NaN and order -0 below
// +0, round is half to even). nvcc compiles them into the eager kernels (elementwise.cu)
// and NVRTC, as text, into every generated region kernel (region.cpp: the build embeds
// this file), so the two cannot disagree. NVRTC has no standard headers: this file includes
// none and writes out the few type traits it needs. A new op is a functor here and a row in
// elementwise_table.h.
#pragma once

namespace rlx::cuda::ewop {

template <class C>
inline constexpr bool is_fp = C(1) / C(2) != C(0);
template <>
inline constexpr bool is_fp<bool> = false;
template <class C>
inline constexpr bool is_signed = C(-1) < C(0);

// Integer ops wrap: computed in the unsigned type of the operands' width or wider.
template <int Bytes>
struct UintOf {
  using type = unsigned;
};
template <>
struct UintOf<8> {
  using type = unsigned long long;
};
template <class T>
using wide_u = typename UintOf<sizeof(T)>::type;
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
// The sign bit (-0 too), without signbit (a macro or a template by library).
template <class C>
__device__ __forceinline__ bool neg_sign(C x) {
  return m_copysign(C(1), x) < C(0);
}

template <class C>
__device__ __forceinline__ C inf();
template <>
__device__ __forceinline__ float inf<float>() {
  return __int_as_float(0x7f800000);
}
template <>
__device__ __forceinline__ double inf<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

// --- complex numbers (c64: Cx<float>, c128: Cx<double>) -----------------------------------
// The ops of elementwise_table.h's rows with kComplex, with the CPU's (std::complex)
// definitions: principal branches, Smith's division (no overflow from |b|^2).
// Aligned as CUDA's float2 / double2, so that an element is one load.
template <class R>
struct alignas(2 * sizeof(R)) Cx {
  R re, im;
  constexpr Cx(R r = R(0), R i = R(0)) : re(r), im(i) {}
};
template <class R>
inline constexpr bool is_fp<Cx<R>> = true;
template <class R>
__device__ __forceinline__ Cx<R> operator+(Cx<R> a, Cx<R> b) {
  return {a.re + b.re, a.im + b.im};
}
template <class R>
__device__ __forceinline__ Cx<R> operator-(Cx<R> a, Cx<R> b) {
  return {a.re - b.re, a.im - b.im};
}
template <class R>
__device__ __forceinline__ Cx<R> operator-(Cx<R> a) {
  return {-a.re, -a.im};
}
template <class R>
__device__ __forceinline__ Cx<R> operator*(Cx<R> a, Cx<R> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
template <class R>
__device__ __forceinline__ Cx<R> operator/(Cx<R> a, Cx<R> b) {
  if (m_fabs(b.re) >= m_fabs(b.im)) {
    const R r = b.im / b.re, d = b.re + b.im * r;
    return {(a.re + a.im * r) / d, (a.im - a.re * r) / d};
  }
  const R r = b.re / b.im, d = b.im + b.re * r;
  return {(a.re * r + a.im) / d, (a.im * r - a.re) / d};
}
template <class R>
__device__ __forceinline__ bool operator==(Cx<R> a, Cx<R> b) {
  return a.re == b.re && a.im == b.im;
}
template <class R>
__device__ __forceinline__ bool operator!=(Cx<R> a, Cx<R> b) {
  return !(a == b);
}
__device__ __forceinline__ float m_hypot(float a, float b) { return hypotf(a, b); }
__device__ __forceinline__ double m_hypot(double a, double b) { return hypot(a, b); }
__device__ __forceinline__ float m_sinh(float x) { return sinhf(x); }
__device__ __forceinline__ double m_sinh(double x) { return sinh(x); }
__device__ __forceinline__ float m_cosh(float x) { return coshf(x); }
__device__ __forceinline__ double m_cosh(double x) { return cosh(x); }
template <class R>
__device__ __forceinline__ Cx<R> m_exp(Cx<R> z) {
  const R e = m_exp(z.re);
  return {e * m_cos(z.im), e * m_sin(z.im)};
}
template <class R>
__device__ __forceinline__ Cx<R> m_log(Cx<R> z) {
  return {m_log(m_hypot(z.re, z.im)), m_atan2(z.im, z.re)};
}
template <class R>
__device__ __forceinline__ Cx<R> m_sqrt(Cx<R> z) {
  if (z.re == R(0) && z.im == R(0)) return {R(0), z.im};
  const R t = m_sqrt((m_fabs(z.re) + m_hypot(z.re, z.im)) / R(2));
  if (z.re >= R(0)) return {t, z.im / (R(2) * t)};
  return {m_fabs(z.im) / (R(2) * t), m_copysign(t, z.im)};
}
template <class R>
__device__ __forceinline__ Cx<R> m_rsqrt(Cx<R> z) {
  return Cx<R>(R(1)) / m_sqrt(z);
}
template <class R>
__device__ __forceinline__ Cx<R> m_sin(Cx<R> z) {
  return {m_sin(z.re) * m_cosh(z.im), m_cos(z.re) * m_sinh(z.im)};
}
template <class R>
__device__ __forceinline__ Cx<R> m_cos(Cx<R> z) {
  return {m_cos(z.re) * m_cosh(z.im), -m_sin(z.re) * m_sinh(z.im)};
}
// tanh(a + bi) = (sinh 2a + i sin 2b) / (cosh 2a + cos 2b); past |a| = 20 the real part is
// +-1 to the precision and the imaginary part 4 sin b cos b e^(-2|a|) (no overflow).
template <class R>
__device__ __forceinline__ Cx<R> m_tanh(Cx<R> z) {
  if (m_fabs(z.re) > R(20)) {
    const R e = m_exp(R(-2) * m_fabs(z.re));
    return {m_copysign(R(1), z.re), R(4) * m_sin(z.im) * m_cos(z.im) * e};
  }
  const R d = m_cosh(R(2) * z.re) + m_cos(R(2) * z.im);
  return {m_sinh(R(2) * z.re) / d, m_sin(R(2) * z.im) / d};
}
// tan z = -i tanh(i z).
template <class R>
__device__ __forceinline__ Cx<R> m_tan(Cx<R> z) {
  const Cx<R> t = m_tanh(Cx<R>(-z.im, z.re));
  return {t.im, -t.re};
}

template <class C>
__device__ __forceinline__ C m_sigmoid(C x) {
  C e = m_exp(-m_fabs(x));
  return x < C(0) ? e / (C(1) + e) : C(1) / (C(1) + e);
}

// --- unary -------------------------------------------------------------------------------

#define RLX_UNARY(Name, body)                               \
  struct Name {                                             \
    template <class C>                                      \
    __device__ __forceinline__ auto operator()(C x) const { \
      body                                                  \
    }                                                       \
  };

RLX_UNARY(Neg, if constexpr (is_fp<C>) return -x; else return wrap_sub(C(0), x);)
RLX_UNARY(Abs, if constexpr (is_fp<C>) return m_fabs(x);
          else if constexpr (is_signed<C>) return x < 0 ? wrap_sub(C(0), x) : x; else return x;)
RLX_UNARY(Sign, if constexpr (!is_signed<C>) return x > 0 ? C(1) : C(0);
          else return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);)
RLX_UNARY(Square, if constexpr (is_fp<C>) return x * x; else return wrap_mul(x, x);)
RLX_UNARY(Relu, if constexpr (!is_signed<C>) return x; else return x < C(0) ? C(0) : x;)
RLX_UNARY(Exp, return m_exp(x);)
RLX_UNARY(Expm1, return m_expm1(x);)
RLX_UNARY(Log, return m_log(x);)
RLX_UNARY(Log1p, return m_log1p(x);)
RLX_UNARY(Sqrt, return m_sqrt(x);)
RLX_UNARY(Rsqrt, return m_rsqrt(x);)
RLX_UNARY(Reciprocal, return C(1) / x;)
RLX_UNARY(Sin, return m_sin(x);)
RLX_UNARY(Cos, return m_cos(x);)
RLX_UNARY(Tan, return m_tan(x);)
RLX_UNARY(Tanh, return m_tanh(x);)
RLX_UNARY(Sigmoid, return m_sigmoid(x);)
RLX_UNARY(Erf, return m_erf(x);)
RLX_UNARY(Floor, return m_floor(x);)
RLX_UNARY(Ceil, return m_ceil(x);)
RLX_UNARY(Round, return m_rint(x);)
RLX_UNARY(Softplus, return (x > C(0) ? x : C(0)) + m_log1p(m_exp(-m_fabs(x)));)
RLX_UNARY(Softsign, return x / (C(1) + m_fabs(x));)
RLX_UNARY(Silu, return x == -inf<C>() ? C(-0.0) : x * m_sigmoid(x);)
RLX_UNARY(GeluErf, return x == -inf<C>()
                              ? C(-0.0)
                              : C(0.5) * x * (C(1) + m_erf(x * C(0.70710678118654752440)));)
RLX_UNARY(GeluTanh, return x == -inf<C>() ? C(-0.0)
                                          : x * m_sigmoid(C(2 * 0.79788456080286535588) *
                                                          (x + C(0.044715) * x * x * x));)
RLX_UNARY(LogicalNot, return bool(x == 0);)
RLX_UNARY(IsNan, return bool(x != x);)
RLX_UNARY(IsInf, return bool(m_fabs(x) == inf<C>());)
#undef RLX_UNARY

struct Elu {
  double alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * m_expm1(x);
  }
};
struct LeakyRelu {
  double alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * x;
  }
};
struct HardSigmoid {
  double alpha, beta;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    C v = C(alpha) * x + C(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};
struct FakeQuantize {
  double scale, zero_point, qmin, qmax;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    C q = C(m_rint(x / C(scale))) + C(zero_point);
    q = q < C(qmin) ? C(qmin) : (q > C(qmax) ? C(qmax) : q);
    return (q - C(zero_point)) * C(scale);
  }
};

// --- binary ------------------------------------------------------------------------------

#define RLX_BINARY(Name, body)                                   \
  struct Name {                                                  \
    template <class C>                                           \
    __device__ __forceinline__ auto operator()(C a, C b) const { \
      body                                                       \
    }                                                            \
  };

RLX_BINARY(Add, if constexpr (is_fp<C>) return a + b; else return wrap_add(a, b);)
RLX_BINARY(Sub, if constexpr (is_fp<C>) return a - b; else return wrap_sub(a, b);)
RLX_BINARY(Mul, if constexpr (is_fp<C>) return a * b; else return wrap_mul(a, b);)
RLX_BINARY(Div, if constexpr (is_fp<C>) return a / b;
           else if constexpr (is_signed<C>) return b == 0
               ? C(0)
               : (b == -1 ? wrap_sub(C(0), a) : C(a / b));
           else return b == 0 ? C(0) : C(a / b);)
RLX_BINARY(
    Max,
    if constexpr (is_fp<C>) {
      C r = a > b ? a : b;
      r = a == b ? (neg_sign(a) ? b : a) : r;
      return a != a || b != b ? a + b : r;
    } else return a > b
        ? a
        : b;)
RLX_BINARY(
    Min,
    if constexpr (is_fp<C>) {
      C r = a < b ? a : b;
      r = a == b ? (neg_sign(a) ? a : b) : r;
      return a != a || b != b ? a + b : r;
    } else return a < b
        ? a
        : b;)
RLX_BINARY(
    Mod,
    if constexpr (is_fp<C>) {
      C r = m_fmod(a, b);
      if (r != 0) return (r < 0) != (b < 0) ? r + b : r;
      return m_copysign(C(0), b);
    } else if constexpr (is_signed<C>) {
      if (b == 0 || b == -1) return C(0);
      C r = C(a % b);
      return r != 0 && ((r < 0) != (b < 0)) ? C(r + b) : r;
    } else return b == 0
        ? C(0)
        : C(a % b);)
RLX_BINARY(Fmod, if constexpr (is_fp<C>) return m_fmod(a, b);
           else if constexpr (is_signed<C>) return b == 0 || b == -1 ? C(0) : C(a % b);
           else return b == 0 ? C(0) : C(a % b);)
RLX_BINARY(Atan2, return m_atan2(a, b);)
RLX_BINARY(LogicalAnd, return bool(a != 0 && b != 0);)
RLX_BINARY(LogicalOr, return bool(a != 0 || b != 0);)
RLX_BINARY(LogicalXor, return bool((a != 0) != (b != 0));)
RLX_BINARY(BitAnd, return C(a & b);)
RLX_BINARY(BitOr, return C(a | b);)
RLX_BINARY(BitXor, return C(a ^ b);)
RLX_BINARY(Eq, return bool(a == b);)
RLX_BINARY(Ne, return bool(a != b);)
RLX_BINARY(Lt, return bool(a < b);)
RLX_BINARY(Le, return bool(a <= b);)
RLX_BINARY(Gt, return bool(a > b);)
RLX_BINARY(Ge, return bool(a >= b);)
#undef RLX_BINARY

struct Pow {
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (is_fp<C>) {
      return m_pow(a, b);
    } else {
      if constexpr (is_signed<C>) {
        if (b < 0) return a == 1 ? C(1) : (a == -1 ? C(b % 2 ? -1 : 1) : C(0));
      }
      C r = 1;
      for (C base = a; b; b = C(b >> 1), base = wrap_mul(base, base))
        if (b & 1) r = wrap_mul(r, base);
      return r;
    }
  }
};

}  // namespace rlx::cuda::ewop
