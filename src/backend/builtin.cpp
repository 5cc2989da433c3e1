// The backends built into librlx, handed to the runtime below them at start-up
// (runtime/device_backend.h): the runtime calls up the layers only through this table.
#include "rlx/cuda.h"
#include "rlx/session.h"
#include "runtime/device_backend.h"

namespace rlx::detail {
namespace {

const bool installed = [] {
  BuiltinBackends& b = builtin_backends();
  b.cpu_kernels = [](KernelRegistry& r) { register_cpu_kernels(r); };
  b.cuda_kernels = [](KernelRegistry& r) { register_cuda_kernels(r); };
  b.cuda = cuda_backend;
  b.cuda_count = cuda::device_count;
  return true;
}();

}  // namespace
}  // namespace rlx::detail

// A static librlx keeps this file through the CMake target's --undefined of this symbol
// (nothing below the backends names it, so the linker would drop it and its table).
extern "C" const bool* rlx_builtin_backends() { return &rlx::detail::installed; }
