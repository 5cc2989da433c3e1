// cast between every pair of dtypes, with the CPU's conversion rules (ewop::convert). Its
// own file: a hundred instantiations compile faster beside the other kernels than after.
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

void cast_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &y = out[0];
  if (x.dtype() == y.dtype()) return copy_strided(x, y, stream_of(ctx));  // every bit kept
  int64_t n = y.numel();
  if (n == 0) return;
  auto ix = make_indexer<2>(y.shape(), {&y.strides(), &x.strides()});
  visit(x.dtype(), [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    visit(y.dtype(), [&](auto out_tag) {
      using U = typename decltype(out_tag)::type;
      cast_strided<T, U><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(
          static_cast<const T*>(x.data()), static_cast<U*>(y.data()), n, ix);
    });
  });
  RLX_CUDA_LAUNCHED("cast kernel");
}

}  // namespace

void register_cast(KernelRegistry& r) {
  add_kernel(r, "cast", cast_kernel, {}, {.strided_inputs = true, .inplace = true});
}

}  // namespace rlx::gpu
