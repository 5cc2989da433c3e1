// Elementwise helpers for other CUDA kernels (fused_matmul's bias and activations).
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "rlx/tensor.h"

namespace rlx::cuda {

// The fused activations (ops/fused.h) activation_inplace applies.
bool activation_inplace_supported(std::string_view act);
// y = x converted to y's dtype (same shape, any strides).
void cast_into(const Tensor& x, const Tensor& y, cudaStream_t s);
// y = act(y), y contiguous and of a float dtype; "none" leaves it.
void activation_inplace(const Tensor& y, std::string_view act, cudaStream_t s);

}  // namespace rlx::cuda
