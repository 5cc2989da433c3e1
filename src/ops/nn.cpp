// Neural-network ops: softmax, log_softmax, the norms (layer, rms, group, batch),
// embedding, dropout and cross_entropy, each with its inference and vjp / jvp / vmap rules
// (attention is attention.cpp; the sliding-window ops window.cpp). What a backward pass
// needs from the forward one (the normalised x, the softmax of the logits) is recomputed
// from the inputs with core ops, so that the rules are differentiable again (hvp).
#include <algorithm>
#include <string>

#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "ops/rule_util.h"
#include "rlx/axes.h"
#include "rlx/error.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using rules::add_any;
using rules::expand_dims;
using rules::moveaxis;
using rules::mul_any;

// Input i (`role`) must have the shape `want` (described by `ref`) dim by dim; returns the
// unified dims so that a static size on one side refines a symbol on the other.
Shape unify_shape(const InferContext& ctx, size_t i, const Shape& want, std::string_view role,
                  std::string_view ref) {
  if (ctx.rank(i) != int64_t(want.size()))
    ctx.fail("expected input ", i, " (", role, ") of shape ", shape_str(want), " like ", ref,
             ", got ", ctx.input(i).str());
  Shape out(want.size());
  for (size_t d = 0; d < want.size(); ++d)
    out[d] = unify_dims(ctx, want[d], ctx.shape(i)[d], str_cat("dims of ", role, " and ", ref));
  return out;
}

Value mean_keep(Value x, const IntList& axes) {
  return op("mean", {x}, {{"axes", axes}, {"keepdims", true}});
}

// The dtype the device kernels compute a float dtype in: f32 for 16-bit ones.
DType math_of(DType dt) { return dtype_size(dt) == 2 ? DType::f32 : dt; }

Value input_or_none(const RuleArgs& a, size_t i) {
  return i < a.inputs.size() ? a.inputs[i] : Value{};
}
bool any_batched(AxisSpan in_axes, size_t from) {
  return std::any_of(in_axes.begin() + std::ptrdiff_t(from), in_axes.end(),
                     [](int ax) { return ax >= 0; });
}

// ---- softmax, log_softmax ----------------------------------------------------------

// The Jacobian diag(y) - y y^T is symmetric: the vjp and the jvp are one formula.
Values softmax_vjp(const RuleArgs& a, ValueSpan ct) {
  Value y = a.outputs[0], cy = ct[0] * y;
  return {cy - y * sum_keep(cy, {a.attrs.get_int("axis")})};
}
Values softmax_jvp(const RuleArgs& a, ValueSpan t) { return softmax_vjp(a, t); }

Values log_softmax_vjp(const RuleArgs& a, ValueSpan ct) {
  Value p = exp(a.outputs[0]);
  return {ct[0] - p * sum_keep(ct[0], {a.attrs.get_int("axis")})};
}
Values log_softmax_jvp(const RuleArgs& a, ValueSpan t) {
  Value p = exp(a.outputs[0]);
  return {t[0] - sum_keep(p * t[0], {a.attrs.get_int("axis")})};
}

VmapResult softmax_vmap(const RuleArgs& a, AxisSpan in_axes) {
  static const char* const kAxis[] = {"axis"};
  return rules::vmap_shift_axes(a, in_axes, kAxis);
}

void register_softmax(OpRegistry& r) {
  struct Entry {
    const char* name;
    const char* doc;
    VjpFn vjp;
    JvpFn jvp;
  };
  const Entry table[] = {
      {.name = "softmax",
       .doc = "exp(x) / sum(exp(x)) along `axis`.",
       .vjp = softmax_vjp,
       .jvp = softmax_jvp},
      {.name = "log_softmax",
       .doc = "x - logsumexp(x) along `axis`.",
       .vjp = log_softmax_vjp,
       .jvp = log_softmax_jvp},
  };
  for (const Entry& e : table) {
    OpDef d;
    d.name = e.name;
    d.amp = AmpRole::keep_f32;
    d.arity(1).attr("axis", AttrKind::Int, AttrValue(-1));
    d.doc = e.doc;
    d.infer = [](const InferContext& ctx) {
      expect_float(ctx, 0);
      normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0));
      return one(ctx.input(0));
    };
    d.vjp = e.vjp;
    d.jvp = e.jvp;
    d.vmap = softmax_vmap;
    r.add(std::move(d));
  }
}

// ---- normalisation: shared pieces --------------------------------------------------

struct Normed {
  Value xhat, inv;  // the normalised x and 1 / sqrt(var + eps), over the reduced axes
};

Normed normalize(Value x, const IntList& axes, double eps, bool center) {
  Value xc = center ? x - mean_keep(x, axes) : x;
  Value inv = op("rsqrt", {mean_keep(xc * xc, axes) + eps});
  return {xc * inv, inv};
}

// The Jacobian of xhat w.r.t. x applied to g; it is symmetric, so this is the vjp and
// the jvp: inv * (g - mean(g) - xhat * mean(g * xhat)) (no mean(g) term when not centred).
Value normalize_dot(Value g, const Normed& n, const IntList& axes, bool center) {
  Value d = g - n.xhat * mean_keep(g * n.xhat, axes);
  if (center) d = d - mean_keep(g, axes);
  return d * n.inv;
}

// layer_norm / rms_norm over [axis, rank).
struct Trailing {
  IntList axes;
  Normed n;
};

Trailing trailing(const RuleArgs& a, bool center) {
  Value x = a.inputs[0];
  IntList axes = range(norm_axis(a.attrs.get_int("axis"), x.rank()), x.rank());
  Normed n = normalize(x, axes, a.attrs.get_float("epsilon"), center);
  return {std::move(axes), n};
}

// scale and bias of the normalised dims' shape exactly, or absent: layer_norm_grad's case.
bool plain_params(const RuleArgs& a) {
  Value x = a.inputs[0];
  int64_t axis = norm_axis(a.attrs.get_int("axis"), x.rank());
  Shape tail(x.shape().begin() + axis, x.shape().end());
  for (size_t i = 1; i < a.inputs.size(); ++i)
    if (!(a.inputs[i].shape() == tail) || a.inputs[i].dtype() != x.dtype()) return false;
  return true;
}

Values trailing_vjp(const RuleArgs& a, ValueSpan ct, bool center) {
  Value scale = input_or_none(a, 1), bias = input_or_none(a, 2);
  if (plain_params(a) && ct[0].dtype() == a.inputs[0].dtype()) {
    std::vector<Value> in{a.inputs[0], ct[0]};
    if (scale.valid()) in.push_back(scale);
    Values g = op_n("layer_norm_grad", in,
                    {{"axis", a.attrs.get_int("axis")},
                     {"epsilon", a.attrs.get_float("epsilon")},
                     {"center", center}});
    Values out{g[0]};
    if (scale.valid()) out.push_back(g[1]);
    if (bias.valid()) out.push_back(g[2]);
    return out;
  }
  Trailing tr = trailing(a, center);
  Value g = scale.valid() ? ct[0] * scale : ct[0];
  Values out{normalize_dot(g, tr.n, tr.axes, center)};
  if (scale.valid()) out.push_back(rules::unbroadcast(ct[0] * tr.n.xhat, scale));
  if (bias.valid()) out.push_back(rules::unbroadcast(ct[0], bias));
  return out;
}

Values trailing_jvp(const RuleArgs& a, ValueSpan t, bool center) {
  Trailing tr = trailing(a, center);
  Value scale = input_or_none(a, 1);
  Value dy;
  if (t[0].valid()) {
    dy = normalize_dot(t[0], tr.n, tr.axes, center);
    if (scale.valid()) dy = dy * scale;
  }
  if (Value ts = tangent(t, 1); ts.valid()) dy = add_any(dy, tr.n.xhat * ts);
  if (Value tb = tangent(t, 2); tb.valid())
    dy = add_any(dy, rules::broadcast_like(tb, a.outputs[0]));
  return {dy};
}

// x [N, C, ...] viewed as [N, G, C/G * S] (after `lead` batch axes): each group's
// statistics are over the last axis.
Value grouped(Value x, int64_t groups, int64_t lead = 0) {
  IntList spec(size_t(lead) + 1, 0);
  spec.push_back(groups);
  spec.push_back(-1);
  return op("reshape", {x}, {{"shape", spec}});
}

// A per-channel vector [C] shaped to broadcast against [N, C, S...] of rank `rank`.
Value per_channel(Value p, int64_t rank) { return expand(p, range(1, rank - 1)); }

// Sum over every axis but the channel axis 1: [N, C, S...] -> [C].
Value sum_but_channels(Value x) {
  IntList axes = range(0, x.rank());
  axes.erase(axes.begin() + 1);
  return rules::sum(x, axes);
}

// ---- layer_norm, rms_norm ----------------------------------------------------------

// x normalised over [axis, rank); the optional inputs (scale, bias) have x.shape[axis:].
std::vector<TensorType> infer_trailing_norm(const InferContext& ctx) {
  expect_all_float(ctx);
  expect_at_least(ctx, "epsilon", ctx.attrs().get_float("epsilon"), 0.0);
  int64_t axis = normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0));
  Shape out = ctx.shape(0);
  Shape tail(out.begin() + axis, out.end());
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    tail = unify_shape(ctx, i, tail, i == 1 ? "scale" : "bias", "x.shape[axis:]");
  std::copy(tail.begin(), tail.end(), out.begin() + axis);
  return one({ctx.dtype(0), out});
}

Values layer_norm_vjp(const RuleArgs& a, ValueSpan ct) { return trailing_vjp(a, ct, true); }

// 16-bit inputs in f32, as the device kernels compute them; the results in their dtype.
Values layer_norm_grad_decomposed(const RuleArgs& a) {
  DType dt = a.inputs[0].dtype(), math = math_of(dt);
  Value x = to(a.inputs[0], math), dy = to(a.inputs[1], math), scale = input_or_none(a, 2);
  if (scale.valid()) scale = to(scale, math);
  bool center = a.attrs.get_bool("center");
  IntList axes = range(norm_axis(a.attrs.get_int("axis"), x.rank()), x.rank());
  Normed n = normalize(x, axes, a.attrs.get_float("epsilon"), center);
  Value g = scale.valid() ? dy * scale : dy;
  Value dx = normalize_dot(g, n, axes, center);
  // Over the leading axes (none: the per-element values themselves).
  IntList lead = range(0, axes.empty() ? x.rank() : axes.front());
  auto over_lead = [&](Value v) { return to(lead.empty() ? v : rules::sum(v, lead), dt); };
  return {to(dx, dt), over_lead(dy * n.xhat), over_lead(dy)};
}
Values layer_norm_jvp(const RuleArgs& a, ValueSpan t) { return trailing_jvp(a, t, true); }
Values rms_norm_vjp(const RuleArgs& a, ValueSpan ct) { return trailing_vjp(a, ct, false); }
Values rms_norm_jvp(const RuleArgs& a, ValueSpan t) { return trailing_jvp(a, t, false); }

VmapResult trailing_norm_vmap(const RuleArgs& a, AxisSpan in_axes) {
  static const char* const kAxis[] = {"axis"};
  if (!any_batched(in_axes, 1)) return rules::vmap_shift_axes(a, in_axes, kAxis);
  // A batched scale or bias cannot enter the op (its shape is x.shape[axis:]): normalise
  // without them, then apply them by broadcasting.
  Value x = a.inputs[0];
  int64_t xb = in_axes[0] >= 0;
  int64_t axis = norm_axis(a.attrs.get_int("axis"), x.rank() - xb);
  if (xb) x = moveaxis(x, in_axes[0], 0);
  Attrs attrs = a.attrs;
  attrs.set("axis", axis + xb);
  Value y = op(rules::rule_op_name(a), {x}, attrs);
  for (size_t i = 1; i < a.inputs.size(); ++i) {
    Value p = a.inputs[i];
    if (in_axes[i] >= 0) p = expand(moveaxis(p, in_axes[i], 0), range(1, axis + 1));
    y = i == 1 ? y * p : y + p;
  }
  return {{y}, {0}};
}

void register_trailing_norms(OpRegistry& r) {
  OpDef ln;
  ln.name = "layer_norm";
  ln.amp = AmpRole::keep_f32;
  ln.arity(1, 3)
      .attr("axis", AttrKind::Int, AttrValue(-1))
      .attr("epsilon", AttrKind::Float, AttrValue(1e-5));
  ln.doc = "(x - mean) / sqrt(var + epsilon) * scale + bias over axes [axis, rank).";
  ln.infer = infer_trailing_norm;
  ln.vjp = layer_norm_vjp;
  ln.jvp = layer_norm_jvp;
  ln.vmap = trailing_norm_vmap;
  r.add(std::move(ln));

  OpDef rms;
  rms.name = "rms_norm";
  rms.amp = AmpRole::keep_f32;
  rms.arity(1, 2)
      .attr("axis", AttrKind::Int, AttrValue(-1))
      .attr("epsilon", AttrKind::Float, AttrValue(1e-6));
  rms.doc = "x / sqrt(mean(x^2) + epsilon) * scale over axes [axis, rank).";
  rms.infer = infer_trailing_norm;
  rms.vjp = rms_norm_vjp;
  rms.jvp = rms_norm_jvp;
  rms.vmap = trailing_norm_vmap;
  r.add(std::move(rms));

  // Both norms' vjp as one op: a device with a kernel for it (cuda) reads x and dy once
  // for all three gradients, instead of a dozen reductions and elementwise passes.
  OpDef g;
  g.name = "layer_norm_grad";
  g.amp = AmpRole::keep_f32;
  g.arity(2, 3)
      .attr("axis", AttrKind::Int, AttrValue(-1))
      .attr("epsilon", AttrKind::Float, AttrValue(1e-5))
      .attr("center", AttrKind::Bool, AttrValue(true));
  g.doc =
      "(dx, dscale, dbias) of layer_norm (center) or rms_norm (not center) over [axis, rank) "
      "for x, the output cotangent dy and the optional scale (of x.shape[axis:]); dscale and "
      "dbias have x.shape[axis:].";
  g.infer = [](const InferContext& ctx) {
    expect_all_float(ctx);
    expect_at_least(ctx, "epsilon", ctx.attrs().get_float("epsilon"), 0.0);
    int64_t axis = normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0));
    for (size_t i = 1; i < ctx.num_inputs(); ++i) expect_same_dtype(ctx, 0, i);
    Shape x = unify_shape(ctx, 1, ctx.shape(0), "dy", "x");
    Shape tail(x.begin() + axis, x.end());
    if (ctx.num_inputs() == 3) tail = unify_shape(ctx, 2, tail, "scale", "x.shape[axis:]");
    std::copy(tail.begin(), tail.end(), x.begin() + axis);
    return std::vector<TensorType>{{ctx.dtype(0), x}, {ctx.dtype(0), tail}, {ctx.dtype(0), tail}};
  };
  g.decompose = layer_norm_grad_decomposed;
  set_rules_by_decomposition(g);
  r.add(std::move(g));
}

// ---- group_norm, batch_norm --------------------------------------------------------

// x [N, C, ...]; every other input is a per-channel vector [C].
std::vector<TensorType> infer_channel_norm(const InferContext& ctx) {
  expect_all_float(ctx);
  expect_at_least(ctx, "epsilon", ctx.attrs().get_float("epsilon"), 0.0);
  expect_min_rank(ctx, 0, 2);
  Shape out = ctx.shape(0);
  Shape c{out[1]};
  static const char* const kRoles[] = {"x", "scale", "bias", "mean", "var"};
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    c = unify_shape(ctx, i, c, kRoles[i], "[C] = x.shape[1]");
  out[1] = c[0];
  if (ctx.op().find_attr("num_groups")) {
    int64_t g = ctx.attrs().get_int("num_groups");
    if (g < 1) ctx.fail("expected num_groups >= 1, got ", g);
    if (out[1].is_static() && out[1].value() % g != 0)
      ctx.fail("expected channels divisible by num_groups ", g, ", got ", ctx.input(0).str());
  }
  return one({ctx.dtype(0), out});
}

// group_norm

Values group_norm_vjp(const RuleArgs& a, ValueSpan ct) {
  Value x = a.inputs[0], scale = a.inputs[1];
  int64_t groups = a.attrs.get_int("num_groups");
  const IntList last{-1};
  Normed n = normalize(grouped(x, groups), last, a.attrs.get_float("epsilon"), true);
  Value g = grouped(ct[0] * per_channel(scale, x.rank()), groups);
  Value dx = rules::reshape_like(normalize_dot(g, n, last, true), x);
  Value xhat = rules::reshape_like(n.xhat, x);
  return {dx, sum_but_channels(ct[0] * xhat), sum_but_channels(ct[0])};
}

Values group_norm_jvp(const RuleArgs& a, ValueSpan t) {
  Value x = a.inputs[0], scale = a.inputs[1];
  int64_t groups = a.attrs.get_int("num_groups"), rank = x.rank();
  const IntList last{-1};
  Normed n = normalize(grouped(x, groups), last, a.attrs.get_float("epsilon"), true);
  Value dy;
  if (t[0].valid()) {
    Value d = rules::reshape_like(normalize_dot(grouped(t[0], groups), n, last, true), x);
    dy = d * per_channel(scale, rank);
  }
  if (t[1].valid()) dy = add_any(dy, rules::reshape_like(n.xhat, x) * per_channel(t[1], rank));
  if (t[2].valid()) dy = add_any(dy, rules::broadcast_like(per_channel(t[2], rank), a.outputs[0]));
  return {dy};
}

// layer_norm over the grouped view (the batch rides along in front: merging it into N
// would need static shapes), then scale and bias by broadcasting.
VmapResult group_norm_vmap(const RuleArgs& a, AxisSpan in_axes) {
  Value x = a.inputs[0];
  int64_t xb = in_axes[0] >= 0;
  if (xb) x = moveaxis(x, in_axes[0], 0);
  int64_t rank = x.rank() - xb;  // unbatched
  Value y = op("layer_norm", {grouped(x, a.attrs.get_int("num_groups"), xb)},
               {{"axis", -1}, {"epsilon", a.attrs.get_float("epsilon")}});
  y = rules::reshape_like(y, x);
  for (size_t i = 1; i < 3; ++i) {
    Value p = a.inputs[i];
    if (in_axes[i] >= 0) {  // [B, C] -> [B, 1, C, 1...]
      IntList axes = range(3, rank + 1);
      axes.insert(axes.begin(), 1);
      p = expand_dims(moveaxis(p, in_axes[i], 0), axes);
    } else {
      p = per_channel(p, rank);
    }
    y = i == 1 ? y * p : y + p;
  }
  return {{y}, {0}};
}

// batch_norm (inference form: y = (x - mean) * scale / sqrt(var + eps) + bias)

struct BatchNorm {
  Value inv, mul, xc;  // 1 / sqrt(var + eps), scale * inv [C]; x - mean [N, C, ...]
};

BatchNorm batch_norm_parts(const RuleArgs& a) {
  Value x = a.inputs[0];
  Value inv = op("rsqrt", {a.inputs[4] + a.attrs.get_float("epsilon")});
  return {inv, a.inputs[1] * inv, x - per_channel(a.inputs[3], x.rank())};
}

Values batch_norm_vjp(const RuleArgs& a, ValueSpan ct) {
  BatchNorm b = batch_norm_parts(a);
  Value s_ct = sum_but_channels(ct[0]), s_ctxc = sum_but_channels(ct[0] * b.xc);
  return {ct[0] * per_channel(b.mul, a.inputs[0].rank()), s_ctxc * b.inv, s_ct, -(s_ct * b.mul),
          s_ctxc * (-0.5 * b.mul * b.inv * b.inv)};
}

Values batch_norm_jvp(const RuleArgs& a, ValueSpan t) {
  BatchNorm b = batch_norm_parts(a);
  int64_t rank = a.inputs[0].rank();
  Value dy = t[0].valid() ? t[0] * per_channel(b.mul, rank) : Value{};
  // Per channel: the tangent's coefficient of (x - mean), and its offset.
  Value coef = mul_any(t[1], b.inv);
  if (t[4].valid()) coef = add_any(coef, t[4] * (-0.5 * b.mul * b.inv * b.inv));
  Value off = t[2];
  if (t[3].valid()) off = add_any(off, -(t[3] * b.mul));
  if (coef.valid()) dy = add_any(dy, b.xc * per_channel(coef, rank));
  if (off.valid()) dy = add_any(dy, rules::broadcast_like(per_channel(off, rank), a.outputs[0]));
  return {dy};
}

// The batch goes to axis 2, among the positions that share each channel's statistics.
VmapResult batch_norm_vmap(const RuleArgs& a, AxisSpan in_axes) {
  Value x = a.inputs[0];
  if (!any_batched(in_axes, 1)) {
    Values in(a.inputs.begin(), a.inputs.end());
    in[0] = moveaxis(x, in_axes[0], 2);
    return {{op("batch_norm", in, a.attrs)}, {2}};
  }
  // Batched statistics: the formula by broadcasting, as the kernel evaluates it.
  int64_t rank = x.rank() - (in_axes[0] >= 0);  // unbatched
  x = in_axes[0] >= 0 ? moveaxis(x, in_axes[0], 2) : expand_dims(x, {2});
  auto chan = [&](size_t i) {  // [C] or [C, B], to broadcast against [N, C, B, S...]
    Value p = a.inputs[i];
    if (in_axes[i] >= 0) return expand(moveaxis(p, in_axes[i], 1), range(2, rank));
    return expand(p, range(1, rank));
  };
  Value mul = chan(1) / op("sqrt", {chan(4) + a.attrs.get_float("epsilon")});
  return {{(x - chan(3)) * mul + chan(2)}, {2}};
}

void register_channel_norms(OpRegistry& r) {
  OpDef gn;
  gn.name = "group_norm";
  gn.amp = AmpRole::keep_f32;
  gn.arity(3).attr("num_groups", AttrKind::Int).attr("epsilon", AttrKind::Float, AttrValue(1e-5));
  gn.doc = "Normalises x [N, C, ...] over each group of C/num_groups channels; scale, bias [C].";
  gn.infer = infer_channel_norm;
  gn.vjp = group_norm_vjp;
  gn.jvp = group_norm_jvp;
  gn.vmap = group_norm_vmap;
  r.add(std::move(gn));

  OpDef bn;
  bn.name = "batch_norm";
  bn.amp = AmpRole::keep_f32;
  bn.arity(5).attr("epsilon", AttrKind::Float, AttrValue(1e-5));
  bn.doc =
      "Inference batch norm of x [N, C, ...]: (x - mean) / sqrt(var + epsilon) * scale "
      "+ bias, with scale, bias, mean, var [C].";
  bn.infer = infer_channel_norm;
  bn.vjp = batch_norm_vjp;
  bn.jvp = batch_norm_jvp;
  bn.vmap = batch_norm_vmap;
  r.add(std::move(bn));
}

// ---- embedding ---------------------------------------------------------------------

// Rows picked more than once accumulate their cotangents.
Values embedding_vjp(const RuleArgs& a, ValueSpan ct) {
  Value table = a.inputs[0], idx = a.inputs[1];
  Value d = op("scatter_nd", {rules::zeros_like(table), expand_dims(idx, {idx.rank()}), ct[0]},
               {{"reduction", "add"}});
  return {d, Value{}};
}

Values embedding_jvp(const RuleArgs& a, ValueSpan t) {
  return rules::reapply(a, {t[0], a.inputs[1]});
}

VmapResult embedding_vmap(const RuleArgs& a, AxisSpan in_axes) {
  Value table = a.inputs[0], idx = a.inputs[1];
  // Batched indices only: the output (indices.shape + [D]) keeps their batch axis.
  if (in_axes[0] < 0) return {{op("embedding", {table, idx})}, {in_axes[1]}};
  // A batched table [B, V, D]: each batch element looks up its own rows (gather_nd with
  // one batch dim).
  table = moveaxis(table, in_axes[0], 0);
  idx = in_axes[1] >= 0 ? moveaxis(idx, in_axes[1], 0) : rules::materialize_batch(idx, table, 0);
  Value out =
      op("gather_nd", {table, expand_dims(idx, {idx.rank()})}, {{"batch_dims", int64_t(1)}});
  return {{out}, {0}};
}

void register_embedding(OpRegistry& r) {
  OpDef d;
  d.name = "embedding";
  d.arity(2);
  d.doc = "Rows of table [V, D] picked by integer indices: indices.shape + [D].";
  d.infer = [](const InferContext& ctx) {
    expect_rank(ctx, 0, 2);
    expect_integer(ctx, 1);
    Shape out = ctx.shape(1);
    out.push_back(ctx.shape(0)[1]);
    return one({ctx.dtype(0), out});
  };
  d.vjp = embedding_vjp;
  d.jvp = embedding_jvp;
  d.vmap = embedding_vmap;
  r.add(std::move(d));
}

// ---- dropout -----------------------------------------------------------------------

// Linear in x for fixed attributes, and the same attributes draw the same mask.
Values dropout_vjp(const RuleArgs& a, ValueSpan ct) { return rules::reapply(a, {ct[0]}); }
Values dropout_jvp(const RuleArgs& a, ValueSpan t) { return rules::reapply(a, {t[0]}); }

VmapResult dropout_vmap(const RuleArgs& a, AxisSpan in_axes) {
  Value x = a.inputs[0];
  int ax = in_axes[0];
  if (!a.attrs.get_bool("training") || a.attrs.get_float("rate") == 0.0)
    return {{op("dropout", {x}, a.attrs)}, {ax}};
  // The mask depends on an element's position in the unbatched tensor and on the seed, so
  // every batch element gets the same one: draw it once from ones of the unbatched shape
  // (0 or 1/(1-rate)), in f32 for f16/bf16 as the kernel computes.
  Value x0 = op("gather", {x, cast(scalar_like(x, 0), DType::i64)}, {{"axis", ax}});
  DType dt = x.dtype();
  DType ct = dt == DType::f16 || dt == DType::bf16 ? DType::f32 : dt;
  Value mask = op("dropout", {to(rules::ones_like(x0), ct)}, a.attrs);
  return {{to(to(x, ct) * expand_dims(mask, {ax}), dt)}, {ax}};
}

void register_dropout(OpRegistry& r) {
  OpDef d;
  d.name = "dropout";
  d.arity(1)
      .attr("rate", AttrKind::Float, AttrValue(0.5))
      .attr("training", AttrKind::Bool, AttrValue(false))
      .attr("seed", AttrKind::Int, AttrValue(0));
  d.doc =
      "In training, zeroes each element with probability `rate` and scales the rest by "
      "1/(1-rate) (Philox keyed by seed); the identity otherwise.";
  d.infer = [](const InferContext& ctx) {
    expect_float(ctx, 0);
    double rate = ctx.attrs().get_float("rate");
    if (!(rate >= 0.0 && rate < 1.0)) ctx.fail("expected rate in [0, 1), got ", rate);
    return one(ctx.input(0));
  };
  d.vjp = dropout_vjp;
  d.jvp = dropout_jvp;
  d.vmap = dropout_vmap;
  r.add(std::move(d));
}

// ---- cross_entropy -----------------------------------------------------------------

std::vector<TensorType> infer_cross_entropy(const InferContext& ctx) {
  expect_float(ctx, 0);
  expect_min_rank(ctx, 0, 1);
  double smooth = ctx.attrs().get_float("label_smoothing");
  if (!(smooth >= 0.0 && smooth <= 1.0))
    ctx.fail("expected label_smoothing in [0, 1], got ", smooth);
  const Shape& logits = ctx.shape(0);
  Shape rows(logits.begin(), logits.end() - 1);
  if (is_integer(ctx.dtype(1))) {
    rows = unify_shape(ctx, 1, rows, "class labels", "logits.shape[:-1]");
  } else if (is_float(ctx.dtype(1))) {
    expect_same_dtype(ctx, 0, 1);
    Shape probs = unify_shape(ctx, 1, logits, "probabilities", "logits");
    rows.assign(probs.begin(), probs.end() - 1);
  } else {
    ctx.fail_type("expected integer class labels or float probabilities for input 1, got ",
                  ctx.input(1).str());
  }
  if (ctx.attrs().get_string("reduction") != "none") rows.clear();
  bool wide = ctx.attrs().get_bool("f32_loss") && dtype_size(ctx.dtype(0)) == 2;
  return one({wide ? DType::f32 : ctx.dtype(0), rows});
}

std::vector<TensorType> infer_cross_entropy_grad(const InferContext& ctx) {
  expect_float(ctx, 0);
  expect_min_rank(ctx, 0, 1);
  if (!is_integer(ctx.dtype(1)))
    ctx.fail_type("expected integer class labels for input 1, got ", ctx.input(1).str());
  const Shape& logits = ctx.shape(0);
  Shape rows(logits.begin(), logits.end() - 1);
  rows = unify_shape(ctx, 1, rows, "class labels", "logits.shape[:-1]");
  expect_float(ctx, 2);  // any float: an f32 loss's cotangent for 16-bit logits
  expect_broadcastable_to(ctx, 2, rows);
  return one(ctx.input(0));
}

struct CrossEntropy {
  Value x, labels;  // logits [..., C]; labels [...] (integer) or probabilities [..., C]
  bool probs;
  double eps;  // label_smoothing
  std::string reduction;
  int64_t ignore, classes;
  DType loss;  // the loss's dtype (f32 for 16-bit logits under f32_loss)
};

CrossEntropy read_cross_entropy(const RuleArgs& a, const char* transform) {
  CrossEntropy c{a.inputs[0],
                 a.inputs[1],
                 is_float(a.inputs[1].dtype()),
                 a.attrs.get_float("label_smoothing"),
                 a.attrs.has("reduction") ? a.attrs.get_string("reduction") : "none",
                 a.attrs.get_int("ignore_index"),
                 0,
                 a.inputs[0].dtype()};
  if (a.attrs.has("f32_loss") && a.attrs.get_bool("f32_loss") && dtype_size(c.loss) == 2)
    c.loss = DType::f32;
  const Dim& d = c.x.shape().back();
  if (!d.is_static())
    fail<NotSupported>("cross_entropy", transform, ": expected a static class count, got ",
                       c.x.type().str());
  c.classes = d.value();
  return c;
}

// Rows whose label is not ignore_index (bool, of the labels' shape).
Value kept_rows(const CrossEntropy& c) {
  Value l = to(c.labels, DType::i64);
  return op("ne", {l, scalar_like(l, double(c.ignore))});
}

// The rows that the mean divides by (non-ignored ones for labels), counted exactly in i64,
// as `dt`.
Value row_count(const CrossEntropy& c, DType dt) {
  Value rows = c.probs ? rules::ones_like(rules::sum(c.x, {-1})) : kept_rows(c);
  return to(sum_all(to(rows, DType::i64)), dt);
}

// d loss_row / d logits: softmax minus the smoothed target distribution.
Value logit_grad(const CrossEntropy& c) {
  Value sm = softmax(c.x, -1);
  double u = c.eps / double(c.classes);
  if (c.probs) {
    Value q = c.labels * (1 - c.eps);
    if (c.eps > 0) q = q + u;
    return sum_keep(q, {-1}) * sm - q;
  }
  Value oh =
      op("one_hot", {c.labels}, {{"depth", c.classes}, {"axis", -1}, {"dtype", c.x.dtype()}});
  Value d = sm - oh * (1 - c.eps);
  return c.eps > 0 ? d - u : d;
}

Values cross_entropy_vjp(const RuleArgs& a, ValueSpan ct) {
  CrossEntropy c = read_cross_entropy(a, "vjp");
  Value w = ct[0];  // each row's cotangent (reduction none), else one for all rows
  if (c.reduction == "mean") w = w / row_count(c, w.dtype());
  if (!c.probs) {  // one op, which a device may run without the one-hot and the softmax
    Attrs attrs{{"label_smoothing", c.eps}, {"ignore_index", c.ignore}};
    return {op("cross_entropy_grad", {c.x, c.labels, w}, attrs), Value{}};
  }
  w = to(w, c.x.dtype());  // an f32_loss cotangent, for 16-bit logits
  if (c.reduction == "none") w = expand_dims(w, {w.rank()});
  Value dx = w * logit_grad(c);
  return {dx, w * op("log_softmax", {c.x}) * (c.eps - 1)};
}

// 16-bit logits in f32, as the device kernels compute them; the result in the logits' dtype.
Values cross_entropy_grad_decomposed(const RuleArgs& a) {
  CrossEntropy c = read_cross_entropy(a, "decompose");
  DType dt = c.x.dtype(), math = math_of(dt);
  c.x = to(c.x, math);
  Value w = to(a.inputs[2], math);
  w = expand_dims(w, {w.rank()});  // against [..., C]
  Value dx = w * logit_grad(c);
  Value keep = expand_dims(kept_rows(c), {c.labels.rank()});
  return {to(select(keep, dx, scalar_like(dx, 0)), dt)};
}

Values cross_entropy_jvp(const RuleArgs& a, ValueSpan t) {
  CrossEntropy c = read_cross_entropy(a, "jvp");
  Value dl;  // the tangent of each row's loss
  if (t[0].valid()) dl = rules::sum(logit_grad(c) * t[0], {-1});
  if (!c.probs && dl.valid()) dl = select(kept_rows(c), dl, scalar_like(dl, 0));
  if (c.probs && t[1].valid())
    dl = add_any(dl, rules::sum(op("log_softmax", {c.x}) * t[1], {-1}) * (c.eps - 1));
  if (dl.valid()) dl = to(dl, c.loss);
  if (!dl.valid() || c.reduction == "none") return {dl};
  Value total = sum_all(dl);
  return {c.reduction == "mean" ? total / row_count(c, total.dtype()) : total};
}

// Per-row losses of the batch (reduction none), then each batch element's sum or mean.
VmapResult cross_entropy_vmap(const RuleArgs& a, AxisSpan in_axes) {
  Values in = rules::all_batched_front(a, in_axes);
  Attrs attrs = a.attrs;
  attrs.set("reduction", "none");
  Value loss = op("cross_entropy", in, attrs);  // [B, rows...]
  const std::string& reduction = a.attrs.get_string("reduction");
  if (reduction == "none") return {{loss}, {0}};
  IntList rows = range(1, loss.rank());
  auto per_batch = [&](Value x) { return rules::sum(x, rows); };
  Value total = per_batch(loss);
  if (reduction == "sum") return {{total}, {0}};
  Value counted = rules::ones_like(loss);
  if (!is_float(in[1].dtype())) {
    Value l = to(in[1], DType::i64);
    counted = op("ne", {l, scalar_like(l, double(a.attrs.get_int("ignore_index")))});
  }
  return {{total / to(per_batch(to(counted, DType::i64)), loss.dtype())}, {0}};
}

void register_cross_entropy(OpRegistry& r) {
  OpDef d;
  d.name = "cross_entropy";
  d.amp = AmpRole::wide, d.amp_attr = "f32_loss";
  d.arity(2)
      .attr("reduction", AttrKind::String, AttrValue("mean"), {"mean", "sum", "none"})
      .attr("label_smoothing", AttrKind::Float, AttrValue(0.0))
      .attr("ignore_index", AttrKind::Int, AttrValue(-100))
      .attr("f32_loss", AttrKind::Bool, AttrValue(false));
  d.doc =
      "Softmax cross entropy of logits [..., C] against integer labels [...] or "
      "probabilities [..., C]; reduced by mean, sum or none. The math is f32 or wider; "
      "f32_loss gives 16-bit logits an f32 loss (mixed precision reads the logits as they "
      "are).";
  d.infer = infer_cross_entropy;
  d.vjp = cross_entropy_vjp;
  d.jvp = cross_entropy_jvp;
  d.vmap = cross_entropy_vmap;
  r.add(std::move(d));

  // cross_entropy's vjp for class labels, as one op: a device with a kernel for it (cuda)
  // writes the logits' gradient in one pass, without the softmax and one-hot tensors.
  OpDef g;
  g.name = "cross_entropy_grad";
  g.amp = AmpRole::low;  // one pass over the logits; the gradient in their dtype
  g.arity(3)
      .attr("label_smoothing", AttrKind::Float, AttrValue(0.0))
      .attr("ignore_index", AttrKind::Int, AttrValue(-100));
  g.doc =
      "Gradient of softmax cross entropy with respect to logits [..., C] for integer labels "
      "[...]: w (per row, broadcasting, or one value; any float dtype) times (softmax - "
      "smoothed one-hot), 0 on rows labelled ignore_index; in the logits' dtype.";
  g.infer = infer_cross_entropy_grad;
  g.decompose = cross_entropy_grad_decomposed;
  set_rules_by_decomposition(g);
  r.add(std::move(g));
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  register_softmax(r);
  register_trailing_norms(r);
  register_channel_norms(r);
  register_embedding(r);
  register_dropout(r);
  register_cross_entropy(r);
}

}  // namespace rlx::detail
