#include "passes/families.h"

namespace rlx::passes {

void register_precision_passes(PassRegistry&) {}

}  // namespace rlx::passes
