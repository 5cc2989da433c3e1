// sample on CUDA, taking the CPU kernel's decisions (backend/cpu/llm_sample.cpp defines the
// op) from the same f32 values: its exp, its float sums in its AVX2 lane order, its double
// sums in order on one thread. One block per row; nothing waits for the host (CUDA Graphs).
// The CPU's order (logit down, then id up) is a 64-bit key; the first m keys are found by a
// radix select and at most kCap of them sorted in shared memory, so top_k, top_p (in growing
// windows) and min_p never sort V. Only a draw over more than kCap candidates adds its
// double weights in another (fixed) order.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cuda/std/limits>

#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/philox.h"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/llm_kernels.h"

namespace rlx::cuda {

namespace {

constexpr int kT = 1024;    // threads per row
constexpr int kCap = 4096;  // candidates sorted in shared memory (and the largest top_k)
constexpr int kUnroll = 4;  // 16-byte loads in flight per thread in a pass over a row
constexpr uint64_t kNone = ~0ull;

struct Params {
  int64_t v, r, top_k;
  double top_p, penalty;
  float inv_t, log_min_p;  // float(1 / temperature), float(log(min_p)), as on the CPU
  bool greedy, min_p, penalize;
  __host__ __device__ int64_t stride() const { return (v + 3) / 4 * 4; }  // 16-byte scratch rows
};

// ---- the CPU's arithmetic ------------------------------------------------------------

// u53 of words w0 and w1 of Philox4x32-10 block `ctr` under key `seed` (cpu/philox.h's
// own functions, compiled for the device).
__device__ double philox_u53(uint64_t seed, uint64_t ctr) {
  const cpu::philox::Block w = cpu::philox::Stream{seed, 0}.block(ctr);
  return cpu::philox::u53(w[0], w[1]);
}

// cpu::fm::exp, operation for operation. g++ contracts its scalar x * log2e + shift into one
// fma (kFused); exp8, the AVX2 form exp_shifted uses on whole groups of 8, rounds the
// product first. Explicit roundings keep nvcc from contracting anything else.
namespace fm = cpu::fm;
constexpr float kP0 = fm::kExpPoly[0], kP1 = fm::kExpPoly[1], kP2 = fm::kExpPoly[2],
                kP3 = fm::kExpPoly[3], kP4 = fm::kExpPoly[4], kP5 = fm::kExpPoly[5];
constexpr float kLog2e = fm::kLog2e, kLn2Hi = fm::kLn2Hi, kLn2Lo = fm::kLn2Lo;
constexpr float kExpHi = fm::kExpHi, kExpLo = fm::kExpLo;

template <bool kFused>
__device__ __forceinline__ float cpu_exp(float x) {
  const float xc = x > kExpHi ? kExpHi : (x < kExpLo ? kExpLo : x);
  constexpr float kShift = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = kFused ? __fmaf_rn(xc, kLog2e, kShift) : __fadd_rn(__fmul_rn(xc, kLog2e), kShift);
  const int n = __float_as_int(t) - __float_as_int(kShift), n1 = n >> 1, n2 = n - n1;
  const float nf = __fsub_rn(t, kShift);
  float r = __fmaf_rn(nf, kLn2Hi, xc);
  r = __fmaf_rn(nf, kLn2Lo, r);
  const float poly[] = {kP1, kP2, kP3, kP4, kP5};
  float p = kP0;
  for (float c : poly) p = __fmaf_rn(p, r, c);
  const float e = __fadd_rn(__fmaf_rn(p, __fmul_rn(r, r), r), 1.f);
  return __fmul_rn(__fmul_rn(e, __int_as_float((n1 + 127) << 23)),
                   __int_as_float((n2 + 127) << 23));
}

// ---- the order -----------------------------------------------------------------------

// Float bits made monotone as unsigned (NaN never gets here); -0 is made +0 first, as the
// CPU's comparisons tie them.
__device__ __forceinline__ uint32_t key_of(float x) {
  const uint32_t u = __float_as_uint(x + 0.f);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ float value_of(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? k & 0x7fffffffu : ~k);
}
// Larger is earlier in the CPU's order: higher logit, then lower id.
__device__ __forceinline__ uint64_t order_of(float x, int64_t i) {
  return uint64_t(key_of(x)) << 32 | ~uint32_t(i);
}
__device__ __forceinline__ int id_of(uint64_t c) { return int(~uint32_t(c)); }
__device__ __forceinline__ float logit_of(uint64_t c) { return value_of(uint32_t(c >> 32)); }

// ---- block helpers -------------------------------------------------------------------

// f(i, x[i], in) over a scratch row (16-byte aligned and padded), four ids a load; whole
// warps make every call (in is false past the end), so f may use warp votes.
template <class F>
__device__ __forceinline__ void each(const float* x, int64_t v, F&& f) {
  for (int64_t t = 0; t < v; t += 4 * kT * kUnroll) {
    float4 xs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = t + 4 * (u * kT + threadIdx.x);
      xs[u] = i < v ? *reinterpret_cast<const float4*>(x + i) : float4{};
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t i = t + 4 * (u * kT + threadIdx.x) + k;
        f(i, (&xs[u].x)[k], i < v);
      }
  }
}

// An exclusive prefix sum in thread order (a fixed tree: the same bits on every run).
__device__ double block_scan(double v, double& total) {
  __shared__ double part[kT / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double incl = v;
  for (int o = 1; o < 32; o *= 2) {
    const double t = __shfl_up_sync(~0u, incl, o);
    if (lane >= o) incl += t;
  }
  double excl = __shfl_up_sync(~0u, incl, 1);
  if (lane == 0) excl = 0;
  if (lane == 31) part[warp] = incl;
  __syncthreads();
  double before = 0;
  total = 0;
  for (int w = 0; w < kT / 32; ++w) {
    if (w == warp) before = total;
    total += part[w];
  }
  __syncthreads();
  return before + excl;
}

// ---- reading a row -------------------------------------------------------------------

// A logit as the CPU reads it: f32, NaN as -inf.
template <class T>
__device__ __forceinline__ float read(T raw) {
  const float x = float(load(raw));
  return isnan(x) ? -::cuda::std::numeric_limits<float>::infinity() : x;
}

// f(i, x) once per id of the row, each thread's ids increasing; 16-byte loads where aligned.
template <class T, class F>
__device__ __forceinline__ void read_row(const T* l, int64_t v, F&& f) {
  constexpr int kV = 16 / sizeof(T);
  const int64_t head =
      min(v, int64_t((16 - (reinterpret_cast<uintptr_t>(l) & 15)) & 15) / int64_t(sizeof(T)));
  const int64_t body = (v - head) / kV;
  const uint4* vec = reinterpret_cast<const uint4*>(l + head);
  if (threadIdx.x < head) f(threadIdx.x, read(l[threadIdx.x]));
  for (int64_t j0 = threadIdx.x; j0 < body; j0 += int64_t(kT) * kUnroll) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (j0 + u * kT < body) raw[u] = vec[j0 + u * kT];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (j0 + u * kT < body) {
        const T* e = reinterpret_cast<const T*>(&raw[u]);
#pragma unroll
        for (int k = 0; k < kV; ++k) f(head + (j0 + u * kT) * kV + k, read(e[k]));
      }
  }
  for (int64_t i = head + body * kV + threadIdx.x; i < v; i += kT) f(i, read(l[i]));
}

// Reads the row (into x, when given) and returns the order key of its argmax. With a
// penalty the history's ids are marked in `bits`: the pass skips them (it only looks when
// one would lead), then they are penalised apart (x rewritten there). History ids at or
// past V are reported (the row's least) and otherwise ignored.
template <class T>
__device__ uint64_t prepare(const T* l, const int32_t* h, const Params& p, float* x, unsigned* bits,
                            unsigned long long* bad) {
  __shared__ int least_bad;
  if (p.penalize) {
    for (int64_t i = threadIdx.x; i < (p.v + 31) / 32; i += kT) bits[i] = 0;
    if (threadIdx.x == 0) least_bad = INT_MAX;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < p.r; j += kT) {
      const int id = h[j];
      if (id >= p.v)
        atomicMin(&least_bad, id);
      else if (id >= 0)
        atomicOr(&bits[id >> 5], 1u << (id & 31));
    }
    __syncthreads();
    if (threadIdx.x == 0 && least_bad != INT_MAX) report_bad(bad, least_bad, 0);
  }
  float bv = 0;
  int64_t bi = -1;  // this thread's first largest unpenalised logit
  read_row(l, p.v, [&](int64_t i, float xi) {
    if (x) x[i] = xi;
    if ((bi < 0 || xi > bv) && !(p.penalize && (bits[i >> 5] >> (i & 31) & 1))) {
      bv = xi;
      bi = i;
    }
  });
  uint64_t best = bi < 0 ? 0 : order_of(bv, bi);
  if (p.penalize) {
    __syncthreads();  // x's plain values are in
    for (int64_t j = threadIdx.x; j < p.r; j += kT) {
      const int id = h[j];
      if (id < 0 || id >= p.v) continue;
      const float xi = read(l[id]);
      const float y = xi > 0 ? float(double(xi) / p.penalty) : float(double(xi) * p.penalty);
      if (x) x[id] = y;
      best = max(best, order_of(y, id));
    }
  }
  return block_fold<FoldMax>(best);
}

// ---- selecting and gathering ---------------------------------------------------------

// hist[d] += 1 for the lanes that are on; lanes agreeing with the first one add as one (a
// row of equal or masked logits would otherwise queue on one counter).
__device__ __forceinline__ void count(int* hist, bool on, unsigned d) {
  const unsigned lanes = __ballot_sync(~0u, on);
  if (lanes == 0) return;
  const int lead = __ffs(lanes) - 1;
  const unsigned d0 = __shfl_sync(~0u, d, lead);
  const unsigned same = __ballot_sync(~0u, on && d == d0);
  if (on && d != d0)
    atomicAdd(&hist[d], 1);
  else if (int(threadIdx.x % 32) == lead)
    atomicAdd(&hist[d0], __popc(same));
}

// The bucket of hist[0, nb) that holds the m-th largest key, counting from the top bucket:
// {bucket, keys above it, keys in it}; every thread gets it.
__device__ int3 find_bucket(const int* hist, int nb, int m) {
  __shared__ int3 pick;
  const int per = nb / kT, top = nb - 1 - int(threadIdx.x) * per;  // this thread's, from the top
  int own = 0;
  for (int d = 0; d < per; ++d) own += hist[top - d];
  double all;
  int above = int(block_scan(own, all));
  if (above < m && m <= above + own)
    for (int d = top;; --d) {
      if (above + hist[d] >= m) {
        pick = make_int3(d, above, hist[d]);
        break;
      }
      above += hist[d];
    }
  __syncthreads();
  return pick;
}

// Appends the order keys c with lo <= c < hi of the logits >= cut to cand (in no order);
// returns how many.
__device__ int gather(const float* x, int64_t v, uint64_t lo, uint64_t hi, float cut,
                      uint64_t* cand) {
  __shared__ int n;
  if (threadIdx.x == 0) n = 0;
  __syncthreads();
  const int lane = threadIdx.x % 32;
  each(x, v, [&](int64_t i, float xi, bool in) {
    const uint64_t c = order_of(xi, i);
    const bool on = in && c >= lo && c < hi && xi >= cut;
    const unsigned lanes = __ballot_sync(~0u, on);
    if (lanes == 0) return;
    const int base = __shfl_sync(~0u, lane == 0 ? atomicAdd(&n, __popc(lanes)) : 0, 0);
    if (on) cand[base + __popc(lanes & ((1u << lane) - 1))] = c;
  });
  __syncthreads();
  const int got = n;
  __syncthreads();
  return got;
}

// Bitonic sort of a[0, n), largest first (n <= kCap; a[n, pow2) is padded with 0).
__device__ void sort_desc(uint64_t* a, int n) {
  int p = 1;
  while (p < n) p <<= 1;
  for (int i = n + threadIdx.x; i < p; i += kT) a[i] = 0;
  __syncthreads();
  for (int k = 2; k <= p; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < p; i += kT) {
        const int o = i ^ j;
        if (o > i) {
          const uint64_t a0 = a[i], a1 = a[o];
          if (((i & k) == 0) == (a0 < a1)) {
            a[i] = a1;
            a[o] = a0;
          }
        }
      }
      __syncthreads();
    }
}

// The first m keys of the order below hi, sorted into cand[0, m) (more may follow). A
// radix select over 11, 11, 10-bit digits of the logit, then of the id where ties need it,
// stops as soon as every key from its bucket up fits in cand; those are gathered.
__device__ void take(const float* x, int64_t v, int64_t m, uint64_t hi, uint64_t* cand, int* hist) {
  uint64_t prefix = 0;
  int fixed = 0;  // bits of the bucket known
  int64_t rem = m;
  for (int level = 0;; ++level) {
    const int bits = level % 3 == 2 ? 10 : 11, shift = 64 - fixed - bits;
    for (int i = threadIdx.x; i < 1 << bits; i += kT) hist[i] = 0;
    __syncthreads();
    each(x, v, [&](int64_t i, float xi, bool in) {
      const uint64_t c = order_of(xi, i);
      const bool on = in && c < hi && (fixed == 0 || c >> (64 - fixed) == prefix);
      count(hist, on, unsigned(c >> shift) & ((1u << bits) - 1));
    });
    __syncthreads();
    const int3 b = find_bucket(hist, 1 << bits, int(rem));
    rem -= b.y;
    prefix = prefix << bits | unsigned(b.x);
    fixed += bits;
    if (m - rem + b.z <= kCap) break;  // at 64 bits b.z is 1: keys are unique
  }
  sort_desc(cand, gather(x, v, prefix << (64 - fixed), hi, -INFINITY, cand));
}

// ---- sums as the CPU makes them ------------------------------------------------------

// Thread 0 adds w[0, n) to c in order (loads ahead of adds); the first i where done(c), or n.
template <class Done>
__device__ int walk(const float* w, int n, double& c, Done&& done) {
  for (int i0 = 0; i0 < n; i0 += 8) {
    float b[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) b[j] = i0 + j < n ? w[i0 + j] : 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (i0 + j < n && done(c += b[j])) return i0 + j;
  }
  return n;
}
__device__ double sum(const float* w, int n) {
  double c = 0;
  walk(w, n, c, [](double) { return false; });
  return c;
}

// exp_shifted's float sum (cpu/llm_kernels.h) of e^(arg(i)) as the CPU's AVX2 build adds
// it: eight lanes over i % 8 for whole groups of 8 (exp8), the lanes in order, then the
// tail (scalar exp). The other warps fill tiles of terms in shared memory (two,
// alternating) while warp 0 adds the last one.
template <class A>
__device__ float cpu_sum(int64_t v, float* buf, A&& arg) {
  constexpr int kTile = kCap;  // floats per tile; buf holds two
  __shared__ float result;
  const int64_t body = v / 8 * 8, tiles = (body + kTile - 1) / kTile;
  const int lane = threadIdx.x;
  float acc = 0.f;
  for (int64_t t = 0; t <= tiles; ++t) {
    if (t < tiles && threadIdx.x >= 32)
      for (int64_t i = t * kTile + threadIdx.x - 32; i < min(body, (t + 1) * kTile); i += kT - 32)
        buf[(t & 1) * kTile + (i - t * kTile)] = cpu_exp<false>(arg(i));
    if (t > 0 && lane < 8) {  // the loads run ahead; +0 past the end adds nothing
      const float* b = buf + ((t - 1) & 1) * kTile;
      const int n = int(min(int64_t(kTile), body - (t - 1) * kTile));
#pragma unroll 2
      for (int i0 = lane; i0 < n; i0 += 8 * 32) {
        float r[32];
#pragma unroll
        for (int j = 0; j < 32; ++j) r[j] = i0 + 8 * j < n ? b[i0 + 8 * j] : 0.f;
#pragma unroll
        for (int j = 0; j < 32; ++j) acc = __fadd_rn(acc, r[j]);
      }
    }
    __syncthreads();
  }
  if (threadIdx.x < 32) {
    float total = 0.f;
    for (int j = 0; j < 8; ++j) total = __fadd_rn(total, __shfl_sync(~0u, acc, j));
    if (lane == 0) {
      for (int64_t i = body; i < v; ++i) total = __fadd_rn(total, cpu_exp<true>(arg(i)));
      result = total;
    }
  }
  __syncthreads();
  const float s = result;
  __syncthreads();
  return s;
}

// The draw over more than kCap candidates (keys >= lo, logits >= cut) in increasing id
// order, in tiles of kPer ids a thread: the threads' sums of their weights in double, their
// prefix sums by a fixed tree, then each thread walks its ids from its prefix; the first
// id to pass u * total wins. total < 0: the sum of the weights.
template <class W>
__device__ int row_walk(const float* x, int64_t v, uint64_t lo, float cut, double u, double total,
                        W&& weight) {
  constexpr int kPer = 8;
  __shared__ int found;
  auto in = [&](int64_t i, float xi) { return xi >= cut && order_of(xi, i) >= lo; };
  if (total < 0) {
    double s = 0;
    each(x, v, [&](int64_t i, float xi, bool on) { s += on && in(i, xi) ? weight(i, xi) : 0.0; });
    block_scan(s, total);
  }
  const double target = u * total;
  if (threadIdx.x == 0) found = INT_MAX;
  int last = -1;
  double base = 0;
  for (int64_t t = 0; t < v; t += int64_t(kT) * kPer) {
    const int64_t i0 = t + threadIdx.x * kPer;
    double w[kPer], s = 0;
    unsigned on = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      w[j] = 0;
      if (i0 + j < v && in(i0 + j, x[i0 + j])) {
        w[j] = weight(i0 + j, x[i0 + j]);
        on |= 1u << j;
        last = int(i0 + j);
      }
      s += w[j];
    }
    double tile, c = base + block_scan(s, tile);
    for (int j = 0; j < kPer; ++j)
      if ((on >> j & 1) && (c += w[j]) > target) {
        atomicMin(&found, int(i0 + j));
        break;
      }
    __syncthreads();
    if (found != INT_MAX) return found;
    base += tile;
  }
  return block_fold<FoldMax>(last);  // rounding at the very top: the last candidate
}

// ---- the kernels ---------------------------------------------------------------------

template <class T>
__global__ void __launch_bounds__(kT) greedy_rows(const T* logits, const int32_t* hist, int32_t* y,
                                                  Params p, unsigned long long* bad) {
  extern __shared__ uint64_t smem[];
  const uint64_t best = prepare(logits + blockIdx.x * p.v, hist ? hist + blockIdx.x * p.r : nullptr,
                                p, nullptr, reinterpret_cast<unsigned*>(smem), bad);
  if (threadIdx.x == 0) y[blockIdx.x] = id_of(best);
}

// xs: f32 scratch [rows, stride] for the penalised logits. Shared memory: the penalty's
// bitmap while the row is read, then cand (kCap keys) and w (kCap floats, or the histogram).
template <class T>
__global__ void __launch_bounds__(kT)
    sample_rows(const T* logits, const int64_t* rng, const int32_t* hist, int32_t* y, float* xs,
                Params p, unsigned long long* bad) {
  extern __shared__ uint64_t smem[];
  uint64_t* cand = smem;
  float* w = reinterpret_cast<float*>(smem + kCap);
  int* hist_s = reinterpret_cast<int*>(smem + kCap);
  __shared__ double cum, want;
  __shared__ int hit;
  const int64_t row = blockIdx.x, v = p.v;
  float* x = xs + row * p.stride();
  const uint64_t best = prepare(logits + row * v, hist ? hist + row * p.r : nullptr, p, x,
                                reinterpret_cast<unsigned*>(smem), bad);
  const float top = logit_of(best);
  if (!isfinite(top)) {  // all -inf: nothing to draw; +inf: certain
    if (threadIdx.x == 0) y[row] = id_of(best);
    return;
  }
  auto weigh = [&](int cnt, float inv_t) {  // w[i] = e^((l - top) * inv_t) over cand[0, cnt)
    for (int i = threadIdx.x; i < cnt; i += kT)
      w[i] = cpu_exp<true>((logit_of(cand[i]) - top) * inv_t);
    __syncthreads();
  };
  // Candidates: the first n of the order (keys >= lo, logits >= cut); have: sorted in cand.
  uint64_t lo = 0;
  int64_t n = v;
  bool have = false;
  const bool top_k = p.top_k > 0 && p.top_k < v;
  if (top_k) {
    take(x, v, p.top_k, kNone, cand, hist_s);
    n = p.top_k;
    lo = cand[n - 1];
    have = true;
  }
  if (p.top_p < 1) {
    // The fewest leading candidates whose mass reaches top_p of the total (top_k's, summed in
    // order, else the row's float sum); without top_k, in windows of the order.
    if (have) {
      weigh(int(n), 1.f);
      if (threadIdx.x == 0) want = p.top_p * sum(w, int(n));
    } else {
      const float total =
          cpu_sum(v, reinterpret_cast<float*>(cand), [&](int64_t i) { return x[i] - top; });
      if (threadIdx.x == 0) want = p.top_p * double(total);
    }
    if (threadIdx.x == 0) cum = 0;
    uint64_t hi = kNone;  // the window: the keys below hi, ranks above + [0, cnt)
    int64_t above = 0, size = 256;
    for (;;) {
      int cnt = int(n);
      if (!have) {
        cnt = int(min(size, v - above));
        take(x, v, cnt, hi, cand, hist_s);
        weigh(cnt, 1.f);
      }
      if (threadIdx.x == 0) {
        double c = cum;
        const int i = walk(w, cnt, c, [&](double c) { return c >= want; });
        hit = i < cnt ? i : -1;
        cum = c;
      }
      __syncthreads();
      if (hit >= 0 || have || above + cnt == v) {
        n = above + (hit >= 0 ? hit + 1 : cnt);
        lo = cand[hit >= 0 ? hit : cnt - 1];
        have = above == 0;
        break;
      }
      above += cnt;
      hi = cand[cnt - 1];
      size = min(int64_t(kCap), 4 * size);
    }
  }
  float cut = -INFINITY;
  if (p.min_p) {  // a prefix of the order again: the logits >= top + log(min_p)
    cut = top + p.log_min_p;
    int64_t c = 0;
    if (have)
      for (int i = threadIdx.x; i < n; i += kT) c += logit_of(cand[i]) >= cut;
    else
      each(x, v, [&](int64_t, float xi, bool in) { c += in && xi >= cut; });
    double all;
    block_scan(double(c), all);
    n = min(n, int64_t(all));
  }
  const double u = philox_u53(uint64_t(rng[2 * row]), uint64_t(rng[2 * row + 1]));
  int pick;
  if (!top_k && p.top_p >= 1 && !p.min_p) {
    // Every id, weights and total as exp_shifted makes them (the total in float).
    const int64_t body = v / 8 * 8;
    auto arg = [&](int64_t i) { return (x[i] - top) * p.inv_t; };
    const float total = cpu_sum(v, reinterpret_cast<float*>(cand), arg);
    pick = row_walk(x, v, 0, -INFINITY, u, double(total), [&](int64_t i, float) {
      return i < body ? cpu_exp<false>(arg(i)) : cpu_exp<true>(arg(i));
    });
  } else if (n <= kCap) {
    // The CPU's listed draw, step for step: by id, weights, the total and the walk in order.
    if (!have) gather(x, v, lo, kNone, cut, cand);
    for (int i = threadIdx.x; i < n; i += kT) cand[i] = cand[i] << 32 | cand[i] >> 32;
    __syncthreads();
    sort_desc(cand, int(n));  // by ~id, largest first: by id
    for (int i = threadIdx.x; i < n; i += kT) cand[i] = cand[i] << 32 | cand[i] >> 32;
    __syncthreads();
    weigh(int(n), p.inv_t);
    if (threadIdx.x == 0) {
      const double target = u * sum(w, int(n));
      double c = 0;
      y[row] =
          id_of(cand[min(int(n) - 1, walk(w, int(n), c, [&](double c) { return c > target; }))]);
    }
    return;
  } else {
    pick = row_walk(x, v, lo, cut, u, -1.0,
                    [&](int64_t, float xi) { return cpu_exp<true>((xi - top) * p.inv_t); });
  }
  if (threadIdx.x == 0) y[row] = pick;
}

// ---- the op --------------------------------------------------------------------------

// Raises a kernel's dynamic shared memory limit to `bytes` (its static memory comes on top).
template <auto kKernel>
void allow_smem(size_t bytes) {
  static std::atomic<size_t> allowed{0};
  if (bytes <= allowed.load()) return;
  RLX_CUDA(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  allowed.store(bytes);
}

void sample_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& logits = in[0];
  const int64_t v = logits.shape().back(), rows = v > 0 ? logits.numel() / v : 0;
  const int64_t r = in.size() > 2 ? in[2].shape().back() : 0;
  if (rows == 0) return;
  const Attrs& a = ctx.attrs;
  const double t = a.get_float("temperature"), top_p = a.get_float("top_p");
  const double min_p = a.get_float("min_p"), pen = a.get_float("repeat_penalty");
  const int64_t k = a.get_int("top_k");
  const float inv_t = t > 0 ? float(1.0 / t) : 0.f, lmp = min_p > 0 ? float(std::log(min_p)) : 0.f;
  const Params p{v, r, k, top_p, pen, inv_t, lmp, t <= 0, min_p > 0, r > 0 && pen != 1.0};
  if (v > INT_MAX) fail<NotSupported>("sample", "expected V < 2^31, got ", v);
  if (!p.greedy && p.top_k > kCap && p.top_k < v)
    fail<NotSupported>("sample", "expected top_k <= ", kCap, " on cuda (or >= V), got ", p.top_k);
  cudaStream_t s = stream_of(ctx);
  unsigned long long* bad = nullptr;
  if (p.penalize)
    bad = deferred_check(ctx.device, [v](int64_t id, int64_t) {
      fail<ValueError>("sample", "expected history ids below V = ", v, " (or -1 for none), got ",
                       id);
    });
  Tensor xs = p.greedy ? Tensor() : Tensor::empty(DType::f32, {rows, p.stride()}, ctx.device);
  const size_t bitmap = p.penalize ? size_t((v + 31) / 32) * 4 : 0;
  const size_t smem = p.greedy ? bitmap : std::max(bitmap, size_t(kCap) * 12);
  visit(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const T* l = static_cast<const T*>(logits.data());
      const int32_t* h = p.penalize ? static_cast<const int32_t*>(in[2].data()) : nullptr;
      auto* y = static_cast<int32_t*>(out[0].data());
      if (p.greedy) {
        allow_smem<greedy_rows<T>>(smem);
        greedy_rows<T><<<unsigned(rows), kT, smem, s>>>(l, h, y, p, bad);
      } else {
        allow_smem<sample_rows<T>>(smem);
        sample_rows<T><<<unsigned(rows), kT, smem, s>>>(
            l, static_cast<const int64_t*>(in[1].data()), h, y, xs.data_as<float>(), p, bad);
      }
    }
  });
  RLX_CUDA_LAUNCHED("sample");
}

}  // namespace

void register_sample(KernelRegistry& r) {
  add_kernel(r, "sample", sample_kernel, [](const KernelQuery& q) {
    if (!is_float(q.inputs[0].dtype)) return false;
    const int64_t k = q.attrs.get_int("top_k");
    const Dim& v = q.inputs[0].shape.back();  // top_k >= V is off; greedy ignores it
    return k <= kCap || (v.is_static() && k >= v.value()) || q.attrs.get_float("temperature") <= 0;
  });
}

}  // namespace rlx::cuda
