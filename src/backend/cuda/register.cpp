#include <mutex>
#include <set>

#include "backend/cuda/families.h"
#include "rlx/session.h"

namespace rlx {

void register_cuda_kernels(KernelRegistry& registry) {
  static std::mutex mu;
  static std::set<const KernelRegistry*> done;
  std::lock_guard lock(mu);
  if (!done.insert(&registry).second) return;
  gpu::register_elementwise(registry);
  gpu::register_cast(registry);
  gpu::register_shape(registry);
  gpu::register_shape_index(registry);
  gpu::register_reduce(registry);
  gpu::register_nn(registry);
  gpu::register_linalg(registry);
  gpu::register_conv(registry);
  gpu::register_pool(registry);
  gpu::register_window_grad(registry);
  gpu::register_region(registry);
}

}  // namespace rlx
