// layout_sinking: transposes folded into matmul operands, and transpose pairs cancelled.
#include <gtest/gtest.h>

#include "rlx/rlx.h"
#include "rlx/text.h"
#include "support/pass_check.h"

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
  // A transpose of other dims; an integer matmul; an elementwise op with a full-size second
  // operand; an elementwise op read elsewhere; a chain ending in no identity.
  expect_pass("layout_sinking", R"(
    graph main(%a: f32[3,2,5], %b: f32[5,4], %i: i32[4,3], %j: i32[4,2], %y: f32[3,2]) {
      %0 = transpose(%a) {perm=[1, 0, 2]} : f32[2,3,5]
      %1 = matmul(%0, %b) : f32[2,3,4]
      %2 = transpose(%i) {perm=[1, 0]} : i32[3,4]
      %3 = matmul(%2, %j) : i32[3,2]
      %4 = transpose(%y) {perm=[1, 0]} : f32[2,3]
      %5 = add(%4, %4) : f32[2,3]
      %6 = transpose(%5) {perm=[1, 0]} : f32[3,2]
      %7 = transpose(%y) {perm=[1, 0]} : f32[2,3]
      %8 = exp(%7) : f32[2,3]
      %9 = transpose(%8) {perm=[1, 0]} : f32[3,2]
      %10 = transpose(%a) {perm=[2, 0, 1]} : f32[5,3,2]
      %11 = neg(%10) : f32[5,3,2]
      %12 = transpose(%11) {perm=[0, 2, 1]} : f32[5,2,3]
      return o1=%1, o3=%3, o6=%6, o8=%8, o9=%9, o12=%12
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

}  // namespace
}  // namespace rlx
