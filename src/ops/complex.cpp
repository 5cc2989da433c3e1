// The complex family: complex(re, im), real, imag, conj and angle, the ops that move
// between c64 / c128 and their f32 / f64 parts.
//
// Gradients follow JAX's convention for complex numbers: a rule is the transpose of the
// op's real-linear map without conjugation, so that for a real-valued loss L of a complex
// z = x + iy the gradient is dL/dx - i dL/dy (conj of the steepest ascent direction).
// Then real's transpose is t -> t + 0i, imag's t -> 0 - it, complex's t -> (re t, -im t),
// conj's t -> conj t, and mul / div by a complex number keep their real-number rules.
// They carry no Trait::elementwise: the passes that fuse or re-lay-out elementwise ops
// compute in real arithmetic.
#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;

void expect_complex(const InferContext& ctx, size_t i) {
  expect_dtype(ctx, i, is_complex(ctx.dtype(i)), "a complex dtype (c64, c128)");
}

Value complex_of_parts(Value re, Value im) { return op("complex", {re, im}); }
Value real_part(Value z) { return op("real", {z}); }
Value imag_part(Value z) { return op("imag", {z}); }

VmapResult vmap_rule(const RuleArgs& a, std::span<const int> in_axes) {
  return rules::vmap_elementwise(a, in_axes);
}

void add_complex(OpRegistry& r) {
  OpDef d;
  d.name = "complex";
  d.arity(2);
  d.doc = "re + i im: f32 parts give c64, f64 parts c128 (inputs broadcast).";
  d.infer = [](const InferContext& ctx) {
    expect_same_dtype(ctx, 0, 1);
    expect_dtype(ctx, 0, ctx.dtype(0) == DType::f32 || ctx.dtype(0) == DType::f64,
                 "f32 or f64 parts");
    return Types{{complex_of(ctx.dtype(0)), broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1))}};
  };
  d.vjp = [](const RuleArgs& a, std::span<const Value> ct) {
    return std::vector<Value>{rules::unbroadcast(real_part(ct[0]), a.inputs[0]),
                              rules::unbroadcast(-imag_part(ct[0]), a.inputs[1])};
  };
  d.jvp = [](const RuleArgs& a, std::span<const Value> t) {
    Value re = t[0].valid() ? t[0] : rules::zeros_like(a.inputs[0]);
    Value im = t[1].valid() ? t[1] : rules::zeros_like(a.inputs[1]);
    return std::vector<Value>{rules::broadcast_like(complex_of_parts(re, im), a.outputs[0])};
  };
  d.vmap = vmap_rule;
  r.add(std::move(d));
}

// real / imag: a complex input's part, in the matching real dtype.
void add_part(OpRegistry& r, const char* name, const char* doc, bool imag) {
  OpDef d;
  d.name = name;
  d.arity(1);
  d.doc = doc;
  d.infer = [](const InferContext& ctx) {
    expect_complex(ctx, 0);
    return Types{{real_of(ctx.dtype(0)), ctx.shape(0)}};
  };
  d.vjp = [imag](const RuleArgs&, std::span<const Value> ct) {
    Value zero = rules::zeros_like(ct[0]);
    return std::vector<Value>{imag ? complex_of_parts(zero, -ct[0])
                                   : complex_of_parts(ct[0], zero)};
  };
  d.jvp = rules::linear_jvp;
  d.vmap = vmap_rule;
  r.add(std::move(d));
}

void add_conj(OpRegistry& r) {
  OpDef d;
  d.name = "conj";
  d.arity(1);
  d.doc = "The complex conjugate re - i im.";
  d.infer = [](const InferContext& ctx) {
    expect_complex(ctx, 0);
    return Types{{ctx.dtype(0), ctx.shape(0)}};
  };
  d.vjp = [](const RuleArgs&, std::span<const Value> ct) {
    return std::vector<Value>{op("conj", {ct[0]})};
  };
  d.jvp = rules::linear_jvp;
  d.vmap = vmap_rule;
  r.add(std::move(d));
}

// angle(z) = atan2(im, re); of a real x (as NumPy's): 0, or pi for negative x. With
// r2 = |z|^2, d angle = im(conj(z) dz) / r2, whose transpose sends ct to -i ct conj(z) / r2
// (0 at z = 0, as abs's rule).
void add_angle(OpRegistry& r) {
  OpDef d;
  d.name = "angle";
  d.arity(1);
  d.doc = "The argument atan2(im, re) of x in (-pi, pi] (a real x: 0 or pi).";
  d.infer = [](const InferContext& ctx) {
    DType t = ctx.dtype(0);
    expect_dtype(ctx, 0, rules::has_tangents(t), "a float or complex dtype");
    return Types{{is_complex(t) ? real_of(t) : t, ctx.shape(0)}};
  };
  auto inv_r2 = [](Value z) {
    Value re = real_part(z), im = imag_part(z);
    Value r2 = re * re + im * im;
    Value zero = op("eq", {r2, scalar_like(r2, 0)});
    return op("select", {zero, rules::zeros_like(r2), scalar_like(r2, 1) / r2});
  };
  d.vjp = [inv_r2](const RuleArgs& a, std::span<const Value> ct) {
    Value z = a.inputs[0];
    if (!is_complex(z.dtype())) return std::vector<Value>{rules::zeros_like(z)};
    Value s = ct[0] * inv_r2(z);
    return std::vector<Value>{op("conj", {z}) * complex_of_parts(rules::zeros_like(s), -s)};
  };
  d.jvp = [inv_r2](const RuleArgs& a, std::span<const Value> t) {
    Value z = a.inputs[0];
    if (!is_complex(z.dtype())) return std::vector<Value>{rules::zeros_like(a.outputs[0])};
    return std::vector<Value>{imag_part(op("conj", {z}) * t[0]) * inv_r2(z)};
  };
  d.vmap = vmap_rule;
  r.add(std::move(d));
}

}  // namespace

void register_complex_ops(OpRegistry& r) {
  add_complex(r);
  add_part(r, "real", "The real part of a complex x (c64: f32, c128: f64).", false);
  add_part(r, "imag", "The imaginary part of a complex x (c64: f32, c128: f64).", true);
  add_conj(r);
  add_angle(r);
}

}  // namespace rlx::detail
