// CPU kernels of the sliding-window backward ops (src/ops/window_grad.cpp).
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"

namespace rlx::cpu {

void register_window_grad(KernelRegistry&) {}

}  // namespace rlx::cpu
