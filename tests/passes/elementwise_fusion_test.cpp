// elementwise_fusion: text before / after pairs (each also run and compared), regions that
// must not form, autodiff and vmap through regions, the default pipeline, and the pass's
// cost on a large graph.
#include <gtest/gtest.h>

#include <chrono>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

using test::expect_pass;
using test::expect_same_outputs;

constexpr const char* kPass = "elementwise_fusion";

int count_op(const Graph& g, std::string_view op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_name() == op;
  return n;
}

TEST(ElementwiseFusion, ChainWithBroadcastRowAndScalarConstant) {
  expect_pass(kPass, R"(graph main(%x: f32[4,8], %a: f32[8]) {
    %c = constant() {value=tensor<f32[]>[0.5]} : f32[]
    %0 = mul(%x, %a) : f32[4,8]
    %1 = add(%0, %c) : f32[4,8]
    %2 = sigmoid(%1) : f32[4,8]
    %3 = mul(%2, %x) : f32[4,8]
    %4 = sub(%3, %c) : f32[4,8]
    %5 = relu(%4) : f32[4,8]
    return y=%5
  })",
              R"(graph main(%x: f32[4,8], %a: f32[8]) {
    %0 = fused_elementwise(%x, %a) [
      graph body(%x0: f32[4,8], %x1: f32[8]) {
        %0 = mul(%x0, %x1) : f32[4,8]
        %1 = constant() {value=tensor<f32[]>[0.5]} : f32[]
        %2 = add(%0, %1) : f32[4,8]
        %3 = sigmoid(%2) : f32[4,8]
        %4 = mul(%3, %x0) : f32[4,8]
        %5 = sub(%4, %1) : f32[4,8]
        %6 = relu(%5) : f32[4,8]
        return out0=%6
      }
    ] : f32[4,8]
    return y=%0
  })");
}

// A value also read outside the region (here by a matmul and as a graph output) becomes
// another output of the region.
TEST(ElementwiseFusion, ValuesReadOutsideBecomeOutputs) {
  expect_pass(kPass, R"(graph main(%x: f32[4,4], %w: f32[4,4]) {
    %0 = exp(%x) : f32[4,4]
    %1 = mul(%0, %x) : f32[4,4]
    %2 = matmul(%1, %w) : f32[4,4]
    %3 = neg(%1) : f32[4,4]
    return a=%2, b=%3, c=%0
  })",
              R"(graph main(%x: f32[4,4], %w: f32[4,4]) {
    %0, %1, %2 = fused_elementwise(%x) [
      graph body(%x0: f32[4,4]) {
        %0 = exp(%x0) : f32[4,4]
        %1 = mul(%0, %x0) : f32[4,4]
        %2 = neg(%1) : f32[4,4]
        return out0=%0, out1=%1, out2=%2
      }
    ] : f32[4,4], f32[4,4], f32[4,4]
    %3 = matmul(%1, %w) : f32[4,4]
    return a=%3, b=%2, c=%0
  })");
}

TEST(ElementwiseFusion, TrailingReductionsEndTheRegion) {
  expect_pass(kPass, R"(graph main(%x: f32[3,5], %y: f32[3,5]) {
    %0 = sub(%x, %y) : f32[3,5]
    %1 = square(%0) : f32[3,5]
    %2 = mean(%1) {axes=[-1], keepdims=true} : f32[3,1]
    %3 = reduce_max(%0) {axes=[1], keepdims=false} : f32[3]
    return m=%2, r=%3
  })",
              R"(graph main(%x: f32[3,5], %y: f32[3,5]) {
    %0, %1 = fused_elementwise(%x, %y) [
      graph body(%x0: f32[3,5], %x1: f32[3,5]) {
        %0 = sub(%x0, %x1) : f32[3,5]
        %1 = square(%0) : f32[3,5]
        %2 = mean(%1) {axes=[-1], keepdims=true} : f32[3,1]
        %3 = reduce_max(%0) {axes=[1], keepdims=false} : f32[3]
        return out0=%2, out1=%3
      }
    ] : f32[3,1], f32[3]
    return m=%0, r=%1
  })");
}

// A reduction over leading axes is not a region's end; a reduced value is not read inside.
TEST(ElementwiseFusion, NonTrailingReductionAndReducedValuesStayOutside) {
  expect_pass(kPass, R"(graph main(%x: f32[3,5]) {
    %0 = exp(%x) : f32[3,5]
    %1 = mul(%0, %x) : f32[3,5]
    %2 = sum(%1) {axes=[0], keepdims=false} : f32[5]
    %3 = sum(%1) {axes=[1], keepdims=true} : f32[3,1]
    %4 = sub(%1, %3) : f32[3,5]
    return a=%2, b=%4
  })",
              R"(graph main(%x: f32[3,5]) {
    %0, %1 = fused_elementwise(%x) [
      graph body(%x0: f32[3,5]) {
        %0 = exp(%x0) : f32[3,5]
        %1 = mul(%0, %x0) : f32[3,5]
        %2 = sum(%1) {axes=[1], keepdims=true} : f32[3,1]
        return out0=%1, out1=%2
      }
    ] : f32[3,5], f32[3,1]
    %2 = sum(%0) {axes=[0], keepdims=false} : f32[5]
    %3 = sub(%0, %1) : f32[3,5]
    return a=%2, b=%3
  })");
}

TEST(ElementwiseFusion, SymbolicShapes) {
  expect_pass(kPass, R"(graph main(%x: f32[batch,8], %b: f32[8]) {
    %0 = add(%x, %b) : f32[batch,8]
    %1 = tanh(%0) : f32[batch,8]
    %2 = sum(%1) {axes=[-1], keepdims=false} : f32[batch]
    return y=%1, s=%2
  })",
              R"(graph main(%x: f32[batch,8], %b: f32[8]) {
    %0, %1 = fused_elementwise(%x, %b) [
      graph body(%x0: f32[batch,8], %x1: f32[8]) {
        %0 = add(%x0, %x1) : f32[batch,8]
        %1 = tanh(%0) : f32[batch,8]
        %2 = sum(%1) {axes=[-1], keepdims=false} : f32[batch]
        return out0=%1, out1=%2
      }
    ] : f32[batch,8], f32[batch]
    return y=%0, s=%1
  })");
}

// Two chains that meet are one region; broadcast_to of an input is read in place.
TEST(ElementwiseFusion, MergesChainsAndCopiesBroadcastsIn) {
  expect_pass(kPass, R"(graph main(%x: f32[2,3], %y: f32[2,3], %b: f32[3]) {
    %0 = exp(%x) : f32[2,3]
    %1 = log1p(%0) : f32[2,3]
    %2 = abs(%y) : f32[2,3]
    %3 = sqrt(%2) : f32[2,3]
    %4 = broadcast_to(%b) {shape=[2,3]} : f32[2,3]
    %5 = mul(%1, %3) : f32[2,3]
    %6 = add(%5, %4) : f32[2,3]
    return z=%6
  })",
              R"(graph main(%x: f32[2,3], %y: f32[2,3], %b: f32[3]) {
    %0 = fused_elementwise(%x, %y, %b) [
      graph body(%x0: f32[2,3], %x1: f32[2,3], %x2: f32[3]) {
        %0 = exp(%x0) : f32[2,3]
        %1 = log1p(%0) : f32[2,3]
        %2 = abs(%x1) : f32[2,3]
        %3 = sqrt(%2) : f32[2,3]
        %4 = mul(%1, %3) : f32[2,3]
        %5 = broadcast_to(%x2) {shape=[2,3]} : f32[2,3]
        %6 = add(%4, %5) : f32[2,3]
        return out0=%6
      }
    ] : f32[2,3]
    return z=%0
  })");
}

TEST(ElementwiseFusion, IntegerAndBoolRegions) {
  expect_pass(kPass, R"(graph main(%x: i32[6], %y: i32[6], %p: bool[6]) {
    %0 = mul(%x, %y) : i32[6]
    %1 = add(%0, %x) : i32[6]
    %2 = gt(%1, %y) : bool[6]
    %3 = logical_and(%2, %p) : bool[6]
    %4 = select(%3, %1, %y) : i32[6]
    return z=%4
  })",
              R"(graph main(%x: i32[6], %y: i32[6], %p: bool[6]) {
    %0 = fused_elementwise(%x, %y, %p) [
      graph body(%x0: i32[6], %x1: i32[6], %x2: bool[6]) {
        %0 = mul(%x0, %x1) : i32[6]
        %1 = add(%0, %x0) : i32[6]
        %2 = gt(%1, %x1) : bool[6]
        %3 = logical_and(%2, %x2) : bool[6]
        %4 = select(%3, %1, %x1) : i32[6]
        return out0=%4
      }
    ] : i32[6]
    return z=%0
  })");
}

// b = a2 + matmul(a2, w) cannot join a2's region: the matmul between would make a cycle.
TEST(ElementwiseFusion, NoCycleThroughAnOutsideNode) {
  expect_pass(kPass, R"(graph main(%x: f32[4,4], %w: f32[4,4]) {
    %0 = exp(%x) : f32[4,4]
    %1 = mul(%0, %x) : f32[4,4]
    %2 = matmul(%1, %w) : f32[4,4]
    %3 = add(%1, %2) : f32[4,4]
    %4 = tanh(%3) : f32[4,4]
    return y=%4
  })",
              R"(graph main(%x: f32[4,4], %w: f32[4,4]) {
    %0 = fused_elementwise(%x) [
      graph body(%x0: f32[4,4]) {
        %0 = exp(%x0) : f32[4,4]
        %1 = mul(%0, %x0) : f32[4,4]
        return out0=%1
      }
    ] : f32[4,4]
    %1 = matmul(%0, %w) : f32[4,4]
    %2 = fused_elementwise(%0, %1) [
      graph body(%x0: f32[4,4], %x1: f32[4,4]) {
        %0 = add(%x0, %x1) : f32[4,4]
        %1 = tanh(%0) : f32[4,4]
        return out0=%1
      }
    ] : f32[4,4]
    return y=%2
  })");
}

// Two chains joined by a node must not merge when one feeds the other through an outside
// node (the merged region would need its own output).
TEST(ElementwiseFusion, NoMergeAcrossAnOutsidePath) {
  const char* g = R"(graph main(%x: f32[4,4], %w: f32[4,4]) {
    %0 = exp(%x) : f32[4,4]
    %1 = matmul(%0, %w) : f32[4,4]
    %2 = neg(%1) : f32[4,4]
    %3 = mul(%0, %2) : f32[4,4]
    return y=%3
  })";
  std::unique_ptr<Graph> out = run_pass(kPass, *parse_graph(g), test::session_like({}));
  ASSERT_NE(out, nullptr);
  EXPECT_NO_THROW(verify(*out)) << print_graph(*out);
  EXPECT_EQ(count_op(*out, "fused_elementwise"), 1) << print_graph(*out);
  EXPECT_EQ(count_op(*out, "matmul"), 1);
  expect_same_outputs(*parse_graph(g), *out);
}

TEST(ElementwiseFusion, SingleOpsAreLeftAlone) {
  expect_pass(kPass, R"(graph main(%x: f32[4], %w: f32[4,4]) {
    %0 = exp(%x) : f32[4]
    %1 = reshape(%0) {shape=[1,4]} : f32[1,4]
    %2 = matmul(%1, %w) : f32[1,4]
    %3 = relu(%2) : f32[1,4]
    return y=%3
  })",
              "");
}

// A random op never joins: its draw is not duplicated or moved into a region.
TEST(ElementwiseFusion, RandomOpsStayOutside) {
  const char* g = R"(graph main(%x: f32[8]) {
    %0 = uniform() {dtype=f32, high=1.0, low=0.0, seed=7, shape=[8]} : f32[8]
    %1 = mul(%0, %x) : f32[8]
    %2 = add(%1, %0) : f32[8]
    return y=%2
  })";
  std::unique_ptr<Graph> out = run_pass(kPass, *parse_graph(g), test::session_like({}));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(count_op(*out, "uniform"), 1);
  EXPECT_EQ(count_op(*out, "fused_elementwise"), 1);
  EXPECT_EQ(out->nodes()[0].op_name(), "uniform");
}

// Different shapes are different regions: a value broadcast up to a larger shape starts a
// new one, and a node whose shape has an unknown dim never joins.
TEST(ElementwiseFusion, RegionsKeepOneShape) {
  expect_pass(kPass, R"(graph main(%x: f32[3], %y: f32[2,3]) {
    %0 = exp(%x) : f32[3]
    %1 = mul(%y, %0) : f32[2,3]
    return y=%1
  })",
              "");
  expect_pass(kPass, R"(graph main(%x: f32[a], %y: f32[b]) {
    %0 = add(%x, %y) : f32[?]
    %1 = exp(%0) : f32[?]
    return y=%1
  })",
              "", {.compare_outputs = false});
}

TEST(ElementwiseFusion, RunningTwiceChangesNothing) {
  const char* g = R"(graph main(%x: f32[4]) {
    %0 = exp(%x) : f32[4]
    %1 = mul(%0, %x) : f32[4]
    return y=%1
  })";
  std::unique_ptr<Graph> once = run_pass(kPass, *parse_graph(g), test::session_like({}));
  ASSERT_NE(once, nullptr);
  EXPECT_EQ(run_pass(kPass, *once, test::session_like({})), nullptr);
}

// ---- through the transforms -----------------------------------------------------------

std::unique_ptr<Graph> model() {
  auto g = std::make_unique<Graph>();
  Value x = g->input("x", {DType::f32, {4, 6}});
  Value w = g->param("w", {DType::f32, {6}});
  Value b = g->param("b", {DType::f32, {6}});
  Value h = sigmoid(x * w + b) * x;
  Value y = h - op("reduce_max", {h}, {{"axes", IntList{-1}}, {"keepdims", true}});
  g->output(sum(y * y), "loss");
  return g;
}

std::unique_ptr<Graph> fused(const Graph& g) {
  std::unique_ptr<Graph> out = run_pass(kPass, g, test::session_like({}));
  if (!out) ADD_FAILURE() << "expected the pass to fuse:\n" << print_graph(g);
  return out ? std::move(out) : g.clone();
}

TEST(ElementwiseFusion, GradOfFusedEqualsGradOfUnfused) {
  auto g = model();
  auto f = fused(*g);
  EXPECT_GE(count_op(*f, "fused_elementwise"), 1);
  auto grad_then_fuse = fused(*grad(*g));
  auto fuse_then_grad = grad(*f);
  EXPECT_NO_THROW(verify(*fuse_then_grad));
  expect_same_outputs(*grad_then_fuse, *fuse_then_grad, 3, 1e-4, 1e-5);
  expect_same_outputs(*grad(*g), *fuse_then_grad, 3, 1e-4, 1e-5);
}

TEST(ElementwiseFusion, JvpAndHvpThroughARegion) {
  auto g = model();
  auto f = fused(*g);
  expect_same_outputs(*jvp(*g, {"w"}), *jvp(*f, {"w"}), 4, 1e-4, 1e-5);
  expect_same_outputs(*hvp(*g), *hvp(*f), 5, 1e-4, 1e-5);
}

TEST(ElementwiseFusion, VmapThroughARegion) {
  auto g = model();
  auto f = fused(*g);
  VmapOptions o;
  o.in_axes = {{"x", 1}};
  o.size = Dim(3);
  auto batched = vmap(*f, o);
  EXPECT_NO_THROW(verify(*batched));
  expect_same_outputs(*vmap(*g, o), *batched, 6, 1e-4, 1e-5);
  // And fused again after batching.
  expect_same_outputs(*vmap(*g, o), *fused(*batched), 6, 1e-4, 1e-5);
}

// ---- in the pipeline ---------------------------------------------------------------------

TEST(ElementwiseFusion, DefaultPipelineFusesAndRunsNatively) {
  auto g = model();
  CompileOptions o;
  o.opt_level = 2;
  CompiledGraph cg = Session().compile(*g, o);
  EXPECT_GE(count_op(cg.lowered(), "fused_elementwise"), 1) << print_graph(cg.lowered());
  EXPECT_EQ(cg.report().count("fused_elementwise", DispatchPath::native),
            count_op(cg.lowered(), "fused_elementwise"));
  expect_same_outputs(*g, o, 7, 1e-4, 1e-5);
  auto train = value_and_grad(*g);
  expect_same_outputs(*train, o, 8, 1e-4, 1e-5);
}

// A device whose kernels have no fused kernel gets no regions.
TEST(ElementwiseFusion, NothingWithoutAFusedKernel) {
  KernelRegistry empty;
  PassContext ctx;
  ctx.kernels = &empty;
  auto g = model();
  EXPECT_EQ(run_pass(kPass, *g, ctx), nullptr);
}

// Near-linear: a long train-step-like graph (chains between matmuls, each chain's values
// read again much later) goes through quickly.
TEST(ElementwiseFusion, LargeGraphIsFast) {
  Graph g;
  Value x = g.input("x", {DType::f32, {8, 8}});
  Value w = g.param("w", {DType::f32, {8, 8}});
  std::vector<Value> keep;
  Value h = x;
  for (int i = 0; i < 1000; ++i) {
    h = matmul(h, w);
    Value a = sigmoid(h) * h + 1.0;
    keep.push_back(a);
    h = tanh(a - h) * 0.5;
  }
  Value acc = keep[0];
  for (size_t i = 1; i < keep.size(); ++i) acc = acc + keep[i] * keep[keep.size() - i];
  g.output(sum(acc), "loss");
  size_t before = g.nodes().size();
  ASSERT_GT(before, 10000u);
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Graph> out = run_pass(kPass, g, test::session_like({}));
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(out, nullptr);
  EXPECT_NO_THROW(verify(*out));
  EXPECT_LT(out->nodes().size(), before / 2);
  EXPECT_LT(ms, 1000) << before << " nodes took " << ms << " ms";
  std::printf("elementwise_fusion: %zu -> %zu nodes in %.1f ms\n", before, out->nodes().size(), ms);
}

}  // namespace
}  // namespace rlx
