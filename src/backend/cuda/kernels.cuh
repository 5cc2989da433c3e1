// Device-side pieces shared by the CUDA kernels: storage and compute types per dtype, dtype
// dispatch, an indexer from a flat index to per-operand offsets, and launch shapes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdint>
#include <cuda/std/limits>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_util.h"
#include "rlx/cuda_check.cuh"
#include "rlx/dtype.h"
#include "rlx/tensor.h"

namespace rlx::cuda {

// Whether p allows 16-byte vector loads and stores.
__host__ __device__ __forceinline__ bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// --- types -----------------------------------------------------------------------------
// f16 / bf16 are stored as CUDA's __half / __nv_bfloat16 and computed in float; bool is
// one byte holding 0 or 1.

template <class T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<__half> {
  using type = float;
};
template <>
struct ComputeOf<__nv_bfloat16> {
  using type = float;
};
template <class T>
using compute_t = typename ComputeOf<T>::type;

template <class T>
constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <class T>
constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

template <class T>
__device__ __forceinline__ compute_t<T> load(T x) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(x);
  else
    return x;
}

// A compute-type value stored as T (rounded to nearest even for f16 / bf16).
template <class T, class C>
__device__ __forceinline__ T store(C x) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(float(x));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(float(x));
  else
    return T(x);
}

template <class T>
struct Tag {
  using type = T;
};

namespace ewop {
template <class R>
struct Cx;  // elementwise_ops.cuh
}
template <class T>
constexpr bool is_complex_v = false;
template <class R>
constexpr bool is_complex_v<ewop::Cx<R>> = true;

template <class T>
constexpr bool in_set(unsigned set) {
  if constexpr (is_complex_v<T>)
    return set & kComplex;
  else if constexpr (std::is_same_v<T, bool>)
    return set & kBool;
  else if constexpr (is_float_v<T>)
    return set & kFloat;
  else
    return set & kInt;
}

// Calls f(Tag<T>{}) with T the storage type of dt.
template <class F>
void visit(DType dt, F&& f) {
  switch (dt) {
    case DType::f32:
      return f(Tag<float>{});
    case DType::f64:
      return f(Tag<double>{});
    case DType::f16:
      return f(Tag<__half>{});
    case DType::bf16:
      return f(Tag<__nv_bfloat16>{});
    case DType::i8:
      return f(Tag<int8_t>{});
    case DType::i16:
      return f(Tag<int16_t>{});
    case DType::i32:
      return f(Tag<int32_t>{});
    case DType::i64:
      return f(Tag<int64_t>{});
    case DType::u8:
      return f(Tag<uint8_t>{});
    case DType::boolean:
      return f(Tag<bool>{});
    default:  // strings, complex numbers, quantized blocks: the kernel's supports() refuses them
      break;
  }
  fail<NotSupported>("cuda", "expected a numeric or bool dtype, got ", dtype_name(dt));
}

// The same over element sizes only (copies, selects).
template <class F>
void visit_bytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(Tag<uint8_t>{});
    case 2:
      return f(Tag<uint16_t>{});
    case 4:
      return f(Tag<uint32_t>{});
    case 16:
      return f(Tag<uint4>{});  // c128
    default:
      return f(Tag<uint64_t>{});
  }
}

// V elements of T moved by one load or store (16 bytes or less).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Whether every pointer sits on a Vec<P, V> boundary of its own element type (a null one
// does: an absent operand never blocks the vector path).
template <int V, class... Ps>
bool aligned(const Ps*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % (sizeof(Ps) * V) == 0) && ...);
}

// --- indexing ----------------------------------------------------------------------------

constexpr int kMaxDims = 8;

// Maps a flat (row-major) index over `size` to the element offset of each of N operands.
template <int N>
struct Indexer {
  int rank = 0;
  int64_t size[kMaxDims];
  int64_t stride[N][kMaxDims];

  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t q = i / size[d], r = i - q * size[d];
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * stride[k][d];
    }
  }
};

// An indexer over `shape` for operands with these strides (in elements), with size-1
// dims dropped and neighbouring dims merged wherever every operand allows.
template <int N>
Indexer<N> make_indexer(const std::vector<int64_t>& shape,
                        const std::array<const std::vector<int64_t>*, N>& strides) {
  MergedDims m = merge_dims(shape, {strides.begin(), strides.end()});
  if (m.size.size() > size_t(kMaxDims))
    fail<NotSupported>("cuda", "expected at most ", kMaxDims, " dims after merging, got ",
                       m.size.size());
  Indexer<N> ix;
  ix.rank = int(m.size.size());
  for (size_t d = 0; d < m.size.size(); ++d) {
    ix.size[d] = m.size[d];
    for (int k = 0; k < N; ++k) ix.stride[k][d] = m.stride[size_t(k)][d];
  }
  return ix;
}

// --- folds across threads ----------------------------------------------------------------
// Op has `template <class A> static A init()` and `static A combine(A, A)`.

// Shuffles by value: narrow integers travel as int, 64-bit integers as unsigned long long.
template <class A>
__device__ __forceinline__ A shfl(A v, int src, bool down) {
  auto go = [&](auto u) {
    return down ? __shfl_down_sync(0xffffffffu, u, src) : __shfl_sync(0xffffffffu, u, src);
  };
  if constexpr (std::is_floating_point_v<A>)
    return go(v);
  else if constexpr (sizeof(A) == 8)
    return A(go((unsigned long long)(v)));
  else
    return A(go(int(v)));
}
template <class A>
__device__ __forceinline__ A shfl_down(A v, int d) {
  return shfl(v, d, true);
}

// Sums, and maxima where NaN does not win (b > a keeps a; -inf, or an integer's lowest,
// where a lane has nothing).
struct FoldSum {
  template <class A>
  __device__ static A init() {
    return A(0);
  }
  template <class A>
  __device__ static A combine(A a, A b) {
    return a + b;
  }
};
struct FoldMax {
  template <class A>
  __device__ static A init() {
    if constexpr (::cuda::std::numeric_limits<A>::has_infinity)
      return -::cuda::std::numeric_limits<A>::infinity();
    else
      return ::cuda::std::numeric_limits<A>::lowest();
  }
  template <class A>
  __device__ static A combine(A a, A b) {
    return b > a ? b : a;
  }
};

// Folds a warp's values; lane 0 has the result.
template <class Op, class A>
__device__ __forceinline__ A warp_fold(A v) {
  for (int d = 16; d > 0; d /= 2) v = Op::combine(v, shfl_down(v, d));
  return v;
}

// Folds a block's values (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result.
template <class Op, class A>
__device__ A block_fold(A v) {
  __shared__ A part[32];
  __shared__ A result;
  v = warp_fold<Op>(v);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < int(blockDim.x / 32) ? part[lane] : Op::template init<A>();
    w = warp_fold<Op>(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}

// A kernel's bad-index slot (deferred_check) is filled by report_bad (rlx/cuda_check.cuh, the
// same namespace).

// --- launches --------------------------------------------------------------------------

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill the device, no more.
inline int blocks_for(int64_t n, int per_thread = 1) {
  int64_t want = (n + int64_t(kThreads) * per_thread - 1) / (int64_t(kThreads) * per_thread);
  int64_t cap = int64_t(sm_count()) * 16;
  return int(want < 1 ? 1 : (want < cap ? want : cap));
}

// f(I{}) for a grid-stride loop whose indices stay below `bound`: I = int32_t where they and
// a grid's stride fit in 32 bits (a 64-bit division per element costs as much as a row
// kernel's loads), else int64_t.
template <class F>
void with_index(int64_t bound, F&& f) {
  if (bound < (int64_t(1) << 30))
    f(int32_t{});
  else
    f(int64_t{});
}

// Programmatic dependent launch (sm_90): a kernel launched by launch_pdl may start while
// the kernel before it in the stream still runs (once each of that kernel's blocks has
// called pdl_trigger or exited), so its launch and whatever it does before pdl_wait (such
// as prefetching weights, which no kernel writes) overlap that kernel's tail. It must call
// pdl_wait before it reads what earlier kernels wrote and before it writes anything.
// Both are no-ops where the kernel was launched the usual way.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

template <class... P, class... A>
void launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  RLX_CUDA(cudaLaunchKernelEx(&cfg, kernel, P(std::forward<A>(args))...));
}

// L2 prefetches of [p, p + bytes), a line (128 bytes) per thread of `threads` from `t`.
__device__ __forceinline__ void prefetch_l2(const void* p, int64_t bytes, int t, int threads) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = int64_t(t) * 128; o < bytes; o += int64_t(threads) * 128)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(c + o));
}

// 16 bytes that are read once (weights): not kept in L1, which then holds the activation
// rows every warp of the SM reads again (measured in bench/RESULTS.md, "LLM on the GPU").
__device__ __forceinline__ uint4 load_once(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

#define RLX_GRID_STRIDE(i, n)                                               \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(blockDim.x) * gridDim.x)

}  // namespace rlx::cuda
