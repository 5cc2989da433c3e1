// Host-side pieces shared by the sparse CUDA kernels: status checks that become rlx's
// typed errors naming the call, the cuSPARSE handle, scratch memory from rlx's device pool
// (Tensor::empty on the kernel's device: stream-ordered, no cudaMalloc per call), and the
// pattern check that runs on the device before a library reads the pattern.
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>

#include "rlx/rlx.h"

namespace rlx::sparse::cuda {

[[noreturn]] void throw_cuda(cudaError_t e, const char* call);
[[noreturn]] void throw_cusparse(cusparseStatus_t s, const char* call);
inline void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw_cuda(e, call);
}
inline void check(cusparseStatus_t s, const char* call) {
  if (s != CUSPARSE_STATUS_SUCCESS) throw_cusparse(s, call);
}
#define RLX_SP_CHECK(call) ::rlx::sparse::cuda::check((call), #call)
// After a kernel launch: a bad configuration shows here, not at the next call.
#define RLX_SP_LAUNCHED(name) ::rlx::sparse::cuda::check(cudaGetLastError(), name)

inline cudaStream_t stream_of(const KernelContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

// The device's cuSPARSE handle (made once, kept for the process), bound to `stream`. The
// lock serialises the calls that share it.
struct Handle {
  cusparseHandle_t h;
  std::unique_lock<std::mutex> lock;
};
Handle cusparse(Device d, cudaStream_t stream);

int sm_count(Device d);

// Device scratch from rlx's pool, freed (stream-ordered) when the tensor goes.
inline Tensor scratch(DType t, int64_t n, Device d) {
  return Tensor::empty(t, {std::max<int64_t>(n, 1)}, d);
}

// Checks a CSR pattern on the device (row_ptr from 0 to nnz and non-decreasing, columns
// in [0, cols)); on a bad one throws the CPU's ValueError for it. Syncs the stream.
void check_pattern(const std::string& op, const Tensor& col_idx, const Tensor& row_ptr,
                   int64_t cols, cudaStream_t s);
// Throws the CPU's ValueError for a pattern the device found unsound (copies it back).
[[noreturn]] void throw_pattern_error(const std::string& op, const Tensor& col_idx,
                                      const Tensor& row_ptr, int64_t cols);

template <class T>
constexpr cudaDataType value_type() {
  return std::is_same_v<T, double> ? CUDA_R_64F : CUDA_R_32F;
}
template <class I>
constexpr cusparseIndexType_t index_type() {
  return std::is_same_v<I, int64_t> ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I;
}

// Calls f(T{}, I{}) with T = float / double and I = int32_t / int64_t.
template <class F>
void dispatch(DType value, DType index, F&& f) {
  bool wide = index == DType::i64;
  if (value == DType::f64)
    wide ? f(double{}, int64_t{}) : f(double{}, int32_t{});
  else
    wide ? f(float{}, int64_t{}) : f(float{}, int32_t{});
}

}  // namespace rlx::sparse::cuda
