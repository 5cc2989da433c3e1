// Dead-code elimination: what goes (nodes no output needs), what stays (args, side
// effects and what they read, every output of a node one of whose outputs is used).
#include <gtest/gtest.h>

#include <chrono>

#include "op_tables/pass_check.h"
#include "op_tables/pass_graphs.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using test::expect_pass;

TEST(Dce, DropsNodesNoOutputNeeds) {
  expect_pass("dce", R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      %b = neg(%a) : f32[4]
      %c = log(%x) : f32[4]
      return out=%c
    })",
              R"(graph main(%x: f32[4]) {
      %c = log(%x) : f32[4]
      return out=%c
    })");
}

TEST(Dce, DropsWholeDeadChainsAndDeadConstants) {
  expect_pass("dce", R"(graph main(%x: f32[2,3], %y: f32[3]) {
      %k = constant() {value=tensor<f32[]>[2.0]} : f32[]
      %a = mul(%x, %k) : f32[2,3]
      %b = add(%a, %y) : f32[2,3]
      %c = sum(%b) {axes=[0]} : f32[3]
      %d = tanh(%x) : f32[2,3]
      return out=%d
    })",
              R"(graph main(%x: f32[2,3], %y: f32[3]) {
      %d = tanh(%x) : f32[2,3]
      return out=%d
    })");
}

TEST(Dce, LiveGraphIsUnchanged) {
  expect_pass("dce", R"(graph main(%x: f32[4], %unused: i32[2]) {
      %a = exp(%x) : f32[4]
      %b = neg(%a) : f32[4]
      return out=%b, again=%a
    })",
              "");
}

TEST(Dce, KeepsEveryOutputOfAMultiOutputNode) {
  expect_pass("dce", R"(graph main(%x: f32[6]) {
      %a, %b, %c = split(%x) {num=3} : f32[2], f32[2], f32[2]
      %d = exp(%b) : f32[2]
      %e = neg(%a) : f32[2]
      return out=%d
    })",
              R"(graph main(%x: f32[6]) {
      %a, %b, %c = split(%x) {num=3} : f32[2], f32[2], f32[2]
      %d = exp(%b) : f32[2]
      return out=%d
    })");
}

TEST(Dce, OutputReadingAnArgKeepsNothingElse) {
  expect_pass("dce", R"(graph main(%x: f32[batch,4]) {
      %a = exp(%x) : f32[batch,4]
      return out=%x
    })",
              R"(graph main(%x: f32[batch,4]) {
      return out=%x
    })");
}

TEST(Dce, KeepsSideEffectsAndWhatTheyRead) {
  test::register_effect_op();
  expect_pass("dce", R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      %b = neg(%a) : f32[4]
      test.effect(%b)
      %c = log(%x) : f32[4]
      return out=%c
    })",
              "");
}

TEST(Dce, DropsUnusedRandomDrawsButKeepsUsedOnes) {
  expect_pass("dce", R"(graph main(%x: f32[4]) {
      %a = uniform() {shape=[4], seed=1} : f32[4]
      %b = normal() {shape=[4], seed=2} : f32[4]
      %c = add(%x, %b) : f32[4]
      return out=%c
    })",
              R"(graph main(%x: f32[4]) {
      %b = normal() {shape=[4], seed=2} : f32[4]
      %c = add(%x, %b) : f32[4]
      return out=%c
    })");
}

const char* kCond = R"(graph main(%p: bool[], %x: f32[4]) {
      %r = cond(%p, %x) [graph then(%x: f32[4]) {
        %0 = exp(%x) : f32[4]
        %EFFECT
        return out=%0
      }, graph else(%x: f32[4]) {
        return out=%x
      }] : f32[4]
      %y = neg(%x) : f32[4]
      return out=%y
    })";

std::string cond_graph(const char* effect) {
  std::string s = kCond;
  s.replace(s.find("%EFFECT"), 7, effect);
  return s;
}

TEST(Dce, DropsDeadControlFlowUnlessItsBodyHasASideEffect) {
  test::register_effect_op();
  expect_pass("dce", cond_graph(""), R"(graph main(%p: bool[], %x: f32[4]) {
      %y = neg(%x) : f32[4]
      return out=%y
    })");
  expect_pass("dce", cond_graph("test.effect(%0)"), "");
}

TEST(Dce, GraphWithoutOutputsKeepsOnlySideEffects) {
  test::register_effect_op();
  expect_pass("dce", R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      %b = neg(%x) : f32[4]
      test.effect(%a)
      return
    })",
              R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      test.effect(%a)
      return
    })",
              {.compare_outputs = false});
}

// The GPT train step is already pruned by value_and_grad: dce finds nothing, fast. With
// a dead branch hung on it, exactly that branch goes.
TEST(Dce, TrainGraphOfTheDemoTransformer) {
  auto g = test::gpt_train_graph();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_pass("dce", *g), nullptr);
  Value loss = g->outputs()[0].value;
  Value dead = exp(loss);
  for (int i = 0; i < 10; ++i) dead = dead * loss;
  auto out = run_pass("dce", *g);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->nodes().size(), g->nodes().size() - 11);
  EXPECT_LT(ms, 500) << g->nodes().size() << " nodes";
  CompileOptions o;
  o.passes = std::vector<std::string>{"dce"};
  test::expect_same_outputs(*g, o, 1, 1e-5, 1e-6, 0, 2);
}

}  // namespace
}  // namespace rlx
