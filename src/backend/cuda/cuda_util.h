// Host-side pieces shared by the CUDA kernels: error checks that become typed errors, the
// stream a kernel runs on, registration.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "rlx/error.h"
#include "rlx/kernel.h"

namespace rlx::cuda {

// Dtype sets, as the CPU's (cpu_util.h). kAll leaves complex numbers out: only the
// elementwise rows that name kComplex take them (the others' on the host).
enum : unsigned {
  kFloat = 1,
  kInt = 2,
  kBool = 4,
  kNumeric = kFloat | kInt,
  kAll = 7,
  kComplex = 8
};
inline bool dtype_in_set(DType t, unsigned set) {
  if (is_complex(t)) return set & kComplex;
  return is_bool(t) ? (set & kBool) : is_float(t) ? (set & kFloat) : (set & kInt);
}

// Throws OutOfMemory for an allocation failure, DeviceError otherwise, naming the call.
[[noreturn]] void throw_cuda(cudaError_t e, const char* call);
inline void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw_cuda(e, call);
}
#define RLX_CUDA(call) ::rlx::cuda::check((call), #call)
// After a kernel launch: a bad configuration shows here, not at the next call.
#define RLX_CUDA_LAUNCHED(name) ::rlx::cuda::check(cudaGetLastError(), name)

inline cudaStream_t stream_of(const KernelContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

// Index checks that do not wait for the device. A kernel that may meet bad indices gets a
// slot (flag, index, axis), clear when handed out (each read clears what it copied), to
// report the first one in (report_bad, kernels.cuh); the runtime reads the run's slots
// once, at its end (DeviceBackend::finish_checks, or after a CUDA Graph's replay; under a
// cuda::Pipeline once the device has passed it), and calls `report` for a slot that was
// set: it throws the op's error.
using BadIndexReport = std::function<void(int64_t index, int64_t axis)>;
unsigned long long* deferred_check(Device device, BadIndexReport report);

// The multiprocessors of the current device (for grid sizes).
int sm_count();

// Whether kernels may launch programmatically dependent (launch_pdl, kernels.cuh): on
// sm_90 and later, unless settings().cuda_pdl is off (RLX_PDL=0).
bool pdl_enabled();

// The dims of `shape` with size-1 dims dropped and neighbours merged wherever every
// operand's strides allow (row-major): the merged sizes, and each operand's strides over
// them. Index arithmetic then runs over as few dims as the operands permit.
struct MergedDims {
  std::vector<int64_t> size;
  std::vector<std::vector<int64_t>> stride;  // per operand
};
MergedDims merge_dims(const std::vector<int64_t>& shape,
                      const std::vector<const std::vector<int64_t>*>& strides);

// String tensors (rlx/strings.h) hold host pointers: no CUDA kernel takes them, so string
// nodes of a GPU graph run through the host delegate on the CPU kernels.
inline void add_kernel(KernelRegistry& r, std::string op, KernelFn fn, SupportsFn supports = {},
                       KernelFlags flags = {}) {
  SupportsFn no_strings = [s = std::move(supports)](const KernelQuery& q) {
    for (const auto* ts : {&q.inputs, &q.outputs})
      for (const TensorType& t : *ts)
        if (is_string(t.dtype)) return false;
    return !s || s(q);
  };
  r.add(std::move(op), DeviceKind::cuda, std::move(fn), std::move(no_strings), flags);
}

}  // namespace rlx::cuda
