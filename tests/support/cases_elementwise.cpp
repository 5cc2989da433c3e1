#include "support/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> elementwise_cases() {
  return {};
}

}  // namespace rlx::testing
