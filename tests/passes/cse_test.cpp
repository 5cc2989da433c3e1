// Common-subexpression elimination: equal nodes and equal constants merge (commutative
// ops in either order); different attributes, random draws, side effects, other
// subgraphs and checkpoint boundaries keep nodes apart.
#include <gtest/gtest.h>

#include <chrono>

#include "op_tables/pass_check.h"
#include "op_tables/pass_graphs.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using test::expect_pass;

TEST(Cse, MergesEqualNodes) {
  expect_pass("cse", R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      %b = exp(%x) : f32[4]
      %c = add(%a, %b) : f32[4]
      return out=%c
    })",
              R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      %c = add(%a, %a) : f32[4]
      return out=%c
    })");
}

TEST(Cse, MergesChainsInOneRun) {
  expect_pass("cse", R"(graph main(%x: f32[2,3]) {
      %a = exp(%x) : f32[2,3]
      %b = sum(%a) {axes=[1]} : f32[2]
      %c = exp(%x) : f32[2,3]
      %d = sum(%c) {axes=[1]} : f32[2]
      %e = sub(%b, %d) : f32[2]
      return out=%e, again=%d
    })",
              R"(graph main(%x: f32[2,3]) {
      %a = exp(%x) : f32[2,3]
      %b = sum(%a) {axes=[1]} : f32[2]
      %e = sub(%b, %b) : f32[2]
      return out=%e, again=%b
    })");
}

TEST(Cse, CommutativeOpsMatchInEitherOrder) {
  expect_pass("cse", R"(graph main(%x: f32[4], %y: f32[4]) {
      %a = mul(%x, %y) : f32[4]
      %b = mul(%y, %x) : f32[4]
      %c = sub(%a, %b) : f32[4]
      return out=%c
    })",
              R"(graph main(%x: f32[4], %y: f32[4]) {
      %a = mul(%x, %y) : f32[4]
      %c = sub(%a, %a) : f32[4]
      return out=%c
    })");
  // sub is not commutative.
  expect_pass("cse", R"(graph main(%x: f32[4], %y: f32[4]) {
      %a = sub(%x, %y) : f32[4]
      %b = sub(%y, %x) : f32[4]
      %c = mul(%a, %b) : f32[4]
      return out=%c
    })",
              "");
}

TEST(Cse, DifferentAttributesStayApart) {
  expect_pass("cse", R"(graph main(%x: f32[3,3]) {
      %a = sum(%x) {axes=[0]} : f32[3]
      %b = sum(%x) {axes=[1]} : f32[3]
      %c = sum(%x) {axes=[0], keepdims=true} : f32[1,3]
      %d = pad(%x) {pads=[1, 0, 0, 0], value=0.0} : f32[4,3]
      %e = pad(%x) {pads=[1, 0, 0, 0], value=-0.0} : f32[4,3]
      return a=%a, b=%b, c=%c, d=%d, e=%e
    })",
              "");
}

TEST(Cse, EqualConstantsMergeByDtypeShapeAndBytes) {
  expect_pass("cse", R"(graph main(%x: f32[2]) {
      %a = constant() {value=tensor<f32[2]>[1.0, 2.0]} : f32[2]
      %b = constant() {value=tensor<f32[2]>[1.0, 2.0]} : f32[2]
      %c = add(%x, %a) : f32[2]
      %d = add(%c, %b) : f32[2]
      return out=%d
    })",
              R"(graph main(%x: f32[2]) {
      %a = constant() {value=tensor<f32[2]>[1.0, 2.0]} : f32[2]
      %c = add(%x, %a) : f32[2]
      %d = add(%c, %a) : f32[2]
      return out=%d
    })");
  expect_pass("cse", R"(graph main() {
      %a = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %b = constant() {value=tensor<f32[]>[-0.0]} : f32[]
      %c = constant() {value=tensor<f64[]>[0.0]} : f64[]
      %d = constant() {value=tensor<f32[1]>[0.0]} : f32[1]
      %e = constant() {value=tensor<i32[]>[0]} : i32[]
      %f = constant() {value=tensor<f32[]>[nan]} : f32[]
      %g = constant() {value=tensor<f32[]>[nan]} : f32[]
      return a=%a, b=%b, c=%c, d=%d, e=%e, f=%f, g=%g
    })",
              R"(graph main() {
      %a = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %b = constant() {value=tensor<f32[]>[-0.0]} : f32[]
      %c = constant() {value=tensor<f64[]>[0.0]} : f64[]
      %d = constant() {value=tensor<f32[1]>[0.0]} : f32[1]
      %e = constant() {value=tensor<i32[]>[0]} : i32[]
      %f = constant() {value=tensor<f32[]>[nan]} : f32[]
      return a=%a, b=%b, c=%c, d=%d, e=%e, f=%f, g=%f
    })");
}

TEST(Cse, MultiOutputNodesMergeWhole) {
  expect_pass("cse", R"(graph main(%x: f32[6]) {
      %a, %b = split(%x) {num=2} : f32[3], f32[3]
      %c, %d = split(%x) {num=2} : f32[3], f32[3]
      %e = add(%a, %d) : f32[3]
      %f = add(%c, %b) : f32[3]
      return e=%e, f=%f
    })",
              R"(graph main(%x: f32[6]) {
      %a, %b = split(%x) {num=2} : f32[3], f32[3]
      %e = add(%a, %b) : f32[3]
      return e=%e, f=%e
    })");
}

TEST(Cse, SymbolicShapesAndIntegerDtypesMergeToo) {
  expect_pass("cse", R"(graph main(%x: i32[batch,?]) {
      %a = neg(%x) : i32[batch,?]
      %b = neg(%x) : i32[batch,?]
      %c = bitwise_and(%a, %b) : i32[batch,?]
      return out=%c
    })",
              R"(graph main(%x: i32[batch,?]) {
      %a = neg(%x) : i32[batch,?]
      %c = bitwise_and(%a, %a) : i32[batch,?]
      return out=%c
    })");
}

TEST(Cse, NeverMergesRandomDrawsOrSideEffects) {
  test::register_effect_op();
  expect_pass("cse", R"(graph main(%x: f32[4]) {
      %a = uniform() {shape=[4], seed=1} : f32[4]
      %b = uniform() {shape=[4], seed=1} : f32[4]
      test.effect(%x)
      test.effect(%x)
      %c = add(%a, %b) : f32[4]
      return out=%c
    })",
              "");
}

TEST(Cse, NodesWithSubgraphsMergeOnlyForTheSameSubgraph) {
  auto body = std::make_shared<Graph>("then");
  body->output(exp(body->input("x", {DType::f32, {4}})), "out");
  auto other = std::make_shared<Graph>("else");
  other->output(other->input("x", {DType::f32, {4}}), "out");
  auto copy = std::make_shared<Graph>("then");
  copy->output(exp(copy->input("x", {DType::f32, {4}})), "out");

  Graph g;
  Value p = g.input("p", {DType::boolean, {}});
  Value x = g.input("x", {DType::f32, {4}});
  Value a = g.apply("cond", {p, x}, {}, {body, other})[0];
  Value b = g.apply("cond", {p, x}, {}, {body, other})[0];
  Value c = g.apply("cond", {p, x}, {}, {copy, other})[0];
  g.output(a + b, "ab");
  g.output(c, "c");
  auto out = run_pass("cse", g);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(test::count_op(*out, "cond"), 2u);  // a and b merged; c has its own body
  test::expect_same_outputs(g, *out);

  // A body with a side effect keeps its nodes apart.
  test::register_effect_op();
  auto loud = std::make_shared<Graph>("then");
  Value lx = loud->input("x", {DType::f32, {4}});
  loud->apply("test.effect", {lx});
  loud->output(lx, "out");
  Graph h;
  Value hp = h.input("p", {DType::boolean, {}});
  Value hx = h.input("x", {DType::f32, {4}});
  Value d = h.apply("cond", {hp, hx}, {}, {loud, other})[0];
  Value e = h.apply("cond", {hp, hx}, {}, {loud, other})[0];
  h.output(d + e, "de");
  EXPECT_EQ(run_pass("cse", h), nullptr);
}

TEST(Cse, DoesNotMergeAcrossACheckpoint) {
  expect_pass("cse", R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      %b = exp(%x) : f32[4]
      %c = checkpoint(%a) : f32[4]
      %d = exp(%x) : f32[4]
      %e = checkpoint(%a) : f32[4]
      %f = add(%b, %d) : f32[4]
      %g = add(%c, %e) : f32[4]
      return f=%f, g=%g
    })",
              R"(graph main(%x: f32[4]) {
      %a = exp(%x) : f32[4]
      %c = checkpoint(%a) : f32[4]
      %d = exp(%x) : f32[4]
      %e = checkpoint(%a) : f32[4]
      %f = add(%a, %d) : f32[4]
      %g = add(%c, %e) : f32[4]
      return f=%f, g=%g
    })");
}

// grad with Remat::checkpoints recomputes each segment before its backward; CSE must keep
// those recomputations rather than fold them into the stored forward values.
TEST(Cse, KeepsTheRecomputationsOfRematerialisation) {
  Graph f;
  Value h = f.input("x", {DType::f32, {4, 8}});
  for (int i = 0; i < 3; ++i) {
    h = tanh(matmul(h, f.param(str_cat("w", i), {DType::f32, {8, 8}})));
    if (i < 2) h = op("checkpoint", {h});
  }
  f.output(sum(h * h), "loss");
  auto plain = grad(f, {});
  auto remat = grad(f, {.remat = Remat::checkpoints});
  // Segments 0 and 1 are recomputed (the last one is still live): two more of each.
  ASSERT_EQ(test::count_op(*plain, "tanh"), 3u);
  ASSERT_EQ(test::count_op(*remat, "tanh"), 5u);
  size_t matmuls = test::count_op(*remat, "matmul");

  auto out = run_pass("cse", *remat);
  const Graph& r = out ? *out : *remat;
  EXPECT_EQ(test::count_op(r, "tanh"), 5u);
  EXPECT_EQ(test::count_op(r, "matmul"), matmuls);
  test::expect_same_outputs(*remat, r);

  // The same duplication without checkpoints is merged.
  Graph dup;
  Value x = dup.input("x", {DType::f32, {4, 8}});
  Value w = dup.param("w", {DType::f32, {8, 8}});
  dup.output(tanh(matmul(x, w)) + tanh(matmul(x, w)), "y");
  auto merged = run_pass("cse", dup);
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(test::count_op(*merged, "tanh"), 1u);
}

TEST(Cse, SecondRunChangesNothing) {
  auto g = test::gpt_train_graph();
  auto once = run_pass("cse", *g);
  ASSERT_NE(once, nullptr);
  EXPECT_EQ(run_pass("cse", *once), nullptr);
}

TEST(Cse, TrainGraphOfTheDemoTransformer) {
  for (Remat remat : {Remat::none, Remat::checkpoints}) {
    auto g = test::gpt_train_graph({.remat = remat});
    auto t0 = std::chrono::steady_clock::now();
    auto out = run_pass("cse", *g);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_NE(out, nullptr);
    EXPECT_LT(out->nodes().size(), g->nodes().size());
    EXPECT_LT(ms, 500) << g->nodes().size() << " nodes";
    // Recomputed attention and gelu survive under remat.
    EXPECT_EQ(test::count_op(*out, "attention"), test::count_op(*g, "attention"));
    CompileOptions o;
    o.passes = std::vector<std::string>{"cse"};
    test::expect_same_outputs(*g, o, 1, 1e-5, 1e-6, 0, 2);
  }
}

}  // namespace
}  // namespace rlx
