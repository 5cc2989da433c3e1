// Derivatives of the elementwise ops as graph expressions (so they differentiate again:
// hvp is jvp of grad), and the rules built from them: vjp = ct * f'(x) reduced back over
// broadcasting, jvp = t * f'(x), vmap = the op on batch-aligned operands.
#include "ops/elementwise_rules.h"

#include <cmath>
#include <numbers>

#include "rlx/rules.h"

namespace rlx::detail {

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

}  // namespace rlx::detail
