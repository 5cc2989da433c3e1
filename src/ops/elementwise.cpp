// Elementwise ops: unary math, binary arithmetic / logic / comparison with NumPy
// broadcasting, select, clamp and cast. Families of similar ops are registered from tables.
//
// Derivatives of the elementwise ops as graph expressions (so they differentiate again:
// hvp is jvp of grad), and the rules built from them: vjp = ct * f'(x) reduced back over
// broadcasting, jvp = t * f'(x), vmap = the op on batch-aligned operands.
#include <cmath>
#include <numbers>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/rules.h"

namespace rlx::detail {

// ---- derivatives and rules ------------------------------------------------------------

// dy/dx of a unary op, from its input x, output y and attributes.
using UnaryDeriv = Value (*)(Value x, Value y, const Attrs& attrs);
// Partial derivatives of a binary op; nullptr means the constant 1 (add), so no multiply
// is emitted.
struct BinaryDeriv {
  Value (*da)(Value a, Value b, Value y);
  Value (*db)(Value a, Value b, Value y);
};

namespace {

using namespace rlx::rules;

Value k(Value like, double v) { return scalar_like(like, v); }
Value mask(Value cond, Value like) { return cast(cond, like.dtype()); }
Value sq(Value x) { return x * x; }

Value gelu_deriv(Value x, Value, const Attrs& at) {
  if (at.get_string("approximate") == "tanh") {
    // y = x/2 (1 + tanh(u)), u = c (x + 0.044715 x^3)
    const double c = std::sqrt(2.0 / std::numbers::pi);
    Value x2 = sq(x);
    Value t = tanh(k(x, c) * (x + k(x, 0.044715) * x2 * x));
    Value du = k(x, c) * (1.0 + k(x, 3 * 0.044715) * x2);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - sq(t)) * du;
  }
  // Phi(x) + x phi(x)
  Value cdf = 0.5 * (1.0 + op("erf", {x * k(x, 1 / std::numbers::sqrt2)}));
  Value pdf = exp(sq(x) * k(x, -0.5)) * k(x, 1 / std::sqrt(2 * std::numbers::pi));
  return cdf + x * pdf;
}

struct UnaryEntry {
  const char* name;
  UnaryDeriv deriv;
};

const UnaryEntry kUnary[] = {
    {.name = "neg", .deriv = [](Value x, Value, const Attrs&) { return k(x, -1); }},
    {.name = "abs", .deriv = [](Value x, Value, const Attrs&) { return op("sign", {x}); }},
    {.name = "square", .deriv = [](Value x, Value, const Attrs&) { return 2.0 * x; }},
    {.name = "exp", .deriv = [](Value, Value y, const Attrs&) { return y; }},
    {.name = "expm1", .deriv = [](Value, Value y, const Attrs&) { return y + 1.0; }},
    {.name = "log", .deriv = [](Value x, Value, const Attrs&) { return op("reciprocal", {x}); }},
    {.name = "log1p",
     .deriv = [](Value x, Value, const Attrs&) { return op("reciprocal", {x + 1.0}); }},
    {.name = "sqrt", .deriv = [](Value, Value y, const Attrs&) { return 0.5 / y; }},
    {.name = "rsqrt", .deriv = [](Value x, Value y, const Attrs&) { return -0.5 * y / x; }},
    {.name = "reciprocal", .deriv = [](Value, Value y, const Attrs&) { return -(y * y); }},
    {.name = "sin", .deriv = [](Value x, Value, const Attrs&) { return op("cos", {x}); }},
    {.name = "cos", .deriv = [](Value x, Value, const Attrs&) { return -op("sin", {x}); }},
    {.name = "tan", .deriv = [](Value, Value y, const Attrs&) { return 1.0 + y * y; }},
    {.name = "tanh", .deriv = [](Value, Value y, const Attrs&) { return 1.0 - y * y; }},
    {.name = "sigmoid", .deriv = [](Value, Value y, const Attrs&) { return y * (1.0 - y); }},
    {.name = "erf",
     .deriv = [](Value x, Value,
                 const Attrs&) { return k(x, 2 / std::sqrt(std::numbers::pi)) * exp(-(x * x)); }},
    {.name = "softplus", .deriv = [](Value x, Value, const Attrs&) { return sigmoid(x); }},
    {.name = "softsign",
     .deriv =
         [](Value x, Value, const Attrs&) {
           return op("reciprocal", {op("square", {1.0 + op("abs", {x})})});
         }},
    {.name = "silu",
     .deriv =
         [](Value x, Value, const Attrs&) {
           Value s = sigmoid(x);
           return s * (1.0 + x * (1.0 - s));
         }},
    {.name = "hard_sigmoid",
     .deriv =
         [](Value x, Value, const Attrs& at) {
           Value z = x * at.get_float("alpha") + at.get_float("beta");
           Value inside = op("logical_and", {op("gt", {z, k(z, 0)}), op("lt", {z, k(z, 1)})});
           return mask(inside, x) * at.get_float("alpha");
         }},
    {.name = "gelu", .deriv = gelu_deriv},
    {.name = "elu",
     .deriv =
         [](Value x, Value y, const Attrs& at) {
           return op("select", {op("gt", {x, k(x, 0)}), k(x, 1), y + at.get_float("alpha")});
         }},
    {.name = "leaky_relu",
     .deriv =
         [](Value x, Value, const Attrs& at) {
           return op("select", {op("gt", {x, k(x, 0)}), k(x, 1), k(x, at.get_float("alpha"))});
         }},
    {.name = "relu",
     .deriv =
         [](Value x, Value, const Attrs&) {
           return mask(op("gt", {x, k(x, 0)}), x);
         }},
};

// The truncation toward zero of x (fmod's quotient).
Value trunc(Value x) {
  return op("select", {op("ge", {x, k(x, 0)}), op("floor", {x}), op("ceil", {x})});
}

// max / min: the winner takes the gradient; a tie splits it (as JAX does).
Value wins(Value a, Value b, const char* cmp) {
  return mask(op(cmp, {a, b}), a) + 0.5 * mask(op("eq", {a, b}), a);
}

struct BinaryEntry {
  const char* name;
  BinaryDeriv deriv;
};

const BinaryEntry kBinary[] = {
    {.name = "add", .deriv = {.da = nullptr, .db = nullptr}},
    {.name = "sub", .deriv = {.da = nullptr, .db = [](Value a, Value, Value) { return k(a, -1); }}},
    {.name = "mul",
     .deriv = {.da = [](Value, Value b, Value) { return b; },
               .db = [](Value a, Value, Value) { return a; }}},
    {.name = "div",
     .deriv = {.da = [](Value, Value b, Value) { return op("reciprocal", {b}); },
               .db = [](Value, Value b, Value y) { return -y / b; }}},
    {.name = "pow",
     .deriv = {.da =
                   [](Value a, Value b, Value) {
                     return b * op("pow", {a, b - 1.0});
                   },
               .db = [](Value a, Value, Value y) { return y * log(a); }}},
    {.name = "max",
     .deriv = {.da = [](Value a, Value b, Value) { return wins(a, b, "gt"); },
               .db = [](Value a, Value b, Value) { return wins(b, a, "gt"); }}},
    {.name = "min",
     .deriv = {.da = [](Value a, Value b, Value) { return wins(a, b, "lt"); },
               .db = [](Value a, Value b, Value) { return wins(b, a, "lt"); }}},
    {.name = "mod",
     .deriv = {.da = [](Value a, Value, Value) { return k(a, 1); },
               .db = [](Value a, Value b, Value) { return -op("floor", {a / b}); }}},
    {.name = "fmod",
     .deriv = {.da = [](Value a, Value, Value) { return k(a, 1); },
               .db = [](Value a, Value b, Value) { return -trunc(a / b); }}},
    {.name = "atan2",
     .deriv = {.da = [](Value a, Value b, Value) { return b / (a * a + b * b); },
               .db = [](Value a, Value b, Value) { return -a / (a * a + b * b); }}},
};

// t * d, where a null derivative stands for 1.
Value scale(Value t, Value (*d)(Value, Value, Value), Value a, Value b, Value y) {
  return d ? t * d(a, b, y) : t;
}

VmapResult vmap_elementwise_rule(const RuleArgs& a, std::span<const int> in_axes) {
  return vmap_elementwise(a, in_axes);
}

}  // namespace

UnaryDeriv unary_deriv(std::string_view name) {
  for (const auto& e : kUnary)
    if (name == e.name) return e.deriv;
  return nullptr;
}

const BinaryDeriv* binary_deriv(std::string_view name) {
  for (const auto& e : kBinary)
    if (name == e.name) return &e.deriv;
  return nullptr;
}

void set_unary_rules(OpDef& d, UnaryDeriv deriv) {
  d.vmap = vmap_elementwise_rule;
  if (!deriv) return;
  d.vjp = [deriv](const RuleArgs& a, std::span<const Value> ct) {
    return std::vector<Value>{ct[0] * deriv(a.inputs[0], a.outputs[0], a.attrs)};
  };
  d.jvp = [deriv](const RuleArgs& a, std::span<const Value> t) {
    return std::vector<Value>{t[0] * deriv(a.inputs[0], a.outputs[0], a.attrs)};
  };
}

// abs of a complex z is its modulus r = |z|, a real number: dr = re(conj(z) dz) / r, whose
// transpose (JAX's convention, ops/complex.cpp) sends ct to ct conj(z) / r. At z = 0 both
// are 0 (as JAX's), not 0 / 0. Real inputs keep abs's entry in kUnary (sign(x)).
void set_modulus_rules(OpDef& d) {
  auto safe = [](Value r) { return op("select", {op("eq", {r, k(r, 0)}), k(r, 1), r}); };
  d.vjp = [safe, real = d.vjp](const RuleArgs& a, std::span<const Value> ct) {
    Value z = a.inputs[0];
    if (!is_complex(z.dtype())) return real(a, ct);
    Value s = ct[0] / safe(a.outputs[0]);
    return std::vector<Value>{op("conj", {z}) * op("complex", {s, zeros_like(s)})};
  };
  d.jvp = [safe, real = d.jvp](const RuleArgs& a, std::span<const Value> t) {
    Value z = a.inputs[0];
    if (!is_complex(z.dtype())) return real(a, t);
    return std::vector<Value>{op("real", {op("conj", {z}) * t[0]}) / safe(a.outputs[0])};
  };
}

void set_binary_rules(OpDef& d, const BinaryDeriv* deriv) {
  d.vmap = vmap_elementwise_rule;
  if (!deriv) return;
  BinaryDeriv p = *deriv;
  d.vjp = [p](const RuleArgs& r, std::span<const Value> ct) {
    Value a = r.inputs[0], b = r.inputs[1], y = r.outputs[0];
    return std::vector<Value>{unbroadcast(scale(ct[0], p.da, a, b, y), a),
                              unbroadcast(scale(ct[0], p.db, a, b, y), b)};
  };
  d.jvp = [p](const RuleArgs& r, std::span<const Value> t) {
    Value a = r.inputs[0], b = r.inputs[1], y = r.outputs[0];
    Value ta = t[0].valid() ? scale(t[0], p.da, a, b, y) : Value{};
    Value tb = t[1].valid() ? scale(t[1], p.db, a, b, y) : Value{};
    return std::vector<Value>{broadcast_like(add_any(ta, tb), y)};
  };
}

void set_select_rules(OpDef& d) {
  d.vmap = vmap_elementwise_rule;
  d.vjp = [](const RuleArgs& r, std::span<const Value> ct) {
    Value c = r.inputs[0], zero = zeros_like(ct[0]);
    return std::vector<Value>{Value{}, unbroadcast(op("select", {c, ct[0], zero}), r.inputs[1]),
                              unbroadcast(op("select", {c, zero, ct[0]}), r.inputs[2])};
  };
  d.jvp = [](const RuleArgs& r, std::span<const Value> t) {
    Value y = r.outputs[0];
    Value ta = t[1].valid() ? t[1] : k(y, 0), tb = t[2].valid() ? t[2] : k(y, 0);
    return std::vector<Value>{broadcast_like(op("select", {r.inputs[0], ta, tb}), y)};
  };
}

// clamp(x, lo, hi) = min(max(x, lo), hi): the gradient goes to whichever of the three
// the output equals (x inside the range, lo below it, hi above it).
void set_clamp_rules(OpDef& d) {
  d.vmap = vmap_elementwise_rule;
  auto masks = [](const RuleArgs& r) {
    Value x = r.inputs[0], lo = r.inputs[1], hi = r.inputs[2];
    Value below = op("lt", {x, lo}), above = op("gt", {x, hi});
    Value take_hi = op("logical_or", {above, op("lt", {hi, lo})});
    Value take_lo = op("logical_and", {below, op("logical_not", {take_hi})});
    Value take_x = op("logical_not", {op("logical_or", {take_lo, take_hi})});
    return std::array<Value, 3>{mask(take_x, x), mask(take_lo, x), mask(take_hi, x)};
  };
  d.vjp = [masks](const RuleArgs& r, std::span<const Value> ct) {
    auto m = masks(r);
    std::vector<Value> out;
    for (size_t i = 0; i < 3; ++i) out.push_back(unbroadcast(ct[0] * m[i], r.inputs[i]));
    return out;
  };
  d.jvp = [masks](const RuleArgs& r, std::span<const Value> t) {
    auto m = masks(r);
    Value sum;
    for (size_t i = 0; i < 3; ++i) sum = add_any(sum, mul_any(t[i], m[i]));
    return std::vector<Value>{broadcast_like(sum, r.outputs[0])};
  };
}

// A cast between float or complex dtypes is linear (real -> complex is t -> t + 0i, whose
// transpose takes the real part); casts to or from integers carry no gradient.
void set_cast_rules(OpDef& d) {
  d.vmap = vmap_elementwise_rule;
  d.vjp = [](const RuleArgs& r, std::span<const Value> ct) {
    DType from = r.inputs[0].dtype();
    if (!has_tangents(from) || !has_tangents(r.outputs[0].dtype())) return std::vector<Value>{{}};
    Value c = is_complex(ct[0].dtype()) && !is_complex(from) ? op("real", {ct[0]}) : ct[0];
    return std::vector<Value>{cast(c, from)};
  };
  d.jvp = [](const RuleArgs& r, std::span<const Value> t) {
    DType to = r.outputs[0].dtype();
    return std::vector<Value>{has_tangents(to) ? cast(t[0], to) : Value{}};
  };
}

// ---- definitions ------------------------------------------------------------------------

namespace {

// The input dtypes an op accepts.
// arithmetic: numeric or complex (the ops defined on complex numbers too); inexact: float
// or complex (NumPy's name for both).
enum class Accepts {
  any,
  numeric,
  arithmetic,
  floating,
  inexact,
  float_or_signed,
  boolean,
  int_or_bool
};

void expect_accepts(const InferContext& ctx, size_t i, Accepts a) {
  DType t = ctx.dtype(i);
  switch (a) {
    case Accepts::any:
      return;
    case Accepts::numeric:
      return expect_numeric(ctx, i);
    case Accepts::arithmetic:
      return expect_dtype(ctx, i, !is_bool(t), "a numeric dtype");
    case Accepts::floating:
      return expect_float(ctx, i);
    case Accepts::inexact:
      return expect_dtype(ctx, i, rules::has_tangents(t), "a float or complex dtype");
    case Accepts::float_or_signed:
      return expect_dtype(ctx, i, is_signed(t), "a float or signed integer dtype");
    case Accepts::boolean:
      return expect_bool(ctx, i);
    case Accepts::int_or_bool:
      return expect_dtype(ctx, i, !is_float(t), "an integer or bool dtype");
  }
}

// Float attributes are coefficients: NaN or infinity would silently poison every output.
void expect_finite_float_attrs(const InferContext& ctx) {
  for (const AttrSpec& spec : ctx.op().attrs) {
    if (spec.kind != AttrKind::Float) continue;
    double v = ctx.attrs().get_float(spec.name);
    if (!std::isfinite(v)) ctx.fail("expected attribute '", spec.name, "' to be finite, got ", v);
  }
}

AttrSpec float_attr(const char* name, double def) { return {name, AttrKind::Float, def, {}}; }

struct UnarySpec {
  const char* name;
  Accepts accepts;
  bool to_bool = false;        // output is bool rather than the input dtype
  bool to_real = false;        // a complex input gives its real dtype (abs: the modulus)
  Trait traits = Trait::none;  // in addition to elementwise
  std::vector<AttrSpec> attrs;
  const char* doc;
  AmpRole amp = AmpRole::follow;
};

constexpr Trait kNoGrad = Trait::nondifferentiable;
constexpr Trait kFinite = Trait::finite;     // bounded, or growing at most like x
constexpr AmpRole kF32 = AmpRole::keep_f32;  // range or accuracy: exponentials, logarithms

std::vector<UnarySpec> unary_specs() {
  using A = Accepts;
  return {
      {.name = "neg", .accepts = A::arithmetic, .traits = kFinite, .doc = "-x."},
      {.name = "abs",
       .accepts = A::arithmetic,
       .to_real = true,
       .traits = kFinite,
       .doc = "|x| (of a complex x: its modulus, a real number)."},
      {.name = "sign",
       .accepts = A::numeric,
       .traits = kNoGrad | kFinite,
       .doc = "-1, 0 or 1 by the sign of x."},
      {.name = "square", .accepts = A::arithmetic, .doc = "x * x."},
      {.name = "exp", .accepts = A::inexact, .doc = "e^x.", .amp = kF32},
      {.name = "expm1", .accepts = A::floating, .doc = "e^x - 1, accurate near 0.", .amp = kF32},
      {.name = "log", .accepts = A::inexact, .doc = "Natural logarithm.", .amp = kF32},
      {.name = "log1p", .accepts = A::floating, .doc = "log(1 + x), accurate near 0.", .amp = kF32},
      {.name = "sqrt", .accepts = A::inexact, .doc = "Square root."},
      {.name = "rsqrt", .accepts = A::inexact, .doc = "1 / sqrt(x)."},
      {.name = "reciprocal", .accepts = A::inexact, .doc = "1 / x."},
      {.name = "sin", .accepts = A::inexact, .traits = kFinite, .doc = "Sine."},
      {.name = "cos", .accepts = A::inexact, .traits = kFinite, .doc = "Cosine."},
      {.name = "tan", .accepts = A::inexact, .doc = "Tangent."},
      {.name = "tanh", .accepts = A::inexact, .traits = kFinite, .doc = "Hyperbolic tangent."},
      {.name = "sigmoid", .accepts = A::floating, .traits = kFinite, .doc = "1 / (1 + e^-x)."},
      {.name = "erf", .accepts = A::floating, .traits = kFinite, .doc = "Gauss error function."},
      {.name = "softplus", .accepts = A::floating, .doc = "log(1 + e^x).", .amp = kF32},
      {.name = "softsign", .accepts = A::floating, .traits = kFinite, .doc = "x / (1 + |x|)."},
      {.name = "silu", .accepts = A::floating, .traits = kFinite, .doc = "x * sigmoid(x)."},
      {.name = "floor",
       .accepts = A::floating,
       .traits = kNoGrad | kFinite,
       .doc = "Rounds toward -infinity."},
      {.name = "ceil",
       .accepts = A::floating,
       .traits = kNoGrad | kFinite,
       .doc = "Rounds toward +infinity."},
      {.name = "round",
       .accepts = A::floating,
       .traits = kNoGrad | kFinite,
       .doc = "Rounds to nearest, ties to even."},
      {.name = "fake_quantize",
       .accepts = A::floating,
       .traits = kNoGrad | kFinite,
       .attrs = {float_attr("scale", 1.0), float_attr("zero_point", 0.0), float_attr("qmin", 0.0),
                 float_attr("qmax", 255.0)},
       .doc = "(clamp(round(x / scale) + zero_point, qmin, qmax) - zero_point) * scale: a "
              "QuantizeLinear then DequantizeLinear of one scale, in x's float type (round "
              "half to even)."},
      {.name = "hard_sigmoid",
       .accepts = A::floating,
       .traits = kFinite,
       .attrs = {float_attr("alpha", 0.2), float_attr("beta", 0.5)},
       .doc = "max(0, min(1, alpha * x + beta))."},
      {.name = "gelu",
       .accepts = A::floating,
       .traits = kFinite,
       .attrs = {{"approximate", AttrKind::String, "none", {"none", "tanh"}}},
       .doc = "Gaussian error linear unit, exact or with the tanh approximation."},
      {.name = "elu",
       .accepts = A::floating,
       .traits = kFinite,
       .attrs = {float_attr("alpha", 1.0)},
       .doc = "x if x > 0 else alpha * (e^x - 1)."},
      {.name = "leaky_relu",
       .accepts = A::floating,
       .traits = kFinite,
       .attrs = {float_attr("alpha", 0.01)},
       .doc = "x if x > 0 else alpha * x."},
      {.name = "relu", .accepts = A::float_or_signed, .traits = kFinite, .doc = "max(x, 0)."},
      {.name = "logical_not",
       .accepts = A::boolean,
       .to_bool = true,
       .traits = kNoGrad,
       .doc = "Boolean negation."},
      {.name = "isnan",
       .accepts = A::floating,
       .to_bool = true,
       .traits = kNoGrad,
       .doc = "True where x is NaN."},
      {.name = "isinf",
       .accepts = A::floating,
       .to_bool = true,
       .traits = kNoGrad,
       .doc = "True where x is +-infinity."},
  };
}

void register_unary(OpRegistry& r, const UnarySpec& s) {
  OpDef d;
  d.name = s.name;
  d.traits = Trait::elementwise | s.traits;
  d.arity(1);
  d.attrs = s.attrs;
  d.doc = s.doc;
  d.amp = s.amp;
  d.infer = [acc = s.accepts, to_bool = s.to_bool, to_real = s.to_real](const InferContext& ctx) {
    expect_accepts(ctx, 0, acc);
    expect_finite_float_attrs(ctx);
    DType in = ctx.dtype(0);
    DType out = to_bool ? DType::boolean : (to_real && is_complex(in) ? real_of(in) : in);
    return std::vector<TensorType>{{out, ctx.shape(0)}};
  };
  set_unary_rules(d, d.has(Trait::nondifferentiable) ? nullptr : unary_deriv(s.name));
  if (s.to_real) set_modulus_rules(d);
  r.add(std::move(d));
}

struct BinarySpec {
  const char* name;
  Accepts accepts;
  bool to_bool = false;        // output is bool rather than the input dtype
  Trait traits = Trait::none;  // in addition to elementwise
  const char* doc;
  AmpRole amp = AmpRole::follow;
};

std::vector<BinarySpec> binary_specs() {
  using A = Accepts;
  constexpr Trait ca = Trait::commutative | Trait::associative;
  // Logical and bitwise results are bool / integer: no gradient flows through them.
  constexpr Trait ca_ng = ca | kNoGrad;
  constexpr Trait cmp = kNoGrad;
  constexpr Trait cmp_c = Trait::commutative | kNoGrad;
  return {
      {.name = "add", .accepts = A::arithmetic, .traits = ca, .doc = "a + b."},
      {.name = "sub", .accepts = A::arithmetic, .doc = "a - b."},
      {.name = "mul", .accepts = A::arithmetic, .traits = ca, .doc = "a * b."},
      {.name = "div", .accepts = A::arithmetic, .doc = "a / b."},
      {.name = "pow", .accepts = A::numeric, .doc = "a raised to the power b.", .amp = kF32},
      {.name = "max", .accepts = A::numeric, .traits = ca, .doc = "Elementwise maximum."},
      {.name = "min", .accepts = A::numeric, .traits = ca, .doc = "Elementwise minimum."},
      {.name = "mod", .accepts = A::numeric, .doc = "Floor modulo: the result has the sign of b."},
      {.name = "fmod", .accepts = A::numeric, .doc = "C fmod: the result has the sign of a."},
      {.name = "atan2", .accepts = A::floating, .doc = "Angle of the point (b, a)."},
      {.name = "logical_and",
       .accepts = A::boolean,
       .to_bool = true,
       .traits = ca_ng,
       .doc = "a and b."},
      {.name = "logical_or",
       .accepts = A::boolean,
       .to_bool = true,
       .traits = ca_ng,
       .doc = "a or b."},
      {.name = "logical_xor",
       .accepts = A::boolean,
       .to_bool = true,
       .traits = ca_ng,
       .doc = "a xor b."},
      {.name = "bitwise_and", .accepts = A::int_or_bool, .traits = ca_ng, .doc = "a & b."},
      {.name = "bitwise_or", .accepts = A::int_or_bool, .traits = ca_ng, .doc = "a | b."},
      {.name = "bitwise_xor", .accepts = A::int_or_bool, .traits = ca_ng, .doc = "a ^ b."},
      {.name = "eq", .accepts = A::any, .to_bool = true, .traits = cmp_c, .doc = "a == b."},
      {.name = "ne", .accepts = A::any, .to_bool = true, .traits = cmp_c, .doc = "a != b."},
      {.name = "lt", .accepts = A::any, .to_bool = true, .traits = cmp, .doc = "a < b."},
      {.name = "le", .accepts = A::any, .to_bool = true, .traits = cmp, .doc = "a <= b."},
      {.name = "gt", .accepts = A::any, .to_bool = true, .traits = cmp, .doc = "a > b."},
      {.name = "ge", .accepts = A::any, .to_bool = true, .traits = cmp, .doc = "a >= b."},
  };
}

void register_binary(OpRegistry& r, const BinarySpec& s) {
  OpDef d;
  d.name = s.name;
  d.traits = Trait::elementwise | s.traits;
  d.arity(2);
  d.doc = s.doc;
  d.amp = s.amp;
  d.infer = [acc = s.accepts, to_bool = s.to_bool](const InferContext& ctx) {
    expect_same_dtype(ctx, 0, 1);
    expect_accepts(ctx, 0, acc);
    DType out = to_bool ? DType::boolean : ctx.dtype(0);
    return std::vector<TensorType>{{out, broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1))}};
  };
  set_binary_rules(d, d.has(Trait::nondifferentiable) ? nullptr : binary_deriv(s.name));
  r.add(std::move(d));
}

void register_select(OpRegistry& r) {
  OpDef d;
  d.name = "select";
  d.traits = Trait::elementwise;
  d.arity(3);
  d.doc = "a where cond is true, else b (inputs broadcast).";
  d.infer = [](const InferContext& ctx) {
    expect_bool(ctx, 0);
    expect_same_dtype(ctx, 1, 2);
    return std::vector<TensorType>{{ctx.dtype(1), broadcast_all(ctx)}};
  };
  set_select_rules(d);
  r.add(std::move(d));
}

void register_clamp(OpRegistry& r) {
  OpDef d;
  d.name = "clamp";
  d.traits = Trait::elementwise;
  d.arity(3);
  d.doc = "min(max(x, lo), hi) (inputs broadcast).";
  d.infer = [](const InferContext& ctx) {
    expect_same_dtype(ctx, 0, 1);
    expect_same_dtype(ctx, 0, 2);
    expect_numeric(ctx, 0);
    return std::vector<TensorType>{{ctx.dtype(0), broadcast_all(ctx)}};
  };
  set_clamp_rules(d);
  r.add(std::move(d));
}

void register_cast(OpRegistry& r) {
  OpDef d;
  d.name = "cast";
  d.traits = Trait::elementwise;
  d.arity(1).attr("dtype", AttrKind::DType);
  d.doc = "Converts x to another dtype.";
  d.infer = [](const InferContext& ctx) {
    DType from = ctx.dtype(0), to = ctx.attrs().get_dtype("dtype");
    // Dropping an imaginary part is a choice the caller makes (real, abs), never a cast's.
    if (is_complex(from) && !is_complex(to))
      ctx.fail_type("expected a complex dtype to cast ", dtype_name(from),
                    " to (take real() or abs() for a real one), got ", dtype_name(to));
    if (is_complex(to) && is_string(from))
      ctx.fail_type("expected a number to cast to ", dtype_name(to), ", got a string");
    return std::vector<TensorType>{{to, ctx.shape(0)}};
  };
  set_cast_rules(d);
  r.add(std::move(d));
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  for (const auto& s : unary_specs()) register_unary(r, s);
  for (const auto& s : binary_specs()) register_binary(r, s);
  register_select(r);
  register_clamp(r);
  register_cast(r);
}

}  // namespace rlx::detail
