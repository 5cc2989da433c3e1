// Copies on one device between any two layouts (transposes, broadcasts, slices, flips all
// come down to one), and fills. Host code may call these; the kernels live in copy.cu.
#pragma once

#include <cuda_runtime.h>

#include <span>
#include <vector>

#include "rlx/tensor.h"

namespace rlx::cuda {

// dst[i] = src[i] for every index i of `shape`: strides in elements, zero (broadcast) or
// negative (flip) on the source side. dst must not overlap src.
void copy_raw(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
              const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
              size_t elem, cudaStream_t stream);
// dst[i] = src[i] for every index; same dtype and shape, any strides (src may broadcast
// with stride 0; dst must not overlap src).
void copy_strided(const Tensor& src, const Tensor& dst, cudaStream_t stream);
// A contiguous source read as [outer, sum(sizes), inner] into contiguous parts dst[j]
// [outer, sizes[j], inner], in one launch; false (nothing done) for more than kSplitParts parts.
constexpr int kSplitParts = 8;
bool split_contiguous(const void* src, int64_t outer, int64_t inner, std::span<void* const> dst,
                      std::span<const int64_t> sizes, size_t elem, cudaStream_t stream);
// The contiguous y = x (any strides, at most kMaxPadRank dims) padded by `pads` (every
// dim's leading count, then its trailing ones) with its edge repeated (reflect false) or
// mirrored without repeating the edge (reflect true).
constexpr int kMaxPadRank = 8;
void pad_edges(const Tensor& x, const Tensor& y, std::span<const int64_t> pads, bool reflect,
               cudaStream_t stream);
// Every element of dst (any strides) set to the bit pattern of `value` in dst's dtype.
void fill(const Tensor& dst, double value, cudaStream_t stream);

}  // namespace rlx::cuda
