#include "runtime/device_backend.h"

namespace rlx::detail {

BuiltinBackends& builtin_backends() {
  static BuiltinBackends b;
  return b;
}

DeviceBackend& device_backend(Device device) {
  if (device.kind == DeviceKind::cuda) {
    const BuiltinBackends& bb = builtin_backends();
    DeviceBackend* b = bb.cuda ? bb.cuda() : nullptr;
    int n = b && bb.cuda_count ? bb.cuda_count() : 0;
    if (b && device.index >= 0 && device.index < n) return *b;
    fail<NotSupported>(
        "device", "expected CUDA device ", device.index, ", got ",
        b ? str_cat(n, " CUDA devices present") : "a build without the CUDA backend");
  }
  fail<NotSupported>("device", "expected a device with a backend, got ", device.str());
}

}  // namespace rlx::detail
