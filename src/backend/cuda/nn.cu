// nn kernels: softmax, log_softmax, layer_norm, rms_norm, single-pass per row (the row is
// read once per fold and written once), as the CPU defines them (backend/cpu/nn.cpp):
// softmax is exp(x - max) / sum, so a row of all -inf, or with NaN or +inf, gives NaN;
// norms take two passes (mean, then squared deviations) rather than a formula that
// cancels. f16 / bf16 compute in float. A row is a warp's when short, a block's when long.
// fused_layer_norm (norm_fusion's) adds a residual first and stores the norm in 16 bits.
#include <cuda/std/limits>

#include "backend/cuda/elementwise.h"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/nn.h"
#include "rlx/axes.h"

namespace rlx::cuda {

namespace {

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

// The threads that share one row: a warp (kBlock false) or the whole block.
template <bool kBlock>
struct Group {
  __device__ int lane() const { return kBlock ? threadIdx.x : threadIdx.x % 32; }
  __device__ int width() const { return kBlock ? blockDim.x : 32; }
  template <class Op, class A>
  __device__ A fold(A v) const {
    if constexpr (kBlock)
      return block_fold<Op>(v);
    else
      return shfl(warp_fold<Op>(v), 0, false);
  }
  // The rows this group takes, in a grid-stride loop.
  __device__ int64_t first() const {
    return kBlock ? blockIdx.x : int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  }
  __device__ int64_t stride() const {
    return kBlock ? gridDim.x : int64_t(gridDim.x) * (blockDim.x / 32);
  }
};

// The elements of a row as g's lanes share it: f(i, run, count) gets `count` values of x
// from i on, in the compute type. Where x is 16-byte aligned each lane takes runs of 16
// bytes (one vector load: a bf16 row moves 8 times the bytes per load), the tail and an
// unaligned row one element at a time.
template <class G, class T, class F>
__device__ __forceinline__ void row_runs(const G& g, const T* x, int64_t n, F&& f) {
  using C = compute_t<T>;
  constexpr int V = 16 / sizeof(T);
  int64_t head = 0;
  if (V > 1 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    head = n / V * V;
    // kU runs loaded before any is used (more loads in flight per lane; on the H200 this
    // changed the GPT-2 step's row kernels by under 10% either way).
    constexpr int kU = 4;
    const int64_t step = int64_t(g.width()) * V;
    auto use = [&](int64_t i, const uint4& raw) {
      const T* e = reinterpret_cast<const T*>(&raw);
      C v[V];
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = C(load(e[j]));
      f(i, v, V);
    };
    int64_t i = int64_t(g.lane()) * V;
    for (; i + (kU - 1) * step < head; i += kU * step) {
      uint4 raw[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) raw[u] = *reinterpret_cast<const uint4*>(x + i + u * step);
#pragma unroll
      for (int u = 0; u < kU; ++u) use(i + u * step, raw[u]);
    }
    for (; i < head; i += step) use(i, *reinterpret_cast<const uint4*>(x + i));
  }
  for (int64_t i = head + g.lane(); i < n; i += g.width()) {
    C v[1] = {C(load(x[i]))};
    f(i, v, 1);
  }
}

// y[i] = f(i, x[i]) over a row, with row_runs' loads and the stores as wide where y is
// 16-byte aligned (a run of x's values: 16 bytes of U = T, fewer of a narrower U).
template <class G, class T, class U, class F>
__device__ __forceinline__ void map_row(const G& g, const T* x, U* y, int64_t n, F&& f) {
  using C = compute_t<T>;
  constexpr int V = 16 / sizeof(T);
  if ((reinterpret_cast<uintptr_t>(y) & 15) != 0) {
    for (int64_t i = g.lane(); i < n; i += g.width()) y[i] = store<U>(f(i, C(load(x[i]))));
    return;
  }
  struct alignas(V * sizeof(U)) Run {
    U e[V];
  };
  row_runs(g, x, n, [&](int64_t i, const C* v, int count) {
    if (count == V) {
      Run run;
#pragma unroll
      for (int j = 0; j < V; ++j) run.e[j] = store<U>(f(i + j, v[j]));
      *reinterpret_cast<Run*>(y + i) = run;
    } else {
      for (int j = 0; j < count; ++j) y[i + j] = store<U>(f(i + j, v[j]));
    }
  });
}

// exp in T's compute type. For f16 / bf16 rows the fast form (ex2.approx: a few float ulp,
// far below the 16-bit rounding of what is stored): the accurate expf made a 50304-class
// bf16 cross_entropy compute-bound. float and double rows keep the accurate one.
template <class T, class C>
__device__ __forceinline__ C exp_for(C x) {
  if constexpr (is_half_v<T>)
    return __expf(x);
  else
    return exp(x);
}

// One pass over a row for its max m and sum of exp(x - m): each lane keeps its own running
// max, rescaling its sum when a run of values raises it (the online softmax), then the
// lanes' sums are brought to the row's max. -inf adds nothing; a NaN anywhere makes the
// sum NaN (as the two-pass form does), and so does +inf (exp(inf - inf)).
template <class C, class G, class T>
__device__ void max_and_sumexp(G& g, const T* x, int64_t classes, C& m, C& sum) {
  const C none = FoldMax::init<C>();
  C lm = none, ls = 0;
  row_runs(g, x, classes, [&](int64_t, const C* v, int count) {
    C cm = lm;
    for (int j = 0; j < count; ++j) cm = FoldMax::combine(cm, v[j]);
    if (cm > lm) {
      ls *= exp_for<T>(lm - cm);  // 0 from -inf; a NaN sum stays NaN
      lm = cm;
    }
    for (int j = 0; j < count; ++j)
      if (lm > none || v[j] != v[j]) ls += exp_for<T>(v[j] - lm);
  });
  m = g.template fold<FoldMax>(lm);
  sum = g.template fold<FoldSum>(lm > none || ls != ls ? ls * exp_for<T>(lm - m) : C(0));
}

template <bool kLog, bool kBlock, class T>
__global__ void softmax_rows(const T* x0, T* y0, int64_t rows, int64_t n) {
  using C = compute_t<T>;
  Group<kBlock> g;
  for (int64_t r = g.first(); r < rows; r += g.stride()) {
    const T* x = x0 + r * n;
    T* y = y0 + r * n;
    C m, s;
    max_and_sumexp(g, x, n, m, s);
    C ls = log(s), inv = C(1) / s;
    map_row(g, x, y, n, [&](int64_t, C v) { return kLog ? v - m - ls : exp_for<T>(v - m) * inv; });
  }
}

// [outer, n, inner] along n, inner > 1: one thread per column.
template <bool kLog, class T>
__global__ void softmax_columns(const T* x0, T* y0, int64_t outer, int64_t n, int64_t inner) {
  using C = compute_t<T>;
  RLX_GRID_STRIDE(c, outer * inner) {
    int64_t o = c / inner, i = c - o * inner;
    const T* x = x0 + o * n * inner + i;
    T* y = y0 + o * n * inner + i;
    C m = FoldMax::init<C>(), s = 0;
    for (int64_t j = 0; j < n; ++j) m = FoldMax::combine(m, C(load(x[j * inner])));
    for (int64_t j = 0; j < n; ++j) s += exp(C(load(x[j * inner])) - m);
    C ls = log(s), inv = C(1) / s;
    for (int64_t j = 0; j < n; ++j) {
      C v = C(load(x[j * inner])) - m;
      y[j * inner] = store<T>(kLog ? v - ls : exp(v) * inv);
    }
  }
}

// Launches fn<kBlock> over `rows` rows of n: warps for rows up to 1024, blocks beyond.
template <class Launch>
void launch_rows(int64_t rows, int64_t n, Launch&& launch) {
  if (n > 1024) {
    // Few rows at once (~4 per SM): a row read twice (its max and sum, then the output)
    // is still in L2 the second time.
    int grid = int(std::min<int64_t>(rows, int64_t(sm_count()) * 4));
    launch(std::true_type{}, grid, 512);
  } else {
    constexpr int kWarps = kThreads / 32;
    int grid = int(std::min<int64_t>((rows + kWarps - 1) / kWarps, int64_t(sm_count()) * 32));
    launch(std::false_type{}, grid, kThreads);
  }
}

template <bool kLog>
void softmax_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  if (x.numel() == 0) return;
  const auto& shape = x.shape();
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), x.rank()));
  int64_t outer = dims_product(shape, 0, axis), n = shape[axis],
          inner = dims_product(shape, axis + 1, shape.size());
  cudaStream_t s = stream_of(ctx);
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto xp = static_cast<const T*>(x.data());
      auto yp = static_cast<T*>(out[0].data());
      if (inner != 1) {
        softmax_columns<kLog, T>
            <<<blocks_for(outer * inner), kThreads, 0, s>>>(xp, yp, outer, n, inner);
        return;
      }
      launch_rows(outer, n, [&](auto block, int grid, int threads) {
        softmax_rows<kLog, decltype(block)::value, T><<<grid, threads, 0, s>>>(xp, yp, outer, n);
      });
    }
  });
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

// Rows of n, normalised; scale / bias (may be null) are n-vectors.
template <bool kRms, bool kBlock, class T, class U = T>
__global__ void norm_rows(const T* x0, U* y0, const T* scale, const T* bias, int64_t rows,
                          int64_t n, double eps) {
  pdl_wait();     // launched programmatically dependent: overlaps the residual's producer
  pdl_trigger();  // a matvec reading the rows may start (and prefetch its weights)
  using C = compute_t<T>;
  Group<kBlock> g;
  for (int64_t r = g.first(); r < rows; r += g.stride()) {
    const T* x = x0 + r * n;
    U* y = y0 + r * n;
    C mean = 0;
    if constexpr (!kRms) {
      row_runs(g, x, n, [&](int64_t, const C* v, int count) {
        for (int j = 0; j < count; ++j) mean += v[j];
      });
      mean = g.template fold<FoldSum>(mean) / C(n);
    }
    C ss = 0;
    row_runs(g, x, n, [&](int64_t, const C* v, int count) {
      for (int j = 0; j < count; ++j) ss += (v[j] - mean) * (v[j] - mean);
    });
    C inv = C(1) / sqrt(g.template fold<FoldSum>(ss) / C(n) + C(eps));
    map_row(g, x, y, n, [&](int64_t i, C v) {
      v = (v - mean) * inv;
      if (scale) v *= C(load(scale[i]));
      if (bias) v += C(load(bias[i]));
      return v;
    });
  }
}

// x as rows over [axis, rank): their count, their length and the tail's shape.
struct TrailingRows {
  int64_t rows, n;
  std::vector<int64_t> tail;
};
TrailingRows trailing_rows(const Tensor& x, const Attrs& attrs) {
  const auto& shape = x.shape();
  int64_t a = attrs.get_int("axis");
  size_t axis = size_t(norm_axis(a, x.rank()));
  return {dims_product(shape, 0, axis), dims_product(shape, axis, shape.size()),
          std::vector<int64_t>(shape.begin() + int64_t(axis), shape.end())};
}

// The row length over [axis, rank) of a query's input 0 when static, else -1.
int64_t static_row_length(const KernelQuery& q) {
  const TensorType& x = q.inputs[0];
  int64_t a = q.attrs.get_int("axis"), n = 1;
  for (size_t i = size_t(norm_axis(a, x.rank())); i < x.shape.size(); ++i) {
    if (!x.shape[i].is_static()) return -1;
    n *= x.shape[i].value();
  }
  return n;
}

// Input i (scale or bias; none past the inputs) as a contiguous vector over the tail it
// may broadcast to.
Tensor norm_param(Ins in, size_t i, const std::vector<int64_t>& tail, cudaStream_t s) {
  if (i >= in.size()) return Tensor();
  Tensor p = in[i].broadcast_to(tail);
  if (p.is_contiguous()) return p;
  Tensor c = Tensor::empty(p.dtype(), tail, p.device());
  copy_strided(p, c, s);
  return c;
}

// y = the norm of x's rows of n (scale / bias: contiguous n-vectors or undefined).
template <bool kRms>
void norm_into(const Tensor& x, const Tensor& sc, const Tensor& bi, double eps, int64_t rows,
               int64_t n, const Tensor& y, cudaStream_t s) {
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto xp = static_cast<const T*>(x.data());
      auto yp = static_cast<T*>(y.data());
      auto sp = sc.defined() ? static_cast<const T*>(sc.data()) : nullptr;
      auto bp = bi.defined() ? static_cast<const T*>(bi.data()) : nullptr;
      launch_rows(rows, n, [&](auto block, int grid, int threads) {
        launch_pdl(norm_rows<kRms, decltype(block)::value, T>, grid, threads, 0, s, xp, yp, sp, bp,
                   rows, n, eps);
      });
    }
  });
}

template <bool kRms>
void norm_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  if (x.numel() == 0) return;
  const auto [rows, n, tail] = trailing_rows(x, ctx.attrs);
  cudaStream_t s = stream_of(ctx);
  Tensor sc = norm_param(in, 1, tail, s), bi = norm_param(in, 2, tail, s);
  norm_into<kRms>(x, sc, bi, ctx.attrs.get_float("epsilon"), rows, n, out[0], s);
  RLX_CUDA_LAUNCHED(ctx.op.name.c_str());
}

// ---- fused_layer_norm ---------------------------------------------------------------
// A warp a row, kept in registers (lane holds elements lane + 32 j): the sum x + residual
// (rounded to T, as the unfused add stores it) goes out once, and its norm is stored as U.

// ---- rows in registers (fused_layer_norm, layer_norm_grad) -------------------------
// A warp holds a row of n <= 1024: lane keeps elements lane + 32 k, k < kPer (0 past n).

// The longest row kept in registers.
constexpr int64_t kRowRegistersMax = 1024;

// f(std::integral_constant<int, kPer>) with the fewest registers a lane that hold n.
template <class F>
void with_row_registers(int64_t n, F&& f) {
  if (n <= 64)
    f(std::integral_constant<int, 2>{});
  else if (n <= 128)
    f(std::integral_constant<int, 4>{});
  else if (n <= 256)
    f(std::integral_constant<int, 8>{});
  else if (n <= 512)
    f(std::integral_constant<int, 16>{});
  else if (n <= 768)
    f(std::integral_constant<int, 24>{});
  else
    f(std::integral_constant<int, 32>{});
}

// The row's mean (0 unless kCenter) and 1 / sqrt(variance + eps), two passes over the
// registers, summed across the warp.
template <bool kCenter, int kPer, class C>
__device__ __forceinline__ void row_moments(const C (&v)[kPer], int n, double eps, C& mean,
                                            C& inv) {
  const int lane = threadIdx.x % 32;
  C sum = 0, ss = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) sum += v[k];
  mean = kCenter ? shfl(warp_fold<FoldSum>(sum), 0, false) / C(n) : C(0);
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (lane + 32 * k < n) ss += (v[k] - mean) * (v[k] - mean);
  inv = C(1) / sqrt(shfl(warp_fold<FoldSum>(ss), 0, false) / C(n) + C(eps));
}

// Every load of a row is issued before its first store (the pointers are __restrict__):
// a store between them made each load wait for the one before it. Three blocks an SM
// (80 registers) where rows of up to 768 allow it without spilling: more loads in flight.
template <int kPer, bool kRes, class T, class U>
__global__ void __launch_bounds__(kThreads, kPer <= 24 ? 3 : 2)
    add_norm_rows(const T* __restrict__ x0, const T* __restrict__ res0, T* __restrict__ sum0,
                  U* __restrict__ y0, const T* __restrict__ scale, const T* __restrict__ bias,
                  int64_t rows, int n, double eps) {
  using C = compute_t<T>;
  Group<false> g;
  const int lane = g.lane();
  for (int64_t r = g.first(); r < rows; r += g.stride()) {
    const T* x = x0 + r * n;
    C v[kPer], w[kPer], mean, inv;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int i = lane + 32 * j;
      v[j] = i < n ? C(load(x[i])) : C(0);
      if constexpr (kRes) w[j] = i < n ? C(load(res0[r * n + i])) : C(0);
    }
    if constexpr (kRes)
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        int i = lane + 32 * j;
        T t = store<T>(v[j] + w[j]);
        if (i < n) sum0[r * n + i] = t;
        v[j] = i < n ? C(load(t)) : C(0);
      }
    row_moments<true>(v, n, eps, mean, inv);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int i = lane + 32 * j;
      if (i >= n) continue;
      C z = (v[j] - mean) * inv;
      if (scale) z *= C(load(scale[i]));
      if (bias) z += C(load(bias[i]));
      y0[r * n + i] = store<U>(z);
    }
  }
}

// add_norm_rows for rows of exactly kChunks 16-byte vectors a lane (n = 32 V kChunks) with
// every pointer aligned to its vectors: lane holds vectors lane + 32 j, and each load or
// store moves V elements (bench/RESULTS.md, "GPU rows").
template <int kChunks, bool kRes, class T, class U>
__global__ void __launch_bounds__(kThreads, 3)
    add_norm_vectors(const T* __restrict__ x0, const T* __restrict__ res0, T* __restrict__ sum0,
                     U* __restrict__ y0, const T* __restrict__ scale, const T* __restrict__ bias,
                     int64_t rows, int n, double eps) {
  using C = compute_t<T>;
  constexpr int V = 16 / sizeof(T);
  using P = Vec<T, V>;  // 16 bytes of x
  using Q = Vec<U, V>;  // the same elements of y
  Group<false> g;
  const int lane = g.lane();
  for (int64_t r = g.first(); r < rows; r += g.stride()) {
    P a[kChunks], b[kChunks];
    const P* x = reinterpret_cast<const P*>(x0 + r * n);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) a[j] = x[lane + 32 * j];
    if constexpr (kRes) {
      const P* res = reinterpret_cast<const P*>(res0 + r * n);
#pragma unroll
      for (int j = 0; j < kChunks; ++j) b[j] = res[lane + 32 * j];
    }
    C v[kChunks * V], mean, inv;
#pragma unroll
    for (int j = 0; j < kChunks; ++j)
#pragma unroll
      for (int e = 0; e < V; ++e) {
        if constexpr (kRes)  // the sum rounded to T, as the unfused add stores it
          a[j].v[e] = store<T>(C(load(a[j].v[e])) + C(load(b[j].v[e])));
        v[j * V + e] = C(load(a[j].v[e]));
      }
    if constexpr (kRes) {
      P* sum = reinterpret_cast<P*>(sum0 + r * n);
#pragma unroll
      for (int j = 0; j < kChunks; ++j) sum[lane + 32 * j] = a[j];
    }
    row_moments<true>(v, n, eps, mean, inv);  // every element is in the row
    Q* y = reinterpret_cast<Q*>(y0 + r * n);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      P sc, bi;
      if (scale) sc = reinterpret_cast<const P*>(scale)[lane + 32 * j];
      if (bias) bi = reinterpret_cast<const P*>(bias)[lane + 32 * j];
      Q o;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        C z = (v[j * V + e] - mean) * inv;
        if (scale) z *= C(load(sc.v[e]));
        if (bias) z += C(load(bi.v[e]));
        o.v[e] = store<U>(z);
      }
      y[lane + 32 * j] = o;
    }
  }
}

// f(std::integral_constant<int, kChunks>) where a row is kChunks vectors of `v` elements a
// lane; false for other lengths.
template <class F>
bool with_row_vectors(int64_t n, int v, F&& f) {
  auto is = [&](int chunks) { return n == int64_t(32) * v * chunks; };
  if (is(2)) return f(std::integral_constant<int, 2>{}), true;
  if (is(3)) return f(std::integral_constant<int, 3>{}), true;
  if (is(4)) return f(std::integral_constant<int, 4>{}), true;
  if (is(6)) return f(std::integral_constant<int, 6>{}), true;
  if (is(8)) return f(std::integral_constant<int, 8>{}), true;
  return false;
}

// Whether the fused norm's kernel takes these types: a row of at most kRowRegistersMax, f32
// stored as any float type, f16 / bf16 as themselves.
bool fused_norm_supported(const KernelQuery& q) {
  const TensorType& x = q.inputs[0];
  const int64_t n = static_row_length(q);
  DType y = q.outputs[0].dtype;
  bool half = x.dtype == DType::bf16 || x.dtype == DType::f16;
  return n >= 0 && n <= kRowRegistersMax &&
         (x.dtype == DType::f32 ? y == DType::f32 || y == DType::bf16 || y == DType::f16
                                : half && y == x.dtype);
}

void fused_norm_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  if (x.numel() == 0) return;
  const auto [rows, n, tail] = trailing_rows(x, ctx.attrs);
  cudaStream_t s = stream_of(ctx);
  const bool res = ctx.attrs.get_bool("residual");
  const size_t p0 = res ? 2 : 1;
  Tensor sc = norm_param(in, p0, tail, s), bi = norm_param(in, p0 + 1, tail, s);
  double eps = ctx.attrs.get_float("epsilon");
  constexpr int kWarps = kThreads / 32;
  int grid = int(std::min<int64_t>((rows + kWarps - 1) / kWarps, int64_t(sm_count()) * 32));
  auto run = [&](auto ttag, auto utag, auto per) {
    using T = typename decltype(ttag)::type;
    using U = typename decltype(utag)::type;
    constexpr int kPer = decltype(per)::value;
    auto ptr = [](const Tensor& t) {
      return t.defined() ? static_cast<const T*>(t.data()) : nullptr;
    };
    auto y = static_cast<U*>(out[0].data());
    constexpr int V = 16 / sizeof(T);
    bool vectors = aligned<V>(y, ptr(x), ptr(sc), ptr(bi)) &&
                   (!res || aligned<V>(ptr(in[1]), static_cast<const T*>(out[1].data())));
    if (vectors && with_row_vectors(n, V, [&](auto chunks) {
          constexpr int kChunks = decltype(chunks)::value;
          if (res)
            add_norm_vectors<kChunks, true, T, U>
                <<<grid, kThreads, 0, s>>>(ptr(x), ptr(in[1]), static_cast<T*>(out[1].data()), y,
                                           ptr(sc), ptr(bi), rows, int(n), eps);
          else
            add_norm_vectors<kChunks, false, T, U><<<grid, kThreads, 0, s>>>(
                ptr(x), nullptr, nullptr, y, ptr(sc), ptr(bi), rows, int(n), eps);
        }))
      return;
    if (res)
      add_norm_rows<kPer, true, T, U>
          <<<grid, kThreads, 0, s>>>(ptr(x), ptr(in[1]), static_cast<T*>(out[1].data()), y, ptr(sc),
                                     ptr(bi), rows, int(n), eps);
    else
      add_norm_rows<kPer, false, T, U><<<grid, kThreads, 0, s>>>(
          ptr(x), nullptr, nullptr, y, ptr(sc), ptr(bi), rows, int(n), eps);
  };
  auto with_per = [&](auto ttag, auto utag) {
    with_row_registers(n, [&](auto per) { run(ttag, utag, per); });
  };
  DType yd = out[0].dtype();
  if (x.dtype() == DType::f32) {
    if (yd == DType::bf16)
      with_per(Tag<float>{}, Tag<__nv_bfloat16>{});
    else if (yd == DType::f16)
      with_per(Tag<float>{}, Tag<__half>{});
    else
      with_per(Tag<float>{}, Tag<float>{});
  } else if (x.dtype() == DType::bf16) {
    with_per(Tag<__nv_bfloat16>{}, Tag<__nv_bfloat16>{});
  } else {
    with_per(Tag<__half>{}, Tag<__half>{});
  }
  RLX_CUDA_LAUNCHED("fused_layer_norm");
}

// ---- layer_norm_grad --------------------------------------------------------------------
// A warp a row (n <= 32 kPer), the row's x and dy in registers: mean and 1/std, then
//   dx = inv (dy w - mean(dy w) - xhat mean(dy w xhat))   (no mean(dy w) term for rms),
// while each warp sums dy xhat (dscale) and dy (dbias) per column in its own slice of
// shared memory (in registers they took 2 kPer more a lane: one block an SM, too few loads
// in flight; f64 keeps one block an SM, its registers twice as many). The block's warps'
// slices are added in order; norm_grad_columns adds the blocks' in order: the same result
// every run.

constexpr int kNormGradWarps = kThreads / 32;

template <bool kCenter, int kPer, class T>
__global__ void __launch_bounds__(kThreads, sizeof(compute_t<T>) == 8 ? 1 : 2)
    norm_grad_rows(const T* x0, const T* dy0, const T* scale, T* dx0, compute_t<T>* part,
                   int64_t rows, int n, double eps) {
  using C = compute_t<T>;
  extern __shared__ __align__(16) unsigned char norm_smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  C* acc = reinterpret_cast<C*>(norm_smem);  // per warp [dscale, dbias][n]
  C* ds = acc + int64_t(warp) * 2 * n;
  C* db = ds + n;
  for (int i = lane; i < 2 * n; i += 32) ds[i] = 0;
  for (int64_t r = int64_t(blockIdx.x) * kNormGradWarps + warp; r < rows;
       r += int64_t(gridDim.x) * kNormGradWarps) {
    const T* x = x0 + r * n;
    const T* dy = dy0 + r * n;
    C xv[kPer], dv[kPer], mean, inv;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      int i = lane + 32 * k;
      xv[k] = i < n ? C(load(x[i])) : C(0);
      dv[k] = i < n ? C(load(dy[i])) : C(0);
    }
    row_moments<kCenter>(xv, n, eps, mean, inv);
    C sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      int i = lane + 32 * k;
      C xh = (xv[k] - mean) * inv, g = dv[k] * (scale && i < n ? C(load(scale[i])) : C(1));
      sg += g;
      sgx += g * xh;
      if (i < n) {  // the lane's own columns: no other lane touches them
        ds[i] += dv[k] * xh;
        db[i] += dv[k];
      }
      xv[k] = xh;
      dv[k] = g;
    }
    sg = kCenter ? shfl(warp_fold<FoldSum>(sg), 0, false) / C(n) : C(0);
    sgx = shfl(warp_fold<FoldSum>(sgx), 0, false) / C(n);
    T* dx = dx0 + r * n;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      int i = lane + 32 * k;
      if (i < n) dx[i] = store<T>(inv * (dv[k] - sg - xv[k] * sgx));
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < 2 * n; j += blockDim.x) {
    C sum = acc[j];
    for (int w = 1; w < kNormGradWarps; ++w) sum += acc[int64_t(w) * 2 * n + j];
    part[int64_t(blockIdx.x) * 2 * n + j] = sum;
  }
}

template <bool kCenter, int kPer, class T>
void launch_norm_grad_rows(int blocks, int n, cudaStream_t s, const T* x, const T* dy,
                           const T* scale, T* dx, compute_t<T>* part, int64_t rows, double eps) {
  constexpr auto kernel = norm_grad_rows<kCenter, kPer, T>;
  // The warps' slices for the longest row this kPer takes (past 48 KB at f32 kPer 32).
  static const bool raised = [] {
    int most = int(kNormGradWarps * 2 * 32 * kPer * sizeof(compute_t<T>));
    RLX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
    return true;
  }();
  (void)raised;
  kernel<<<blocks, kThreads, size_t(kNormGradWarps * 2 * n) * sizeof(compute_t<T>), s>>>(
      x, dy, scale, dx, part, rows, n, eps);
}

// dscale, dbias: column j of part [blocks, 2n] summed over the blocks, 32 columns a block
// (coalesced), 8 row groups folded in order in shared memory.
template <class T>
__global__ void norm_grad_columns(const compute_t<T>* part, int blocks, int n, T* dscale,
                                  T* dbias) {
  using C = compute_t<T>;
  __shared__ C sums[8][32];
  const int j = blockIdx.x * 32 + threadIdx.x;
  C s = 0;
  if (j < 2 * n)
    for (int b = threadIdx.y; b < blocks; b += 8) s += part[int64_t(b) * 2 * n + j];
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < 2 * n) {
    for (int y = 1; y < 8; ++y) s += sums[y][threadIdx.x];
    if (j < n)
      dscale[j] = store<T>(s);
    else
      dbias[j - n] = store<T>(s);
  }
}

void layer_norm_grad_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &dy = in[1];
  const auto [rows, n, tail] = trailing_rows(x, ctx.attrs);
  cudaStream_t s = stream_of(ctx);
  if (n == 0) return;
  if (rows == 0) {
    fill(out[1], 0, s);
    fill(out[2], 0, s);
    return;
  }
  bool center = ctx.attrs.get_bool("center");
  double eps = ctx.attrs.get_float("epsilon");
  int blocks =
      int(std::min<int64_t>((rows + kNormGradWarps - 1) / kNormGradWarps, int64_t(sm_count()) * 2));
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using C = compute_t<T>;
      Tensor part = Tensor::empty(std::is_same_v<C, double> ? DType::f64 : DType::f32,
                                  {blocks, 2 * n}, x.device());
      auto pp = static_cast<C*>(part.data());
      auto rows_with = [&](auto per) {
        constexpr int kPer = decltype(per)::value;
        auto launch = [&](auto fn) {
          fn(blocks, int(n), s, static_cast<const T*>(x.data()), static_cast<const T*>(dy.data()),
             in.size() > 2 ? static_cast<const T*>(in[2].data()) : nullptr,
             static_cast<T*>(out[0].data()), pp, rows, eps);
        };
        if (center)
          launch(launch_norm_grad_rows<true, kPer, T>);
        else
          launch(launch_norm_grad_rows<false, kPer, T>);
      };
      with_row_registers(n, rows_with);
      norm_grad_columns<T><<<int((2 * n + 31) / 32), dim3(32, 8), 0, s>>>(
          pp, blocks, int(n), static_cast<T*>(out[1].data()), static_cast<T*>(out[2].data()));
    }
  });
  RLX_CUDA_LAUNCHED("layer_norm_grad");
}

// Rows of the table picked by indices; an index out of range is reported in *bad (the
// first one seen wins) and its row left unwritten.
template <class E, class I>
__global__ void embedding_rows(const E* table, const I* idx, E* out, int64_t n, int64_t d,
                               int64_t vocab, unsigned long long* bad) {
  RLX_GRID_STRIDE(t, n * d) {
    int64_t i = t / d, c = t - i * d, j = int64_t(idx[i]);
    if (j < 0 || j >= vocab) {
      report_bad(bad, j, 0);
      continue;
    }
    out[t] = table[j * d + c];
  }
}

void embedding_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &table = in[0], &idx = in[1];
  int64_t n = idx.numel(), d = table.shape()[1], vocab = table.shape()[0];
  if (n * d == 0) return;
  cudaStream_t s = stream_of(ctx);
  unsigned long long* bad = deferred_check(ctx.device, [vocab](int64_t j, int64_t) {
    fail<ValueError>("embedding", "expected indices in [0, ", vocab, "), got ", j);
  });
  // Rows of whole 16-byte vectors move as such (bench/RESULTS.md, "GPU rows").
  size_t bytes = dtype_size(table.dtype());
  bool vectors =
      d * int64_t(bytes) % 16 == 0 &&
      aligned<1>(static_cast<const uint4*>(table.data()), static_cast<const uint4*>(out[0].data()));
  int64_t width = vectors ? d * int64_t(bytes) / 16 : d;
  auto rows = [&](auto etag) {
    using E = typename decltype(etag)::type;
    visit(idx.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>)
        embedding_rows<E, I><<<blocks_for(n * width), kThreads, 0, s>>>(
            static_cast<const E*>(table.data()), static_cast<const I*>(idx.data()),
            static_cast<E*>(out[0].data()), n, width, vocab, bad);
    });
  };
  if (vectors)
    rows(Tag<uint4>{});
  else
    visit_bytes(bytes, rows);
  RLX_CUDA_LAUNCHED("embedding");
}

// ---- cross_entropy ---------------------------------------------------------------------
// As on the CPU (backend/cpu/nn.cpp): per row lse = logsumexp(x); a class label y gives
// (1 - eps) (lse - x[y]) + eps (lse - mean(x)), ignore_index rows give 0 and do not count;
// probabilities p give -sum_c ((1 - eps) p[c] + eps / C) (x[c] - lse). Row losses in f64,
// then one block sums them in a fixed order (the same result on every run).

template <bool kBlock, class T, class I>
__global__ void xent_rows(const T* x0, const I* labels, const T* p0, double* loss, double* counted,
                          int64_t rows, int64_t classes, double eps, int64_t ignore,
                          unsigned long long* bad) {
  using C = compute_t<T>;
  Group<kBlock> g;
  for (int64_t r = g.first(); r < rows; r += g.stride()) {
    const T* x = x0 + r * classes;
    C m, se;
    max_and_sumexp(g, x, classes, m, se);
    C lse = m + log(se);
    C l = 0, count = 1;
    if (p0) {
      const T* p = p0 + r * classes;
      C u = classes ? C(eps) / C(classes) : C(0), acc = 0;
      for (int64_t i = g.lane(); i < classes; i += g.width())
        acc += ((C(1) - C(eps)) * C(load(p[i])) + u) * (C(load(x[i])) - lse);
      l = -g.template fold<FoldSum>(acc);
    } else if (int64_t(labels[r]) == ignore) {
      count = 0;
    } else {
      int64_t y = int64_t(labels[r]);
      if (y < 0 || y >= classes) {
        if (g.lane() == 0) report_bad(bad, y, 0);
      } else {
        l = (C(1) - C(eps)) * (lse - C(load(x[y])));
      }
      if (eps > 0) {
        C sum = 0;
        row_runs(g, x, classes, [&](int64_t, const C* v, int count) {
          for (int j = 0; j < count; ++j) sum += v[j];
        });
        l += C(eps) * (lse - g.template fold<FoldSum>(sum) / C(classes));
      }
    }
    if (g.lane() == 0) {
      loss[r] = double(l);
      counted[r] = double(count);
    }
  }
}

template <class T>
__global__ void xent_total(const double* loss, const double* counted, int64_t rows, bool mean,
                           T* y) {
  double total = 0, count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += loss[r];
    count += counted[r];
  }
  total = block_fold<FoldSum>(total);
  count = block_fold<FoldSum>(count);
  if (threadIdx.x == 0) y[0] = store<T>(compute_t<T>(mean ? total / count : total));
}

template <class T>
__global__ void xent_store(const double* loss, T* y, int64_t rows) {
  RLX_GRID_STRIDE(r, rows) y[r] = store<T>(compute_t<T>(loss[r]));
}

void cross_entropy_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &t = in[1];
  int64_t classes = x.shape().back();
  int64_t rows = dims_product(x.shape(), 0, x.shape().size() - 1);
  cudaStream_t s = stream_of(ctx);
  const std::string& reduction = ctx.attrs.get_string("reduction");
  Tensor loss = Tensor::empty(DType::f64, {rows}, x.device());
  Tensor counted = Tensor::empty(DType::f64, {rows}, x.device());
  bool probs = is_float(t.dtype());
  double eps = ctx.attrs.get_float("label_smoothing");
  int64_t ignore = ctx.attrs.get_int("ignore_index");
  unsigned long long* bad =
      probs ? nullptr : deferred_check(ctx.device, [classes, ignore](int64_t y, int64_t) {
        fail<ValueError>("cross_entropy", "expected class labels in [0, ", classes,
                         ") or ignore_index ", ignore, ", got ", y);
      });
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto rows_with = [&](auto itag) {
        using I = typename decltype(itag)::type;
        if (rows == 0) return;
        launch_rows(rows, classes, [&](auto block, int grid, int threads) {
          xent_rows<decltype(block)::value, T, I><<<grid, threads, 0, s>>>(
              static_cast<const T*>(x.data()), probs ? nullptr : static_cast<const I*>(t.data()),
              probs ? static_cast<const T*>(t.data()) : nullptr, static_cast<double*>(loss.data()),
              static_cast<double*>(counted.data()), rows, classes, eps, ignore, bad);
        });
      };
      if (probs) {
        rows_with(Tag<int64_t>{});
      } else {
        visit(t.dtype(), [&](auto itag) {
          using I = typename decltype(itag)::type;
          if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) rows_with(itag);
        });
      }
      // The loss in T, or in f32 (f32_loss on 16-bit logits).
      auto finish = [&](auto otag) {
        using O = typename decltype(otag)::type;
        O* y = static_cast<O*>(out[0].data());
        if (reduction == "none") {
          if (rows)
            xent_store<O><<<blocks_for(rows), kThreads, 0, s>>>(
                static_cast<const double*>(loss.data()), y, rows);
        } else {
          xent_total<O><<<1, 1024, 0, s>>>(static_cast<const double*>(loss.data()),
                                           static_cast<const double*>(counted.data()), rows,
                                           reduction == "mean", y);
        }
      };
      if (out[0].dtype() == x.dtype())
        finish(tag);
      else
        finish(Tag<float>{});
    }
  });
  RLX_CUDA_LAUNCHED("cross_entropy");
}

// cross_entropy_grad: per row w * (softmax(x) - (1 - eps) onehot(y) - eps / C), 0 where
// y is ignore_index (a label out of range was the forward's error; here it has no one-hot).
template <bool kBlock, class T, class I>
__global__ void xent_grad_rows(const T* x0, const I* labels, const compute_t<T>* w, bool w_rows,
                               T* dx0, int64_t rows, int64_t classes, double eps, int64_t ignore) {
  using C = compute_t<T>;
  Group<kBlock> g;
  for (int64_t r = g.first(); r < rows; r += g.stride()) {
    const T* x = x0 + r * classes;
    T* dx = dx0 + r * classes;
    int64_t y = int64_t(labels[r]);
    if (y == ignore) {
      map_row(g, x, dx, classes, [](int64_t, C) { return C(0); });
      continue;
    }
    C m, se;
    max_and_sumexp(g, x, classes, m, se);
    C inv = C(1) / se, u = C(eps) / C(classes), hit = C(1) - C(eps);
    C wr = w[w_rows ? r : 0];
    map_row(g, x, dx, classes, [&](int64_t i, C v) {
      return wr * (exp_for<T>(v - m) * inv - u - (i == y ? hit : C(0)));
    });
  }
}

void cross_entropy_grad_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &t = in[1];
  const Tensor& dx = out[0];
  int64_t classes = x.shape().back();
  int64_t rows = dims_product(x.shape(), 0, x.shape().size() - 1);
  if (rows == 0 || classes == 0) return;
  cudaStream_t s = stream_of(ctx);
  // w per row (or one value) in the compute type: it may come in another float dtype (an
  // f32 loss's cotangent for 16-bit logits).
  std::vector<int64_t> row_shape(x.shape().begin(), x.shape().end() - 1);
  Tensor w = in[2];
  bool w_rows = w.numel() != 1;
  DType wt = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  if (w_rows || w.dtype() != wt) {
    Tensor b = w_rows ? w.broadcast_to(row_shape) : w.reshape({});
    w = Tensor::empty(wt, b.shape(), w.device());
    cast_into(b, w, s);
  }
  double eps = ctx.attrs.get_float("label_smoothing");
  int64_t ignore = ctx.attrs.get_int("ignore_index");
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      visit(t.dtype(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>)
          launch_rows(rows, classes, [&](auto block, int grid, int threads) {
            xent_grad_rows<decltype(block)::value, T, I><<<grid, threads, 0, s>>>(
                static_cast<const T*>(x.data()), static_cast<const I*>(t.data()),
                static_cast<const compute_t<T>*>(w.data()), w_rows, static_cast<T*>(dx.data()),
                rows, classes, eps, ignore);
          });
      });
    }
  });
  RLX_CUDA_LAUNCHED("cross_entropy_grad");
}

}  // namespace

void rms_norm_into(const Tensor& x, const Tensor& scale, double eps, const Tensor& y,
                   cudaStream_t s) {
  const int64_t n = x.shape().back();
  if (x.numel() == 0) return;
  const int64_t rows = x.numel() / n;
  if (y.dtype() == x.dtype()) {
    norm_into<true>(x, scale, Tensor(), eps, rows, n, y, s);
  } else {  // f32 rows stored as a GEMM's 16-bit operand: no f32 copy in between
    auto launch = [&](auto* yp) {
      launch_rows(rows, n, [&](auto block, int grid, int threads) {
        launch_pdl(
            norm_rows<true, decltype(block)::value, float, std::remove_pointer_t<decltype(yp)>>,
            grid, threads, 0, s, x.data_as<float>(), yp, scale.data_as<float>(),
            static_cast<const float*>(nullptr), rows, n, eps);
      });
    };
    if (x.dtype() != DType::f32 || scale.dtype() != DType::f32)
      fail<TypeError>("rms_norm", "expected f32 rows and scale for a ", dtype_name(y.dtype()),
                      " output, got ", dtype_name(x.dtype()), " and ", dtype_name(scale.dtype()));
    if (y.dtype() == DType::bf16)
      launch(static_cast<__nv_bfloat16*>(y.data()));
    else if (y.dtype() == DType::f16)
      launch(static_cast<__half*>(y.data()));
    else
      fail<TypeError>("rms_norm", "expected an f32, f16 or bf16 output, got ",
                      dtype_name(y.dtype()));
  }
  RLX_CUDA_LAUNCHED("rms_norm");
}

void register_nn(KernelRegistry& r) {
  add_kernel(r, "cross_entropy", cross_entropy_kernel, dtype_in(kFloat));
  add_kernel(r, "cross_entropy_grad", cross_entropy_grad_kernel, dtype_in(kFloat));
  add_kernel(r, "embedding", embedding_kernel);
  register_attention(r);
  add_kernel(r, "softmax", softmax_kernel<false>, dtype_in(kFloat));
  add_kernel(r, "log_softmax", softmax_kernel<true>, dtype_in(kFloat));
  add_kernel(r, "layer_norm", norm_kernel<false>, dtype_in(kFloat));
  add_kernel(r, "rms_norm", norm_kernel<true>, dtype_in(kFloat));
  add_kernel(r, "fused_layer_norm", fused_norm_kernel, fused_norm_supported);
  add_kernel(r, "layer_norm_grad", layer_norm_grad_kernel, [](const KernelQuery& q) {
    const int64_t n = static_row_length(q);
    return is_float(q.inputs[0].dtype) && n >= 0 && n <= kRowRegistersMax;
  });
}

}  // namespace rlx::cuda
