// The elementwise ops as functors over compute types (f16 / bf16 run in f32), shared by
// the per-op kernels (elementwise.cpp) and the fused-region interpreter (region.cpp), so
// each op's math exists once. f32 exp, log, tanh, sigmoid, erf and the ops built on them
// use the vectorisable versions of elementwise_math.h, f64 uses libm.
//
// Semantics where the op docs leave room (NumPy / ONNX / C, as noted):
// - Integer add, sub, mul, neg, abs, square and pow wrap around (two's complement), e.g.
//   i8 100 + 100 = -56 and abs(-128) = -128.
// - Integer div truncates toward zero (C, ONNX); mod is floor modulo (sign of b), fmod
//   has the sign of a. Division by zero gives 0 for div, mod and fmod (as NumPy does,
//   without its warning); INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0. Integer
//   pow with a negative exponent is 1 / a^|b| truncated: 1 for a = 1, +-1 for a = -1,
//   else 0 (a = 0 included, like the division by zero it is).
// - max / min propagate NaN (NumPy maximum / minimum) and order -0 below +0; clamp is
//   min(max(x, lo), hi) with those, so lo > hi gives hi and a NaN anywhere gives NaN.
// - relu(NaN) = NaN; sign(x) is x for 0, -0 and NaN; round is half to even.
// - silu and gelu at -inf give -0 (their limit; x * sigmoid(x) would give NaN).
// - cast: float -> integer truncates toward zero and saturates at the integer's range,
//   NaN gives 0 (as store_double does); integer -> narrower integer wraps (C++, NumPy
//   astype); -> bool is x != 0 (NaN is true); f64 -> f16 / bf16 rounds via f32.
#pragma once

#include <cmath>
#include <complex>
#include <limits>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_loops.h"
#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/isa.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace ewop {

using ew::is_float_storage_v;

template <class C>
constexpr bool is_fp = std::is_floating_point_v<C>;

// Integer arithmetic that wraps: done in an unsigned type at least as wide as int, so
// neither signed overflow nor the promotion of narrow unsigned types to int can occur.
template <class T>
using wide_u = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
template <class T>
T wrap_add(T a, T b) {
  return T(wide_u<T>(a) + wide_u<T>(b));
}
template <class T>
T wrap_sub(T a, T b) {
  return T(wide_u<T>(a) - wide_u<T>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  return T(wide_u<T>(a) * wide_u<T>(b));
}

// --- f32 fast math, f64 libm --------------------------------------------------------

inline float m_exp(float x) { return fm::exp(x); }
inline double m_exp(double x) { return std::exp(x); }
inline float m_log(float x) { return fm::log(x); }
inline double m_log(double x) { return std::log(x); }
inline float m_expm1(float x) { return fm::expm1(x); }
inline double m_expm1(double x) { return std::expm1(x); }
inline float m_log1p(float x) { return fm::log1p(x); }
inline double m_log1p(double x) { return std::log1p(x); }
inline float m_tanh(float x) { return fm::tanh(x); }
inline double m_tanh(double x) { return std::tanh(x); }
inline float m_erf(float x) { return fm::erf(x); }
inline double m_erf(double x) { return std::erf(x); }
inline float m_sigmoid(float x) { return fm::sigmoid(x); }
// Complex arguments (the ops whose set has kComplex): std::complex's own functions.
template <class R>
std::complex<R> m_exp(std::complex<R> z) {
  return std::exp(z);
}
template <class R>
std::complex<R> m_log(std::complex<R> z) {
  return std::log(z);
}
template <class R>
std::complex<R> m_tanh(std::complex<R> z) {
  return std::tanh(z);
}
inline double m_sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  return x < 0 ? e / (1 + e) : 1 / (1 + e);
}

// --- unary functors -------------------------------------------------------------------
// `set`: the dtypes the op takes (visit's sets). Ops with attributes build from them (make).

struct Neg {
  static constexpr unsigned set = kNumeric | kComplex;
  template <class C>
  C operator()(C x) const {
    if constexpr (is_fp<C> || is_complex_v<C>)
      return -x;
    else
      return wrap_sub(C(0), x);
  }
};
// The modulus of a complex number without overflow: c64 squares in double (exact enough
// to round once, and far faster than hypot), c128 through hypot. An infinite part gives
// infinity even beside a NaN (C's hypot).
template <class R>
R modulus(std::complex<R> z) {
  if constexpr (std::is_same_v<R, float>) {
    if (std::isinf(z.real()) || std::isinf(z.imag())) return std::numeric_limits<R>::infinity();
    double a = z.real(), b = z.imag();
    return R(std::sqrt(a * a + b * b));
  } else {
    return std::hypot(z.real(), z.imag());
  }
}

// Of a complex x: the modulus, a real number.
struct Abs {
  static constexpr unsigned set = kNumeric | kComplex;
  template <class C>
  auto operator()(C x) const {
    if constexpr (is_complex_v<C>)
      return modulus(x);
    else if constexpr (is_fp<C>)
      return std::fabs(x);
    else if constexpr (std::is_signed_v<C>)
      return x < 0 ? wrap_sub(C(0), x) : x;
    else
      return x;
  }
};
struct Sign {
  static constexpr unsigned set = kNumeric;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x > 0 ? C(1) : C(0);
    else
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);
  }
};
struct Square {
  static constexpr unsigned set = kNumeric | kComplex;
  template <class C>
  C operator()(C x) const {
    if constexpr (is_fp<C> || is_complex_v<C>)
      return x * x;
    else
      return wrap_mul(x, x);
  }
};
struct Relu {
  static constexpr unsigned set = kFloat | kInt;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;  // not reached: relu takes signed dtypes only
    else
      return x < C(0) ? C(0) : x;  // NaN passes through
  }
};

// Float-only ops: one line each.
#define RLX_UNARY_OF(Name, dtypes, expr)    \
  struct Name {                             \
    static constexpr unsigned set = dtypes; \
    template <class C>                      \
    C operator()(C x) const {               \
      return expr;                          \
    }                                       \
  };
#define RLX_FLOAT_UNARY(Name, expr) RLX_UNARY_OF(Name, kFloat, expr)
// Defined on complex numbers too (holomorphic: their real-number rules carry over).
#define RLX_INEXACT_UNARY(Name, expr) RLX_UNARY_OF(Name, kFloat | kComplex, expr)
RLX_FLOAT_UNARY(Expm1, m_expm1(x))
RLX_INEXACT_UNARY(Log, m_log(x))
RLX_FLOAT_UNARY(Log1p, m_log1p(x))
RLX_INEXACT_UNARY(Reciprocal, C(1) / x)
RLX_INEXACT_UNARY(Sin, std::sin(x))
RLX_INEXACT_UNARY(Cos, std::cos(x))
RLX_INEXACT_UNARY(Tan, std::tan(x))
RLX_INEXACT_UNARY(Tanh, m_tanh(x))
#undef RLX_INEXACT_UNARY
RLX_FLOAT_UNARY(Erf, m_erf(x))
RLX_FLOAT_UNARY(Floor, fm::floor(x))
RLX_FLOAT_UNARY(Ceil, fm::ceil(x))
RLX_FLOAT_UNARY(Round, std::nearbyint(x))
// max(x, 0) + log(1 + e^-|x|): no overflow for large x, NaN propagates.
RLX_FLOAT_UNARY(Softplus, (x > C(0) ? x : C(0)) + m_log1p(m_exp(-std::fabs(x))))
RLX_FLOAT_UNARY(Softsign, x / (C(1) + std::fabs(x)))
// silu has a whole-run version for contiguous f32 (fm::silu_n: the SwiGLU of every LLM).
struct Silu {
  static constexpr unsigned set = kFloat;
  template <class C>
  C operator()(C x) const {
    return x == -std::numeric_limits<C>::infinity() ? C(-0.0) : x * m_sigmoid(x);
  }
  void run(const float* x, float* y, int64_t n) const { fm::silu_n(x, y, n); }
};
// 0.5 (1 + erf(x / sqrt 2)) x.
RLX_FLOAT_UNARY(GeluErf, x == -std::numeric_limits<C>::infinity()
                             ? C(-0.0)
                             : C(0.5) * x * (C(1) + m_erf(x * C(0.70710678118654752440))))
// 0.5 (1 + tanh u) = sigmoid(2u): no cancellation for negative x.
RLX_FLOAT_UNARY(GeluTanh,
                x == -std::numeric_limits<C>::infinity()
                    ? C(-0.0)
                    : x * m_sigmoid(C(2 * 0.79788456080286535588) * (x + C(0.044715) * x * x * x)))
#undef RLX_FLOAT_UNARY
#undef RLX_UNARY_OF

// exp has a whole-run version for contiguous f32 (fm::exp_n).
struct Exp {
  static constexpr unsigned set = kFloat | kComplex;
  template <class C>
  C operator()(C x) const {
    return m_exp(x);
  }
  void run(const float* x, float* y, int64_t n) const { fm::exp_n(x, y, n); }
};

// sigmoid too (fm::sigmoid_n: no division).
struct Sigmoid {
  static constexpr unsigned set = kFloat;
  template <class C>
  C operator()(C x) const {
    return m_sigmoid(x);
  }
  void run(const float* x, float* y, int64_t n) const { fm::sigmoid_n(x, y, n); }
};

// Whole runs of floats (apply_n): fm::sqrt_n says why. Complex numbers one at a time.
template <bool Recip>
struct SqrtOp {
  static constexpr unsigned set = kFloat | kComplex;
  template <class C>
  requires is_fp<C>
  void run(const C* x, C* y, int64_t n) const { fm::sqrt_n(x, y, n, Recip); }
  template <class C>
  requires is_complex_v<C> C operator()(C x) const {
    return Recip ? C(1) / std::sqrt(x) : std::sqrt(x);
  }
};
using Sqrt = SqrtOp<false>;
using Rsqrt = SqrtOp<true>;

struct Elu {
  static constexpr unsigned set = kFloat;
  double alpha;
  static Elu make(const Attrs& a) { return {a.get_float("alpha")}; }
  template <class C>
  C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * m_expm1(x);
  }
};
struct LeakyRelu {
  static constexpr unsigned set = kFloat;
  double alpha;
  static LeakyRelu make(const Attrs& a) { return {a.get_float("alpha")}; }
  template <class C>
  C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * x;
  }
};
struct HardSigmoid {
  static constexpr unsigned set = kFloat;
  double alpha, beta;
  static HardSigmoid make(const Attrs& a) { return {a.get_float("alpha"), a.get_float("beta")}; }
  template <class C>
  C operator()(C x) const {
    C v;
#ifdef __FMA__
    // One rounding, as the region JIT's vfmadd, whether or not the compiler would contract
    // alpha x + beta (it does at -O2, not under the sanitizers' -O1).
    if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>)
      v = std::fma(C(alpha), x, C(beta));
    else
#endif
      v = C(alpha) * x + C(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);  // NaN passes through
  }
};

// QuantizeLinear then DequantizeLinear of one scale, as the ONNX importer's pair computes it
// (x / scale, not a product by its reciprocal; round half to even).
struct FakeQuantize {
  static constexpr unsigned set = kFloat;
  double scale, zero_point, qmin, qmax;
  static FakeQuantize make(const Attrs& a) {
    return {a.get_float("scale"), a.get_float("zero_point"), a.get_float("qmin"),
            a.get_float("qmax")};
  }
  template <class C>
  C operator()(C x) const {
    C q = C(std::nearbyint(x / C(scale))) + C(zero_point);
    q = q < C(qmin) ? C(qmin) : (q > C(qmax) ? C(qmax) : q);  // NaN passes through
    return (q - C(zero_point)) * C(scale);
  }
};

struct LogicalNot {
  static constexpr unsigned set = kBool;
  template <class C>
  bool operator()(C x) const {
    return x == 0;
  }
};
struct IsNan {
  static constexpr unsigned set = kFloat;
  template <class C>
  bool operator()(C x) const {
    return x != x;
  }
};
struct IsInf {
  static constexpr unsigned set = kFloat;
  template <class C>
  bool operator()(C x) const {
    return std::fabs(x) == std::numeric_limits<C>::infinity();
  }
};

// Whether storage type T is one the op's set can reach (visit instantiates every type).
template <class T>
constexpr bool takes(unsigned set) {
  if constexpr (is_complex_v<T>) return (set & kComplex) != 0;
  return is_float_storage_v<T> ? (set & kFloat) != 0 : (set & (kInt | kBool)) != 0;
}

template <class Op>
Op make_op(const Attrs& a) {
  if constexpr (requires { Op::make(a); })
    return Op::make(a);
  else
    return Op{};
}

// --- binary functors ------------------------------------------------------------------

struct Add {
  static constexpr unsigned set = kNumeric | kComplex;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C> || is_complex_v<C>)
      return a + b;
    else
      return wrap_add(a, b);
  }
};
struct Sub {
  static constexpr unsigned set = kNumeric | kComplex;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C> || is_complex_v<C>)
      return a - b;
    else
      return wrap_sub(a, b);
  }
};
struct Mul {
  static constexpr unsigned set = kNumeric | kComplex;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C> || is_complex_v<C>)
      return a * b;
    else
      return wrap_mul(a, b);
  }
};
struct Div {
  static constexpr unsigned set = kNumeric | kComplex;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C> || is_complex_v<C>)
      return a / b;
    else if constexpr (std::is_signed_v<C>)
      return b == 0 ? C(0) : (b == -1 ? wrap_sub(C(0), a) : C(a / b));
    else
      return b == 0 ? C(0) : C(a / b);
  }
};
struct Pow {
  static constexpr unsigned set = kNumeric;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C>) {
      return std::pow(a, b);
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
// NaN propagates; of two equal values (only +-0 differ) max takes +0, min takes -0.
struct Max {
  static constexpr unsigned set = kNumeric;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C>) {
      C r = a > b ? a : b;
      r = a == b ? (std::signbit(a) ? b : a) : r;
      return a != a || b != b ? a + b : r;
    } else {
      return a > b ? a : b;
    }
  }
};
struct Min {
  static constexpr unsigned set = kNumeric;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C>) {
      C r = a < b ? a : b;
      r = a == b ? (std::signbit(a) ? a : b) : r;
      return a != a || b != b ? a + b : r;
    } else {
      return a < b ? a : b;
    }
  }
};
// Floor modulo: the remainder takes the sign of b (a zero one too, as in NumPy).
struct Mod {
  static constexpr unsigned set = kNumeric;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C>) {
      C r = std::fmod(a, b);
      if (r != 0) return (r < 0) != (b < 0) ? r + b : r;
      return std::copysign(C(0), b);
    } else if constexpr (std::is_signed_v<C>) {
      if (b == 0 || b == -1) return 0;
      C r = C(a % b);
      return r != 0 && ((r < 0) != (b < 0)) ? C(r + b) : r;
    } else {
      return b == 0 ? C(0) : C(a % b);
    }
  }
};
struct Fmod {
  static constexpr unsigned set = kNumeric;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (is_fp<C>)
      return std::fmod(a, b);
    else if constexpr (std::is_signed_v<C>)
      return b == 0 || b == -1 ? C(0) : C(a % b);
    else
      return b == 0 ? C(0) : C(a % b);
  }
};
struct Atan2 {
  static constexpr unsigned set = kFloat;
  template <class C>
  C operator()(C a, C b) const {
    return std::atan2(a, b);
  }
};

// Ops whose body is one expression over a and b.
#define RLX_BINARY(Name, dtypes, Ret, expr) \
  struct Name {                             \
    static constexpr unsigned set = dtypes; \
    template <class C>                      \
    Ret operator()(C a, C b) const {        \
      return expr;                          \
    }                                       \
  };
RLX_BINARY(LogicalAnd, kBool, bool, a != 0 && b != 0)
RLX_BINARY(LogicalOr, kBool, bool, a != 0 || b != 0)
RLX_BINARY(LogicalXor, kBool, bool, (a != 0) != (b != 0))
RLX_BINARY(BitAnd, kInt | kBool, C, C(a& b))
RLX_BINARY(BitOr, kInt | kBool, C, C(a | b))
RLX_BINARY(BitXor, kInt | kBool, C, C(a ^ b))
RLX_BINARY(Eq, kAll, bool, a == b)
RLX_BINARY(Ne, kAll, bool, a != b)
RLX_BINARY(Lt, kAll, bool, a < b)
RLX_BINARY(Le, kAll, bool, a <= b)
RLX_BINARY(Gt, kAll, bool, a > b)
RLX_BINARY(Ge, kAll, bool, a >= b)
#undef RLX_BINARY

// x (a compute-type value) converted to the compute type of storage U.
template <class U, bool ToBool, class C>
auto convert(C x) {
  using R = compute_t<U>;
  if constexpr (ToBool) {
    return uint8_t(x != C(0));
  } else if constexpr (is_fp<R> || !is_fp<C>) {
    return R(x);  // rounds to nearest, or wraps between integers
  } else {
    // Truncates toward zero and saturates; the limits round up to powers of two in C.
    constexpr C lo = C(std::numeric_limits<R>::min()), hi = C(std::numeric_limits<R>::max());
    return x != x    ? R(0)
           : x <= lo ? std::numeric_limits<R>::min()
           : x >= hi ? std::numeric_limits<R>::max()
                     : R(x);
  }
}

}  // namespace ewop
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
