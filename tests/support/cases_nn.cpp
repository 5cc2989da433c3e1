#include "support/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> nn_cases() {
  return {};
}

}  // namespace rlx::testing
