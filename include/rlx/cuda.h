// The CUDA device: whether it is there, and its memory. Tensors move with Tensor::to and
// graphs compile for it with Session(Device::cuda()). A build without the CUDA backend
// answers available() == false and device_count() == 0.
#pragma once

#include <cstddef>

namespace rlx::cuda {

// Whether this build has the CUDA backend and a CUDA device is present.
bool available();
int device_count();

// Waits for the work queued on the device's stream.
void synchronize(int device = 0);

// Device memory comes from a caching, stream-ordered pool: freed blocks stay reserved
// for the next allocation. `reserved` is what the pool holds from the driver, `used` what
// live tensors take.
struct MemoryInfo {
  size_t reserved = 0;
  size_t used = 0;
};
MemoryInfo memory_info(int device = 0);
// Gives the pool's unused memory back to the driver; returns the bytes released.
size_t empty_cache(int device = 0);

}  // namespace rlx::cuda
