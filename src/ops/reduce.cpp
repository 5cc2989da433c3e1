// Reductions over `axes` (sum … l2_norm), index reductions over one `axis` (argmax,
// argmin), and the scan cumsum.
#include "ops/families.h"
#include "ops/infer_util.h"

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

struct ReduceSpec {
  const char* name;
  bool float_only;
  bool needs_nonempty;  // no identity element
  Trait traits;         // in addition to reduction
  const char* doc;
};

std::vector<ReduceSpec> reduce_specs() {
  // The fold of an associative binary op (add, mul, max, min): splittable into partials.
  constexpr Trait assoc = Trait::associative;
  constexpr Trait none = Trait::none;
  return {
      {"sum", false, false, assoc, "Sum over axes (all when axes is empty)."},
      {"prod", false, false, assoc, "Product over axes (all when axes is empty)."},
      // "max" / "min" are the binary elementwise ops, so the reductions take a prefix.
      {"reduce_max", false, true, assoc, "Maximum over axes (all when axes is empty)."},
      {"reduce_min", false, true, assoc, "Minimum over axes (all when axes is empty)."},
      {"mean", true, false, none, "Mean over axes (all when axes is empty)."},
      {"logsumexp", true, false, none, "log(sum(exp(x))) over axes, computed stably."},
      {"l1_norm", true, false, none, "Sum of |x| over axes."},
      {"l2_norm", true, false, none, "sqrt(sum(x^2)) over axes."},
  };
}

void register_reduce(OpRegistry& r, const ReduceSpec& s) {
  OpDef d;
  d.name = s.name;
  d.traits = Trait::reduction | s.traits;
  d.arity(1).attr("axes", AttrKind::Ints, IntList{}).attr("keepdims", AttrKind::Bool, false);
  d.doc = s.doc;
  d.infer = [float_only = s.float_only, nonempty = s.needs_nonempty](const InferContext& ctx) {
    if (float_only)
      expect_float(ctx, 0);
    else
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
  d.arity(1)
      .attr("axis", AttrKind::Int, 0)
      .attr("keepdims", AttrKind::Bool, false)
      .attr("select_last_index", AttrKind::Bool, false);
  d.doc = doc;
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
  d.arity(1)
      .attr("axis", AttrKind::Int, 0)
      .attr("exclusive", AttrKind::Bool, false)
      .attr("reverse", AttrKind::Bool, false);
  d.doc = "Running sum along axis (optionally exclusive and/or from the end).";
  d.infer = [](const InferContext& ctx) {
    expect_numeric(ctx, 0);
    expect_min_rank(ctx, 0, 1);
    normalize_axis(ctx, ctx.attrs().get_int("axis"), ctx.rank(0));
    return std::vector<TensorType>{ctx.input(0)};
  };
  r.add(std::move(d));
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  for (const auto& s : reduce_specs()) register_reduce(r, s);
  register_arg_reduce(r, "argmax", "Index of the maximum along axis, as i64.");
  register_arg_reduce(r, "argmin", "Index of the minimum along axis, as i64.");
  register_cumsum(r);
}

}  // namespace rlx::detail
