// conv_fusion: conv (+ per-channel bias add, folded into conv's bias) (+ activation).
#include <gtest/gtest.h>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/text.h"

namespace rlx {
namespace {

using test::expect_pass;

TEST(ConvFusion, BiasAddAndRelu) {
  expect_pass("conv_fusion", R"(
    graph main(%x: f32[2,3,8,8], param %w: f32[4,3,3,3], param %b: f32[1,4,1,1]) {
      %0 = conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[2,4,8,8]
      %1 = add(%0, %b) : f32[2,4,8,8]
      %2 = relu(%1) : f32[2,4,8,8]
      return out=%2
    })",
              R"(
    graph main(%x: f32[2,3,8,8], param %w: f32[4,3,3,3], param %b: f32[1,4,1,1]) {
      %0 = reshape(%b) {shape=[4]} : f32[4]
      %1 = fused_conv(%x, %w, %0) {activation="relu", pads=[1, 1, 1, 1]} : f32[2,4,8,8]
      return out=%1
    })");
}

TEST(ConvFusion, BiasAddsToTheConvsOwnBias) {
  // [M, 1, 1] broadcasts per channel too; with no activation the result is a plain conv.
  expect_pass("conv_fusion", R"(
    graph main(%x: f64[1,2,5,5], %w: f64[3,2,2,2], %b: f64[3], %c: f64[3,1,1]) {
      %0 = conv(%x, %w, %b) {strides=[2, 2]} : f64[1,3,2,2]
      %1 = add(%c, %0) : f64[1,3,2,2]
      return out=%1
    })",
              R"(
    graph main(%x: f64[1,2,5,5], %w: f64[3,2,2,2], %b: f64[3], %c: f64[3,1,1]) {
      %0 = reshape(%c) {shape=[3]} : f64[3]
      %1 = add(%b, %0) : f64[3]
      %2 = conv(%x, %w, %1) {strides=[2, 2]} : f64[1,3,2,2]
      return out=%2
    })");
}

TEST(ConvFusion, ActivationsOf1dAnd3dConvs) {
  test::PassCheckOptions o;
  o.rtol = 1e-4;  // oneDNN's post-op math against the core ops'
  o.atol = 1e-5;
  for (const char* act : {"gelu", "silu", "sigmoid", "tanh"}) {
    SCOPED_TRACE(act);
    expect_pass("conv_fusion", std::string(R"(
      graph main(%x: f32[1,4,9], %w: f32[6,2,3]) {
        %0 = conv(%x, %w) {groups=2} : f32[1,6,7]
        %1 = )") + act + R"((%0) : f32[1,6,7]
        return out=%1
      })",
                std::string(R"(
      graph main(%x: f32[1,4,9], %w: f32[6,2,3]) {
        %0 = fused_conv(%x, %w) {activation=")") +
                    act + R"(", groups=2} : f32[1,6,7]
        return out=%0
      })",
                o);
  }
  expect_pass("conv_fusion", R"(
    graph main(%x: f32[1,2,4,4,4], %w: f32[2,2,2,2,2]) {
      %0 = conv(%x, %w) : f32[1,2,3,3,3]
      %1 = gelu(%0) {approximate="tanh"} : f32[1,2,3,3,3]
      return out=%1
    })",
              R"(
    graph main(%x: f32[1,2,4,4,4], %w: f32[2,2,2,2,2]) {
      %0 = fused_conv(%x, %w) {activation="gelu_tanh"} : f32[1,2,3,3,3]
      return out=%0
    })",
              o);
}

TEST(ConvFusion, SymbolicBatch) {
  test::PassCheckOptions o;
  o.compare_outputs = false;
  expect_pass("conv_fusion", R"(
    graph main(%x: f32[n,3,8,8], %w: f32[4,3,1,1]) {
      %0 = conv(%x, %w) : f32[n,4,8,8]
      %1 = relu(%0) : f32[n,4,8,8]
      return out=%1
    })",
              R"(
    graph main(%x: f32[n,3,8,8], %w: f32[4,3,1,1]) {
      %0 = fused_conv(%x, %w) {activation="relu"} : f32[n,4,8,8]
      return out=%0
    })",
              o);
}

TEST(ConvFusion, NegativeCases) {
  // A bias over the last axis, not the channels; a conv read twice; an activation of a
  // conv_transpose; a full-size addend.
  expect_pass("conv_fusion", R"(
    graph main(%x: f32[1,2,4,4], %w: f32[2,2,1,1], %b: f32[4], %y: f32[1,2,4,4]) {
      %0 = conv(%x, %w) : f32[1,2,4,4]
      %1 = add(%0, %b) : f32[1,2,4,4]
      %2 = conv(%x, %w) : f32[1,2,4,4]
      %3 = relu(%2) : f32[1,2,4,4]
      %4 = conv_transpose(%x, %w) : f32[1,2,4,4]
      %5 = relu(%4) : f32[1,2,4,4]
      %6 = conv(%y, %w) : f32[1,2,4,4]
      %7 = add(%6, %y) : f32[1,2,4,4]
      return o1=%1, o2=%2, o3=%3, o5=%5, o7=%7
    })",
              "");
}

TEST(ConvFusion, AddOnlyWhenTheActivationHasOtherReaders) {
  expect_pass("conv_fusion", R"(
    graph main(%x: f32[1,2,4,4], %w: f32[2,2,1,1], %b: f32[1,2,1,1]) {
      %0 = conv(%x, %w) : f32[1,2,4,4]
      %1 = add(%0, %b) : f32[1,2,4,4]
      %2 = relu(%1) : f32[1,2,4,4]
      return out=%2, pre=%1
    })",
              R"(
    graph main(%x: f32[1,2,4,4], %w: f32[2,2,1,1], %b: f32[1,2,1,1]) {
      %0 = reshape(%b) {shape=[2]} : f32[2]
      %1 = conv(%x, %w, %0) : f32[1,2,4,4]
      %2 = relu(%1) : f32[1,2,4,4]
      return out=%2, pre=%1
    })");
}

TEST(ConvTaps, DilatedTapsThatNeverMeetTheInputAreDropped) {
  // H: 4 rows, dilation 2, pad 2: every tap meets a row for some output. W: 3 columns,
  // dilation 4, pad 4: only the middle tap does. The kernel keeps its 3 rows and its middle
  // column, the W padding drops by 4 on each side, the outputs stay as they were.
  expect_pass("conv_taps", R"(
    graph main(%x: f32[1,2,4,3], %b: f32[2]) {
      %w = constant() {value=tensor<f32[2,2,3,3]>[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0]} : f32[2,2,3,3]
      %0 = conv(%x, %w, %b) {dilations=[2, 4], pads=[2, 4, 2, 4]} : f32[1,2,4,3]
      return out=%0
    })",
              R"(
    graph main(%x: f32[1,2,4,3], %b: f32[2]) {
      %w = constant() {value=tensor<f32[2,2,3,3]>[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0]} : f32[2,2,3,3]
      %c = constant() {value=tensor<f32[2,2,3,1]>[1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0, 22.0, 25.0, 28.0, 31.0, 34.0]} : f32[2,2,3,1]
      %0 = conv(%x, %c, %b) {dilations=[2, 4], pads=[2, 0, 2, 0]} : f32[1,2,4,3]
      return out=%0
    })");
}

TEST(ConvTaps, LeavesConvsWhoseTapsAllMeetTheInput) {
  expect_pass("conv_taps", R"(
    graph main(%x: f32[1,2,8,8], %w: f32[2,2,3,3]) {
      %c = constant() {value=tensor<f32[2,2,3,3]>[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0]} : f32[2,2,3,3]
      %0 = conv(%x, %c) {dilations=[3, 3], pads=[3, 3, 3, 3]} : f32[1,2,8,8]
      %1 = conv(%x, %w) {dilations=[9, 9], pads=[9, 9, 9, 9]} : f32[1,2,8,8]
      return a=%0, b=%1
    })",
              "");
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

TEST(ConvFusion, Relu6ClampBecomesTheActivation) {
  test::expect_pass("conv_fusion", R"(
    graph main(%x: f32[1,3,6,6], param %w: f32[4,3,1,1], param %b: f32[4]) {
      %0 = conv(%x, %w, %b) : f32[1,4,6,6]
      %1 = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %2 = constant() {value=tensor<f32[]>[6.0]} : f32[]
      %3 = clamp(%0, %1, %2) : f32[1,4,6,6]
      return out=%3
    })",
                    R"(
    graph main(%x: f32[1,3,6,6], param %w: f32[4,3,1,1], param %b: f32[4]) {
      %0 = fused_conv(%x, %w, %b) {activation="relu6"} : f32[1,4,6,6]
      return out=%0
    })");
}

// x * hard_sigmoid(x) with MobileNetV3's alpha and beta (as ONNX HardSwish imports, and as
// exporters write it), either operand order.
TEST(ConvFusion, HardSigmoidGateBecomesHardSwish) {
  for (const char* mul : {"mul(%1, %2)", "mul(%2, %1)"}) {
    SCOPED_TRACE(mul);
    test::expect_pass("conv_fusion", std::string(R"(
    graph main(%x: f32[1,3,6,6], param %w: f32[4,3,1,1], param %b: f32[4]) {
      %1 = conv(%x, %w, %b) : f32[1,4,6,6]
      %2 = hard_sigmoid(%1) {alpha=0.16666666666666666, beta=0.5} : f32[1,4,6,6]
      %3 = )") + mul + R"( : f32[1,4,6,6]
      return out=%3
    })",
                      R"(
    graph main(%x: f32[1,3,6,6], param %w: f32[4,3,1,1], param %b: f32[4]) {
      %0 = fused_conv(%x, %w, %b) {activation="hard_swish"} : f32[1,4,6,6]
      return out=%0
    })");
  }
}

// Another alpha, or the gate read elsewhere: no hard_swish.
TEST(ConvFusion, OtherHardSigmoidsStayApart) {
  for (const char* alpha : {"0.2", "0.16666666666666666"}) {
    SCOPED_TRACE(alpha);
    const bool same = std::string(alpha) != "0.2";
    test::expect_pass("conv_fusion",
                      std::string(R"(
    graph main(%x: f32[1,3,6,6], param %w: f32[4,3,1,1]) {
      %0 = conv(%x, %w) : f32[1,4,6,6]
      %1 = hard_sigmoid(%0) {alpha=)") +
                          alpha + R"(, beta=0.5} : f32[1,4,6,6]
      %2 = mul(%0, %1) : f32[1,4,6,6]
      return out=%2)" + (same ? ", gate=%1" : "") +
                          R"(
    })",
                      "");
  }
}

// conv_prologue: the activation of a conv read only by a depthwise conv moves into that
// conv's input_activation, for wide (padded rows) and narrow (channel-last) planes and
// strides 1 and 2.
TEST(ConvPrologue, ActivationMovesIntoTheDepthwiseConv) {
  for (const char* size : {"8", "64"})
    for (const char* stride : {"1", "2"}) {
      SCOPED_TRACE(std::string(size) + " stride " + stride);
      std::string n = size, s = stride;
      std::string o = s == "1" ? n : std::to_string((std::stoi(n) + 1) / 2);
      test::PassCheckOptions opt;
      opt.rtol = 1e-5;
      opt.atol = 1e-5;
      test::expect_pass("conv_prologue",
                        R"(
        graph main(%x: f32[1,3,)" +
                            n + "," + n + R"(], param %w: f32[6,3,1,1], param %d: f32[6,1,3,3]) {
          %0 = fused_conv(%x, %w) {activation="relu6"} : f32[1,6,)" +
                            n + "," + n + R"(]
          %1 = conv(%0, %d) {groups=6, pads=[1, 1, 1, 1], strides=[)" +
                            s + ", " + s + R"(]} : f32[1,6,)" + o + "," + o + R"(]
          return out=%1
        })",
                        R"(
        graph main(%x: f32[1,3,)" +
                            n + "," + n + R"(], param %w: f32[6,3,1,1], param %d: f32[6,1,3,3]) {
          %0 = fused_conv(%x, %w) : f32[1,6,)" +
                            n + "," + n + R"(]
          %1 = fused_conv(%0, %d) {groups=6, input_activation="relu6", pads=[1, 1, 1, 1], strides=[)" +
                            s + ", " + s + R"(]} : f32[1,6,)" + o + "," + o + R"(]
          return out=%1
        })",
                        opt);
    }
}

TEST(ConvPrologue, AnotherReaderKeepsTheActivation) {
  test::expect_pass("conv_prologue", R"(
    graph main(%x: f32[1,3,8,8], param %w: f32[6,3,1,1], param %d: f32[6,1,3,3]) {
      %0 = fused_conv(%x, %w) {activation="relu6"} : f32[1,6,8,8]
      %1 = conv(%0, %d) {groups=6, pads=[1, 1, 1, 1]} : f32[1,6,8,8]
      return out=%1, act=%0
    })",
                    "");
}

}  // namespace
}  // namespace rlx
