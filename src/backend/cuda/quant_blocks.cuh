// The block-quantized types as the CUDA kernels read them (quant.cu), host-callable too so
// that tests check the bit layouts on any machine (tests/cuda/quant_blocks_test.cpp).
//
// A block is read as groups of 16 values: group g (values 16g .. 16g + 15) unpacks, in
// registers, to four words of 4 signed bytes v with an integer scale sc and min mn, so that
// value i = D * sc * v[i] - M * mn (the CPU's Unpacked, backend/cpu/quant_dot.cpp). Loads
// are 16 bytes where the block keeps 16-byte alignment (q4_k, q5_k), 2-byte words elsewhere.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "rlx/dtype.h"
#include "rlx/quant.h"

#define RLX_HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define RLX_UNROLL _Pragma("unroll")
#else
#define RLX_UNROLL
#endif

namespace rlx::cuda {

// Group g (values 16g .. 16g + 15) of a block: four words of 4 signed bytes, and the
// integer scale and min that multiply D and M.
struct Group {
  int v[4];
  int sc, mn;
};

RLX_HD float half_at(const uint8_t* p) {
  const unsigned short h = *reinterpret_cast<const unsigned short*>(p);
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  return f16_to_f32(h);
#endif
}

// Bytewise a - b (mod 256), and the dot product of two words of 4 signed bytes plus c.
RLX_HD int vsub4(int a, int b) {
#ifdef __CUDA_ARCH__
  return int(__vsub4(unsigned(a), unsigned(b)));
#else
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= ((unsigned(a >> 8 * i) - unsigned(b >> 8 * i)) & 255u) << 8 * i;
  return int(r);
#endif
}
RLX_HD int dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i) c += int(int8_t(a >> 8 * i)) * int(int8_t(b >> 8 * i));
  return c;
#endif
}

// 16 bytes from a 2-byte aligned address (blocks of 18, 34, 210 bytes are only that).
RLX_HD void load16(const uint8_t* p, int (&w)[4]) {
  const auto* h = reinterpret_cast<const unsigned short*>(p);
  RLX_UNROLL
  for (int j = 0; j < 4; ++j) w[j] = int(h[2 * j]) | (int(h[2 * j + 1]) << 16);
}
// 16 bytes from a 16-byte aligned address (the K-quant blocks of 144 and 176 bytes).
RLX_HD void load16a(const uint8_t* p, int (&w)[4]) {
  const int4 q = *reinterpret_cast<const int4*>(p);
  w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
}

RLX_HD int nibbles(int w, int high) { return (w >> (4 * high)) & 0x0F0F0F0F; }

// Bit `b` of each byte of w moved to bit `to`.
RLX_HD int bits(int w, int b, int to) { return ((unsigned(w) >> b) & 0x01010101u) << to; }

// The fifth bits of q5_0 / q5_1 values 16g .. 16g + 15 (bit i of qh is value i's), as
// bit 4 of each byte.
RLX_HD void q5_high(const uint8_t* qh, int g, int (&v)[4]) {
  const unsigned h =
      (unsigned(qh[0]) | unsigned(qh[1]) << 8 | unsigned(qh[2]) << 16 | unsigned(qh[3]) << 24) >>
      (16 * g);
  RLX_UNROLL
  for (int j = 0; j < 4; ++j) {
    const unsigned b = h >> (4 * j);
    v[j] |= int(((b & 1) | (b & 2) << 7 | (b & 4) << 14 | (b & 8) << 21) << 4);
  }
}

template <DType T>
struct Blocks;

// The 32-value nibble types: f16 d, with kMin an f16 minimum m (x = d q + m; else the
// values are centred, q - 8 or q - 16), with kFive a fifth bit per value in 4 bytes qh,
// then 16 bytes of nibbles (value j low in byte j, value j + 16 high).
template <bool kMin, bool kFive>
struct Nibbles32 {
  static constexpr int kValues = 32, kQh = 2 + 2 * kMin, kQs = kQh + 4 * kFive, kBytes = kQs + 16;
  static constexpr bool kHasMin = kMin;
  RLX_HD static Group unpack(const uint8_t* b, int g, float& D, float& M) {
    Group r{{}, 1, 1};
    D = half_at(b), M = kMin ? -half_at(b + 2) : 0.f;
    load16(b + kQs, r.v);
    RLX_UNROLL
    for (int j = 0; j < 4; ++j) r.v[j] = nibbles(r.v[j], g);
    if constexpr (kFive) q5_high(b + kQh, g, r.v);
    if constexpr (!kMin) {
      RLX_UNROLL
      for (int j = 0; j < 4; ++j) r.v[j] = vsub4(r.v[j], kFive ? 0x10101010 : 0x08080808);
    }
    return r;
  }
};
template <>
struct Blocks<DType::q4_0> : Nibbles32<false, false> {};
template <>
struct Blocks<DType::q4_1> : Nibbles32<true, false> {};
template <>
struct Blocks<DType::q5_0> : Nibbles32<false, true> {};
template <>
struct Blocks<DType::q5_1> : Nibbles32<true, true> {};
template <>
struct Blocks<DType::q8_0> {
  static constexpr int kValues = 32, kBytes = 34;
  static constexpr bool kHasMin = false;
  RLX_HD static Group unpack(const uint8_t* b, int g, float& D, float& M) {
    Group r{{}, 1, 1};
    D = half_at(b), M = 0;
    load16(b + 2 + 16 * g, r.v);
    return r;
  }
};
// q2_k: value j's 2 bits in qs[32 * (j / 128) + j % 32] at shift 2 * ((j % 128) / 32).
template <>
struct Blocks<DType::q2_k> {
  static constexpr int kValues = 256, kBytes = 84;
  static constexpr bool kHasMin = true;
  RLX_HD static Group unpack(const uint8_t* b, int g, float& D, float& M) {
    const int sc = b[g];
    Group r{{}, sc & 15, sc >> 4};
    D = half_at(b + 80), M = half_at(b + 82);
    int q[4];
    load16(b + 16 + 32 * (g / 8) + 16 * (g % 2), q);
    const int shift = 2 * ((g % 8) / 2);
    RLX_UNROLL
    for (int j = 0; j < 4; ++j) r.v[j] = (unsigned(q[j]) >> shift) & 0x03030303u;
    return r;
  }
};
// q3_k: the 2 low bits as q2_k; value j's high bit in hmask[j % 32] at bit j / 32, and a
// clear high bit subtracts 4.
template <>
struct Blocks<DType::q3_k> {
  static constexpr int kValues = 256, kBytes = 110;
  static constexpr bool kHasMin = false;
  RLX_HD static Group unpack(const uint8_t* b, int g, float& D, float& M) {
    const uint8_t* s = b + 96;
    Group r{{}, quant::k3_scale(s, g), 0};
    D = half_at(b + 108), M = 0;
    int q[4], h[4];
    load16(b + 32 + 32 * (g / 8) + 16 * (g % 2), q);
    load16(b + 16 * (g % 2), h);
    const int shift = 2 * ((g % 8) / 2), hb = g / 2;
    RLX_UNROLL
    for (int j = 0; j < 4; ++j) {
      const unsigned low = (unsigned(q[j]) >> shift) & 0x03030303u;
      const unsigned four = (~(unsigned(h[j]) >> hb) & 0x01010101u) << 2;
      r.v[j] = vsub4(int(low), int(four));
    }
    return r;
  }
};
// q4_k / q5_k: 64-value chunk c = g / 4 holds bytes qs[32c .. 32c + 31], low nibbles for
// its first 32 values, high for the next; scale and min of the 32-value group g / 2. q5_k
// (kFive) adds 32 bytes qh before qs: value l of 32-value group i has its fifth bit at bit
// i of qh[l].
template <bool kFive>
struct K4 {
  static constexpr int kValues = 256, kQs = 16 + 32 * kFive, kBytes = kQs + 128;
  static constexpr bool kHasMin = true;
  RLX_HD static Group unpack(const uint8_t* b, int g, float& D, float& M) {
    Group r;
    quant::k4_scale_min(b + 4, g / 2, r.sc, r.mn);
    D = half_at(b), M = half_at(b + 2);
    load16a(b + kQs + 32 * (g / 4) + 16 * (g % 2), r.v);
    RLX_UNROLL
    for (int j = 0; j < 4; ++j) r.v[j] = nibbles(r.v[j], (g % 4) / 2);
    if constexpr (kFive) {
      int h[4];
      load16a(b + 16 + 16 * (g % 2), h);
      RLX_UNROLL
      for (int j = 0; j < 4; ++j) r.v[j] |= bits(h[j], g / 2, 4);
    }
    return r;
  }
};
template <>
struct Blocks<DType::q4_k> : K4<false> {};
template <>
struct Blocks<DType::q5_k> : K4<true> {};
// q6_k: half h = g / 8 of the block; quarter q of its 128 values: 4 low bits from
// ql[64h + 32 (q % 2) + l] (high nibble for q >= 2), 2 high bits from qh[32h + l] at 2q.
template <>
struct Blocks<DType::q6_k> {
  static constexpr int kValues = 256, kBytes = 210;
  static constexpr bool kHasMin = false;
  RLX_HD static Group unpack(const uint8_t* b, int g, float& D, float& M) {
    Group r{{}, int(int8_t(b[192 + g])), 0};
    D = half_at(b + 208), M = 0;
    const int h = g / 8, q = (g % 8) / 2, l0 = 16 * (g % 2);
    int lo[4], hi[4];
    load16(b + 64 * h + 32 * (q % 2) + l0, lo);
    load16(b + 128 + 32 * h + l0, hi);
    RLX_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int v = nibbles(lo[j], q / 2) | (((unsigned(hi[j]) >> (2 * q)) & 0x03030303u) << 4);
      r.v[j] = vsub4(v, 0x20202020);
    }
    return r;
  }
};

RLX_HD int sbyte(int w, int i) { return int(int8_t(w >> (8 * i))); }

// Group g's share of a row's dot product with 16 activations xv (int8, quantized by ggml's
// rules with block scale ad): D * sc * (v . x) * ad - M * mn * (sum of x) * ad for the
// K-quants; blocks of 32 carry their whole minimum on group 0, from q8_1's block sum xs.
template <class B>
RLX_HD float group_share(const Group& u, float D, float M, const int (&xv)[4], float ad, float xs,
                         int g) {
  int dot = 0;
  for (int j = 0; j < 4; ++j) dot = dp4a(u.v[j], xv[j], dot);
  if constexpr (B::kValues == 256) {
    int sum = 0;
    if (u.mn)
      for (int j = 0; j < 4; ++j) sum = dp4a(xv[j], 0x01010101, sum);
    return ad * (D * float(u.sc * dot) - M * float(u.mn * sum));
  } else {
    return D * ad * float(dot) - (g == 0 ? M * xs : 0.f);
  }
}

}  // namespace rlx::cuda
