// Inference cases of fused_elementwise: the body is re-inferred with the actual input
// types (symbolic dims too); inputs that do not fit the body and bodies that are not
// regions are errors.
#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {

using Types = std::vector<std::string>;
using Body = std::function<std::vector<Value>(Graph&, const std::vector<Value>&)>;

SubgraphPtr body(const Types& args, const Body& f) {
  auto g = std::make_shared<Graph>("body");
  std::vector<Value> a;
  for (size_t i = 0; i < args.size(); ++i)
    a.push_back(g->input(str_cat("x", i), TensorType::parse(args[i])));
  for (Value v : f(*g, a)) g->output(v);
  return g;
}

InferCase with(InferCase c, SubgraphPtr b) {
  c.subgraphs = {std::move(b)};
  return c;
}

}  // namespace

std::vector<InferCase> region_cases() {
  const char* op = "fused_elementwise";
  constexpr Expect V = Expect::value_error, T = Expect::type_error;
  auto chain = body({"f32[n,4]", "f32[4]"}, [](Graph&, const std::vector<Value>& x) {
    Value y = exp(x[0]) * x[1];
    return std::vector<Value>{y, sum(y, {-1}, true)};
  });
  auto transpose_body = body({"f32[2,3]"}, [](Graph&, const std::vector<Value>& x) {
    return std::vector<Value>{transpose(x[0])};
  });
  auto leading = body({"f32[2,3]"}, [](Graph&, const std::vector<Value>& x) {
    return std::vector<Value>{sum(exp(x[0]), {0})};
  });
  auto reads_reduced = body({"f32[2,3]"}, [](Graph&, const std::vector<Value>& x) {
    return std::vector<Value>{x[0] - sum(x[0], {1}, true)};
  });
  return {
      with(ok(op, {"f32[3,4]", "f32[4]"}, {}, {"f32[3,4]", "f32[3,1]"}), chain),
      with(ok(op, {"f32[batch,4]", "f32[4]"}, {}, {"f32[batch,4]", "f32[batch,1]"}), chain),
      with(bad(op, {"i32[3,4]", "f32[4]"}, {}, T, "expected input 0 of dtype f32"), chain),
      with(bad(op, {"f32[3,5]", "f32[4]"}, {}, V), chain),
      with(bad(op, {"f32[3,4]"}, {}, V, "one arg per input"), chain),
      with(bad(op, {"f32[2,3]"}, {}, V, "got 'transpose'"), transpose_body),
      with(bad(op, {"f32[2,3]"}, {}, V, "over trailing axes"), leading),
      with(bad(op, {"f32[2,3]"}, {}, V, "reduced values to be body outputs only"), reads_reduced),
      bad(op, {"f32[2,3]"}, {}, V, "expected 1 subgraphs, got 0"),
  };
}

}  // namespace rlx::testing
