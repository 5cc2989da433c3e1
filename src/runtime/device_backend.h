// What the runtime needs from a device other than the CPU: memory, copies, a stream. The
// CUDA backend implements it (backend/cuda/runtime.cpp); the core reaches it only through
// device_backend(), so nothing outside backend/cuda includes a CUDA header.
#pragma once

#include <memory>

#include "rlx/device.h"
#include "rlx/tensor.h"

namespace rlx::detail {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Uninitialised device memory, released to the device's pool when the last user lets go.
  virtual std::shared_ptr<Buffer> allocate(size_t bytes, Device device) = 0;
  // Copies src's elements into dst: same dtype and shape, any layouts, at least one of
  // them on this backend's device. Returns once dst may be read on its own device (a
  // copy to the host has finished; a copy on the device is ordered on its stream).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  // The stream kernels for `device` run on (cudaStream_t for CUDA).
  virtual void* stream(Device device) = 0;
  virtual void synchronize(Device device) = 0;
};

// The backend of a non-CPU device; throws NotSupported when this build has none or the
// device is not present.
DeviceBackend& device_backend(Device device);

// Set by the CUDA backend when it is built in (backend/cuda/runtime.cpp).
DeviceBackend* cuda_backend();

}  // namespace rlx::detail
