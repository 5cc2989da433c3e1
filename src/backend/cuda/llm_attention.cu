// attention_cached(q [B, S, H, D], k_cache, v_cache [B, KVH, C, D], pos [B]) on CUDA, with
// the CPU kernel's numerics (backend/cpu/llm_attention.cpp): a 16-bit cache rounds the
// queries and the probabilities to its dtype before their products, and each softmax is
// normalised before it meets the values (the order ggml uses, which greedy parity with
// llama.cpp needs). So every path takes two passes over a row's scores: their max and sum
// first, then the normalised probabilities times the values (f32 sums); only prefill_mma on
// long prompts (kOnePassRows) takes FlashAttention's one pass.
//
// The query rows of one (sequence b, KV head) are its G = H / KVH heads at each of the S
// positions (row r = s G + g): they share every key and value row, read once for all.
//   - Decode (S <= 8) over a cache of at most kFusedKeys rows: one kernel, a block per
//     query row, that keeps the row's scores (f64) and probabilities in shared memory: its
//     max and sum, then the normalised probabilities times the values. One launch instead
//     of three, no scratch in global memory: a decode step's attention is latency-bound.
//     rope_attention_cached (one new row per sequence) runs it with the rope of its q and k
//     rows and the two cache writes in the same launch: four kernels of a layer in one.
//   - Decode over a longer cache, flash-decoding: each group of kRows rows splits its keys
//     into up to kMaxSplit chunks, a block each. The chunks are sized on the device from
//     pos: the host never reads it (a decode step runs under CUDA Graph capture), so the
//     grid is for the worst case and chunks past pos + S exit at once. decode_scores
//     writes the scores (f64, on the tensor cores) and each chunk's max and sum;
//     decode_values merges those into the rows' max and sum and weights its chunk's
//     values; decode_combine adds the chunks' outputs.
//   - Prefill: a block takes kTile rows and streams the keys they see through shared
//     memory twice: the rows' max and sum first, then the output. With a 16-bit cache and
//     a head dim of 64 or 128 on the tensor cores (prefill_mma, once through the keys for
//     long prompts, two groups of warps a block taking every other key tile), else as f32
//     FMA tiles. rope_attention_cached's prefill (and a decode over a longer cache) first
//     runs rope_rows_to_cache: the rotations of q and k and both cache writes in one
//     launch instead of four.
// A bad position (pos < 0 or pos + S > C) is reported through position_check's slot; its
// sequence is left unwritten.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "backend/cuda/flash.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/llm_kernels.h"
#include "backend/cuda/rope.cuh"
#include "rlx/settings.h"

namespace rlx::cuda {

namespace {

constexpr int kMaxD = 256;           // head dims up to this
constexpr int kFusedKeys = 4096;     // decode: the most cache rows of the one-kernel path
constexpr int kFusedThreads = 256;   // decode, one kernel: a block
constexpr int kKeyLanes = 8;         // decode, one kernel: lanes that share a key's dot
constexpr int kRows = 8;             // decode: query rows a block takes
constexpr int kMaxSplit = 64;        // decode: most chunks of a row group's keys
constexpr int kDecodeThreads = 128;  // decode: a block
constexpr int kTile = 64;            // prefill: query rows and keys of a tile
constexpr int kTileThreads = 256;    // prefill: a block, 16 x 16 threads of 4 x 4 scores
constexpr int kPStride = kTile + 4;  // prefill: a row of probabilities in shared memory
constexpr unsigned kAll = 0xffffffffu;

// The sum over the four lanes of a quad (an mma row's lanes).
template <class T>
__device__ __forceinline__ T quad_sum(T v) {
  v += __shfl_xor_sync(kAll, v, 1);
  return v + __shfl_xor_sync(kAll, v, 2);
}

template <class TK>
constexpr int kW = 16 / int(sizeof(TK));  // elements of a 16-byte vector

struct Params {
  const void *q, *k, *v, *pos;
  void* out;
  unsigned long long* bad;
  int64_t c;            // cache rows
  int s, h, kvh, g, d;  // g = H / KVH
  int dp;               // d rounded up to whole 16-byte vectors of the cache dtype
  int rows, rows_pad;   // a (b, KV head)'s query rows S * G; rounded up to kRows
  int split;            // decode: chunks per row group
  bool pos64, vec;      // vec: cache rows load as aligned 16-byte vectors
  double scale;
  // rope_attention_cached (decode_fused with kNew, S = 1): q [B, 1, H, D], k and v
  // [B, 1, KVH, D] before rope (q's dtype), rope's positions [B, 1] (or one for all) and
  // freq_factors (f32, or null); p.q unused.
  const void *qn, *kn, *vn, *positions;
  const float* factors;
  bool positions64;
  int64_t positions_stride;  // 0: one position for every sequence
  RopeArgs rope;
  // Decode scratch.
  double* score;  // [B * KVH, rows_pad, C]
  double* cmax;   // [B * KVH, rows_pad, split]: each chunk's max
  double* csum;   // [B * KVH, rows_pad, split]: each chunk's sum of exp(score - max)
  float* part;    // [B * KVH, rows_pad, split, dp]: each chunk's share of the output
};

// pos[b] in `at`; false for a bad one (the caller skips the sequence).
__device__ __forceinline__ bool position(const Params& p, int64_t b, int64_t& at) {
  at = p.pos64 ? static_cast<const int64_t*>(p.pos)[b] : static_cast<const int32_t*>(p.pos)[b];
  return at >= 0 && at <= p.c - p.s;
}

// Query (and output) row r of (b, KV head kh): head kh G + r % G at position s = r / G.
__device__ __forceinline__ int64_t row_offset(const Params& p, int64_t b, int64_t kh, int r) {
  return ((b * p.s + r / p.g) * p.h + kh * p.g + r % p.g) * p.d;
}

// Vector i (kW elements) of a cache row: one 16-byte load where rows are whole aligned
// vectors, else element by element with zeros past d.
template <class TK>
__device__ __forceinline__ Vec<TK, kW<TK>> load_raw(const TK* row, int i, const Params& p) {
  constexpr int W = kW<TK>;
  Vec<TK, W> x;
  if (p.vec) {
    *reinterpret_cast<uint4*>(&x) = __ldg(reinterpret_cast<const uint4*>(row) + i);
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j) x.v[j] = i * W + j < p.d ? row[i * W + j] : store<TK>(0.f);
  }
  return x;
}
// load_raw for a row in shared memory (the step's new key or value row): plain loads.
template <class TK>
__device__ __forceinline__ Vec<TK, kW<TK>> load_shared(const TK* row, int i) {
  Vec<TK, kW<TK>> x;
  *reinterpret_cast<uint4*>(&x) = *(reinterpret_cast<const uint4*>(row) + i);
  return x;
}
template <class TK>
__device__ __forceinline__ void load_vec(const TK* row, int i, const Params& p,
                                         float (&x)[kW<TK>]) {
  Vec<TK, kW<TK>> u = load_raw(row, i, p);
#pragma unroll
  for (int j = 0; j < kW<TK>; ++j) x[j] = float(load(u.v[j]));
}

// x as a double, in one conversion.
template <class T>
__device__ __forceinline__ double wide(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    double r;
    asm("cvt.f64.f16 %0, %1;" : "=d"(r) : "h"(__half_as_ushort(x)));
    return r;
  } else {
    return double(float(load(x)));  // bf16 -> f32 is a shift
  }
}

// x at the cache dtype's precision (nearest even), rounded once from double: what a
// 16-bit cache's products see of the queries and probabilities.
template <class TK>
__device__ __forceinline__ float cache_rounded(double p) {
  if constexpr (std::is_same_v<TK, __half>)
    return __half2float(__double2half(p));
  else if constexpr (std::is_same_v<TK, __nv_bfloat16>)
    return __bfloat162float(__double2bfloat16(p));
  else
    return float(p);
}

// c += a b for one 8x8x4 tile on the f64 tensor cores: lane (g, t) = (lane / 4, lane % 4)
// holds a = A[g][t], b = B[t][g] and c = C[g][2 t .. 2 t + 1].
__device__ __forceinline__ void mma_f64(double (&c)[2], double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
               : "+d"(c[0]), "+d"(c[1])
               : "d"(a), "d"(b));
}

__device__ __forceinline__ float lane_of(const float4& v, int u) {
  return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w;
}
__device__ __forceinline__ float dot4(const float4& a, const float4& b, float c) {
  return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, c))));
}

// ---- decode ---------------------------------------------------------------------------

// Keys per chunk of a row group: whole steps of 32 over at most `split` chunks.
__device__ __forceinline__ int64_t chunk_len(int64_t keys, int split) {
  return ((keys + split - 1) / split + 31) / 32 * 32;
}

// The block's chunk [k0, k1) of (b, KV head) `pair`; false where the chunk is idle or the
// position bad.
struct Chunk {
  int64_t pair, b, kh, at, keys, k0, k1;
  int chunks;
};
__device__ __forceinline__ bool chunk_of(const Params& p, Chunk& ch, bool report) {
  ch.pair = blockIdx.x / p.split;
  ch.b = ch.pair / p.kvh;
  ch.kh = ch.pair % p.kvh;
  if (!position(p, ch.b, ch.at)) {
    if (report && threadIdx.x == 0) report_bad(p.bad, ch.at, ch.b);
    return false;
  }
  ch.keys = ch.at + p.s;
  const int64_t len = chunk_len(ch.keys, p.split);
  ch.chunks = int((ch.keys + len - 1) / len);
  ch.k0 = (blockIdx.x % p.split) * len;
  ch.k1 = min(ch.keys, ch.k0 + len);
  return ch.k0 < ch.keys;
}

// Grid (split * B * KVH, rows_pad / kRows). The scores are exact but for the last bits of
// their sums: a 16-bit cache rounds each probability to its precision, and an f32 dot
// product's error (~1e-7) would move some of them across a rounding boundary. So they are
// f64 products (exact for f32 and 16-bit operands) on the tensor cores, 8 keys x 8 rows a
// warp: lane (g, t) loads the vectors t, t + 4, ... of key g (64 contiguous bytes for four
// lanes), and the queries wait in shared memory in fragment order, so that step s of the
// product takes element s % W of vector 4 (s / W) + t of both. Lane (g, t) ends with the
// scores of rows 2 t, 2 t + 1 and keeps their running max and sum (f64) over its keys.
template <class TQ, class TK>
__global__ void __launch_bounds__(kDecodeThreads) decode_scores(Params p) {
  constexpr int W = kW<TK>, kSlots = kDecodeThreads / 4;
  extern __shared__ float4 smem[];
  __shared__ double red_m[kSlots][kRows], red_l[kSlots][kRows];
  Chunk ch;
  if (!chunk_of(p, ch, true)) return;
  const int r0 = blockIdx.y * kRows, t = threadIdx.x, lane = t % 32, g = lane / 4, t4 = lane % 4;
  const int nv = p.dp / W, steps = (nv + 3) / 4 * W;
  double* sq = reinterpret_cast<double*>(smem);  // [steps][32]: lane (g, t)'s query element
  const TQ* q = static_cast<const TQ*>(p.q);
  for (int i = t; i < steps * 32; i += kDecodeThreads) {
    const int st = i / 32, r = r0 + i % 32 / 4, e = (i % 4 + 4 * (st / W)) * W + st % W;
    sq[i] = r < p.rows && e < p.d
                ? cache_rounded<TK>(double(load(q[row_offset(p, ch.b, ch.kh, r) + e])))
                : 0.0;
  }
  __syncthreads();
  int64_t last[2];  // the last key rows 2 t4 and 2 t4 + 1 see (-1: no such row)
  double m[2], l[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = r0 + 2 * t4 + i;
    last[i] = r < p.rows ? ch.at + r / p.g : -1;
    m[i] = -INFINITY;
    l[i] = 0;
  }
  const TK* kc = static_cast<const TK*>(p.k) + ch.pair * p.c * p.d;
  double* sc = p.score + (ch.pair * p.rows_pad + r0) * p.c;
  // The same trip counts for every lane: mma.sync needs the whole warp.
  for (int64_t j0 = ch.k0 + 8 * (t / 32); j0 < ch.k1; j0 += kDecodeThreads / 4) {
    const int64_t j = j0 + g;
    const TK* kr = kc + j * p.d;
    double c[2] = {0, 0};
    for (int v0 = 0; v0 < nv; v0 += 16) {
      Vec<TK, W> x[4];  // four vectors in flight
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int v = v0 + 4 * u + t4;
        if (j < ch.k1 && v < nv) {
          x[u] = load_raw<TK>(kr, v, p);
        } else {
#pragma unroll
          for (int e = 0; e < W; ++e) x[u].v[e] = store<TK>(0.f);
        }
      }
      __syncwarp();  // converged again for mma.sync
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (v0 + 4 * u >= nv) break;
        const double* qs = sq + (v0 / 4 + u) * W * 32 + lane;
#pragma unroll
        for (int e = 0; e < W; ++e) mma_f64(c, wide(x[u].v[e]), qs[e * 32]);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (j >= ch.k1 || j > last[i]) continue;
      const double s = c[i] * p.scale;
      sc[(2 * t4 + i) * p.c + j] = s;
      if (s > m[i]) {
        l[i] *= exp(m[i] - s);
        m[i] = s;
      }
      l[i] += exp(s - m[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    red_m[t / 4][2 * t4 + i] = m[i];
    red_l[t / 4][2 * t4 + i] = l[i];
  }
  __syncthreads();
  if (t < kRows) {
    double mx = -INFINITY, sum = 0;
    for (int w = 0; w < kSlots; ++w) mx = fmax(mx, red_m[w][t]);
    for (int w = 0; w < kSlots; ++w)
      if (red_m[w][t] > -INFINITY) sum += red_l[w][t] * exp(red_m[w][t] - mx);
    const int64_t at = (ch.pair * p.rows_pad + r0 + t) * p.split + blockIdx.x % p.split;
    p.cmax[at] = mx;
    p.csum[at] = sum;
  }
}

// Keys a thread of decode_values takes per step, and the threads along a step (each
// takes one vector column of V): a step is kStepKeys * splits keys.
constexpr int kStepKeys = 4;
constexpr int value_splits(int nv) { return std::min(32, kDecodeThreads / nv); }
constexpr size_t values_smem(int dp, int nv) {
  return (size_t(kStepKeys) * 32 * kRows + size_t(value_splits(nv)) * kRows * dp) * sizeof(float);
}

// Grid as decode_scores. The rows' max and sum over all chunks, then the chunk's values
// weighted by the normalised probabilities (rounded to the cache dtype), kRows rows at a
// time: V is read once, straight from global memory, 16 bytes a thread.
template <class TK>
__global__ void __launch_bounds__(kDecodeThreads) decode_values(Params p) {
  constexpr int W = kW<TK>;
  extern __shared__ float4 smem[];
  __shared__ double row_max[kRows], row_inv[kRows];
  Chunk ch;
  if (!chunk_of(p, ch, false)) return;
  const int r0 = blockIdx.y * kRows, t = threadIdx.x, lane = t % 32;
  const int64_t row0 = ch.pair * p.rows_pad + r0;
  for (int r = t / 32; r < kRows; r += kDecodeThreads / 32) {
    const double *cm = p.cmax + (row0 + r) * p.split, *cs = p.csum + (row0 + r) * p.split;
    double mx = -INFINITY, sum = 0;
    for (int c = lane; c < ch.chunks; c += 32) mx = fmax(mx, cm[c]);
    for (int o = 16; o > 0; o /= 2) mx = fmax(mx, __shfl_xor_sync(kAll, mx, o));
    for (int c = lane; c < ch.chunks; c += 32)
      if (cm[c] > -INFINITY) sum += cs[c] * exp(cm[c] - mx);
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(kAll, sum, o);
    if (lane == 0) {
      row_max[r] = mx;
      row_inv[r] = sum > 0 ? 1.0 / sum : 0.0;
    }
  }
  const int nv = p.dp / W, splits = value_splits(nv), step = kStepKeys * splits;
  float* sp = reinterpret_cast<float*>(smem);  // [step][kRows] probabilities
  float* red = sp + kStepKeys * 32 * kRows;    // [splits][kRows][dp] partial outputs
  const double* sc = p.score + row0 * p.c;
  const TK* vc = static_cast<const TK*>(p.v) + ch.pair * p.c * p.d;
  const int ks = t / nv, vi = t % nv;
  float acc[kRows][W] = {};
  __syncthreads();
  for (int64_t j0 = ch.k0; j0 < ch.k1; j0 += step) {
    for (int i = t; i < step * kRows; i += kDecodeThreads) {
      const int r = i / step, jj = i % step;
      const int64_t j = j0 + jj;
      float pr = 0;
      if (j < ch.k1 && r0 + r < p.rows && j <= ch.at + (r0 + r) / p.g)
        pr = cache_rounded<TK>(exp(sc[r * p.c + j] - row_max[r]) * row_inv[r]);
      sp[jj * kRows + r] = pr;
    }
    __syncthreads();
    if (ks < splits) {
      float x[kStepKeys][W];  // every load of the step in flight at once
#pragma unroll
      for (int u = 0; u < kStepKeys; ++u) {
        const int64_t j = j0 + ks + splits * u;
        if (j < ch.k1) {
          load_vec<TK>(vc + j * p.d, vi, p, x[u]);
        } else {
#pragma unroll
          for (int e = 0; e < W; ++e) x[u][e] = 0;  // its probabilities are 0
        }
      }
#pragma unroll
      for (int u = 0; u < kStepKeys; ++u) {
        const float* pj = sp + (ks + splits * u) * kRows;
        float4 pa = *reinterpret_cast<const float4*>(pj);
        float4 pb = *reinterpret_cast<const float4*>(pj + 4);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float pr = r < 4 ? lane_of(pa, r) : lane_of(pb, r - 4);
#pragma unroll
          for (int e = 0; e < W; ++e) acc[r][e] = fmaf(pr, x[u][e], acc[r][e]);
        }
      }
    }
    __syncthreads();
  }
  if (ks < splits)
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int e = 0; e < W; ++e) red[(ks * kRows + r) * p.dp + vi * W + e] = acc[r][e];
  __syncthreads();
  for (int i = t; i < kRows * p.dp; i += kDecodeThreads) {
    const int r = i / p.dp, e = i % p.dp;
    float sum = 0;
    for (int k = 0; k < splits; ++k) sum += red[(k * kRows + r) * p.dp + e];
    p.part[((row0 + r) * p.split + blockIdx.x % p.split) * p.dp + e] = sum;
  }
}

// Grid (blocks * B * KVH): an output element is the sum of its chunks' shares.
template <class TQ>
__global__ void decode_combine(Params p, int blocks) {
  const int64_t pair = blockIdx.x / blocks, b = pair / p.kvh, kh = pair % p.kvh;
  int64_t at;
  if (!position(p, b, at)) return;
  const int64_t keys = at + p.s, len = chunk_len(keys, p.split);
  const int chunks = int((keys + len - 1) / len);
  const int i = (blockIdx.x % blocks) * blockDim.x + threadIdx.x;
  if (i >= p.rows * p.d) return;
  const int r = i / p.d, e = i % p.d;
  const float* src = p.part + (pair * p.rows_pad + r) * p.split * p.dp + e;
  float sum = 0;
  for (int c = 0; c < chunks; ++c) sum += src[c * p.dp];
  static_cast<TQ*>(p.out)[row_offset(p, b, kh, r) + e] = store<TQ>(sum);
}

// ---- decode, one kernel ---------------------------------------------------------------

__host__ __device__ constexpr size_t fused_smem(int64_t c, int dp) {
  return size_t(c) * (sizeof(double) + sizeof(float)) + size_t(dp) * sizeof(double) +
         size_t(kFusedThreads) * 8 * sizeof(float);
}
// With rope_attention_cached's new key and value rows after those (16-byte aligned).
template <class TK>
__host__ __device__ constexpr size_t fused_new_smem(int64_t c, int dp) {
  return (fused_smem(c, dp) + 15) / 16 * 16 + 2 * size_t(dp) * sizeof(TK);
}

// Element e of row x rotated as rope rotates it (rope_rows: the same f32 products).
template <class T>
__device__ __forceinline__ float rotated(const T* x, int64_t e, const RopeArgs& a, double pos,
                                         const float* factors) {
  if (e >= a.n_rot) return float(load(x[e]));
  const int64_t c = a.neox ? e % a.half : e / 2;
  int64_t i0, i1;
  rope_pair(a, c, i0, i1);
  float cv, sv;
  rope_cos_sin(a, c, pos, factors, cv, sv);
  const float x0 = float(load(x[i0])), x1 = float(load(x[i1]));
  return e == i0 ? x0 * cv - x1 * sv : x0 * sv + x1 * cv;
}

// Grid (B * KVH, S * G): block (pair, r) is query row r of (b, KV head). kKeyLanes lanes
// share a key: each takes vectors of it (f64 products with the query, rounded to the cache
// dtype, in shared memory), and their sum is the key's score. The row's max and sum (f64)
// come from the block; then threads own a vector column each over strided keys, weighting
// the values by the normalised probabilities (f32), and their shares are summed at the end.
// kNew (rope_attention_cached, S = 1): the block rotates its query row itself, and the new
// key and value rows of (b, KV head), rounded to the cache dtype as kv_cache_write stores
// them, wait in shared memory for key pos[b]: row 0's block writes them to the caches,
// and no block reads that row back from memory (another may not have written it yet).
template <class TQ, class TK, bool kNew>
__global__ void __launch_bounds__(kFusedThreads) decode_fused(Params p) {
  pdl_wait();     // launched programmatically dependent: overlaps the cache writes' tail
  pdl_trigger();  // the output projection may start (and prefetch its weights)
  constexpr int W = kW<TK>;
  extern __shared__ float4 smem[];
  const int64_t pair = blockIdx.x, b = pair / p.kvh, kh = pair % p.kvh;
  const int r = blockIdx.y, t = threadIdx.x;
  int64_t at;
  if (!position(p, b, at)) {
    if (t == 0 && r == 0) report_bad(p.bad, at, b);
    return;
  }
  const int64_t keys = at + r / p.g + 1;  // the keys row r sees
  const int nv = p.dp / W;
  double* ss = reinterpret_cast<double*>(smem);     // [c] scores
  double* sq = ss + p.c;                            // [dp] the query, rounded
  float* sp = reinterpret_cast<float*>(sq + p.dp);  // [c] probabilities
  float* red = sp + p.c;                            // [threads / nv][dp] output shares
  const TK* kc = static_cast<const TK*>(p.k) + pair * p.c * p.d;
  const TK* vc = static_cast<const TK*>(p.v) + pair * p.c * p.d;
  TK* kn = reinterpret_cast<TK*>(reinterpret_cast<char*>(smem) +
                                 (fused_smem(p.c, p.dp) + 15) / 16 * 16);  // [dp]
  TK* vn = kn + p.dp;                                                      // [dp]
  if constexpr (kNew) {
    const double at_pos =
        p.positions64 ? double(static_cast<const int64_t*>(p.positions)[b * p.positions_stride])
                      : double(static_cast<const int32_t*>(p.positions)[b * p.positions_stride]);
    const TQ* q = static_cast<const TQ*>(p.qn) + (b * p.h + kh * p.g + r) * p.d;
    const TQ* k = static_cast<const TQ*>(p.kn) + (b * p.kvh + kh) * p.d;
    const TQ* v = static_cast<const TQ*>(p.vn) + (b * p.kvh + kh) * p.d;
    // Each value as the separate kernels leave it: rope's output in q's dtype, then the
    // cache's (kv_cache_write) or the cache-dtype rounding of the queries.
    for (int e = t; e < p.dp; e += kFusedThreads) {
      const bool in = e < p.d;
      sq[e] =
          in ? cache_rounded<TK>(double(load(store<TQ>(rotated(q, e, p.rope, at_pos, p.factors)))))
             : 0.0;
      kn[e] =
          store<TK>(in ? float(load(store<TQ>(rotated(k, e, p.rope, at_pos, p.factors)))) : 0.f);
      vn[e] = store<TK>(in ? float(load(v[e])) : 0.f);
    }
    __syncthreads();
    if (r == 0)
      for (int e = t; e < p.d; e += kFusedThreads) {
        const_cast<TK*>(kc)[at * p.d + e] = kn[e];
        const_cast<TK*>(vc)[at * p.d + e] = vn[e];
      }
  } else {
    const TQ* q = static_cast<const TQ*>(p.q) + row_offset(p, b, kh, r);
    for (int e = t; e < p.dp; e += kFusedThreads)
      sq[e] = e < p.d ? cache_rounded<TK>(double(load(q[e]))) : 0.0;
    __syncthreads();
  }
  const int kl = t % kKeyLanes;
  double mx = -INFINITY;
  for (int64_t j0 = 0; j0 < keys; j0 += kFusedThreads / kKeyLanes) {
    const int64_t j = j0 + t / kKeyLanes;
    double acc = 0;
    if (j < keys) {
      const bool fresh = kNew && j == at;  // the step's own key: shared memory
      const TK* kr = fresh ? kn : kc + j * p.d;
      for (int v = kl; v < nv; v += kKeyLanes) {
        const Vec<TK, W> x = fresh ? load_shared<TK>(kr, v) : load_raw<TK>(kr, v, p);
#pragma unroll
        for (int e = 0; e < W; ++e) acc = fma(wide(x.v[e]), sq[v * W + e], acc);
      }
    }
    for (int o = kKeyLanes / 2; o > 0; o /= 2) acc += __shfl_xor_sync(kAll, acc, o);
    if (j < keys) {
      const double s = acc * p.scale;
      if (kl == 0) ss[j] = s;
      mx = fmax(mx, s);
    }
  }
  mx = block_fold<FoldMax>(mx);
  double sum = 0;
  for (int64_t j = t; j < keys; j += kFusedThreads) sum += exp(ss[j] - mx);
  sum = block_fold<FoldSum>(sum);
  const double inv = sum > 0 ? 1.0 / sum : 0.0;
  for (int64_t j = t; j < keys; j += kFusedThreads)
    sp[j] = cache_rounded<TK>(exp(ss[j] - mx) * inv);
  __syncthreads();
  // Values: thread (ks, vi) takes vector column vi of keys ks, ks + splits, ...
  const int splits = kFusedThreads / nv, ks = t / nv, vi = t % nv;
  // With kNew the last key's values come from shared memory, after the others (the order
  // its thread would take them in anyway).
  const int64_t cached = kNew ? keys - 1 : keys;
  float acc[W] = {};
  if (ks < splits) {
    int64_t j = ks;
    for (; j + 3 * splits < cached; j += 4 * splits) {
      float x[4][W];  // four rows in flight
#pragma unroll
      for (int u = 0; u < 4; ++u) load_vec<TK>(vc + (j + u * splits) * p.d, vi, p, x[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const float pr = sp[j + u * splits];
#pragma unroll
        for (int e = 0; e < W; ++e) acc[e] = fmaf(pr, x[u][e], acc[e]);
      }
    }
    for (; j < cached; j += splits) {
      float x[W];
      load_vec<TK>(vc + j * p.d, vi, p, x);
      const float pr = sp[j];
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] = fmaf(pr, x[e], acc[e]);
    }
    if (kNew && j == cached) {
      const Vec<TK, W> u = load_shared<TK>(vn, vi);
      const float pr = sp[j];
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] = fmaf(pr, float(load(u.v[e])), acc[e]);
    }
#pragma unroll
    for (int e = 0; e < W; ++e) red[ks * p.dp + vi * W + e] = acc[e];
  }
  __syncthreads();
  TQ* out = static_cast<TQ*>(p.out) + row_offset(p, b, kh, r);
  for (int e = t; e < p.d; e += kFusedThreads) {
    float y = 0;
    for (int k = 0; k < splits; ++k) y += red[k * p.dp + e];
    out[e] = store<TQ>(y);
  }
}

// An empty output still checks the positions, as the CPU does.
__global__ void check_positions(Params p, int64_t batch) {
  for (int64_t b = threadIdx.x; b < batch; b += blockDim.x) {
    int64_t at;
    if (!position(p, b, at)) report_bad(p.bad, at, b);
  }
}

// ---- prefill --------------------------------------------------------------------------

// A tile row in shared memory: dp floats padded to an odd number of 16-byte vectors, so
// that float4 reads of 8 consecutive rows hit distinct banks.
__host__ __device__ constexpr int tile_ld(int dp) { return 4 * ((dp / 4) | 1); }
__host__ __device__ constexpr size_t tile_smem(int dp) {
  return (size_t(3) * kTile * tile_ld(dp) + size_t(kTile) * kPStride) * sizeof(float);
}

// Rows j0 .. j0 + kTile of a cache head into shared memory as floats (zeros past `keys`).
template <class TK>
__device__ __forceinline__ void load_tile(float* dst, const TK* src, int64_t j0, int64_t keys,
                                          const Params& p, int ld) {
  constexpr int W = kW<TK>;
  const int nv = p.dp / W;
  for (int i = threadIdx.x; i < kTile * nv; i += kTileThreads) {
    const int r = i / nv, vi = i % nv;
    float x[W] = {};
    if (j0 + r < keys) load_vec<TK>(src + (j0 + r) * p.d, vi, p, x);
#pragma unroll
    for (int e = 0; e < W; e += 4)
      *reinterpret_cast<float4*>(dst + r * ld + vi * W + e) =
          make_float4(x[e], x[e + 1], x[e + 2], x[e + 3]);
  }
}

// The scaled scores of rows ty * 4 + i and keys tx + 16 j of a tile.
__device__ __forceinline__ void tile_scores(const float* sq, const float* sk, int ld,
                                            const Params& p, int tx, int ty, float (&s)[4][4]) {
  float a[4][4] = {};
  for (int e = 0; e < p.dp; e += 4) {
    float4 qv[4], kv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      qv[i] = *reinterpret_cast<const float4*>(sq + (ty * 4 + i) * ld + e);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      kv[j] = *reinterpret_cast<const float4*>(sk + (tx + 16 * j) * ld + e);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[i][j] = dot4(qv[i], kv[j], a[i][j]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) s[i][j] = __fmul_rn(a[i][j], float(p.scale));
}

// Grid (row tiles * B * KVH), heavy (late) tiles first. 16 x 16 threads: thread (tx, ty)
// holds the scores of rows ty * 4 + i and keys tx + 16 j, and the output of the same rows
// at columns 4 tx + 64 c (kNC: the columns' count, dp <= 64 kNC).
template <class TQ, class TK, int kNC>
__global__ void __launch_bounds__(kTileThreads) prefill(Params p) {
  extern __shared__ float4 smem[];
  const int ld = tile_ld(p.dp);
  float* sq = reinterpret_cast<float*>(smem);
  float* sk = sq + kTile * ld;
  float* sv = sk + kTile * ld;
  float* sp = sv + kTile * ld;  // [kTile][kPStride] probabilities
  const int64_t pairs = int64_t(gridDim.x) / ((p.rows + kTile - 1) / kTile);
  const int64_t pair = blockIdx.x % pairs, b = pair / p.kvh, kh = pair % p.kvh;
  int64_t at;
  if (!position(p, b, at)) {
    if (threadIdx.x == 0) report_bad(p.bad, at, b);
    return;
  }
  const int tiles = (p.rows + kTile - 1) / kTile;
  const int r0 = (tiles - 1 - int(blockIdx.x / pairs)) * kTile;
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  const int64_t keys = at + (min(r0 + kTile, p.rows) - 1) / p.g + 1;  // the block's rows see
  const TQ* q = static_cast<const TQ*>(p.q);
  for (int i = t; i < kTile * p.dp; i += kTileThreads) {
    const int r = i / p.dp, e = i % p.dp;
    sq[r * ld + e] = r0 + r < p.rows && e < p.d
                         ? cache_rounded<TK>(float(load(q[row_offset(p, b, kh, r0 + r) + e])))
                         : 0.f;
  }
  int64_t last[4];  // the last key each row sees (-1: no such row)
  float m[4];
  double l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + ty * 4 + i;
    last[i] = r < p.rows ? at + r / p.g : -1;
    m[i] = -INFINITY;
    l[i] = 0;
  }
  const TK* kc = static_cast<const TK*>(p.k) + pair * p.c * p.d;
  const TK* vc = static_cast<const TK*>(p.v) + pair * p.c * p.d;

  // Pass 1: each row's max and sum (the 16 threads of a row, a half-warp, share its max).
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    __syncthreads();
    load_tile<TK>(sk, kc, j0, keys, p, ld);
    __syncthreads();
    float s[4][4];
    tile_scores(sq, sk, ld, p, tx, ty, s);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j0 + tx + 16 * j > last[i]) s[i][j] = -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      for (int o = 1; o < 16; o *= 2) mx = fmaxf(mx, __shfl_xor_sync(kAll, mx, o));
      if (mx > m[i]) {
        l[i] *= exp(double(m[i]) - double(mx));
        m[i] = mx;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (s[i][j] != -INFINITY) l[i] += expf(s[i][j] - m[i]);
    }
  }
  float inv[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    double sum = l[i];
    for (int o = 1; o < 16; o *= 2) sum += __shfl_xor_sync(kAll, sum, o);
    inv[i] = sum > 0 ? float(1.0 / sum) : 0.f;
  }

  // Pass 2: the same scores again, normalised probabilities (rounded to the cache dtype)
  // through shared memory, times the values.
  float acc[4][kNC][4] = {};
  for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
    __syncthreads();
    load_tile<TK>(sk, kc, j0, keys, p, ld);
    load_tile<TK>(sv, vc, j0, keys, p, ld);
    __syncthreads();
    float s[4][4];
    tile_scores(sq, sk, ld, p, tx, ty, s);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        sp[(ty * 4 + i) * kPStride + tx + 16 * j] =
            j0 + tx + 16 * j <= last[i] ? cache_rounded<TK>(expf(s[i][j] - m[i]) * inv[i]) : 0.f;
    __syncthreads();
    const int n = int(min(int64_t(kTile), keys - j0));
    for (int jj = 0; jj < n; jj += 4) {
      float4 pr[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        pr[i] = *reinterpret_cast<const float4*>(sp + (ty * 4 + i) * kPStride + jj);
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int c = 0; c < kNC; ++c) {
          if (4 * tx + 64 * c >= p.dp) continue;
          const float4 v = *reinterpret_cast<const float4*>(sv + (jj + u) * ld + 4 * tx + 64 * c);
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[i][c][e] = fmaf(lane_of(pr[i], u), lane_of(v, e), acc[i][c][e]);
        }
    }
  }
  TQ* out = static_cast<TQ*>(p.out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (last[i] < 0) continue;
    TQ* o = out + row_offset(p, b, kh, r0 + ty * 4 + i);
#pragma unroll
    for (int c = 0; c < kNC; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 4 * tx + 64 * c + e;
        if (col < p.d) o[col] = store<TQ>(acc[i][c][e]);
      }
  }
}

// ---- prefill on the tensor cores -------------------------------------------------------

// 16-bit caches with a head dim of 64 or 128 (the llama shapes): `prefill`'s two passes (one
// from kOnePassRows positions) with S = Q K^T and O = P V as m16n8k16 products (flash.cuh's
// HalfMma). The queries are rounded to the cache dtype as there, so every product is exact and only
// the order of the f32 sums differs from the FMA tiles'; P holds the normalised probabilities,
// rounded to the cache dtype as it enters P V. kMmaWarps warps of 16 rows: a block takes kTile
// rows.
constexpr int kMmaWarps = kTile / 16;
// In one pass a block has two such groups of warps, each with its own K / V buffers and
// barrier, taking every other key tile of the rows; the second group's partial softmax (its
// max, sums and weighted values) joins the first's at the end. The kernel is bound by each
// warp's chain of copies, products and exponentials, not by the tensor cores, so twice the
// warps finish in about half the time (bench/RESULTS.md, "prefill attention's key groups").
template <bool kOnePass>
constexpr int kKeyGroups = kOnePass ? 2 : 1;
// From this many query positions prefill_mma takes one pass over the keys (FlashAttention's
// running max and sum, P unnormalised as it meets the values): half the score products and
// exponentials. Shorter prompts keep the two passes and the normalised P of the CPU kernel
// and ggml, which greedy parity with llama.cpp on the test prompts relies on.
constexpr int64_t kOnePassRows = 64;

// The queries, then each key group's K and V tiles.
template <class TK, int D, int kGroups>
constexpr size_t mma_smem() {
  return size_t(1 + 2 * kGroups) * kTile * flash::HalfMma<TK, D>::kS * sizeof(TK);
}

__device__ __forceinline__ void group_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The scaled scores of the lane's rows (group, group + 8 of its warp's 16: s[.][2 i + e])
// against keys j0 .. j0 + kTile, -inf past each row's last key.
__device__ __forceinline__ void mask_scaled(float (&s)[kTile / 8][4], int64_t j0,
                                            const int64_t (&last)[2], int tig, float scale) {
#pragma unroll
  for (int jn = 0; jn < kTile / 8; ++jn)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t key = j0 + jn * 8 + 2 * tig + c % 2;
      s[jn][c] = key <= last[c / 2] ? __fmul_rn(s[jn][c], scale) : -INFINITY;
    }
}

template <class TQ, class TK, int D, bool kOnePass, int kGroups>
__global__ void __launch_bounds__(32 * kMmaWarps * kGroups, 2) prefill_mma(Params p) {
  using Mma = flash::HalfMma<TK, D>;
  constexpr int kGroupThreads = 32 * kMmaWarps;
  constexpr int kS = Mma::kS, kThreads = kGroupThreads * kGroups;
  static_assert(flash::kBN == kTile);
  extern __shared__ float4 smem[];
  const int grp = int(threadIdx.x) / kGroupThreads;  // the key group
  TK* sq = reinterpret_cast<TK*>(smem);
  TK* sk = sq + kTile * kS * (1 + 2 * grp);
  TK* sv = sk + kTile * kS;
  const int tiles = (p.rows + kTile - 1) / kTile;
  const int64_t pairs = int64_t(gridDim.x) / tiles;
  const int64_t pair = blockIdx.x % pairs, b = pair / p.kvh, kh = pair % p.kvh;
  int64_t at;
  if (!position(p, b, at)) {
    if (threadIdx.x == 0) report_bad(p.bad, at, b);
    return;
  }
  const int r0 = (tiles - 1 - int(blockIdx.x / pairs)) * kTile;  // heavy (late) tiles first
  // The warp's 16 rows among the group's (each group has all the block's rows).
  const int warp = threadIdx.x % kGroupThreads / 32, lane = threadIdx.x % 32, tig = lane % 4;
  const int64_t keys = at + (min(r0 + kTile, p.rows) - 1) / p.g + 1;  // the block's rows see
  const TQ* q = static_cast<const TQ*>(p.q);
  for (int i = threadIdx.x; i < kTile * D; i += kThreads) {
    const int r = i / D, e = i % D;
    sq[r * kS + e] =
        store<TK>(r0 + r < p.rows ? float(load(q[row_offset(p, b, kh, r0 + r) + e])) : 0.f);
  }
  __syncthreads();
  Mma mma;
  mma.load_q(sq, warp, lane);
  const int w0 = r0 + warp * 16;  // the warp's first row
  int64_t last[2];                // the last key each of the lane's rows sees (-1: no row)
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = w0 + lane / 4 + 8 * i;
    last[i] = r < p.rows ? at + r / p.g : -1;
  }
  const int64_t warp_last = w0 < p.rows ? at + (min(w0 + 16, p.rows) - 1) / p.g : -1;
  const float scale = float(p.scale);
  const TK* kc = static_cast<const TK*>(p.k) + pair * p.c * D;
  const TK* vc = static_cast<const TK*>(p.v) + pair * p.c * D;
  auto stage = [&](TK* dst, const TK* src, int64_t j0) {
    flash::load_tile<TK, D, kS, kGroupThreads>(dst, src, D, kTile, j0, keys,
                                               int(threadIdx.x) % kGroupThreads);
  };
  auto sync_group = [&] {
    if constexpr (kGroups == 1)
      __syncthreads();
    else
      group_sync(1 + grp, kGroupThreads);
  };
  // Keys j0 .. j0 + kTile staged (and their values where `values`), then the warp's scores
  // (times `by`), masked, added into s; false where no row of the warp sees these keys.
  auto tile_scores = [&](int64_t j0, bool values, float by, float(&s)[kTile / 8][4]) {
    sync_group();
    stage(sk, kc, j0);
    if (values) stage(sv, vc, j0);
    cp_async_commit();
    cp_async_wait_all();
    sync_group();
    if (j0 > warp_last) return false;
    mma.scores(s, sk, lane);
    // A tile every row of the lane sees whole needs no mask (nor, by 1, a product).
    if (by != 1.f || j0 + kTile - 1 > min(last[0], last[1])) mask_scaled(s, j0, last, tig, by);
    return true;
  };
  // The larger of m and lane row i's scores, shared by the four lanes of the row.
  auto row_max = [&](const float(&s)[kTile / 8][4], int i, float m) {
#pragma unroll
    for (int jn = 0; jn < kTile / 8; ++jn) m = fmaxf(m, fmaxf(s[jn][2 * i], s[jn][2 * i + 1]));
    m = fmaxf(m, __shfl_xor_sync(kAll, m, 1));
    return fmaxf(m, __shfl_xor_sync(kAll, m, 2));
  };

  float o[D / 8][4] = {};
  if constexpr (kOnePass) {
    // One pass (FlashAttention's): each row's running max and sum; the values' sums are
    // rescaled when the max grows and divided by the sum at the end. P = e^(s - max) enters
    // P V rounded to the cache dtype. The four lanes of a row share its max; each sums its
    // own keys until the end. The scores stay unscaled (the scale is positive: the largest
    // is the largest scaled one), so each exponential is 2^(s sl - m sl), one FMA.
    const float sl = scale * 1.4426950408889634f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
    for (int64_t j0 = int64_t(grp) * kTile; j0 < keys; j0 += kGroups * kTile) {
      float s[kTile / 8][4] = {};
      if (!tile_scores(j0, true, 1.f, s)) continue;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float mx = row_max(s, i, m[i]);
        if (mx > m[i]) {  // a larger max: the sums so far shrink by e^(old - new)
          const float shrink = m[i] == -INFINITY ? 0.f : exp2f((m[i] - mx) * sl);
          l[i] *= shrink;
#pragma unroll
          for (int np = 0; np < D / 8; ++np) o[np][2 * i] *= shrink, o[np][2 * i + 1] *= shrink;
          m[i] = mx;
        }
        const float msl = m[i] * sl;
#pragma unroll
        for (int jn = 0; jn < kTile / 8; ++jn)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[jn][2 * i + e];
            x = x != -INFINITY ? exp2f(fmaf(x, sl, -msl)) : 0.f;
            l[i] += x;
          }
      }
      mma.accumulate(o, s, sv, lane);
    }
    if constexpr (kGroups == 2) {
      // The second group's max, sums and weighted values, lane by lane (the same layout)
      // through the K / V buffers, into the first's.
      constexpr int kLane = D / 2 + 4;
      static_assert(size_t(kMmaWarps) * 32 * kLane * sizeof(float) <=
                    size_t(2 * kGroups) * kTile * kS * sizeof(TK));
      float* other = reinterpret_cast<float*>(sq + kTile * kS) + (warp * 32 + lane) * kLane;
      __syncthreads();  // both groups are done with their buffers
      if (grp == 1) {
#pragma unroll
        for (int np = 0; np < D / 8; ++np)
#pragma unroll
          for (int c = 0; c < 4; ++c) other[np * 4 + c] = o[np][c];
#pragma unroll
        for (int i = 0; i < 2; ++i) other[D / 2 + i] = m[i], other[D / 2 + 2 + i] = l[i];
      }
      __syncthreads();
      if (grp == 1) return;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float m1 = other[D / 2 + i], mx = fmaxf(m[i], m1);
        const float a0 = m[i] == -INFINITY ? 0.f : exp2f((m[i] - mx) * sl);
        const float a1 = m1 == -INFINITY ? 0.f : exp2f((m1 - mx) * sl);
        l[i] = l[i] * a0 + other[D / 2 + 2 + i] * a1;
#pragma unroll
        for (int np = 0; np < D / 8; ++np)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            o[np][2 * i + e] = o[np][2 * i + e] * a0 + other[np * 4 + 2 * i + e] * a1;
      }
    }
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float sum = quad_sum(l[i]);
      inv[i] = sum > 0 ? 1.f / sum : 0.f;
#pragma unroll
      for (int np = 0; np < D / 8; ++np) o[np][2 * i] *= inv[i], o[np][2 * i + 1] *= inv[i];
    }
  } else {
    // Pass 1: each row's max and sum (the four lanes of a row share its max).
    float m[2] = {-INFINITY, -INFINITY};
    double l[2] = {0, 0};
    for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
      float s[kTile / 8][4] = {};
      if (!tile_scores(j0, false, scale, s)) continue;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float mx = row_max(s, i, m[i]);
        if (mx > m[i]) {
          l[i] *= exp(double(m[i]) - double(mx));
          m[i] = mx;
        }
#pragma unroll
        for (int jn = 0; jn < kTile / 8; ++jn)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (s[jn][2 * i + e] != -INFINITY) l[i] += expf(s[jn][2 * i + e] - m[i]);
      }
    }
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const double sum = quad_sum(l[i]);
      inv[i] = sum > 0 ? float(1.0 / sum) : 0.f;
    }

    // Pass 2: the same scores again; their normalised probabilities times the values.
    for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
      float s[kTile / 8][4] = {};
      if (!tile_scores(j0, true, scale, s)) continue;
#pragma unroll
      for (int jn = 0; jn < kTile / 8; ++jn)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          s[jn][c] = s[jn][c] != -INFINITY ? expf(s[jn][c] - m[c / 2]) * inv[c / 2] : 0.f;
      mma.accumulate(o, s, sv, lane);
    }
  }
  TQ* out = static_cast<TQ*>(p.out);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (last[i] < 0) continue;
    TQ* row = out + row_offset(p, b, kh, w0 + lane / 4 + 8 * i);
#pragma unroll
    for (int np = 0; np < D / 8; ++np) {
      row[np * 8 + 2 * tig] = store<TQ>(o[np][2 * i]);
      row[np * 8 + 2 * tig + 1] = store<TQ>(o[np][2 * i + 1]);
    }
  }
}

template <class TQ, class TK, int D, bool kOnePass>
void launch_prefill_mma(const Params& p, int64_t pairs, cudaStream_t st) {
  constexpr int kGroups = kKeyGroups<kOnePass>;
  constexpr auto kernel = prefill_mma<TQ, TK, D, kOnePass, kGroups>;
  constexpr size_t smem = mma_smem<TK, D, kGroups>();
  static const bool raised = [&] {
    RLX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }();
  (void)raised;
  const int64_t tiles = (p.rows + kTile - 1) / kTile;
  kernel<<<unsigned(tiles * pairs), 32 * kMmaWarps * kGroups, smem, st>>>(p);
}

// ---- host -----------------------------------------------------------------------------

template <class TQ, class TK, int kNC>
void launch_prefill(const Params& p, int64_t pairs, cudaStream_t st) {
  constexpr auto kernel = prefill<TQ, TK, kNC>;
  static const bool raised = [&] {
    RLX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(tile_smem(64 * kNC))));
    return true;
  }();
  (void)raised;
  const int64_t tiles = (p.rows + kTile - 1) / kTile;
  kernel<<<unsigned(tiles * pairs), kTileThreads, tile_smem(p.dp), st>>>(p);
}

// Scratch of n doubles in stream order (the kernel's: a Tensor).
using Scratch = std::function<double*(int64_t n)>;

template <class TQ, class TK>
void launch(Params p, int64_t pairs, cudaStream_t st, const Scratch& scratch) {
  if (p.s > 8) {
    if constexpr (is_half_v<TK>) {
      // Long prompts in one pass (kOnePassRows); short ones keep the normalised order.
      const bool one = p.s >= kOnePassRows;
      if (p.vec && p.d == 64)
        return one ? launch_prefill_mma<TQ, TK, 64, true>(p, pairs, st)
                   : launch_prefill_mma<TQ, TK, 64, false>(p, pairs, st);
      if (p.vec && p.d == 128)
        return one ? launch_prefill_mma<TQ, TK, 128, true>(p, pairs, st)
                   : launch_prefill_mma<TQ, TK, 128, false>(p, pairs, st);
    }
    auto tile_kernel = p.dp <= 64    ? launch_prefill<TQ, TK, 1>
                       : p.dp <= 128 ? launch_prefill<TQ, TK, 2>
                                     : launch_prefill<TQ, TK, 4>;
    return tile_kernel(p, pairs, st);
  }
  if (p.c <= kFusedKeys) {
    constexpr auto kernel = decode_fused<TQ, TK, false>;
    static const bool raised = [&] {
      RLX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(fused_smem(kFusedKeys, kMaxD))));
      return true;
    }();
    (void)raised;
    const dim3 grid(unsigned(pairs), unsigned(p.rows));
    launch_pdl(kernel, grid, kFusedThreads, fused_smem(p.c, p.dp), st, p);
    return;
  }
  // Chunks for about four blocks per multiprocessor when every key is in use, each of at
  // least 32 keys.
  const int64_t groups = p.rows_pad / kRows, want = 4 * int64_t(sm_count());
  p.split = int(std::clamp<int64_t>((want + pairs * groups - 1) / (pairs * groups), 1,
                                    std::min<int64_t>(kMaxSplit, (p.c + 31) / 32)));
  const int64_t stats = pairs * p.rows_pad * p.split, parts = stats * p.dp;
  const int64_t scores = pairs * p.rows_pad * p.c;
  p.csum = scratch(2 * stats + scores + (parts + 1) / 2);
  p.cmax = p.csum + stats;
  p.score = p.cmax + stats;
  p.part = reinterpret_cast<float*>(p.score + scores);
  const dim3 grid(unsigned(p.split * pairs), unsigned(groups));
  const size_t query_bytes = size_t(p.dp / kW<TK> + 3) / 4 * kW<TK> * 32 * sizeof(double);
  decode_scores<TQ, TK><<<grid, kDecodeThreads, query_bytes, st>>>(p);
  decode_values<TK><<<grid, kDecodeThreads, values_smem(p.dp, p.dp / kW<TK>), st>>>(p);
  const int blocks = (p.rows * p.d + 255) / 256;
  decode_combine<TQ><<<unsigned(blocks * pairs), 256, 0, st>>>(p, blocks);
}

// Calls f(Tag<T>{}) for the dtypes with kernels here: f32, f16, bf16.
template <class F>
void visit_kernel_float(DType dt, F&& f) {
  visit(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || is_half_v<T>)
      f(tag);
    else
      fail<NotSupported>("attention_cached", "expected f32, f16 or bf16, got ", dtype_name(dt));
  });
}

// p with its shapes, pointers, scale and slot set; queries of dtype qt, caches of kt.
void run(Params p, int64_t batch, DType qt, DType kt, cudaStream_t st, const Scratch& scratch) {
  if (p.rows == 0 || p.d == 0) {
    check_positions<<<1, 256, 0, st>>>(p, batch);
    RLX_CUDA_LAUNCHED("attention_cached");
    return;
  }
  visit_kernel_float(qt, [&](auto qtag) {
    visit_kernel_float(kt, [&](auto ktag) {
      using TQ = typename decltype(qtag)::type;
      using TK = typename decltype(ktag)::type;
      constexpr int W = kW<TK>;
      p.dp = (p.d + W - 1) / W * W;
      p.vec = p.d % W == 0 && aligned<W>(static_cast<const TK*>(p.k), static_cast<const TK*>(p.v));
      launch<TQ, TK>(p, batch * p.kvh, st, scratch);
    });
  });
  RLX_CUDA_LAUNCHED("attention_cached");
}

void attention_cached_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                             std::span<Tensor> out) {
  const Tensor &q = in[0], &k = in[1], &v = in[2], &pos = in[3];
  const int64_t batch = q.shape()[0];
  Params p{};
  p.s = int(q.shape()[1]);
  p.h = int(q.shape()[2]);
  p.d = int(q.shape()[3]);
  p.kvh = int(k.shape()[1]);
  p.c = k.shape()[2];
  if (p.kvh == 0 || p.h % p.kvh != 0)
    fail<ValueError>("attention_cached", "expected query heads H = ", p.h,
                     " to be a multiple of KV heads KVH = ", p.kvh);
  if (p.d > kMaxD)
    fail<NotSupported>("attention_cached", "expected a head dim D <= ", kMaxD, ", got ", p.d);
  if (batch == 0) return;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.pos = pos.data();
  p.out = out[0].data();
  p.pos64 = pos.dtype() == DType::i64;
  p.bad = position_check(ctx, p.s, p.c);
  p.g = p.h / p.kvh;
  p.rows = p.s * p.g;
  p.rows_pad = (p.rows + kRows - 1) / kRows * kRows;
  const double scale = ctx.attrs.get_float("scale");
  p.scale = scale != 0 ? scale : 1.0 / std::sqrt(double(p.d));
  Tensor scratch;  // freed in stream order
  run(p, batch, q.dtype(), k.dtype(), stream_of(ctx), [&](int64_t n) {
    scratch = Tensor::empty(DType::f64, {n}, ctx.device);
    return static_cast<double*>(scratch.data());
  });
}

// rope_attention_cached's first half for any other shape (prefill): a block per new row
// (b, s) computes the row's angles once (as rope_rows_shared), rotates its query heads
// into qr (q's dtype: what rope writes) and its key heads through shared memory into the key
// cache at row pos[b] + s, and copies its value heads there; attention_cached's kernels
// then read qr and the caches. Each value is the parts' (rope, then kv_cache_write): the
// same rotation, a key rounded to q's dtype and then to the cache's. Rows at a bad pos[b]
// write no cache row (the attention reports them).
constexpr int kRopeCacheThreads = 256;
template <class TQ, class TK>
__global__ void __launch_bounds__(kRopeCacheThreads)
    rope_rows_to_cache(Params p, TQ* qr, int64_t rows, int64_t pos_b, int64_t pos_s) {
  extern __shared__ float4 smem[];
  const RopeArgs& a = p.rope;
  float* cs = reinterpret_cast<float*>(smem);  // cos of pair c at cs[c], sin at cs[half + c]
  TQ* ks = reinterpret_cast<TQ*>(cs + 2 * ((a.half + 3) / 4 * 4));  // the row's rotated keys
  const int64_t per_head = a.half + (a.d - a.n_rot), kd = int64_t(p.kvh) * a.d;
  auto angle = [&](int64_t c) { return CosSin<float>{cs[c], cs[a.half + c]}; };
  pdl_wait();
  pdl_trigger();
  for (int64_t l = blockIdx.x; l < rows; l += gridDim.x) {
    const int64_t b = l / p.s, s = l % p.s, at_rope = b * pos_b + s * pos_s;
    const double theta = p.positions64 ? double(static_cast<const int64_t*>(p.positions)[at_rope])
                                       : double(static_cast<const int32_t*>(p.positions)[at_rope]);
    __syncthreads();  // the previous row's angles and keys are no longer read
    for (int64_t c = threadIdx.x; c < a.half; c += blockDim.x)
      rope_cos_sin(a, c, theta, p.factors, cs[c], cs[a.half + c]);
    __syncthreads();
    const TQ* q = static_cast<const TQ*>(p.qn) + l * p.h * a.d;
    for (int64_t t = threadIdx.x; t < p.h * per_head; t += blockDim.x) {
      const int64_t h = t / per_head;
      rope_slot(a, t % per_head, q + h * a.d, qr + (l * p.h + h) * a.d, angle);
    }
    const TQ* k = static_cast<const TQ*>(p.kn) + l * kd;
    for (int64_t t = threadIdx.x; t < p.kvh * per_head; t += blockDim.x) {
      const int64_t h = t / per_head;
      rope_slot(a, t % per_head, k + h * a.d, ks + h * a.d, angle);
    }
    __syncthreads();
    int64_t at;
    if (!position(p, b, at)) continue;
    const TQ* v = static_cast<const TQ*>(p.vn) + l * kd;
    for (int64_t t = threadIdx.x; t < kd; t += blockDim.x) {
      const int64_t h = t / a.d, e = t % a.d, row = ((b * p.kvh + h) * p.c + at + s) * a.d + e;
      static_cast<TK*>(const_cast<void*>(p.k))[row] = store<TK>(load(ks[t]));
      static_cast<TK*>(const_cast<void*>(p.v))[row] = store<TK>(load(v[t]));
    }
  }
}

// Any S (or a cache longer than decode_fused takes): rope_rows_to_cache, then the
// attention over the caches as attention_cached runs it.
void rope_then_attention(const KernelContext& ctx, std::span<const Tensor> in, Params p,
                         int64_t batch) {
  const Tensor &q = in[0], &kc = in[3], &positions = in[5];
  // rope's positions broadcast over [B, S] (its inference: [S], [1, S] or [B, S]).
  const auto& ps = positions.shape();
  const int64_t pos_s = ps.back() == 1 ? 0 : 1;
  const int64_t pos_b = ps.size() == 2 && ps[0] != 1 ? ps[1] : 0;
  Tensor qr = Tensor::empty(q.dtype(), q.shape(), ctx.device);  // freed in stream order
  const int64_t rows = batch * p.s;
  cudaStream_t st = stream_of(ctx);
  if (rows > 0)
    visit_kernel_float(q.dtype(), [&](auto qtag) {
      visit_kernel_float(kc.dtype(), [&](auto ktag) {
        using TQ = typename decltype(qtag)::type;
        using TK = typename decltype(ktag)::type;
        const size_t smem = 2 * size_t((p.rope.half + 3) / 4 * 4) * sizeof(float) +
                            size_t(p.kvh) * size_t(p.d) * sizeof(TQ);
        const int blocks = int(std::min<int64_t>(rows, int64_t(sm_count()) * 16));
        launch_pdl(rope_rows_to_cache<TQ, TK>, blocks, kRopeCacheThreads, smem, st, p,
                   static_cast<TQ*>(qr.data()), rows, pos_b, pos_s);
      });
    });
  RLX_CUDA_LAUNCHED("rope_attention_cached");
  p.q = qr.data();
  Tensor scratch;  // freed in stream order
  run(p, batch, q.dtype(), kc.dtype(), st, [&](int64_t n) {
    scratch = Tensor::empty(DType::f64, {n}, ctx.device);
    return static_cast<double*>(scratch.data());
  });
}

// One new row per sequence (decode) over a cache the one-kernel path takes: rope, both
// cache writes and the attention in one launch (decode_fused with kNew).
void rope_attention_cached_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                                  std::span<Tensor> out) {
  const Tensor &q = in[0], &kc = in[3], &vc = in[4], &positions = in[5], &pos = in[6];
  const int64_t batch = q.shape()[0];
  out[1] = kc;  // the caches' own storage, written in place (as kv_cache_write)
  out[2] = vc;
  Params p{};
  p.s = int(q.shape()[1]);
  p.h = int(q.shape()[2]);
  p.d = int(q.shape()[3]);
  p.kvh = int(kc.shape()[1]);
  p.c = kc.shape()[2];
  if (batch == 0 || p.h == 0) return;
  p.qn = q.data();
  p.kn = in[1].data();
  p.vn = in[2].data();
  p.k = kc.data();
  p.v = vc.data();
  p.positions = positions.data();
  p.positions64 = positions.dtype() == DType::i64;
  p.positions_stride = positions.numel() == 1 ? 0 : 1;
  p.factors = in.size() > 7 ? in[7].data_as<float>() : nullptr;
  p.rope = rope_args(ctx.attrs, p.d, false);
  p.pos = pos.data();
  p.out = out[0].data();
  p.pos64 = pos.dtype() == DType::i64;
  p.bad = position_check(ctx, p.s, p.c);
  p.g = p.h / p.kvh;
  p.rows = p.s * p.g;
  p.rows_pad = (p.rows + kRows - 1) / kRows * kRows;
  const double scale = ctx.attrs.get_float("scale");
  p.scale = scale != 0 ? scale : 1.0 / std::sqrt(double(p.d));
  cudaStream_t st = stream_of(ctx);
  if (q.shape()[1] != 1 || p.c > kFusedKeys) return rope_then_attention(ctx, in, p, batch);
  visit_kernel_float(q.dtype(), [&](auto qtag) {
    visit_kernel_float(kc.dtype(), [&](auto ktag) {
      using TQ = typename decltype(qtag)::type;
      using TK = typename decltype(ktag)::type;
      constexpr int W = kW<TK>;
      p.dp = (p.d + W - 1) / W * W;
      p.vec = p.d % W == 0 && aligned<W>(static_cast<const TK*>(p.k), static_cast<const TK*>(p.v));
      constexpr auto kernel = decode_fused<TQ, TK, true>;
      static const bool raised = [&] {
        RLX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(fused_new_smem<TK>(kFusedKeys, kMaxD))));
        return true;
      }();
      (void)raised;
      launch_pdl(kernel, dim3(unsigned(batch * p.kvh), unsigned(p.rows)), kFusedThreads,
                 fused_new_smem<TK>(p.c, p.dp), st, p);
    });
  });
  RLX_CUDA_LAUNCHED("rope_attention_cached");
}

// f32, f16 and bf16 queries and caches with head dims up to kMaxD; f64 runs through the
// decomposition (the gradient checks' dtype).
bool supported(const KernelQuery& q) {
  auto ok = [](DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; };
  if (q.inputs.size() != 4 || !ok(q.inputs[0].dtype) || !ok(q.inputs[1].dtype)) return false;
  const Dim& d = q.inputs[0].shape.back();
  return d.is_static() && d.value() <= kMaxD;
}

}  // namespace

// rope_attention_cached with q / k / v of one dtype, f32 freq_factors and a head dim of at
// most kMaxD: one new row per sequence (S = 1) over a cache of at most kFusedKeys rows in
// one launch (decode_fused), other shapes as rope_rows_to_cache then the attention (a
// row's key heads, KVH x D, staged in shared memory: at most kStagedKeys values). The rest
// run the parts (the op's decomposition), and so does every shape when
// settings().decode_fusions is off (RLX_DECODE_FUSIONS=0, for A/B).
constexpr int64_t kStagedKeys = 8192;
bool fused_supported(const KernelQuery& q) {
  if (!settings().decode_fusions) return false;
  auto ok = [](DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; };
  const auto& in = q.inputs;
  if (in.size() < 7 || !ok(in[0].dtype) || in[1].dtype != in[0].dtype ||
      in[2].dtype != in[0].dtype || !ok(in[3].dtype) || in[4].dtype != in[3].dtype)
    return false;
  if (in.size() > 7 && in[7].dtype != DType::f32) return false;
  const Dim &s = in[0].shape[1], &d = in[0].shape[3], &c = in[3].shape[2], &kvh = in[3].shape[1];
  if (!d.is_static() || d.value() > kMaxD) return false;
  if (s.is(1) && c.is_static() && c.value() <= kFusedKeys) return true;
  return kvh.is_static() && kvh.value() * d.value() <= kStagedKeys;
}

void register_attention_cached(KernelRegistry& r) {
  add_kernel(r, "attention_cached", attention_cached_kernel, supported);
  add_kernel(r, "rope_attention_cached", rope_attention_cached_kernel, fused_supported);
}

}  // namespace rlx::cuda
