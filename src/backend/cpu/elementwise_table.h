// The CPU backend's elementwise ops, a row each: the op and its functor
// (elementwise_ops.h, which holds its dtypes and reads its attributes). elementwise.cpp
// registers the eager kernels from these rows and region.cpp's interpreter runs fused
// regions from them, so a new op is a functor and a row (region_jit.cpp's machine code is
// an optional fast path beside them). Ops with more to them (gelu's approximation, select,
// clamp, cast) are written out in both.
#pragma once

// X(op, Functor): the result has the operands' dtype.
#define RLX_CPU_UNARY_OPS(X)   \
  X(neg, Neg)                  \
  X(abs, Abs)                  \
  X(sign, Sign)                \
  X(square, Square)            \
  X(relu, Relu)                \
  X(exp, Exp)                  \
  X(expm1, Expm1)              \
  X(log, Log)                  \
  X(log1p, Log1p)              \
  X(sqrt, Sqrt)                \
  X(rsqrt, Rsqrt)              \
  X(reciprocal, Reciprocal)    \
  X(sin, Sin)                  \
  X(cos, Cos)                  \
  X(tan, Tan)                  \
  X(tanh, Tanh)                \
  X(sigmoid, Sigmoid)          \
  X(erf, Erf)                  \
  X(floor, Floor)              \
  X(ceil, Ceil)                \
  X(round, Round)              \
  X(softplus, Softplus)        \
  X(softsign, Softsign)        \
  X(silu, Silu)                \
  X(elu, Elu)                  \
  X(leaky_relu, LeakyRelu)     \
  X(hard_sigmoid, HardSigmoid) \
  X(fake_quantize, FakeQuantize)

// X(op, Functor): a bool result.
#define RLX_CPU_UNARY_BOOL_OPS(X) \
  X(logical_not, LogicalNot)      \
  X(isnan, IsNan)                 \
  X(isinf, IsInf)

#define RLX_CPU_BINARY_OPS(X) \
  X(add, Add)                 \
  X(sub, Sub)                 \
  X(mul, Mul)                 \
  X(div, Div)                 \
  X(pow, Pow)                 \
  X(max, Max)                 \
  X(min, Min)                 \
  X(mod, Mod)                 \
  X(fmod, Fmod)               \
  X(atan2, Atan2)             \
  X(bitwise_and, BitAnd)      \
  X(bitwise_or, BitOr)        \
  X(bitwise_xor, BitXor)

// X(op, Functor): a bool result; eq and ne take strings too (their eager kernels compare
// interned handles).
#define RLX_CPU_BINARY_BOOL_OPS(X) \
  X(logical_and, LogicalAnd)       \
  X(logical_or, LogicalOr)         \
  X(logical_xor, LogicalXor)       \
  X(lt, Lt)                        \
  X(le, Le)                        \
  X(gt, Gt)                        \
  X(ge, Ge)
#define RLX_CPU_COMPARE_OPS(X) \
  X(eq, Eq)                    \
  X(ne, Ne)
