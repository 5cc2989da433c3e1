// norm_fusion: a residual add and a cast around layer_norm become fused_layer_norm;
// cast_batching: the casts of arguments become one fused_cast. Both only where the device
// has the fused op's kernel (cuda's registry, asked without a GPU); both graphs run on the
// CPU, which decomposes the fused ops.
#include <gtest/gtest.h>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/text.h"

namespace rlx {
namespace {

using test::expect_pass;

// A pre-norm block's stream: x1 = x + h feeds the norm and the next residual add.
const char* kBlock = R"(
    graph main(%x: f32[2,3,8], %h: f32[2,3,8], param %g: f32[8], param %b: f32[8]) {
      %0 = add(%x, %h) : f32[2,3,8]
      %1 = layer_norm(%0, %g, %b) {epsilon=1e-05} : f32[2,3,8]
      %2 = cast(%1) {dtype=bf16} : bf16[2,3,8]
      %3 = cast(%2) {dtype=f32} : f32[2,3,8]
      %4 = add(%0, %3) : f32[2,3,8]
      return out=%4
    })";

#ifdef RLX_HAVE_CUDA
test::PassCheckOptions on_cuda(const KernelRegistry& cuda) {
  return test::on_device(Device::cuda(), cuda);
}

TEST(NormFusion, ResidualAddAndCastJoinTheNorm) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  expect_pass("norm_fusion", kBlock, R"(
    graph main(%x: f32[2,3,8], %h: f32[2,3,8], param %g: f32[8], param %b: f32[8]) {
      %0, %1 = fused_layer_norm(%x, %h, %g, %b) {epsilon=1e-05, out_dtype="bf16", residual=true} : bf16[2,3,8], f32[2,3,8]
      %2 = cast(%0) {dtype=f32} : f32[2,3,8]
      %3 = add(%1, %2) : f32[2,3,8]
      return out=%3
    })",
              on_cuda(cuda));
}

TEST(NormFusion, EachHalfAlone) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  // The norm's output has a second reader: the add joins, the cast does not.
  expect_pass("norm_fusion", R"(
    graph main(%x: f32[4,8], %h: f32[4,8]) {
      %0 = add(%x, %h) : f32[4,8]
      %1 = layer_norm(%0) : f32[4,8]
      %2 = cast(%1) {dtype=f16} : f16[4,8]
      %3 = mul(%1, %0) : f32[4,8]
      return a=%2, b=%3
    })",
              R"(
    graph main(%x: f32[4,8], %h: f32[4,8]) {
      %0, %1 = fused_layer_norm(%x, %h) {residual=true} : f32[4,8], f32[4,8]
      %2 = cast(%0) {dtype=f16} : f16[4,8]
      %3 = mul(%0, %1) : f32[4,8]
      return a=%2, b=%3
    })",
              on_cuda(cuda));
  // A broadcasting add stays (the kernel reads two rows alike); the cast joins.
  expect_pass("norm_fusion", R"(
    graph main(%x: f32[4,8], %p: f32[8]) {
      %0 = add(%x, %p) : f32[4,8]
      %1 = layer_norm(%0) : f32[4,8]
      %2 = cast(%1) {dtype=bf16} : bf16[4,8]
      return out=%2
    })",
              R"(
    graph main(%x: f32[4,8], %p: f32[8]) {
      %0 = add(%x, %p) : f32[4,8]
      %1 = fused_layer_norm(%0) {out_dtype="bf16"} : bf16[4,8]
      return out=%1
    })",
              on_cuda(cuda));
}

TEST(NormFusion, WhatStays) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  // The sum is read before the norm (that reader would lose it), and the norm feeds no
  // cast: nothing to gain.
  expect_pass("norm_fusion", R"(
    graph main(%x: f32[4,8], %h: f32[4,8]) {
      %0 = add(%x, %h) : f32[4,8]
      %1 = exp(%0) : f32[4,8]
      %2 = layer_norm(%0) : f32[4,8]
      %3 = add(%1, %2) : f32[4,8]
      return out=%3
    })",
              "", on_cuda(cuda));
  // Rows longer than the kernel keeps in registers are left to layer_norm's own kernel.
  expect_pass("norm_fusion", R"(
    graph main(%x: f32[2,2048]) {
      %0 = layer_norm(%x) : f32[2,2048]
      %1 = cast(%0) {dtype=bf16} : bf16[2,2048]
      return out=%1
    })",
              "", on_cuda(cuda));
}

TEST(CastBatching, ArgumentCastsBecomeOneOp) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  // The weights' casts join at the first one; a cast of a computed value, a lone f16
  // cast and a cast to the same dtype stay.
  expect_pass("cast_batching", R"(
    graph main(%x: f32[2,4], param %w1: f32[4,4], param %w2: f32[4,3], param %b: f32[3]) {
      %0 = cast(%x) {dtype=bf16} : bf16[2,4]
      %1 = cast(%w1) {dtype=bf16} : bf16[4,4]
      %2 = matmul(%0, %1) : bf16[2,4]
      %3 = cast(%w2) {dtype=bf16} : bf16[4,3]
      %4 = matmul(%2, %3) : bf16[2,3]
      %5 = cast(%4) {dtype=f32} : f32[2,3]
      %6 = cast(%b) {dtype=f16} : f16[3]
      %7 = cast(%b) {dtype=f32} : f32[3]
      %8 = add(%5, %7) : f32[2,3]
      return out=%8, h=%6
    })",
              R"(
    graph main(%x: f32[2,4], param %w1: f32[4,4], param %w2: f32[4,3], param %b: f32[3]) {
      %0, %1, %2 = fused_cast(%x, %w1, %w2) {dtype=bf16} : bf16[2,4], bf16[4,4], bf16[4,3]
      %3 = matmul(%0, %1) : bf16[2,4]
      %4 = matmul(%3, %2) : bf16[2,3]
      %5 = cast(%4) {dtype=f32} : f32[2,3]
      %6 = cast(%b) {dtype=f16} : f16[3]
      %7 = cast(%b) {dtype=f32} : f32[3]
      %8 = add(%5, %7) : f32[2,3]
      return out=%8, h=%6
    })",
              on_cuda(cuda));
}
#endif

TEST(CastBatching, NothingOnTheCpu) {
  expect_pass("cast_batching", R"(
    graph main(param %w1: f32[4,4], param %w2: f32[4,3]) {
      %0 = cast(%w1) {dtype=bf16} : bf16[4,4]
      %1 = cast(%w2) {dtype=bf16} : bf16[4,3]
      return a=%0, b=%1
    })",
              "");
}

TEST(NormFusion, NothingOnTheCpu) {
  // The CPU has no fused_layer_norm kernel: the decomposition would only come back.
  expect_pass("norm_fusion", kBlock, "");
}

}  // namespace
}  // namespace rlx
