// layout_sinking: transposes folded into matmul operands, and transpose pairs cancelled.
#include <gtest/gtest.h>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/text.h"

namespace rlx {
namespace {

using test::expect_pass;

TEST(LayoutSinking, TransposedWeightBecomesTransposeB) {
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[4,8], param %w: f32[16,8]) {
      %0 = transpose(%w) {perm=[1, 0]} : f32[8,16]
      %1 = matmul(%x, %0) : f32[4,16]
      return out=%1
    })",
              R"(
    graph main(%x: f32[4,8], param %w: f32[16,8]) {
      %0 = fused_matmul(%x, %w) {transpose_b=true} : f32[4,16]
      return out=%0
    })");
}

TEST(LayoutSinking, BatchedBothOperandsAndReversalPerm) {
  // perm [0, 2, 1] on rank 3, and the empty perm (reversal) on rank 2, with negative axes.
  expect_pass("layout_sinking", R"(
    graph main(%a: f32[2,5,3], %b: f32[4,5]) {
      %0 = transpose(%a) {perm=[0, -1, 1]} : f32[2,3,5]
      %1 = transpose(%b) : f32[5,4]
      %2 = matmul(%0, %1) : f32[2,3,4]
      return out=%2
    })",
              R"(
    graph main(%a: f32[2,5,3], %b: f32[4,5]) {
      %0 = fused_matmul(%a, %b) {transpose_a=true, transpose_b=true} : f32[2,3,4]
      return out=%0
    })");
}

TEST(LayoutSinking, ThroughAnElementwiseChainIntoTheOperand) {
  // A mel filterbank over a power spectrum: |transpose(spec)|^2 * 0.5 as the B operand runs
  // the chain on spec as it is (complex in, real out) and reads it through transpose_b.
  expect_pass("layout_sinking", R"(
    graph main(%fb: f32[3,5], %spec: c64[2,4,5]) {
      %0 = transpose(%spec) {perm=[0, 2, 1]} : c64[2,5,4]
      %1 = abs(%0) : f32[2,5,4]
      %2 = square(%1) : f32[2,5,4]
      %3 = constant() {value=tensor<f32[]>[0.5]} : f32[]
      %4 = mul(%2, %3) : f32[2,5,4]
      %5 = matmul(%fb, %4) : f32[2,3,4]
      return out=%5
    })",
              R"(
    graph main(%fb: f32[3,5], %spec: c64[2,4,5]) {
      %0 = constant() {value=tensor<f32[]>[0.5]} : f32[]
      %1 = abs(%spec) : f32[2,4,5]
      %2 = square(%1) : f32[2,4,5]
      %3 = mul(%2, %0) : f32[2,4,5]
      %4 = fused_matmul(%fb, %3) {transpose_b=true} : f32[2,3,4]
      return out=%4
    })");
  // A chain member read twice keeps everything as it is (an empty `after`: no change).
  expect_pass("layout_sinking", R"(
    graph main(%fb: f32[3,5], %x: f32[2,4,5]) {
      %0 = transpose(%x) {perm=[0, 2, 1]} : f32[2,5,4]
      %1 = neg(%0) : f32[2,5,4]
      %2 = matmul(%fb, %1) : f32[2,3,4]
      return out=%2, again=%1
    })",
              "");
}

TEST(LayoutSinking, FlagsOfAFusedMatmulToggle) {
  // A transposed operand of a fused_matmul that already reads it transposed: the flag
  // flips back; with nothing else fused that is a plain matmul again.
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[4,8], %w: f32[8,16]) {
      %0 = transpose(%w) {perm=[1, 0]} : f32[16,8]
      %1 = fused_matmul(%x, %0) {transpose_b=true} : f32[4,16]
      return out=%1
    })",
              R"(
    graph main(%x: f32[4,8], %w: f32[8,16]) {
      %0 = matmul(%x, %w) : f32[4,16]
      return out=%0
    })");
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[8,4], %w: f32[8,16], %b: f32[16]) {
      %0 = transpose(%x) {perm=[1, 0]} : f32[4,8]
      %1 = fused_matmul(%0, %w, %b) {activation="relu"} : f32[4,16]
      return out=%1
    })",
              R"(
    graph main(%x: f32[8,4], %w: f32[8,16], %b: f32[16]) {
      %0 = fused_matmul(%x, %w, %b) {activation="relu", transpose_a=true} : f32[4,16]
      return out=%0
    })");
}

TEST(LayoutSinking, TransposeWithOtherReadersStays) {
  // The matmul reads w directly; the transpose is kept for its other reader.
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[4,8], %w: f32[16,8]) {
      %0 = transpose(%w) {perm=[1, 0]} : f32[8,16]
      %1 = matmul(%x, %0) : f32[4,16]
      return out=%1, wt=%0
    })",
              R"(
    graph main(%x: f32[4,8], %w: f32[16,8]) {
      %0 = transpose(%w) {perm=[1, 0]} : f32[8,16]
      %1 = fused_matmul(%x, %w) {transpose_b=true} : f32[4,16]
      return out=%1, wt=%0
    })");
}

TEST(LayoutSinking, TransposePairsCancel) {
  // Back to back: gone; a composition that is no identity: one transpose.
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[2,3,4]) {
      %0 = transpose(%x) {perm=[2, 0, 1]} : f32[4,2,3]
      %1 = transpose(%0) {perm=[1, 2, 0]} : f32[2,3,4]
      %2 = transpose(%x) {perm=[1, 0, 2]} : f32[3,2,4]
      %3 = transpose(%2) {perm=[2, 1, 0]} : f32[4,2,3]
      return out=%1, o2=%3
    })",
              R"(
    graph main(%x: f32[2,3,4]) {
      %0 = transpose(%x) {perm=[2, 0, 1]} : f32[4,2,3]
      return out=%x, o2=%0
    })");
}

TEST(LayoutSinking, CancelsAcrossElementwiseChains) {
  // NCHW -> NHWC, relu, * scalar, back: the two copies go.
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[2,3,4,5], %s: f32[]) {
      %0 = transpose(%x) {perm=[0, 2, 3, 1]} : f32[2,4,5,3]
      %1 = relu(%0) : f32[2,4,5,3]
      %2 = mul(%1, %s) : f32[2,4,5,3]
      %3 = transpose(%2) {perm=[0, 3, 1, 2]} : f32[2,3,4,5]
      return out=%3
    })",
              R"(
    graph main(%x: f32[2,3,4,5], %s: f32[]) {
      %0 = relu(%x) : f32[2,3,4,5]
      %1 = mul(%0, %s) : f32[2,3,4,5]
      return out=%1
    })");
}

TEST(LayoutSinking, NegativeCases) {
  // A transpose of other dims; an integer matmul.
  expect_pass("layout_sinking", R"(
    graph main(%a: f32[3,2,5], %b: f32[5,4], %i: i32[4,3], %j: i32[4,2]) {
      %0 = transpose(%a) {perm=[1, 0, 2]} : f32[2,3,5]
      %1 = matmul(%0, %b) : f32[2,3,4]
      %2 = transpose(%i) {perm=[1, 0]} : i32[3,4]
      %3 = matmul(%2, %j) : i32[3,2]
      return o1=%1, o3=%3
    })",
              "");
}

// Rule 4 where rule 3 stops: an elementwise op with a full-size second operand (both
// transposed alike), an elementwise op read elsewhere (one transpose left for that reader),
// a chain ending in no identity (the two transposes become one).
TEST(LayoutSinking, ElementwiseOpsBetweenTransposes) {
  expect_pass("layout_sinking", R"(
    graph main(%a: f32[3,2,5], %y: f32[3,2]) {
      %4 = transpose(%y) {perm=[1, 0]} : f32[2,3]
      %5 = add(%4, %4) : f32[2,3]
      %6 = transpose(%5) {perm=[1, 0]} : f32[3,2]
      %7 = transpose(%y) {perm=[1, 0]} : f32[2,3]
      %8 = exp(%7) : f32[2,3]
      %9 = transpose(%8) {perm=[1, 0]} : f32[3,2]
      %10 = transpose(%a) {perm=[2, 0, 1]} : f32[5,3,2]
      %11 = neg(%10) : f32[5,3,2]
      %12 = transpose(%11) {perm=[0, 2, 1]} : f32[5,2,3]
      return o6=%6, o8=%8, o9=%9, o12=%12
    })",
              R"(
    graph main(%a: f32[3,2,5], %y: f32[3,2]) {
      %0 = add(%y, %y) : f32[3,2]
      %1 = exp(%y) : f32[3,2]
      %2 = transpose(%1) {perm=[1, 0]} : f32[2,3]
      %3 = neg(%a) : f32[3,2,5]
      %4 = transpose(%3) {perm=[2, 1, 0]} : f32[5,2,3]
      return o6=%0, o8=%2, o9=%1, o12=%4
    })");
}

TEST(LayoutSinking, TransposedWeightThroughACast) {
  // Mixed precision leaves cast(transpose(w)): the cast moves onto w (where cse can merge
  // it with w's other casts) and the transpose becomes the flag.
  expect_pass("layout_sinking", R"(
    graph main(%x: bf16[4,8], %w: f32[16,8]) {
      %0 = transpose(%w) {perm=[1, 0]} : f32[8,16]
      %1 = cast(%0) {dtype=bf16} : bf16[8,16]
      %2 = matmul(%x, %1) : bf16[4,16]
      return out=%2
    })",
              R"(
    graph main(%x: bf16[4,8], %w: f32[16,8]) {
      %0 = cast(%w) {dtype=bf16} : bf16[16,8]
      %1 = fused_matmul(%x, %0) {transpose_b=true} : bf16[4,16]
      return out=%1
    })");
}

TEST(LayoutSinking, TransposedDotGeneralSwapsItsOperands) {
  // A weight gradient transposed after the product: the product with its operands swapped.
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[2,3,4], %dy: f32[2,3,5]) {
      %0 = dot_general(%x, %dy) {lhs_contracting=[0, 1], rhs_contracting=[0, 1]} : f32[4,5]
      %1 = transpose(%0) {perm=[1, 0]} : f32[5,4]
      return out=%1
    })",
              R"(
    graph main(%x: f32[2,3,4], %dy: f32[2,3,5]) {
      %0 = dot_general(%dy, %x) {lhs_contracting=[0, 1], rhs_contracting=[0, 1]} : f32[5,4]
      return out=%0
    })");
  // The product read elsewhere too: it stays, and so does the transpose.
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[2,3,4], %dy: f32[2,3,5]) {
      %0 = dot_general(%x, %dy) {lhs_contracting=[0, 1], rhs_contracting=[0, 1]} : f32[4,5]
      %1 = transpose(%0) {perm=[1, 0]} : f32[5,4]
      return out=%1, g=%0
    })",
              "");
}

// Rule 4: an NHWC residual stream as tf2onnx writes it (each conv between a transpose to NCHW
// and one back, the activation and the residual add in NHWC, a mean over H and W) runs in
// NCHW with no transpose left.
TEST(LayoutSinking, TransposesMoveBelowElementwiseOpsAndReductions) {
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[1,4,5,3], param %w: f32[3,3,1,1], param %v: f32[3,3,1,1]) {
      %0 = transpose(%x) {perm=[0, 3, 1, 2]} : f32[1,3,4,5]
      %1 = conv(%0, %w) : f32[1,3,4,5]
      %2 = transpose(%1) {perm=[0, 2, 3, 1]} : f32[1,4,5,3]
      %3 = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %4 = constant() {value=tensor<f32[]>[6.0]} : f32[]
      %5 = clamp(%2, %3, %4) : f32[1,4,5,3]
      %6 = transpose(%5) {perm=[0, 3, 1, 2]} : f32[1,3,4,5]
      %7 = conv(%6, %v) : f32[1,3,4,5]
      %8 = transpose(%7) {perm=[0, 2, 3, 1]} : f32[1,4,5,3]
      %9 = add(%5, %8) : f32[1,4,5,3]
      %10 = mean(%9) {axes=[1, 2], keepdims=false} : f32[1,3]
      %11 = transpose(%x) {perm=[0, 3, 1, 2]} : f32[1,3,4,5]
      %12 = sum(%11) {axes=[1], keepdims=true} : f32[1,1,4,5]
      %13 = transpose(%12) {perm=[0, 2, 3, 1]} : f32[1,4,5,1]
      return out=%10, sums=%13
    })",
              R"(
    graph main(%x: f32[1,4,5,3], param %w: f32[3,3,1,1], param %v: f32[3,3,1,1]) {
      %0 = transpose(%x) {perm=[0, 3, 1, 2]} : f32[1,3,4,5]
      %1 = conv(%0, %w) : f32[1,3,4,5]
      %2 = constant() {value=tensor<f32[]>[0.0]} : f32[]
      %3 = constant() {value=tensor<f32[]>[6.0]} : f32[]
      %4 = clamp(%1, %2, %3) : f32[1,3,4,5]
      %5 = conv(%4, %v) : f32[1,3,4,5]
      %6 = add(%4, %5) : f32[1,3,4,5]
      %7 = mean(%6) {axes=[2, 3], keepdims=false} : f32[1,3]
      %8 = sum(%x) {axes=[3], keepdims=true} : f32[1,4,5,1]
      return out=%7, sums=%8
    })");
}

// A transpose that another op also reads stays, and nothing sinks past it; a full-size
// operand without the transpose keeps the op where it is.
TEST(LayoutSinking, TransposesThatStayDoNotMove) {
  expect_pass("layout_sinking", R"(
    graph main(%x: f32[2,3], %y: f32[3,2]) {
      %0 = transpose(%x) {perm=[1, 0]} : f32[3,2]
      %1 = exp(%0) : f32[3,2]
      %2 = add(%0, %y) : f32[3,2]
      return a=%1, b=%2
    })",
              "");
}

TEST(LayoutSinking, SymbolicShapes) {
  test::PassCheckOptions o;
  o.compare_outputs = false;
  expect_pass("layout_sinking", R"(
    graph main(%q: f32[b,h,s,64], %k: f32[b,h,s,64]) {
      %0 = transpose(%k) {perm=[0, 1, 3, 2]} : f32[b,h,64,s]
      %1 = matmul(%q, %0) : f32[b,h,s,s]
      return out=%1
    })",
              R"(
    graph main(%q: f32[b,h,s,64], %k: f32[b,h,s,64]) {
      %0 = fused_matmul(%q, %k) {transpose_b=true} : f32[b,h,s,s]
      return out=%0
    })",
              o);
}

// attention_layout: q, k, v split into heads by transposes are read as [b, s, h, d].
TEST(AttentionLayout, HeadTransposesBecomeLayoutBshd) {
  // The CPU's attention kernel takes bshd (through copies): the pass applies there too,
  // and both graphs run.
  expect_pass("attention_layout", R"(
    graph main(%q: f32[2,5,3,8], %k: f32[2,6,3,8], %v: f32[2,6,3,4], %b: f32[3,5,6]) {
      %0 = transpose(%q) {perm=[0, 2, 1, 3]} : f32[2,3,5,8]
      %1 = transpose(%k) {perm=[0, 2, 1, 3]} : f32[2,3,6,8]
      %2 = transpose(%v) {perm=[0, 2, 1, 3]} : f32[2,3,6,4]
      %3 = attention(%0, %1, %2, %b) {mask="causal"} : f32[2,3,5,4]
      %4 = transpose(%3) {perm=[0, 2, 1, 3]} : f32[2,5,3,4]
      return out=%4
    })",
              R"(
    graph main(%q: f32[2,5,3,8], %k: f32[2,6,3,8], %v: f32[2,6,3,4], %b: f32[3,5,6]) {
      %0 = attention(%q, %k, %v, %b) {layout="bshd", mask="causal"} : f32[2,5,3,4]
      %1 = transpose(%0) {perm=[0, 2, 1, 3]} : f32[2,3,5,4]
      %2 = transpose(%1) {perm=[0, 2, 1, 3]} : f32[2,5,3,4]
      return out=%2
    })");
}

#ifdef RLX_HAVE_CUDA
TEST(AttentionLayout, GradOnADeviceWithItsKernel) {
  // attention_grad has a kernel on cuda only (the CPU decomposes it): the pass is asked
  // for cuda's kernels (registered here, no GPU needed); both graphs run on the CPU.
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  test::PassCheckOptions o;
  o.ctx.device = Device::cuda();
  o.ctx.kernels = &cuda;
  const char* before = R"(
    graph main(%q: f32[1,4,2,8], %k: f32[1,4,2,8], %v: f32[1,4,2,8], %dy: f32[1,4,2,8]) {
      %0 = transpose(%q) {perm=[0, 2, 1, 3]} : f32[1,2,4,8]
      %1 = transpose(%k) {perm=[0, 2, 1, 3]} : f32[1,2,4,8]
      %2 = transpose(%v) {perm=[0, 2, 1, 3]} : f32[1,2,4,8]
      %3 = transpose(%dy) {perm=[0, 2, 1, 3]} : f32[1,2,4,8]
      %4, %5, %6 = attention_grad(%0, %1, %2, %3) {mask="causal"} : f32[1,2,4,8], f32[1,2,4,8], f32[1,2,4,8]
      return dq=%4, dk=%5, dv=%6
    })";
  expect_pass("attention_layout", before, R"(
    graph main(%q: f32[1,4,2,8], %k: f32[1,4,2,8], %v: f32[1,4,2,8], %dy: f32[1,4,2,8]) {
      %0, %1, %2 = attention_grad(%q, %k, %v, %dy) {layout="bshd", mask="causal"} : f32[1,4,2,8], f32[1,4,2,8], f32[1,4,2,8]
      %3 = transpose(%0) {perm=[0, 2, 1, 3]} : f32[1,2,4,8]
      %4 = transpose(%1) {perm=[0, 2, 1, 3]} : f32[1,2,4,8]
      %5 = transpose(%2) {perm=[0, 2, 1, 3]} : f32[1,2,4,8]
      return dq=%3, dk=%4, dv=%5
    })",
              o);
  // On the CPU (no attention_grad kernel) nothing changes.
  expect_pass("attention_layout", before, "");
}
#endif

TEST(AttentionLayout, OtherTransposesStay) {
  // k is transposed another way (keys and features): no layout reads it, nothing changes.
  expect_pass("attention_layout", R"(
    graph main(%q: f32[2,5,3,8], %k: f32[2,3,8,5], %v: f32[2,5,3,8]) {
      %0 = transpose(%q) {perm=[0, 2, 1, 3]} : f32[2,3,5,8]
      %1 = transpose(%k) {perm=[0, 1, 3, 2]} : f32[2,3,5,8]
      %2 = transpose(%v) {perm=[0, 2, 1, 3]} : f32[2,3,5,8]
      %3 = attention(%0, %1, %2) : f32[2,3,5,8]
      return out=%3
    })",
              "");
}

}  // namespace
}  // namespace rlx
