// The f32 GEMM on the tensor cores at SGEMM's accuracy: 3xTF32 with its accumulation error
// taken out, after Ootomo and Yokota ("Recovering single precision accuracy from Tensor
// Cores while surpassing the FP32 theoretical peak performance", IJHPCA 2022).
//   - Each operand is split once, by its own pass, into a TF32 head (rounded to nearest)
//     and a TF32 tail (what the head dropped, rounded to nearest): head + tail keeps 22
//     bits, and head*head + head*tail + tail*head (tail*tail dropped, 2^-22 of a product)
//     is the product to about SGEMM's rounding. The pass also lays both operands out
//     k-contiguous and zero-padded to whole tiles, so the GEMM reads one layout through
//     cp.async and ldmatrix, without bounds checks.
//   - The tensor cores' f32 accumulator truncates instead of rounding: over k = 3072
//     cuBLAS's 3xTF32 drifts to 14x SGEMM's error (tools/gpu/f32_gemm_probe.cu). Here the
//     tensor cores sum only one 32-deep slice of k from zero, and the slices are added in
//     f32 on the CUDA cores (rounded to nearest), so the truncation stays at the size of
//     one slice and does not grow with k. Against f64 (tests/cuda/linalg_f32_test.cpp) its
//     rms error is about SGEMM's on values of both signs, and ~2^-22 of the result's (2-3x
//     SGEMM's, whose roundings cancel there) on values of one sign.
//   - 128 x 128 tiles, 8 warps of 64 x 32, three cp.async stages of four 16 KB halves (A, B
//     each head and tail) in XOR-swizzled rows (conflict-free ldmatrix); tiles walk in
//     groups of 8 row tiles so that a band of B stays in L2.
//   - An operand holding an inf or a NaN (its split raises a flag) makes every output a
//     plain f32 dot product of head + tail instead: inf times a tail of 0 would be NaN
//     where SGEMM gives inf.
//   - Tried on the H200 (tools/gpu/f32_gemm_probe.cu, GPT-2's shapes) and dropped: 16
//     warps of 32 x 32 ran as fast as 8 of 64 x 32 (~60 TFLOP/s); splitting each fragment
//     in registers as it leaves shared memory (half the bytes through L2 and shared
//     memory, no split pass) ran at ~37: the three instructions a value cost more issue
//     slots than the bytes they saved.
// Kernels only (linalg_f32.cu launches them; tools/gpu/f32_gemm_probe.cu times them next
// to cuBLAS).
#pragma once

#include <cstdint>

#include "backend/cuda/mma.cuh"

namespace rlx::cuda::tc {

// The split operands are padded to whole tiles.
constexpr int kRowPad = 128, kKPad = 32;
constexpr int kGroup = 8;  // row tiles walked together

// A block of 2 x 4 warps, each 64 x 32 of the output; 32-deep k slices (promoted to the
// f32 sum one at a time) in three cp.async stages of four 16 KB halves. (On the H200 two
// blocks an SM of 128 x 64 with 16-deep slices in four stages ran 20% slower.)
constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 3, kWarpsN = 4;
constexpr int kGemmThreads = 256;
constexpr int kHalf = kBM * kBK;  // floats in one operand half's tile (kBM == kBN)
constexpr size_t kSmem = size_t(kStages) * 4 * kHalf * sizeof(float);
static_assert(kRowPad % kBM == 0 && kKPad % kBK == 0);

// x (rows x k, strides rs and ks, batch entry z at z * bs) as head and tail, each
// [batch][rp][kp] with k contiguous and zeros past rows and k; *nonfinite = 1 where x holds
// an inf or a NaN. 32 x 32 tiles through shared memory, so that both the read (along
// whichever of rows and k is contiguous) and the write are coalesced.
__global__ void split_k_major(const float* __restrict__ x, int64_t rows, int64_t k, int64_t rs,
                              int64_t ks, int64_t bs, float* __restrict__ hi,
                              float* __restrict__ lo, int64_t rp, int64_t kp, int* nonfinite) {
  __shared__ float tile[32][33];
  const int64_t r0 = int64_t(blockIdx.y) * 32, k0 = int64_t(blockIdx.x) * 32;
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  x += int64_t(blockIdx.z) * bs;
  for (int i = ty; i < 32; i += 8) {
    int64_t r = ks == 1 ? r0 + i : r0 + tx, c = ks == 1 ? k0 + tx : k0 + i;
    float v = r < rows && c < k ? x[r * rs + c * ks] : 0.0f;
    if (ks == 1)
      tile[i][tx] = v;
    else
      tile[tx][i] = v;
  }
  __syncthreads();
  const int64_t base = int64_t(blockIdx.z) * rp * kp;
  for (int i = ty; i < 32; i += 8) {
    float v = tile[i][tx];
    uint32_t head, tail;
    tf32_split(v, head, tail);
    float h = __uint_as_float(head);
    if (!isfinite(v)) {  // inf and NaN travel in the head alone
      h = v;
      tail = 0;
      *nonfinite = 1;
    } else if (!isfinite(h)) {  // rounding up overflowed: truncate instead
      h = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
      asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(tail) : "f"(v - h));
    }
    int64_t o = base + (r0 + i) * kp + k0 + tx;
    hi[o] = h;
    lo[o] = __uint_as_float(tail);
  }
}

struct TcParams {
  const float *a_hi, *a_lo, *b_hi, *b_lo;  // [batch][mp | np][kp]
  int64_t a_batch, b_batch;                // 0: one matrix for every batch entry
  int64_t kp;
  int tiles_m, tiles_n;
  float* y;
  int64_t y_row, y_batch, m, n;
  float alpha, beta;
  const float* bias;     // n values, or null
  const int* nonfinite;  // set by the splits: an operand holds an inf or a NaN
};

template <int kAct>
__device__ __forceinline__ float activate(float v) {
  if constexpr (kAct == 1) return v > 0.0f ? v : (v == v ? 0.0f : v);  // relu keeps NaN
  if constexpr (kAct == 2)  // the tanh form of GELU, as cuBLASLt's epilogue
    return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  return v;
}

// Row r's 16-byte chunk c sits at chunk c ^ (r % 8): ldmatrix's eight rows at one chunk
// then hit eight different bank groups.
__device__ __forceinline__ int swizzled(int r, int ch) { return r * kBK + ((ch ^ (r & 7)) << 2); }

template <int kAct>
__global__ void __launch_bounds__(kGemmThreads, 1) gemm_3xtf32(TcParams p) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int local = int(blockIdx.x % unsigned(kGroup * p.tiles_n));
  const int first = int(blockIdx.x / unsigned(kGroup * p.tiles_n)) * kGroup;
  const int rows_in_group = min(p.tiles_m - first, kGroup);
  const int tm = first + local % rows_in_group, tn = local / rows_in_group;
  const int64_t z = blockIdx.y;
  const int64_t a_off = z * p.a_batch + int64_t(tm) * kBM * p.kp;
  const int64_t b_off = z * p.b_batch + int64_t(tn) * kBN * p.kp;
  const float* src[4] = {p.a_hi + a_off, p.a_lo + a_off, p.b_hi + b_off, p.b_lo + b_off};
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int kts = int(p.kp / kBK);

  // Slice kt into stage st: A's head and tail, then B's.
  auto load = [&](int st, int kt) {
    float* s = smem + st * 4 * kHalf;
    for (int c = tid; c < kBM * kBK / 4; c += kGemmThreads) {
      int r = c / (kBK / 4), ch = c % (kBK / 4), so = swizzled(r, ch);
      int64_t go = int64_t(r) * p.kp + int64_t(kt) * kBK + ch * 4;
#pragma unroll
      for (int h = 0; h < 4; ++h) cp_async16(s + h * kHalf + so, src[h] + go, true);
    }
  };

  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int g = lane / 4, t = lane % 4;
  float acc[4][4][4] = {};
  if (*p.nonfinite) {
    // inf * a tail of 0 would make NaN where SGEMM gives inf: each output as one f32 dot
    // product of head + tail instead (slow; only for operands holding an inf or a NaN).
    const float *ah = src[0] + (wm * 64 + g) * p.kp, *al = src[1] + (wm * 64 + g) * p.kp;
    const float *bh = src[2] + (wn * 32 + 2 * t) * p.kp, *bl = src[3] + (wn * 32 + 2 * t) * p.kp;
    for (int64_t l = 0; l < p.kp; ++l)
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int64_t r = (mt * 16 + (e / 2) * 8) * p.kp + l, c = (nt * 8 + e % 2) * p.kp + l;
            acc[mt][nt][e] = fmaf(ah[r] + al[r], bh[c] + bl[c], acc[mt][nt][e]);
          }
  } else {
    float part[4][4][4];
    const float kZero[4] = {};
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < kts) load(st, st);
      cp_async_commit();
    }
    for (int kt = 0; kt < kts; ++kt) {
      cp_async_wait<kStages - 2>();  // slice kt is in
      __syncthreads();               // and every warp is done with the stage the next load refills
      if (kt + kStages - 1 < kts) load((kt + kStages - 1) % kStages, kt + kStages - 1);
      cp_async_commit();
      const float* s = smem + (kt % kStages) * 4 * kHalf;
#pragma unroll
      for (int kk = 0; kk < kBK / 8; ++kk) {
        uint32_t ah[4][4], al[4][4], bh[4][2], bl[4][2];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          int o = swizzled(wm * 64 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                           kk * 2 + (lane >> 4));
          ldmatrix4<false>(ah[mt], s + o);
          ldmatrix4<false>(al[mt], s + kHalf + o);
        }
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          int o = swizzled(wn * 32 + np * 16 + ((lane >> 4) & 1) * 8 + (lane & 7),
                           kk * 2 + ((lane >> 3) & 1));
          uint32_t h[4], l[4];
          ldmatrix4<false>(h, s + 2 * kHalf + o);
          ldmatrix4<false>(l, s + 3 * kHalf + o);
          bh[2 * np][0] = h[0], bh[2 * np][1] = h[1], bh[2 * np + 1][0] = h[2],
                 bh[2 * np + 1][1] = h[3];
          bl[2 * np][0] = l[0], bl[2 * np][1] = l[1], bl[2 * np + 1][0] = l[2],
                 bl[2 * np + 1][1] = l[3];
        }
        // The small terms first; each pass over all 16 tiles, so that consecutive products
        // do not wait on each other's accumulator.
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            if (kk == 0)  // a new slice: from zero
              mma_tf32(part[mt][nt], al[mt], bh[nt][0], bh[nt][1], kZero);
            else
              mma_tf32(part[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
          }
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) mma_tf32(part[mt][nt], ah[mt], bl[nt][0], bl[nt][1]);
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) mma_tf32(part[mt][nt], ah[mt], bh[nt][0], bh[nt][1]);
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][nt][e] += part[mt][nt][e];
    }
    cp_async_wait<0>();
  }

  // Lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1 of each 16 x 8 tile.
  float* y = p.y + z * p.y_batch;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int64_t row = int64_t(tm) * kBM + wm * 64 + mt * 16 + g + half * 8;
      if (row >= p.m) continue;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          int64_t col = int64_t(tn) * kBN + wn * 32 + nt * 8 + 2 * t + e;
          if (col >= p.n) continue;
          float* dst = y + row * p.y_row + col;
          float v = p.alpha * acc[mt][nt][half * 2 + e];
          if (p.beta != 0.0f) v += p.beta * *dst;
          if (p.bias) v += p.bias[col];
          *dst = activate<kAct>(v);
        }
    }
}

}  // namespace rlx::cuda::tc
