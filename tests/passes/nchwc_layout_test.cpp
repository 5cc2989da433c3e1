// nchwc_layout: chains of 2-D convs with constant weights (and the adds / relus between
// them) run on the channel-blocked layout; values read outside the chain get from_blocked.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "op_tables/pass_check.h"
#include "passes/fusion.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using test::expect_pass;

// A constant of `count` deterministic values in [-0.5, 0.5].
std::string weights(const std::string& name, const std::string& shape, int count, int seed) {
  std::string s = "      %" + name + " = constant() {value=tensor<f32[" + shape + "]>[";
  for (int i = 0; i < count; ++i) {
    double v = std::sin(0.37 * (i + 1) * (seed + 1)) * 0.5;
    s += (i ? ", " : "") + std::to_string(v);
  }
  return s + "]} : f32[" + shape + "]\n";
}

std::string consts() {
  return weights("w1", "24,3,3,3", 24 * 27, 1) + weights("w2", "24,1,3,3", 24 * 9, 2) +
         weights("w3", "24,24,1,1", 24 * 24, 3);
}

// `text` with $L replaced by this CPU's lanes (16 with AVX-512, else 8), and $B, $P and $Q
// by the blocked types of f32[1, 24, 8, 8], f32[1, 24, 1, 1] and f32[1, 6, 1, 1] in them.
std::string in_cpu_lanes(std::string text) {
  const int64_t l = passes::nchwc_lanes();
  const std::string lanes = std::to_string(l);
  auto blocked = [&](int64_t c, const char* hw) {
    return "f32[1," + std::to_string((c + l - 1) / l) + "," + hw + "," + lanes + "]";
  };
  for (size_t at; (at = text.find('$')) != std::string::npos;) {
    char k = text[at + 1];
    text.replace(at, 2,
                 k == 'L'   ? lanes
                 : k == 'B' ? blocked(24, "8,8")
                 : k == 'P' ? blocked(24, "1,1")
                            : blocked(6, "1,1"));
  }
  return text;
}

// oneDNN's blocked kernels against its plain ones: another summation order.
test::PassCheckOptions blocked_tolerance() {
  test::PassCheckOptions o;
  o.rtol = 1e-4;
  o.atol = 1e-5;
  return o;
}

TEST(NchwcLayout, ConvChainWithAResidualAddAndAnOutsideReader) {
  // First conv from a plain 3-channel input, a depthwise conv, a 1x1 conv, a residual add
  // of two blocked values; the depthwise output and the sum are read outside the chain (exp
  // is not taken: it is not finite at every input, and the zero lanes must stay finite).
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + consts() + R"(
      %0 = fused_conv(%x, %w1) {activation="relu6", pads=[1, 1, 1, 1]} : f32[1,24,8,8]
      %1 = fused_conv(%0, %w2) {activation="relu", groups=24, pads=[1, 1, 1, 1]} : f32[1,24,8,8]
      %2 = conv(%1, %w3) : f32[1,24,8,8]
      %3 = add(%2, %0) : f32[1,24,8,8]
      %4 = exp(%1) : f32[1,24,8,8]
      return out=%3, side=%4
    })",
              in_cpu_lanes(R"(
    graph main(%x: f32[1,3,8,8]) {
)" + consts() + R"(
      %0 = conv_blocked(%x, %w1) {activation="relu6", lanes=$L, pads=[1, 1, 1, 1]} : $B
      %1 = conv_blocked(%0, %w2) {activation="relu", groups=24, lanes=$L, pads=[1, 1, 1, 1]} : $B
      %2 = from_blocked(%1) {channels=24} : f32[1,24,8,8]
      %3 = conv_blocked(%1, %w3) {activation="none", lanes=$L} : $B
      %4 = add(%3, %0) : $B
      %5 = from_blocked(%4) {channels=24} : f32[1,24,8,8]
      %6 = exp(%2) : f32[1,24,8,8]
      return out=%5, side=%6
    })"),
              blocked_tolerance());
}

// f32[1, c, 8, 8] blocked in this CPU's lanes.
std::string blocked8x8(int64_t c) {
  const int64_t l = passes::nchwc_lanes();
  return "f32[1," + std::to_string((c + l - 1) / l) + ",8,8," + std::to_string(l) + "]";
}

TEST(NchwcLayout, GroupsOfWholeBlocksStayBlocked) {
  // RegNet's grouped 3x3 convs: groups of 16 channels are whole blocks at 8 or 16 lanes
  // and run blocked between the 1x1 convs; groups of 4 channels are not (a plain conv).
  const std::string w = weights("wa", "32,3,3,3", 32 * 27, 1) +
                        weights("wb", "32,16,3,3", 32 * 16 * 9, 2) +
                        weights("wc", "32,4,3,3", 32 * 4 * 9, 3);
  const std::string b32 = blocked8x8(32), l = std::to_string(passes::nchwc_lanes());
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + w + R"(
      %0 = conv(%x, %wa) {pads=[1, 1, 1, 1]} : f32[1,32,8,8]
      %1 = conv(%0, %wb) {groups=2, pads=[1, 1, 1, 1]} : f32[1,32,8,8]
      %2 = conv(%1, %wc) {groups=8, pads=[1, 1, 1, 1]} : f32[1,32,8,8]
      return out=%2
    })",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + w + R"(
      %0 = conv_blocked(%x, %wa) {activation="none", lanes=)" +
                  l + R"(, pads=[1, 1, 1, 1]} : )" + b32 + R"(
      %1 = conv_blocked(%0, %wb) {activation="none", groups=2, lanes=)" +
                  l + R"(, pads=[1, 1, 1, 1]} : )" + b32 + R"(
      %2 = from_blocked(%1) {channels=32} : f32[1,32,8,8]
      %3 = conv(%2, %wc) {groups=8, pads=[1, 1, 1, 1]} : f32[1,32,8,8]
      return out=%3
    })",
              blocked_tolerance());
}

TEST(NchwcLayout, ChannelConcatOfWholeBlocksStaysBlocked) {
  // SqueezeNet's fire module: two convs of 16 channels (whole blocks at 8 or 16 lanes)
  // concatenated along the channels, then a 1x1 conv: the concat runs along the blocks.
  const std::string w = weights("wa", "16,3,3,3", 16 * 27, 1) +
                        weights("wb", "16,3,3,3", 16 * 27, 2) +
                        weights("wc", "16,32,1,1", 16 * 32, 3);
  const std::string l = std::to_string(passes::nchwc_lanes());
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + w + R"(
      %a = conv(%x, %wa) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
      %b = conv(%x, %wb) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
      %c = concat(%a, %b) {axis=1} : f32[1,32,8,8]
      %d = conv(%c, %wc) : f32[1,16,8,8]
      return out=%d
    })",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + w + R"(
      %0 = conv_blocked(%x, %wa) {activation="none", lanes=)" +
                  l + R"(, pads=[1, 1, 1, 1]} : )" + blocked8x8(16) + R"(
      %1 = conv_blocked(%x, %wb) {activation="none", lanes=)" +
                  l + R"(, pads=[1, 1, 1, 1]} : )" + blocked8x8(16) + R"(
      %2 = concat(%0, %1) {axis=1} : )" +
                  blocked8x8(32) + R"(
      %3 = conv_blocked(%2, %wc) {activation="none", lanes=)" +
                  l + R"(} : )" + blocked8x8(16) + R"(
      %4 = from_blocked(%3) {channels=16} : f32[1,16,8,8]
      return out=%4
    })",
              blocked_tolerance());
}

TEST(NchwcLayout, MaxPoolsBetweenConvsStayBlocked) {
  // SqueezeNet's and ResNet's pools between convs: max_pool_blocked, no conversions.
  const std::string w = weights("wa", "16,3,3,3", 16 * 27, 1) + weights("wc", "16,16,1,1", 256, 3);
  const std::string l = std::to_string(passes::nchwc_lanes());
  auto blocked = [&](int64_t hw) {
    const int64_t lanes = passes::nchwc_lanes();
    return "f32[1," + std::to_string(16 / lanes) + "," + std::to_string(hw) + "," +
           std::to_string(hw) + "," + l + "]";
  };
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,9,9]) {
)" + w + R"(
      %a = conv(%x, %wa) {pads=[1, 1, 1, 1]} : f32[1,16,9,9]
      %p = max_pool(%a) {ceil_mode=true, kernel_shape=[3, 3], strides=[2, 2]} : f32[1,16,4,4]
      %d = conv(%p, %wc) : f32[1,16,4,4]
      return out=%d
    })",
              R"(
    graph main(%x: f32[1,3,9,9]) {
)" + w + R"(
      %0 = conv_blocked(%x, %wa) {activation="none", lanes=)" +
                  l + R"(, pads=[1, 1, 1, 1]} : )" + blocked(9) + R"(
      %1 = max_pool_blocked(%0) {ceil_mode=true, kernel_shape=[3, 3], lanes=)" +
                  l + R"(, strides=[2, 2]} : )" + blocked(4) + R"(
      %2 = conv_blocked(%1, %wc) {activation="none", lanes=)" +
                  l + R"(} : )" + blocked(4) + R"(
      %3 = from_blocked(%2) {channels=16} : f32[1,16,4,4]
      return out=%3
    })",
              blocked_tolerance());
}

TEST(NchwcLayout, ConcatOfPartBlocksIsLeftPlain) {
  // 12 channels fill no whole block: blocked, the concat would leave zero lanes between
  // its inputs, so it is not taken, and no chain has two convs.
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + weights("wa", "12,3,3,3", 12 * 27, 1) +
                  weights("wb", "12,3,3,3", 12 * 27, 2) + weights("wc", "8,24,1,1", 8 * 24, 3) + R"(
      %a = conv(%x, %wa) {pads=[1, 1, 1, 1]} : f32[1,12,8,8]
      %b = conv(%x, %wb) {pads=[1, 1, 1, 1]} : f32[1,12,8,8]
      %c = concat(%a, %b) {axis=1} : f32[1,24,8,8]
      %d = conv(%c, %wc) : f32[1,8,8,8]
      return out=%d
    })",
              "");
}

TEST(NchwcLayout, UnaryOpsFiniteAtEveryInputJoinTheChain) {
  // silu and leaky_relu carry Trait::finite (their zero lanes stay finite): they run on the
  // blocked tensors with their attributes; nothing leaves the layout but the output.
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + consts() + R"(
      %0 = conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,24,8,8]
      %1 = silu(%0) : f32[1,24,8,8]
      %2 = conv(%1, %w2) {groups=24, pads=[1, 1, 1, 1]} : f32[1,24,8,8]
      %3 = leaky_relu(%2) {alpha=0.1} : f32[1,24,8,8]
      %4 = conv(%3, %w3) : f32[1,24,8,8]
      return out=%4
    })",
              in_cpu_lanes(R"(
    graph main(%x: f32[1,3,8,8]) {
)" + consts() + R"(
      %0 = conv_blocked(%x, %w1) {activation="none", lanes=$L, pads=[1, 1, 1, 1]} : $B
      %1 = silu(%0) : $B
      %2 = conv_blocked(%1, %w2) {activation="none", groups=24, lanes=$L, pads=[1, 1, 1, 1]} : $B
      %3 = leaky_relu(%2) {alpha=0.1} : $B
      %4 = conv_blocked(%3, %w3) {activation="none", lanes=$L} : $B
      %5 = from_blocked(%4) {channels=24} : f32[1,24,8,8]
      return out=%5
    })"),
              blocked_tolerance());
}

TEST(NchwcLayout, LeavesLoneConvsAndNonConstantWeights) {
  // One conv alone gains nothing; a weight that is a graph input may change between runs
  // (conv_blocked caches its weights reordered), so that chain is left as it is.
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,8,8], %w: f32[24,24,1,1]) {
)" + weights("w1", "24,3,3,3", 24 * 27, 1) +
                  R"(
      %0 = conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,24,8,8]
      %1 = conv(%0, %w) : f32[1,24,8,8]
      return out=%1
    })",
              "");
}

TEST(NchwcLayout, SqueezeExcitationStaysBlocked) {
  // MobileNetV3's block: conv, then a global pool, two 1x1 convs and a hard_sigmoid give one
  // scale per channel that multiplies the conv's output, then the next conv. The pool runs
  // as a mean over the blocked H and W, and the scale [1, Cb, 1, 1, L] broadcasts: nothing
  // leaves the blocked layout but the output.
  expect_pass("nchwc_layout",
              R"(
    graph main(%x: f32[1,3,8,8]) {
)" + consts() + weights("s1", "6,24,1,1", 6 * 24, 4) +
                  weights("s2", "24,6,1,1", 24 * 6, 5) + R"(
      %0 = fused_conv(%x, %w1) {activation="relu6", pads=[1, 1, 1, 1]} : f32[1,24,8,8]
      %1 = global_avg_pool(%0) : f32[1,24,1,1]
      %2 = fused_conv(%1, %s1) {activation="relu"} : f32[1,6,1,1]
      %3 = conv(%2, %s2) : f32[1,24,1,1]
      %4 = hard_sigmoid(%3) {alpha=0.16666666666666666, beta=0.5} : f32[1,24,1,1]
      %5 = mul(%4, %0) : f32[1,24,8,8]
      %6 = conv(%5, %w3) : f32[1,24,8,8]
      return out=%6
    })",
              in_cpu_lanes(R"(
    graph main(%x: f32[1,3,8,8]) {
)" + consts() + weights("s1", "6,24,1,1", 6 * 24, 4) +
                           weights("s2", "24,6,1,1", 24 * 6, 5) + R"(
      %0 = conv_blocked(%x, %w1) {activation="relu6", lanes=$L, pads=[1, 1, 1, 1]} : $B
      %1 = mean(%0) {axes=[2, 3], keepdims=true} : $P
      %2 = conv_blocked(%1, %s1) {activation="relu", lanes=$L} : $Q
      %3 = conv_blocked(%2, %s2) {activation="none", lanes=$L} : $P
      %4 = hard_sigmoid(%3) {alpha=0.16666666666666666, beta=0.5} : $P
      %5 = mul(%4, %0) : $B
      %6 = conv_blocked(%5, %w3) {activation="none", lanes=$L} : $B
      %7 = from_blocked(%6) {channels=24} : f32[1,24,8,8]
      return out=%7
    })"),
              blocked_tolerance());
}

}  // namespace
}  // namespace rlx
