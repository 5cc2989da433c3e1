#include <mutex>
#include <set>

#include "backend/cpu/families.h"
#include "rlx/session.h"

namespace rlx {

void register_cpu_kernels(KernelRegistry& registry) {
  static std::mutex mu;
  static std::set<const KernelRegistry*> done;
  std::lock_guard lock(mu);
  if (!done.insert(&registry).second) return;
  cpu::register_elementwise(registry);
  cpu::register_reduce(registry);
  cpu::register_linalg(registry);
  cpu::register_shape(registry);
  cpu::register_conv(registry);
  cpu::register_pool(registry);
  cpu::register_nn(registry);
  cpu::register_random(registry);
  cpu::register_control(registry);
  cpu::register_autodiff(registry);
  cpu::register_window_grad(registry);
  cpu::register_fused(registry);
  cpu::register_quant(registry);
  cpu::register_llm(registry);
  cpu::register_blocked(registry);

  cpu::register_region(registry);
}

}  // namespace rlx
