// ONNX converters: ops driven by index values or positions (Gather*, Scatter*, OneHot,
// NonZero, Compress, Trilu, EyeLike, ReverseSequence, TopK, Unique).
#include "frontend/onnx/context.h"
#include "frontend/onnx/convert_shape_util.h"
#include "frontend/onnx/ops/shape.h"

namespace rlx::onnx_import {

namespace {

using Vals = std::vector<Value>;

Value i64_scalar(NodeContext& ctx, int64_t v) {
  return ctx.constant(Literal::from(std::vector<int64_t>{v}, {}));
}

// ---------------------------------------------------------------------------------------
// Gather / Scatter: the core ops take ONNX's semantics (negative indices wrap once)

Vals convert_gather(NodeContext& ctx) {
  return {ctx.apply1("gather", {ctx.input(0), ctx.input(1)}, {{"axis", ctx.attr_int("axis", 0)}})};
}

Vals convert_gather_elements(NodeContext& ctx) {
  return {ctx.apply1("gather_elements", {ctx.input(0), ctx.input(1)},
                     {{"axis", ctx.attr_int("axis", 0)}})};
}

Vals convert_gather_nd(NodeContext& ctx) {
  return {ctx.apply1("gather_nd", {ctx.input(0), ctx.input(1)},
                     {{"batch_dims", ctx.attr_int("batch_dims", 0)}})};
}

// ScatterElements, and Scatter (its deprecated name, opsets 9-10).
Vals convert_scatter_elements(NodeContext& ctx) {
  return {ctx.apply1(
      "scatter_elements", {ctx.input(0), ctx.input(1), ctx.input(2)},
      {{"axis", ctx.attr_int("axis", 0)}, {"reduction", ctx.attr_string("reduction", "none")}})};
}

Vals convert_scatter_nd(NodeContext& ctx) {
  return {ctx.apply1("scatter_nd", {ctx.input(0), ctx.input(1), ctx.input(2)},
                     {{"reduction", ctx.attr_string("reduction", "none")}})};
}

// ---------------------------------------------------------------------------------------
// OneHot, NonZero, Compress

Vals convert_one_hot(NodeContext& ctx) {
  Value idx = ctx.input(0);
  auto depth = ctx.floats_input(1);
  if (!depth || depth->size() != 1) ctx.fail("expected a one-element depth");
  Tensor values = ctx.need_constant(2);
  if (values.numel() != 2)
    ctx.fail("expected values [off_value, on_value], got ", values.type().str());
  std::vector<double> v = values.to_doubles();
  // Non-integer indices are truncated to integers (ONNX).
  if (!is_integer(idx.dtype())) idx = ctx.cast(idx, DType::i64);
  return {ctx.apply1("one_hot", {idx},
                     {{"depth", int64_t((*depth)[0])},
                      {"axis", ctx.attr_int("axis", -1)},
                      {"dtype", values.dtype()},
                      {"on_value", v[1]},
                      {"off_value", v[0]}})};
}

Vals convert_nonzero(NodeContext& ctx) { return {ctx.apply1("nonzero", {ctx.input(0)})}; }

// The selected slices are a gather at the true positions of the condition.
Vals convert_compress(NodeContext& ctx) {
  Value x = ctx.input(0), cond = ctx.cast(ctx.input(1), DType::boolean);
  if (cond.rank() != 1) ctx.fail("expected a rank-1 condition, got ", cond.type().str());
  int64_t axis = 0;
  if (ctx.has_attr("axis"))
    axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  else
    x = ctx.apply1("reshape", {x}, {{"shape", IntList{-1}}});
  Value where = ctx.apply1("nonzero", {cond});
  Value idx = ctx.apply1("reshape", {where}, {{"shape", IntList{-1}}});
  return {ctx.apply1("gather", {x, idx}, {{"axis", axis}})};
}

// ---------------------------------------------------------------------------------------
// Trilu, EyeLike, ReverseSequence: masks and indices built from iota

// The coordinate along `axis` of each element of x, as i64 broadcastable to x's shape: an
// iota when that dim is static, else (at x's full shape) an exclusive cumsum of ones, so
// symbolic and run-time sizes work too (`full`: always at x's shape).
Value coord(NodeContext& ctx, Value x, int64_t axis, bool full = false) {
  const Dim& d = x.shape()[size_t(axis)];
  if (d.is_static() && !full) {
    IntList shape(size_t(x.rank()), 1);
    shape[size_t(axis)] = d.value();
    return ctx.apply1("iota", {}, {{"shape", shape}, {"dtype", DType::i64}, {"axis", axis}});
  }
  Value one = i64_scalar(ctx, 1);
  Value ones = ctx.apply1("select", {ctx.apply1("eq", {x, x}), one, one});
  return ctx.apply1("cumsum", {ones}, {{"axis", axis}, {"exclusive", true}});
}

// j - i for each element (i, j) of the trailing matrices of x: the diagonal it is on.
Value diagonal_of(NodeContext& ctx, Value x) {
  int64_t r = x.rank();
  return ctx.apply1("sub", {coord(ctx, x, r - 1), coord(ctx, x, r - 2)});
}

Vals convert_trilu(NodeContext& ctx) {
  Value x = ctx.input(0);
  if (x.rank() < 2) ctx.fail("expected an input of rank >= 2, got ", x.type().str());
  // k may be computed at run time: it only enters the comparison.
  Value k = ctx.has_input(1) ? ctx.apply1("reshape", {ctx.cast(ctx.input(1), DType::i64)},
                                          {{"shape", IntList{}}})
                             : i64_scalar(ctx, 0);
  bool upper = ctx.attr_int("upper", 1) != 0;
  Value keep = ctx.apply1(upper ? "ge" : "le", {diagonal_of(ctx, x), k});
  return {ctx.apply1("select", {keep, x, ctx.scalar(x.dtype(), 0)})};
}

Vals convert_eye_like(NodeContext& ctx) {
  Value x = ctx.input(0);
  if (x.rank() != 2) ctx.fail("expected a rank-2 input, got ", x.type().str());
  DType dt = x.dtype();
  if (ctx.has_attr("dtype")) {
    auto d = dtype_from_onnx(int32_t(ctx.attr_int("dtype", 0)));
    if (!d)
      ctx.fail_type("expected a numeric or bool dtype, got ONNX type ", ctx.attr_int("dtype", 0));
    dt = *d;
  }
  Value eye = ctx.apply1("eq", {diagonal_of(ctx, x), i64_scalar(ctx, ctx.attr_int("k", 0))});
  return {ctx.cast(eye, dt)};
}

// Output (t, b) reads x at time L[b] - 1 - t when t < L[b], else at t: a gather_elements
// along the time axis.
Vals convert_reverse_sequence(NodeContext& ctx) {
  Value x = ctx.input(0), lens = ctx.cast(ctx.input(1), DType::i64);
  int64_t r = x.rank(), bax = ctx.attr_int("batch_axis", 1), tax = ctx.attr_int("time_axis", 0);
  if (r < 2 || !((bax == 0 && tax == 1) || (bax == 1 && tax == 0)))
    ctx.fail("expected batch_axis and time_axis 0 and 1 (either order) of a rank >= 2 input, got ",
             bax, ", ", tax, " for ", x.type().str());
  if (lens.rank() != 1) ctx.fail("expected rank-1 sequence_lens, got ", lens.type().str());
  IntList others;
  for (int64_t a = 0; a < r; ++a)
    if (a != bax) others.push_back(a);
  Value l = ctx.apply1("expand_dims", {lens}, {{"axes", others}});
  // A static x takes a small index broadcast once; otherwise it is built at x's shape.
  bool is_static = x.type().is_static();
  Value t = coord(ctx, x, tax, !is_static);
  Value rev = ctx.apply1("sub", {ctx.apply1("sub", {l, i64_scalar(ctx, 1)}), t});
  Value idx = ctx.apply1("select", {ctx.apply1("lt", {t, l}), rev, t});
  if (is_static) idx = ctx.apply1("broadcast_to", {idx}, {{"shape", static_sizes(x.shape())}});
  return {ctx.apply1("gather_elements", {x, idx}, {{"axis", tax}})};
}

// ---------------------------------------------------------------------------------------
// TopK, Unique

Vals convert_top_k(NodeContext& ctx) {
  int64_t k;
  if (ctx.opset() < 10) {
    k = ctx.need_attr_int("k");
  } else {
    IntList kv = need_ints(ctx, 1, "K");
    if (kv.size() != 1) ctx.fail("expected a one-element K, got ", ints_str(kv));
    k = kv[0];
  }
  return ctx.apply("top_k", {ctx.input(0)},
                   {{"k", k},
                    {"axis", ctx.attr_int("axis", -1)},
                    {"largest", ctx.attr_int("largest", 1) != 0},
                    {"sorted", ctx.attr_int("sorted", 1) != 0}});
}

// Without an axis, Unique works on the flattened input.
Vals convert_unique(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t axis = 0;
  if (ctx.has_attr("axis"))
    axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  else
    x = ctx.apply1("reshape", {x}, {{"shape", IntList{-1}}});
  return ctx.apply("onnx.unique", {x},
                   {{"axis", axis}, {"sorted", ctx.attr_int("sorted", 1) != 0}});
}

}  // namespace

void register_index_converters() {
  register_shape_onnx_ops();
  const std::pair<const char*, Converter> table[] = {
      {"Gather", convert_gather},
      {"GatherElements", convert_gather_elements},
      {"GatherND", convert_gather_nd},
      {"ScatterElements", convert_scatter_elements},
      {"Scatter", convert_scatter_elements},
      {"ScatterND", convert_scatter_nd},
      {"OneHot", convert_one_hot},
      {"NonZero", convert_nonzero},
      {"Compress", convert_compress},
      {"Trilu", convert_trilu},
      {"EyeLike", convert_eye_like},
      {"ReverseSequence", convert_reverse_sequence},
      {"TopK", convert_top_k},
      {"Unique", convert_unique},
  };
  for (const auto& [name, fn] : table) add_converter("", name, fn);
}

}  // namespace rlx::onnx_import
