// Shape ops: data movement without arithmetic (reshape … pad, tile, flip), the constants
// (constant, iota) and shape arithmetic on values (shape_of, dynamic_reshape), each with its
// inference and vjp / jvp / vmap rules; the ops driven by index values are shape_index.cpp.
// Most ops are linear: their jvp is the op again on the tangents and their vjp the
// transposed data movement. Shapes may be symbolic, so static attributes are built only
// from the op's own attributes or from static dims, and anything else takes its shape from
// a value (reshape_like, zeros_like, cumsum of ones).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
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

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxParts = int64_t{1} << 16;                // most outputs a split may have
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();  // a slice stop: "to the end"
constexpr const char* kAxes[] = {"axes"};

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

// Rule helpers.

// v with like's shape, where inference lost a symbolic dim (a slice of `n` is "?").
Value fit(Value v, Value like) {
  return v.shape() == like.shape() ? v : rules::reshape_like(v, like);
}

// Constant-mode pad (zeros; negative pads crop) of one axis.
Value pad1(Value x, int64_t axis, int64_t lo, int64_t hi) {
  IntList pads(2 * size_t(x.rank()), 0);
  pads[size_t(axis)] = lo;
  pads[size_t(x.rank() + axis)] = hi;
  return op("pad", {x}, {{"pads", pads}});
}

Value flip1(Value x, int64_t axis) { return op("flip", {x}, {{"axes", IntList{axis}}}); }

Values same_vjp(const RuleArgs& a, Cts ct) { return {again(a, {ct[0]}, a.attrs)}; }

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

Values reshape_like_vjp(const RuleArgs& a, Cts ct) {
  return {rules::reshape_like(ct[0], a.inputs[0])};
}

VmapResult reshape_vmap(const RuleArgs& a, Axes in_axes) {
  IntList spec = a.attrs.get_ints("shape");
  spec.insert(spec.begin(), 0);  // 0 copies the batch dim; the other 0s still line up
  return at0(again(a, {front(a, in_axes)}, with(a.attrs, "shape", spec)));
}

Values transpose_vjp(const RuleArgs& a, Cts ct) {
  IntList perm = full_perm(a.attrs.get_ints("perm"), a.inputs[0].rank()), inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  return {permute(ct[0], inv)};
}

VmapResult transpose_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  IntList perm{0};
  for (int64_t p : full_perm(a.attrs.get_ints("perm"), x.rank() - 1)) perm.push_back(p + 1);
  return at0(op("transpose", {x}, {{"perm", perm}}));
}

Values broadcast_to_vjp(const RuleArgs& a, Cts ct) {
  return {rules::unbroadcast(ct[0], a.inputs[0])};
}

// The batch size may be symbolic, so the static target cannot take it: broadcast to a
// value of shape [batch, target…] instead.
VmapResult broadcast_to_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  const IntList& target = a.attrs.get_ints("shape");
  IntList lead;  // size-1 axes after the batch that line x up with the target
  for (int64_t i = 1; i <= int64_t(target.size()) - (x.rank() - 1); ++i) lead.push_back(i);
  if (!lead.empty()) x = rules::expand_dims(x, lead);
  Value like = op("broadcast_to", {scalar_like(x, 0)}, {{"shape", target}});
  return at0(rules::broadcast_like(x, rules::materialize_batch(like, x, 0)));
}

VmapResult expand_dims_vmap(const RuleArgs& a, Axes in_axes) {
  return rules::vmap_shift_axes(a, in_axes, kAxes);
}

VmapResult squeeze_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  const IntList& axes = a.attrs.get_ints("axes");
  int64_t r = x.rank() - 1;
  IntList shifted;
  // Spelled out when empty: "every size-1 axis" would take a batch of size 1 too.
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i)
      if (x.shape()[size_t(i + 1)].is(1)) shifted.push_back(i + 1);
  } else {
    for (int64_t ax : axes) shifted.push_back(norm_axis(ax, r) + 1);
  }
  if (shifted.empty()) return at0(x);
  return at0(again(a, {x}, with(a.attrs, "axes", shifted)));
}

// ---------------------------------------------------------------------------------------
// slice

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

struct SliceAxis {
  int64_t axis, start, stop, step;
};

std::vector<SliceAxis> slice_axes(const Attrs& at, int64_t rank) {
  const IntList &starts = at.get_ints("starts"), &stops = at.get_ints("stops");
  const IntList &steps = at.get_ints("steps"), &axes = at.get_ints("axes");
  std::vector<SliceAxis> out;
  for (size_t i = 0; i < starts.size(); ++i)
    out.push_back({axes.empty() ? int64_t(i) : norm_axis(axes[i], rank), starts[i], stops[i],
                   steps.empty() ? 1 : steps[i]});
  return out;
}

Value slice_of(Value x, std::span<const SliceAxis> s) {
  if (s.empty()) return x;
  IntList starts, stops, steps, axes;
  for (const SliceAxis& e : s) {
    starts.push_back(e.start);
    stops.push_back(e.stop);
    steps.push_back(e.step);
    axes.push_back(e.axis);
  }
  return op("slice", {x}, {{"starts", starts}, {"stops", stops}, {"steps", steps}, {"axes", axes}});
}

// On a static axis of size n: the first index taken and how many (as the kernel clamps).
struct Taken {
  int64_t first, count;
};

Taken taken(const SliceAxis& s, int64_t n) {
  if (n == 0) return {0, 0};
  int64_t start = s.start < 0 ? s.start + n : s.start;
  int64_t stop = s.stop < 0 ? s.stop + n : s.stop;
  if (s.step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    stop = std::clamp<int64_t>(stop, 0, n);
    return {start, stop <= start ? 0 : 1 + (stop - start - 1) / s.step};
  }
  start = std::clamp<int64_t>(start, 0, n - 1);
  stop = std::clamp<int64_t>(stop, -1, n - 1);
  int64_t mag = s.step == std::numeric_limits<int64_t>::min() ? kEnd : -s.step;
  return {start, start <= stop ? 0 : 1 + (start - stop - 1) / mag};
}

// The transpose of a one-axis slice of a static axis: zeros around (and, for steps, in
// between) the taken elements, by pads.
Value unslice_static(Value ct, const SliceAxis& s, int64_t n) {
  Taken t = taken(s, n);
  if (t.count == 0) return pad1(ct, s.axis, n, 0);  // ct is empty along the axis
  int64_t step = t.count == 1 ? 1 : s.step, first = t.first;
  if (step < 0) {
    ct = flip1(ct, s.axis);
    first += step * (t.count - 1);
    step = -step;
  }
  if (step == 1) return pad1(ct, s.axis, first, n - first - t.count);
  // step - 1 zeros after each element: on a trailing axis [.., m] -> [.., m, step] ->
  // [.., m * step] (0s copy the other dims, which may be symbolic).
  int64_t r = ct.rank();
  Value g = pad1(rules::expand_dims(move_axis(ct, s.axis, -1), {r}), r, 0, step - 1);
  IntList spec(size_t(r), 0);
  spec.back() = -1;
  g = pad1(op("reshape", {g}, {{"shape", spec}}), r - 1, first, n - first - t.count * step);
  return move_axis(g, -1, s.axis);
}

// A symbolic axis: scatter ct into zeros at the positions the slice took, found by
// slicing the positions themselves. The input of slice i is x sliced along the axes
// before it.
Value unslice_symbolic(Value x, Value ct, std::span<const SliceAxis> axes, size_t i) {
  Value xi = slice_of(x, axes.first(i));
  const SliceAxis& s = axes[i];
  Value idx = slice_of(positions(xi, s.axis), axes.subspan(i, 1));
  return op("scatter_elements", {rules::zeros_like(xi), idx, ct},
            {{"axis", s.axis}, {"reduction", "add"}});
}

// A slice is one slice per axis; its transpose undoes them in reverse order.
Values slice_vjp(const RuleArgs& a, Cts ct) {
  Value x = a.inputs[0], g = ct[0];
  std::vector<SliceAxis> axes = slice_axes(a.attrs, x.rank());
  for (size_t i = axes.size(); i-- > 0;) {
    const Dim& n = x.shape()[size_t(axes[i].axis)];
    g = n.is_static() ? unslice_static(g, axes[i], n.value()) : unslice_symbolic(x, g, axes, i);
  }
  return {fit(g, x)};
}

VmapResult slice_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  IntList shifted;
  for (const SliceAxis& s : slice_axes(a.attrs, x.rank() - 1)) shifted.push_back(s.axis + 1);
  return at0(again(a, {x}, with(a.attrs, "axes", shifted)));
}

// ---------------------------------------------------------------------------------------
// concat, split, pad

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

// Each input's part of ct is a slice: offsets count from the front up to the input with
// a symbolic size and from the back after it, so one symbolic size is fine, two are not.
Values concat_vjp(const RuleArgs& a, Cts ct) {
  size_t k = a.inputs.size();
  if (!is_float(a.inputs[0].dtype())) return Values(k);
  int64_t axis = norm_axis(a.attrs.get_int("axis"), a.inputs[0].rank());
  std::vector<int64_t> size(k, -1);
  int64_t sym = -1, total = 0;
  for (size_t i = 0; i < k; ++i) {
    const Dim& d = a.inputs[i].shape()[size_t(axis)];
    if (d.is_static()) {
      size[i] = d.value();
      total += d.value();
    } else if (sym >= 0) {
      fail<NotSupported>(rules::rule_op_name(a), "vjp: more than one input with a symbolic size ",
                         "along the concat axis ", axis);
    } else {
      sym = int64_t(i);
    }
  }
  Values out;
  int64_t head = 0, tail = total;  // static sizes before input i / from input i on
  for (size_t i = 0; i < k; ++i) {
    int64_t start, stop;
    tail -= std::max<int64_t>(size[i], 0);
    if (sym < 0 || int64_t(i) <= sym) {
      start = head;
      stop = int64_t(i) == sym ? (tail == 0 ? kEnd : -tail) : head + size[i];
      head += std::max<int64_t>(size[i], 0);
    } else {
      start = -(tail + size[i]);
      stop = tail == 0 ? kEnd : -tail;
    }
    out.push_back(fit(slice1(ct[0], axis, start, stop), a.inputs[i]));
  }
  return out;
}

Values split_vjp(const RuleArgs& a, Cts ct) {
  Values parts(ct.begin(), ct.end());
  return {fit(op("concat", parts, {{"axis", a.attrs.get_int("axis")}}), a.inputs[0])};
}

// The transpose of edge / reflect padding of one static axis of size n: the interior
// crops back (as for constant padding); the border elements add onto the x elements they
// copied: x[0] / x[n-1] for edge, reversed runs next to the ends for reflect.
Value unpad_axis(Value ct, int64_t d, int64_t n, int64_t lo, int64_t hi, bool edge) {
  int64_t out = n + lo + hi;
  Value g = pad1(ct, d, -lo, -hi);
  int64_t left = std::min(lo, out);  // ct[j] for j < lo read x[0] (edge) or x[lo - j]
  if (left > 0) {
    Value part = slice1(ct, d, 0, left);
    g = g + (edge ? pad1(rules::sum(part, {d}, true), d, 0, n - 1)
                  : pad1(flip1(part, d), d, lo - left + 1, n - 1 - lo));
  }
  int64_t j0 = std::max<int64_t>(lo + n, 0);  // ct[j] for j >= lo + n read past x's end:
  if (out > j0) {                             // x[n-1] or x[2(n-1) - (j - lo)]
    Value part = slice1(ct, d, j0, out);
    int64_t s_first = 2 * (n - 1) - (j0 - lo), s_last = 2 * (n - 1) - (out - 1 - lo);
    g = g + (edge ? pad1(rules::sum(part, {d}, true), d, n - 1, 0)
                  : pad1(flip1(part, d), d, s_last, n - 1 - s_first));
  }
  return g;
}

Values pad_vjp(const RuleArgs& a, Cts ct) {
  Value x = a.inputs[0], g = ct[0];
  const IntList& pads = a.attrs.get_ints("pads");
  const std::string& mode = a.attrs.get_string("mode");
  int64_t r = x.rank();
  if (mode == "constant") {
    IntList neg;
    for (int64_t p : pads) neg.push_back(-p);
    return {fit(op("pad", {g}, {{"pads", neg}}), x)};
  }
  for (int64_t d = 0; d < r; ++d) {
    int64_t lo = pads[size_t(d)], hi = pads[size_t(r + d)];
    if (lo == 0 && hi == 0) continue;
    const Dim& n = x.shape()[size_t(d)];
    if (!n.is_static())
      fail<NotSupported>(rules::rule_op_name(a), "vjp: ", mode, " padding of axis ", d,
                         " whose size is symbolic (", n.str(), ")");
    g = unpad_axis(g, d, n.value(), lo, hi, mode == "edge");
  }
  return {fit(g, x)};
}

// The padding value is a constant: tangents pad with zeros.
Values pad_jvp(const RuleArgs& a, Cts t) { return {again(a, {t[0]}, with(a.attrs, "value", 0.0))}; }

VmapResult pad_vmap(const RuleArgs& a, Axes in_axes) {
  const IntList& pads = a.attrs.get_ints("pads");
  auto mid = pads.begin() + std::ptrdiff_t(pads.size() / 2);
  IntList p{0};
  p.insert(p.end(), pads.begin(), mid);
  p.push_back(0);
  p.insert(p.end(), mid, pads.end());
  return at0(again(a, {front(a, in_axes)}, with(a.attrs, "pads", p)));
}

// ---------------------------------------------------------------------------------------
// iota, tile, flip

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

// ct viewed as [r0, d0, r1, d1, …] (repeats of 1 left out) and summed over the r's. The
// d's come from x: static, copied (0) while no repeat precedes them, or one inferred (-1).
Values tile_vjp(const RuleArgs& a, Cts ct) {
  Value x = a.inputs[0];
  const IntList& reps = a.attrs.get_ints("repeats");
  IntList spec, summed;
  bool aligned = true, inferred = false;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] != 1) {
      summed.push_back(int64_t(spec.size()));
      spec.push_back(reps[i]);
      aligned = false;
    }
    const Dim& d = x.shape()[i];
    if (d.is_static()) {
      spec.push_back(d.value());
    } else if (aligned) {
      spec.push_back(0);
    } else if (!inferred) {
      spec.push_back(-1);
      inferred = true;
    } else {
      fail<NotSupported>(rules::rule_op_name(a), "vjp: two symbolic dims after a repeated axis in ",
                         shape_str(x.shape()));
    }
  }
  Value g = op("reshape", {ct[0]}, {{"shape", spec}});
  if (!summed.empty()) g = rules::sum(g, summed);
  return {fit(g, x)};
}

VmapResult tile_vmap(const RuleArgs& a, Axes in_axes) {
  IntList reps = a.attrs.get_ints("repeats");
  reps.insert(reps.begin(), 1);
  return at0(again(a, {front(a, in_axes)}, with(a.attrs, "repeats", reps)));
}

VmapResult flip_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  const IntList& axes = a.attrs.get_ints("axes");
  int64_t r = x.rank() - 1;
  IntList shifted;  // spelled out when empty ("all"), which would flip the batch too
  for (int64_t i = 0; i < r; ++i)
    if (axes.empty()) shifted.push_back(i + 1);
  for (int64_t ax : axes) shifted.push_back(norm_axis(ax, r) + 1);
  if (shifted.empty()) return at0(x);
  return at0(again(a, {x}, with(a.attrs, "axes", shifted)));
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

// shape_of: the unbatched x's shape is x's with the batch entry left out.
VmapResult shape_of_vmap(const RuleArgs& a, Axes in_axes) {
  Value s = op("shape_of", {a.inputs[0]});
  int64_t b = in_axes[0], r = a.inputs[0].rank();
  Values parts;
  if (b > 0) parts.push_back(slice1(s, 0, 0, b));
  if (b + 1 < r) parts.push_back(slice1(s, 0, b + 1, r));
  if (parts.empty()) return {{a.g.constant(Literal::from<int64_t>({}, {0}))}, {-1}};
  return {{parts.size() == 1 ? parts[0] : op("concat", parts)}, {-1}};
}

Values dynamic_reshape_vjp(const RuleArgs& a, Cts ct) {
  return {rules::reshape_like(ct[0], a.inputs[0]), Value{}};
}

// The batch dim leads x, and a 0 in front of the shape copies it. Batched outputs stack
// only when every element's target shape agrees, so a batched shape gives its first row.
VmapResult dynamic_reshape_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = a.inputs[0], shape = a.inputs[1];
  if (in_axes[1] >= 0) {
    Value rows = move_axis(shape, in_axes[1], 0);
    shape = op("reshape", {slice1(rows, 0, 0, 1)}, {{"shape", IntList{-1}}});
    if (in_axes[0] < 0) {
      // Only the shape is batched: the result is batched along the shape's batch dim. A
      // sum over the rows keeps that dim even when the rows are empty (a rank-0 target).
      Value y = again(a, {x, shape}, a.attrs);
      IntList spec(size_t(y.rank()) + 1, 1);
      spec[0] = 0;
      Value ref = op("reshape", {op("sum", {rows}, {{"axes", IntList{1}}})}, {{"shape", spec}});
      return at0(op("broadcast_like", {rules::expand_dims(y, {0}), ref}));
    }
  }
  Value zero = a.g.constant(Literal::from<int64_t>({0}));
  return at0(again(a, {move_axis(x, in_axes[0], 0), op("concat", {zero, shape})}, a.attrs));
}

// ---------------------------------------------------------------------------------------
// The table

std::vector<ShapeOp> shape_ops() {
  using K = AttrKind;
  const Trait base = Trait::shape_op;
  const Trait view = base | Trait::view;
  const Trait nodiff = base | Trait::nondifferentiable;
  return {
      {.name = "constant",
       .traits = nodiff,
       .min_inputs = 0,
       .max_inputs = 0,
       .attrs = {{"value", K::Tensor}},
       .infer = infer_constant,
       .doc = "A constant tensor, held in the graph."},
      {.name = "reshape",
       .traits = view,
       .attrs = {{"shape", K::Ints}},
       .infer = infer_reshape,
       .doc = "Reshapes x; 0 copies the input dim, -1 is inferred.",
       .vjp = reshape_like_vjp,
       .jvp = rules::linear_jvp,
       .vmap = reshape_vmap},
      {.name = "transpose",
       .traits = base,
       .attrs = {{"perm", K::Ints, IntList{}}},
       .infer = infer_transpose,
       .doc = "Permutes the axes of x (default: reversed).",
       .vjp = transpose_vjp,
       .jvp = rules::linear_jvp,
       .vmap = transpose_vmap},
      {.name = "broadcast_to",
       .traits = base,
       .attrs = {{"shape", K::Ints}},
       .infer = infer_broadcast_to,
       .doc = "Broadcasts x to a static shape (NumPy rules).",
       .vjp = broadcast_to_vjp,
       .jvp = rules::linear_jvp,
       .vmap = broadcast_to_vmap},
      {.name = "expand_dims",
       .traits = view,
       .attrs = {{"axes", K::Ints}},
       .infer = infer_expand_dims,
       .doc = "Inserts size-1 axes at the given output positions.",
       .vjp = reshape_like_vjp,
       .jvp = rules::linear_jvp,
       .vmap = expand_dims_vmap},
      {.name = "squeeze",
       .traits = view,
       .attrs = {{"axes", K::Ints, IntList{}}},
       .infer = infer_squeeze,
       .doc = "Removes size-1 axes (default: every static size-1 axis).",
       .vjp = reshape_like_vjp,
       .jvp = rules::linear_jvp,
       .vmap = squeeze_vmap},
      {.name = "slice",
       .traits = base,
       .attrs = {{"starts", K::Ints},
                 {"stops", K::Ints},
                 {"steps", K::Ints, IntList{}},
                 {"axes", K::Ints, IntList{}}},
       .infer = infer_slice,
       .doc = "Strided slice along axes, as ONNX Slice.",
       .vjp = slice_vjp,
       .jvp = rules::linear_jvp,
       .vmap = slice_vmap},
      {.name = "concat",
       .traits = base,
       .max_inputs = kVariadic,
       .attrs = {{"axis", K::Int, 0}},
       .infer = infer_concat,
       .doc = "Concatenates the inputs along axis.",
       .vjp = concat_vjp,
       .jvp = rules::linear_jvp,
       .vmap = shift_axis_all_vmap},
      {.name = "split",
       .traits = base,
       .attrs = {{"axis", K::Int, 0}, {"sizes", K::Ints, IntList{}}, {"num", K::Int, 0}},
       .infer = infer_split,
       .doc = "Splits x along axis into the given sizes or num equal parts.",
       .vjp = split_vjp,
       .jvp = rules::linear_jvp,
       .vmap = shift_axis_vmap},
      {.name = "pad",
       .traits = base,
       .attrs = {{"pads", K::Ints},
                 {"mode", K::String, "constant", {"constant", "reflect", "edge"}},
                 {"value", K::Float, 0.0}},
       .infer = infer_pad,
       .doc = "Pads (or crops, for negative pads) x: all begins, then all ends.",
       .vjp = pad_vjp,
       .jvp = pad_jvp,
       .vmap = pad_vmap},
      {.name = "iota",
       .traits = nodiff,
       .min_inputs = 0,
       .max_inputs = 0,
       .attrs = {{"shape", K::Ints}, {"dtype", K::DType, DType::i64}, {"axis", K::Int, 0}},
       .infer = infer_iota,
       .doc = "A tensor counting 0..n-1 along axis."},
      {.name = "tile",
       .traits = base,
       .attrs = {{"repeats", K::Ints}},
       .infer = infer_tile,
       .doc = "Repeats x along each axis.",
       .vjp = tile_vjp,
       .jvp = rules::linear_jvp,
       .vmap = tile_vmap},
      {.name = "flip",
       .traits = base,
       .attrs = {{"axes", K::Ints, IntList{}}},
       .infer = infer_flip,
       .doc = "Reverses x along axes (default: all).",
       .vjp = same_vjp,
       .jvp = rules::linear_jvp,
       .vmap = flip_vmap},
      {.name = "shape_of",
       .traits = nodiff,
       .infer = infer_shape_of,
       .doc = "The dims of x as i64[rank] (read at run time for symbolic dims).",
       .vmap = shape_of_vmap},
      {.name = "dynamic_reshape",
       .traits = view,
       .min_inputs = 2,
       .max_inputs = 2,
       .infer = infer_dynamic_reshape,
       .doc = "Reshapes x to the i64[k] value shape, as ONNX Reshape: 0 copies the input dim, "
              "-1 is inferred.",
       .vjp = dynamic_reshape_vjp,
       .jvp = rules::linear_jvp,
       .vmap = dynamic_reshape_vmap},
  };
}

}  // namespace

void register_shape_ops(OpRegistry& r) { add_shape_ops(r, shape_ops()); }

}  // namespace rlx::detail
