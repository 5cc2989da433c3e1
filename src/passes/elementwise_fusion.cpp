#include "passes/families.h"

namespace rlx::passes {

void register_elementwise_fusion(PassRegistry&) {}

}  // namespace rlx::passes
