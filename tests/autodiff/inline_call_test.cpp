// inline_call: a graph (here a gradient graph) emitted into another graph being built, as
// Python's nested function transforms use it; and its typed errors.
#include <gtest/gtest.h>

#include <cmath>

#include "op_tables/consistency.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

// f(x, k) = sum(tanh(x) * k)
std::unique_ptr<Graph> f_graph() {
  auto g = std::make_unique<Graph>("f");
  Value x = g->input("x", TensorType::parse("f64[3]"));
  Value k = g->input("k", TensorType::parse("f64[]"));
  g->output(sum(tanh(x) * k), "y");
  return g;
}

TEST(InlineCall, EmitsTheCalleeBoundToTheCallersValues) {
  auto df = grad(*f_graph(), {.wrt = {"x"}});  // args x, k; output grad.x = tanh'(x) * k
  Graph g("caller");
  Value a = g.input("a", TensorType::parse("f64[3]"));
  Value two = g.constant(Literal::scalar(DType::f64, 2.0));
  // called twice, at a and at a * a: the nodes are copied, not shared
  std::vector<Value> d1 = inline_call(*df, g, {a, two});
  std::vector<Value> d2 = inline_call(*df, g, {a * a, two});
  ASSERT_EQ(d1.size(), 1u);
  EXPECT_EQ(d1[0].type(), TensorType::parse("f64[3]"));
  g.output(d1[0] + d2[0], "out");
  std::vector<double> av = {0.3, -1.2, 2.0};
  Tensor out =
      Session(Device::cpu()).compile(g).run({{"a", tensor_of(DType::f64, {3}, av)}}).at("out");
  std::vector<double> got = values(out);
  auto dtanh = [](double v) { return 1 - std::tanh(v) * std::tanh(v); };
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(got[i], 2 * dtanh(av[i]) + 2 * dtanh(av[i] * av[i]), 1e-12) << i;
}

TEST(InlineCall, TypedErrors) {
  auto f = f_graph();
  Graph g("caller"), other("other");
  Value a = g.input("a", TensorType::parse("f64[3]"));
  Value k = g.input("k", TensorType::parse("f64[]"));
  Value a32 = g.input("a32", TensorType::parse("f32[3]"));
  EXPECT_THROW(inline_call(*f, g, {a}), ValueError);                                    // count
  EXPECT_THROW(inline_call(*f, g, {a32, k}), TypeError);                                // dtype
  EXPECT_THROW(inline_call(*f, g, {other.input("b", TensorType::parse("f64[3]")), k}),  // graph
               ValueError);
  EXPECT_EQ(g.nodes().size(), 0u);  // nothing emitted by the failed calls
}

}  // namespace
}  // namespace rlx::test
