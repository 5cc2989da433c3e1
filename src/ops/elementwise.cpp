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
    {"neg", [](Value x, Value, const Attrs&) { return k(x, -1); }},
    {"abs", [](Value x, Value, const Attrs&) { return op("sign", {x}); }},
    {"square", [](Value x, Value, const Attrs&) { return 2.0 * x; }},
    {"exp", [](Value, Value y, const Attrs&) { return y; }},
    {"expm1", [](Value, Value y, const Attrs&) { return y + 1.0; }},
    {"log", [](Value x, Value, const Attrs&) { return op("reciprocal", {x}); }},
    {"log1p", [](Value x, Value, const Attrs&) { return op("reciprocal", {x + 1.0}); }},
    {"sqrt", [](Value, Value y, const Attrs&) { return 0.5 / y; }},
    {"rsqrt", [](Value x, Value y, const Attrs&) { return -0.5 * y / x; }},
    {"reciprocal", [](Value, Value y, const Attrs&) { return -(y * y); }},
    {"sin", [](Value x, Value, const Attrs&) { return op("cos", {x}); }},
    {"cos", [](Value x, Value, const Attrs&) { return -op("sin", {x}); }},
    {"tan", [](Value, Value y, const Attrs&) { return 1.0 + y * y; }},
    {"tanh", [](Value, Value y, const Attrs&) { return 1.0 - y * y; }},
    {"sigmoid", [](Value, Value y, const Attrs&) { return y * (1.0 - y); }},
    {"erf", [](Value x, Value,
               const Attrs&) { return k(x, 2 / std::sqrt(std::numbers::pi)) * exp(-(x * x)); }},
    {"softplus", [](Value x, Value, const Attrs&) { return sigmoid(x); }},
    {"silu",
     [](Value x, Value, const Attrs&) {
       Value s = sigmoid(x);
       return s * (1.0 + x * (1.0 - s));
     }},
    {"hard_sigmoid",
     [](Value x, Value, const Attrs& at) {
       Value z = x * at.get_float("alpha") + at.get_float("beta");
       Value inside = op("logical_and", {op("gt", {z, k(z, 0)}), op("lt", {z, k(z, 1)})});
       return mask(inside, x) * at.get_float("alpha");
     }},
    {"gelu", gelu_deriv},
    {"elu",
     [](Value x, Value y, const Attrs& at) {
       return op("select", {op("gt", {x, k(x, 0)}), k(x, 1), y + at.get_float("alpha")});
     }},
    {"leaky_relu",
     [](Value x, Value, const Attrs& at) {
       return op("select", {op("gt", {x, k(x, 0)}), k(x, 1), k(x, at.get_float("alpha"))});
     }},
    {"relu",
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
    {"add", {nullptr, nullptr}},
    {"sub", {nullptr, [](Value a, Value, Value) { return k(a, -1); }}},
    {"mul", {[](Value, Value b, Value) { return b; }, [](Value a, Value, Value) { return a; }}},
    {"div",
     {[](Value, Value b, Value) { return op("reciprocal", {b}); },
      [](Value, Value b, Value y) { return -y / b; }}},
    {"pow",
     {[](Value a, Value b, Value) {
        return b * op("pow", {a, b - 1.0});
      },
      [](Value a, Value, Value y) { return y * log(a); }}},
    {"max",
     {[](Value a, Value b, Value) { return wins(a, b, "gt"); },
      [](Value a, Value b, Value) { return wins(b, a, "gt"); }}},
    {"min",
     {[](Value a, Value b, Value) { return wins(a, b, "lt"); },
      [](Value a, Value b, Value) { return wins(b, a, "lt"); }}},
    {"mod",
     {[](Value a, Value, Value) { return k(a, 1); },
      [](Value a, Value b, Value) { return -op("floor", {a / b}); }}},
    {"fmod",
     {[](Value a, Value, Value) { return k(a, 1); },
      [](Value a, Value b, Value) { return -trunc(a / b); }}},
    {"atan2",
     {[](Value a, Value b, Value) { return b / (a * a + b * b); },
      [](Value a, Value b, Value) { return -a / (a * a + b * b); }}},
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

// A float-to-float cast is linear; casts to or from integers carry no gradient.
void set_cast_rules(OpDef& d) {
  d.vmap = vmap_elementwise_rule;
  d.vjp = [](const RuleArgs& r, std::span<const Value> ct) {
    bool both_float = is_float(r.inputs[0].dtype()) && is_float(r.outputs[0].dtype());
    return std::vector<Value>{both_float ? cast(ct[0], r.inputs[0].dtype()) : Value{}};
  };
  d.jvp = [](const RuleArgs& r, std::span<const Value> t) {
    bool to_float = is_float(r.outputs[0].dtype());
    return std::vector<Value>{to_float ? cast(t[0], r.outputs[0].dtype()) : Value{}};
  };
}

// ---- definitions ------------------------------------------------------------------------

namespace {

// The input dtypes an op accepts.
enum class Accepts { any, numeric, floating, float_or_signed, boolean, int_or_bool };

void expect_accepts(const InferContext& ctx, size_t i, Accepts a) {
  DType t = ctx.dtype(i);
  switch (a) {
    case Accepts::any:
      return;
    case Accepts::numeric:
      return expect_numeric(ctx, i);
    case Accepts::floating:
      return expect_float(ctx, i);
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
  bool to_bool;  // output is bool rather than the input dtype
  Trait traits;  // in addition to elementwise
  std::vector<AttrSpec> attrs;
  const char* doc;
  AmpRole amp = AmpRole::follow;
};

constexpr Trait kNone = Trait::none;
constexpr Trait kNoGrad = Trait::nondifferentiable;
constexpr Trait kFinite = Trait::finite;     // bounded, or growing at most like x
constexpr AmpRole kF32 = AmpRole::keep_f32;  // range or accuracy: exponentials, logarithms

std::vector<UnarySpec> unary_specs() {
  using A = Accepts;
  return {
      {"neg", A::numeric, false, kFinite, {}, "-x."},
      {"abs", A::numeric, false, kFinite, {}, "|x|."},
      {"sign", A::numeric, false, kNoGrad | kFinite, {}, "-1, 0 or 1 by the sign of x."},
      {"square", A::numeric, false, kNone, {}, "x * x."},
      {"exp", A::floating, false, kNone, {}, "e^x.", kF32},
      {"expm1", A::floating, false, kNone, {}, "e^x - 1, accurate near 0.", kF32},
      {"log", A::floating, false, kNone, {}, "Natural logarithm.", kF32},
      {"log1p", A::floating, false, kNone, {}, "log(1 + x), accurate near 0.", kF32},
      {"sqrt", A::floating, false, kNone, {}, "Square root."},
      {"rsqrt", A::floating, false, kNone, {}, "1 / sqrt(x)."},
      {"reciprocal", A::floating, false, kNone, {}, "1 / x."},
      {"sin", A::floating, false, kFinite, {}, "Sine."},
      {"cos", A::floating, false, kFinite, {}, "Cosine."},
      {"tan", A::floating, false, kNone, {}, "Tangent."},
      {"tanh", A::floating, false, kFinite, {}, "Hyperbolic tangent."},
      {"sigmoid", A::floating, false, kFinite, {}, "1 / (1 + e^-x)."},
      {"erf", A::floating, false, kFinite, {}, "Gauss error function."},
      {"softplus", A::floating, false, kNone, {}, "log(1 + e^x).", kF32},
      {"silu", A::floating, false, kFinite, {}, "x * sigmoid(x)."},
      {"floor", A::floating, false, kNoGrad | kFinite, {}, "Rounds toward -infinity."},
      {"ceil", A::floating, false, kNoGrad | kFinite, {}, "Rounds toward +infinity."},
      {"round", A::floating, false, kNoGrad | kFinite, {}, "Rounds to nearest, ties to even."},
      {"hard_sigmoid",
       A::floating,
       false,
       kFinite,
       {float_attr("alpha", 0.2), float_attr("beta", 0.5)},
       "max(0, min(1, alpha * x + beta))."},
      {"gelu",
       A::floating,
       false,
       kFinite,
       {{"approximate", AttrKind::String, "none", {"none", "tanh"}}},
       "Gaussian error linear unit, exact or with the tanh approximation."},
      {"elu",
       A::floating,
       false,
       kFinite,
       {float_attr("alpha", 1.0)},
       "x if x > 0 else alpha * (e^x - 1)."},
      {"leaky_relu",
       A::floating,
       false,
       kFinite,
       {float_attr("alpha", 0.01)},
       "x if x > 0 else alpha * x."},
      {"relu", A::float_or_signed, false, kFinite, {}, "max(x, 0)."},
      {"logical_not", A::boolean, true, kNoGrad, {}, "Boolean negation."},
      {"isnan", A::floating, true, kNoGrad, {}, "True where x is NaN."},
      {"isinf", A::floating, true, kNoGrad, {}, "True where x is +-infinity."},
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
  d.infer = [acc = s.accepts, to_bool = s.to_bool](const InferContext& ctx) {
    expect_accepts(ctx, 0, acc);
    expect_finite_float_attrs(ctx);
    DType out = to_bool ? DType::boolean : ctx.dtype(0);
    return std::vector<TensorType>{{out, ctx.shape(0)}};
  };
  set_unary_rules(d, d.has(Trait::nondifferentiable) ? nullptr : unary_deriv(s.name));
  r.add(std::move(d));
}

struct BinarySpec {
  const char* name;
  Accepts accepts;
  bool to_bool;  // output is bool rather than the input dtype
  Trait traits;  // in addition to elementwise
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
      {"add", A::numeric, false, ca, "a + b."},
      {"sub", A::numeric, false, kNone, "a - b."},
      {"mul", A::numeric, false, ca, "a * b."},
      {"div", A::numeric, false, kNone, "a / b."},
      {"pow", A::numeric, false, kNone, "a raised to the power b.", kF32},
      {"max", A::numeric, false, ca, "Elementwise maximum."},
      {"min", A::numeric, false, ca, "Elementwise minimum."},
      {"mod", A::numeric, false, kNone, "Floor modulo: the result has the sign of b."},
      {"fmod", A::numeric, false, kNone, "C fmod: the result has the sign of a."},
      {"atan2", A::floating, false, kNone, "Angle of the point (b, a)."},
      {"logical_and", A::boolean, true, ca_ng, "a and b."},
      {"logical_or", A::boolean, true, ca_ng, "a or b."},
      {"logical_xor", A::boolean, true, ca_ng, "a xor b."},
      {"bitwise_and", A::int_or_bool, false, ca_ng, "a & b."},
      {"bitwise_or", A::int_or_bool, false, ca_ng, "a | b."},
      {"bitwise_xor", A::int_or_bool, false, ca_ng, "a ^ b."},
      {"eq", A::any, true, cmp_c, "a == b."},
      {"ne", A::any, true, cmp_c, "a != b."},
      {"lt", A::any, true, cmp, "a < b."},
      {"le", A::any, true, cmp, "a <= b."},
      {"gt", A::any, true, cmp, "a > b."},
      {"ge", A::any, true, cmp, "a >= b."},
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
    return std::vector<TensorType>{{ctx.attrs().get_dtype("dtype"), ctx.shape(0)}};
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
