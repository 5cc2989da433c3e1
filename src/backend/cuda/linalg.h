// GEMMs for other CUDA kernels (attention's backward): cuBLASLt, as matmul uses it.
#pragma once

#include <cuda_runtime.h>

#include "rlx/tensor.h"

namespace rlx::gpu {

// y[i] = alpha * op(a[i]) @ op(b[i]) for contiguous row-major [batch, rows, cols] a, b and
// y; op transposes where ta / tb. a and b share a float dtype; y has it or is f32 (16-bit
// operands, f32 product).
void batched_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& y, double alpha,
                  cudaStream_t s);

}  // namespace rlx::gpu
