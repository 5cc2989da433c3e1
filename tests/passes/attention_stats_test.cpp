// attention_stats: a forward attention and its attention_grad on the same q, k, v become
// attention_lse and an attention_grad that reads its y and lse, where the device has both
// kernels (cuda's registry, asked without a GPU: 16-bit, head dim 64). Both graphs run on
// the CPU (attention_lse has a CPU kernel; the CPU decomposes attention_grad).
#include <gtest/gtest.h>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "rlx/text.h"

namespace rlx {
namespace {

using test::expect_pass;

const char* kStep = R"(
    graph main(%q: bf16[1,2,4,64], %k: bf16[1,2,4,64], %v: bf16[1,2,4,64], %dy: bf16[1,2,4,64]) {
      %0 = attention(%q, %k, %v) {mask="causal"} : bf16[1,2,4,64]
      %1, %2, %3 = attention_grad(%q, %k, %v, %dy) {mask="causal"} : bf16[1,2,4,64], bf16[1,2,4,64], bf16[1,2,4,64]
      return y=%0, dq=%1, dk=%2, dv=%3
    })";

#ifdef RLX_HAVE_CUDA
test::PassCheckOptions on_cuda(const KernelRegistry& cuda) {
  return test::on_device(Device::cuda(), cuda);
}

TEST(AttentionStats, TheBackwardReadsTheForwardsStatistics) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  expect_pass("attention_stats", kStep, R"(
    graph main(%q: bf16[1,2,4,64], %k: bf16[1,2,4,64], %v: bf16[1,2,4,64], %dy: bf16[1,2,4,64]) {
      %0, %1 = attention_lse(%q, %k, %v) {mask="causal"} : bf16[1,2,4,64], f32[1,2,4]
      %2, %3, %4 = attention_grad(%q, %k, %v, %dy, %0, %1) {mask="causal"} : bf16[1,2,4,64], bf16[1,2,4,64], bf16[1,2,4,64]
      return y=%0, dq=%2, dk=%3, dv=%4
    })",
              on_cuda(cuda));
}

TEST(AttentionStats, LayoutBshd) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  expect_pass("attention_stats", R"(
    graph main(%q: f16[2,5,3,64], %k: f16[2,5,3,64], %v: f16[2,5,3,64], %dy: f16[2,5,3,64]) {
      %0 = attention(%q, %k, %v) {layout="bshd"} : f16[2,5,3,64]
      %1, %2, %3 = attention_grad(%q, %k, %v, %dy) {layout="bshd"} : f16[2,5,3,64], f16[2,5,3,64], f16[2,5,3,64]
      %4 = add(%0, %1) : f16[2,5,3,64]
      return a=%4, dk=%2, dv=%3
    })",
              R"(
    graph main(%q: f16[2,5,3,64], %k: f16[2,5,3,64], %v: f16[2,5,3,64], %dy: f16[2,5,3,64]) {
      %0, %1 = attention_lse(%q, %k, %v) {layout="bshd"} : f16[2,5,3,64], f32[2,3,5]
      %2, %3, %4 = attention_grad(%q, %k, %v, %dy, %0, %1) {layout="bshd"} : f16[2,5,3,64], f16[2,5,3,64], f16[2,5,3,64]
      %5 = add(%0, %2) : f16[2,5,3,64]
      return a=%5, dk=%3, dv=%4
    })",
              on_cuda(cuda));
}

TEST(AttentionStats, OnlyWhereTheKernelsTakeThem) {
  KernelRegistry cuda;
  register_cuda_kernels(cuda);
  // f32 and head dim 32: cuda's backward recomputes by GEMMs there, so nothing to keep.
  expect_pass("attention_stats", R"(
    graph main(%q: f32[1,2,4,64], %k: f32[1,2,4,64], %v: f32[1,2,4,64], %dy: f32[1,2,4,64]) {
      %0 = attention(%q, %k, %v) : f32[1,2,4,64]
      %1, %2, %3 = attention_grad(%q, %k, %v, %dy) : f32[1,2,4,64], f32[1,2,4,64], f32[1,2,4,64]
      return y=%0, dq=%1, dk=%2, dv=%3
    })",
              "", on_cuda(cuda));
  expect_pass("attention_stats", R"(
    graph main(%q: bf16[1,2,4,32], %k: bf16[1,2,4,32], %v: bf16[1,2,4,32], %dy: bf16[1,2,4,32]) {
      %0 = attention(%q, %k, %v) : bf16[1,2,4,32]
      %1, %2, %3 = attention_grad(%q, %k, %v, %dy) : bf16[1,2,4,32], bf16[1,2,4,32], bf16[1,2,4,32]
      return y=%0, dq=%1, dk=%2, dv=%3
    })",
              "", on_cuda(cuda));
  // Another mask, or other inputs: not this forward's statistics.
  expect_pass("attention_stats", R"(
    graph main(%q: bf16[1,2,4,64], %k: bf16[1,2,4,64], %v: bf16[1,2,4,64], %dy: bf16[1,2,4,64]) {
      %0 = attention(%q, %k, %v) : bf16[1,2,4,64]
      %1, %2, %3 = attention_grad(%q, %k, %v, %dy) {mask="causal"} : bf16[1,2,4,64], bf16[1,2,4,64], bf16[1,2,4,64]
      %4, %5, %6 = attention_grad(%q, %v, %k, %dy) : bf16[1,2,4,64], bf16[1,2,4,64], bf16[1,2,4,64]
      return y=%0, dq=%1, dk=%2, dv=%3, a=%4, b=%5, c=%6
    })",
              "", on_cuda(cuda));
}
#endif

TEST(AttentionStats, NothingOnTheCpu) {
  // The CPU has no attention_grad kernel: its decomposition recomputes the probabilities.
  expect_pass("attention_stats", kStep, "");
}

}  // namespace
}  // namespace rlx
