// The CUDA backend's elementwise ops, a row each: the op, its device functor
// (elementwise_ops.cuh), the dtypes it takes (cuda_util.h's sets) and the float attributes
// that are the functor's fields, in order. elementwise.cu registers the eager kernels from
// these rows and region.cpp generates fused regions' code from them, so a new op is a
// functor and a row. Ops with more to them (gelu's approximation, select, clamp, cast)
// are written out in both.
#pragma once

// X(op, Functor, dtypes, attributes...): the result has the operands' dtype. Rows with
// kComplex take c64 / c128 too (the eager kernels; fused regions decline complex values).
#define RLX_CUDA_UNARY_OPS(X)                           \
  X(neg, Neg, kNumeric | kComplex)                      \
  X(abs, Abs, kNumeric)                                 \
  X(sign, Sign, kNumeric)                               \
  X(square, Square, kNumeric | kComplex)                \
  X(relu, Relu, kFloat | kInt)                          \
  X(exp, Exp, kFloat | kComplex)                        \
  X(expm1, Expm1, kFloat)                               \
  X(log, Log, kFloat | kComplex)                        \
  X(log1p, Log1p, kFloat)                               \
  X(sqrt, Sqrt, kFloat | kComplex)                      \
  X(rsqrt, Rsqrt, kFloat | kComplex)                    \
  X(reciprocal, Reciprocal, kFloat | kComplex)          \
  X(sin, Sin, kFloat | kComplex)                        \
  X(cos, Cos, kFloat | kComplex)                        \
  X(tan, Tan, kFloat | kComplex)                        \
  X(tanh, Tanh, kFloat | kComplex)                      \
  X(sigmoid, Sigmoid, kFloat)                           \
  X(erf, Erf, kFloat)                                   \
  X(floor, Floor, kFloat)                               \
  X(ceil, Ceil, kFloat)                                 \
  X(round, Round, kFloat)                               \
  X(softplus, Softplus, kFloat)                         \
  X(softsign, Softsign, kFloat)                         \
  X(silu, Silu, kFloat)                                 \
  X(elu, Elu, kFloat, "alpha")                          \
  X(leaky_relu, LeakyRelu, kFloat, "alpha")             \
  X(hard_sigmoid, HardSigmoid, kFloat, "alpha", "beta") \
  X(fake_quantize, FakeQuantize, kFloat, "scale", "zero_point", "qmin", "qmax")

// X(op, Functor, dtypes): a bool result.
#define RLX_CUDA_UNARY_BOOL_OPS(X)  \
  X(logical_not, LogicalNot, kBool) \
  X(isnan, IsNan, kFloat)           \
  X(isinf, IsInf, kFloat)

#define RLX_CUDA_BINARY_OPS(X)         \
  X(add, Add, kNumeric | kComplex)     \
  X(sub, Sub, kNumeric | kComplex)     \
  X(mul, Mul, kNumeric | kComplex)     \
  X(div, Div, kNumeric | kComplex)     \
  X(pow, Pow, kNumeric)                \
  X(max, Max, kNumeric)                \
  X(min, Min, kNumeric)                \
  X(mod, Mod, kNumeric)                \
  X(fmod, Fmod, kNumeric)              \
  X(atan2, Atan2, kFloat)              \
  X(bitwise_and, BitAnd, kInt | kBool) \
  X(bitwise_or, BitOr, kInt | kBool)   \
  X(bitwise_xor, BitXor, kInt | kBool)

#define RLX_CUDA_BINARY_BOOL_OPS(X) \
  X(logical_and, LogicalAnd, kBool) \
  X(logical_or, LogicalOr, kBool)   \
  X(logical_xor, LogicalXor, kBool) \
  X(eq, Eq, kAll | kComplex)        \
  X(ne, Ne, kAll | kComplex)        \
  X(lt, Lt, kAll)                   \
  X(le, Le, kAll)                   \
  X(gt, Gt, kAll)                   \
  X(ge, Ge, kAll)
