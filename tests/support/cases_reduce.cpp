#include "support/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> reduce_cases() {
  return {};
}

}  // namespace rlx::testing
