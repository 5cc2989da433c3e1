#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"

namespace rlx::cpu {

void register_elementwise(KernelRegistry&) {}

}  // namespace rlx::cpu
