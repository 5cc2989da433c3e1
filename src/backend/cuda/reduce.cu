// Reductions (sum, prod, reduce_max / reduce_min, mean, logsumexp, l1_norm, l2_norm,
// sum_squares) with the CPU's folds (backend/cpu/reduce.cpp): floats accumulate in f64,
// integers in wrapping 64-bit arithmetic, max / min propagate NaN, logsumexp shifts by the
// maximum first.
//
// The input is seen as [outer, r, inner] with the reduced axes in the middle (a
// permuted copy when they are not adjacent). inner == 1 reduces rows (a warp, or a block
// for long rows); inner > 1 reduces columns, one thread each, coalesced along inner.
#include <algorithm>
#include <cuda/std/limits>
#include <numeric>

#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"
#include "rlx/axes.h"

namespace rlx::cuda {

namespace {

template <class T>
using acc_t = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

template <class C>
__device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return v != v;
  else
    return false;
}

struct SumOp {
  template <class T>
  using acc = acc_t<T>;
  static constexpr bool kShift = false;
  template <class A>
  __device__ static A init() {
    return A(0);
  }
  template <class A, class C>
  __device__ static A map(C x, A) {
    return A(x);
  }
  template <class A>
  __device__ static A combine(A a, A b) {
    return a + b;
  }
  template <class T, class A>
  __device__ static T finish(A a, A, int64_t) {
    if constexpr (std::is_integral_v<T>)
      return T(a);  // the low bits: the wrapped sum
    else
      return store<T>(a);
  }
};
struct ProdOp : SumOp {
  template <class A>
  __device__ static A init() {
    return A(1);
  }
  template <class A>
  __device__ static A combine(A a, A b) {
    return a * b;
  }
};
struct MeanOp : SumOp {
  template <class T, class A>
  __device__ static T finish(A a, A, int64_t n) {
    return store<T>(double(a) / double(n));
  }
};
struct L1Op : SumOp {
  template <class A, class C>
  __device__ static A map(C x, A) {
    return fabs(A(x));
  }
};
struct L2Op : SumOp {
  template <class A, class C>
  __device__ static A map(C x, A) {
    return A(x) * A(x);
  }
  template <class T, class A>
  __device__ static T finish(A a, A, int64_t) {
    return store<T>(sqrt(a));
  }
};

template <bool kMax>
struct ExtremeOp {
  template <class T>
  using acc = compute_t<T>;
  static constexpr bool kShift = false;
  template <class A>
  __device__ static A init() {
    if constexpr (std::is_floating_point_v<A>)
      return kMax ? -::cuda::std::numeric_limits<A>::infinity()
                  : ::cuda::std::numeric_limits<A>::infinity();
    else
      return kMax ? ::cuda::std::numeric_limits<A>::lowest()
                  : ::cuda::std::numeric_limits<A>::max();
  }
  template <class A, class C>
  __device__ static A map(C x, A) {
    return A(x);
  }
  template <class A>
  __device__ static A combine(A a, A b) {
    return ((kMax ? b > a : b < a) || is_nan(b)) ? b : a;
  }
  template <class T, class A>
  __device__ static T finish(A a, A, int64_t) {
    return store<T>(a);
  }
};
using MaxOp = ExtremeOp<true>;
using MinOp = ExtremeOp<false>;

// log(sum(exp(x - m))) + m, m the maximum (a first pass); m of +-inf or NaN is the result.
struct LogSumExpOp : SumOp {
  static constexpr bool kShift = true;
  template <class A, class C>
  __device__ static A map(C x, A shift) {
    return A(exp(double(x) - double(shift)));
  }
  template <class T, class A>
  __device__ static T finish(A a, A shift, int64_t) {
    if (!isfinite(double(shift))) return store<T>(shift);
    return store<T>(double(shift) + log(double(a)));
  }
};

// One fold over x[0], x[step], … (n of them) by the threads lane, lane + width, …
template <class Op, class T, class A>
__device__ __forceinline__ A fold_part(const T* x, int64_t n, int64_t step, int lane, int width,
                                       A shift) {
  A acc = Op::template init<A>();
  for (int64_t i = lane; i < n; i += width)
    acc = Op::combine(acc, Op::template map<A>(load(x[i * step]), shift));
  return acc;
}

// Rows of length r, one block each.
template <class Op, class T>
__global__ void rows_block(const T* x, T* y, int64_t rows, int64_t r) {
  using A = typename Op::template acc<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * r;
    A shift{};
    if constexpr (Op::kShift) {
      using M = typename MaxOp::template acc<T>;
      shift = A(block_fold<MaxOp>(fold_part<MaxOp, T, M>(p, r, 1, threadIdx.x, blockDim.x, M{})));
    }
    A acc = block_fold<Op>(fold_part<Op, T, A>(p, r, 1, threadIdx.x, blockDim.x, shift));
    if (threadIdx.x == 0) y[row] = Op::template finish<T>(acc, shift, r);
  }
}

// Rows of length r, one warp each.
template <class Op, class T>
__global__ void rows_warp(const T* x, T* y, int64_t rows, int64_t r) {
  using A = typename Op::template acc<T>;
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows;
       row += warps) {
    const T* p = x + row * r;
    A shift{};
    if constexpr (Op::kShift) {
      using M = typename MaxOp::template acc<T>;
      M m = warp_fold<MaxOp>(fold_part<MaxOp, T, M>(p, r, 1, lane, 32, M{}));
      shift = A(shfl(m, 0, false));
    }
    A acc = warp_fold<Op>(fold_part<Op, T, A>(p, r, 1, lane, 32, shift));
    if (lane == 0) y[row] = Op::template finish<T>(acc, shift, r);
  }
}

// [outer, r, inner] with inner > 1: one thread per (outer, inner) column.
template <class Op, class T>
__global__ void columns(const T* x, T* y, int64_t outer, int64_t r, int64_t inner) {
  using A = typename Op::template acc<T>;
  RLX_GRID_STRIDE(c, outer * inner) {
    int64_t o = c / inner, i = c - o * inner;
    const T* p = x + o * r * inner + i;
    A shift{};
    if constexpr (Op::kShift) {
      using M = typename MaxOp::template acc<T>;
      shift = A(fold_part<MaxOp, T, M>(p, r, inner, 0, 1, M{}));
    }
    y[c] = Op::template finish<T>(fold_part<Op, T, A>(p, r, inner, 0, 1, shift), shift, r);
  }
}

// Split folds (not for kShift ops): the reduced run r of each output cut into `splits`
// slices folded by separate blocks into partials, which fold_partials finishes. So a
// reduction with few outputs (a bias gradient, a full sum) still fills the device.

// [outer, r, inner], inner > 1: a block is 32 columns x 8 threads along r, coalesced along
// inner; blockIdx.y picks the slice of `chunk` rows.
template <class Op, class T, class A = typename Op::template acc<T>>
__global__ void columns_split(const T* x, T* y, A* part, int64_t outer, int64_t r, int64_t inner,
                              int64_t chunk) {
  __shared__ A tile[8][33];
  int64_t n = outer * inner, c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  int64_t lo = int64_t(blockIdx.y) * chunk, hi = lo + chunk < r ? lo + chunk : r;
  A acc = Op::template init<A>();
  if (c < n) {
    int64_t o = c / inner, i = c - o * inner;
    const T* p = x + o * r * inner + i;
    for (int64_t k = lo + threadIdx.y; k < hi; k += 8)
      acc = Op::combine(acc, Op::template map<A>(load(p[k * inner]), A{}));
  }
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || c >= n) return;
  for (int j = 1; j < 8; ++j) acc = Op::combine(acc, tile[j][threadIdx.x]);
  if (gridDim.y == 1)
    y[c] = Op::template finish<T>(acc, A{}, r);
  else
    part[int64_t(blockIdx.y) * n + c] = acc;
}

// Rows (inner == 1), few and long: block (slice, row) folds `chunk` elements of its row.
template <class Op, class T, class A = typename Op::template acc<T>>
__global__ void rows_split(const T* x, A* part, int64_t r, int64_t chunk) {
  int64_t row = blockIdx.y, lo = int64_t(blockIdx.x) * chunk;
  int64_t len = lo + chunk < r ? chunk : r - lo;
  A acc =
      block_fold<Op>(fold_part<Op, T, A>(x + row * r + lo, len, 1, threadIdx.x, blockDim.x, A{}));
  if (threadIdx.x == 0) part[row * gridDim.x + blockIdx.x] = acc;
}

// Output c = the fold of part[c * c_step + k * k_step], k < splits.
template <class Op, class T, class A = typename Op::template acc<T>>
__global__ void fold_partials(const A* part, T* y, int64_t n, int64_t splits, int64_t c_step,
                              int64_t k_step, int64_t r) {
  RLX_GRID_STRIDE(c, n) {
    A acc = Op::template init<A>();
    for (int64_t k = 0; k < splits; ++k) acc = Op::combine(acc, part[c * c_step + k * k_step]);
    y[c] = Op::template finish<T>(acc, A{}, r);
  }
}

// The input as [outer, r, inner]: the reduced axes adjacent (else permuted to the end and
// made contiguous).
struct Blocks {
  Tensor x;
  int64_t outer = 1, r = 1, inner = 1;
};

Blocks blocks_of(const Tensor& in, const IntList& axes_attr, cudaStream_t s) {
  int64_t rank = in.rank();
  std::vector<bool> reduced(size_t(rank), axes_attr.empty());
  for (int64_t a : axes_attr) reduced[size_t(norm_axis(a, rank))] = true;
  // Size-1 axes do not matter for adjacency.
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[size_t(d)] && in.shape()[size_t(d)] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  bool adjacent = true;
  for (int64_t d = first; first >= 0 && d <= last; ++d)
    adjacent &= reduced[size_t(d)] || in.shape()[size_t(d)] == 1;
  Blocks b;
  if (adjacent && in.is_contiguous()) {
    b.x = in;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t n = in.shape()[size_t(d)];
      if (first >= 0 && d >= first && d <= last)
        b.r *= n;
      else if (first < 0 || d < first)
        b.outer *= n;
      else
        b.inner *= n;
    }
    return b;
  }
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[size_t(d)]) perm.push_back(d);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[size_t(d)]) perm.push_back(d);
  Tensor p = in.permute(perm);
  b.x = Tensor::empty(in.dtype(), p.shape(), in.device());
  copy_strided(p, b.x, s);
  for (int64_t d = 0; d < rank; ++d)
    (reduced[size_t(perm[size_t(d)])] ? b.r : b.outer) *= p.shape()[size_t(d)];
  return b;
}

template <class Op, unsigned Set>
void reduce_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  cudaStream_t s = stream_of(ctx);
  Blocks b = blocks_of(in[0], ctx.attrs.get_ints("axes"), s);
  int64_t n = b.outer * b.inner;
  if (n == 0) return;
  visit(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_set<T>(Set)) {
      auto x = static_cast<const T*>(b.x.data());
      auto y = static_cast<T*>(out[0].data());
      using A = typename Op::template acc<T>;
      static_assert(sizeof(A) <= 8);
      const int64_t fill = int64_t(sm_count()) * 4;  // blocks that keep the device busy
      auto partials = [&](int64_t count) {
        return Tensor::empty(DType::f64, {count}, in[0].device());  // 8 bytes per partial
      };
      if (b.inner > 1 && !Op::kShift) {
        int64_t tiles = (n + 31) / 32;
        int64_t most = std::clamp<int64_t>((b.r + 63) / 64, 1, 65535);  // r may be 0
        int64_t splits = std::clamp<int64_t>(fill / tiles, 1, most);
        int64_t chunk = std::max<int64_t>((b.r + splits - 1) / splits, 1);
        splits = std::max<int64_t>((b.r + chunk - 1) / chunk, 1);
        Tensor part = splits > 1 ? partials(splits * n) : Tensor();
        A* pp = splits > 1 ? static_cast<A*>(part.data()) : nullptr;
        columns_split<Op, T><<<dim3(unsigned(tiles), unsigned(splits)), dim3(32, 8), 0, s>>>(
            x, y, pp, b.outer, b.r, b.inner, chunk);
        if (splits > 1)
          fold_partials<Op, T><<<blocks_for(n), kThreads, 0, s>>>(pp, y, n, splits, 1, n, b.r);
      } else if (b.inner > 1) {
        columns<Op, T><<<blocks_for(n), kThreads, 0, s>>>(x, y, b.outer, b.r, b.inner);
      } else if (!Op::kShift && b.r >= 8192 && n < fill / 2 && n <= 65535) {
        int64_t splits = std::min<int64_t>((b.r + 4095) / 4096, (fill + n - 1) / n);
        int64_t chunk = (b.r + splits - 1) / splits;
        splits = (b.r + chunk - 1) / chunk;
        Tensor part = partials(splits * n);
        A* pp = static_cast<A*>(part.data());
        rows_split<Op, T><<<dim3(unsigned(splits), unsigned(n)), 512, 0, s>>>(x, pp, b.r, chunk);
        fold_partials<Op, T><<<blocks_for(n), kThreads, 0, s>>>(pp, y, n, splits, splits, 1, b.r);
      } else if (b.r >= 4096) {
        int grid = int(std::min<int64_t>(n, int64_t(sm_count()) * 8));
        rows_block<Op, T><<<grid, 512, 0, s>>>(x, y, n, b.r);
      } else {
        constexpr int kWarps = kThreads / 32;
        int grid = int(std::min<int64_t>((n + kWarps - 1) / kWarps, int64_t(sm_count()) * 32));
        rows_warp<Op, T><<<grid, kThreads, 0, s>>>(x, y, n, b.r);
      }
    }
  });
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

// ---- argmax / argmin, cumsum ------------------------------------------------------------
// NaN counts as the extreme (NumPy): the first NaN wins, or the last one under
// select_last_index, which likewise picks the last of equal extremes. One thread per
// column of [outer, r, inner].

template <bool kMax, bool kLast, class C>
__device__ __forceinline__ bool better(C v, C best) {
  if constexpr (kLast)
    return (kMax ? v >= best : v <= best) || is_nan(v);
  else
    return (kMax ? v > best : v < best) || (is_nan(v) && !is_nan(best));
}

template <bool kMax, bool kLast, class T>
__global__ void arg_columns(const T* x, int64_t* y, int64_t outer, int64_t r, int64_t inner) {
  using C = compute_t<T>;
  RLX_GRID_STRIDE(c, outer * inner) {
    int64_t o = c / inner, i = c - o * inner;
    const T* p = x + o * r * inner + i;
    C best = C(load(p[0]));
    int64_t at = 0;
    for (int64_t k = 1; k < r; ++k) {
      C v = C(load(p[k * inner]));
      if (better<kMax, kLast>(v, best)) {
        best = v;
        at = k;
      }
    }
    y[c] = at;
  }
}

// [outer, r, inner] of x as seen around one axis.
Blocks axis_blocks(const Tensor& x, int64_t axis) {
  Blocks b;
  b.x = x;
  for (int64_t d = 0; d < x.rank(); ++d)
    (d < axis ? b.outer : d == axis ? b.r : b.inner) *= x.shape()[size_t(d)];
  return b;
}

template <bool kMax>
void arg_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  int64_t axis = ctx.attrs.get_int("axis");
  Blocks b = axis_blocks(in[0], norm_axis(axis, in[0].rank()));
  int64_t n = b.outer * b.inner;
  if (n == 0) return;
  bool last = ctx.attrs.get_bool("select_last_index");
  cudaStream_t s = stream_of(ctx);
  visit(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_set<T>(kNumeric)) {
      auto x = static_cast<const T*>(b.x.data());
      auto y = static_cast<int64_t*>(out[0].data());
      if (last)
        arg_columns<kMax, true, T><<<blocks_for(n), kThreads, 0, s>>>(x, y, b.outer, b.r, b.inner);
      else
        arg_columns<kMax, false, T><<<blocks_for(n), kThreads, 0, s>>>(x, y, b.outer, b.r, b.inner);
    }
  });
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

// Running sums in the accumulator of sums (f64, wrapping 64-bit integers), stored per step.
template <class T>
__global__ void cumsum_columns(const T* x, T* y, int64_t outer, int64_t r, int64_t inner,
                               bool exclusive, bool reverse) {
  using A = acc_t<T>;
  RLX_GRID_STRIDE(c, outer * inner) {
    int64_t o = c / inner, i = c - o * inner;
    int64_t base = o * r * inner + i;
    A s = A(0);
    for (int64_t k = 0; k < r; ++k) {
      int64_t at = base + (reverse ? r - 1 - k : k) * inner;
      A v = A(load(x[at]));
      A out = exclusive ? s : s + v;
      if constexpr (std::is_integral_v<T>)
        y[at] = T(out);
      else
        y[at] = store<T>(out);
      s += v;
    }
  }
}

void cumsum_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  int64_t axis = ctx.attrs.get_int("axis");
  Blocks b = axis_blocks(in[0], norm_axis(axis, in[0].rank()));
  int64_t n = b.outer * b.inner;
  if (n == 0) return;
  bool exclusive = ctx.attrs.get_bool("exclusive"), reverse = ctx.attrs.get_bool("reverse");
  visit(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_set<T>(kNumeric))
      cumsum_columns<T><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(
          static_cast<const T*>(b.x.data()), static_cast<T*>(out[0].data()), b.outer, b.r, b.inner,
          exclusive, reverse);
  });
  RLX_CUDA_LAUNCHED("cumsum");
}

// ---- sum_squares ------------------------------------------------------------------------
// Every input in one launch (a train step's gradient norm reads ~150 tensors): each input
// gets blocks for its size, a block finds its input by a search over the block offsets in
// the kernel's parameters, and strides over its share 8 loads a thread at a time. Block
// partials in f64, then one block folds them in a fixed order (the same result every run).

constexpr int kSquareSegs = 96;  // inputs per launch: the parameters stay under 4 KB
constexpr int kSquareUnroll = 8;
constexpr int64_t kSquareTile = int64_t(kThreads) * kSquareUnroll;

struct SquareSegs {
  const void* data[kSquareSegs];
  int64_t numel[kSquareSegs];
  int32_t first_block[kSquareSegs + 1];  // blocks of input i: [first_block[i], first_block[i+1])
  uint8_t dtype[kSquareSegs];
  int count;
};

template <class T>
__device__ double square_share(const T* x, int64_t n, int64_t start, int64_t stride) {
  double acc = 0;
  for (int64_t base = start; base < n; base += stride) {
    compute_t<T> v[kSquareUnroll];
#pragma unroll
    for (int u = 0; u < kSquareUnroll; ++u) {
      int64_t i = base + u * kThreads + threadIdx.x;
      v[u] = i < n ? load(x[i]) : compute_t<T>(0);
    }
#pragma unroll
    for (int u = 0; u < kSquareUnroll; ++u) acc += double(v[u] * v[u]);
  }
  return acc;
}

__global__ void __launch_bounds__(kThreads) square_parts(SquareSegs s, double* part) {
  int lo = 0, hi = s.count - 1;  // the input whose blocks hold blockIdx.x
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (s.first_block[mid] <= int(blockIdx.x))
      lo = mid;
    else
      hi = mid - 1;
  }
  int64_t blocks = s.first_block[lo + 1] - s.first_block[lo];
  int64_t start = (int64_t(blockIdx.x) - s.first_block[lo]) * kSquareTile,
          stride = blocks * kSquareTile;
  double acc = 0;
  switch (DType(s.dtype[lo])) {
    case DType::f64:
      acc = square_share(static_cast<const double*>(s.data[lo]), s.numel[lo], start, stride);
      break;
    case DType::f16:
      acc = square_share(static_cast<const __half*>(s.data[lo]), s.numel[lo], start, stride);
      break;
    case DType::bf16:
      acc = square_share(static_cast<const __nv_bfloat16*>(s.data[lo]), s.numel[lo], start, stride);
      break;
    default:
      acc = square_share(static_cast<const float*>(s.data[lo]), s.numel[lo], start, stride);
  }
  acc = block_fold<SumOp>(acc);
  if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

// y += the sum of part[0..n), in a fixed order.
__global__ void __launch_bounds__(1024) square_total(const double* part, int n, double* y) {
  double acc = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += part[i];
  acc = block_fold<SumOp>(acc);
  if (threadIdx.x == 0) y[0] += acc;
}

void sum_squares_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  cudaStream_t st = stream_of(ctx);
  auto* y = static_cast<double*>(out[0].data());
  // Each launch adds to y; y starts at 0 (also the sum of no elements).
  RLX_CUDA(cudaMemsetAsync(y, 0, sizeof(double), st));
  // Blocks an input gets: one a tile, at most a few waves' worth for the largest.
  const int64_t cap = int64_t(sm_count()) * 8;
  for (size_t at = 0; at < in.size();) {
    SquareSegs s{};
    int32_t blocks = 0;
    for (; at < in.size() && s.count < kSquareSegs; ++at) {
      if (in[at].numel() == 0) continue;
      int i = s.count++;
      s.data[i] = in[at].data();
      s.numel[i] = in[at].numel();
      s.dtype[i] = uint8_t(in[at].dtype());
      s.first_block[i] = blocks;
      blocks += int32_t(std::min(cap, (in[at].numel() + kSquareTile - 1) / kSquareTile));
    }
    s.first_block[s.count] = blocks;
    if (s.count == 0) break;  // only empty inputs were left
    Tensor part = Tensor::empty(DType::f64, {blocks}, ctx.device);
    auto* p = static_cast<double*>(part.data());
    square_parts<<<blocks, kThreads, 0, st>>>(s, p);
    square_total<<<1, 1024, 0, st>>>(p, blocks, y);
  }
  RLX_CUDA_LAUNCHED("sum_squares");
}

}  // namespace

void register_reduce(KernelRegistry& r) {
  add_kernel(r, "sum_squares", sum_squares_kernel, [](const KernelQuery& q) {
    return std::all_of(q.inputs.begin(), q.inputs.end(),
                       [](const TensorType& t) { return is_float(t.dtype); });
  });
  add_kernel(r, "argmax", arg_kernel<true>, dtype_in(kNumeric));
  add_kernel(r, "argmin", arg_kernel<false>, dtype_in(kNumeric));
  add_kernel(r, "cumsum", cumsum_kernel, dtype_in(kNumeric));
  struct Entry {
    const char* name;
    KernelFn fn;
    unsigned set;
  };
  const Entry table[] = {
      {"sum", reduce_kernel<SumOp, kNumeric>, kNumeric},
      {"prod", reduce_kernel<ProdOp, kNumeric>, kNumeric},
      {"reduce_max", reduce_kernel<MaxOp, kNumeric>, kNumeric},
      {"reduce_min", reduce_kernel<MinOp, kNumeric>, kNumeric},
      {"mean", reduce_kernel<MeanOp, kFloat>, kFloat},
      {"logsumexp", reduce_kernel<LogSumExpOp, kFloat>, kFloat},
      {"l1_norm", reduce_kernel<L1Op, kFloat>, kFloat},
      {"l2_norm", reduce_kernel<L2Op, kFloat>, kFloat},
  };
  for (const Entry& e : table) add_kernel(r, e.name, e.fn, dtype_in(e.set));
}

}  // namespace rlx::cuda
