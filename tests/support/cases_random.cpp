#include "support/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> random_cases() {
  return {};
}

}  // namespace rlx::testing
