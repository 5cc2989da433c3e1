// Copies on one device between any two layouts (transposes, broadcasts, slices, flips all
// come down to one), and fills. Host code may call these; the kernels live in copy.cu.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "rlx/tensor.h"

namespace rlx::gpu {

// dst[i] = src[i] for every index i of `shape`: strides in elements, zero (broadcast) or
// negative (flip) on the source side. dst must not overlap src.
void copy_raw(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
              const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
              size_t elem, cudaStream_t stream);
// dst[i] = src[i] for every index; same dtype and shape, any strides (src may broadcast
// with stride 0; dst must not overlap src).
void copy_strided(const Tensor& src, const Tensor& dst, cudaStream_t stream);
// Every element of dst (any strides) set to the bit pattern of `value` in dst's dtype.
void fill(const Tensor& dst, double value, cudaStream_t stream);

}  // namespace rlx::gpu
