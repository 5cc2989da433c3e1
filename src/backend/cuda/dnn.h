// cuDNN for the CUDA backend: typed errors, one handle per device (conv.cpp, attention's
// cudnn path in attention_cudnn.cpp). Only where the build found cuDNN (RLX_HAVE_CUDNN).
#pragma once

#ifdef RLX_HAVE_CUDNN
#include <cudnn.h>

#include <mutex>

#include "rlx/device.h"

namespace rlx::cuda::dnn {

// A failed call as a typed error naming it (OutOfMemory for cuDNN's allocation failures).
void check(cudnnStatus_t s, const char* call);
#define RLX_DNN(call) ::rlx::cuda::dnn::check((call), #call)

inline bool not_supported(cudnnStatus_t s) {
  return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
}

// The device's handle, made on first use. Its stream is set per call: hold `mu` from
// cudnnSetStream to the last call on it.
struct Handle {
  cudnnHandle_t handle = nullptr;
  std::mutex mu;
};
Handle& handle(Device d);

}  // namespace rlx::cuda::dnn
#endif

#include <cuda_runtime.h>

#include "rlx/tensor.h"

namespace rlx::cuda {

// attention's forward through cuDNN's fused flash attention (attention_cudnn.cpp): y =
// softmax(q k^T * scale + bias, masked) v on [b, h, s, d] (or [n, s, d]) views, the bias
// (may be null) [b, h, sq, sk] broadcast over b and h, the mask causal (window > 0: also
// keys fewer than `window` before the query's) or none; with lse the rows' log-sum-exp.
// False where cuDNN does not take the problem (or the build has no cuDNN); the caller then
// runs its own kernel.
bool cudnn_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* bias,
                     const Tensor& y, float* lse, double scale, bool causal, int64_t window,
                     cudaStream_t stream);
// attention_grad through cuDNN's fused flash attention backward, from the forward's output
// y and statistics lse ([b, h, sq] f32): dq, dk, dv for the same views, masks and scale
// (no bias).
// False where cuDNN does not take the problem; the caller then runs its own kernels.
bool cudnn_attention_grad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                          const Tensor& dy, const Tensor& lse, const Tensor& dq, const Tensor& dk,
                          const Tensor& dv, double scale, bool causal, int64_t window,
                          cudaStream_t stream);
// How many times each path has run in this process (tests).
int64_t cudnn_attention_runs();
int64_t cudnn_attention_grad_runs();

}  // namespace rlx::cuda
