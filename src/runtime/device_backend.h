// What the runtime needs from a device other than the CPU: memory, copies, a stream. The
// CUDA backend implements it (backend/cuda/runtime.cpp); the core reaches it only through
// device_backend(), so nothing outside backend/cuda includes a CUDA header.
#pragma once

#include <memory>

#include "rlx/device.h"
#include "rlx/kernel.h"
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

  // Graphs (CUDA Graphs): between begin_capture and end_capture the work queued on the
  // device's stream is recorded, not run. end_capture returns the recorded work ready to
  // replay (checks included), or null when the capture failed: a call that cannot be recorded (a
  // wait for the device, a copy to pageable memory) or memory allocated during it and not freed in
  // it. Either way the stream runs normally again afterwards.
  virtual bool begin_capture(Device) { return false; }
  virtual std::shared_ptr<void> end_capture(Device) { return nullptr; }
  virtual void replay(const void* graph, Device device) = 0;
  // Reads the checks kernels left for the end of the run (bad indices met on the device)
  // and throws the first failure; with !report it only forgets them (a run that failed).
  virtual void finish_checks(Device, bool report) { (void)report; }
  // Profiling (RLX_PROFILE): a mark queued on the device's stream, and the seconds between
  // two marks once the later has passed. Timing on the device, not the host, lets the
  // host queue ahead as it does in a real run (no wait after each kernel).
  virtual std::shared_ptr<void> mark(Device) { return nullptr; }
  virtual double seconds_between(const void* from, const void* to) {
    (void)from, (void)to;
    return 0;
  }
};

// The backend of a non-CPU device; throws NotSupported when this build has none or the
// device is not present.
DeviceBackend& device_backend(Device device);

// What the backends (a layer above the runtime) give it, filled in once at start-up by
// backend/builtin.cpp: the CPU's kernels (every session needs them: they serve the host
// path), the CUDA backend's kernels and device, each null where the build has none.
struct BuiltinBackends {
  void (*cpu_kernels)(KernelRegistry&) = nullptr;
  void (*cuda_kernels)(KernelRegistry&) = nullptr;
  DeviceBackend* (*cuda)() = nullptr;
  int (*cuda_count)() = nullptr;
};
BuiltinBackends& builtin_backends();

// The CUDA backend's DeviceBackend (backend/cuda/runtime.cpp; null without one).
DeviceBackend* cuda_backend();

}  // namespace rlx::detail
