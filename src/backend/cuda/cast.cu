// cast between every pair of dtypes, with the CPU's conversion rules (convert). Its
// own file: a hundred instantiations compile faster beside the other kernels than after.
#include <cuda/std/limits>

#include "backend/cuda/elementwise.h"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::cuda {

namespace {

// x (compute type C) converted to the compute type of storage U, as the CPU's convert:
// casts from float saturate and send NaN to 0.
template <class U, class C>
__device__ __forceinline__ auto convert(C x) {
  using R = compute_t<U>;
  if constexpr (std::is_same_v<U, bool>) {
    return bool(x != C(0));
  } else if constexpr (std::is_floating_point_v<R> || !std::is_floating_point_v<C>) {
    return R(x);
  } else {
    constexpr C lo = C(::cuda::std::numeric_limits<R>::min());
    constexpr C hi = C(::cuda::std::numeric_limits<R>::max());
    return x != x    ? R(0)
           : x <= lo ? ::cuda::std::numeric_limits<R>::min()
           : x >= hi ? ::cuda::std::numeric_limits<R>::max()
                     : R(x);
  }
}

template <class T, class U>
__global__ void cast_strided(const T* x, U* y, int64_t n, Indexer<2> ix) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    y[off[0]] = store<U>(convert<U>(load(x[off[1]])));
  }
}

// Both sides contiguous: no index arithmetic; each thread converts 4 elements a block
// stride apart, so a warp's loads stay coalesced.
template <class T, class U>
__global__ void cast_flat(const T* x, U* y, int64_t n) {
  pdl_wait();  // launched programmatically dependent (cast_into)
  pdl_trigger();
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += 4 * step) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (i + k * step < n) y[i + k * step] = store<U>(convert<U>(load(x[i + k * step])));
  }
}

// Both sides contiguous and aligned: V elements a thread, one load and one store of up to
// 16 bytes each (a prefill's f32 activations cast to a GEMM's bf16 operand ran at half the
// bandwidth with element loads), the last n % V elements one by one.
template <class T, class U, int V>
__global__ void cast_vec(const T* x, U* y, int64_t n) {
  pdl_wait();
  pdl_trigger();
  const int64_t nv = n / V;
  RLX_GRID_STRIDE(i, nv) {
    const Vec<T, V> a = reinterpret_cast<const Vec<T, V>*>(x)[i];
    Vec<U, V> b;
#pragma unroll
    for (int e = 0; e < V; ++e) b.v[e] = store<U>(convert<U>(load(a.v[e])));
    reinterpret_cast<Vec<U, V>*>(y)[i] = b;
  }
  for (int64_t i = nv * V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = store<U>(convert<U>(load(x[i])));
}

// Into complex numbers (R: their part's type): a real x as (x, 0), a complex one of the other
// precision part by part (casts never leave complex: the op refuses them). Element i of y
// (row-major) reads x through ix, in elements (a complex element is two parts).
template <class T, class R, bool kComplex>
__global__ void cast_complex(const T* x, R* y, int64_t n, Indexer<2> ix) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    if constexpr (kComplex) {
      y[2 * off[0]] = R(x[2 * off[1]]);
      y[2 * off[0] + 1] = R(x[2 * off[1] + 1]);
    } else {
      y[2 * off[0]] = convert<R>(load(x[off[1]]));
      y[2 * off[0] + 1] = R(0);
    }
  }
}

void cast_to_complex(const Tensor& x, const Tensor& y, int64_t n, const Indexer<2>& ix,
                     cudaStream_t s) {
  auto go = [&](auto rtag) {
    using R = typename decltype(rtag)::type;
    R* yp = static_cast<R*>(y.data());
    if (x.dtype() == DType::c128)
      cast_complex<double, R, true>
          <<<blocks_for(n), kThreads, 0, s>>>(static_cast<const double*>(x.data()), yp, n, ix);
    else if (x.dtype() == DType::c64)
      cast_complex<float, R, true>
          <<<blocks_for(n), kThreads, 0, s>>>(static_cast<const float*>(x.data()), yp, n, ix);
    else
      visit(x.dtype(), [&](auto in_tag) {
        using T = typename decltype(in_tag)::type;
        cast_complex<T, R, false>
            <<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x.data()), yp, n, ix);
      });
  };
  if (y.dtype() == DType::c128)
    go(Tag<double>{});
  else
    go(Tag<float>{});
}

void cast_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  cast_into(in[0], out[0], stream_of(ctx));
}

// ---- fused_cast: many contiguous tensors, one launch ----------------------------------
// The tensors' elements as one index space; each block takes kPerBlock consecutive
// indices and finds the tensor holding its first by a binary search over the starts (a
// warp-uniform read of the kernel's parameters), then walks on.
constexpr int kMaxCasts = 120;  // segments a launch (~3 KB of parameters)
constexpr int64_t kPerBlock = 8192;

struct CastSeg {
  const void* x;
  void* y;
  int64_t start;  // the first index of this tensor; seg[count].start is the total
};
struct CastBatch {
  CastSeg seg[kMaxCasts + 1];
  int count;
};

template <class T, class U>
__global__ void cast_batch(const __grid_constant__ CastBatch b) {
  const int64_t lo = int64_t(blockIdx.x) * kPerBlock;
  const int64_t hi = min(lo + kPerBlock, b.seg[b.count].start);
  int s = 0, e = b.count;  // the last segment starting at or before lo
  while (e - s > 1) {
    int m = (s + e) / 2;
    if (b.seg[m].start <= lo)
      s = m;
    else
      e = m;
  }
  if (hi <= b.seg[s + 1].start) {  // within one tensor (most blocks): a plain cast
    const int64_t n = hi - lo, step = blockDim.x;
    const T* __restrict__ x = static_cast<const T*>(b.seg[s].x) + (lo - b.seg[s].start);
    U* __restrict__ y = static_cast<U*>(b.seg[s].y) + (lo - b.seg[s].start);
    for (int64_t k = threadIdx.x; k < n; k += 4 * step) {
      T v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (k + u * step < n) v[u] = x[k + u * step];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (k + u * step < n) y[k + u * step] = store<U>(convert<U>(load(v[u])));
    }
    return;
  }
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    while (i >= b.seg[s + 1].start) ++s;
    int64_t j = i - b.seg[s].start;
    static_cast<U*>(b.seg[s].y)[j] =
        store<U>(convert<U>(load(static_cast<const T*>(b.seg[s].x)[j])));
  }
}

void fused_cast_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                       std::span<Tensor> out) {
  cudaStream_t s = stream_of(ctx);
  visit(in[0].dtype(), [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    visit(out[0].dtype(), [&](auto out_tag) {
      using U = typename decltype(out_tag)::type;
      if constexpr (is_float_v<T> && is_float_v<U>) {
        for (size_t first = 0; first < in.size(); first += kMaxCasts) {
          CastBatch b{};
          int64_t total = 0;
          for (size_t i = first; i < std::min(in.size(), first + kMaxCasts); ++i) {
            b.seg[b.count++] = {in[i].data(), out[i].data(), total};
            total += in[i].numel();
          }
          b.seg[b.count].start = total;
          if (total == 0) continue;
          cast_batch<T, U><<<unsigned((total + kPerBlock - 1) / kPerBlock), kThreads, 0, s>>>(b);
        }
      }
    });
  });
  RLX_CUDA_LAUNCHED("fused_cast");
}

}  // namespace

void cast_into(const Tensor& x, const Tensor& y, cudaStream_t s) {
  if (x.dtype() == y.dtype()) return copy_strided(x, y, s);  // every bit kept
  int64_t n = y.numel();
  if (n == 0) return;
  bool flat = x.shape() == y.shape() && x.is_contiguous() && y.is_contiguous();
  auto ix = make_indexer<2>(y.shape(), {&y.strides(), &x.strides()});
  if (is_complex(y.dtype())) {
    cast_to_complex(x, y, n, ix, s);
    RLX_CUDA_LAUNCHED("cast kernel");
    return;
  }
  visit(x.dtype(), [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    visit(y.dtype(), [&](auto out_tag) {
      using U = typename decltype(out_tag)::type;
      auto xp = static_cast<const T*>(x.data());
      auto yp = static_cast<U*>(y.data());
      constexpr int V = int(16 / std::max(sizeof(T), sizeof(U)));
      if (flat && V > 1 && aligned<V>(xp, yp))
        launch_pdl(cast_vec<T, U, V>, blocks_for(std::max<int64_t>(n / V, 1)), kThreads, 0, s, xp,
                   yp, n);
      else if (flat)
        launch_pdl(cast_flat<T, U>, blocks_for(n, 4), kThreads, 0, s, xp, yp, n);
      else
        cast_strided<T, U><<<blocks_for(n), kThreads, 0, s>>>(xp, yp, n, ix);
    });
  });
  RLX_CUDA_LAUNCHED("cast kernel");
}

void register_cast(KernelRegistry& r) {
  // Into complex numbers too, never out of them (the op refuses that).
  auto into_complex = [](const KernelQuery& q) {
    return !is_complex(q.inputs[0].dtype) || is_complex(q.outputs[0].dtype);
  };
  add_kernel(r, "cast", cast_kernel, into_complex, {.strided_inputs = true, .inplace = true});
  add_kernel(r, "fused_cast", fused_cast_kernel, [](const KernelQuery& q) {
    return is_float(q.inputs[0].dtype) && is_float(q.outputs[0].dtype);
  });
}

}  // namespace rlx::cuda
