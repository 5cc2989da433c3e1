// ONNX converters: elementwise ops. Most map one to one onto a core op (tables below);
// the rest are short exact compositions of core ops (selu, asin, clip…). Binary ops
// broadcast as NumPy does; opset < 7 ops broadcast only with `broadcast=1`, `axis`
// saying where B's dims start in A.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "frontend/onnx/context.h"
#include "frontend/onnx/ops/elementwise.h"

namespace rlx::onnx_import {

namespace {

using UnaryFn = Value (*)(NodeContext&, Value);

Value k(NodeContext& c, Value like, double v) { return c.scalar(like.dtype(), v); }
Value op(NodeContext& c, std::string_view name, std::vector<Value> in, Attrs at = {}) {
  return c.apply1(name, std::move(in), std::move(at));
}
Value add(NodeContext& c, Value a, Value b) { return op(c, "add", {a, b}); }
Value sub(NodeContext& c, Value a, Value b) { return op(c, "sub", {a, b}); }
Value mul(NodeContext& c, Value a, Value b) { return op(c, "mul", {a, b}); }
Value div(NodeContext& c, Value a, Value b) { return op(c, "div", {a, b}); }
Value un(NodeContext& c, std::string_view name, Value x) { return op(c, name, {x}); }

// ---- binary ops ------------------------------------------------------------------------

// B reshaped for opset < 7 broadcasting: with broadcast=1 and `axis`, B's dims line up
// with A's from `axis` on, so B gets trailing size-1 axes; otherwise NumPy's suffix
// alignment already matches.
Value legacy_broadcast(NodeContext& c, Value a, Value b) {
  if (c.opset() >= 7 || c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis")) return b;
  int64_t axis = normalize_axis(c, c.need_attr_int("axis"), a.rank());
  int64_t trailing = a.rank() - axis - b.rank();
  if (trailing < 0)
    c.fail("expected B (rank ", b.rank(), ") to fit in A (rank ", a.rank(), ") from axis ", axis);
  if (trailing == 0) return b;
  IntList axes;
  for (int64_t i = 0; i < trailing; ++i) axes.push_back(b.rank() + i);
  return op(c, "expand_dims", {b}, {{"axes", axes}});
}

std::pair<Value, Value> binary_inputs(NodeContext& c) {
  Value a = c.input(0);
  return {a, legacy_broadcast(c, a, c.input(1))};
}

Converter binary(std::string core) {
  return [core = std::move(core)](NodeContext& c) -> std::vector<Value> {
    auto [a, b] = binary_inputs(c);
    return {op(c, core, {a, b})};
  };
}

// Pow's exponent may have another dtype than its base; the result has the base's. With a
// float on either side it is computed in f64 and converted back (NumPy's
// power(a, b).astype(a.dtype): an integer base truncates); between integers the exponent
// takes the base's dtype (wrapping arithmetic gives the same low bits).
std::vector<Value> convert_pow(NodeContext& c) {
  auto [a, b] = binary_inputs(c);
  if (a.dtype() == b.dtype()) return {op(c, "pow", {a, b})};
  if (is_float(a.dtype()) || is_float(b.dtype())) {
    Value r = op(c, "pow", {c.cast(a, DType::f64), c.cast(b, DType::f64)});
    return {c.cast(r, a.dtype())};
  }
  return {op(c, "pow", {a, c.cast(b, a.dtype())})};
}

// fmod=1: C fmod (sign of A); fmod=0: floor modulo (sign of B).
std::vector<Value> convert_mod(NodeContext& c) {
  auto [a, b] = binary_inputs(c);
  return {op(c, c.attr_int("fmod", 0) ? "fmod" : "mod", {a, b})};
}

std::vector<Value> convert_bit_shift(NodeContext& c) {
  std::string dir = c.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    c.fail("expected attribute 'direction' LEFT or RIGHT, got '", dir, "'");
  return {op(c, "onnx.bit_shift", {c.input(0), c.input(1)},
             {{"direction", dir == "LEFT" ? "left" : "right"}})};
}

// Sum / Max / Min / Mean: a left fold over any number of inputs (all broadcast).
Value fold(NodeContext& c, std::string_view core) {
  if (c.num_inputs() == 0) c.fail("expected at least one input, got none");
  Value acc = c.input(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) acc = op(c, core, {acc, c.input(i)});
  return acc;
}

Converter variadic(std::string core) {
  return [core = std::move(core)](NodeContext& c) -> std::vector<Value> { return {fold(c, core)}; };
}

std::vector<Value> convert_mean(NodeContext& c) {
  Value s = fold(c, "add");
  if (c.num_inputs() == 1) return {s};
  return {div(c, s, k(c, s, double(c.num_inputs())))};
}

std::vector<Value> convert_where(NodeContext& c) {
  return {op(c, "select", {c.input(0), c.input(1), c.input(2)})};
}

// PRelu: slope * x where x < 0. Opset < 7 took a per-channel slope of shape [C] (no
// NumPy broadcasting yet): it applies along axis 1.
std::vector<Value> convert_prelu(NodeContext& c) {
  Value x = c.input(0), slope = c.input(1);
  if (c.opset() < 7 && slope.rank() == 1 && x.rank() >= 2 && !slope.shape()[0].is(1)) {
    IntList axes;
    for (int64_t i = 1; i < x.rank() - 1; ++i) axes.push_back(i);
    if (!axes.empty()) slope = op(c, "expand_dims", {slope}, {{"axes", axes}});
  }
  Value neg = op(c, "lt", {x, k(c, x, 0)});
  return {op(c, "select", {neg, mul(c, x, slope), x})};
}

// ---- clip ------------------------------------------------------------------------------

// Bounds are attributes before opset 11 and optional (scalar) inputs after; a missing
// bound leaves that side open.
std::vector<Value> convert_clip(NodeContext& c) {
  Value x = c.input(0);
  std::optional<Value> lo, hi;
  if (c.opset() < 11) {
    if (c.has_attr("min")) lo = k(c, x, c.attr_float("min", 0));
    if (c.has_attr("max")) hi = k(c, x, c.attr_float("max", 0));
  } else {
    if (c.has_input(1)) lo = c.input(1);
    if (c.has_input(2)) hi = c.input(2);
  }
  if (lo && hi) return {op(c, "clamp", {x, *lo, *hi})};
  if (lo) x = op(c, "max", {x, *lo});
  if (hi) x = op(c, "min", {x, *hi});
  return {x};
}

// ---- cast ------------------------------------------------------------------------------

// `to` is a TensorProto data type; Cast-1 spelled it as its name ("FLOAT").
std::vector<Value> convert_cast(NodeContext& c) {
  const ::onnx::AttributeProto* at = c.attr("to");
  int64_t to = 0;
  if (at && at->type() == ::onnx::AttributeProto::STRING) {
    ::onnx::TensorProto::DataType t;
    if (!::onnx::TensorProto::DataType_Parse(at->s(), &t))
      c.fail("expected attribute 'to' to name a tensor type, got '", at->s(), "'");
    to = t;
  } else {
    to = c.need_attr_int("to");
  }
  std::optional<DType> dt = dtype_from_onnx(int32_t(to));
  if (!dt) c.unsupported("expected a numeric or bool target type, got ONNX type ", to);
  return {c.cast(c.input(0), *dt)};
}

std::vector<Value> convert_cast_like(NodeContext& c) {
  return {c.cast(c.input(0), c.input(1).dtype())};
}

std::vector<Value> convert_identity(NodeContext& c) { return {c.input(0)}; }

// ---- unary ops with attributes or compositions -----------------------------------------

Value leaky_relu(NodeContext& c, Value x) {
  return op(c, "leaky_relu", {x}, {{"alpha", c.attr_float("alpha", 0.01)}});
}
Value elu(NodeContext& c, Value x) {
  return op(c, "elu", {x}, {{"alpha", c.attr_float("alpha", 1.0)}});
}
// gamma * elu(x, alpha).
Value selu(NodeContext& c, Value x) {
  double alpha = c.attr_float("alpha", 1.67326319217681884765625);
  double gamma = c.attr_float("gamma", 1.05070102214813232421875);
  return mul(c, op(c, "elu", {x}, {{"alpha", alpha}}), k(c, x, gamma));
}
// max(0, x) + min(0, alpha (e^(x/alpha) - 1)) = alpha * elu(x / alpha).
Value celu(NodeContext& c, Value x) {
  double alpha = c.attr_float("alpha", 1.0);
  if (alpha == 0) c.fail("expected a nonzero 'alpha', got 0");
  Value a = k(c, x, alpha);
  return mul(c, a, op(c, "elu", {div(c, x, a)}, {{"alpha", 1.0}}));
}
Value hard_sigmoid(NodeContext& c, Value x) {
  return op(c, "hard_sigmoid", {x},
            {{"alpha", c.attr_float("alpha", 0.2)}, {"beta", c.attr_float("beta", 0.5)}});
}
// x * max(0, min(1, x / 6 + 1 / 2)).
Value hard_swish(NodeContext& c, Value x) {
  return mul(c, x, op(c, "hard_sigmoid", {x}, {{"alpha", 1.0 / 6}, {"beta", 0.5}}));
}
Value softsign(NodeContext& c, Value x) { return un(c, "softsign", x); }
Value thresholded_relu(NodeContext& c, Value x) {
  Value above = op(c, "gt", {x, k(c, x, c.attr_float("alpha", 1.0))});
  return op(c, "select", {above, x, k(c, x, 0)});
}
// x + bias below -lambd, x - bias above lambd, 0 between. Integer x: the bounds truncate
// toward zero, which keeps both comparisons exact.
Value shrink(NodeContext& c, Value x) {
  double lambd = c.attr_float("lambd", 0.5), bias = c.attr_float("bias", 0.0);
  Value zero = k(c, x, 0);
  Value hi = op(c, "select", {op(c, "gt", {x, k(c, x, lambd)}), sub(c, x, k(c, x, bias)), zero});
  if (x.dtype() == DType::u8 && lambd >= 0) return hi;  // nothing is below -lambd
  return op(c, "select", {op(c, "lt", {x, k(c, x, -lambd)}), add(c, x, k(c, x, bias)), hi});
}
Value gelu(NodeContext& c, Value x) {
  std::string approx = c.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh")
    c.fail("expected attribute 'approximate' none or tanh, got '", approx, "'");
  return op(c, "gelu", {x}, {{"approximate", approx}});
}
// x * tanh(softplus(x)).
Value mish(NodeContext& c, Value x) { return mul(c, x, un(c, "tanh", un(c, "softplus", x))); }

// IsInf with detect_negative / detect_positive (both default 1).
Value isinf(NodeContext& c, Value x) {
  bool neg = c.attr_int("detect_negative", 1) != 0, pos = c.attr_int("detect_positive", 1) != 0;
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (neg && pos) return un(c, "isinf", x);
  if (pos) return op(c, "eq", {x, k(c, x, inf)});
  if (neg) return op(c, "eq", {x, k(c, x, -inf)});
  return op(c, "lt", {x, k(c, x, -inf)});  // detects nothing: always false
}

// ---- inverse trig and hyperbolic functions (no core op: exact identities) --------------

// sqrt(1 - x^2), factored so it stays accurate near |x| = 1.
Value cosine_of_asin(NodeContext& c, Value x) {
  Value one = k(c, x, 1);
  return un(c, "sqrt", mul(c, sub(c, one, x), add(c, one, x)));
}
Value asin(NodeContext& c, Value x) { return op(c, "atan2", {x, cosine_of_asin(c, x)}); }
Value acos(NodeContext& c, Value x) { return op(c, "atan2", {cosine_of_asin(c, x), x}); }
Value atan(NodeContext& c, Value x) { return op(c, "atan2", {x, k(c, x, 1)}); }
// (expm1(x) - expm1(-x)) / 2: no cancellation near 0.
Value sinh(NodeContext& c, Value x) {
  Value d = sub(c, un(c, "expm1", x), un(c, "expm1", un(c, "neg", x)));
  return mul(c, d, k(c, x, 0.5));
}
Value cosh(NodeContext& c, Value x) {
  Value s = add(c, un(c, "exp", x), un(c, "exp", un(c, "neg", x)));
  return mul(c, s, k(c, x, 0.5));
}
// sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|, with the fraction written as
// a / (1/a + sqrt(1/a^2 + 1)) so that neither tiny nor huge |x| overflows.
Value asinh(NodeContext& c, Value x) {
  Value a = un(c, "abs", x), one = k(c, x, 1);
  Value r = un(c, "reciprocal", a);
  Value frac = div(c, a, add(c, r, un(c, "sqrt", add(c, mul(c, r, r), one))));
  return mul(c, un(c, "sign", x), un(c, "log1p", add(c, a, frac)));
}
// log1p(t + sqrt(t (t + 2))), t = x - 1 (exact near 1, where acosh is steepest); NaN
// below 1. Past `big`, where t (t + 2) could overflow, log(x) + log(2) is exact to
// within 1 / (4 x^2) relative.
Value acosh(NodeContext& c, Value x) {
  double big = x.dtype() == DType::f16 ? 128 : 1e8;
  Value t = sub(c, x, k(c, x, 1));
  Value s = un(c, "sqrt", mul(c, t, add(c, t, k(c, x, 2))));
  Value near = un(c, "log1p", add(c, t, s));
  Value far = add(c, un(c, "log", x), k(c, x, std::numbers::ln2));
  return op(c, "select", {op(c, "gt", {x, k(c, x, big)}), far, near});
}
// (log1p(x) - log1p(-x)) / 2.
Value atanh(NodeContext& c, Value x) {
  Value d = sub(c, un(c, "log1p", x), un(c, "log1p", un(c, "neg", x)));
  return mul(c, d, k(c, x, 0.5));
}

// BitwiseNot: x ^ all-ones (255 for u8, -1 for the signed types).
Value bitwise_not(NodeContext& c, Value x) {
  return op(c, "bitwise_xor", {x, k(c, x, x.dtype() == DType::u8 ? 255 : -1)});
}

struct UnaryEntry {
  const char* onnx;
  UnaryFn fn;
};

// ONNX ops that are one core op without attributes: (ONNX name, core name).
const std::pair<const char*, const char*> kRenamed[] = {
    {"Abs", "abs"},           {"Neg", "neg"},
    {"Exp", "exp"},           {"Log", "log"},
    {"Sqrt", "sqrt"},         {"Sin", "sin"},
    {"Cos", "cos"},           {"Tan", "tan"},
    {"Tanh", "tanh"},         {"Sigmoid", "sigmoid"},
    {"Erf", "erf"},           {"Floor", "floor"},
    {"Ceil", "ceil"},         {"Round", "round"},
    {"Sign", "sign"},         {"Relu", "relu"},
    {"Softplus", "softplus"}, {"IsNaN", "isnan"},
    {"Not", "logical_not"},   {"Reciprocal", "reciprocal"},
};

const UnaryEntry kUnary[] = {
    {"LeakyRelu", leaky_relu},
    {"Elu", elu},
    {"Selu", selu},
    {"Celu", celu},
    {"HardSigmoid", hard_sigmoid},
    {"HardSwish", hard_swish},
    {"Softsign", softsign},
    {"ThresholdedRelu", thresholded_relu},
    {"Shrink", shrink},
    {"Gelu", gelu},
    {"Mish", mish},
    {"IsInf", isinf},
    {"Asin", asin},
    {"Acos", acos},
    {"Atan", atan},
    {"Sinh", sinh},
    {"Cosh", cosh},
    {"Asinh", asinh},
    {"Acosh", acosh},
    {"Atanh", atanh},
    {"BitwiseNot", bitwise_not},
};

// Binary ops that are one core op: (ONNX name, core name).
const std::pair<const char*, const char*> kBinary[] = {
    {"Add", "add"},
    {"Sub", "sub"},
    {"Mul", "mul"},
    {"Div", "div"},
    {"And", "logical_and"},
    {"Or", "logical_or"},
    {"Xor", "logical_xor"},
    {"BitwiseAnd", "bitwise_and"},
    {"BitwiseOr", "bitwise_or"},
    {"BitwiseXor", "bitwise_xor"},
    {"Equal", "eq"},
    {"Less", "lt"},
    {"Greater", "gt"},
    {"LessOrEqual", "le"},
    {"GreaterOrEqual", "ge"},
};

}  // namespace

void register_elementwise_converters() {
  register_elementwise_onnx_ops();
  for (auto [name, core] : kRenamed)
    add_converter("", name, [core = std::string(core)](NodeContext& c) -> std::vector<Value> {
      return {un(c, core, c.input(0))};
    });
  for (const UnaryEntry& e : kUnary)
    add_converter("", e.onnx, [fn = e.fn](NodeContext& c) -> std::vector<Value> {
      return {fn(c, c.input(0))};
    });
  for (auto [name, core] : kBinary) add_converter("", name, binary(core));
  add_converter("", "Pow", convert_pow);
  add_converter("", "Mod", convert_mod);
  add_converter("", "BitShift", convert_bit_shift);
  add_converter("", "Sum", variadic("add"));
  add_converter("", "Max", variadic("max"));
  add_converter("", "Min", variadic("min"));
  add_converter("", "Mean", convert_mean);
  add_converter("", "Where", convert_where);
  add_converter("", "PRelu", convert_prelu);
  add_converter("", "Clip", convert_clip);
  add_converter("", "Cast", convert_cast);
  add_converter("", "CastLike", convert_cast_like);
  add_converter("", "Identity", convert_identity);
}

}  // namespace rlx::onnx_import
