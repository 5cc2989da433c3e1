#include "custom_op.h"

#include <mutex>

#include "rlx/rlx.h"

namespace example {

namespace {

std::vector<rlx::TensorType> infer_masked_moments(const rlx::InferContext& ctx) {
  const rlx::TensorType& x = ctx.input(0);
  const rlx::TensorType& mask = ctx.input(1);
  if (!rlx::is_float(x.dtype)) ctx.fail_type("expected a float x, got ", x.str());
  if (rlx::is_float(mask.dtype)) ctx.fail_type("expected a bool or integer mask, got ", mask.str());
  if (x.shape != mask.shape)
    ctx.fail("expected a mask of x's shape ", x.str(), ", got ", mask.str());
  if (x.rank() == 0) ctx.fail("expected x of rank >= 1, got ", x.str());
  int64_t axis = ctx.attrs().get_int("axis");
  if (axis < -x.rank() || axis >= x.rank())
    ctx.fail("expected axis in [", -x.rank(), ", ", x.rank(), "), got ", axis);
  if (axis < 0) axis += x.rank();
  rlx::Shape reduced = x.shape;
  reduced.erase(reduced.begin() + axis);
  return {{x.dtype, reduced}, {rlx::DType::i64, reduced}};
}

}  // namespace

void register_example_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlx::OpDef d;
    d.name = "example.masked_moments";
    d.traits = rlx::Trait::reduction;
    d.arity(2).attr("axis", rlx::AttrKind::Int, -1).attr("scale", rlx::AttrKind::Float, 1.0);
    d.doc = "Scaled mean and count of the elements of x kept by mask along axis.";
    d.infer = infer_masked_moments;
    rlx::OpRegistry::global().add(std::move(d));
  });
}

}  // namespace example
