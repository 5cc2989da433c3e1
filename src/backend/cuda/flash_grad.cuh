// The tensor-core attention backward (f16 / bf16, head dim 64, no bias): FlashAttention-2's
// equations, scores never stored. Three passes over dense [entries, s, 64] tensors:
//   1. the forward (flash.cuh) with its statistics instead of its output: per query row the
//      log-sum-exp L of the scaled scores (log2 domain; +inf for a row that sees no key, so
//      that its P is 0) and delta = rowsum(dy * out);
//   2. dk_dv: a block of 4 warps takes 64 keys (16 a warp, their K and V fragments kept in
//      registers) and walks the query tiles that see them: Sᵀ = K Qᵀ, Pᵀ = exp2(Sᵀ - L),
//      dV += Pᵀ dY, dPᵀ = V dYᵀ, dSᵀ = Pᵀ (dPᵀ - delta), dK += dSᵀ Q;
//   3. dq: a block takes 64 queries (their Q and dY fragments in registers) and walks the
//      key tiles they see: S, P, dP as above, dS, dQ += dS K.
// dQ gets its own pass (recomputing S and dP) instead of FlashAttention-2's atomic adds
// across key tiles, so every sum has a fixed order and runs repeat bit for bit. Query and
// key tiles come into shared memory through cp.async, the next tile's load overlapping this
// one's products. P and dS are rounded to T for their products, as FlashAttention does.
// Included by attention.cu only, after flash.cuh.
#pragma once

#include <array>

#include "backend/cuda/flash.cuh"

namespace rlx::cuda::flash {

struct GradParams {
  const void *q, *k, *v, *dy;  // [entries / heads, s, heads, D], rows ld apart
  void *dq, *dk, *dv;          // the same
  const float *lse, *delta;    // [entries, sq]
  int64_t sq, sk, entries;
  float scale, scale_log2;
  int64_t window;  // 0: no lower limit
  bool causal;
  // Dense [entries, s, D]: heads 1, ld D; bshd [b, s, h, D]: heads h, ld h * D. The
  // kernels take kStrided false for dense rows, whose stride is then a constant (a
  // run-time one costs the dense case a quarter of its speed: more spills in dk_dv).
  int heads = 1, ld = 0;

  template <int D, bool kStrided>
  __device__ int64_t row_ld() const {
    return kStrided ? ld : D;
  }
  // Where batch entry b's rows start in a tensor of s rows.
  template <int D, bool kStrided>
  __device__ int64_t base(int64_t b, int64_t s) const {
    return kStrided ? b / heads * s * ld + b % heads * D : b * s * D;
  }
  // q, dy, k, v of batch entry b.
  template <class T, int D, bool kStrided>
  __device__ std::array<const T*, 4> entry(int64_t b) const {
    const int64_t bq = base<D, kStrided>(b, sq), bk = base<D, kStrided>(b, sk);
    return {static_cast<const T*>(q) + bq, static_cast<const T*>(dy) + bq,
            static_cast<const T*>(k) + bk, static_cast<const T*>(v) + bk};
  }
  // Whether query row i sees key j (bottom-right aligned, as the forward).
  __device__ bool seen(int64_t i, int64_t j) const {
    int64_t pos = i + sk - sq;
    return i < sq && j < sk && (!causal || (j <= pos && (!window || j > pos - window)));
  }
  // Whether every (row, key) of the tiles at q0 and k0 is seen.
  __device__ bool all_seen(int64_t q0, int64_t k0) const {
    int64_t shift = sk - sq;
    return q0 + kBN <= sq && k0 + kBN <= sk &&
           (!causal ||
            (k0 + kBN - 1 <= q0 + shift && (!window || k0 > q0 + kBN - 1 + shift - window)));
  }
};

// L and delta of the 64 queries at q0 (of one batch entry's) into dst[0..63], dst[64..127]:
// one 4-byte copy a thread of the block's 128.
__device__ __forceinline__ void load_stats(float* dst, const float* lse, const float* delta,
                                           int64_t q0, int64_t sq) {
  const int c = threadIdx.x % kBN;
  const bool valid = q0 + c < sq;
  const float* src = threadIdx.x < kBN ? lse : delta;
  cp_async4(dst + threadIdx.x, valid ? src + q0 + c : src, valid);
}

template <class T, int D>
constexpr size_t grad_smem_bytes() {
  // Two buffers of two tiles, and dk_dv's two buffers of 64 L and 64 delta values.
  return size_t(4 * kBN) * HalfMma<T, D>::kS * sizeof(T) + 2 * 2 * kBN * sizeof(float);
}

// The block's own tiles (rows `at` of x and y: 64 rows, `x_rows` in all) into fragments
// fx, fy through buffer 1, and the first streamed pair (rows `first` of u and w, `u_rows`
// in all; none when !any) into buffer 0. Rows are ld apart.
template <class T, int D>
__device__ __forceinline__ void prologue(T* buf, HalfMma<T, D>& fx, HalfMma<T, D>& fy, const T* x,
                                         const T* y, int64_t at, int64_t x_rows, const T* u,
                                         const T* w, int64_t first, int64_t u_rows, bool any,
                                         int64_t ld) {
  constexpr int kS = HalfMma<T, D>::kS, kTile = kBN * kS;
  load_tile<T, D, kS, 128>(buf + 2 * kTile, x, ld, kBN, at, x_rows);
  load_tile<T, D, kS, 128>(buf + 3 * kTile, y, ld, kBN, at, x_rows);
  if (any) {
    load_tile<T, D, kS, 128>(buf, u, ld, kBN, first, u_rows);
    load_tile<T, D, kS, 128>(buf + kTile, w, ld, kBN, first, u_rows);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  fx.load_q(buf + 2 * kTile, threadIdx.x / 32, threadIdx.x % 32);
  fy.load_q(buf + 3 * kTile, threadIdx.x / 32, threadIdx.x % 32);
  __syncthreads();  // buffer 1 is free
}

// Step t of the stream: queues the pair at rows `next` into the other buffer and returns
// this step's pair (buffer t % 2).
template <class T, int D>
__device__ __forceinline__ const T* stream_step(T* buf, int64_t t, const T* u, const T* w,
                                                int64_t next, int64_t u_rows, bool more,
                                                int64_t ld) {
  constexpr int kS = HalfMma<T, D>::kS, kTile = kBN * kS;
  if (more) {
    T* n = buf + ((t + 1) % 2) * 2 * kTile;
    load_tile<T, D, kS, 128>(n, u, ld, kBN, next, u_rows);
    load_tile<T, D, kS, 128>(n + kTile, w, ld, kBN, next, u_rows);
    cp_async_commit();
  }
  return buf + (t % 2) * 2 * kTile;
}

// Pass 2 (above). Shared memory: buffers 0 and 1, each a Q (or K) tile and a dY (or V) tile.
template <class T, int D, bool kStrided>
__global__ void __launch_bounds__(128, 3) dk_dv(GradParams p) {
  using Mma = HalfMma<T, D>;
  constexpr int kS = Mma::kS, kTile = kBN * kS;
  extern __shared__ __align__(16) unsigned char smem[];
  T* buf = reinterpret_cast<T*>(smem);  // [2][Q, dY]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, tig = lane % 4;
  const int64_t b = int64_t(blockIdx.x) % p.entries, k0 = int64_t(blockIdx.x) / p.entries * kBN;
  const auto [q, dy, k, v] = p.entry<T, D, kStrided>(b);
  const int64_t ld = p.row_ld<D, kStrided>();
  const float* lse = p.lse + b * p.sq;
  const float* delta = p.delta + b * p.sq;
  float* stats = reinterpret_cast<float*>(buf + 4 * kTile);  // [2][L, delta][64]

  // The query tiles that see some key of this tile: [lo, hi).
  const int64_t shift = p.sk - p.sq, k_last = min(k0 + kBN, p.sk) - 1;
  int64_t lo = 0, hi = p.sq;
  if (p.causal) {
    lo = max(int64_t(0), k0 - shift) / kBN * kBN;
    if (p.window) hi = max(int64_t(0), min(p.sq, k_last + p.window - shift));
  }

  Mma kf, vf;
  if (lo < hi) load_stats(stats, lse, delta, lo, p.sq);  // in the prologue's group
  prologue<T, D>(buf, kf, vf, k, v, k0, p.sk, q, dy, lo, p.sq, lo < hi, ld);

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const int64_t key0 = k0 + warp * 16 + group;  // this thread's keys: key0 and key0 + 8
  for (int64_t q0 = lo, t = 0; q0 < hi; q0 += kBN, ++t) {
    const bool next = q0 + kBN < hi;
    if (next) load_stats(stats + ((t + 1) % 2) * 2 * kBN, lse, delta, q0 + kBN, p.sq);
    const T* sQ = stream_step<T, D>(buf, t, q, dy, q0 + kBN, p.sq, next, ld);
    const T* sY = sQ + kTile;
    // This thread's queries: q0 + j * 8 + 2 tig + (e % 2); their L and delta in shared
    // memory (registers for them kept the block at 2 a multiprocessor).
    const float* sL = stats + (t % 2) * 2 * kBN + 2 * tig;
    const float* sD = sL + kBN;

    float s[kBN / 8][4] = {};
    kf.scores(s, sQ, lane);  // Sᵀ: rows keys, columns queries
    const bool full = p.all_seen(q0, k0);
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t i = q0 + j * 8 + 2 * tig + e % 2, key = key0 + 8 * (e / 2);
        bool ok = full || p.seen(i, key);
        s[j][e] = ok ? exp2f(s[j][e] * p.scale_log2 - sL[j * 8 + e % 2]) : 0.0f;
      }
    kf.accumulate(dv, s, sY, lane);  // dV += Pᵀ dY

    float dp[kBN / 8][4] = {};
    vf.scores(dp, sY, lane);  // dPᵀ = V dYᵀ
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - sD[j * 8 + e % 2]);
    kf.accumulate(dk, dp, sQ, lane);  // dK += dSᵀ Q

    cp_async_wait_all();  // the next tile's group, issued at this step's start
    __syncthreads();      // the next tile is in, and every warp is done with this one
  }

  // dK and dV in one loop (as dq_rows stores dQ): two separate store loops spill more
  // (ptxas: 188 bytes instead of 140 at 168 registers).
  T* dko = static_cast<T*>(p.dk) + p.base<D, kStrided>(b, p.sk);
  T* dvo = static_cast<T*>(p.dv) + p.base<D, kStrided>(b, p.sk);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int64_t key = key0 + 8 * h;
    if (key >= p.sk) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      Mma::store2(dko + key * ld + n * 8 + tig * 2, dk[n][2 * h] * p.scale,
                  dk[n][2 * h + 1] * p.scale);
      Mma::store2(dvo + key * ld + n * 8 + tig * 2, dv[n][2 * h], dv[n][2 * h + 1]);
    }
  }
}

// Pass 3 (above). Shared memory: buffers 0 and 1, each a K tile and a V tile.
template <class T, int D, bool kStrided>
__global__ void __launch_bounds__(128) dq_rows(GradParams p) {
  using Mma = HalfMma<T, D>;
  constexpr int kS = Mma::kS, kTile = kBN * kS;
  extern __shared__ __align__(16) unsigned char smem[];
  T* buf = reinterpret_cast<T*>(smem);  // [2][K, V]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, tig = lane % 4;
  // Heavy (late, under a causal mask) query tiles first, so that the last wave is short.
  const int64_t qtiles = (p.sq + kBN - 1) / kBN;
  const int64_t b = int64_t(blockIdx.x) % p.entries;
  const int64_t q0 = (qtiles - 1 - int64_t(blockIdx.x) / p.entries) * kBN;
  const auto [q, dy, k, v] = p.entry<T, D, kStrided>(b);
  const int64_t ld = p.row_ld<D, kStrided>();

  // The key tiles some row of this block sees: [lo, hi).
  const int64_t shift = p.sk - p.sq;
  int64_t lo = 0, hi = p.sk;
  if (p.causal) {
    hi = max(int64_t(0), min(p.sk, min(q0 + kBN, p.sq) + shift));
    if (p.window) lo = max(int64_t(0), q0 + shift - p.window + 1) / kBN * kBN;
  }

  Mma qf, yf;
  prologue<T, D>(buf, qf, yf, q, dy, q0, p.sq, k, v, lo, p.sk, lo < hi, ld);

  const int64_t r0 = q0 + warp * 16 + group;  // this thread's rows: r0 and r0 + 8
  float lr[2], dr[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int64_t i = r0 + 8 * h;
    lr[h] = i < p.sq ? p.lse[b * p.sq + i] : 0.0f;
    dr[h] = i < p.sq ? p.delta[b * p.sq + i] : 0.0f;
  }
  float dq[D / 8][4] = {};
  for (int64_t k0 = lo, t = 0; k0 < hi; k0 += kBN, ++t) {
    const bool next = k0 + kBN < hi;
    const T* sK = stream_step<T, D>(buf, t, k, v, k0 + kBN, p.sk, next, ld);
    const T* sV = sK + kTile;
    float s[kBN / 8][4] = {};
    qf.scores(s, sK, lane);  // S: rows queries, columns keys
    const bool full = p.all_seen(q0, k0);
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t i = r0 + 8 * (e / 2), key = k0 + j * 8 + 2 * tig + e % 2;
        bool ok = full || p.seen(i, key);
        s[j][e] = ok ? exp2f(s[j][e] * p.scale_log2 - lr[e / 2]) : 0.0f;
      }
    float dp[kBN / 8][4] = {};
    yf.scores(dp, sV, lane);  // dP = dY Vᵀ
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - dr[e / 2]);
    qf.accumulate(dq, dp, sK, lane);  // dQ += dS K

    cp_async_wait_all();  // the next tile's group, issued at this step's start
    __syncthreads();
  }

  T* dqo = static_cast<T*>(p.dq) + p.base<D, kStrided>(b, p.sq);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int64_t row = r0 + 8 * h;
    if (row >= p.sq) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      Mma::store2(dqo + row * ld + n * 8 + tig * 2, dq[n][2 * h] * p.scale,
                  dq[n][2 * h + 1] * p.scale);
  }
}

template <class T, int D, bool kStrided>
void launch_grad_as(const GradParams& p, cudaStream_t s) {
  constexpr size_t smem = grad_smem_bytes<T, D>();
  static bool raised = [&] {
    RLX_CUDA(cudaFuncSetAttribute(dk_dv<T, D, kStrided>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    RLX_CUDA(cudaFuncSetAttribute(dq_rows<T, D, kStrided>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }();
  (void)raised;
  int64_t ktiles = (p.sk + kBN - 1) / kBN, qtiles = (p.sq + kBN - 1) / kBN;
  dk_dv<T, D, kStrided><<<unsigned(p.entries * ktiles), 128, smem, s>>>(p);
  dq_rows<T, D, kStrided><<<unsigned(p.entries * qtiles), 128, smem, s>>>(p);
}

template <class T, int D>
void launch_grad(const GradParams& p, cudaStream_t s) {
  if (p.heads == 1 && p.ld == D)
    launch_grad_as<T, D, false>(p, s);
  else
    launch_grad_as<T, D, true>(p, s);
}

}  // namespace rlx::cuda::flash
