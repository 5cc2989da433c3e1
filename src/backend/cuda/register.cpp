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
  cuda::register_elementwise(registry);
  cuda::register_cast(registry);
  cuda::register_shape(registry);
  cuda::register_shape_index(registry);
  cuda::register_reduce(registry);
  cuda::register_nn(registry);
  cuda::register_linalg(registry);
  cuda::register_conv(registry);
  cuda::register_pool(registry);
  cuda::register_window_grad(registry);
  cuda::register_region(registry);
  cuda::register_quant(registry);
  cuda::register_llm(registry);
  cuda::register_complex(registry);
  cuda::register_fft(registry);
}

}  // namespace rlx
