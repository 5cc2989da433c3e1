// The LLM ops: rope, kv_cache_write, attention_cached (and the three as one op), sample, swiglu.
// Their layouts are the ones a decode step produces without transposes: activations [B, S, H, D]
// (as the projections leave them), the KV cache [B, KVH, C, D] (each head's rows contiguous, as
// attention reads them). Each op's inference, rules and registration sit together. The
// decompositions are written in core ops so that a device without a kernel runs them (and
// kv_cache_write's, attention_cached's and rope_attention_cached's vjp / jvp / vmap are
// those of their decompositions); run-time sizes (a symbolic S in a prefill graph) are
// counted with cumsum over ones rather than iota, so no decomposition needs static
// sequence lengths.
#include <cmath>
#include <limits>

#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "ops/rule_util.h"
#include "rlx/error.h"
#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using rules::expand_dims;
using rules::moveaxis;

// Positions and cache offsets are i32 or i64 (what token ids and counters come as).
void expect_index(const InferContext& ctx, size_t i, const char* role) {
  DType dt = ctx.dtype(i);
  if (dt != DType::i32 && dt != DType::i64)
    ctx.fail_type("expected ", role, " (input ", i, ") of dtype i32 or i64, got ",
                  ctx.input(i).str());
}

void expect_rank_of(const InferContext& ctx, size_t i, int64_t rank, const char* layout) {
  if (ctx.rank(i) != rank)
    ctx.fail("expected input ", i, " of rank ", rank, " (", layout, "), got ", ctx.input(i).str());
}

DType math_of(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }

Value slice_axes(Value x, IntList starts, IntList stops, IntList axes) {
  return op("slice", {x}, {{"starts", starts}, {"stops", stops}, {"axes", axes}});
}
Value slice_last(Value x, int64_t lo, int64_t hi) {
  return slice_axes(x, {lo}, {hi}, {x.rank() - 1});
}

// 0, 1, … along `axis` of a tensor shaped like x, in i64 (sizes read at run time).
Value count_along(Value x, int64_t axis) {
  Value ones = cast(rules::ones_like(x), DType::i64);
  return op("cumsum", {ones}, {{"axis", axis}}) - 1.0;
}

// ---- rope ----------------------------------------------------------------------------

std::vector<TensorType> infer_rope(const InferContext& ctx) {
  expect_float(ctx, 0);
  if (ctx.rank(0) < 3)
    ctx.fail("expected x of rank >= 3 ([..., S, H, D]), got ", ctx.input(0).str());
  expect_index(ctx, 1, "pos");
  const Shape& x = ctx.shape(0);
  const Shape& p = ctx.shape(1);
  // pos broadcasts against x.shape[:-2] ([..., S]); its last dim is S itself.
  Shape lead(x.begin(), x.end() - 2);
  if (p.empty() || p.size() > lead.size())
    ctx.fail("expected pos of rank 1 to ", lead.size(), " ([S] or [B, S]), got ",
             ctx.input(1).str());
  unify_dims(ctx, p.back(), lead.back(), "positions of pos and S = x.shape[-3]");
  for (size_t d = 0; d + 1 < p.size(); ++d) {
    const Dim& want = lead[lead.size() - p.size() + d];
    if (!p[d].is(1)) unify_dims(ctx, p[d], want, "batch dims of pos and x");
  }
  const Attrs& a = ctx.attrs();
  int64_t n_rot = a.get_int("n_rot");
  const Dim& d = x.back();
  if (n_rot < 0 || n_rot % 2 != 0) ctx.fail("expected an even n_rot >= 0, got ", n_rot);
  if (d.is_static() && n_rot > d.value())
    ctx.fail("expected n_rot <= D = ", d.value(), ", got ", n_rot);
  if (n_rot == 0 && d.is_static() && d.value() % 2 != 0)
    ctx.fail("expected an even head dim D for n_rot 0 (all of D), got ", ctx.input(0).str());
  double base = a.get_float("base"), scale = a.get_float("freq_scale");
  if (!(base > 0) || !std::isfinite(base)) ctx.fail("expected base > 0, got ", base);
  if (!std::isfinite(scale)) ctx.fail("expected a finite freq_scale, got ", scale);
  if (ctx.num_inputs() == 3) {
    expect_float(ctx, 2);
    expect_rank_of(ctx, 2, 1, "[n_rot / 2]");
    Dim half = n_rot > 0 ? Dim(n_rot / 2) : d.is_static() ? Dim(d.value() / 2) : Dim::unknown();
    unify_dims(ctx, ctx.shape(2)[0], half, "freq_factors and n_rot / 2");
  }
  return one(ctx.input(0));
}

Values rope_decomposed(const RuleArgs& a) {
  Value x = a.inputs[0], pos = a.inputs[1];
  const Dim& d = x.shape().back();
  int64_t n = a.attrs.get_int("n_rot");
  if (n == 0) {
    if (!d.is_static())
      fail<NotSupported>("rope",
                         "expected a static head dim for the decomposition with n_rot 0, got ",
                         x.type().str());
    n = d.value();
  }
  const bool whole = d.is_static() && d.value() == n;
  const int64_t half = n / 2;
  const DType cd = math_of(x.dtype());
  // theta_i = pos * freq_scale * base^(-2i / n) / freq_factors[i]; inverse negates it. (The
  // CPU and CUDA kernels form it as ggml does in f32, pos * theta_scale^i pair by pair: the
  // same angle within f32 rounding.)
  double base = a.attrs.get_float("base"), fs = a.attrs.get_float("freq_scale");
  if (a.attrs.get_bool("inverse")) fs = -fs;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = std::pow(base, -2.0 * double(i) / double(n));
  Value freq = a.g.constant(Literal::from_doubles(cd, {half}, inv));
  if (a.inputs.size() > 2) freq = freq / to(a.inputs[2], cd);
  Value p = to(pos, cd) * fs;
  Value theta = expand_dims(p, {p.rank()}) * freq;  // [..., S, half]
  theta = expand_dims(theta, {theta.rank() - 1});   // [..., S, 1, half]: every head
  Value c = op("cos", {theta}), s = op("sin", {theta});
  Value xc = to(x, cd);
  Value xr = whole ? xc : slice_last(xc, 0, n);
  Value y;
  if (a.attrs.get_string("mode") == "neox") {
    Value x0 = slice_last(xr, 0, half), x1 = slice_last(xr, half, n);
    y = op("concat", {x0 * c - x1 * s, x0 * s + x1 * c}, {{"axis", xr.rank() - 1}});
  } else {  // pairs: [..., n] as [..., half, 2]
    int64_t r = xr.rank();
    IntList pairs(size_t(r - 1), 0);
    pairs.push_back(half);
    pairs.push_back(2);
    Value xp = reshape(xr, pairs);
    auto part = [&](int64_t i) {
      return op("squeeze", {slice_last(xp, i, i + 1)}, {{"axes", IntList{r}}});
    };
    Value x0 = part(0), x1 = part(1);
    Value y0 = expand_dims(x0 * c - x1 * s, {r}), y1 = expand_dims(x0 * s + x1 * c, {r});
    IntList back(size_t(r - 1), 0);
    back.push_back(n);
    y = reshape(op("concat", {y0, y1}, {{"axis", r}}), back);
  }
  if (!whole)
    y = op("concat", {y, slice_last(xc, n, std::numeric_limits<int64_t>::max())},
           {{"axis", xc.rank() - 1}});
  return {to(y, x.dtype())};
}

// A rotation: its transpose is the rotation by -theta.
Values rope_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Attrs at = a.attrs;
  at.set("inverse", !a.attrs.get_bool("inverse"));
  Values in(a.inputs.begin(), a.inputs.end());
  in[0] = ct[0];
  Values out(a.inputs.size());  // pos and freq_factors: no gradient (constants of the model)
  out[0] = op("rope", in, at);
  return out;
}

Values rope_jvp(const RuleArgs& a, std::span<const Value> t) {
  if (!t[0].valid()) return {Value{}};  // freq_factors' tangent is not followed (a constant)
  Values in(a.inputs.begin(), a.inputs.end());
  in[0] = t[0];
  return {op("rope", in, a.attrs)};
}

// The batch goes in front of x; a batched pos in front too, padded with size-1 axes so that
// it lines up under x's lead dims ([N, ..., S]). Batched freq_factors: a loop.
VmapResult rope_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  if (a.inputs.size() > 2 && in_axes[2] >= 0) return rules::vmap_by_scan(a, in_axes);
  Value x = a.inputs[0], pos = a.inputs[1];
  x = in_axes[0] >= 0 ? moveaxis(x, in_axes[0], 0) : rules::materialize_batch(x, pos, in_axes[1]);
  if (in_axes[1] >= 0) {
    pos = moveaxis(pos, in_axes[1], 0);
    int64_t pad = (x.rank() - 2) - pos.rank();
    if (pad > 0) pos = expand_dims(pos, range(1, 1 + pad));
  }
  Values in{x, pos};
  if (a.inputs.size() > 2) in.push_back(a.inputs[2]);
  return {{op("rope", in, a.attrs)}, {0}};
}

// The rotation's attributes, rope's and rope_attention_cached's.
OpDef& rope_attrs(OpDef& d) {
  return d.attr("mode", AttrKind::String, AttrValue("pairs"), {"pairs", "neox"})
      .attr("n_rot", AttrKind::Int, AttrValue(0))
      .attr("base", AttrKind::Float, AttrValue(10000.0))
      .attr("freq_scale", AttrKind::Float, AttrValue(1.0));
}

void register_rope(OpRegistry& r) {
  OpDef d;
  d.name = "rope";
  rope_attrs(d.arity(2, 3)).attr("inverse", AttrKind::Bool, AttrValue(false));
  d.doc =
      "Rotary position embedding of x [..., S, H, D] at integer positions pos (broadcasting "
      "against [..., S]: [S] or [B, S]), optional freq_factors [n_rot / 2]. The first n_rot "
      "dims (0: all of D) rotate by theta_i = pos * freq_scale * base^(-2i / n_rot) / "
      "freq_factors[i]: mode 'pairs' rotates (2i, 2i + 1) (llama), 'neox' (i, i + n_rot / 2) "
      "(qwen2, gpt-neox); the other dims pass through. inverse rotates by -theta (the vjp). "
      "Computed in f32 (f64 for f64).";
  d.infer = infer_rope;
  d.decompose = rope_decomposed;
  d.vjp = rope_vjp;
  d.jvp = rope_jvp;
  d.vmap = rope_vmap;
  r.add(std::move(d));
}

// ---- kv_cache_write ------------------------------------------------------------------

std::vector<TensorType> infer_kv_cache_write(const InferContext& ctx) {
  expect_float(ctx, 0);
  expect_float(ctx, 1);
  expect_index(ctx, 2, "pos");
  expect_rank_of(ctx, 0, 4, "cache [B, KVH, C, D]");
  expect_rank_of(ctx, 1, 4, "new [B, S, KVH, D]");
  expect_rank_of(ctx, 2, 1, "pos [B]");
  const Shape &c = ctx.shape(0), &n = ctx.shape(1);
  Shape out = c;
  out[0] = unify_dims(ctx, c[0], n[0], "batch of cache and new");
  out[0] = unify_dims(ctx, out[0], ctx.shape(2)[0], "batch of cache and pos");
  out[1] = unify_dims(ctx, c[1], n[2], "KV heads of cache (dim 1) and new (dim 2)");
  out[3] = unify_dims(ctx, c[3], n[3], "head dims of cache and new");
  if (c[2].is_static() && n[1].is_static() && n[1].value() > c[2].value())
    ctx.fail("expected at most C = ", c[2].value(), " new rows, got S = ", n[1].value());
  return one({ctx.dtype(0), out});
}

// The functional update: scatter_elements of the new rows into the cache (a new tensor).
Values kv_cache_write_decomposed(const RuleArgs& a) {
  Value cache = a.inputs[0], nw = a.inputs[1], pos = a.inputs[2];
  Value upd = transpose(to(nw, cache.dtype()), {0, 2, 1, 3});  // [B, KVH, S, D]
  Value rows = count_along(upd, 2) + expand_dims(to(pos, DType::i64), {1, 2, 3});
  return {op("scatter_elements", {cache, rows, upd}, {{"axis", 2}})};
}

void register_kv_cache_write(OpRegistry& r) {
  OpDef d;
  d.name = "kv_cache_write";
  d.traits = Trait::side_effect;
  d.arity(3);
  d.doc =
      "Writes new [B, S, KVH, D] into rows pos[b] .. pos[b] + S - 1 of every head of cache "
      "[B, KVH, C, D] (converted to the cache's dtype) and returns the cache. IN PLACE: input 0 "
      "is updated and the output is its storage (no copy per token); read the output, not "
      "input 0, after the write. pos [B] (i32 / i64) with pos + S > C is a ValueError at run "
      "time. A device without a kernel runs the functional decomposition (scatter_elements: "
      "a new tensor). Autodiff treats it as that functional update.";
  d.infer = infer_kv_cache_write;
  d.decompose = kv_cache_write_decomposed;
  set_rules_by_decomposition(d);
  r.add(std::move(d));
}

// ---- attention_cached ----------------------------------------------------------------

std::vector<TensorType> infer_attention_cached(const InferContext& ctx) {
  expect_float(ctx, 0);
  expect_float(ctx, 1);
  expect_same_dtype(ctx, 1, 2);
  expect_index(ctx, 3, "pos");
  expect_rank_of(ctx, 0, 4, "q [B, S, H, D]");
  expect_rank_of(ctx, 1, 4, "k_cache [B, KVH, C, D]");
  expect_rank_of(ctx, 2, 4, "v_cache [B, KVH, C, D]");
  expect_rank_of(ctx, 3, 1, "pos [B]");
  const Shape &q = ctx.shape(0), &k = ctx.shape(1), &v = ctx.shape(2);
  Shape out = q;
  for (size_t i = 0; i < 4; ++i) unify_dims(ctx, k[i], v[i], "dims of k_cache and v_cache");
  out[0] = unify_dims(ctx, q[0], k[0], "batch of q and k_cache");
  out[0] = unify_dims(ctx, out[0], ctx.shape(3)[0], "batch of q and pos");
  out[3] = unify_dims(ctx, q[3], k[3], "head dims of q and k_cache");
  const Dim &h = q[2], &kvh = k[1];
  if (kvh.is(0) && !h.is(0)) ctx.fail("expected KV heads >= 1, got ", ctx.input(1).str());
  if (h.is_static() && kvh.is_static() && kvh.value() > 0 && h.value() % kvh.value() != 0)
    ctx.fail("expected query heads H = ", h.value(),
             " to be a multiple of KV heads KVH = ", kvh.value());
  if (k[2].is_static() && q[1].is_static() && q[1].value() > k[2].value())
    ctx.fail("expected at most C = ", k[2].value(), " queries, got S = ", q[1].value());
  expect_at_least(ctx, "scale", ctx.attrs().get_float("scale"), 0.0);
  return one({ctx.dtype(0), out});
}

// Attention over the heads grouped per KV head, with an additive causal bias built from
// pos; cache rows no query sees are zeroed first, so that whatever they hold (NaN from an
// uninitialised cache) never reaches the output.
Values attention_cached_decomposed(const RuleArgs& a) {
  Value q = a.inputs[0], k = a.inputs[1], v = a.inputs[2], pos = a.inputs[3];
  const Dim &hd = q.shape()[2], &kvd = k.shape()[1];
  if (!hd.is_static() || !kvd.is_static())
    fail<NotSupported>("attention_cached",
                       "expected static head counts for the decomposition, got ", q.type().str(),
                       " and ", k.type().str());
  const int64_t h = hd.value(), kvh = kvd.value();
  // No KV head (then no query head either) or no query: nothing to attend with.
  if (kvh == 0 || q.shape()[1].is(0)) return {rules::zeros_like(q)};
  const DType dt = q.dtype();
  // Queries grouped by the KV head they read: [B, KVH, G, S, D] against [B, KVH, 1, C, D].
  Value qg = transpose(reshape(q, {0, 0, kvh, h / kvh, -1}), {0, 2, 3, 1, 4});
  Value p = expand_dims(to(pos, DType::i64), {1, 2, 3, 4});  // [B,1,1,1,1]
  Value row = transpose(count_along(slice_axes(q, {0, 0}, {1, 1}, {2, 3}), 1), {0, 2, 3, 1});
  row = expand_dims(row, {4});                                        // [B,1,1,S,1]
  Value col = count_along(slice_axes(k, {0, 0}, {1, 1}, {1, 3}), 2);  // [B,1,C,1]
  Value last = op("reduce_max", {row}, {{"axes", IntList{3}}, {"keepdims", true}}) + p;
  // Rows past the last query's position hold anything: zero them before any product.
  Value seen = op("le", {expand_dims(col, {1}), last});  // [B,1,1,C,1]
  auto kv = [&](Value x) {
    return op("select", {seen, expand_dims(to(x, dt), {2}), scalar_like(qg, 0)});
  };
  Value vis = op("le", {expand_dims(transpose(col, {0, 1, 3, 2}), {1}), row + p});  // [B,1,1,S,C]
  Value bias = op("select", {vis, scalar_like(qg, 0), scalar_like(qg, lowest_finite(dt))});
  Value y;
  const DType ct = k.dtype();
  if (is_float(ct) && dtype_size(ct) < dtype_size(dt)) {
    // A narrower cache: the queries and the probabilities are rounded to its dtype, so that
    // both products are cache-dtype x cache-dtype with sums in dt (the kernels' contract).
    auto round = [&](Value x) { return to(to(x, ct), dt); };
    double scale = a.attrs.get_float("scale");
    if (scale == 0) {
      const Dim& d = q.shape().back();
      if (!d.is_static())
        fail<NotSupported>("attention_cached", "expected a static head dim or a scale, got ",
                           q.type().str());
      scale = d.value() > 0 ? 1.0 / std::sqrt(double(d.value())) : 1.0;
    }
    Value s = matmul(round(qg), moveaxis(kv(k), -1, -2)) * scalar_like(qg, scale) + bias;
    y = matmul(round(softmax(s, -1)), kv(v));
  } else {
    y = op("attention", {qg, kv(k), kv(v), bias}, {{"scale", a.attrs.get_float("scale")}});
  }
  return {reshape(transpose(y, {0, 3, 1, 2, 4}), {0, 0, h, -1})};
}

void register_attention_cached(OpRegistry& r) {
  OpDef d;
  d.name = "attention_cached";
  d.arity(4).attr("scale", AttrKind::Float, AttrValue(0.0));
  d.doc =
      "Causal attention of q [B, S, H, D] over a KV cache k_cache, v_cache [B, KVH, C, D] "
      "(any float dtype) at positions pos [B] (i32 / i64): query s of sequence b sits at "
      "pos[b] + s and sees cache rows 0 .. pos[b] + s (rows beyond are never read); query "
      "head h reads KV head h / (H / KVH). scale 0 means 1/sqrt(D). Output [B, S, H, D] in "
      "q's dtype, computed in f32 (f64 for f64). With a narrower cache (f16 / bf16 for f32 "
      "queries) the queries and the softmax probabilities are rounded to the cache dtype "
      "before their products (half x half, f32 sums: as ggml and GPU kernels compute).";
  d.infer = infer_attention_cached;
  d.decompose = attention_cached_decomposed;
  set_rules_by_decomposition(d);
  r.add(std::move(d));
}

// ---- rope_attention_cached -----------------------------------------------------------

// The parts' own inference on the parts' inputs (errors name this op and the part's input
// roles), and q, k and v over one S.
std::vector<TensorType> infer_rope_attention_cached(const InferContext& ctx) {
  const TensorType &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2);
  auto part = [&](auto infer, std::vector<TensorType> in) {
    return infer(InferContext(ctx.op(), in, ctx.attrs(), {}))[0];
  };
  auto rotated = [&](const TensorType& x) {
    std::vector<TensorType> in{x, ctx.input(5)};
    if (ctx.num_inputs() == 8) in.push_back(ctx.input(7));
    return part(infer_rope, in);
  };
  const TensorType qr = rotated(q), kr = rotated(k);
  const TensorType kc = part(infer_kv_cache_write, {ctx.input(3), kr, ctx.input(6)});
  const TensorType vc = part(infer_kv_cache_write, {ctx.input(4), v, ctx.input(6)});
  unify_dims(ctx, q.shape[1], k.shape[1], "S of q and k");
  unify_dims(ctx, k.shape[1], v.shape[1], "S of k and v");
  return {part(infer_attention_cached, {qr, kc, vc, ctx.input(6)}), kc, vc};
}

// rope of q and k, kv_cache_write of k and v, attention_cached: the parts it fuses.
Values rope_attention_cached_decomposed(const RuleArgs& a) {
  std::span<const Value> in = a.inputs;
  const Attrs rope_attrs{{"mode", a.attrs.get_string("mode")},
                         {"n_rot", a.attrs.get_int("n_rot")},
                         {"base", a.attrs.get_float("base")},
                         {"freq_scale", a.attrs.get_float("freq_scale")}};
  auto rope = [&](Value x) {
    Values r{x, in[5]};
    if (in.size() > 7) r.push_back(in[7]);
    return op("rope", r, rope_attrs);
  };
  Value kc = op("kv_cache_write", {in[3], rope(in[1]), in[6]});
  Value vc = op("kv_cache_write", {in[4], in[2], in[6]});
  return {
      op("attention_cached", {rope(in[0]), kc, vc, in[6]}, {{"scale", a.attrs.get_float("scale")}}),
      kc, vc};
}

void register_rope_attention_cached(OpRegistry& r) {
  OpDef d;
  d.name = "rope_attention_cached";
  d.traits = Trait::side_effect;
  rope_attrs(d.arity(7, 8).attr("scale", AttrKind::Float, AttrValue(0.0)));
  d.doc =
      "A decode step's attention with what comes before it, as one op: q [B, S, H, D] and k "
      "[B, S, KVH, D] rotated by rope at positions (input 5, as rope's pos; freq_factors "
      "optional input 7; rope's attrs), k and v [B, S, KVH, D] written into k_cache and "
      "v_cache [B, KVH, C, D] at rows pos[b] .. (input 6, as kv_cache_write: IN PLACE), then "
      "attention_cached of the rotated q over the caches. Outputs: the attention [B, S, H, D] "
      "and the two caches (their inputs' storage). A device without a kernel for it (or for "
      "its shapes: the GPU's takes one new row per sequence) runs the parts.";
  d.infer = infer_rope_attention_cached;
  d.decompose = rope_attention_cached_decomposed;
  set_rules_by_decomposition(d);
  r.add(std::move(d));
}

// ---- sample --------------------------------------------------------------------------

std::vector<TensorType> infer_sample(const InferContext& ctx) {
  expect_float(ctx, 0);
  if (ctx.rank(0) < 1)
    ctx.fail("expected logits of rank >= 1 ([..., V]), got ", ctx.input(0).str());
  if (ctx.dtype(1) != DType::i64)
    ctx.fail_type("expected rng (input 1) of dtype i64 ([..., 2]: seed, counter), got ",
                  ctx.input(1).str());
  const Shape& l = ctx.shape(0);
  Shape rows(l.begin(), l.end() - 1);
  if (l.back().is(0)) ctx.fail("expected a vocabulary of V >= 1, got ", ctx.input(0).str());
  auto lead_of = [&](size_t i, const char* role) {
    const Shape& s = ctx.shape(i);
    if (s.size() != rows.size() + 1)
      ctx.fail("expected ", role, " of rank ", rows.size() + 1, " like logits, got ",
               ctx.input(i).str());
    for (size_t d = 0; d < rows.size(); ++d)
      rows[d] = unify_dims(ctx, rows[d], s[d], str_cat("leading dims of logits and ", role));
  };
  lead_of(1, "rng");
  unify_dims(ctx, ctx.shape(1).back(), Dim(2), "rng's last dim (seed, counter)");
  if (ctx.num_inputs() == 3) {
    if (ctx.dtype(2) != DType::i32)
      ctx.fail_type("expected history (input 2) of dtype i32, got ", ctx.input(2).str());
    lead_of(2, "history");
  }
  const Attrs& a = ctx.attrs();
  expect_at_least(ctx, "temperature", a.get_float("temperature"), 0.0);
  if (a.get_int("top_k") < 0) ctx.fail("expected top_k >= 0, got ", a.get_int("top_k"));
  double top_p = a.get_float("top_p"), min_p = a.get_float("min_p");
  if (!(top_p > 0 && top_p <= 1)) ctx.fail("expected top_p in (0, 1], got ", top_p);
  if (!(min_p >= 0 && min_p <= 1)) ctx.fail("expected min_p in [0, 1], got ", min_p);
  double pen = a.get_float("repeat_penalty");
  if (!(pen > 0) || !std::isfinite(pen)) ctx.fail("expected repeat_penalty > 0, got ", pen);
  return one({DType::i32, rows});
}

// Every input carries the leading dims: batch them all in front and sample each row.
VmapResult sample_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  return {{op("sample", rules::all_batched_front(a, in_axes), a.attrs)}, {0}};
}

void register_sample(OpRegistry& r) {
  OpDef d;
  d.name = "sample";
  d.traits = Trait::nondifferentiable;
  d.arity(2, 3)
      .attr("temperature", AttrKind::Float, AttrValue(1.0))
      .attr("top_k", AttrKind::Int, AttrValue(0))
      .attr("top_p", AttrKind::Float, AttrValue(1.0))
      .attr("min_p", AttrKind::Float, AttrValue(0.0))
      .attr("repeat_penalty", AttrKind::Float, AttrValue(1.0));
  d.doc =
      "One token id (i32) per row of logits [..., V], llama.cpp's chain: repeat_penalty on the "
      "ids in history [..., R] (i32, -1 = empty; each id once: logit > 0 divided, else "
      "multiplied), top_k (0: off), top_p (1: off), min_p (0: off) on the softmax of the "
      "penalised logits, then temperature (0: greedy argmax, ties to the lowest id) and a "
      "draw. rng [..., 2] (i64 seed, counter): u = u53(w0, w1) of Philox4x32-10 block "
      "(counter, 0) under key seed (philox.h); the candidate whose cumulative weight, in "
      "increasing id order, first exceeds u * total is drawn.";
  d.infer = infer_sample;
  d.vmap = sample_vmap;
  r.add(std::move(d));
}

// ---- swiglu --------------------------------------------------------------------------

std::vector<TensorType> infer_swiglu(const InferContext& ctx) {
  expect_float(ctx, 0);
  expect_min_rank(ctx, 0, 1);
  Shape s = ctx.shape(0);
  const auto axis = size_t(normalize_axis(ctx, ctx.attrs().get_int("axis"), int64_t(s.size())));
  const Dim& d = s[axis];
  if (d.is_static() && d.value() % 2 != 0)
    ctx.fail("expected an even size along axis ", axis, " (gate and up halves), got ",
             ctx.input(0).str());
  s[axis] = d.is_static() ? Dim(d.value() / 2) : Dim::unknown();
  return one({ctx.dtype(0), s});
}

// silu of the first half times the second: split, silu, mul.
std::vector<Value> swiglu_decomposed(const RuleArgs& a) {
  std::vector<Value> halves =
      op_n("split", {a.inputs[0]}, {{"axis", a.attrs.get_int("axis")}, {"num", int64_t(2)}});
  return {op("silu", {halves[0]}) * halves[1]};
}

void register_swiglu(OpRegistry& r) {
  OpDef d;
  d.name = "swiglu";
  d.arity(1).attr("axis", AttrKind::Int, AttrValue(-1));
  d.doc =
      "silu(a) * b for the halves a, b of x along axis (a first): a gated MLP's activation "
      "over its gate and up projections stacked in one product (llama's FFN), without "
      "splitting that product first.";
  d.infer = infer_swiglu;
  d.decompose = swiglu_decomposed;
  set_rules_by_decomposition(d);
  r.add(std::move(d));
}

}  // namespace

void register_llm_ops(OpRegistry& r) {
  register_rope(r);
  register_kv_cache_write(r);
  register_attention_cached(r);
  register_rope_attention_cached(r);
  register_sample(r);
  register_swiglu(r);
}

}  // namespace rlx::detail
