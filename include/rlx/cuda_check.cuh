// The device side of rlx::cuda::deferred_check (rlx/cuda.h), for CUDA sources only: how a
// kernel fills the slot it was given, so that rlx's kernels and a package's agree.
#pragma once

#include <cstdint>

namespace rlx::cuda {

// The first thread to meet bad input takes the slot's flag and records the value and
// which axis (or argument) it belongs to; the runtime passes both to the report.
__device__ __forceinline__ void report_bad(unsigned long long* slot, int64_t value, int64_t axis) {
  if (atomicCAS(slot, 0ull, 1ull) == 0ull) {
    slot[1] = (unsigned long long)(value);
    slot[2] = (unsigned long long)(axis);
  }
}

}  // namespace rlx::cuda
