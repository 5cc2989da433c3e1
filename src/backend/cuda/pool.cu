// max_pool, avg_pool (1-D to 3-D windows) and the global pools, as the CPU defines them
// (backend/cpu/pool.cpp): windows clipped to the input, taps folded in row-major order in
// the compute type, NaN-propagating maxima starting from -inf, the mean's divisor counting
// the padding taps with count_include_pad (not ceil mode's overhang past the end padding).
// One thread per output; the global pools fold a plane per warp (per block when long), the
// mean in double as the CPU's. resize lives in resize.cu and is registered here.
#include <cuda/std/limits>

#include "backend/cuda/families.h"
#include "backend/cuda/window.cuh"

namespace rlx::cuda {

void register_resize(KernelRegistry& r);  // resize.cu

namespace {

template <class T, bool kMax>
__global__ void pool_kernel(const T* x, T* y, int64_t n, Win w, bool include_pad) {
  using C = compute_t<T>;
  RLX_GRID_STRIDE(i, n) {
    int64_t p = i / w.out_size, o[3];
    out_index(w, i - p * w.out_size, o);
    Taps t[3] = {taps_of(w, 0, o[0]), taps_of(w, 1, o[1]), taps_of(w, 2, o[2])};
    const T* xp = x + p * w.in_size;
    C acc = kMax ? -::cuda::std::numeric_limits<C>::infinity() : C(0);
    each_tap(w, t, [&](int64_t at) {
      C v = load(xp[at]);
      if constexpr (kMax)
        acc = max_nan(acc, v);
      else
        acc += v;
    });
    if constexpr (kMax) {
      y[i] = store<T>(acc);
    } else {
      int64_t count = 1;
      for (int d = 0; d < 3; ++d) count *= include_pad ? t[d].padded : t[d].last - t[d].first;
      y[i] = store<T>(acc / C(count));
    }
  }
}

template <bool kMax>
void pool(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &y = out[0];
  int64_t n = y.numel();
  if (n == 0) return;
  Win w =
      to_win(cpu::make_window(ctx.attrs, x.shape(), y.shape(), ctx.attrs.get_ints("kernel_shape")));
  bool include_pad = !kMax && ctx.attrs.get_bool("count_include_pad");
  cudaStream_t s = stream_of(ctx);
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>)
      pool_kernel<T, kMax><<<blocks_for(n), kThreads, 0, s>>>(
          static_cast<const T*>(x.data()), static_cast<T*>(y.data()), n, w, include_pad);
  });
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

// ---- global pools ---------------------------------------------------------------------

struct MaxNaN {
  template <class A>
  __device__ static A init() {
    return -::cuda::std::numeric_limits<A>::infinity();
  }
  template <class A>
  __device__ static A combine(A a, A b) {
    return max_nan(a, b);
  }
};
// One plane of `size` per warp (kBlock false) or per block; the max in the compute type,
// the sum in double.
template <class T, bool kMax, bool kBlock>
__global__ void global_pool_kernel(const T* x, T* y, int64_t planes, int64_t size) {
  using A = std::conditional_t<kMax, compute_t<T>, double>;
  using Op = std::conditional_t<kMax, MaxNaN, FoldSum>;
  int lane = kBlock ? threadIdx.x : threadIdx.x % 32, width = kBlock ? blockDim.x : 32;
  int64_t first = kBlock ? blockIdx.x : int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  int64_t step = kBlock ? gridDim.x : int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t p = first; p < planes; p += step) {
    const T* xp = x + p * size;
    A acc = Op::template init<A>();
    for (int64_t i = lane; i < size; i += width) acc = Op::combine(acc, A(load(xp[i])));
    if constexpr (kBlock)
      acc = block_fold<Op>(acc);
    else
      acc = warp_fold<Op>(acc);
    if (lane == 0) {
      if constexpr (kMax)
        y[p] = store<T>(acc);
      else
        y[p] = store<T>(acc / double(size));
    }
  }
}

template <bool kMax>
void global_pool(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  int64_t planes = x.shape()[0] * x.shape()[1];
  if (planes == 0) return;
  int64_t size = x.numel() / planes;
  cudaStream_t s = stream_of(ctx);
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto xp = static_cast<const T*>(x.data());
      auto yp = static_cast<T*>(out[0].data());
      if (size > 1024) {
        int grid = int(std::min<int64_t>(planes, int64_t(sm_count()) * 8));
        global_pool_kernel<T, kMax, true><<<grid, 512, 0, s>>>(xp, yp, planes, size);
      } else {
        constexpr int kWarps = kThreads / 32;
        int grid = int(std::min<int64_t>((planes + kWarps - 1) / kWarps, int64_t(sm_count()) * 32));
        global_pool_kernel<T, kMax, false><<<grid, kThreads, 0, s>>>(xp, yp, planes, size);
      }
    }
  });
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

}  // namespace

void register_pool(KernelRegistry& r) {
  add_kernel(r, "max_pool", pool<true>, dtype_in(kFloat));
  add_kernel(r, "avg_pool", pool<false>, dtype_in(kFloat));
  add_kernel(r, "global_max_pool", global_pool<true>, dtype_in(kFloat));
  add_kernel(r, "global_avg_pool", global_pool<false>, dtype_in(kFloat));
  register_resize(r);
}

}  // namespace rlx::cuda
