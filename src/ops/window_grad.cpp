// Backward ops of the sliding-window ops (pools, resize) whose vjp is not a composition
// of other core ops.
#include "ops/families.h"
#include "ops/infer_util.h"

namespace rlx::detail {

void register_window_grad_ops(OpRegistry&) {}

}  // namespace rlx::detail
