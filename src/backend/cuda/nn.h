// nn.cu's kernels for other CUDA kernels (fused_quant_matmul's norm where its matvec cannot
// apply it).
#pragma once

#include <cuda_runtime.h>

#include "rlx/tensor.h"

namespace rlx::cuda {

// y = rms_norm(x) over x's last dim with scale (a contiguous vector of that length), as the
// rms_norm kernel computes it; x and y contiguous, of one float dtype.
void rms_norm_into(const Tensor& x, const Tensor& scale, double eps, const Tensor& y,
                   cudaStream_t s);

}  // namespace rlx::cuda
