// The activations' quantization rules as the CUDA products apply them (ggml's, the CPU's
// qdot::quantize_act): q8_0 / q8_1 blocks of 32 with f16 scales, q8_K blocks of 256. quant.cu's
// quantizer kernels write them to memory; quant_tiles.cu's one-row products quantize in
// registers with the same functions, so both give the same bytes and scales.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/kernels.cuh"

namespace rlx::cuda {

__device__ __forceinline__ float round_half(float v) { return __half2float(__float2half_rn(v)); }

// A block of 32 held by 4 consecutive lanes (8 values each, lane % 4 the part): the lane's
// 8 int8 values as two words, the block's scale d (before f16 rounding) and the block's sum
// of int8 values (every lane of the 4 gets d and the sum).
struct Q8Quad {
  uint32_t word[2];
  float d;
  int sum;
};

__device__ __forceinline__ Q8Quad q8_quad(const float (&v)[8]) {
  float amax = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j]));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const float id = amax != 0 ? 127.f / amax : 0.f;
  Q8Quad r{{0, 0}, amax / 127.f, 0};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = __float2int_rn(v[j] * id);
    r.sum += q;
    r.word[j / 4] |= uint32_t(q & 0xff) << (8 * (j % 4));
  }
  r.sum += __shfl_xor_sync(0xffffffffu, r.sum, 1);
  r.sum += __shfl_xor_sync(0xffffffffu, r.sum, 2);
  return r;
}

// q8_K's scale comes from the signed value of largest magnitude, the first one (lowest index
// in the block) on ties. A lane's candidate (|v|, v, index) against the lanes lane ^ o for
// o = kFrom, kFrom / 2, .. 1: the block's pick on every lane of the group.
template <int kFrom>
__device__ __forceinline__ void q8k_pick(float& best, float& max, int& at) {
#pragma unroll
  for (int o = kFrom; o > 0; o /= 2) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const float om = __shfl_xor_sync(0xffffffffu, max, o);
    const int oa = __shfl_xor_sync(0xffffffffu, at, o);
    if (ob > best || (ob == best && oa < at)) best = ob, max = om, at = oa;
  }
}

// The q8_K value of v with the block's inverse scale (-127 / max), and the block's scale.
__device__ __forceinline__ float q8k_iscale(float max) { return max != 0 ? -127.f / max : 0.f; }
__device__ __forceinline__ int q8k_value(float iscale, float v) {
  return min(127, __float2int_rn(iscale * v));
}
__device__ __forceinline__ float q8k_scale(float max, float iscale) {
  return max != 0 ? 1 / iscale : 0.f;
}

// Block b of 32 values held by 4 lanes (part = lane % 4, values 8 part .. 8 part + 7) into
// xq, xd, xs as quant.cu's quantize_q8 writes them (the same bytes and scales). Every lane
// of the warp calls it (the shuffles); `live` ones store.
__device__ __forceinline__ void q8_block4(const float (&v)[8], int part, bool live, int64_t b,
                                          int8_t* xq, float* xd, float* xs) {
  const Q8Quad r = q8_quad(v);
  if (!live) return;
  *reinterpret_cast<uint2*>(xq + b * 32 + 8 * part) = make_uint2(r.word[0], r.word[1]);
  if (part == 0) {
    xd[b] = round_half(r.d);
    xs[b] = round_half(r.d * float(r.sum));
  }
}

// Block b of 256 values (q8_K), lane holding values 8 lane .. 8 lane + 7; xs gets the sums of
// each 32 values (4 lanes), which the tiled q4_k products' minimums need.
__device__ __forceinline__ void q8k_block(const float (&v)[8], int lane, int64_t b, int8_t* xq,
                                          float* xd, float* xs) {
  float best = -1, max = 0;
  int at = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (fabsf(v[j]) > best) best = fabsf(v[j]), max = v[j], at = lane * 8 + j;
  q8k_pick<16>(best, max, at);
  const float iscale = q8k_iscale(max);
  int sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = q8k_value(iscale, v[j]);
    xq[b * 256 + lane * 8 + j] = int8_t(q);
    sum += q;
  }
  if (lane == 0) xd[b] = q8k_scale(max, iscale);
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if (lane % 4 == 0) xs[b * 8 + lane / 4] = float(sum);
}

constexpr int kRowThreads = 256;

// One row xr [k] (k a multiple of kBlk) quantized by a block of kRowThreads threads into xq
// [k], xd [k / kBlk], xs [k / 32] (global or shared memory), after rms_norm with scale g and
// eps where g is not null, each value x * inv * g as the rms_norm kernel computes it (nn.cu's
// norm_rows). A pass takes 8 values a thread (thread t values 8 t .. 8 t + 7: one of 32 a 4
// lanes, one of 256 a warp); the first kHeld passes' values stay in registers between the
// sum and the quantization. wait() runs after the first loads of g (weights, which no kernel
// before writes) and before those of x: a dependent launch's wait.
template <int kBlk, class Wait>
__device__ __forceinline__ void quantize_row(const float* xr, const float* g, float eps, int64_t k,
                                             int8_t* xq, float* xd, float* xs, Wait wait) {
  constexpr int kPass = 8 * kRowThreads, kHeld = 4;
  __shared__ float part[kRowThreads / 32];
  const int t = int(threadIdx.x), warp = t / 32, lane = t % 32;
  const int64_t passes = (k + kPass - 1) / kPass;
  // 16-byte loads where both rows allow them (k is a multiple of 32).
  const bool vec = aligned16(xr) && aligned16(g);
  // The 8 values of pass c from row p (zeros past k).
  auto load8 = [&](const float* p, int64_t c, float(&v)[8]) {
    const int64_t i = c * kPass + 8 * t;
    if (i >= k) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = 0;
    } else if (vec) {
      const float4 a = *reinterpret_cast<const float4*>(p + i);
      const float4 b = *reinterpret_cast<const float4*>(p + i + 4);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
      v[7] = b.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = p[i + j];
    }
  };
  float xv[kHeld][8], gv[kHeld][8];
  if (g)
#pragma unroll
    for (int c = 0; c < kHeld; ++c)
      if (c < passes) load8(g, c, gv[c]);
  wait();
#pragma unroll
  for (int c = 0; c < kHeld; ++c)
    if (c < passes) load8(xr, c, xv[c]);
  float inv = 1;
  if (g) {
    float ss = 0;
#pragma unroll
    for (int c = 0; c < kHeld; ++c)
      if (c < passes)
#pragma unroll
        for (int j = 0; j < 8; ++j) ss += xv[c][j] * xv[c][j];
    for (int64_t c = kHeld; c < passes; ++c) {
      float v[8];
      load8(xr, c, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
    }
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) part[warp] = ss;
    __syncthreads();
    ss = 0;
    for (int w = 0; w < kRowThreads / 32; ++w) ss += part[w];
    inv = 1.f / sqrtf(ss / float(k) + eps);
  }
  // Pass c's values, normalised in v, into their blocks (every lane calls: the shuffles).
  auto quantize = [&](int64_t c, float(&v)[8], const float(&s)[8]) {
    if (g)
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = v[j] * inv * s[j];
    const int64_t i = c * kPass + 8 * t;
    if constexpr (kBlk == 32)
      q8_block4(v, t % 4, i < k, i / 32, xq, xd, xs);
    else if (c * kPass + 256 * warp < k)  // the warp's block is in the row
      q8k_block(v, lane, i / 256, xq, xd, xs);
  };
#pragma unroll
  for (int c = 0; c < kHeld; ++c)
    if (c < passes) quantize(c, xv[c], gv[c]);
  for (int64_t c = kHeld; c < passes; ++c) {
    float v[8], s[8];
    load8(xr, c, v);
    if (g) load8(g, c, s);
    quantize(c, v, s);
  }
}

}  // namespace rlx::cuda
