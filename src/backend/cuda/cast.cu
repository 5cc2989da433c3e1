// cast between every pair of dtypes, with the CPU's conversion rules (ewop::convert). Its
// own file: a hundred instantiations compile faster beside the other kernels than after.
#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_ops.cuh"
#include "backend/cuda/families.h"

namespace rlx::gpu {

namespace {

template <class T, class U>
__global__ void cast_strided(const T* x, U* y, int64_t n, Indexer<2> ix) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    y[off[0]] = store<U>(ewop::convert<U>(load(x[off[1]])));
  }
}

// Both sides contiguous: no index arithmetic; each thread converts 4 elements a block
// stride apart, so a warp's loads stay coalesced.
template <class T, class U>
__global__ void cast_flat(const T* x, U* y, int64_t n) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += 4 * step) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (i + k * step < n) y[i + k * step] = store<U>(ewop::convert<U>(load(x[i + k * step])));
  }
}

void cast_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  cast_into(in[0], out[0], stream_of(ctx));
}

}  // namespace

void cast_into(const Tensor& x, const Tensor& y, cudaStream_t s) {
  if (x.dtype() == y.dtype()) return copy_strided(x, y, s);  // every bit kept
  int64_t n = y.numel();
  if (n == 0) return;
  bool flat = x.shape() == y.shape() && x.is_contiguous() && y.is_contiguous();
  auto ix = make_indexer<2>(y.shape(), {&y.strides(), &x.strides()});
  visit(x.dtype(), [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    visit(y.dtype(), [&](auto out_tag) {
      using U = typename decltype(out_tag)::type;
      auto xp = static_cast<const T*>(x.data());
      auto yp = static_cast<U*>(y.data());
      if (flat)
        cast_flat<T, U><<<blocks_for(n, 4), kThreads, 0, s>>>(xp, yp, n);
      else
        cast_strided<T, U><<<blocks_for(n), kThreads, 0, s>>>(xp, yp, n, ix);
    });
  });
  RLX_CUDA_LAUNCHED("cast kernel");
}

void register_cast(KernelRegistry& r) {
  add_kernel(r, "cast", cast_kernel, {}, {.strided_inputs = true, .inplace = true});
}

}  // namespace rlx::gpu
