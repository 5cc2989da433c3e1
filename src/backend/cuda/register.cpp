#include <mutex>

#include "backend/cuda/families.h"
#include "rlx/session.h"

namespace rlx {

void register_cuda_kernels(KernelRegistry& registry) {
  // Once per registry, by what it holds: a set of addresses took a new registry at a
  // freed one's address (a test's local registry) for one already filled.
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (registry.has("cast", DeviceKind::cuda)) return;
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
  gpu::register_quant(registry);
  gpu::register_llm(registry);
}

}  // namespace rlx
