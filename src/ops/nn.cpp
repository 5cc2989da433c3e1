// Neural-network ops: softmax, norms, attention, embedding, dropout, cross_entropy, and
// the sliding-window ops on [N, C, D1..Dk] tensors (conv, conv_transpose, pools, resize).
#include <algorithm>
#include <cmath>

#include "ops/attention_layout.h"
#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "ops/nn_rules.h"
#include "ops/window_rules.h"

namespace rlx::detail {

namespace {

std::vector<TensorType> one(TensorType t) { return {std::move(t)}; }

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

// The first `n` inputs (all by default) must be floats of input 0's dtype.
void expect_all_float(const InferContext& ctx, size_t n = SIZE_MAX) {
  expect_float(ctx, 0);
  for (size_t i = 1; i < std::min(n, ctx.num_inputs()); ++i) expect_same_dtype(ctx, 0, i);
}

// ---- softmax, log_softmax ----------------------------------------------------------

void register_softmax(OpRegistry& r) {
  struct Entry {
    const char* name;
    const char* doc;
    VjpFn vjp;
    JvpFn jvp;
  };
  for (const Entry& e :
       {Entry{"softmax", "exp(x) / sum(exp(x)) along `axis`.", softmax_vjp, softmax_jvp},
        Entry{"log_softmax", "x - logsumexp(x) along `axis`.", log_softmax_vjp, log_softmax_jvp}}) {
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

// ---- attention ---------------------------------------------------------------------

// Fails unless `b` broadcasts to `target` without changing it.
void expect_broadcastable_to(const InferContext& ctx, size_t i, const Shape& target) {
  const Shape& b = ctx.shape(i);
  bool ok = b.size() <= target.size();
  for (size_t d = 0; ok && d < b.size(); ++d) {
    const Dim& t = target[target.size() - b.size() + d];
    ok = b[d].is(1) || !b[d].is_static() || !t.is_static() || b[d].value() == t.value();
  }
  if (!ok)
    ctx.fail("expected input ", i, " broadcastable to ", shape_str(target), ", got ",
             ctx.input(i).str());
}

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

void register_attention(OpRegistry& r) {
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

// ---- embedding, dropout ------------------------------------------------------------

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

// ---- sliding windows on [N, C, D1..Dk]: shared helpers ------------------------------

const std::vector<std::string> kAutoPad = {"explicit", "same_upper", "same_lower", "valid"};

int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// An Ints attribute with n entries >= lo; an empty list means n copies of `fill`.
IntList spatial_list(const InferContext& ctx, std::string_view key, int64_t n, int64_t fill,
                     int64_t lo) {
  const IntList& v = ctx.attrs().get_ints(key);
  if (v.empty()) return IntList(size_t(n), fill);
  if (int64_t(v.size()) != n) ctx.fail("expected '", key, "' of length ", n, ", got ", list_str(v));
  for (int64_t x : v)
    if (x < lo) ctx.fail("expected '", key, "' entries >= ", lo, ", got ", list_str(v));
  return v;
}

// Input 0 is [N, C, D1..Dk] with k in 1..3 (any k >= 1 when any_k) and no empty spatial
// dim; returns k.
int64_t spatial_rank(const InferContext& ctx, bool any_k = false) {
  int64_t k = ctx.rank(0) - 2;
  if (k < 1 || (!any_k && k > 3))
    ctx.fail("expected input 0 of rank ", any_k ? ">= 3" : "3 to 5", " ([N, C, D1..Dk]), got ",
             ctx.input(0).str());
  for (int64_t i = 2; i < ctx.rank(0); ++i)
    if (ctx.shape(0)[size_t(i)].is(0))
      ctx.fail("expected non-empty spatial dims, got ", ctx.input(0).str());
  return k;
}

// Strides, dilations and padding of a sliding window, resolved from the attributes.
struct Window {
  int64_t k = 0;
  IntList strides, dilations, pads;  // pads: k begins, then k ends
  std::string auto_pad;

  bool same() const { return auto_pad == "same_upper" || auto_pad == "same_lower"; }
  int64_t pad_begin(size_t i) const { return auto_pad == "valid" ? 0 : pads[i]; }
  int64_t pad_end(size_t i) const { return auto_pad == "valid" ? 0 : pads[i + size_t(k)]; }
};

Window read_window(const InferContext& ctx, int64_t k) {
  Window w;
  w.k = k;
  w.strides = spatial_list(ctx, "strides", k, 1, 1);
  w.dilations = spatial_list(ctx, "dilations", k, 1, 1);
  w.pads = spatial_list(ctx, "pads", 2 * k, 0, 0);
  w.auto_pad = ctx.attrs().get_string("auto_pad");
  if (w.auto_pad != "explicit" && !ctx.attrs().get_ints("pads").empty())
    ctx.fail("expected no pads with auto_pad '", w.auto_pad, "', got ",
             list_str(ctx.attrs().get_ints("pads")));
  return w;
}

// Output size along spatial dim i of a window `kernel` wide sliding over d (conv, pools).
// Floor or ONNX ceil mode; in ceil mode the last window must start inside the input or
// the left padding.
Dim window_out(const InferContext& ctx, const Window& w, size_t i, const Dim& d, const Dim& kernel,
               bool ceil_mode) {
  int64_t s = w.strides[i];
  if (w.same()) {  // the padding is whatever makes the output ceil(d / s)
    if (d.is_static()) return Dim(ceil_div(d.value(), s));
    return s == 1 ? d : Dim::unknown();
  }
  if (!kernel.is_static()) return Dim::unknown();
  int64_t pb = w.pad_begin(i), pe = w.pad_end(i);
  int64_t eff = w.dilations[i] * (kernel.value() - 1) + 1;
  if (!d.is_static()) {  // with stride 1 the output is d plus a constant
    if (s != 1) return Dim::unknown();
    return dim_add(d, pb + pe - eff + 1 - (ceil_mode && pe >= eff ? 1 : 0));
  }
  int64_t span = d.value() + pb + pe - eff;
  int64_t o = (ceil_mode ? ceil_div(span, s) : floor_div(span, s)) + 1;
  if (ceil_mode && o > 1 && (o - 1) * s >= d.value() + pb) --o;
  if (o < 1)
    ctx.fail("expected an output size >= 1 along spatial dim ", i, ", got ", o, " (input ", d.str(),
             ", kernel ", kernel.str(), ", dilation ", w.dilations[i], ", pads ", pb, "+", pe,
             ", stride ", s, ")");
  return Dim(o);
}

void add_window_attrs(OpDef& d) {
  d.attr("strides", AttrKind::Ints, AttrValue(IntList{}))
      .attr("dilations", AttrKind::Ints, AttrValue(IntList{}))
      .attr("pads", AttrKind::Ints, AttrValue(IntList{}))
      .attr("auto_pad", AttrKind::String, AttrValue("explicit"), kAutoPad);
}

// ---- conv, conv_transpose ----------------------------------------------------------

// Shared checks of conv and conv_transpose: dtypes, ranks, groups, static kernel sizes.
int64_t check_conv(const InferContext& ctx) {
  expect_float(ctx, 0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) expect_same_dtype(ctx, 0, i);
  int64_t k = spatial_rank(ctx);
  expect_rank(ctx, 1, k + 2);
  if (ctx.num_inputs() == 3) expect_rank(ctx, 2, 1);
  int64_t groups = ctx.attrs().get_int("groups");
  if (groups < 1) ctx.fail("expected groups >= 1, got ", groups);
  for (size_t i = 2; i < ctx.shape(1).size(); ++i)
    if (ctx.shape(1)[i].is(0)) ctx.fail("expected kernel sizes >= 1, got ", ctx.input(1).str());
  return k;
}

void expect_divisible(const InferContext& ctx, const Dim& d, int64_t groups,
                      std::string_view what) {
  if (d.is_static() && d.value() % groups != 0)
    ctx.fail("expected ", what, " divisible by groups ", groups, ", got ", d.str());
}

// Output channels m, checked against the bias when there is one.
Dim with_bias(const InferContext& ctx, const Dim& m) {
  if (ctx.num_inputs() < 3) return m;
  return unify_dims(ctx, m, ctx.shape(2)[0], "output channels of w and bias");
}

std::vector<TensorType> infer_conv(const InferContext& ctx) {
  int64_t k = check_conv(ctx);
  int64_t groups = ctx.attrs().get_int("groups");
  Window win = read_window(ctx, k);
  const Shape &x = ctx.shape(0), &w = ctx.shape(1);
  unify_dims(ctx, x[1], dim_mul(w[1], Dim(groups)), "channels x.shape[1] and w.shape[1]*groups");
  expect_divisible(ctx, w[0], groups, "output channels w.shape[0]");
  Shape out{x[0], with_bias(ctx, w[0])};
  for (size_t i = 0; i < size_t(k); ++i)
    out.push_back(window_out(ctx, win, i, x[i + 2], w[i + 2], false));
  return one({ctx.dtype(0), out});
}

std::vector<TensorType> infer_conv_transpose(const InferContext& ctx) {
  int64_t k = check_conv(ctx);
  int64_t groups = ctx.attrs().get_int("groups");
  Window win = read_window(ctx, k);
  IntList opad = spatial_list(ctx, "output_padding", k, 0, 0);
  const Shape &x = ctx.shape(0), &w = ctx.shape(1);
  unify_dims(ctx, x[1], w[0], "channels x.shape[1] and w.shape[0]");
  expect_divisible(ctx, w[0], groups, "input channels w.shape[0]");
  Shape out{x[0], with_bias(ctx, dim_mul(w[1], Dim(groups)))};
  for (size_t i = 0; i < size_t(k); ++i) {
    int64_t s = win.strides[i], dil = win.dilations[i];
    if (opad[i] >= std::max(s, dil))
      ctx.fail("expected output_padding smaller than the stride or the dilation, got ",
               list_str(opad));
    const Dim &d = x[i + 2], &kern = w[i + 2];
    if (win.same()) {  // the output is d * s
      out.push_back(dim_mul(d, Dim(s)));
      continue;
    }
    if (!kern.is_static()) {
      out.push_back(Dim::unknown());
      continue;
    }
    int64_t grow = opad[i] + (kern.value() - 1) * dil - win.pad_begin(i) - win.pad_end(i);
    if (!d.is_static()) {
      out.push_back(s == 1 ? dim_add(d, grow) : Dim::unknown());
      continue;
    }
    int64_t o = s * (d.value() - 1) + grow + 1;
    if (o < 1)
      ctx.fail("expected an output size >= 1 along spatial dim ", i, ", got ", o, " (input ",
               d.str(), ", kernel ", kern.str(), ", pads ", win.pad_begin(i), "+", win.pad_end(i),
               ")");
    out.push_back(Dim(o));
  }
  return one({ctx.dtype(0), out});
}

void register_convs(OpRegistry& r) {
  OpDef c;
  c.name = "conv";
  c.amp = AmpRole::low;
  c.arity(2, 3);
  add_window_attrs(c);
  c.attr("groups", AttrKind::Int, AttrValue(1));
  c.doc =
      "Convolution (cross-correlation) of x [N, C, D...] with w [M, C/groups, K...], "
      "plus bias [M]: [N, M, O...].";
  c.infer = infer_conv;
  c.vjp = conv_vjp;
  c.jvp = conv_jvp;
  c.vmap = conv_vmap;
  r.add(std::move(c));

  OpDef t;
  t.name = "conv_transpose";
  t.amp = AmpRole::low;
  t.arity(2, 3);
  add_window_attrs(t);
  t.attr("output_padding", AttrKind::Ints, AttrValue(IntList{}))
      .attr("groups", AttrKind::Int, AttrValue(1));
  t.doc =
      "Transposed convolution of x [N, C, D...] with w [C, M/groups, K...], plus bias "
      "[M]: [N, M, O...].";
  t.infer = infer_conv_transpose;
  t.vjp = conv_transpose_vjp;
  t.jvp = conv_jvp;
  t.vmap = conv_vmap;
  r.add(std::move(t));
}

// ---- pools -------------------------------------------------------------------------

std::vector<TensorType> infer_pool(const InferContext& ctx) {
  expect_float(ctx, 0);
  int64_t k = spatial_rank(ctx);
  IntList kernel = ctx.attrs().get_ints("kernel_shape");
  if (kernel.empty()) ctx.fail("expected a non-empty kernel_shape, got []");
  kernel = spatial_list(ctx, "kernel_shape", k, 1, 1);
  Window win = read_window(ctx, k);
  bool ceil_mode = ctx.attrs().get_bool("ceil_mode");
  const Shape& x = ctx.shape(0);
  Shape out{x[0], x[1]};
  for (size_t i = 0; i < size_t(k); ++i)
    out.push_back(window_out(ctx, win, i, x[i + 2], Dim(kernel[i]), ceil_mode));
  return one({ctx.dtype(0), out});
}

void register_pools(OpRegistry& r) {
  for (const char* name : {"max_pool", "avg_pool"}) {
    OpDef d;
    d.name = name;
    d.arity(1).attr("kernel_shape", AttrKind::Ints);
    add_window_attrs(d);
    d.attr("ceil_mode", AttrKind::Bool, AttrValue(false));
    bool avg = d.name == "avg_pool";
    if (avg) d.attr("count_include_pad", AttrKind::Bool, AttrValue(false));
    d.doc = str_cat(avg ? "Mean" : "Maximum", " over sliding windows of x [N, C, D...] ",
                    "(ONNX output-size rules, floor or ceil mode).");
    d.infer = infer_pool;
    d.vjp = avg ? avg_pool_vjp : max_pool_vjp;
    d.jvp = avg ? JvpFn(rules::linear_jvp) : JvpFn(max_pool_jvp);
    d.vmap = pool_vmap;
    r.add(std::move(d));
  }
  for (const char* name : {"global_max_pool", "global_avg_pool"}) {
    OpDef d;
    d.name = name;
    d.arity(1);
    d.doc = str_cat(d.name == "global_max_pool" ? "Maximum" : "Mean",
                    " over all spatial dims: [N, C, ...] -> [N, C, 1, ..., 1].");
    bool max = d.name == "global_max_pool";
    d.vjp = max ? global_max_pool_vjp : global_avg_pool_vjp;
    d.jvp = max ? JvpFn(global_max_pool_jvp) : JvpFn(rules::linear_jvp);
    d.vmap = pool_vmap;
    d.infer = [](const InferContext& ctx) {
      expect_float(ctx, 0);
      spatial_rank(ctx, true);
      Shape out = ctx.shape(0);
      std::fill(out.begin() + 2, out.end(), Dim(1));
      return one({ctx.dtype(0), out});
    };
    r.add(std::move(d));
  }
}

// ---- resize ------------------------------------------------------------------------

std::vector<TensorType> infer_resize(const InferContext& ctx) {
  const Attrs& a = ctx.attrs();
  if (a.get_string("mode") == "linear")
    expect_float(ctx, 0);
  else
    expect_numeric(ctx, 0);
  const IntList& sizes = a.get_ints("sizes");
  FloatList scales = a.get_floats("scales");
  if (sizes.empty() == scales.empty())
    ctx.fail("expected exactly one of sizes or scales, got sizes ", list_str(sizes), " and scales ",
             list_str(scales));
  size_t rank = size_t(ctx.rank(0));
  const char* key = sizes.empty() ? "scales" : "sizes";
  if ((sizes.empty() ? scales.size() : sizes.size()) != rank)
    ctx.fail("expected '", key, "' of length ", rank, " (the rank of ", ctx.input(0).str(),
             "), got ", sizes.empty() ? list_str(scales) : list_str(sizes));
  Shape out = ctx.shape(0);
  for (size_t i = 0; i < rank; ++i) {
    const Dim& d = ctx.shape(0)[i];
    if (!sizes.empty()) {
      if (sizes[i] < 0) ctx.fail("expected sizes >= 0, got ", list_str(sizes));
      out[i] = Dim(sizes[i]);
    } else {
      double sc = scales[i];
      if (!(sc > 0.0) || !std::isfinite(sc))
        ctx.fail("expected finite scales > 0, got ", list_str(scales));
      double o = std::floor(double(d.is_static() ? d.value() : 1) * sc);
      if (!(o < 9e18))
        ctx.fail("expected scales that keep sizes in int64 range, got ", list_str(scales));
      if (d.is_static())
        out[i] = Dim(int64_t(o));
      else
        out[i] = sc == 1.0 ? d : Dim::unknown();
    }
    if (d.is(0) && !out[i].is(0))
      ctx.fail("expected output dim ", i, " of 0 for an empty input dim, got ", out[i].str());
  }
  return one({ctx.dtype(0), out});
}

void register_resize(OpRegistry& r) {
  OpDef d;
  d.name = "resize";
  d.arity(1)
      .attr("sizes", AttrKind::Ints, AttrValue(IntList{}))
      .attr("scales", AttrKind::Floats, AttrValue(FloatList{}))
      .attr("mode", AttrKind::String, AttrValue("nearest"), {"nearest", "linear"})
      .attr("coordinate_transformation", AttrKind::String, AttrValue("half_pixel"),
            {"half_pixel", "align_corners", "asymmetric"})
      .attr("nearest_mode", AttrKind::String, AttrValue("round_prefer_floor"),
            {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  d.doc =
      "Resamples every dim of x to sizes[i] or floor(dim * scales[i]) by nearest or "
      "(multi)linear interpolation.";
  d.infer = infer_resize;
  d.vjp = resize_vjp;
  d.jvp = rules::linear_jvp;
  d.vmap = resize_vmap;
  r.add(std::move(d));
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  register_softmax(r);
  register_trailing_norms(r);
  register_channel_norms(r);
  register_attention(r);
  register_embedding(r);
  register_dropout(r);
  register_cross_entropy(r);
  register_convs(r);
  register_pools(r);
  register_resize(r);
}

}  // namespace rlx::detail
