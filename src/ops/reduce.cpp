// Reductions over `axes` (sum … l2_norm), sum_squares over many tensors, index reductions
// over one `axis` (argmax, argmin), and the scan cumsum; with their vjp / jvp / vmap rules.
#include <algorithm>

#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "rlx/axes.h"
#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

// reduce_max / reduce_min / arg* have no identity element: reducing a statically empty
// axis is an error rather than a silent garbage value.
void expect_nonempty_axis(const InferContext& ctx, int64_t axis) {
  if (ctx.shape(0)[axis].is(0))
    ctx.fail("expected a non-empty reduced axis, got size 0 at axis ", axis, " of ",
             ctx.input(0).str());
}

// The input shape with `reduced` axes dropped, or kept as size 1 under keepdims.
Shape reduced_shape(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i])
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(Dim(1));
  }
  return out;
}

// ---- rules --------------------------------------------------------------------------

// The reduced axes of the node's input, normalised and sorted (an empty attribute: all).
IntList reduced_axes(const RuleArgs& a) {
  int64_t rank = a.inputs[0].rank();
  IntList axes = a.attrs.get_ints("axes");
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  for (int64_t& ax : axes) ax = norm_axis(ax, rank);
  std::sort(axes.begin(), axes.end());
  return axes;
}

// v, shaped like the op's output, with the reduced axes back as size 1 (the keepdims
// form), so that it broadcasts against the input.
Value keep_dims(const RuleArgs& a, Value v) {
  if (a.attrs.get_bool("keepdims")) return v;
  IntList axes = reduced_axes(a);
  return axes.empty() ? v : rules::expand_dims(v, axes);
}

Value cast_like(Value mask, Value like) { return cast(mask, like.dtype()); }

// The reduction as a sum, with the op's axes and keepdims (the jvp of sum(t * d)).
Value sum_like(const RuleArgs& a, Value v) {
  return op("sum", {v},
            {{"axes", a.attrs.get_ints("axes")}, {"keepdims", a.attrs.get_bool("keepdims")}});
}

// d out / d x, shaped like x, for the nonlinear reductions: the vjp is the cotangent
// (spread back over the input) times it, the jvp the reduced sum of the tangent times it.
using PartialFn = Value (*)(const RuleArgs&);

// prod: exact with zeros in the input. Per reduced group with nz zeros: nz == 0 gives
// prod / x; nz == 1 gives the product of the others at the zero and 0 elsewhere; nz >= 2
// gives 0. (Its own derivative, for hvp, is exact where nz == 0.)
Value prod_partial(const RuleArgs& a) {
  Value x = a.inputs[0];
  IntList axes = reduced_axes(a);
  Value zero = op("eq", {x, scalar_like(x, 0)});
  Value nz = rules::sum(cast_like(zero, x), axes, true);
  Value safe = op("select", {zero, scalar_like(x, 1), x});
  Value p = op("prod", {safe}, {{"axes", axes}, {"keepdims", true}});
  Value at_zero = p * cast_like(op("eq", {nz, scalar_like(nz, 1)}), x);
  Value elsewhere = p / safe * cast_like(op("eq", {nz, scalar_like(nz, 0)}), x);
  return op("select", {zero, at_zero, elsewhere});
}

// reduce_max / reduce_min: the extreme positions share the gradient equally on ties
// (for tie-free inputs: all of it goes to the single argmax, as finite differences see).
Value extreme_partial(const RuleArgs& a) {
  Value x = a.inputs[0];
  Value mask = cast_like(op("eq", {x, keep_dims(a, a.outputs[0])}), x);
  return mask / rules::sum(mask, reduced_axes(a), true);
}

Value logsumexp_partial(const RuleArgs& a) { return exp(a.inputs[0] - keep_dims(a, a.outputs[0])); }

Value l1_partial(const RuleArgs& a) { return op("sign", {a.inputs[0]}); }

// x / |x|; at a zero norm the gradient is 0 (a subgradient) rather than NaN.
Value l2_partial(const RuleArgs& a) {
  Value n = keep_dims(a, a.outputs[0]);
  Value safe = op("select", {op("eq", {n, scalar_like(n, 0)}), scalar_like(n, 1), n});
  return a.inputs[0] / safe;
}

struct ReduceRules {
  VjpFn vjp;
  JvpFn jvp;
};

ReduceRules by_partial(PartialFn partial) {
  return {[partial](const RuleArgs& a, std::span<const Value> cts) -> std::vector<Value> {
            if (!is_float(a.inputs[0].dtype())) return {Value{}};
            return {keep_dims(a, cts[0]) * partial(a)};
          },
          [partial](const RuleArgs& a, std::span<const Value> ts) -> std::vector<Value> {
            if (!ts[0].valid()) return {Value{}};
            return {sum_like(a, ts[0] * partial(a))};
          }};
}

// sum and mean are linear: the cotangent is spread back (and divided by the count).
ReduceRules linear_reduce(bool mean) {
  return {[mean](const RuleArgs& a, std::span<const Value> cts) -> std::vector<Value> {
            Value x = a.inputs[0];
            if (!rules::has_tangents(x.dtype())) return {Value{}};
            Value ct = keep_dims(a, cts[0]);
            if (mean) {
              Shape reduced;
              for (int64_t ax : reduced_axes(a)) reduced.push_back(x.shape()[size_t(ax)]);
              std::optional<int64_t> n = numel(reduced);
              // A symbolic count is counted at run time.
              ct = n ? ct * (1.0 / double(*n))
                     : ct / rules::sum(rules::ones_like(x), reduced_axes(a), true);
            }
            return {rules::broadcast_like(ct, x)};
          },
          rules::linear_jvp};
}

// Reductions under vmap: the axes shift past the batch (moved to 0). A rank-0 input
// (where "all axes" is none) reduces a size-1 axis added after the batch instead.
VmapResult vmap_reduce(const RuleArgs& a, std::span<const int> in_axes) {
  if (a.inputs[0].rank() == 1) {
    Value x = rules::expand_dims(a.inputs[0], {1});
    Attrs attrs = a.attrs;
    attrs.set("axes", IntList{1}).set("keepdims", false);
    return {{op(rules::rule_op_name(a), {x}, attrs)}, {0}};
  }
  static constexpr const char* kAxes[] = {"axes"};
  return rules::vmap_shift_axes(a, in_axes, kAxes);
}

VmapResult vmap_axis(const RuleArgs& a, std::span<const int> in_axes) {
  static constexpr const char* kAxis[] = {"axis"};
  return rules::vmap_shift_axes(a, in_axes, kAxis);
}

// ---- definitions ----------------------------------------------------------------------

// sum / mean of complex numbers: the reductions of the real and imaginary parts (every
// device that reduces reals reduces them; a real input has its kernels).
std::vector<Value> complex_by_parts(const RuleArgs& a) {
  Value z = a.inputs[0];
  const std::string& name = rules::rule_op_name(a);
  if (!is_complex(z.dtype()))
    fail<NotSupported>(name, "expected a complex input to reduce by parts, got ", z.type().str());
  return {
      op("complex", {op(name, {op("real", {z})}, a.attrs), op(name, {op("imag", {z})}, a.attrs)})};
}

struct ReduceSpec {
  const char* name;
  bool float_only = false;
  bool complex = false;         // takes complex numbers too (by parts)
  bool needs_nonempty = false;  // no identity element
  Trait traits = Trait::none;   // in addition to reduction
  ReduceRules rules;
  const char* doc;
};

std::vector<ReduceSpec> reduce_specs() {
  // The fold of an associative binary op (add, mul, max, min): splittable into partials.
  constexpr Trait assoc = Trait::associative;
  return {
      {.name = "sum",
       .complex = true,
       .traits = assoc,
       .rules = linear_reduce(false),
       .doc = "Sum over axes (all when axes is empty)."},
      {.name = "prod",
       .traits = assoc,
       .rules = by_partial(prod_partial),
       .doc = "Product over axes (all when axes is empty)."},
      // "max" / "min" are the binary elementwise ops, so the reductions take a prefix.
      {.name = "reduce_max",
       .needs_nonempty = true,
       .traits = assoc,
       .rules = by_partial(extreme_partial),
       .doc = "Maximum over axes (all when axes is empty)."},
      {.name = "reduce_min",
       .needs_nonempty = true,
       .traits = assoc,
       .rules = by_partial(extreme_partial),
       .doc = "Minimum over axes (all when axes is empty)."},
      {.name = "mean",
       .float_only = true,
       .complex = true,
       .rules = linear_reduce(true),
       .doc = "Mean over axes (all when axes is empty)."},
      {.name = "logsumexp",
       .float_only = true,
       .rules = by_partial(logsumexp_partial),
       .doc = "log(sum(exp(x))) over axes, computed stably."},
      {.name = "l1_norm",
       .float_only = true,
       .rules = by_partial(l1_partial),
       .doc = "Sum of |x| over axes."},
      {.name = "l2_norm",
       .float_only = true,
       .rules = by_partial(l2_partial),
       .doc = "sqrt(sum(x^2)) over axes."},
  };
}

void register_reduce(OpRegistry& r, const ReduceSpec& s) {
  OpDef d;
  d.name = s.name;
  d.traits = Trait::reduction | s.traits;
  d.amp = AmpRole::keep_f32;
  d.arity(1).attr("axes", AttrKind::Ints, IntList{}).attr("keepdims", AttrKind::Bool, false);
  d.doc = s.doc;
  d.vjp = s.rules.vjp;
  d.jvp = s.rules.jvp;
  d.vmap = vmap_reduce;
  if (s.complex) d.decompose = complex_by_parts;
  d.infer = [float_only = s.float_only, complex = s.complex,
             nonempty = s.needs_nonempty](const InferContext& ctx) {
    bool by_parts = complex && is_complex(ctx.dtype(0));
    if (float_only && !by_parts)
      expect_float(ctx, 0);
    else if (!by_parts)
      expect_numeric(ctx, 0);
    int64_t rank = ctx.rank(0);
    const IntList& axes = ctx.attrs().get_ints("axes");
    std::vector<bool> reduced(size_t(rank), axes.empty());
    for (int64_t a : normalize_axes(ctx, axes, rank)) reduced[size_t(a)] = true;
    if (nonempty)
      for (int64_t a = 0; a < rank; ++a)
        if (reduced[size_t(a)]) expect_nonempty_axis(ctx, a);
    bool keepdims = ctx.attrs().get_bool("keepdims");
    return std::vector<TensorType>{{ctx.dtype(0), reduced_shape(ctx.shape(0), reduced, keepdims)}};
  };
  r.add(std::move(d));
}

void register_arg_reduce(OpRegistry& r, const char* name, const char* doc) {
  OpDef d;
  d.name = name;
  d.traits = Trait::reduction | Trait::nondifferentiable;
  d.amp = AmpRole::keep_f32;  // ties decided in f32, as the full-precision graph
  d.arity(1)
      .attr("axis", AttrKind::Int, 0)
      .attr("keepdims", AttrKind::Bool, false)
      .attr("select_last_index", AttrKind::Bool, false);
  d.doc = doc;
  d.vmap = vmap_axis;
  d.infer = [](const InferContext& ctx) {
    expect_numeric(ctx, 0);
    expect_min_rank(ctx, 0, 1);
    int64_t axis = normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0));
    expect_nonempty_axis(ctx, axis);
    std::vector<bool> reduced(size_t(ctx.rank(0)), false);
    reduced[size_t(axis)] = true;
    bool keepdims = ctx.attrs().get_bool("keepdims");
    return std::vector<TensorType>{{DType::i64, reduced_shape(ctx.shape(0), reduced, keepdims)}};
  };
  r.add(std::move(d));
}

void register_cumsum(OpRegistry& r) {
  OpDef d;
  d.name = "cumsum";
  d.amp = AmpRole::keep_f32;
  d.arity(1)
      .attr("axis", AttrKind::Int, 0)
      .attr("exclusive", AttrKind::Bool, false)
      .attr("reverse", AttrKind::Bool, false);
  d.doc = "Running sum along axis (optionally exclusive and/or from the end).";
  // The transpose of a running sum is the running sum the other way (exclusive stays).
  d.vjp = [](const RuleArgs& a, std::span<const Value> cts) -> std::vector<Value> {
    if (!is_float(a.inputs[0].dtype())) return {Value{}};
    Attrs attrs = a.attrs;
    attrs.set("reverse", !a.attrs.get_bool("reverse"));
    return {op("cumsum", {cts[0]}, attrs)};
  };
  d.jvp = rules::linear_jvp;
  d.vmap = vmap_axis;
  d.infer = [](const InferContext& ctx) {
    expect_numeric(ctx, 0);
    expect_min_rank(ctx, 0, 1);
    normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0));
    return std::vector<TensorType>{ctx.input(0)};
  };
  r.add(std::move(d));
}

// sum_squares: one value for many tensors (a global gradient norm's square). A device may
// read every input in one launch; elsewhere it is a sum per input.
std::vector<Value> sum_squares_decomposed(const RuleArgs& a) {
  Value total;
  for (Value x : a.inputs) {
    if (dtype_size(x.dtype()) == 2) x = cast(x, DType::f32);  // squares of 16-bit in f32
    Value s = cast(sum(x * x), DType::f64);
    total = total.valid() ? total + s : s;
  }
  return {total};
}

void register_sum_squares(OpRegistry& r) {
  OpDef d;
  d.name = "sum_squares";
  d.arity(1, kVariadic);
  d.doc =
      "Sum of the squares of every element of every input (float tensors of any shapes and "
      "dtypes), as one f64 value: the square of a global gradient norm.";
  d.infer = [](const InferContext& ctx) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) expect_float(ctx, i);
    return std::vector<TensorType>{{DType::f64, {}}};
  };
  d.decompose = sum_squares_decomposed;
  set_rules_by_decomposition(d);
  r.add(std::move(d));
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  register_sum_squares(r);
  for (const auto& s : reduce_specs()) register_reduce(r, s);
  register_arg_reduce(r, "argmax", "Index of the maximum along axis, as i64.");
  register_arg_reduce(r, "argmin", "Index of the minimum along axis, as i64.");
  register_cumsum(r);
}

}  // namespace rlx::detail
