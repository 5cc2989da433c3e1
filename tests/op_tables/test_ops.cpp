#include "op_tables/test_ops.h"

namespace rlx::testing {

namespace {
using Types = std::vector<TensorType>;
}  // namespace

void register_test_ops() {
  auto& r = OpRegistry::global();
  if (r.contains("test.add")) return;
  OpDef add;
  add.name = "test.add";
  add.arity(2);
  add.infer = [](const InferContext& ctx) {
    if (ctx.input(0) != ctx.input(1))
      ctx.fail("expected equal input types, got ", ctx.input(0).str(), " and ", ctx.input(1).str());
    return Types{ctx.input(0)};
  };
  r.add(std::move(add));

  OpDef split;
  split.name = "test.split";
  split.arity(1)
      .attr("num", AttrKind::Int, int64_t{2})
      .attr("mode", AttrKind::String, "a", {"a", "b"});
  split.infer = [](const InferContext& ctx) {
    int64_t n = ctx.attrs().get_int("num");
    if (n < 0 || n > 16) ctx.fail("expected num in [0, 16], got ", n);
    return Types(size_t(n), ctx.input(0));
  };
  r.add(std::move(split));

  OpDef sink;
  sink.name = "test.sink";
  sink.arity(0, kVariadic);
  sink.infer = [](const InferContext&) { return Types{}; };
  r.add(std::move(sink));

  // Every attribute kind; outputs echo the inputs.
  OpDef attrs;
  attrs.name = "test.attrs";
  attrs.arity(0, kVariadic)
      .attr("i", AttrKind::Int, int64_t{0})
      .attr("f", AttrKind::Float, 0.5)
      .attr("s", AttrKind::String, "x")
      .attr("b", AttrKind::Bool, false)
      .attr("ints", AttrKind::Ints, IntList{})
      .attr("floats", AttrKind::Floats, FloatList{})
      .attr("dt", AttrKind::DType, DType::f32)
      .attr("t", AttrKind::Tensor, Literal())
      .attr("mode", AttrKind::String, "a", {"a", "b\"c"});
  attrs.infer = [](const InferContext& ctx) {
    return Types(ctx.inputs().begin(), ctx.inputs().end());
  };
  r.add(std::move(attrs));
}

}  // namespace rlx::testing
