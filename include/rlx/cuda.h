// The CUDA device: whether it is there, and its memory. Tensors move with Tensor::to and
// graphs compile for it with Session(Device::cuda()). A build without the CUDA backend
// answers available() == false and device_count() == 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

namespace rlx {
struct KernelContext;  // rlx/kernel.h
class Tensor;          // rlx/tensor.h
}  // namespace rlx

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

// How matmul computes f32 products on the GPU (RLX_CUDA_F32_GEMM sets it at start-up):
// "auto" (the default): large products on the tensor cores, as 3xTF32 summed so that its
// error stays SGEMM's (tests/cuda/linalg_f32_test.cpp checks it), smaller ones as cuBLAS
// SGEMM; "sgemm": always SGEMM; "tc": the tensor cores wherever they fit. RLX_CUDA_TF32=1
// overrides all three with one TF32 product (~1e-3 relative error). Graphs compiled
// afterwards take the new mode (it empties the compile cache); one compiled before may
// keep the old (its CUDA Graph replays the kernels it captured). Another name is a
// ValueError.
void set_f32_matmul(std::string_view mode);

// A mark in a device's stream (rlx queues a device's work on one stream), for timing
// device work from the host without waiting after each step: record() marks the end of
// the work queued so far, elapsed_ms(end) is the device time from this mark to `end`.
// A NotSupported error where there is no such device (as Session(Device::cuda(i)) gives);
// a ValueError for a mark used before it was recorded, or two marks of two devices.
class Event {
 public:
  explicit Event(int device = 0);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record();
  // Whether the device has passed the mark (false before record()).
  bool done() const;
  // Waits until the device has passed the mark.
  void synchronize() const;
  // Milliseconds of device time from this mark to `end`; waits for `end`.
  double elapsed_ms(const Event& end) const;
  int device() const { return device_; }

 private:
  void* event_ = nullptr;
  int device_ = 0;
  bool recorded_ = false;
};

// For a loop that queues its next step before it reads the last one's result, so that
// the device never waits for the host (a decode loop: step t + 1 is queued while step t's
// token comes back). read_back(t) queues a copy of a device tensor into pinned host
// memory and returns at once; take() waits for the oldest copy still queued and returns
// it. While a Pipeline lives, CUDA Graph replays on its thread do not wait to read their
// kernels' bad-input checks (deferred_check below): take() reads those the device has
// passed, finish() all of them, and the first that was set throws there. Use it on the
// thread that made it. A NotSupported error where there is no such device.
class Pipeline {
 public:
  explicit Pipeline(int device = 0);
  ~Pipeline();  // waits for what it queued; a check set and not yet read is dropped
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Queues a copy of `t` (on this pipeline's device) to the host.
  void read_back(const Tensor& t);
  // Waits for the oldest queued copy and returns it (a host tensor of its own); a
  // ValueError when nothing is queued.
  Tensor take();
  size_t queued() const;
  // Waits for the device and reads every deferred check.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// For a CUDA kernel (a downstream package's too) that may meet bad input, say an index out
// of range, and should not wait for the device to find out: a slot of three words in device
// memory, {flag, value, axis}, clear when handed out. The kernel
// skips what it cannot read, and its first thread to meet bad input takes the flag
// (atomicCAS(slot, 0, 1) == 0) and writes value and axis: rlx::cuda::report_bad in
// rlx/cuda_check.cuh does that. The runtime reads the slots once,
// at the end of the run (or after each replay of a CUDA Graph; under a Pipeline, once the
// device has passed the replay), and calls report(value,
// axis) for a slot that was set: report throws the op's error, which the run then throws.
// A DeviceError where ctx is not a CUDA kernel's.
unsigned long long* deferred_check(const KernelContext& ctx,
                                   std::function<void(int64_t value, int64_t axis)> report);

}  // namespace rlx::cuda
