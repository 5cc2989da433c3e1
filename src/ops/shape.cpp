// Shape ops: data movement and selection without arithmetic.
#include "ops/families.h"
#include "ops/infer_util.h"

namespace rlx::detail {

namespace {

void register_constant(OpRegistry& r) {
  OpDef d;
  d.name = "constant";
  d.traits = Trait::shape_op | Trait::nondifferentiable;
  d.arity(0).attr("value", AttrKind::Tensor);
  d.doc = "A constant tensor, held in the graph.";
  d.infer = [](const InferContext& ctx) {
    return std::vector<TensorType>{ctx.attrs().get_tensor("value").type()};
  };
  r.add(std::move(d));
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  register_constant(r);
}

}  // namespace rlx::detail
