#include "support/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> shape_cases() {
  return {};
}

}  // namespace rlx::testing
