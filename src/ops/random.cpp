#include "ops/families.h"
#include "ops/infer_util.h"

namespace rlx::detail {

void register_random_ops(OpRegistry& r) { (void)r; }

}  // namespace rlx::detail
