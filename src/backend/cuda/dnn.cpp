// cuDNN's errors and handles (dnn.h).
#include "backend/cuda/dnn.h"

#ifdef RLX_HAVE_CUDNN
#include <array>

#include "backend/cuda/cuda_util.h"

namespace rlx::cuda::dnn {

void check(cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string msg = str_cat("[cudnn] expected ", call, " to succeed, got ", cudnnGetErrorString(s));
  if (detail[0]) msg += str_cat(" (", detail, ")");
  if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    throw OutOfMemory(msg);
  throw DeviceError(msg);
}

Handle& handle(Device d) {
  static std::array<std::once_flag, 64> once;
  static std::array<Handle*, 64> handles{};
  std::call_once(once[size_t(d.index)], [&] {
    RLX_CUDA(cudaSetDevice(d.index));
    auto* h = new Handle;  // kept for the process, as the device's buffers are
    RLX_DNN(cudnnCreate(&h->handle));
    handles[size_t(d.index)] = h;
  });
  return *handles[size_t(d.index)];
}

}  // namespace rlx::cuda::dnn
#endif
