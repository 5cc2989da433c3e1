// The sparse CUDA kernels' host pieces (cuda_common.h): typed errors, the cuSPARSE handle,
// and the CPU's message for a pattern the device found unsound.
#include "cuda_common.h"

#include <array>

#include "csr.h"

namespace rlx::sparse::cuda {

void throw_cuda(cudaError_t e, const char* call) {
  // Clears a non-sticky error, which cudaGetLastError would otherwise hand the next
  // launch's check (an event waited on inside a failed CUDA Graph capture: the eager run
  // that follows reported cudaErrorCapturedEvent at its first kernel).
  cudaGetLastError();
  std::string msg = str_cat("[cuda] expected ", call, " to succeed, got ", cudaGetErrorName(e),
                            ": ", cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) throw OutOfMemory(msg);
  throw DeviceError(msg);
}

void throw_cusparse(cusparseStatus_t s, const char* call) {
  std::string msg = str_cat("[cusparse] expected ", call, " to succeed, got ",
                            cusparseGetErrorName(s), ": ", cusparseGetErrorString(s));
  if (s == CUSPARSE_STATUS_ALLOC_FAILED) throw OutOfMemory(msg);
  throw DeviceError(msg);
}

namespace {
struct DeviceState {
  std::once_flag once;
  std::mutex mu;
  cusparseHandle_t handle = nullptr;
  int sms = 0;
};
DeviceState& state(Device d) {
  static std::array<DeviceState, 64> states;
  if (d.index < 0 || d.index >= 64) fail<ValueError>("sparse", "expected a CUDA device index < 64");
  DeviceState& s = states[size_t(d.index)];
  std::call_once(s.once, [&] {
    RLX_SP_CHECK(cusparseCreate(&s.handle));  // kept for the process
    RLX_SP_CHECK(cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, d.index));
  });
  return s;
}
}  // namespace

Handle cusparse(Device d, cudaStream_t stream) {
  DeviceState& s = state(d);
  Handle h{s.handle, std::unique_lock<std::mutex>(s.mu)};
  RLX_SP_CHECK(cusparseSetStream(h.h, stream));
  return h;
}

int sm_count(Device d) { return state(d).sms; }

// The device said the pattern is unsound: the host check says how, in the CPU's words.
[[noreturn]] void throw_pattern_error(const std::string& op, const Tensor& col_idx,
                                      const Tensor& row_ptr, int64_t cols) {
  Tensor c = col_idx.to(Device::cpu()), r = row_ptr.to(Device::cpu());
  auto run = [&](auto i) {
    using I = decltype(i);
    rlx::sparse::check_pattern<I>(op,
                                  {r.data_as<I>(), c.data_as<I>(), r.numel() - 1, cols, c.numel()});
  };
  col_idx.dtype() == DType::i64 ? run(int64_t{}) : run(int32_t{});
  fail<ValueError>(op, "expected a sound CSR pattern, got one the device check rejected");
}

}  // namespace rlx::sparse::cuda
