// ONNX converters: ops that reshape, reorder, cut and join data (Reshape, Transpose,
// Slice, Concat, Split, Pad, Expand, Tile, …) and the shape queries (Shape, Size,
// ConstantOfShape, Range). Index-driven ops live in convert_index.cpp.
#include <algorithm>
#include <cmath>

#include "frontend/onnx/context.h"
#include "frontend/onnx/convert_shape_util.h"

namespace rlx::onnx_import {

namespace {

using Vals = std::vector<Value>;

// ---------------------------------------------------------------------------------------
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose

Vals convert_reshape(NodeContext& ctx) {
  Value x = ctx.input(0);
  bool allowzero = ctx.attr_int("allowzero", 0) != 0;
  // A shape computed at run time (and not read as literal zeros): dynamic_reshape takes
  // ONNX's 0 and -1 itself, so the node needs no late conversion.
  if (ctx.opset() >= 5 && !allowzero && ctx.has_input(1) && !ctx.constant_input(1) &&
      ctx.input(1).rank() == 1 && ctx.input(1).shape()[0].is_static())
    return {ctx.apply1("dynamic_reshape", {x, ctx.cast(ctx.input(1), DType::i64)})};
  IntList spec = ctx.opset() < 5 ? ctx.attr_ints("shape") : need_ints(ctx, 1, "shape");
  bool has_zero = std::count(spec.begin(), spec.end(), 0) > 0;
  if (!allowzero || !has_zero) return {ctx.apply1("reshape", {x}, {{"shape", spec}})};
  // allowzero: a 0 is a literal zero size, so the result (and x) hold no elements. x
  // goes to ones with its (zero) element count at the first 0, then broadcasts.
  if (std::count(spec.begin(), spec.end(), -1) > 0)
    ctx.fail("expected no -1 beside a 0 entry with allowzero=1, got shape ", ints_str(spec));
  IntList ones(spec.size(), 1);
  ones[size_t(std::find(spec.begin(), spec.end(), 0) - spec.begin())] = -1;
  Value flat = ctx.apply1("reshape", {x}, {{"shape", ones}});
  return {ctx.apply1("broadcast_to", {flat}, {{"shape", spec}})};
}

Vals convert_flatten(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t r = x.rank(), axis = ctx.attr_int("axis", 1);
  if (axis < -r || axis > r) ctx.fail("expected axis in [", -r, ", ", r, "], got ", axis);
  if (axis < 0) axis += r;
  auto lead = static_product(x.shape(), 0, axis), tail = static_product(x.shape(), axis, r);
  if (lead || tail)
    return {ctx.apply1("reshape", {x}, {{"shape", IntList{lead ? *lead : -1, tail ? *tail : -1}}})};
  // Symbolic on both sides: the two products are computed from the run-time shape.
  Value dims = ctx.apply1("shape_of", {x});
  auto part = [&](int64_t b, int64_t e) {
    Value s = ctx.apply1("slice", {dims}, {{"starts", IntList{b}}, {"stops", IntList{e}}});
    return ctx.apply1("prod", {s}, {{"axes", IntList{0}}, {"keepdims", true}});
  };
  Value target = ctx.apply1("concat", {part(0, axis), part(axis, r)}, {{"axis", 0}});
  return {ctx.apply1("dynamic_reshape", {x, target})};
}

// Axes from the attribute before opset `input_from`, from input `i` from then on.
std::optional<IntList> axes_arg(NodeContext& ctx, int64_t input_from, size_t i) {
  if (ctx.opset() < input_from)
    return ctx.has_attr("axes") ? std::optional(ctx.attr_ints("axes")) : std::nullopt;
  return ctx.ints_input(i);
}

Vals convert_squeeze(NodeContext& ctx) {
  IntList axes = axes_arg(ctx, 13, 1).value_or(IntList{});
  return {ctx.apply1("squeeze", {ctx.input(0)}, {{"axes", axes}})};
}

Vals convert_unsqueeze(NodeContext& ctx) {
  auto axes = axes_arg(ctx, 13, 1);
  if (!axes) ctx.fail("expected axes, got none");
  return {ctx.apply1("expand_dims", {ctx.input(0)}, {{"axes", *axes}})};
}

Vals convert_transpose(NodeContext& ctx) {
  return {ctx.apply1("transpose", {ctx.input(0)}, {{"perm", ctx.attr_ints("perm")}})};
}

// ---------------------------------------------------------------------------------------
// Concat, Split, Slice

Vals convert_concat(NodeContext& ctx) {
  Vals xs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) xs.push_back(ctx.input(i));
  if (xs.empty()) ctx.fail("expected at least one input, got none");
  // axis became required at opset 4 (it defaulted to 1 before).
  int64_t axis = ctx.opset() < 4 ? ctx.attr_int("axis", 1) : ctx.need_attr_int("axis");
  return {ctx.apply1("concat", xs, {{"axis", axis}})};
}

Vals convert_split(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  IntList sizes = ctx.opset() < 13 ? ctx.attr_ints("split") : ctx.ints_input(1).value_or(IntList{});
  int64_t outs = int64_t(ctx.num_outputs());
  if (!sizes.empty()) {
    if (int64_t(sizes.size()) != outs)
      ctx.fail("expected ", outs, " split sizes (one per output), got ", ints_str(sizes));
    return ctx.apply("split", {x}, {{"axis", axis}, {"sizes", sizes}});
  }
  int64_t num = ctx.opset() >= 18 ? ctx.attr_int("num_outputs", outs) : outs;
  if (num != outs) ctx.fail("expected num_outputs = ", outs, " (the outputs), got ", num);
  const Dim& d = x.shape()[size_t(axis)];
  if (num < 1 || !d.is_static() || d.value() % num == 0)
    return ctx.apply("split", {x}, {{"axis", axis}, {"num", num}});
  // From opset 18 an uneven split makes the last part smaller.
  int64_t n = d.value(), chunk = (n + num - 1) / num;
  if (ctx.opset() < 18 || n - chunk * (num - 1) < 0)
    ctx.fail("expected ", num, " outputs to split axis ", axis, " of size ", n, " evenly",
             ctx.opset() < 18 ? "" : " (or with a smaller last part)");
  sizes.assign(size_t(num), chunk);
  sizes.back() = n - chunk * (num - 1);
  return ctx.apply("split", {x}, {{"axis", axis}, {"sizes", sizes}});
}

Vals convert_slice(NodeContext& ctx) {
  IntList starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes");
  } else {
    starts = need_ints(ctx, 1, "starts");
    ends = need_ints(ctx, 2, "ends");
    axes = ctx.ints_input(3).value_or(IntList{});
    steps = ctx.ints_input(4).value_or(IntList{});
  }
  return {ctx.apply1("slice", {ctx.input(0)},
                     {{"starts", starts}, {"stops", ends}, {"steps", steps}, {"axes", axes}})};
}

// ---------------------------------------------------------------------------------------
// Expand, Tile, Pad

Vals convert_expand(NodeContext& ctx) {
  Value x = ctx.input(0);
  IntList shape = need_ints(ctx, 1, "shape");
  Shape xs = x.shape();
  size_t r = std::max(xs.size(), shape.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    // Numpy broadcasting of x's shape with `shape`, both aligned at the end.
    std::optional<Dim> a, b;
    if (i + xs.size() >= r) a = xs[i + xs.size() - r];
    if (i + shape.size() >= r) {
      int64_t s = shape[i + shape.size() - r];
      if (s < 0) ctx.fail("expected shape entries >= 0, got ", ints_str(shape));
      b = Dim(s);
    }
    if (!b) {
      out[i] = *a;
    } else if (!a || a->is(1)) {
      out[i] = *b;
    } else if (b->is(1)) {
      out[i] = *a;
    } else if (a->is_static() && *a != *b) {
      ctx.fail("expected a shape that ", x.type().str(), " broadcasts with, got ", ints_str(shape));
    } else {
      out[i] = *b;
    }
  }
  if (is_static(out)) return {ctx.apply1("broadcast_to", {x}, {{"shape", static_sizes(out)}})};
  // Symbolic dims in x: broadcasting against a constant of `shape` keeps them.
  Value all = ctx.constant(Literal::full(DType::boolean, shape, 1));
  return {ctx.apply1("select", {all, x, x})};
}

Vals convert_tile(NodeContext& ctx) {
  if (ctx.opset() < 6) ctx.unsupported("expected Tile of opset >= 6, got opset ", ctx.opset());
  return {ctx.apply1("tile", {ctx.input(0)}, {{"repeats", need_ints(ctx, 1, "repeats")}})};
}

// Wrap padding: x tiled along the axis, then the window that starts `lo` before it.
Value wrap_pad_axis(NodeContext& ctx, Value x, int64_t axis, int64_t lo, int64_t hi) {
  auto sl = [&](Value v, int64_t b, int64_t e) {
    return ctx.apply1("slice", {v},
                      {{"starts", IntList{b}}, {"stops", IntList{e}}, {"axes", IntList{axis}}});
  };
  const Dim& d = x.shape()[size_t(axis)];
  if (!d.is_static()) ctx.unsupported("expected a static axis ", axis, " for wrap padding");
  int64_t n = d.value();
  if (lo < 0 || hi < 0) x = sl(x, std::max<int64_t>(-lo, 0), n - std::max<int64_t>(-hi, 0));
  n -= std::max<int64_t>(-lo, 0) + std::max<int64_t>(-hi, 0);
  lo = std::max<int64_t>(lo, 0);
  hi = std::max<int64_t>(hi, 0);
  if (lo == 0 && hi == 0) return x;
  if (n <= 0) ctx.fail("expected a nonempty axis ", axis, " for wrap padding, got ", n);
  int64_t before = (lo + n - 1) / n, after = (hi + n - 1) / n;
  IntList reps(size_t(x.rank()), 1);
  reps[size_t(axis)] = before + 1 + after;
  Value tiled = ctx.apply1("tile", {x}, {{"repeats", reps}});
  int64_t start = before * n - lo;
  return sl(tiled, start, start + lo + n + hi);
}

Vals convert_pad(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t r = x.rank();
  std::string mode = ctx.attr_string("mode", "constant");
  IntList pads;
  double value = 0;
  if (ctx.opset() < 11) {
    pads = ctx.has_attr("pads") ? ctx.attr_ints("pads") : ctx.attr_ints("paddings");
    value = ctx.attr_float("value", 0.0);
  } else {
    pads = need_ints(ctx, 1, "pads");
    if (ctx.has_input(2)) {
      Tensor v = ctx.need_constant(2);
      if (v.numel() != 1) ctx.fail("expected a one-element constant_value, got ", v.type().str());
      value = v.to_doubles()[0];
    }
  }
  if (auto axes = ctx.opset() >= 18 ? ctx.ints_input(3) : std::nullopt) {
    // Pads for the listed axes only: spread to every axis.
    size_t k = axes->size();
    if (pads.size() != 2 * k)
      ctx.fail("expected ", 2 * k, " pads for axes ", ints_str(*axes), ", got ", ints_str(pads));
    IntList full(size_t(2 * r), 0);
    for (size_t i = 0; i < k; ++i) {
      size_t a = size_t(normalize_axis(ctx, (*axes)[i], r));
      full[a] = pads[i];
      full[a + size_t(r)] = pads[k + i];
    }
    pads = full;
  }
  if (int64_t(pads.size()) != 2 * r)
    ctx.fail("expected ", 2 * r, " pads for ", x.type().str(), ", got ", ints_str(pads));
  if (mode == "wrap") {
    for (int64_t a = 0; a < r; ++a)
      x = wrap_pad_axis(ctx, x, a, pads[size_t(a)], pads[size_t(a + r)]);
    return {x};
  }
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    ctx.fail("expected mode constant, reflect, edge or wrap, got ", mode);
  return {ctx.apply1("pad", {x}, {{"pads", pads}, {"mode", mode}, {"value", value}})};
}

// ---------------------------------------------------------------------------------------
// Shape, Size, ConstantOfShape, Range

Vals convert_shape(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t r = x.rank();
  auto clip = [r](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + r : a, 0, r); };
  int64_t start = clip(ctx.attr_int("start", 0)), end = clip(ctx.attr_int("end", r));
  end = std::max(start, end);
  Value dims = ctx.apply1("shape_of", {x});
  if (start == 0 && end == r) return {dims};
  return {ctx.apply1("slice", {dims}, {{"starts", IntList{start}}, {"stops", IntList{end}}})};
}

Vals convert_size(NodeContext& ctx) {
  Value x = ctx.input(0);
  if (auto n = x.type().numel()) return {ctx.constant(Literal::from(std::vector<int64_t>{*n}, {}))};
  return {ctx.apply1("prod", {ctx.apply1("shape_of", {x})}, {{"axes", IntList{0}}})};
}

Vals convert_constant_of_shape(NodeContext& ctx) {
  IntList shape = need_ints(ctx, 0, "shape");
  for (int64_t s : shape)
    if (s < 0) ctx.fail("expected shape entries >= 0, got ", ints_str(shape));
  Tensor v = ctx.attr_tensor("value").value_or(Tensor::zeros(DType::f32, {1}));
  if (v.numel() != 1) ctx.fail("expected a one-element value, got ", v.type().str());
  Value one = ctx.constant(v.reshape({}));
  return {ctx.apply1("broadcast_to", {one}, {{"shape", shape}})};
}

// onnx.range: its length depends on the values, which may be computed at run time
// (positions up to a sequence length); constant inputs fold at import.
Vals convert_range(NodeContext& ctx) {
  return {ctx.apply1("onnx.range", {ctx.input(0), ctx.input(1), ctx.input(2)})};
}

// ---------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth: a reshape, a transpose and a reshape

// One entry of a reshape target: dim `src` of the op's input times mul / div, or the
// constant mul when src < 0.
struct DimExpr {
  int64_t src, mul = 1, div = 1;
};

// Reshapes y to `spec` (entries over x's dims). Static dims give attributes, with a
// symbolic batch dim copied (0) where it stays in front; other symbolic dims give a
// target computed from x's run-time shape.
Value reshape_by(NodeContext& ctx, Value x, Value y, const std::vector<DimExpr>& spec) {
  IntList target;
  bool is_static = true;
  for (size_t i = 0; i < spec.size() && is_static; ++i) {
    const DimExpr& e = spec[i];
    if (e.src < 0) {
      target.push_back(e.mul);
      continue;
    }
    const Dim& d = x.shape()[size_t(e.src)];
    if (d.is_static())
      target.push_back(d.value() * e.mul / e.div);
    else if (i == 0 && e.src == 0 && e.mul == 1 && e.div == 1)
      target.push_back(0);
    else
      is_static = false;
  }
  if (is_static) return ctx.apply1("reshape", {y}, {{"shape", target}});
  Value dims = ctx.apply1("shape_of", {x});
  Vals parts;
  for (const DimExpr& e : spec) {
    if (e.src < 0) {
      parts.push_back(ctx.ints({e.mul}));
      continue;
    }
    Value d =
        ctx.apply1("slice", {dims}, {{"starts", IntList{e.src}}, {"stops", IntList{e.src + 1}}});
    if (e.mul != 1) d = ctx.apply1("mul", {d, ctx.ints({e.mul})});
    if (e.div != 1) d = ctx.apply1("div", {d, ctx.ints({e.div})});
    parts.push_back(d);
  }
  return ctx.apply1("dynamic_reshape", {y, ctx.apply1("concat", parts, {{"axis", 0}})});
}

// x (NCHW) split by `split`, permuted, merged by `merged`.
Value rearrange(NodeContext& ctx, Value x, const std::vector<DimExpr>& split, IntList perm,
                const std::vector<DimExpr>& merged) {
  Value y = reshape_by(ctx, x, x, split);
  y = ctx.apply1("transpose", {y}, {{"perm", std::move(perm)}});
  return reshape_by(ctx, x, y, merged);
}

int64_t block_size(NodeContext& ctx, Value x) {
  if (x.rank() != 4) ctx.fail("expected a rank-4 (NCHW) input, got ", x.type().str());
  int64_t b = ctx.need_attr_int("blocksize");
  if (b < 1) ctx.fail("expected blocksize >= 1, got ", b);
  return b;
}

// Whether dim i of x is static and not a multiple of m.
bool indivisible(Value x, size_t i, int64_t m) {
  const Dim& d = x.shape()[i];
  return d.is_static() && d.value() % m != 0;
}

Vals convert_depth_to_space(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t b = block_size(ctx, x), bb = b * b;
  if (indivisible(x, 1, bb))
    ctx.fail("expected channels divisible by blocksize^2 = ", bb, ", got ", x.type().str());
  std::string mode = ctx.attr_string("mode", "DCR");
  DimExpr n{0}, k{1, 1, bb}, h{2}, w{3}, blk{-1, b};
  std::vector<DimExpr> merged{n, k, {2, b}, {3, b}};
  if (mode == "DCR") return {rearrange(ctx, x, {n, blk, blk, k, h, w}, {0, 3, 4, 1, 5, 2}, merged)};
  if (mode == "CRD") return {rearrange(ctx, x, {n, k, blk, blk, h, w}, {0, 1, 4, 2, 5, 3}, merged)};
  ctx.fail("expected mode DCR or CRD, got ", mode);
}

Vals convert_space_to_depth(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t b = block_size(ctx, x);
  if (indivisible(x, 2, b) || indivisible(x, 3, b))
    ctx.fail("expected H and W divisible by blocksize ", b, ", got ", x.type().str());
  DimExpr n{0}, c{1}, h{2, 1, b}, w{3, 1, b}, blk{-1, b};
  return {rearrange(ctx, x, {n, c, h, blk, w, blk}, {0, 3, 5, 1, 2, 4}, {n, {1, b * b}, h, w})};
}

}  // namespace

void register_index_converters();  // convert_index.cpp

void register_shape_converters() {
  const std::pair<const char*, Converter> table[] = {
      {"Reshape", convert_reshape},
      {"Flatten", convert_flatten},
      {"Squeeze", convert_squeeze},
      {"Unsqueeze", convert_unsqueeze},
      {"Transpose", convert_transpose},
      {"Concat", convert_concat},
      {"Split", convert_split},
      {"Slice", convert_slice},
      {"Expand", convert_expand},
      {"Tile", convert_tile},
      {"Pad", convert_pad},
      {"Shape", convert_shape},
      {"Size", convert_size},
      {"ConstantOfShape", convert_constant_of_shape},
      {"Range", convert_range},
      {"DepthToSpace", convert_depth_to_space},
      {"SpaceToDepth", convert_space_to_depth},
  };
  for (const auto& [name, fn] : table) add_converter("", name, fn);
  register_index_converters();
}

}  // namespace rlx::onnx_import
