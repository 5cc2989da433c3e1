#include "passes/families.h"

namespace rlx::passes {

void register_fusion_passes(PassRegistry&) {}

}  // namespace rlx::passes
