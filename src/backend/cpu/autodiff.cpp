// CPU kernels of the autodiff helper ops (src/ops/autodiff.cpp).
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"

namespace rlx::cpu {

void register_autodiff(KernelRegistry&) {}

}  // namespace rlx::cpu
