// The CPU's thread pool for kernel writers (ONNX-only kernels, downstream packages): the
// loop rlx's own CPU kernels split their work with.
#pragma once

#include <cstdint>
#include <functional>

namespace rlx {

// Runs f(begin, end) over [0, n) on the CPU threads (OpenMP), in at most one chunk per
// thread, each of at least `grain` items; a small range, or a call from inside a parallel
// region, runs inline on the caller. An exception thrown by f is rethrown on the calling
// thread once every chunk has ended. f is called once per chunk: keep per-chunk scratch
// inside it.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

// The threads parallel_for would use from here (1 inside a parallel region).
int parallel_threads();

}  // namespace rlx
