// Elementwise ops: unary math, binary arithmetic / logic / comparison with NumPy
// broadcasting, select, clamp and cast. Families of similar ops are registered from tables.
#include <cmath>

#include "ops/elementwise_rules.h"
#include "ops/families.h"
#include "ops/infer_util.h"

namespace rlx::detail {

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
