// The gradient-check harness on cuda: every op's vjp / jvp / hvp / vmap rules, compiled
// for the GPU (rules, decompositions and CUDA kernels in f64), against finite differences
// and unbatched loops run on the GPU as well — the same tables as tests/autodiff.
#include "op_tables/gradcheck.h"

#include <gtest/gtest.h>

#include "rlx/cuda.h"

namespace rlx::test {
namespace {

const GradTable& table() {
  static const GradTable t = all_grads();
  return t;
}

class CudaGradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGradCheck, MatchesFiniteDifferences) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  set_grad_check_device(Device::cuda());
  int n = 0;
  for (const GradCheck& c : table().checks) {
    if (c.op != GetParam()) continue;
    ++n;
    for (const auto& f : run_grad_check(c)) ADD_FAILURE() << grad_label(c) << ": " << f;
  }
  set_grad_check_device(Device::cpu());
  if (n == 0) GTEST_SKIP() << "no grad checks for op '" << GetParam() << "' (see tests/autodiff)";
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaGradCheck, ::testing::ValuesIn(registered_op_names()),
                         [](const auto& info) { return test_name_of(info.param); });

}  // namespace
}  // namespace rlx::test
