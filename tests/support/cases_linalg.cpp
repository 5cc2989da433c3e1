#include "support/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> linalg_cases() {
  return {};
}

}  // namespace rlx::testing
