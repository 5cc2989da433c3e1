// Ops that exist for the transforms: shape-from-a-value reshapes and broadcasts (rules
// must work on symbolic shapes), stop_gradient, and checkpoint (remat segment markers).
#include "ops/families.h"
#include "ops/infer_util.h"

namespace rlx::detail {

void register_autodiff_ops(OpRegistry&) {}

}  // namespace rlx::detail
