// Shape ops: data movement and selection without arithmetic.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "ops/shape_rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxParts = int64_t{1} << 16;  // most outputs a split may have

int64_t checked_mul(const InferContext& ctx, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    ctx.fail("expected sizes whose product fits in int64, got ", a, " * ", b);
  return r;
}

int64_t checked_add(const InferContext& ctx, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    ctx.fail("expected sizes whose sum fits in int64, got ", a, " + ", b);
  return r;
}

// A static shape from an attribute; negative entries are rejected before Dim sees them.
Shape shape_attr(const InferContext& ctx, std::string_view key) {
  const IntList& v = ctx.attrs().get_ints(key);
  for (int64_t s : v)
    if (s < 0) ctx.fail("expected ", key, " entries >= 0, got ", list_str(v));
  return to_shape(v);
}

// The set of axes in `axes`, normalised, as a per-axis mask of length `rank`.
std::vector<bool> axis_mask(const InferContext& ctx, const IntList& axes, int64_t rank,
                            std::string_view what) {
  std::vector<bool> mask(size_t(rank), false);
  for (int64_t a : normalize_axes(ctx, axes, rank, what)) mask[size_t(a)] = true;
  return mask;
}

// ---------------------------------------------------------------------------------------
// constant, reshape, transpose, broadcast_to, expand_dims, squeeze

Types infer_constant(const InferContext& ctx) { return {ctx.attrs().get_tensor("value").type()}; }

// A product of dims split into a static factor, named symbols and anonymous unknowns.
struct Factors {
  int64_t k = 1;
  std::vector<std::string> syms;
  bool unknown = false;

  void add(const InferContext& ctx, const Dim& d) {
    if (d.is_static())
      k = checked_mul(ctx, k, d.value());
    else if (d.is_unknown())
      unknown = true;
    else
      syms.push_back(d.symbol());
  }
  bool is_static() const { return syms.empty() && !unknown; }
};

Types infer_reshape(const InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const IntList& spec = ctx.attrs().get_ints("shape");
  Shape out(spec.size());
  std::vector<bool> copied(in.size(), false);
  int64_t infer_at = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] > 0) {
      out[i] = Dim(spec[i]);
    } else if (spec[i] == 0) {
      if (i >= in.size())
        ctx.fail("expected shape entry 0 (copy) at an index < ", in.size(), ", got shape ",
                 list_str(spec), " for ", ctx.input(0).str());
      out[i] = in[i];
      copied[i] = true;
    } else if (spec[i] == -1) {
      if (infer_at >= 0) ctx.fail("expected at most one -1 in shape, got ", list_str(spec));
      infer_at = int64_t(i);
    } else {
      ctx.fail("expected shape entries >= -1, got ", list_str(spec));
    }
  }
  // Compare element counts with the copied dims left out of both sides; the remaining
  // target entries are all static and > 0.
  Factors fin;
  int64_t tk = 1;
  for (size_t i = 0; i < in.size(); ++i)
    if (!copied[i]) fin.add(ctx, in[i]);
  for (size_t i = 0; i < out.size(); ++i)
    if (spec[i] > 0) tk = checked_mul(ctx, tk, spec[i]);
  if (fin.is_static() && (infer_at < 0 ? fin.k != tk : fin.k % tk != 0))
    ctx.fail("expected a shape with as many elements as ", ctx.input(0).str(), ", got ",
             list_str(spec));
  if (infer_at < 0) return {{ctx.dtype(0), out}};
  Dim& inferred = out[size_t(infer_at)];
  if (fin.is_static())
    inferred = Dim(fin.k / tk);
  else if (fin.syms.size() == 1 && !fin.unknown && fin.k == tk)
    inferred = Dim::sym(fin.syms[0]);  // s * K reshaped to [..K.., -1]
  else
    inferred = Dim::unknown();
  return {{ctx.dtype(0), out}};
}

Types infer_transpose(const InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  int64_t r = ctx.rank(0);
  IntList perm = ctx.attrs().get_ints("perm");
  if (perm.empty()) {
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  } else if (int64_t(perm.size()) != r) {
    ctx.fail("expected perm of length ", r, " for ", ctx.input(0).str(), ", got ", list_str(perm));
  }
  normalize_axes(ctx, perm, r, "perm");  // range and distinctness
  Shape out;
  for (int64_t p : perm) out.push_back(in[size_t(normalize_axis(ctx, p, r, "perm"))]);
  return {{ctx.dtype(0), out}};
}

Types infer_broadcast_to(const InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  Shape target = shape_attr(ctx, "shape");
  if (target.size() < in.size())
    ctx.fail("expected a target shape of rank >= ", in.size(), ", got ", shape_str(target), " for ",
             ctx.input(0).str());
  size_t off = target.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    // A symbol may be 1 or the target size: checked when it is bound.
    if (in[i].is_static() && !in[i].is(1) && in[i] != target[off + i])
      ctx.fail("expected a shape that ", ctx.input(0).str(), " broadcasts to, got ",
               shape_str(target));
  }
  return {{ctx.dtype(0), target}};
}

Types infer_expand_dims(const InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const IntList& axes = ctx.attrs().get_ints("axes");
  int64_t rank = ctx.rank(0) + int64_t(axes.size());
  std::vector<bool> is_new = axis_mask(ctx, axes, rank, "axes");
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(is_new[size_t(i)] ? Dim(1) : in[next++]);
  return {{ctx.dtype(0), out}};
}

Types infer_squeeze(const InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const IntList& axes = ctx.attrs().get_ints("axes");
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i].is(1);
  } else {
    drop = axis_mask(ctx, axes, ctx.rank(0), "axes");
    for (size_t i = 0; i < in.size(); ++i)
      if (drop[i] && !in[i].is(1))
        ctx.fail("expected axes of size 1, got axis ", i, " of ", ctx.input(0).str());
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return {{ctx.dtype(0), out}};
}

// ---------------------------------------------------------------------------------------
// slice, concat, split, pad

// ONNX Slice on one dim: negative indices count from the end, then clamp.
Dim slice_dim(const Dim& d, int64_t start, int64_t stop, int64_t step) {
  if (d.is_symbolic()) return step == 1 && start == 0 && stop >= kMax / 2 ? d : Dim::unknown();
  int64_t n = d.value();
  if (n == 0) return Dim(0);
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    stop = std::clamp<int64_t>(stop, 0, n);
    return Dim(stop <= start ? 0 : 1 + (stop - start - 1) / step);
  }
  start = std::clamp<int64_t>(start, 0, n - 1);
  stop = std::clamp<int64_t>(stop, -1, n - 1);
  int64_t mag = step == std::numeric_limits<int64_t>::min() ? kMax : -step;
  return Dim(start <= stop ? 0 : 1 + (start - stop - 1) / mag);
}

Types infer_slice(const InferContext& ctx) {
  const auto& a = ctx.attrs();
  const IntList& starts = a.get_ints("starts");
  const IntList& stops = a.get_ints("stops");
  IntList steps = a.get_ints("steps");
  IntList axes = a.get_ints("axes");
  size_t n = starts.size();
  if (steps.empty()) steps.assign(n, 1);
  if (axes.empty())
    for (size_t i = 0; i < n; ++i) axes.push_back(int64_t(i));
  if (stops.size() != n || steps.size() != n || axes.size() != n)
    ctx.fail("expected starts, stops, steps and axes of equal length, got ", list_str(starts), ", ",
             list_str(stops), ", ", list_str(steps), ", ", list_str(axes));
  int64_t r = ctx.rank(0);
  normalize_axes(ctx, axes, r, "axes");  // range and distinctness
  Shape out = ctx.shape(0);
  for (size_t i = 0; i < n; ++i) {
    if (steps[i] == 0) ctx.fail("expected nonzero steps, got ", list_str(steps));
    size_t ax = size_t(normalize_axis(ctx, axes[i], r, "axes"));
    out[ax] = slice_dim(out[ax], starts[i], stops[i], steps[i]);
  }
  return {{ctx.dtype(0), out}};
}

Types infer_concat(const InferContext& ctx) {
  int64_t r = ctx.rank(0);
  size_t axis = size_t(normalize_axis(ctx, ctx.attrs().get_int("axis"), r, "axis"));
  Shape out = ctx.shape(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    expect_same_dtype(ctx, 0, i);
    if (ctx.rank(i) != r)
      ctx.fail("expected inputs of equal rank, got ", ctx.input(0).str(), " and ",
               ctx.input(i).str());
    for (size_t d = 0; d < out.size(); ++d)
      out[d] = d == axis ? dim_sum(out[d], ctx.shape(i)[d])
                         : unify_dims(ctx, out[d], ctx.shape(i)[d],
                                      str_cat("dims at axis ", d, " of concatenated inputs"));
  }
  return {{ctx.dtype(0), out}};
}

Types infer_split(const InferContext& ctx) {
  const auto& a = ctx.attrs();
  const IntList& sizes = a.get_ints("sizes");
  int64_t num = a.get_int("num");
  size_t axis = size_t(normalize_axis(ctx, a.get_int("axis"), ctx.rank(0), "axis"));
  if (sizes.empty() == (num == 0))
    ctx.fail("expected exactly one of sizes (non-empty) and num (> 0), got sizes ", list_str(sizes),
             " and num ", num);
  const Dim& d = ctx.shape(0)[axis];
  std::vector<Dim> parts;
  if (!sizes.empty()) {
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) ctx.fail("expected sizes >= 0, got ", list_str(sizes));
      sum = checked_add(ctx, sum, s);
      parts.push_back(Dim(s));
    }
    if (d.is_static() && sum != d.value())
      ctx.fail("expected sizes summing to ", d.value(), " (axis ", axis, " of ", ctx.input(0).str(),
               "), got ", list_str(sizes));
  } else {
    // A bound on the node's output count (a zero-size or symbolic dim allows any num).
    if (num < 0 || num > kMaxParts) ctx.fail("expected num in [1, ", kMaxParts, "], got ", num);
    if (d.is_static() && d.value() % num != 0)
      ctx.fail("expected num dividing ", d.value(), " (axis ", axis, " of ", ctx.input(0).str(),
               "), got ", num);
    parts.assign(size_t(num), d.is_static() ? Dim(d.value() / num) : Dim::unknown());
  }
  Types out;
  for (const Dim& p : parts) {
    Shape s = ctx.shape(0);
    s[axis] = p;
    out.push_back({ctx.dtype(0), s});
  }
  return out;
}

Types infer_pad(const InferContext& ctx) {
  const Shape& in = ctx.shape(0);
  const IntList& pads = ctx.attrs().get_ints("pads");
  const std::string& mode = ctx.attrs().get_string("mode");
  size_t r = in.size();
  if (pads.size() != 2 * r)
    ctx.fail("expected pads of length ", 2 * r, " for ", ctx.input(0).str(), ", got ",
             list_str(pads));
  Shape out;
  for (size_t i = 0; i < r; ++i) {
    int64_t lo = pads[i], hi = pads[r + i];
    int64_t total = checked_add(ctx, lo, hi);
    if (!in[i].is_static()) {
      out.push_back(dim_add(in[i], total));
      continue;
    }
    int64_t n = in[i].value();
    if (mode == "reflect" && (lo >= n || hi >= n))
      ctx.fail("expected reflect pads < ", n, " on axis ", i, " of ", ctx.input(0).str(), ", got ",
               list_str(pads));
    if (mode == "edge" && n == 0 && (lo > 0 || hi > 0))
      ctx.fail("expected a nonempty axis ", i, " for edge padding, got ", ctx.input(0).str());
    int64_t size = checked_add(ctx, n, total);
    if (size < 0)
      ctx.fail("expected pads leaving axis ", i, " of ", ctx.input(0).str(), " a size >= 0, got ",
               list_str(pads));
    out.push_back(Dim(size));
  }
  return {{ctx.dtype(0), out}};
}

// ---------------------------------------------------------------------------------------
// gather / scatter

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

Types infer_scatter_elements(const InferContext& ctx) {
  expect_integer(ctx, 1);
  expect_same_dtype(ctx, 0, 2);
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

// ---------------------------------------------------------------------------------------
// iota, tile, flip, one_hot, top_k, sort, nonzero

Types infer_iota(const InferContext& ctx) {
  Shape shape = shape_attr(ctx, "shape");
  DType dt = ctx.attrs().get_dtype("dtype");
  if (is_bool(dt)) ctx.fail_type("expected a numeric dtype, got ", dt);
  normalize_axis(ctx, ctx.attrs().get_int("axis"), int64_t(shape.size()), "axis");
  return {{dt, shape}};
}

Types infer_tile(const InferContext& ctx) {
  const IntList& reps = ctx.attrs().get_ints("repeats");
  if (int64_t(reps.size()) != ctx.rank(0))
    ctx.fail("expected repeats of length ", ctx.rank(0), " for ", ctx.input(0).str(), ", got ",
             list_str(reps));
  Shape out;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) ctx.fail("expected repeats >= 0, got ", list_str(reps));
    const Dim& d = ctx.shape(0)[i];
    out.push_back(d.is_static() ? Dim(checked_mul(ctx, d.value(), reps[i]))
                                : dim_mul(d, Dim(reps[i])));
  }
  return {{ctx.dtype(0), out}};
}

Types infer_flip(const InferContext& ctx) {
  normalize_axes(ctx, ctx.attrs().get_ints("axes"), ctx.rank(0), "axes");
  return {ctx.input(0)};
}

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

// ---------------------------------------------------------------------------------------
// shape_of, dynamic_reshape: shape arithmetic on values (what importers emit)

Types infer_shape_of(const InferContext& ctx) { return {{DType::i64, {Dim(ctx.rank(0))}}}; }

// The target comes from a value, so only its rank is known here (and, for a rank-1
// target, its one dim: every element of x).
Types infer_dynamic_reshape(const InferContext& ctx) {
  if (ctx.dtype(1) != DType::i64)
    ctx.fail_type("expected an i64 shape, got ", describe_input(ctx, 1));
  expect_rank(ctx, 1, 1);
  const Dim& k = ctx.shape(1)[0];
  if (!k.is_static()) ctx.fail("expected a shape of static length, got ", describe_input(ctx, 1));
  Shape out(size_t(k.value()), Dim::unknown());
  if (out.size() == 1) {
    if (auto n = ctx.input(0).numel())
      out[0] = Dim(*n);
    else if (ctx.rank(0) == 1)
      out[0] = ctx.shape(0)[0];
  }
  return {{ctx.dtype(0), out}};
}

// ---------------------------------------------------------------------------------------
// The table

struct ShapeOp {
  const char* name;
  Trait traits;
  int min_inputs, max_inputs;
  std::vector<AttrSpec> attrs;
  InferFn infer;
  const char* doc;
  ShapeRules rules;  // vjp / jvp / vmap (shape_rules.cpp)
};

const std::vector<std::string> kReductions = {"none", "add", "mul", "max", "min"};

std::vector<ShapeOp> shape_ops() {
  using K = AttrKind;
  const Trait base = Trait::shape_op;
  const Trait view = base | Trait::view;
  const Trait nodiff = base | Trait::nondifferentiable;
  return {
      {"constant",
       nodiff,
       0,
       0,
       {{"value", K::Tensor}},
       infer_constant,
       "A constant tensor, held in the graph."},
      {"reshape",
       view,
       1,
       1,
       {{"shape", K::Ints}},
       infer_reshape,
       "Reshapes x; 0 copies the input dim, -1 is inferred.",
       reshape_rules()},
      {"transpose",
       base,
       1,
       1,
       {{"perm", K::Ints, IntList{}}},
       infer_transpose,
       "Permutes the axes of x (default: reversed).",
       transpose_rules()},
      {"broadcast_to",
       base,
       1,
       1,
       {{"shape", K::Ints}},
       infer_broadcast_to,
       "Broadcasts x to a static shape (NumPy rules).",
       broadcast_to_rules()},
      {"expand_dims",
       view,
       1,
       1,
       {{"axes", K::Ints}},
       infer_expand_dims,
       "Inserts size-1 axes at the given output positions.",
       expand_dims_rules()},
      {"squeeze",
       view,
       1,
       1,
       {{"axes", K::Ints, IntList{}}},
       infer_squeeze,
       "Removes size-1 axes (default: every static size-1 axis).",
       squeeze_rules()},
      {"slice",
       base,
       1,
       1,
       {{"starts", K::Ints},
        {"stops", K::Ints},
        {"steps", K::Ints, IntList{}},
        {"axes", K::Ints, IntList{}}},
       infer_slice,
       "Strided slice along axes, as ONNX Slice.",
       slice_rules()},
      {"concat",
       base,
       1,
       kVariadic,
       {{"axis", K::Int, 0}},
       infer_concat,
       "Concatenates the inputs along axis.",
       concat_rules()},
      {"split",
       base,
       1,
       1,
       {{"axis", K::Int, 0}, {"sizes", K::Ints, IntList{}}, {"num", K::Int, 0}},
       infer_split,
       "Splits x along axis into the given sizes or num equal parts.",
       split_rules()},
      {"pad",
       base,
       1,
       1,
       {{"pads", K::Ints},
        {"mode", K::String, "constant", {"constant", "reflect", "edge"}},
        {"value", K::Float, 0.0}},
       infer_pad,
       "Pads (or crops, for negative pads) x: all begins, then all ends.",
       pad_rules()},
      {"gather",
       base,
       2,
       2,
       {{"axis", K::Int, 0}},
       infer_gather,
       "Takes slices of data at indices along axis.",
       gather_rules()},
      {"gather_elements",
       base,
       2,
       2,
       {{"axis", K::Int, 0}},
       infer_gather_elements,
       "Takes elements of data at indices along axis; output has indices' shape.",
       gather_elements_rules()},
      {"gather_nd",
       base,
       2,
       2,
       {{"batch_dims", K::Int, 0}},
       infer_gather_nd,
       "Takes slices of data at index tuples (ONNX GatherND).",
       gather_nd_rules()},
      {"scatter_elements",
       base,
       3,
       3,
       {{"axis", K::Int, 0}, {"reduction", K::String, "none", kReductions}},
       infer_scatter_elements,
       "Writes updates into data at indices along axis.",
       scatter_elements_rules()},
      {"scatter_nd",
       base,
       3,
       3,
       {{"reduction", K::String, "none", kReductions}},
       infer_scatter_nd,
       "Writes update slices into data at index tuples (ONNX ScatterND).",
       scatter_nd_rules()},
      {"iota",
       nodiff,
       0,
       0,
       {{"shape", K::Ints}, {"dtype", K::DType, DType::i64}, {"axis", K::Int, 0}},
       infer_iota,
       "A tensor counting 0..n-1 along axis."},
      {"tile",
       base,
       1,
       1,
       {{"repeats", K::Ints}},
       infer_tile,
       "Repeats x along each axis.",
       tile_rules()},
      {"flip",
       base,
       1,
       1,
       {{"axes", K::Ints, IntList{}}},
       infer_flip,
       "Reverses x along axes (default: all).",
       flip_rules()},
      {"one_hot",
       nodiff,
       1,
       1,
       {{"depth", K::Int},
        {"axis", K::Int, -1},
        {"dtype", K::DType, DType::f32},
        {"on_value", K::Float, 1.0},
        {"off_value", K::Float, 0.0}},
       infer_one_hot,
       "One-hot encodes integer indices; depth is inserted at axis.",
       one_hot_rules()},
      {"top_k",
       base,
       1,
       1,
       {{"k", K::Int}, {"axis", K::Int, -1}, {"largest", K::Bool, true}, {"sorted", K::Bool, true}},
       infer_top_k,
       "The k largest (or smallest) values along axis and their i64 indices.",
       sort_rules()},
      {"sort",
       base,
       1,
       1,
       {{"axis", K::Int, -1}, {"descending", K::Bool, false}, {"stable", K::Bool, false}},
       infer_sort,
       "Sorts x along axis; returns the values and their i64 indices.",
       sort_rules()},
      {"shape_of",
       nodiff,
       1,
       1,
       {},
       infer_shape_of,
       "The dims of x as i64[rank] (read at run time for symbolic dims).",
       shape_of_rules()},
      {"dynamic_reshape",
       view,
       2,
       2,
       {},
       infer_dynamic_reshape,
       "Reshapes x to the i64[k] value shape, as ONNX Reshape: 0 copies the input dim, -1 "
       "is inferred.",
       dynamic_reshape_rules()},
      {"nonzero",
       nodiff,
       1,
       1,
       {},
       infer_nonzero,
       "Indices of the nonzero elements as i64[rank, count] (ONNX layout).",
       nonzero_rules()},
  };
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  for (auto& s : shape_ops()) {
    OpDef d;
    d.name = s.name;
    d.traits = s.traits;
    d.arity(s.min_inputs, s.max_inputs);
    d.attrs = std::move(s.attrs);
    d.infer = std::move(s.infer);
    d.doc = s.doc;
    d.vjp = std::move(s.rules.vjp);
    d.jvp = std::move(s.rules.jvp);
    d.vmap = std::move(s.rules.vmap);
    r.add(std::move(d));
  }
}

}  // namespace rlx::detail
