// The pass manager: registry, pipelines as data, RLX_VERIFY naming the pass that broke a
// graph, RLX_DEBUG=passes, and CompileOptions choosing the pipeline.
#include <gtest/gtest.h>

#include <cstdlib>

#include "passes/rewrite.h"
#include "rlx/rlx.h"
#include "rlx/settings.h"

namespace rlx {
namespace {

// A pass that swaps every add for a sub through the low-level API, leaving types stale
// on purpose when the shapes differ; used to see RLX_VERIFY name it.
std::unique_ptr<Graph> break_types(const Graph& g, const PassContext&) {
  auto out = g.clone();
  for (Node& n : out->mutable_nodes())
    if (n.op_name() == "relu") n.op = &OpRegistry::global().get("sum");
  return out;
}

std::unique_ptr<Graph> add_to_mul(const Graph& g, const PassContext&) {
  return passes::rewrite_nodes(g, [](const Node& n, passes::Rewriter& rw) {
    if (n.op_name() != "add") return false;
    rw.replace(n, {rw.dst().apply1("mul", rw(n.inputs))});
    return true;
  });
}

void register_test_passes() {
  static bool once = [] {
    PassRegistry::global().add({"test.break_types", break_types, "breaks the graph"});
    PassRegistry::global().add({"test.add_to_mul", add_to_mul, "add -> mul"});
    return true;
  }();
  (void)once;
}

std::unique_ptr<Graph> small_graph() {
  auto g = std::make_unique<Graph>();
  Value x = g->input("x", {DType::f32, {4}});
  Value y = g->input("y", {DType::f32, {4}});
  g->output(relu(x + y), "out");
  return g;
}

TEST(Pipeline, RegistryRejectsDuplicatesAndNamesKnownPasses) {
  register_test_passes();
  EXPECT_THROW(PassRegistry::global().add({"test.add_to_mul", add_to_mul, ""}), ValueError);
  EXPECT_THROW(PassRegistry::global().add({"test.nofn", nullptr, ""}), ValueError);
  try {
    PassRegistry::global().get("no_such_pass");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("test.add_to_mul"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no_such_pass"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, DefaultPipelineGrowsWithTheLevel) {
  EXPECT_TRUE(default_pipeline(Device::cpu(), 0).empty());
  auto l1 = default_pipeline(Device::cpu(), 1);
  auto l2 = default_pipeline(Device::cpu(), 2);
  EXPECT_LE(l1.size(), l2.size());
  for (const auto& name : l2) EXPECT_NE(PassRegistry::global().find(name), nullptr) << name;
}

TEST(Pipeline, CompileOptionsPickAndDisablePasses) {
  register_test_passes();
  CompileOptions o;
  o.passes = std::vector<std::string>{"test.add_to_mul", "dce"};
  o.disable_passes = {"dce"};
  EXPECT_EQ(compile_pipeline(Device::cpu(), o), std::vector<std::string>{"test.add_to_mul"});

  auto g = small_graph();
  CompiledGraph cg = Session().compile(*g, o);
  ASSERT_EQ(cg.pass_stats().size(), 1u);
  EXPECT_TRUE(cg.pass_stats()[0].changed);
  bool has_mul = false;
  for (const Node& n : cg.lowered().nodes()) has_mul |= n.op_name() == "mul";
  EXPECT_TRUE(has_mul);
  auto out = cg.run({{"x", Tensor::from_vector<float>({1, 2, -3, 4}, {4})},
                     {"y", Tensor::from_vector<float>({2, 2, 2, -1}, {4})}});
  EXPECT_EQ(out.at("out").to_vector<float>(), (std::vector<float>{2, 4, 0, 0}));
}

TEST(Pipeline, UnknownPassInOptionsIsAValueError) {
  CompileOptions o;
  o.passes = std::vector<std::string>{"no_such_pass"};
  auto g = small_graph();
  EXPECT_THROW(Session().compile(*g, o), ValueError);
}

TEST(Pipeline, VerifyEnvNamesThePassThatBrokeTheGraph) {
  register_test_passes();
  auto g = small_graph();
  std::vector<std::string> names{"test.break_types"};
  settings().verify = true;
  try {
    run_pipeline(*g, names);
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("test.break_types"), std::string::npos) << e.what();
  }
  settings().verify = false;
  EXPECT_NO_THROW(run_pipeline(*g, names));  // unverified, the broken graph goes through
}

TEST(Pipeline, DebugEnvPrintsEveryPassWithNodeCounts) {
  register_test_passes();
  auto g = small_graph();
  std::vector<std::string> names{"test.add_to_mul"};
  settings().debug = "passes";
  testing::internal::CaptureStderr();
  PipelineResult r = run_pipeline(*g, names);
  std::string err = testing::internal::GetCapturedStderr();
  settings().debug.clear();
  EXPECT_NE(err.find("test.add_to_mul"), std::string::npos) << err;
  EXPECT_NE(err.find("total"), std::string::npos) << err;
  ASSERT_EQ(r.stats.size(), 1u);
  EXPECT_EQ(r.stats[0].nodes_before, 2u);
  EXPECT_EQ(r.stats[0].nodes_after, 2u);
}

}  // namespace
}  // namespace rlx
