#include "backend/cuda/copy.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::gpu {

namespace {

template <class T>
__global__ void copy_kernel(const T* src, T* dst, int64_t n, Indexer<2> ix) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    dst[off[0]] = src[off[1]];
  }
}

template <class T>
__global__ void fill_kernel(T* dst, int64_t n, Indexer<1> ix, T value) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    dst[off[0]] = value;
  }
}

}  // namespace

void copy_raw(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
              const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
              size_t elem, cudaStream_t stream) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return;
  auto ix = make_indexer<2>(shape, {&dst_strides, &src_strides});
  // Both sides one contiguous run: a plain memcpy.
  if (ix.rank == 0 || (ix.rank == 1 && ix.stride[0][0] == 1 && ix.stride[1][0] == 1)) {
    RLX_CUDA(cudaMemcpyAsync(dst, src, size_t(n) * elem, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  visit_bytes(elem, [&](auto tag) {
    using T = typename decltype(tag)::type;
    copy_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(src),
                                                           static_cast<T*>(dst), n, ix);
  });
  RLX_CUDA_LAUNCHED("copy_kernel");
}

void copy_strided(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
  if (dst.numel() == 0) return;
  copy_raw(dst.data(), dst.strides(), src.data(), src.strides(), dst.shape(),
           dtype_size(dst.dtype()), stream);
}

void fill(const Tensor& dst, double value, cudaStream_t stream) {
  int64_t n = dst.numel();
  if (n == 0) return;
  uint64_t bits = 0;
  store_double(dst.dtype(), &bits, value);
  auto ix = make_indexer<1>(dst.shape(), {&dst.strides()});
  visit_bytes(dtype_size(dst.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst.data()), n, ix, v);
  });
  RLX_CUDA_LAUNCHED("fill_kernel");
}

}  // namespace rlx::gpu
