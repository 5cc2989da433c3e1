#include "passes/families.h"

namespace rlx::passes {

void register_layout_passes(PassRegistry&) {}

}  // namespace rlx::passes
