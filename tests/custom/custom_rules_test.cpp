// A downstream op's own vjp / jvp / vmap rules, through the same grad-check harness as
// the core ops: one with a CPU kernel (example.masked_moments), one by decomposition only
// (example.axpby).
#include <gtest/gtest.h>

#include "custom_op.h"
#include "op_tables/gradcheck.h"

namespace rlx::test {
namespace {

void expect_passes(const GradCheck& c) {
  for (const auto& f : run_grad_check(c)) ADD_FAILURE() << grad_label(c) << ": " << f;
}

TEST(CustomRules, MaskedMomentsMatchesFiniteDifferences) {
  example::register_example_ops();
  for (int64_t axis : {-1, 0}) {
    GradCheck c;
    c.op = "example.masked_moments";
    c.inputs = {random_tensor(DType::f64, {3, 4}, 1, -1, 1),
                random_tensor(DType::u8, {3, 4}, 2, 0, 1)};
    c.attrs = {{"axis", axis}, {"scale", 1.5}};
    expect_passes(c);
  }
}

TEST(CustomRules, AxpbyByDecompositionMatchesFiniteDifferences) {
  example::register_example_ops();
  GradCheck c;
  c.op = "example.axpby";
  c.inputs = {random_tensor(DType::f64, {2, 3}, 3, -1, 1),
              random_tensor(DType::f64, {2, 3}, 4, -1, 1)};
  c.attrs = {{"alpha", 0.5}, {"beta", -2.0}};
  expect_passes(c);
}

// Without rules, each transform names the op and itself.
TEST(CustomRules, MissingRulesAreNotSupported) {
  static bool once = [] {
    OpDef d;
    d.name = "example.norules";
    d.arity(1);
    d.infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; };
    OpRegistry::global().add(std::move(d));
    return true;
  }();
  (void)once;
  Graph g;
  Value x = g.input("x", TensorType::parse("f32[3]"));
  g.output(sum(op("example.norules", {x})), "loss");
  auto expect_msg = [](auto f, const char* fragment) {
    try {
      f();
      ADD_FAILURE() << "expected NotSupported";
    } catch (const NotSupported& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("example.norules"), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { grad(g); }, "vjp rule");
  expect_msg([&] { jvp(g); }, "jvp rule");
  expect_msg([&] { vmap(g); }, "vmap rule");
}

}  // namespace
}  // namespace rlx::test
