// Channel-blocked layout ops, created by the nchwc_layout pass (CPU) rather than by users.
// The blocked form of a [N, C, H, W] tensor is [N, ceil(C / L), H, W, L] with L = 16 lanes
// (or 8 on CPUs without AVX-512): channel c sits in block c / L, lane c % L; the lanes past
// C hold zeros. This is exactly oneDNN's nChw16c (nChw8c) layout with its padded channel
// dims, so oneDNN's direct conv kernels read and write it with no reorder.
//   to_blocked(x) {lanes=L}            [N, C, H, W] -> [N, Cb, H, W, L], zero lanes past C;
//   from_blocked(x) {channels=C}       [N, Cb, H, W, L] -> [N, C, H, W];
//   conv_blocked(x, w, [bias]) {conv attrs, activation, lanes}
//                                      = to_blocked(act(conv(x', w, bias))) where x' is x
//                                      itself (4-D, plain) or from_blocked(x) (5-D; the
//                                      channels are w.shape[1] * groups);
//   max_pool_blocked(x) {pool attrs, lanes}
//                                      = to_blocked(max_pool(from_blocked(x))), 2-D.
// conv_blocked's CPU kernel keeps a reordered copy of w keyed by w's data pointer: the
// pass creates it only for weights made by a `constant` node (immutable bytes at a stable
// address for the compiled graph's life). Each op decomposes into core ops.
#include <algorithm>

#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "rlx/ops.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;
// The lane counts oneDNN has direct kernels for: 16 (nChw16c, AVX-512) and 8 (nChw8c, AVX2).
bool valid_lanes(int64_t lanes) { return lanes == 8 || lanes == 16; }

int64_t lanes_attr(const InferContext& ctx) {
  int64_t lanes = ctx.attrs().get_int("lanes");
  if (!valid_lanes(lanes)) ctx.fail("expected lanes 8 or 16, got ", lanes);
  return lanes;
}

int64_t blocks(int64_t c, int64_t lanes) { return (c + lanes - 1) / lanes; }

Dim blocks_of(const Dim& c, int64_t lanes) {
  return c.is_static() ? Dim(blocks(c.value(), lanes)) : Dim::unknown();
}

// The lanes of a blocked [N, Cb, H, W, lanes] input, 0 where its last dim is not 8 or 16.
int64_t lanes_of(const Shape& x) {
  return x.size() == 5 && x[4].is_static() && valid_lanes(x[4].value()) ? x[4].value() : 0;
}

Types infer_to_blocked(const InferContext& ctx) {
  expect_float(ctx, 0);
  expect_rank(ctx, 0, 4);
  const Shape& x = ctx.shape(0);
  int64_t lanes = lanes_attr(ctx);
  if (!x[1].is_static()) ctx.fail("expected a static channel dim, got ", ctx.input(0).str());
  return {{ctx.dtype(0), {x[0], blocks_of(x[1], lanes), x[2], x[3], Dim(lanes)}}};
}

Types infer_from_blocked(const InferContext& ctx) {
  expect_float(ctx, 0);
  expect_rank(ctx, 0, 5);
  const Shape& x = ctx.shape(0);
  int64_t c = ctx.attrs().get_int("channels"), lanes = lanes_of(x);
  if (c < 1) ctx.fail("expected channels >= 1, got ", c);
  if (!lanes || !x[1].is_static() || x[1].value() != blocks(c, lanes))
    ctx.fail("expected [N, ", blocks(c, lanes ? lanes : 16), ", H, W, ", lanes ? lanes : 16,
             "] (8 or 16 lanes) for channels ", c, ", got ", ctx.input(0).str());
  return {{ctx.dtype(0), {x[0], Dim(c), x[2], x[3]}}};
}

// The logical [N, C, H, W] input of a conv_blocked.
Shape logical_input(const InferContext& ctx, int64_t lanes) {
  const Shape& x = ctx.shape(0);
  if (ctx.rank(0) == 4) return x;
  if (ctx.rank(0) != 5 || lanes_of(x) != lanes)
    ctx.fail("expected x [N, C, H, W] or [N, Cb, H, W, ", lanes, "], got ", ctx.input(0).str());
  if (ctx.rank(1) != 4 || !ctx.shape(1)[1].is_static())
    ctx.fail("expected a 2-D window weight with static dims, got ", ctx.input(1).str());
  int64_t c = ctx.shape(1)[1].value() * ctx.attrs().get_int("groups");
  if (!x[1].is_static() || x[1].value() != blocks(c, lanes))
    ctx.fail("expected ", blocks(c, lanes), " channel blocks for ", c,
             " channels (w.shape[1] * groups), got ", ctx.input(0).str());
  return {x[0], Dim(c), x[2], x[3]};
}

Types infer_conv_blocked(const InferContext& ctx) {
  if (ctx.num_inputs() < 2) ctx.fail("expected x and w");
  int64_t lanes = lanes_attr(ctx);
  Types in(ctx.inputs().begin(), ctx.inputs().end());
  in[0].shape = logical_input(ctx, lanes);
  if (in[0].rank() != 4) ctx.fail("expected a 2-D conv, got ", ctx.input(0).str());
  Attrs conv;
  for (const auto& [k, v] : ctx.attrs())
    if (k != "lanes") conv.set(k, v);
  Types out = OpRegistry::global().get("conv").infer(InferContext(ctx.op(), in, conv, {}));
  const Shape& y = out[0].shape;
  if (!y[1].is_static()) ctx.fail("expected static output channels, got ", ctx.input(1).str());
  return {{out[0].dtype, {y[0], blocks_of(y[1], lanes), y[2], y[3], Dim(lanes)}}};
}

Value blocked(Value x, int64_t lanes) {  // to_blocked as core ops
  int64_t c = x.shape()[1].value(), cb = blocks(c, lanes);
  if (cb * lanes != c) x = op("pad", {x}, {{"pads", IntList{0, 0, 0, 0, 0, cb * lanes - c, 0, 0}}});
  int64_t h = x.shape()[2].value(), w = x.shape()[3].value();
  Value r = op("reshape", {x}, {{"shape", IntList{0, cb, lanes, h, w}}});
  return op("transpose", {r}, {{"perm", IntList{0, 1, 3, 4, 2}}});
}

Value unblocked(Value x, int64_t c) {  // from_blocked as core ops
  int64_t cb = x.shape()[1].value(), lanes = x.shape()[4].value();
  Value t = op("transpose", {x}, {{"perm", IntList{0, 1, 4, 2, 3}}});
  int64_t h = x.shape()[2].value(), w = x.shape()[3].value();
  Value r = op("reshape", {t}, {{"shape", IntList{0, cb * lanes, h, w}}});
  if (cb * lanes == c) return r;
  return op("slice", {r}, {{"starts", IntList{0}}, {"stops", IntList{c}}, {"axes", IntList{1}}});
}

Values decompose_to_blocked(const RuleArgs& a) {
  return {blocked(a.inputs[0], a.attrs.get_int("lanes"))};
}
Values decompose_from_blocked(const RuleArgs& a) {
  return {unblocked(a.inputs[0], a.attrs.get_int("channels"))};
}

Values decompose_conv_blocked(const RuleArgs& a) {
  Values in(a.inputs.begin(), a.inputs.end());
  if (in[0].rank() == 5)
    in[0] = unblocked(in[0], in[1].shape()[1].value() * a.attrs.get_int("groups"));
  Attrs conv;
  for (const auto& [k, v] : a.attrs)
    if (k != "activation" && k != "lanes") conv.set(k, v);
  Value y = op("conv", in, conv);
  return {blocked(apply_activation(y, a.attrs.get_string("activation")), a.attrs.get_int("lanes"))};
}

// max_pool_blocked: max_pool's shapes on the logical [N, Cb * L, H, W] (the zero lanes pool
// to zeros), blocked again.
Attrs without_lanes(const Attrs& attrs) {
  Attrs a;
  for (const auto& [k, v] : attrs)
    if (k != "lanes") a.set(k, v);
  return a;
}

Types infer_max_pool_blocked(const InferContext& ctx) {
  int64_t lanes = lanes_attr(ctx);
  const Shape& x = ctx.shape(0);
  if (ctx.rank(0) != 5 || lanes_of(x) != lanes || !x[1].is_static())
    ctx.fail("expected x [N, Cb, H, W, ", lanes, "] with static Cb, got ", ctx.input(0).str());
  Types in{{ctx.dtype(0), {x[0], Dim(x[1].value() * lanes), x[2], x[3]}}};
  Types out = OpRegistry::global()
                  .get("max_pool")
                  .infer(InferContext(ctx.op(), in, without_lanes(ctx.attrs()), {}));
  const Shape& y = out[0].shape;
  return {{out[0].dtype, {y[0], x[1], y[2], y[3], Dim(lanes)}}};
}

Values decompose_max_pool_blocked(const RuleArgs& a) {
  Value x = a.inputs[0];
  const int64_t lanes = a.attrs.get_int("lanes");
  Value y = op("max_pool", {unblocked(x, x.shape()[1].value() * lanes)}, without_lanes(a.attrs));
  return {blocked(y, lanes)};
}

}  // namespace

void register_blocked_ops(OpRegistry& r) {
  OpDef tb;
  tb.name = "to_blocked";
  tb.arity(1, 1).attr("lanes", AttrKind::Int, AttrValue(int64_t(16)));
  tb.doc =
      "[N, C, H, W] -> [N, ceil(C/L), H, W, L], L = lanes (16: oneDNN's nChw16c, 8: nChw8c), "
      "lanes past C zero.";
  tb.infer = infer_to_blocked;
  tb.decompose = decompose_to_blocked;
  set_rules_by_decomposition(tb);
  r.add(std::move(tb));

  OpDef fb;
  fb.name = "from_blocked";
  fb.arity(1, 1).attr("channels", AttrKind::Int, AttrValue(int64_t(1)));
  fb.doc = "[N, ceil(C/L), H, W, L] -> [N, C, H, W] (L 8 or 16), C the `channels` attribute.";
  fb.infer = infer_from_blocked;
  fb.decompose = decompose_from_blocked;
  set_rules_by_decomposition(fb);
  r.add(std::move(fb));

  const OpDef& conv = r.get("conv");
  OpDef cb;
  cb.name = "conv_blocked";
  cb.arity(conv.min_inputs, conv.max_inputs);
  cb.attrs = conv.attrs;
  cb.attr("activation", AttrKind::String, AttrValue("none"), fused_activations());
  cb.attr("lanes", AttrKind::Int, AttrValue(int64_t(16)));
  cb.doc =
      "to_blocked(act(conv(x, w, bias)), lanes) for a 2-D conv, x plain [N, C, H, W] or "
      "blocked [N, ceil(C/L), H, W, L] with L = lanes (C = w.shape[1] * groups). The CPU "
      "kernel caches w reordered, keyed by its address: w must be immutable (a constant).";
  cb.infer = infer_conv_blocked;
  cb.decompose = decompose_conv_blocked;
  set_rules_by_decomposition(cb);
  r.add(std::move(cb));

  const OpDef& pool = r.get("max_pool");
  OpDef mp;
  mp.name = "max_pool_blocked";
  mp.arity(1);
  mp.attrs = pool.attrs;
  mp.attr("lanes", AttrKind::Int, AttrValue(int64_t(16)));
  mp.doc =
      "to_blocked(max_pool(from_blocked(x)), lanes) for a 2-D pool of a blocked x "
      "[N, Cb, H, W, L], L = lanes (the zero lanes stay zeros).";
  mp.infer = infer_max_pool_blocked;
  mp.decompose = decompose_max_pool_blocked;
  set_rules_by_decomposition(mp);
  r.add(std::move(mp));
}

}  // namespace rlx::detail
