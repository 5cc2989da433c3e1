#include "passes/families.h"

namespace rlx::passes {

void register_cleanup_passes(PassRegistry&) {}

}  // namespace rlx::passes
