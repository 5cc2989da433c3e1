#include "runtime/device_backend.h"

#include "rlx/cuda.h"

namespace rlx::detail {

DeviceBackend& device_backend(Device device) {
  if (device.kind == DeviceKind::cuda) {
    DeviceBackend* b = cuda_backend();
    int n = cuda::device_count();
    if (b && device.index >= 0 && device.index < n) return *b;
    fail<NotSupported>(
        "device", "expected CUDA device ", device.index, ", got ",
        b ? str_cat(n, " CUDA devices present") : "a build without the CUDA backend");
  }
  fail<NotSupported>("device", "expected a device with a backend, got ", device.str());
}

}  // namespace rlx::detail
