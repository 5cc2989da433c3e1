// attention (softmax(q k^T * scale + bias, masked) v) and its two companions for training:
// attention_grad (its vjp as one op) and attention_lse (the forward with each row's
// log-sum-exp), with their inference and rules. The rules recompute the probabilities from
// the inputs with core ops, so that they are differentiable again (hvp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/attention_layout.h"
#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "ops/rule_util.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using rules::add_any;
using rules::moveaxis;

// ---- inference -----------------------------------------------------------------------

// attention's output type; input 3 is a bias only where `bias` says so.
TensorType attention_type(const InferContext& ctx, bool bias) {
  expect_all_float(ctx, 4);  // q, k, v and a bias or dy (attention_grad's lse is f32)
  for (size_t i = 0; i < 3; ++i) expect_min_rank(ctx, i, 2);
  const Attrs& a = ctx.attrs();
  const std::string& mask = a.get_string("mask");
  int64_t window = a.get_int("window");
  if (mask == "sliding_window" && window < 1)
    ctx.fail("expected window >= 1 for mask 'sliding_window', got ", window);
  if (mask != "sliding_window" && window != 0)
    ctx.fail("expected window 0 for mask '", mask, "', got ", window);
  expect_at_least(ctx, "scale", a.get_float("scale"), 0.0);

  const Shape &q = ctx.shape(0), &k = ctx.shape(1), &v = ctx.shape(2);
  unify_dims(ctx, q.back(), k.back(), "head dims of q and k");
  Dim sk = unify_dims(ctx, k[k.size() - 2], v[v.size() - 2], "key lengths of k and v");
  auto lead = [](const Shape& s) { return Shape(s.begin(), s.end() - 2); };
  Shape batch = broadcast_shapes(ctx, broadcast_shapes(ctx, lead(q), lead(k)), lead(v));
  if (bias && ctx.num_inputs() == 4) {
    Shape scores = batch;
    scores.push_back(q[q.size() - 2]);
    scores.push_back(sk);
    expect_broadcastable_to(ctx, 3, scores);
  }
  Shape out = batch;
  out.push_back(q[q.size() - 2]);
  out.push_back(v.back());
  return {ctx.dtype(0), out};
}

// Layout "bshd": q, k, v (dy, and the outputs) are [..., s, h, d], the "bhsd" form with
// the sequence and head axes swapped (as projections leave them: no transposes); a bias
// stays [..., h, sq, sk]. Types are inferred on the swapped form, then swapped back.
// Only the first `swapped_out` outputs are in the layout (attention_lse's statistics are
// [..., H, Sq] in both).
template <class F>
std::vector<TensorType> on_bhsd(const InferContext& ctx, size_t swapped, F infer,
                                size_t swapped_out = 3) {
  if (!detail::is_bshd(ctx.attrs())) return infer(ctx);
  auto swap_sh = [](Shape& s) { std::swap(s[s.size() - 3], s[s.size() - 2]); };
  std::vector<TensorType> in(ctx.inputs().begin(), ctx.inputs().end());
  for (size_t i = 0; i < swapped; ++i) {
    expect_min_rank(ctx, i, 3);
    swap_sh(in[i].shape);
  }
  std::vector<SubgraphPtr> none;
  std::vector<TensorType> out = infer(InferContext(ctx.op(), in, ctx.attrs(), none));
  for (size_t i = 0; i < out.size() && i < swapped_out; ++i) swap_sh(out[i].shape);
  return out;
}

std::vector<TensorType> infer_attention(const InferContext& ctx) {
  return on_bhsd(ctx, 3, [](const InferContext& c) { return one(attention_type(c, true)); });
}

// attention_lse's statistics for an output y of the bhsd form: one value per query row in
// the compute type (f64 for f64, else f32).
TensorType lse_type(const TensorType& y) {
  return {y.dtype == DType::f64 ? DType::f64 : DType::f32,
          Shape(y.shape.begin(), y.shape.end() - 1)};
}

std::vector<TensorType> infer_attention_lse(const InferContext& ctx) {
  auto infer = [](const InferContext& c) {
    TensorType y = attention_type(c, false);
    return std::vector<TensorType>{y, lse_type(y)};
  };
  return on_bhsd(ctx, 3, infer, 1);
}

// Fails unless input i has the type `want`: a TypeError for its dtype, a ValueError for
// its shape (dims unknown on either side pass).
void expect_type_like(const InferContext& ctx, size_t i, const TensorType& want, const char* what) {
  if (ctx.dtype(i) != want.dtype)
    ctx.fail_type("expected ", what, " ", want.str(), ", got ", ctx.input(i).str());
  const Shape& s = ctx.shape(i);
  bool ok = s.size() == want.shape.size();
  for (size_t d = 0; ok && d < s.size(); ++d)
    ok = !s[d].is_static() || !want.shape[d].is_static() || s[d].value() == want.shape[d].value();
  if (!ok) ctx.fail("expected ", what, " ", want.str(), ", got ", ctx.input(i).str());
}

std::vector<TensorType> infer_attention_grad_bhsd(const InferContext& ctx) {
  TensorType y = attention_type(ctx, false);
  expect_same_dtype(ctx, 0, 3);
  expect_type_like(ctx, 3, y, "dy of attention's output type");
  if (ctx.num_inputs() == 6) {  // the forward's output and statistics (attention_lse)
    expect_type_like(ctx, 4, y, "y of attention's output type");
    expect_type_like(ctx, 5, lse_type(y), "lse of attention_lse's type");
  }
  Shape batch(y.shape.begin(), y.shape.end() - 2);
  auto with = [&](size_t i) {
    Shape s = batch;
    const Shape& in = ctx.shape(i);
    s.insert(s.end(), in.end() - 2, in.end());
    return TensorType{ctx.dtype(0), s};
  };
  return {with(0), with(1), with(2)};
}

std::vector<TensorType> infer_attention_grad(const InferContext& ctx) {
  if (ctx.num_inputs() == 5)
    ctx.fail("expected 4 inputs, or 6 with attention_lse's y and lse, got 5");
  return on_bhsd(ctx, ctx.num_inputs() == 6 ? 5 : 4, infer_attention_grad_bhsd);
}

// ---- rules ---------------------------------------------------------------------------

Value swap_last2(Value x) { return moveaxis(x, -1, -2); }

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

}  // namespace

// ---- definitions ---------------------------------------------------------------------

void register_attention_ops(OpRegistry& r) {
  OpDef d;
  d.name = "attention";
  d.amp = AmpRole::low;
  d.arity(3, 4)
      .attr("mask", AttrKind::String, AttrValue("none"), {"none", "causal", "sliding_window"})
      .attr("window", AttrKind::Int, AttrValue(0))
      .attr("scale", AttrKind::Float, AttrValue(0.0))
      .attr("layout", AttrKind::String, AttrValue("bhsd"), {"bhsd", "bshd"});
  d.doc =
      "softmax(q k^T * scale + bias, masked) v; q [..., Sq, D], k [..., Sk, D], "
      "v [..., Sk, Dv]; scale 0 means 1/sqrt(D). layout bshd: q, k, v and the output are "
      "[..., S, H, D] (the heads' axis after the sequence's), a bias [..., H, Sq, Sk].";
  d.infer = infer_attention;
  d.vjp = attention_vjp;
  d.jvp = attention_jvp;
  d.vmap = attention_vmap;
  const std::vector<AttrSpec> specs = d.attrs;
  r.add(std::move(d));

  // attention's vjp without a bias, as one op: a device with a kernel for it (cuda) runs
  // the backward without building the score masks and probabilities op by op.
  OpDef g;
  g.name = "attention_grad";
  g.arity(4, 6);
  g.attrs = specs;
  g.doc =
      "(dq, dk, dv) of attention(q, k, v) (no bias) for the output cotangent dy, each in the "
      "broadcast batch shape of q, k and v; the attributes are attention's. Optional inputs "
      "y, lse: attention_lse's outputs for these q, k, v, so that a kernel need not run the "
      "forward again (the decomposition ignores them).";
  g.infer = infer_attention_grad;
  g.decompose = attention_grad_decomposed;
  set_rules_by_decomposition(g);
  r.add(std::move(g));

  // The training forward: attention's output and each query row's log-sum-exp, which
  // attention_grad can take instead of running the forward again (pass attention_stats).
  OpDef s;
  s.name = "attention_lse";
  s.arity(3, 3);
  s.attrs = specs;
  s.doc =
      "(y, lse) = attention(q, k, v) (no bias) and, per query row, the log-sum-exp (natural "
      "log) of its visible scaled scores, [..., H, Sq] in either layout, f32 (f64 for f64 "
      "inputs); +inf for a row that sees no key (its probabilities are all 0).";
  s.infer = infer_attention_lse;
  s.decompose = attention_lse_decomposed;
  set_rules_by_decomposition(s);
  r.add(std::move(s));
}

}  // namespace rlx::detail
