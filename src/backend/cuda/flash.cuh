// The tensor-core attention forward (f16 / bf16 with head dim 64 or 128, f32 with 64),
// FlashAttention-2's scheme on mma.sync (m16n8k16; f32 as 3xTF32 on m16n8k8, Tf32Mma):
//   - a block of kWarps warps takes 16 * kM * kWarps query rows; each warp owns 16 * kM
//     rows (kM = 2 at f16 / bf16 and head dim 64, else 1) and keeps their Q fragments, the
//     output accumulator (f32), the running max and sum in registers for the whole walk
//     over the keys; a warp skips a key tile that none of its rows sees;
//   - K and V tiles of 64 keys come into shared memory through cp.async (rows padded by 16
//     bytes so that ldmatrix reads are free of bank conflicts), three buffers deep;
//   - S's accumulator layout is P's operand layout, so P never leaves registers; it is
//     rounded to the input type for P V, as FlashAttention does; the row sums add the
//     unrounded f32 values.
// Masks align bottom-right as on the CPU: query i sits at key position p = i + Sk - Sq.
// Included by attention.cu (and llm_attention.cu, for HalfMma and load_tile).
#pragma once

#include <cstdint>

#include "backend/cuda/kernels.cuh"
#include "backend/cuda/mma.cuh"

namespace rlx::cuda::flash {

constexpr int kBN = 64;  // keys per tile

struct Params {
  const void *q, *k, *v, *bias;
  void* out;
  int64_t sq, sk, entries;
  int64_t q_row, k_row, v_row, b_row, b_col;  // row strides (elements)
  Indexer<5> batch;                           // out, q, k, v, bias offsets per batch entry
  float scale_log2;                           // the scores' scale times log2(e)
  int64_t window;                             // 0: no lower limit
  bool causal;
  // The backward's statistics instead of the output (flash_grad.cuh): per row the
  // log-sum-exp of the scaled scores in the log2 domain (+inf for a row that sees
  // nothing, so that the backward's P is 0), and delta = rowsum(dy * out) with out
  // rounded to T; dy laid out as out.
  float *lse = nullptr, *delta = nullptr;
  const void* dy = nullptr;
  // attention_lse's statistics, stored with the output: per row the log-sum-exp of the
  // scaled scores in the natural log (+inf for a row that sees nothing).
  float* row_lse = nullptr;
  int64_t o_row = 0;  // the output's (and dy's) row stride; 0: D (dense rows)
};

// rows x D elements from global (row stride `ld`, rows at or past `limit` zero) into shared
// memory with row stride kS, 16 bytes at a time.
// t: the thread's index among the kThreads that share the copy (the block's by default).
template <class T, int D, int kS, int kThreads>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t ld, int rows, int64_t first,
                                          int64_t limit, int t = -1) {
  constexpr int kVec = 16 / sizeof(T), kChunks = D / kVec;  // 16-byte chunks per row
  for (int c = t < 0 ? int(threadIdx.x) : t; c < rows * kChunks; c += kThreads) {
    int r = c / kChunks, e = (c % kChunks) * kVec;
    bool valid = first + r < limit;
    const T* s = valid ? src + (first + r) * ld + e : src;
    cp_async16(dst + r * kS + e, s, valid);
  }
}

// ---- the products, per element type ------------------------------------------------------
// Each policy holds a warp's Q fragments (kM tiles of 16 rows) and does S = Q K^T for a
// tile of kBN keys and O += P V, with S, P and O in the m16n8 accumulator layout: lane
// (group = lane / 4, tig = lane % 4) holds rows group and group + 8, columns 2 tig and
// 2 tig + 1 of each 8-column tile. With kM = 2 every K and V fragment read from shared
// memory feeds two products: at one tile a warp, ldmatrix, not the tensor cores, bounds
// the forward. The 2-D overloads (kM = 1) serve the backward.

// f16 / bf16: m16n8k16, fragments through ldmatrix (rows padded by 8 elements).
template <class T, int D, int kM = 1>
struct HalfMma {
  static constexpr int kS = D + 8;
  uint32_t qa[kM][D / 16][4];

  // Rows warp * 16 kM + 16 mi + (lane % 8) + 8 (lane / 8 % 2), column 8 (lane / 16).
  __device__ void load_q(const T* sQ, int warp, int lane) {
#pragma unroll
    for (int mi = 0; mi < kM; ++mi) {
      const T* base =
          sQ + ((warp * kM + mi) * 16 + lane % 8 + 8 * (lane / 8 % 2)) * kS + 8 * (lane / 16);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) ldmatrix4<false>(qa[mi][kk], base + kk * 16);
    }
  }

  __device__ void scores(float (&s)[kM][kBN / 8][4], const T* sK, int lane) const {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int jp = 0; jp < kBN / 16; ++jp) {
        // Keys jp * 16 + lane % 8 + 8 * (lane / 16), head columns kk * 16 + 8 * (lane / 8 % 2).
        uint32_t kb[4];
        ldmatrix4<false>(
            kb, sK + (jp * 16 + lane % 8 + 8 * (lane / 16)) * kS + kk * 16 + 8 * (lane / 8 % 2));
#pragma unroll
        for (int mi = 0; mi < kM; ++mi) {
          mma<T>(s[mi][2 * jp], qa[mi][kk], kb[0], kb[1]);
          mma<T>(s[mi][2 * jp + 1], qa[mi][kk], kb[2], kb[3]);
        }
      }
    }
  }

  // P is rounded to T (as FlashAttention does).
  __device__ void accumulate(float (&o)[kM][D / 8][4], const float (&s)[kM][kBN / 8][4],
                             const T* sV, int lane) const {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      uint32_t pa[kM][4];
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        const float(&a)[4] = s[mi][2 * kk], (&b)[4] = s[mi][2 * kk + 1];
        pa[mi][0] = pack2<T>(a[0], a[1]);
        pa[mi][1] = pack2<T>(a[2], a[3]);
        pa[mi][2] = pack2<T>(b[0], b[1]);
        pa[mi][3] = pack2<T>(b[2], b[3]);
      }
#pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        // Keys kk * 16 + lane % 8 + 8 * (lane / 8 % 2), head columns np * 16 + 8 * (lane / 16).
        uint32_t vb[4];
        ldmatrix4<true>(
            vb, sV + (kk * 16 + lane % 8 + 8 * (lane / 8 % 2)) * kS + np * 16 + 8 * (lane / 16));
#pragma unroll
        for (int mi = 0; mi < kM; ++mi) {
          mma<T>(o[mi][2 * np], pa[mi], vb[0], vb[1]);
          mma<T>(o[mi][2 * np + 1], pa[mi], vb[2], vb[3]);
        }
      }
    }
  }

  __device__ void scores(float (&s)[kBN / 8][4], const T* sK, int lane) const requires(kM == 1) {
    scores(reinterpret_cast<float(&)[1][kBN / 8][4]>(s), sK, lane);
  }
  __device__ void accumulate(float (&o)[D / 8][4], const float (&s)[kBN / 8][4], const T* sV,
                             int lane) const requires(kM == 1) {
    accumulate(reinterpret_cast<float(&)[1][D / 8][4]>(o),
               reinterpret_cast<const float(&)[1][kBN / 8][4]>(s), sV, lane);
  }

  __device__ static void store2(T* p, float a, float b) {
    *reinterpret_cast<uint32_t*>(p) = pack2<T>(a, b);
  }
};

// f32: m16n8k8 on TF32 with each operand split in a TF32 head and a TF32 tail (3xTF32:
// head*head + head*tail + tail*head), which keeps about 21 bits of every product: f32
// results at tensor-core speed. Rows padded by 4 floats.
// c += a b with a = (ah + at), b = (bh + bt), the tail x tail term dropped.
__device__ __forceinline__ void mma_3xtf32(float (&c)[4], const uint32_t (&ah)[4],
                                           const uint32_t (&at)[4], float b0, float b1) {
  uint32_t b0h, b0t, b1h, b1t;
  tf32_split(b0, b0h, b0t);
  tf32_split(b1, b1h, b1t);
  mma_tf32(c, at, b0h, b1h);
  mma_tf32(c, ah, b0t, b1t);
  mma_tf32(c, ah, b0h, b1h);
}

// One 16-row tile a warp (kM 1): the f32 registers leave no room for two.
template <int D>
struct Tf32Mma {
  static constexpr int kS = D + 4;
  uint32_t qh[D / 8][4], qt[D / 8][4];

  // A fragment of a 16 x 8 tile: (group, tig), (group + 8, tig), (group, tig + 4),
  // (group + 8, tig + 4).
  __device__ void load_q(const float* sQ, int warp, int lane) {
    int group = lane / 4, tig = lane % 4;
    const float* base = sQ + (warp * 16 + group) * kS + tig;
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk) {
      const float* q = base + kk * 8;
      float x[4] = {q[0], q[8 * kS], q[4], q[8 * kS + 4]};
#pragma unroll
      for (int e = 0; e < 4; ++e) tf32_split(x[e], qh[kk][e], qt[kk][e]);
    }
  }

  // B fragment (8 head columns x 8 keys): (k = tig, n = group), (k = tig + 4, n = group).
  __device__ void scores(float (&s)[1][kBN / 8][4], const float* sK, int lane) const {
    int group = lane / 4, tig = lane % 4;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const float* k = sK + (j * 8 + group) * kS + tig;
#pragma unroll
      for (int kk = 0; kk < D / 8; ++kk)
        mma_3xtf32(s[0][j], qh[kk], qt[kk], k[kk * 8], k[kk * 8 + 4]);
    }
  }

  // P's A fragments come from S's accumulators: column c of a row sits in lane
  // (group, c / 2), element c % 2, so four shuffles per register pair.
  __device__ void accumulate(float (&o)[1][D / 8][4], const float (&s)[1][kBN / 8][4],
                             const float* sV, int lane) const {
    int group = lane / 4, tig = lane % 4, src = (lane & ~3) | (tig >> 1);
    bool odd = tig & 1;
#pragma unroll
    for (int kk = 0; kk < kBN / 8; ++kk) {
      float a[4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows group (h = 0) and group + 8
        float x0 = __shfl_sync(0xffffffffu, s[0][kk][2 * h], src);
        float x1 = __shfl_sync(0xffffffffu, s[0][kk][2 * h + 1], src);
        float y0 = __shfl_sync(0xffffffffu, s[0][kk][2 * h], src + 2);
        float y1 = __shfl_sync(0xffffffffu, s[0][kk][2 * h + 1], src + 2);
        a[h] = odd ? x1 : x0;      // column tig
        a[h + 2] = odd ? y1 : y0;  // column tig + 4
      }
      uint32_t ph[4], pt[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) tf32_split(a[e], ph[e], pt[e]);
      // B fragment (8 keys x 8 head columns): (k = tig, n = group), (k = tig + 4, n = group).
      const float* v = sV + (kk * 8 + tig) * kS + group;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) mma_3xtf32(o[0][n], ph, pt, v[n * 8], v[4 * kS + n * 8]);
    }
  }

  __device__ static void store2(float* p, float a, float b) {
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
  }
};

// 16-row tiles a warp: two for f16 / bf16 at head dim 64, else one (registers).
template <class T, int D>
constexpr int kTilesPerWarp = !std::is_same_v<T, float> && D == 64 ? 2 : 1;

template <class T, int D>
using MmaFor =
    std::conditional_t<std::is_same_v<T, float>, Tf32Mma<D>, HalfMma<T, D, kTilesPerWarp<T, D>>>;

template <class T, int D>
constexpr size_t smem_bytes() {
  return size_t(6 * kBN) * MmaFor<T, D>::kS * sizeof(T);
}

// kBias, kStats and kLse strip what a call does not use: the registers are tight at two
// tiles a warp.
template <class T, int D, int kWarps, bool kBias, bool kStats, bool kLse>
__global__ void __launch_bounds__(kWarps * 32) forward(Params p) {
  using Mma = MmaFor<T, D>;
  constexpr int kM = kTilesPerWarp<T, D>, kR = 16 * kM;  // a warp's tiles and rows
  constexpr int kBM = kR * kWarps, kS = Mma::kS, kThreads = kWarps * 32;
  extern __shared__ __align__(16) unsigned char smem[];
  // Three buffers of a K tile and a V tile; Q comes in through the third, which the
  // first step's queue reuses once every warp holds its fragments.
  static_assert(kBM <= 2 * kBN);
  T* sKV = reinterpret_cast<T*>(smem);
  T* sQ = sKV + 2 * (2 * kBN * kS);
  const float inf = __int_as_float(0x7f800000);

  // Heavy (late, under a causal mask) query tiles first, so that the last wave is short.
  int64_t qtiles = (p.sq + kBM - 1) / kBM;
  int64_t qt = qtiles - 1 - int64_t(blockIdx.x) / p.entries, b = int64_t(blockIdx.x) % p.entries;
  int64_t q0 = qt * kBM;
  int64_t off[5];
  p.batch.offsets(b, off);
  const T* q = static_cast<const T*>(p.q) + off[1];
  const T* k = static_cast<const T*>(p.k) + off[2];
  const T* v = static_cast<const T*>(p.v) + off[3];
  const T* bias = kBias ? static_cast<const T*>(p.bias) + off[4] : nullptr;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, tig = lane % 4;

  // The keys some row of this block sees, whole tiles.
  int64_t shift = p.sk - p.sq, lo = 0, hi = p.sk;
  if (p.causal) {
    hi = max(int64_t(0), min(p.sk, min(q0 + kBM, p.sq) + shift));
    if (p.window) lo = max(int64_t(0), q0 + shift - p.window + 1) / kBN * kBN;
  }

  // Key tiles stream through three buffers: step t queues tile t + 2 into the buffer of
  // tile t - 1, which every warp has left once it passes step t's barrier; so one barrier
  // a step, and each load has more than a step to arrive. Each step commits one group,
  // empty or not, so that "all but the latest" is the tile at hand.
  auto queue = [&](int64_t k0, int64_t t) {
    if (k0 < hi) {
      T* dst = sKV + (t % 3) * 2 * kBN * kS;
      load_tile<T, D, kS, kThreads>(dst, k, p.k_row, kBN, k0, p.sk);
      load_tile<T, D, kS, kThreads>(dst + kBN * kS, v, p.v_row, kBN, k0, p.sk);
    }
    cp_async_commit();
  };
  load_tile<T, D, kS, kThreads>(sQ, q, p.q_row, kBM, q0, p.sq);
  queue(lo, 0);
  queue(lo + kBN, 1);
  cp_async_wait_prior();
  __syncthreads();

  Mma mma;
  mma.load_q(sQ, warp, lane);

  float o[kM][D / 8][4] = {};
  float m[kM][2], l[kM][2] = {};
#pragma unroll
  for (int mi = 0; mi < kM; ++mi) m[mi][0] = m[mi][1] = -inf;
  // Rows of this thread: r0 + 16 mi and r0 + 16 mi + 8; the warp's key positions
  // [p_first, p_last].
  int64_t r0 = q0 + warp * kR + group;
  int64_t p_first = q0 + warp * kR + shift, p_last = p_first + kR - 1;

  // Scores stay unscaled until the exponent: scale_log2 > 0, so the largest score is
  // the largest scaled one, and exp2(s * scale - max) is one FMA. m is in scaled units.
  const float sl = p.scale_log2, bias_raw = 1.4426950408889634f / sl;
  for (int64_t k0 = lo, t = 0; k0 < hi; k0 += kBN, ++t) {
    const T* sK = sKV + (t % 3) * 2 * kBN * kS;
    const T* sV = sK + kBN * kS;
    cp_async_wait_prior();  // tile t is in
    __syncthreads();
    queue(k0 + 2 * kBN, t + 2);

    // A tile no row of this warp sees (the block's diagonal under a causal mask) is
    // skipped: its P would be 0 and its correction 1.
    bool idle = p.causal && (k0 > p_last || (p.window && k0 + kBN - 1 <= p_first - p.window));
    float s[kM][kBN / 8][4] = {};
    if (!idle) {
      mma.scores(s, sK, lane);

      // Mask and bias.
      bool masked = k0 + kBN > p.sk ||
                    (p.causal && (k0 + kBN - 1 > p_first || (p.window && k0 <= p_last - p.window)));
#pragma unroll
      for (int mi = 0; mi < kM && (masked || kBias); ++mi)
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int64_t row = r0 + 16 * mi + 8 * (e / 2), key = k0 + j * 8 + tig * 2 + e % 2;
            float x = s[mi][j][e];
            if (masked) {
              int64_t pos = row + shift;
              bool seen =
                  key < p.sk && (!p.causal || (key <= pos && (!p.window || key > pos - p.window)));
              if (!seen) x = -inf;
            }
            if (kBias && x != -inf && row < p.sq && key < p.sk)
              x += load(bias[row * p.b_row + key * p.b_col]) * bias_raw;
            s[mi][j][e] = x;
          }
        }

        // Online softmax for rows r0 + 16 mi (e = 0, 1) and + 8 (e = 2, 3); the four lanes
        // of a quad share a row.
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        float corr[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // Pairwise trees: the serial chains were what the warps waited on.
          float r[kBN / 8];
#pragma unroll
          for (int j = 0; j < kBN / 8; ++j) r[j] = fmaxf(s[mi][j][2 * h], s[mi][j][2 * h + 1]);
#pragma unroll
          for (int w = kBN / 16; w > 0; w /= 2)
#pragma unroll
            for (int j = 0; j < w; ++j) r[j] = fmaxf(r[j], r[j + w]);
          float mx = r[0];
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          mx = fmaxf(m[mi][h], mx * sl);
          float use = mx == -inf ? 0.0f : mx;  // a row that has seen nothing stays at 0
          corr[h] = exp2f(m[mi][h] - use);
          m[mi][h] = mx;
#pragma unroll
          for (int j = 0; j < kBN / 8; ++j) {
            s[mi][j][2 * h] = exp2f(fmaf(s[mi][j][2 * h], sl, -use));
            s[mi][j][2 * h + 1] = exp2f(fmaf(s[mi][j][2 * h + 1], sl, -use));
            r[j] = s[mi][j][2 * h] + s[mi][j][2 * h + 1];
          }
#pragma unroll
          for (int w = kBN / 16; w > 0; w /= 2)
#pragma unroll
            for (int j = 0; j < w; ++j) r[j] += r[j + w];
          l[mi][h] = l[mi][h] * corr[h] + r[0];
        }
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o[mi][n][0] *= corr[0];
          o[mi][n][1] *= corr[0];
          o[mi][n][2] *= corr[1];
          o[mi][n][3] *= corr[1];
        }
      }
    }

    // O += P V, P straight from S's registers.
    if (!idle) mma.accumulate(o, s, sV, lane);
  }

  // Divide by the row sums (summed over the quad) and store pairs, or the statistics.
  T* out = static_cast<T*>(p.out) + off[0];
  const T* dy = static_cast<const T*>(p.dy) + off[0];
  const int64_t o_row = p.o_row ? p.o_row : D;
#pragma unroll
  for (int mi = 0; mi < kM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mi][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      float inv = sum > 0 ? 1.0f / sum : 0.0f;
      int64_t row = r0 + 16 * mi + 8 * h;
      if constexpr (kStats) {
        float dot = 0;
        if (row < p.sq)
#pragma unroll
          for (int n = 0; n < D / 8; ++n) {
            const T* g = dy + row * o_row + n * 8 + tig * 2;
            dot += float(load(store<T>(o[mi][n][2 * h] * inv))) * float(load(g[0])) +
                   float(load(store<T>(o[mi][n][2 * h + 1] * inv))) * float(load(g[1]));
          }
        dot += __shfl_xor_sync(0xffffffffu, dot, 1);
        dot += __shfl_xor_sync(0xffffffffu, dot, 2);
        if (row < p.sq && tig == 0) {
          int64_t at = b * p.sq + row;
          p.lse[at] = sum > 0 ? m[mi][h] + log2f(sum) : inf;  // +inf: P = 0 in the backward
          p.delta[at] = dot;
        }
        continue;
      }
      if (row >= p.sq) continue;
      if (kLse && tig == 0)
        p.row_lse[b * p.sq + row] = sum > 0 ? (m[mi][h] + log2f(sum)) * 0.6931471805599453f : inf;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        Mma::store2(out + row * o_row + n * 8 + tig * 2, o[mi][n][2 * h] * inv,
                    o[mi][n][2 * h + 1] * inv);
      }
    }
}

template <class T, int D, bool kBias, bool kStats, bool kLse = false>
void launch_as(const Params& p, cudaStream_t s) {
  constexpr int kWarps = 4, kBM = 16 * kTilesPerWarp<T, D> * kWarps;
  constexpr auto kernel = forward<T, D, kWarps, kBias, kStats, kLse>;
  size_t smem = smem_bytes<T, D>();
  static bool raised = [&] {
    RLX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }();
  (void)raised;
  int64_t blocks = p.entries * ((p.sq + kBM - 1) / kBM);
  kernel<<<unsigned(blocks), kWarps * 32, smem, s>>>(p);
}

// The statistics are for the backward, which has no bias.
template <class T, int D>
void launch(const Params& p, cudaStream_t s) {
  if (p.lse)
    launch_as<T, D, false, true>(p, s);
  else if (p.bias)
    launch_as<T, D, true, false>(p, s);
  else if (p.row_lse)
    launch_as<T, D, false, false, true>(p, s);
  else
    launch_as<T, D, false, false>(p, s);
}

}  // namespace rlx::cuda::flash
