// rlx/parallel.h: the CPU kernels' parallel_for (cpu_util.h), for code outside the backend.
#include "rlx/parallel.h"

#include "backend/cpu/cpu_util.h"

namespace rlx {

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  cpu::parallel_for(n, grain, f);
}

int parallel_threads() { return cpu::threads_here(); }

}  // namespace rlx
