// bn_folding: batch_norm of a conv's output folded into the conv's weight and bias.
#include <gtest/gtest.h>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/text.h"

namespace rlx {
namespace {

using test::expect_pass;

TEST(BnFolding, ConstantsFoldIntoNewConstants) {
  // s = scale / sqrt(var + eps) = [0.5, 2]; w' = w * s = [1, 6]; b' = (0 - mean) s + beta.
  expect_pass("bn_folding", R"(
    graph main(%x: f32[1,1,3,3]) {
      %w = constant() {value=tensor<f32[2,1,1,1]>[2.0, 3.0]} : f32[2,1,1,1]
      %scale = constant() {value=tensor<f32[2]>[1.0, 2.0]} : f32[2]
      %beta = constant() {value=tensor<f32[2]>[0.5, -1.0]} : f32[2]
      %mean = constant() {value=tensor<f32[2]>[1.0, 0.0]} : f32[2]
      %var = constant() {value=tensor<f32[2]>[3.0, 0.0]} : f32[2]
      %0 = conv(%x, %w) : f32[1,2,3,3]
      %1 = batch_norm(%0, %scale, %beta, %mean, %var) {epsilon=1.0} : f32[1,2,3,3]
      return out=%1
    })",
              R"(
    graph main(%x: f32[1,1,3,3]) {
      %0 = constant() {value=tensor<f32[2,1,1,1]>[1.0, 6.0]} : f32[2,1,1,1]
      %1 = constant() {value=tensor<f32[2]>[0.0, -1.0]} : f32[2]
      %2 = conv(%x, %0, %1) : f32[1,2,3,3]
      return out=%2
    })");
}

TEST(BnFolding, ConstantsWithAConvBiasAndGroups) {
  // groups 2, a conv bias: b' = (b - mean) s + beta = [(1 - 1) 0.5 + 0.5, (2 - 0) 2 - 1].
  expect_pass("bn_folding", R"(
    graph main(%x: f64[1,2,2,2]) {
      %w = constant() {value=tensor<f64[2,1,1,1]>[2.0, 3.0]} : f64[2,1,1,1]
      %b = constant() {value=tensor<f64[2]>[1.0, 2.0]} : f64[2]
      %p = constant() {value=tensor<f64[2]>[1.0, 2.0]} : f64[2]
      %beta = constant() {value=tensor<f64[2]>[0.5, -1.0]} : f64[2]
      %mean = constant() {value=tensor<f64[2]>[1.0, 0.0]} : f64[2]
      %var = constant() {value=tensor<f64[2]>[3.0, 0.0]} : f64[2]
      %0 = conv(%x, %w, %b) {groups=2} : f64[1,2,2,2]
      %1 = batch_norm(%0, %p, %beta, %mean, %var) {epsilon=1.0} : f64[1,2,2,2]
      return out=%1
    })",
              R"(
    graph main(%x: f64[1,2,2,2]) {
      %0 = constant() {value=tensor<f64[2,1,1,1]>[1.0, 6.0]} : f64[2,1,1,1]
      %1 = constant() {value=tensor<f64[2]>[0.5, 3.0]} : f64[2]
      %2 = conv(%x, %0, %1) {groups=2} : f64[1,2,2,2]
      return out=%2
    })");
}

TEST(BnFolding, ConstantsIntoAConvTranspose) {
  // w [C 2, M 2, 1, 2]: output channel m's weights sit in each input channel's row;
  // s = [0.5, 2]: w' row c = [w[c, 0] * 0.5, w[c, 1] * 2]; b' = (b - mean) s + beta.
  expect_pass("bn_folding", R"(
    graph main(%x: f32[1,2,2,2]) {
      %w = constant() {value=tensor<f32[2,2,1,2]>[2.0, 4.0, 1.0, 3.0, 6.0, 8.0, -1.0, 0.5]} : f32[2,2,1,2]
      %b = constant() {value=tensor<f32[2]>[1.0, 2.0]} : f32[2]
      %scale = constant() {value=tensor<f32[2]>[1.0, 2.0]} : f32[2]
      %beta = constant() {value=tensor<f32[2]>[0.5, -1.0]} : f32[2]
      %mean = constant() {value=tensor<f32[2]>[1.0, 0.0]} : f32[2]
      %var = constant() {value=tensor<f32[2]>[3.0, 0.0]} : f32[2]
      %0 = conv_transpose(%x, %w, %b) {strides=[1, 2]} : f32[1,2,2,4]
      %1 = batch_norm(%0, %scale, %beta, %mean, %var) {epsilon=1.0} : f32[1,2,2,4]
      return out=%1
    })",
              R"(
    graph main(%x: f32[1,2,2,2]) {
      %0 = constant() {value=tensor<f32[2,2,1,2]>[1.0, 2.0, 2.0, 6.0, 3.0, 4.0, -2.0, 1.0]} : f32[2,2,1,2]
      %1 = constant() {value=tensor<f32[2]>[0.5, 3.0]} : f32[2]
      %2 = conv_transpose(%x, %0, %1) {strides=[1, 2]} : f32[1,2,2,4]
      return out=%2
    })");
}

TEST(BnFolding, ParamsScaleTheWeightsInTheGraph) {
  test::PassCheckOptions o;
  o.lo = 0.5;  // a positive variance
  expect_pass("bn_folding", R"(
    graph main(%x: f32[2,3,6,6], param %w: f32[4,3,3,3], param %b: f32[4], param %g: f32[4],
               param %beta: f32[4], param %mean: f32[4], param %var: f32[4]) {
      %0 = conv(%x, %w, %b) : f32[2,4,4,4]
      %1 = batch_norm(%0, %g, %beta, %mean, %var) : f32[2,4,4,4]
      return out=%1
    })",
              R"(
    graph main(%x: f32[2,3,6,6], param %w: f32[4,3,3,3], param %b: f32[4], param %g: f32[4],
               param %beta: f32[4], param %mean: f32[4], param %var: f32[4]) {
      %0 = constant() {value=tensor<f32[]>[1e-05]} : f32[]
      %1 = add(%var, %0) : f32[4]
      %2 = rsqrt(%1) : f32[4]
      %3 = mul(%g, %2) : f32[4]
      %4 = sub(%b, %mean) : f32[4]
      %5 = mul(%4, %3) : f32[4]
      %6 = add(%5, %beta) : f32[4]
      %7 = reshape(%3) {shape=[4, 1, 1, 1]} : f32[4,1,1,1]
      %8 = mul(%w, %7) : f32[4,3,3,3]
      %9 = conv(%x, %8, %6) : f32[2,4,4,4]
      return out=%9
    })",
              o);
}

TEST(BnFolding, LargeWeightsScaleTheOutputInstead) {
  // 1x1 conv on a 1x1 image: 64 weights against 8 outputs.
  test::PassCheckOptions o;
  o.lo = 0.5;
  expect_pass("bn_folding", R"(
    graph main(%x: f32[1,8,1,1], param %w: f32[8,8,1,1], param %g: f32[8],
               param %beta: f32[8], param %mean: f32[8], param %var: f32[8]) {
      %0 = conv(%x, %w) : f32[1,8,1,1]
      %1 = batch_norm(%0, %g, %beta, %mean, %var) {epsilon=0.001} : f32[1,8,1,1]
      return out=%1
    })",
              R"(
    graph main(%x: f32[1,8,1,1], param %w: f32[8,8,1,1], param %g: f32[8],
               param %beta: f32[8], param %mean: f32[8], param %var: f32[8]) {
      %0 = constant() {value=tensor<f32[]>[0.001]} : f32[]
      %1 = add(%var, %0) : f32[8]
      %2 = rsqrt(%1) : f32[8]
      %3 = mul(%g, %2) : f32[8]
      %4 = conv(%x, %w) : f32[1,8,1,1]
      %5 = mul(%mean, %3) : f32[8]
      %6 = sub(%beta, %5) : f32[8]
      %7 = reshape(%3) {shape=[8, 1, 1]} : f32[8,1,1]
      %8 = mul(%4, %7) : f32[1,8,1,1]
      %9 = reshape(%6) {shape=[8, 1, 1]} : f32[8,1,1]
      %10 = add(%8, %9) : f32[1,8,1,1]
      return out=%10
    })",
              o);
}

TEST(BnFolding, NegativeCases) {
  // The conv's output read elsewhere; a batch_norm of something else; a symbolic channel
  // count.
  test::PassCheckOptions o;
  o.compare_outputs = false;
  expect_pass("bn_folding", R"(
    graph main(%x: f32[1,2,3,3], %w: f32[2,2,1,1], %p: f32[2], %y: f32[1,2,3,3],
               %z: f32[1,c,3,3], %v: f32[m,c,1,1], %q: f32[m]) {
      %0 = conv(%x, %w) : f32[1,2,3,3]
      %1 = batch_norm(%0, %p, %p, %p, %p) : f32[1,2,3,3]
      %2 = relu(%y) : f32[1,2,3,3]
      %3 = batch_norm(%2, %p, %p, %p, %p) : f32[1,2,3,3]
      %4 = conv(%z, %v) : f32[1,m,3,3]
      %5 = batch_norm(%4, %q, %q, %q, %q) : f32[1,m,3,3]
      return o1=%1, o0=%0, o3=%3, o5=%5
    })",
              "", o);
}

TEST(BnFolding, ThenConvFusionTakesTheRelu) {
  // The pipeline's order: bn_folding leaves a conv that conv_fusion then fuses.
  auto g = parse_graph(R"(
    graph main(%x: f32[2,3,8,8], param %w: f32[8,3,3,3], param %g: f32[8],
               param %beta: f32[8], param %mean: f32[8], param %var: f32[8]) {
      %0 = conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[2,8,8,8]
      %1 = batch_norm(%0, %g, %beta, %mean, %var) : f32[2,8,8,8]
      %2 = relu(%1) : f32[2,8,8,8]
      return out=%2
    })");
  CompileOptions o;
  test::expect_same_outputs(*g, o, 5, 1e-4, 1e-5, 0.5, 2);
  CompiledGraph cg = Session().compile(*g, o);
  int convs = 0, norms = 0;
  for (const Node& n : cg.lowered().nodes()) {
    convs += n.op_name() == "fused_conv";
    norms += n.op_name() == "batch_norm" || n.op_name() == "relu";
  }
  EXPECT_EQ(convs, 1) << print_graph(cg.lowered());
  EXPECT_EQ(norms, 0) << print_graph(cg.lowered());
}

}  // namespace
}  // namespace rlx
