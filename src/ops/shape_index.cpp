// Shape ops driven by index values: gather, gather_elements, gather_nd, scatter_elements,
// scatter_nd, one_hot, nonzero, and sort / top_k (values with their indices), each with its
// inference and vjp / jvp / vmap rules. The gathers are linear in data with the indices
// fixed; their vjp scatters the cotangent back.
#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "ops/shape_util.h"
#include "rlx/axes.h"
#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;
using Cts = std::span<const Value>;
using Axes = std::span<const int>;

// Rule helpers.
Value or_zeros(Value t, Value like) { return t.valid() ? t : rules::zeros_like(like); }

Value eq(Value a, Value b) { return op("eq", {a, b}); }

// ---------------------------------------------------------------------------------------
// gather, gather_elements, gather_nd

// Indices of an *_elements op address data along `axis`; elsewhere they cannot exceed it.
void check_elements_dims(const InferContext& ctx, size_t data, size_t idx, size_t axis) {
  for (size_t d = 0; d < ctx.shape(data).size(); ++d) {
    const Dim &a = ctx.shape(data)[d], &b = ctx.shape(idx)[d];
    if (d != axis && a.is_static() && b.is_static() && b.value() > a.value())
      ctx.fail("expected indices dims <= data dims off the axis, got ", describe_input(ctx, idx),
               " for ", describe_input(ctx, data));
  }
}

void expect_equal_rank(const InferContext& ctx, size_t i, size_t j) {
  if (ctx.rank(i) != ctx.rank(j))
    ctx.fail("expected inputs ", i, " and ", j, " of equal rank, got ", ctx.input(i).str(), " and ",
             ctx.input(j).str());
}

// The static size of indices' last dim (the index depth of the *_nd ops).
int64_t index_depth(const InferContext& ctx, size_t idx, int64_t max_depth) {
  expect_min_rank(ctx, idx, 1);
  const Dim& m = ctx.shape(idx).back();
  if (!m.is_static() || m.value() > max_depth)
    ctx.fail("expected indices whose last dim is static and <= ", max_depth, ", got ",
             describe_input(ctx, idx));
  return m.value();
}

Types infer_gather(const InferContext& ctx) {
  expect_integer(ctx, 1);
  expect_min_rank(ctx, 0, 1);
  const Shape& data = ctx.shape(0);
  size_t axis = size_t(normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0), "axis"));
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), ctx.shape(1).begin(), ctx.shape(1).end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  return {{ctx.dtype(0), out}};
}

Types infer_gather_elements(const InferContext& ctx) {
  expect_integer(ctx, 1);
  expect_min_rank(ctx, 0, 1);
  expect_equal_rank(ctx, 0, 1);
  size_t axis = size_t(normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0), "axis"));
  check_elements_dims(ctx, 0, 1, axis);
  return {{ctx.dtype(0), ctx.shape(1)}};
}

Types infer_gather_nd(const InferContext& ctx) {
  expect_integer(ctx, 1);
  expect_min_rank(ctx, 0, 1);
  expect_min_rank(ctx, 1, 1);
  const Shape &data = ctx.shape(0), &idx = ctx.shape(1);
  int64_t b = ctx.attrs().get_int("batch_dims");
  if (b < 0 || b >= std::min(ctx.rank(0), ctx.rank(1)))
    ctx.fail("expected batch_dims in [0, ", std::min(ctx.rank(0), ctx.rank(1)), ") for ",
             ctx.input(0).str(), " and ", ctx.input(1).str(), ", got ", b);
  int64_t m = index_depth(ctx, 1, ctx.rank(0) - b);
  Shape out(idx.begin(), idx.end() - 1);
  for (size_t i = 0; i < size_t(b); ++i)
    out[i] = unify_dims(ctx, data[i], idx[i], str_cat("batch dims ", i, " of data and indices"));
  out.insert(out.end(), data.begin() + b + m, data.end());
  return {{ctx.dtype(0), out}};
}

// Index ops are linear in data with the indices fixed.
Values index_jvp(const RuleArgs& a, Cts t) { return {again(a, {t[0], a.inputs[1]}, a.attrs)}; }

// scatter_nd writes along leading dims: the gathered axis of data and the index dims of
// ct move to the front.
Values gather_vjp(const RuleArgs& a, Cts ct) {
  Value data = a.inputs[0], idx = a.inputs[1];
  int64_t ax = norm_axis(a.attrs.get_int("axis"), data.rank()), q = idx.rank();
  IntList perm;
  for (int64_t i = ax; i < ax + q; ++i) perm.push_back(i);
  for (int64_t i = 0; i < ax; ++i) perm.push_back(i);
  for (int64_t i = ax + q; i < ct[0].rank(); ++i) perm.push_back(i);
  Value zeros = move_axis(rules::zeros_like(data), ax, 0);
  Value g = op("scatter_nd", {zeros, rules::expand_dims(idx, {q}), permute(ct[0], perm)},
               {{"reduction", "add"}});
  return {move_axis(g, 0, ax), Value{}};
}

VmapResult gather_vmap(const RuleArgs& a, Axes in_axes) {
  int bd = in_axes[0], bi = in_axes[1];
  int64_t r = a.inputs[0].rank() - (bd >= 0), ax = norm_axis(a.attrs.get_int("axis"), r);
  if (bi < 0)  // the batch is one more axis of data
    return at0(again(a, {front(a, in_axes), a.inputs[1]}, with(a.attrs, "axis", ax + 1)));
  if (bd < 0)  // the batch is one more index dim; its place in the output follows
    return {{again(a, {a.inputs[0], a.inputs[1]}, with(a.attrs, "axis", ax))}, {int(ax) + bi}};
  // Both: a gather_nd with the batch as its batch dim, on data [B, n, rest…]. Its output
  // [B, idx…, outer…, inner…] goes back to gather's order [B, outer…, idx…, inner…].
  Values v = rules::all_batched_front(a, in_axes);
  int64_t q = v[1].rank() - 1;
  Value g = op("gather_nd", {move_axis(v[0], ax + 1, 1), rules::expand_dims(v[1], {q + 1})},
               {{"batch_dims", 1}});
  IntList perm{0};
  for (int64_t i = 0; i < ax; ++i) perm.push_back(1 + q + i);
  for (int64_t i = 0; i < q; ++i) perm.push_back(1 + i);
  for (int64_t i = 1 + q + ax; i < g.rank(); ++i) perm.push_back(i);
  return at0(permute(g, perm));
}

Values gather_elements_vjp(const RuleArgs& a, Cts ct) {
  Value g = op("scatter_elements", {rules::zeros_like(a.inputs[0]), a.inputs[1], ct[0]},
               {{"axis", a.attrs.get_int("axis")}, {"reduction", "add"}});
  return {g, Value{}};
}

// Index tuples with their batch coordinates in front: batch_dims b becomes 0.
Value with_batch_coords(Value idx, int64_t b) {
  if (b == 0) return idx;
  Value ix = as_i64(idx);
  Value first = slice1(ix, ix.rank() - 1, 0, 1);
  Values parts;
  for (int64_t k = 0; k < b; ++k) parts.push_back(positions(first, k));
  parts.push_back(ix);
  return op("concat", parts, {{"axis", -1}});
}

Values gather_nd_vjp(const RuleArgs& a, Cts ct) {
  Value idx = with_batch_coords(a.inputs[1], a.attrs.get_int("batch_dims"));
  Value g = op("scatter_nd", {rules::zeros_like(a.inputs[0]), idx, ct[0]}, {{"reduction", "add"}});
  return {g, Value{}};
}

VmapResult gather_nd_vmap(const RuleArgs& a, Axes in_axes) {
  int bd = in_axes[0], bi = in_axes[1];
  int64_t b = a.attrs.get_int("batch_dims");
  Value data = a.inputs[0], idx = a.inputs[1];
  if (bd >= 0 && bi >= 0) {  // one more batch dim
    Values v = rules::all_batched_front(a, in_axes);
    return at0(again(a, v, with(a.attrs, "batch_dims", b + 1)));
  }
  if (bd < 0) {  // the batch is one more index dim, after the batch dims
    Value g = again(a, {data, move_axis(idx, bi, b)}, a.attrs);
    return {{g}, {int(b)}};
  }
  // Data only: the batch goes right after the indexed dims, a dim of every slice taken.
  int64_t m = idx.shape().back().value();
  Value g = again(a, {move_axis(data, bd, b + m), idx}, a.attrs);
  return {{g}, {int(idx.rank() - 1)}};
}

// ---------------------------------------------------------------------------------------
// scatter_elements, scatter_nd

// max / min have no meaning on complex numbers.
void expect_ordered_reduction(const InferContext& ctx) {
  const std::string& r = ctx.attrs().get_string("reduction");
  if (is_complex(ctx.dtype(0)) && (r == "max" || r == "min"))
    ctx.fail_type("expected reduction none, add or mul for ", ctx.input(0).str(), ", got ", r);
}

Types infer_scatter_elements(const InferContext& ctx) {
  expect_integer(ctx, 1);
  expect_same_dtype(ctx, 0, 2);
  expect_ordered_reduction(ctx);
  expect_min_rank(ctx, 0, 1);
  expect_equal_rank(ctx, 0, 1);
  expect_equal_rank(ctx, 1, 2);
  size_t axis = size_t(normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0), "axis"));
  for (size_t d = 0; d < ctx.shape(1).size(); ++d)
    unify_dims(ctx, ctx.shape(1)[d], ctx.shape(2)[d], str_cat("indices and updates dims ", d));
  check_elements_dims(ctx, 0, 1, axis);
  return {ctx.input(0)};
}

Types infer_scatter_nd(const InferContext& ctx) {
  expect_integer(ctx, 1);
  expect_same_dtype(ctx, 0, 2);
  expect_ordered_reduction(ctx);
  const Shape &data = ctx.shape(0), &idx = ctx.shape(1);
  int64_t m = index_depth(ctx, 1, ctx.rank(0));
  Shape want(idx.begin(), idx.end() - 1);
  want.insert(want.end(), data.begin() + m, data.end());
  if (ctx.rank(2) != int64_t(want.size()))
    ctx.fail("expected updates of shape ", shape_str(want), ", got ", ctx.input(2).str());
  for (size_t d = 0; d < want.size(); ++d)
    unify_dims(ctx, want[d], ctx.shape(2)[d],
               str_cat("updates dims ", d, " (want ", shape_str(want), ")"));
  return {ctx.input(0)};
}

// How the scatter rules read values at the op's indices.
struct ScatterKind {
  const char* gather;
  bool has_axis;
};

Value gather_at(const RuleArgs& a, const ScatterKind& k, Value v) {
  Attrs at;
  if (k.has_axis) at.set("axis", a.attrs.get_int("axis"));
  return op(k.gather, {v, a.inputs[1]}, at);
}

// True for the updates that land: with duplicate indices the last one written wins, which
// a scatter of the updates' own ids finds.
Value landed(const RuleArgs& a, const ScatterKind& k) {
  Value data = a.inputs[0], upd = a.inputs[2];
  Value flat = op("reshape", {as_i64(rules::ones_like(upd))}, {{"shape", IntList{-1}}});
  Value ids = rules::reshape_like(op("cumsum", {flat}, {{"exclusive", true}}), upd);
  Value none = cast(rules::full_like(data, -1), DType::i64);
  Value winner = again(a, {none, a.inputs[1], ids}, with(a.attrs, "reduction", "none"));
  return eq(gather_at(a, k, winner), ids);
}

[[noreturn]] void no_mul(const RuleArgs& a, const char* transform) {
  fail<NotSupported>(rules::rule_op_name(a), transform,
                     ": reduction 'mul' (the product of the other updates at an index needs a "
                     "division, wrong at zeros)");
}

// For max / min the result at each index is data or one update: masks of which.
std::pair<Value, Value> selected(const RuleArgs& a, const ScatterKind& k) {
  Value y = a.outputs[0];
  return {eq(y, a.inputs[0]), eq(a.inputs[2], gather_at(a, k, y))};
}

Values scatter_vjp(const RuleArgs& a, Cts ct, const ScatterKind& k) {
  const std::string& red = a.attrs.get_string("reduction");
  Value upd = a.inputs[2], g = ct[0];
  Value taken = gather_at(a, k, g);
  if (red == "add") return {g, Value{}, taken};
  if (red == "mul") no_mul(a, "vjp");
  Value zu = rules::zeros_like(upd);
  if (red == "none") {  // overwritten data gets nothing; so do updates that did not land
    Value kept = again(a, {g, a.inputs[1], zu}, a.attrs);
    return {kept, Value{}, select(landed(a, k), taken, zu)};
  }
  auto [from_data, from_upd] = selected(a, k);
  return {select(from_data, g, rules::zeros_like(g)), Value{}, select(from_upd, taken, zu)};
}

Values scatter_jvp(const RuleArgs& a, Cts t, const ScatterKind& k) {
  const std::string& red = a.attrs.get_string("reduction");
  Value td = or_zeros(t[0], a.inputs[0]), tu = or_zeros(t[2], a.inputs[2]);
  if (red == "none" || red == "add") return {again(a, {td, a.inputs[1], tu}, a.attrs)};
  if (red == "mul") no_mul(a, "jvp");
  auto [from_data, from_upd] = selected(a, k);
  td = select(from_data, td, rules::zeros_like(td));
  tu = select(from_upd, tu, rules::zeros_like(tu));
  return {again(a, {td, a.inputs[1], tu}, with(a.attrs, "reduction", "add"))};
}

const ScatterKind kElements{.gather = "gather_elements", .has_axis = true};
const ScatterKind kNd{.gather = "gather_nd", .has_axis = false};

Values scatter_elements_vjp(const RuleArgs& a, Cts ct) { return scatter_vjp(a, ct, kElements); }
Values scatter_elements_jvp(const RuleArgs& a, Cts t) { return scatter_jvp(a, t, kElements); }
Values scatter_nd_vjp(const RuleArgs& a, Cts ct) { return scatter_vjp(a, ct, kNd); }
Values scatter_nd_jvp(const RuleArgs& a, Cts t) { return scatter_jvp(a, t, kNd); }

// All batched at 0; each index tuple gets its batch coordinate in front.
VmapResult scatter_nd_vmap(const RuleArgs& a, Axes in_axes) {
  Values v = rules::all_batched_front(a, in_axes);
  return at0(again(a, {v[0], with_batch_coords(v[1], 1), v[2]}, a.attrs));
}

// ---------------------------------------------------------------------------------------
// one_hot, nonzero, sort, top_k

Types infer_one_hot(const InferContext& ctx) {
  expect_integer(ctx, 0);
  int64_t depth = ctx.attrs().get_int("depth");
  if (depth < 1) ctx.fail("expected depth >= 1, got ", depth);
  int64_t axis = normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0) + 1, "axis");
  Shape out = ctx.shape(0);
  out.insert(out.begin() + axis, Dim(depth));
  return {{ctx.attrs().get_dtype("dtype"), out}};
}

Types infer_top_k(const InferContext& ctx) {
  expect_numeric(ctx, 0);
  expect_min_rank(ctx, 0, 1);
  int64_t k = ctx.attrs().get_int("k");
  size_t axis = size_t(normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0), "axis"));
  const Dim& d = ctx.shape(0)[axis];
  if (k < 0 || (d.is_static() && k > d.value()))
    ctx.fail("expected k in [0, ", d.str(), "] (axis ", axis, " of ", ctx.input(0).str(), "), got ",
             k);
  Shape out = ctx.shape(0);
  out[axis] = Dim(k);
  return {{ctx.dtype(0), out}, {DType::i64, out}};
}

Types infer_sort(const InferContext& ctx) {
  expect_min_rank(ctx, 0, 1);
  normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0), "axis");
  return {ctx.input(0), {DType::i64, ctx.shape(0)}};
}

Types infer_nonzero(const InferContext& ctx) {
  auto n = ctx.input(0).numel();
  Dim count = n && *n == 0 ? Dim(0) : Dim::unknown();
  return {{DType::i64, {Dim(ctx.rank(0)), count}}};
}

// sort / top_k: the values are x gathered at the indices output (distinct along axis).
Values sort_vjp(const RuleArgs& a, Cts ct) {
  Value g = op("scatter_elements", {rules::zeros_like(a.inputs[0]), a.outputs[1], ct[0]},
               {{"axis", a.attrs.get_int("axis")}, {"reduction", "add"}});
  return {g};
}

Values sort_jvp(const RuleArgs& a, Cts t) {
  return {op("gather_elements", {t[0], a.outputs[1]}, {{"axis", a.attrs.get_int("axis")}}),
          Value{}};
}

VmapResult nonzero_vmap(const RuleArgs& a, Axes) {
  fail<NotSupported>(rules::rule_op_name(a),
                     "vmap: the number of nonzeros, and so the output's shape, differs between "
                     "batch elements");
}

// ---------------------------------------------------------------------------------------
// The table

const std::vector<std::string> kReductions = {"none", "add", "mul", "max", "min"};

std::vector<ShapeOp> shape_index_ops() {
  using K = AttrKind;
  const Trait base = Trait::shape_op;
  const Trait nodiff = base | Trait::nondifferentiable;
  return {
      {.name = "gather",
       .traits = base,
       .min_inputs = 2,
       .max_inputs = 2,
       .attrs = {{"axis", K::Int, 0}},
       .infer = infer_gather,
       .doc = "Takes slices of data at indices along axis.",
       .vjp = gather_vjp,
       .jvp = index_jvp,
       .vmap = gather_vmap},
      {.name = "gather_elements",
       .traits = base,
       .min_inputs = 2,
       .max_inputs = 2,
       .attrs = {{"axis", K::Int, 0}},
       .infer = infer_gather_elements,
       .doc = "Takes elements of data at indices along axis; output has indices' shape.",
       .vjp = gather_elements_vjp,
       .jvp = index_jvp,
       .vmap = shift_axis_all_vmap},
      {.name = "gather_nd",
       .traits = base,
       .min_inputs = 2,
       .max_inputs = 2,
       .attrs = {{"batch_dims", K::Int, 0}},
       .infer = infer_gather_nd,
       .doc = "Takes slices of data at index tuples (ONNX GatherND).",
       .vjp = gather_nd_vjp,
       .jvp = index_jvp,
       .vmap = gather_nd_vmap},
      {.name = "scatter_elements",
       .traits = base,
       .min_inputs = 3,
       .max_inputs = 3,
       .attrs = {{"axis", K::Int, 0}, {"reduction", K::String, "none", kReductions}},
       .infer = infer_scatter_elements,
       .doc = "Writes updates into data at indices along axis.",
       .vjp = scatter_elements_vjp,
       .jvp = scatter_elements_jvp,
       .vmap = shift_axis_all_vmap},
      {.name = "scatter_nd",
       .traits = base,
       .min_inputs = 3,
       .max_inputs = 3,
       .attrs = {{"reduction", K::String, "none", kReductions}},
       .infer = infer_scatter_nd,
       .doc = "Writes update slices into data at index tuples (ONNX ScatterND).",
       .vjp = scatter_nd_vjp,
       .jvp = scatter_nd_jvp,
       .vmap = scatter_nd_vmap},
      {.name = "one_hot",
       .traits = nodiff,
       .attrs = {{"depth", K::Int},
                 {"axis", K::Int, -1},
                 {"dtype", K::DType, DType::f32},
                 {"on_value", K::Float, 1.0},
                 {"off_value", K::Float, 0.0}},
       .infer = infer_one_hot,
       .doc = "One-hot encodes integer indices; depth is inserted at axis.",
       .vmap = shift_axis_vmap},
      {.name = "top_k",
       .traits = base,
       .attrs = {{"k", K::Int},
                 {"axis", K::Int, -1},
                 {"largest", K::Bool, true},
                 {"sorted", K::Bool, true}},
       .infer = infer_top_k,
       .doc = "The k largest (or smallest) values along axis and their i64 indices.",
       .vjp = sort_vjp,
       .jvp = sort_jvp,
       .vmap = shift_axis_vmap},
      {.name = "sort",
       .traits = base,
       .attrs = {{"axis", K::Int, -1}, {"descending", K::Bool, false}, {"stable", K::Bool, false}},
       .infer = infer_sort,
       .doc = "Sorts x along axis; returns the values and their i64 indices.",
       .vjp = sort_vjp,
       .jvp = sort_jvp,
       .vmap = shift_axis_vmap},
      {.name = "nonzero",
       .traits = nodiff,
       .infer = infer_nonzero,
       .doc = "Indices of the nonzero elements as i64[rank, count] (ONNX layout).",
       .vmap = nonzero_vmap},
  };
}

}  // namespace

void register_shape_index_ops(OpRegistry& r) { add_shape_ops(r, shape_index_ops()); }

}  // namespace rlx::detail
