// fused_elementwise as an op: type inference re-infers the body with the actual input
// types, rejects bodies that are not regions with typed errors, the verifier accepts it,
// decompose inlines the body, and a body the CPU interpreter cannot run is decomposed.
#include <gtest/gtest.h>

#include <cmath>

#include "rlx/rlx.h"
#include "rlx/text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

using Build = std::function<std::vector<Value>(Graph&, const std::vector<Value>&)>;

SubgraphPtr body(const std::vector<TensorType>& args, const Build& build) {
  auto g = std::make_shared<Graph>("body");
  std::vector<Value> a;
  for (size_t i = 0; i < args.size(); ++i) a.push_back(g->input(str_cat("x", i), args[i]));
  for (Value v : build(*g, a)) g->output(v);
  return g;
}

std::vector<Value> apply(Graph& g, const std::vector<Value>& ins, SubgraphPtr b) {
  return g.apply("fused_elementwise", ins, {}, {std::move(b)});
}

TEST(RegionOp, InfersFromTheActualInputTypes) {
  TensorType sym(DType::f32, {Dim::sym("n"), 4});
  auto b = body({sym, {DType::f32, {4}}}, [](Graph&, const std::vector<Value>& x) {
    Value y = exp(x[0]) * x[1];
    return std::vector<Value>{y, sum(y, {-1})};
  });
  Graph g;
  Value x = g.input("x", {DType::f32, {3, 4}});
  Value w = g.input("w", {DType::f32, {4}});
  auto outs = apply(g, {x, w}, b);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].type().str(), "f32[3,4]");
  EXPECT_EQ(outs[1].type().str(), "f32[3]");
  EXPECT_NO_THROW(verify(g));
  // Round trip through the text format.
  EXPECT_EQ(print_graph(*parse_graph(print_graph(g))), print_graph(g));
}

TEST(RegionOp, RejectsInputsThatDoNotFitTheBody) {
  auto b = body({{DType::f32, {4}}}, [](Graph&, const std::vector<Value>& x) {
    return std::vector<Value>{exp(x[0]) + 1.0};
  });
  Graph g;
  Value i32 = g.input("a", {DType::i32, {4}});
  Value f5 = g.input("b", {DType::f32, {5}});
  EXPECT_THROW(apply(g, {i32}, b), TypeError);
  EXPECT_THROW(apply(g, {f5}, b), ValueError);
  EXPECT_THROW(apply(g, {f5, f5}, b), ValueError);
}

TEST(RegionOp, RejectsBodiesThatAreNotRegions) {
  TensorType t(DType::f32, {2, 3});
  Graph g;
  Value x = g.input("x", t);
  auto expect_rejected = [&](const Build& build, const char* what) {
    try {
      apply(g, {x}, body({t}, build));
      ADD_FAILURE() << "expected ValueError for " << what;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("fused_elementwise"), std::string::npos) << e.what();
    }
  };
  expect_rejected(
      [](Graph&, const std::vector<Value>& v) { return std::vector<Value>{transpose(v[0])}; },
      "a transpose");
  expect_rejected(
      [](Graph&, const std::vector<Value>& v) {
        Value s = sum(v[0], {1}, true);
        return std::vector<Value>{v[0] - s};
      },
      "a reduced value read in the body");
  expect_rejected(
      [](Graph&, const std::vector<Value>& v) { return std::vector<Value>{sum(exp(v[0]), {0})}; },
      "a reduction over a leading axis");
  expect_rejected([](Graph&, const std::vector<Value>& v) { return std::vector<Value>{v[0]}; },
                  "an arg as output");
  expect_rejected(
      [](Graph&, const std::vector<Value>& v) {
        Value c = v[0].graph->constant(Literal::full(DType::f32, {2, 3}, 1.0));
        return std::vector<Value>{v[0] + c};
      },
      "a non-scalar constant");
  expect_rejected(
      [](Graph& b, const std::vector<Value>& v) {
        Value r = b.apply1("uniform", {}, {{"shape", IntList{2, 3}}, {"dtype", DType::f32}});
        return std::vector<Value>{v[0] + r};
      },
      "a random op");
}

// decompose inlines the body: a body the CPU interpreter has no step for (here a
// logsumexp reduction) still runs, op by op.
TEST(RegionOp, UnsupportedBodiesAreDecomposed) {
  TensorType t(DType::f32, {2, 3});
  auto b = body({t}, [](Graph&, const std::vector<Value>& v) {
    return std::vector<Value>{op("logsumexp", {v[0] * 2.0}, {{"axes", IntList{-1}}})};
  });
  Graph g;
  Value x = g.input("x", t);
  g.output(apply(g, {x}, b)[0], "y");
  CompileOptions o;
  o.opt_level = 0;
  CompiledGraph cg = Session().compile(g, o);
  EXPECT_EQ(cg.report().count("fused_elementwise", DispatchPath::decomposed), 1);
  Tensor in = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  std::vector<float> y = cg.run({{"x", in}}).at("y").to_vector<float>();
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], std::log(std::exp(0.f) + std::exp(2.f) + std::exp(4.f)), 1e-5);
}

TEST(RegionOp, SupportedBodiesRunNatively) {
  TensorType t(DType::f32, {Dim::sym("n")});
  auto b = body({t}, [](Graph&, const std::vector<Value>& v) {
    return std::vector<Value>{relu(v[0] * 3.0 - 1.0)};
  });
  Graph g;
  Value x = g.input("x", t);
  g.output(apply(g, {x}, b)[0], "y");
  CompiledGraph cg = Session().compile(g);
  EXPECT_EQ(cg.report().count("fused_elementwise", DispatchPath::native), 1);
  for (int64_t n : {1, 5, 3000}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i % 7) - 3;
    std::vector<float> y = cg.run({{"x", Tensor::from_vector(v, {n})}}).at("y").to_vector<float>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[size_t(i)], std::max(0.f, v[size_t(i)] * 3 - 1));
  }
}

}  // namespace
}  // namespace rlx
