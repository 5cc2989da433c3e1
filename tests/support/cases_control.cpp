#include "support/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> control_cases() {
  return {};
}

}  // namespace rlx::testing
