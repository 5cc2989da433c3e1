// Ops that exist for the transforms: shape-from-a-value reshapes and broadcasts (rules
// must work on symbolic shapes, where no static shape attribute can say "x's shape"),
// stop_gradient, and checkpoint (the segment markers of rematerialisation).
#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;

// ---- reshape_like ----------------------------------------------------------------------

Types infer_reshape_like(const InferContext& ctx) {
  int64_t lead = ctx.attrs().get_int("lead");
  if (lead < 0 || lead > ctx.rank(0))
    ctx.fail("expected lead in [0, ", ctx.rank(0), "] (the rank of input 0), got ", lead);
  const Shape& x = ctx.shape(0);
  Shape out(x.begin(), x.begin() + lead);
  out.insert(out.end(), ctx.shape(1).begin(), ctx.shape(1).end());
  auto n_in = numel(Shape(x.begin() + lead, x.end())), n_out = numel(ctx.shape(1));
  if (n_in && n_out && *n_in != *n_out)
    ctx.fail("expected as many elements after the first ", lead, " dims of ", ctx.input(0).str(),
             " as in ", ctx.input(1).str(), ", got ", *n_in, " and ", *n_out);
  return {{ctx.dtype(0), out}};
}

std::vector<Value> vjp_reshape_like(const RuleArgs& a, std::span<const Value> ct) {
  return {rules::reshape_like(ct[0], a.inputs[0]), Value{}};
}

std::vector<Value> jvp_like(const RuleArgs& a, std::span<const Value> t) {
  if (!t[0].valid()) return {Value{}};
  return a.g.apply(*a.op, {t[0], a.inputs[1]}, a.attrs);
}

// A batched `like` only lends its shape: any one element of the batch will do. (A gather
// drops the axis; a slice [0:1] of a symbolic dim would infer "?", not 1.)
Value unbatch_like(Value like, int axis) {
  Value zero = like.graph->constant(Literal::scalar(DType::i64, 0));
  return op("gather", {like, zero}, {{"axis", int64_t(axis)}});
}

VmapResult vmap_reshape_like(const RuleArgs& a, std::span<const int> in_axes) {
  Value like = in_axes[1] >= 0 ? unbatch_like(a.inputs[1], in_axes[1]) : a.inputs[1];
  Value x = a.inputs[0];
  if (in_axes[0] < 0) {  // only `like` was batched: its shape is the same for every element
    return {{a.g.apply1("reshape_like", {x, like}, a.attrs)}, {-1}};
  }
  // Keep the batch in front of the reshaped dims: move it to 0 and lead one more dim.
  x = rules::moveaxis(x, in_axes[0], 0);
  Attrs at = a.attrs;
  at.set("lead", a.attrs.get_int("lead") + 1);
  return {{a.g.apply1("reshape_like", {x, like}, at)}, {0}};
}

// ---- broadcast_like ----------------------------------------------------------------

Types infer_broadcast_like(const InferContext& ctx) {
  return {{ctx.dtype(0), broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1))}};
}

std::vector<Value> vjp_broadcast_like(const RuleArgs& a, std::span<const Value> ct) {
  return {rules::unbroadcast(ct[0], a.inputs[0]), Value{}};
}

// Inserts size-1 axes after axis 0 until x has rank r.
Value pad_after_batch(Value x, int64_t r) {
  if (x.rank() >= r) return x;
  IntList axes;
  for (int64_t i = 1; i <= r - x.rank(); ++i) axes.push_back(i);
  return rules::expand_dims(x, axes);
}

VmapResult vmap_broadcast_like(const RuleArgs& a, std::span<const int> in_axes) {
  // Both operands get the batch at 0 and the same rank (output rank + 1), so NumPy
  // broadcasting lines up the batch axes and the element axes separately.
  int64_t r =
      std::max(a.inputs[0].rank() - (in_axes[0] >= 0), a.inputs[1].rank() - (in_axes[1] >= 0)) + 1;
  Value x = a.inputs[0], like = a.inputs[1];
  if (in_axes[0] >= 0) x = pad_after_batch(rules::moveaxis(x, in_axes[0], 0), r);
  if (in_axes[1] >= 0) like = pad_after_batch(rules::moveaxis(like, in_axes[1], 0), r);
  return {{a.g.apply1("broadcast_like", {x, like})}, {0}};
}

// ---- identities --------------------------------------------------------------------------

Types infer_identity(const InferContext& ctx) { return {ctx.input(0)}; }

VmapResult vmap_identity(const RuleArgs& a, std::span<const int> in_axes) {
  return {a.g.apply(*a.op, {a.inputs[0]}, a.attrs), {in_axes[0]}};
}

}  // namespace

void register_autodiff_ops(OpRegistry& r) {
  OpDef rl;
  rl.name = "reshape_like";
  rl.traits = Trait::shape_op | Trait::view;
  rl.arity(2).attr("lead", AttrKind::Int, int64_t{0});
  rl.doc =
      "x reshaped to x.shape[:lead] + like.shape (equal element counts); like gives only "
      "its shape, read at run time.";
  rl.infer = infer_reshape_like;
  rl.vjp = vjp_reshape_like;
  rl.jvp = jvp_like;
  rl.vmap = vmap_reshape_like;
  r.add(std::move(rl));

  OpDef bl;
  bl.name = "broadcast_like";
  bl.traits = Trait::shape_op;
  bl.arity(2);
  bl.doc = "x broadcast (NumPy rules) with like's shape; like gives only its shape.";
  bl.infer = infer_broadcast_like;
  bl.vjp = vjp_broadcast_like;
  bl.jvp = jvp_like;
  bl.vmap = vmap_broadcast_like;
  r.add(std::move(bl));

  OpDef sg;
  sg.name = "stop_gradient";
  sg.traits = Trait::nondifferentiable | Trait::view;
  sg.arity(1);
  sg.doc = "The identity, through which no gradient flows.";
  sg.infer = infer_identity;
  sg.vmap = vmap_identity;
  r.add(std::move(sg));

  OpDef cp;
  cp.name = "checkpoint";
  cp.traits = Trait::view | Trait::checkpoint;
  cp.arity(1);
  cp.doc =
      "The identity; marks a rematerialisation boundary: with Remat::checkpoints, grad "
      "stores its output and recomputes the rest of the segment before it.";
  cp.infer = infer_identity;
  cp.vjp = [](const RuleArgs&, std::span<const Value> ct) { return std::vector<Value>{ct[0]}; };
  cp.jvp = [](const RuleArgs&, std::span<const Value> t) { return std::vector<Value>{t[0]}; };
  cp.vmap = vmap_identity;
  r.add(std::move(cp));
}

}  // namespace rlx::detail
