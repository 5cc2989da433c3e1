// Rules of the nn ops (nn_rules.h). What a backward pass needs from the forward one (the
// normalised x, the attention probabilities, the softmax of the logits) is recomputed
// from the inputs with core ops, so that the rules are differentiable again (hvp).
#include "ops/nn_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/attention_layout.h"
#include "rlx/axes.h"
#include "rlx/error.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using rules::add_any;
using rules::expand_dims;
using rules::moveaxis;
using rules::mul_any;

IntList range(int64_t lo, int64_t hi) {
  IntList r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

Value mean_keep(Value x, const IntList& axes) {
  return op("mean", {x}, {{"axes", axes}, {"keepdims", true}});
}
Value sum_keep(Value x, const IntList& axes) { return rules::sum(x, axes, true); }
// The sum of every element (rank 0 stays as it is).
Value sum_all(Value x) { return x.rank() == 0 ? x : sum(x); }
// expand_dims that accepts an empty list.
Value expand(Value x, const IntList& axes) { return axes.empty() ? x : expand_dims(x, axes); }
Value swap_last2(Value x) { return moveaxis(x, -1, -2); }
Value to(Value x, DType dt) { return x.dtype() == dt ? x : cast(x, dt); }
// The dtype the device kernels compute a float dtype in: f32 for 16-bit ones.
DType math_of(DType dt) { return dtype_size(dt) == 2 ? DType::f32 : dt; }
Value select(Value cond, Value a, Value b) { return op("select", {cond, a, b}); }

Value input_or_none(const RuleArgs& a, size_t i) {
  return i < a.inputs.size() ? a.inputs[i] : Value{};
}
Value tangent(ValueSpan t, size_t i) { return i < t.size() ? t[i] : Value{}; }
bool any_batched(AxisSpan in_axes, size_t from) {
  return std::any_of(in_axes.begin() + std::ptrdiff_t(from), in_axes.end(),
                     [](int ax) { return ax >= 0; });
}

}  // namespace

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

// ---- normalisation: shared pieces --------------------------------------------------

namespace {

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

}  // namespace

// ---- layer_norm, rms_norm ----------------------------------------------------------

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

// ---- group_norm --------------------------------------------------------------------

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

// ---- batch_norm (inference form: y = (x - mean) * scale / sqrt(var + eps) + bias) ----

namespace {

struct BatchNorm {
  Value inv, mul, xc;  // 1 / sqrt(var + eps), scale * inv [C]; x - mean [N, C, ...]
};

BatchNorm batch_norm_parts(const RuleArgs& a) {
  Value x = a.inputs[0];
  Value inv = op("rsqrt", {a.inputs[4] + a.attrs.get_float("epsilon")});
  return {inv, a.inputs[1] * inv, x - per_channel(a.inputs[3], x.rank())};
}

}  // namespace

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

// ---- attention ---------------------------------------------------------------------

double lowest_finite(DType dt) {
  switch (dt) {
    case DType::f16:
      return -65504.0;
    case DType::bf16:
      return -3.3895313892515355e38;
    case DType::f32:
      return -double(std::numeric_limits<float>::max());
    default:
      return -std::numeric_limits<double>::max();
  }
}

namespace {

// The scores' scale: the attribute, or 1/sqrt(D) (1 for D = 0) as in the kernel.
Value attention_scale(const RuleArgs& a) {
  Value q = a.inputs[0];
  double s = a.attrs.get_float("scale");
  const Dim& d = q.shape().back();
  if (s == 0 && d.is_static()) s = d.value() > 0 ? 1.0 / std::sqrt(double(d.value())) : 1.0;
  if (s != 0) return scalar_like(q, s);
  // A symbolic head dim: count it at run time.
  Value ones = rules::ones_like(q);
  if (q.rank() > 1) ones = op("mean", {ones}, {{"axes", range(0, q.rank() - 1)}});
  return op("rsqrt", {sum_all(ones)});
}

// Whether query i sees key j: a bool that broadcasts against the scores, or invalid
// when nothing is masked. As in the kernel, masks align bottom-right: query i sits at key
// position p = i + Sk - Sq and sees the keys p - window < j <= p. With the countdowns
// r = Sq - i and c = Sk - j (reverse running counts: no static shapes needed) that is
// r <= c < r + window.
Value attention_visible(const RuleArgs& a) {
  const std::string& mask = a.attrs.get_string("mask");
  if (mask == "none") return {};
  auto countdown = [](Value x) {  // [..., S, D] -> [..., S, 1]: S - i, in i64
    Value ones = cast(rules::ones_like(sum_keep(x, {-1})), DType::i64);
    return op("cumsum", {ones}, {{"axis", -2}, {"reverse", true}});
  };
  Value r = countdown(a.inputs[0]), c = swap_last2(countdown(a.inputs[1]));
  Value vis = op("ge", {c, r});
  if (mask == "sliding_window")
    vis = op("logical_and", {vis, op("lt", {c, r + double(a.attrs.get_int("window"))})});
  return vis;
}

struct Probs {
  Value p, scale;  // softmax of the masked scores [..., Sq, Sk]; the scores' scale
};

Probs attention_probs(const RuleArgs& a) {
  Value scale = attention_scale(a);
  Value s = matmul(a.inputs[0], swap_last2(a.inputs[1])) * scale;
  if (a.inputs.size() > 3) s = s + a.inputs[3];
  Value vis = attention_visible(a);
  if (!vis.valid()) return {softmax(s, -1), scale};
  // Masked scores get the dtype's lowest value (their exp vanishes beside any visible
  // score); afterwards masked entries are 0, so a row that sees no key gives 0.
  s = select(vis, s, scalar_like(s, lowest_finite(s.dtype())));
  return {select(vis, softmax(s, -1), scalar_like(s, 0)), scale};
}

}  // namespace

namespace {

// The gradients in the broadcast batch shape, and ds (the scores' cotangent).
Values attention_grads(const RuleArgs& a, Value dy) {
  Value q = a.inputs[0], k = a.inputs[1], v = a.inputs[2];
  Probs pr = attention_probs(a);
  Value dp = matmul(dy, swap_last2(v));
  Value ds = pr.p * (dp - sum_keep(dp * pr.p, {-1}));  // 0 where masked (p is)
  return {matmul(ds, k) * pr.scale, matmul(swap_last2(ds), q) * pr.scale,
          matmul(swap_last2(pr.p), dy), ds};
}

// Layout bshd is bhsd with the sequence and head axes of q, k, v (dy, the outputs)
// swapped: its rules swap them, run bhsd's, and swap the results back. A bias is [..., H,
// Sq, Sk] in both.
using detail::is_bshd;

Value swap_sh(Value x) { return op("transpose", {x}, {{"perm", detail::seq_head_swap(x.rank())}}); }

Attrs bhsd_attrs(const Attrs& a) {
  Attrs b = a;
  b.set("layout", std::string("bhsd"));
  return b;
}

// a's inputs with the first `n` swapped.
Values swapped_inputs(const RuleArgs& a, size_t n) {
  Values in(a.inputs.begin(), a.inputs.end());
  for (size_t i = 0; i < n && i < in.size(); ++i) in[i] = swap_sh(in[i]);
  return in;
}

}  // namespace

Values attention_grad_decomposed(const RuleArgs& a) {
  if (is_bshd(a.attrs)) {  // the bhsd op between swaps (its own kernel or decomposition)
    // q, k, v, dy and y are in the layout; lse is [..., H, Sq] in both.
    Values g = op_n("attention_grad", swapped_inputs(a, 5), bhsd_attrs(a.attrs));
    for (Value& x : g) x = swap_sh(x);
    return g;
  }
  RuleArgs qkv{a.g, a.attrs, a.inputs.first(3), {}, a.subgraphs, a.op};  // dy is no bias
  Values g = attention_grads(qkv, a.inputs[3]);
  g.pop_back();
  return g;
}

Values attention_lse_decomposed(const RuleArgs& a) {
  if (is_bshd(a.attrs)) {
    Values r = op_n("attention_lse", swapped_inputs(a, 3), bhsd_attrs(a.attrs));
    return {swap_sh(r[0]), r[1]};
  }
  Value y = op("attention", {a.inputs.begin(), a.inputs.end()}, a.attrs);
  // The scores in the compute type (f32 but for f64, as the kernels accumulate them),
  // masked as attention's.
  DType c = a.inputs[0].dtype() == DType::f64 ? DType::f64 : DType::f32;
  Values in{to(a.inputs[0], c), to(a.inputs[1], c), a.inputs[2]};
  Value s = matmul(in[0], swap_last2(in[1])) *
            attention_scale(RuleArgs{a.g, a.attrs, in, {}, a.subgraphs, a.op});
  Value vis = attention_visible(a);
  if (vis.valid()) s = select(vis, s, scalar_like(s, lowest_finite(c)));
  Value m = op("reduce_max", {s}, {{"axes", IntList{-1}}, {"keepdims", true}});
  Value e = exp(s - m);
  if (vis.valid()) e = select(vis, e, scalar_like(e, 0));
  Value sum = rules::sum(e, {-1}, false);
  Value lse = log(sum) + op("squeeze", {m}, {{"axes", IntList{-1}}});
  // A row that sees no key (or whose scores are not finite) gets +inf.
  Value inf = scalar_like(lse, std::numeric_limits<double>::infinity());
  return {y, select(op("gt", {sum, scalar_like(sum, 0)}), lse, inf)};
}

Values attention_vjp(const RuleArgs& a, ValueSpan ct) {
  Values g;
  if (is_bshd(a.attrs) && a.inputs.size() > 3) {  // with a bias: through bhsd
    Values in = swapped_inputs(a, 3);
    Attrs attrs = bhsd_attrs(a.attrs);
    g = attention_grads(RuleArgs{a.g, attrs, in, {}, a.subgraphs, a.op}, swap_sh(ct[0]));
    for (size_t i = 0; i < 3; ++i) g[i] = swap_sh(g[i]);
  } else if (a.inputs.size() == 3) {
    std::vector<Value> in(a.inputs.begin(), a.inputs.end());
    in.push_back(ct[0]);
    g = op_n("attention_grad", in, a.attrs);
  } else {
    g = attention_grads(a, ct[0]);
  }
  Values out;
  for (size_t i = 0; i < a.inputs.size(); ++i) out.push_back(rules::unbroadcast(g[i], a.inputs[i]));
  return out;
}

Values attention_jvp(const RuleArgs& a, ValueSpan t) {
  if (is_bshd(a.attrs)) {
    Values in = swapped_inputs(a, 3), ts(t.begin(), t.end());
    for (size_t i = 0; i < 3; ++i)
      if (ts[i].valid()) ts[i] = swap_sh(ts[i]);
    Attrs attrs = bhsd_attrs(a.attrs);
    return {swap_sh(attention_jvp(RuleArgs{a.g, attrs, in, {}, a.subgraphs, a.op}, ts)[0])};
  }
  Value q = a.inputs[0], k = a.inputs[1], v = a.inputs[2];
  Probs pr = attention_probs(a);
  Value ts;  // tangent of the scores; masked entries do not matter (p is 0 there)
  if (t[0].valid()) ts = matmul(t[0], swap_last2(k)) * pr.scale;
  if (t[1].valid()) ts = add_any(ts, matmul(q, swap_last2(t[1])) * pr.scale);
  ts = add_any(ts, tangent(t, 3));
  Value dy;
  if (ts.valid()) dy = matmul(pr.p * (ts - sum_keep(ts * pr.p, {-1})), v);
  if (t[2].valid()) dy = add_any(dy, matmul(pr.p, t[2]));
  return {dy};
}

// Batched inputs get the batch in front, padded with size-1 axes so that it lines up
// under the right-aligned broadcasting of the lead dims; unbatched ones broadcast.
VmapResult attention_vmap(const RuleArgs& a, AxisSpan in_axes) {
  Values in(a.inputs.begin(), a.inputs.end());
  std::vector<int> axes(in_axes.begin(), in_axes.end());
  if (is_bshd(a.attrs)) {  // batches in front, then through bhsd
    for (size_t i = 0; i < in.size(); ++i) {
      if (axes[i] > 0) in[i] = moveaxis(in[i], axes[i], 0);
      axes[i] = std::min(axes[i], 0);
      if (i < 3) in[i] = swap_sh(in[i]);
    }
    Attrs attrs = bhsd_attrs(a.attrs);
    VmapResult r = attention_vmap(RuleArgs{a.g, attrs, in, {}, a.subgraphs, a.op}, axes);
    r.outputs[0] = swap_sh(r.outputs[0]);
    return r;
  }
  if (axes[0] < 0 && axes[1] < 0 && axes[2] < 0) {  // only the bias: q carries the batch
    in[0] = rules::materialize_batch(in[0], in[3], axes[3]);
    axes[0] = 0;
  }
  int64_t lead = 0;  // lead dims of the unbatched scores and output
  for (size_t i = 0; i < 3; ++i) lead = std::max<int64_t>(lead, in[i].rank() - (axes[i] >= 0) - 2);
  for (size_t i = 0; i < in.size(); ++i) {
    if (axes[i] < 0) continue;
    Value x = axes[i] == 0 ? in[i] : moveaxis(in[i], axes[i], 0);
    in[i] = expand(x, range(1, lead + 2 - (x.rank() - 1) + 1));
  }
  return {{op("attention", in, a.attrs)}, {0}};
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

// ---- cross_entropy -----------------------------------------------------------------

namespace {

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

}  // namespace

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

}  // namespace rlx::detail
