// The reference block codecs (rlx/quant.h), written from ggml's format description.
//
// The encoders follow llama.cpp's reference quantizers step by step, in the same float
// arithmetic (this file is built without FMA contraction: -std=c++20 turns it off), so
// that a file rlx quantizes is byte-identical to one llama-quantize writes without an
// importance matrix. Rounding helpers say which C rounding each step uses, since the
// reference mixes three (round-half-even, round-half-away, truncation).
#include "rlx/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rlx/error.h"

namespace rlx::quant {

namespace {

float h2f(uint16_t h) { return f16_to_f32(h); }
uint16_t f2h(float f) { return f32_to_f16(f); }

// Round half to even, as ggml's nearest_int: adding 1.5 * 2^23 leaves the rounded value
// in the low mantissa bits (valid for |x| < 2^22; a libm call would be far slower here,
// where this file has no SSE4.1 rounding instruction). Out-of-range and NaN inputs (from
// degenerate blocks) are pinned so nothing is undefined.
int nearest(float x) {
  if (!(std::fabs(x) < 4194304.f)) return std::isnan(x) ? 0 : (x > 0 ? 4194303 : -4194303);
  const float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

// C truncation toward zero, clamped to [lo, hi] (the reference's (int8_t)(x + 8.5f) etc.).
int trunc_clamp(float x, int lo, int hi) {
  if (!(x > float(lo))) return lo;
  if (!(x < float(hi))) return hi;
  return int(x);
}

template <class B>
const B* blocks(const void* p) {
  return static_cast<const B*>(p);
}
template <class B>
B* blocks(void* p) {
  return static_cast<B*>(p);
}

// ---- the 2-bit and 6-bit index layouts of the K-quants -------------------------------
// Value j (0..255) of a q2_k / q3_k block: its 2 bits sit in byte qs[32 * (j / 128) + j % 32]
// at shift 2 * ((j % 128) / 32).
inline int q2_byte(int j) { return 32 * (j / 128) + j % 32; }
inline int q2_shift(int j) { return 2 * ((j % 128) / 32); }

// q4_k / q5_k: value j's nibble is in qs[32 * (j / 64) + j % 32], high nibble when
// (j % 64) >= 32. Group of 32 = j / 32.
inline int q4k_byte(int j) { return 32 * (j / 64) + j % 32; }
inline int q4k_shift(int j) { return (j % 64) >= 32 ? 4 : 0; }

void k4_pack(uint8_t* s, const uint8_t* sc, const uint8_t* m) {
  std::memset(s, 0, 12);
  for (int g = 0; g < 8; ++g) {
    if (g < 4) {
      s[g] = sc[g];
      s[g + 4] = m[g];
    } else {
      s[g + 4] = uint8_t((sc[g] & 0xF) | ((m[g] & 0xF) << 4));
      s[g - 4] |= uint8_t((sc[g] >> 4) << 6);
      s[g] |= uint8_t((m[g] >> 4) << 6);
    }
  }
}

// ---- decoders -----------------------------------------------------------------------

void dq_q4_0(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ4_0>(src); nb--; ++b, y += kQK) {
    const float d = h2f(b->d);
    for (int j = 0; j < kQK; ++j) {
      int q = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
      y[j] = float(q - 8) * d;
    }
  }
}

void dq_q4_1(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ4_1>(src); nb--; ++b, y += kQK) {
    const float d = h2f(b->d), m = h2f(b->m);
    for (int j = 0; j < kQK; ++j) {
      int q = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
      y[j] = float(q) * d + m;
    }
  }
}

// The fifth bit of value j of a q5_0 / q5_1 block.
int q5_high(const uint8_t* qh, int j) { return ((qh[j / 8] >> (j % 8)) & 1) << 4; }

void dq_q5_0(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ5_0>(src); nb--; ++b, y += kQK) {
    const float d = h2f(b->d);
    for (int j = 0; j < kQK; ++j) {
      int q = (j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4)) | q5_high(b->qh, j);
      y[j] = float(q - 16) * d;
    }
  }
}

void dq_q5_1(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ5_1>(src); nb--; ++b, y += kQK) {
    const float d = h2f(b->d), m = h2f(b->m);
    for (int j = 0; j < kQK; ++j) {
      int q = (j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4)) | q5_high(b->qh, j);
      y[j] = float(q) * d + m;
    }
  }
}

void dq_q8_0(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ8_0>(src); nb--; ++b, y += kQK) {
    const float d = h2f(b->d);
    for (int j = 0; j < kQK; ++j) y[j] = float(b->qs[j]) * d;
  }
}

void dq_q2_k(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ2_K>(src); nb--; ++b, y += kQK_K) {
    const float d = h2f(b->d), dmin = h2f(b->dmin);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * float(b->scales[g] & 0xF), ml = dmin * float(b->scales[g] >> 4);
      for (int j = 16 * g; j < 16 * g + 16; ++j) {
        int q = (b->qs[q2_byte(j)] >> q2_shift(j)) & 3;
        y[j] = dl * float(q) - ml;
      }
    }
  }
}

void dq_q3_k(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ3_K>(src); nb--; ++b, y += kQK_K) {
    const float d = h2f(b->d);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * float(k3_scale(b->scales, g));
      for (int j = 16 * g; j < 16 * g + 16; ++j) {
        int q = (b->qs[q2_byte(j)] >> q2_shift(j)) & 3;
        bool high = (b->hmask[j % 32] >> (j / 32)) & 1;
        y[j] = dl * float(q - (high ? 0 : 4));
      }
    }
  }
}

void dq_q4_k(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ4_K>(src); nb--; ++b, y += kQK_K) {
    const float d = h2f(b->d), dmin = h2f(b->dmin);
    for (int g = 0; g < 8; ++g) {
      int sc, m;
      k4_scale_min(b->scales, g, sc, m);
      const float dl = d * float(sc), ml = dmin * float(m);
      for (int j = 32 * g; j < 32 * g + 32; ++j) {
        int q = (b->qs[q4k_byte(j)] >> q4k_shift(j)) & 0xF;
        y[j] = dl * float(q) - ml;
      }
    }
  }
}

void dq_q5_k(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ5_K>(src); nb--; ++b, y += kQK_K) {
    const float d = h2f(b->d), dmin = h2f(b->dmin);
    for (int g = 0; g < 8; ++g) {
      int sc, m;
      k4_scale_min(b->scales, g, sc, m);
      const float dl = d * float(sc), ml = dmin * float(m);
      for (int j = 32 * g; j < 32 * g + 32; ++j) {
        int q = ((b->qs[q4k_byte(j)] >> q4k_shift(j)) & 0xF) | (((b->qh[j % 32] >> g) & 1) << 4);
        y[j] = dl * float(q) - ml;
      }
    }
  }
}

// q6_k value j: 4 low bits in ql[64 * (j / 128) + j % 64] (high nibble when (j % 128) >=
// 64), 2 high bits in qh[32 * (j / 128) + j % 32] at shift 2 * ((j % 128) / 32).
inline int q6_ql_byte(int j) { return 64 * (j / 128) + j % 64; }
inline int q6_ql_shift(int j) { return (j % 128) >= 64 ? 4 : 0; }

void dq_q6_k(const void* src, float* y, int64_t nb) {
  for (const auto* b = blocks<BlockQ6_K>(src); nb--; ++b, y += kQK_K) {
    const float d = h2f(b->d);
    for (int j = 0; j < kQK_K; ++j) {
      int lo = (b->ql[q6_ql_byte(j)] >> q6_ql_shift(j)) & 0xF;
      int hi = (b->qh[q2_byte(j)] >> q2_shift(j)) & 3;
      y[j] = d * float(b->scales[j / 16]) * float((lo | (hi << 4)) - 32);
    }
  }
}

// ---- encoders: q4_0 … q8_0 (round-to-nearest, one scale per 32) ----------------------

// The value of largest magnitude (the first one on ties), as the reference picks it.
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (amax < std::fabs(x[i])) amax = std::fabs(x[i]), max = x[i];
  return max;
}

void q_q4_0(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ4_0>(dst); nb--; ++b, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b->d = f2h(d);
    for (int j = 0; j < 16; ++j) {
      int lo = trunc_clamp(x[j] * id + 8.5f, 0, 15), hi = trunc_clamp(x[j + 16] * id + 8.5f, 0, 15);
      b->qs[j] = uint8_t(lo | (hi << 4));
    }
  }
}

void minmax(const float* x, int n, float& lo, float& hi) {
  lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
}

void q_q4_1(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ4_1>(dst); nb--; ++b, x += kQK) {
    float lo, hi;
    minmax(x, kQK, lo, hi);
    const float d = (hi - lo) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b->d = f2h(d), b->m = f2h(lo);
    for (int j = 0; j < 16; ++j) {
      int q0 = trunc_clamp((x[j] - lo) * id + 0.5f, 0, 15);
      int q1 = trunc_clamp((x[j + 16] - lo) * id + 0.5f, 0, 15);
      b->qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

// Packs 32 five-bit values into q5_0 / q5_1's nibbles and high-bit word.
void pack_q5(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  for (int j = 0; j < 32; ++j) h |= uint32_t((q[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = uint8_t(h >> (8 * k));
}

void q_q5_0(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ5_0>(dst); nb--; ++b, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b->d = f2h(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = trunc_clamp(x[j] * id + 16.5f, 0, 31);
    pack_q5(q, b->qs, b->qh);
  }
}

void q_q5_1(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ5_1>(dst); nb--; ++b, x += kQK) {
    float lo, hi;
    minmax(x, kQK, lo, hi);
    const float d = (hi - lo) / 31;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b->d = f2h(d), b->m = f2h(lo);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = trunc_clamp((x[j] - lo) * id + 0.5f, 0, 31);
    pack_q5(q, b->qs, b->qh);
  }
}

void q_q8_0(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ8_0>(dst); nb--; ++b, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b->d = f2h(d);
    // roundf: half away from zero (not the K-quants' half-to-even).
    for (int j = 0; j < kQK; ++j)
      b->qs[j] = int8_t(std::clamp(std::round(x[j] * id), -127.f, 127.f));
  }
}

// ---- the K-quants' scale searches -----------------------------------------------------

// Asymmetric fit x ~= scale * L - min over n values, L in [0, nmax], minimising the
// weighted error: starts from the min/max grid, then tries nstep + 1 stretched grids
// (nmax + rmin + rdelta * k levels across the range), solving the weighted least-squares
// scale and offset for each and keeping the best (ggml's make_qkx2_quants). Returns the
// scale; *neg_min receives -min (>= 0).
float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                 float rmin, float rdelta, int nstep, bool abs_error) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *neg_min = -lo;
    return 0.f;
  }
  auto err = [&](float s, float m, const uint8_t* l) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      float diff = s * float(l[i]) + m - x[i];
      e += w[i] * (abs_error ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  float iscale = float(nmax) / (hi - lo);
  float scale = 1 / iscale, min = lo;
  for (int i = 0; i < n; ++i) L[i] = uint8_t(std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax));
  float best = err(scale, min, L);
  uint8_t aux[32];
  for (int k = 0; k <= nstep; ++k) {
    // The grid spans [min, hi] with the best offset so far (the reference reuses its
    // `min` variable here, so later grids start from the improved fit).
    iscale = (rmin + rdelta * float(k) + float(nmax)) / (hi - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::clamp(nearest(iscale * (x[i] - min)), 0, nmax);
      aux[i] = uint8_t(l);
      sum_l += w[i] * float(l);
      sum_l2 += w[i] * float(l) * float(l);
      sum_xl += w[i] * float(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0) m = 0, s = sum_xl / sum_l2;
    float e = err(s, m, aux);
    if (e < best) {
      std::copy(aux, aux + n, L);
      best = e, scale = s, min = m;
    }
  }
  *neg_min = -min;
  return scale;
}

// Symmetric fit x ~= scale * (L - nmax), L in [0, 2 nmax), weights x^2: the grid through
// the largest-magnitude value, then 18 nearby grids, keeping the best least-squares scale
// (ggml's make_qx_quants with rmse_type 1).
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0.f;
  }
  auto grid = [&](float iscale, float& sumlx, float& suml2, bool store) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
      if (store) L[i] = int8_t(l + nmax);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
  };
  float sumlx, suml2;
  grid(-float(nmax) / max, sumlx, suml2, true);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    const float iscale = -(float(nmax) + 0.1f * float(k)) / max;
    grid(iscale, sumlx, suml2, false);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      grid(iscale, sumlx, suml2, true);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// q3_k's symmetric fit: the max grid, then up to 5 rounds of moving single values to the
// level that improves the weighted (x^2) least-squares fit (ggml's make_q3_quants).
// L receives values + nmax.
float fit_q3(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0.f;
  }
  const float iscale = -float(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = std::clamp(nearest(iscale * x[i]), -nmax, nmax - 1);
    L[i] = int8_t(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * float(L[i]);
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * float(L[i]) * float(L[i]);
      int l = std::clamp(nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * float(l);
      sl2 += w * float(l) * float(l);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = int8_t(l), sumlx = slx, suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// ---- encoders: the K-quants ----------------------------------------------------------

// Packs 2-bit values L[256] into q2_k / q3_k's qs.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  std::memset(qs, 0, kQK_K / 4);
  for (int j = 0; j < kQK_K; ++j) qs[q2_byte(j)] |= uint8_t((L[j] & 3) << q2_shift(j));
}

void q_q2_k(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ2_K>(dst); nb--; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    float scales[16], mins[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int g = 0; g < 16; ++g) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * g + l]);
      scales[g] = fit_affine(16, 3, x + 16 * g, w, L + 16 * g, &mins[g], -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[g]);
      max_min = std::max(max_min, mins[g]);
    }
    // 4-bit scales and mins relative to the block's largest.
    std::memset(b->scales, 0, 16);
    b->d = f2h(0.f), b->dmin = f2h(0.f);
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int g = 0; g < 16; ++g) b->scales[g] = uint8_t(nearest(iscale * scales[g]));
      b->d = f2h(max_scale / 15.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int g = 0; g < 16; ++g) b->scales[g] |= uint8_t(nearest(iscale * mins[g]) << 4);
      b->dmin = f2h(max_min / 15.f);
    }
    // Requantize against the scales as stored.
    for (int g = 0; g < 16; ++g) {
      const float d = h2f(b->d) * float(b->scales[g] & 0xF);
      if (d == 0) continue;
      const float dm = h2f(b->dmin) * float(b->scales[g] >> 4);
      for (int j = 16 * g; j < 16 * g + 16; ++j)
        L[j] = uint8_t(std::clamp(nearest((x[j] + dm) / d), 0, 3));
    }
    pack_2bit(L, b->qs);
  }
}

void q_q3_k(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ3_K>(dst); nb--; ++b, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float amax = 0, max_scale = 0;
    for (int g = 0; g < 16; ++g) {
      scales[g] = fit_q3(16, 4, x + 16 * g, L + 16 * g);
      if (std::fabs(scales[g]) > amax) amax = std::fabs(scales[g]), max_scale = scales[g];
    }
    std::memset(b->scales, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int g = 0; g < 16; ++g) {
        int l = std::clamp(int(int8_t(nearest(iscale * scales[g]))), -32, 31) + 32;
        b->scales[g % 8] |= uint8_t((l & 0xF) << (g < 8 ? 0 : 4));
        b->scales[8 + g % 4] |= uint8_t((l >> 4) << (2 * (g / 4)));
      }
      b->d = f2h(1 / iscale);
    } else {
      b->d = f2h(0.f);
    }
    for (int g = 0; g < 16; ++g) {
      const float d = h2f(b->d) * float(k3_scale(b->scales, g));
      if (d == 0) continue;
      for (int j = 16 * g; j < 16 * g + 16; ++j)
        L[j] = int8_t(std::clamp(nearest(x[j] / d), -4, 3) + 4);
    }
    // Values 4..7 keep their high bit in hmask (bit j / 32 of byte j % 32).
    std::memset(b->hmask, 0, sizeof b->hmask);
    uint8_t low[kQK_K];
    for (int j = 0; j < kQK_K; ++j) {
      if (L[j] > 3) b->hmask[j % 32] |= uint8_t(1 << (j / 32));
      low[j] = uint8_t(L[j] > 3 ? L[j] - 4 : L[j]);
    }
    pack_2bit(low, b->qs);
  }
}

// q4_k and q5_k share the search: 8 groups of 32, weights rms + |x|, 6-bit scales and
// mins. Returns the levels L (0..nmax) against the scales as stored.
template <class B>
void encode_k4(const float* x, B* b, int nmax, float rmin, int nstep, uint8_t* L) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int g = 0; g < 8; ++g) {
    const float* xg = x + 32 * g;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xg[l]);
    scales[g] = fit_affine(32, nmax, xg, w, L + 32 * g, &mins[g], rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[g]);
    max_min = std::max(max_min, mins[g]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int g = 0; g < 8; ++g) {
    // The reference stores nearest_int into a uint8_t before MIN(63, ·).
    ls[g] = std::min<uint8_t>(63, uint8_t(nearest(inv_scale * scales[g])));
    lm[g] = std::min<uint8_t>(63, uint8_t(nearest(inv_min * mins[g])));
  }
  k4_pack(b->scales, ls, lm);
  b->d = f2h(max_scale / 63.f);
  b->dmin = f2h(max_min / 63.f);
  for (int g = 0; g < 8; ++g) {
    int sc, m;
    k4_scale_min(b->scales, g, sc, m);
    const float d = h2f(b->d) * float(sc);
    if (d == 0) continue;
    const float dm = h2f(b->dmin) * float(m);
    for (int j = 32 * g; j < 32 * g + 32; ++j)
      L[j] = uint8_t(std::clamp(nearest((x[j] + dm) / d), 0, nmax));
  }
}

void q_q4_k(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ4_K>(dst); nb--; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    encode_k4(x, b, 15, -1.f, 20, L);
    std::memset(b->qs, 0, sizeof b->qs);
    for (int j = 0; j < kQK_K; ++j) b->qs[q4k_byte(j)] |= uint8_t(L[j] << q4k_shift(j));
  }
}

void q_q5_k(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ5_K>(dst); nb--; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    encode_k4(x, b, 31, -0.5f, 15, L);
    std::memset(b->qs, 0, sizeof b->qs);
    std::memset(b->qh, 0, sizeof b->qh);
    for (int j = 0; j < kQK_K; ++j) {
      b->qs[q4k_byte(j)] |= uint8_t((L[j] & 0xF) << q4k_shift(j));
      b->qh[j % 32] |= uint8_t((L[j] >> 4) << (j / 32));
    }
  }
}

void q_q6_k(const float* x, void* dst, int64_t nb) {
  for (auto* b = blocks<BlockQ6_K>(dst); nb--; ++b, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float amax = 0, max_scale = 0;
    for (int g = 0; g < 16; ++g) {
      scales[g] = fit_symmetric(16, 32, x + 16 * g, L + 16 * g);
      if (std::fabs(scales[g]) > amax) amax = std::fabs(scales[g]), max_scale = scales[g];
    }
    std::memset(b, 0, sizeof *b);
    if (amax < 1e-15f) {
      b->d = f2h(0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b->d = f2h(1 / iscale);
    for (int g = 0; g < 16; ++g) b->scales[g] = int8_t(std::min(127, nearest(iscale * scales[g])));
    for (int g = 0; g < 16; ++g) {
      const float d = h2f(b->d) * float(b->scales[g]);
      if (d == 0) continue;
      for (int j = 16 * g; j < 16 * g + 16; ++j)
        L[j] = int8_t(std::clamp(nearest(x[j] / d), -32, 31) + 32);
    }
    for (int j = 0; j < kQK_K; ++j) {
      b->ql[q6_ql_byte(j)] |= uint8_t((L[j] & 0xF) << q6_ql_shift(j));
      b->qh[q2_byte(j)] |= uint8_t((L[j] >> 4) << q2_shift(j));
    }
  }
}

using Decode = void (*)(const void*, float*, int64_t);
using Encode = void (*)(const float*, void*, int64_t);

struct Codec {
  Decode decode;
  Encode encode;
};

Codec codec(DType t) {
  switch (t) {
#define RLX_QUANT_CODEC(T) \
  case DType::T:           \
    return {dq_##T, q_##T};
    RLX_QUANT_DTYPES(RLX_QUANT_CODEC)
#undef RLX_QUANT_CODEC
    default:
      return {nullptr, nullptr};
  }
}

void check_row(const char* what, DType t, int64_t n) {
  if (!(is_quantized(t) || t == DType::f32 || t == DType::f16 || t == DType::bf16))
    fail<TypeError>(what, "expected f32, f16, bf16 or a quantized dtype, got ", dtype_name(t));
  if (n < 0 || n % dtype_block(t) != 0)
    fail<ValueError>(what, "expected a multiple of ", dtype_block(t), " values for ", dtype_name(t),
                     ", got ", n);
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_row("quant.dequantize_row", t, n);
  const auto* h = static_cast<const uint16_t*>(src);
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    default:
      codec(t).decode(src, dst, n / dtype_block(t));
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_row("quant.quantize_row", t, n);
  auto* h = static_cast<uint16_t*>(dst);
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    default:
      codec(t).encode(src, dst, n / dtype_block(t));
  }
}

bool interleavable(DType t, int rows) {
  const bool blocks32 = t == DType::q4_0 || t == DType::q8_0;
  return rows == 8 ? blocks32 : rows == 16 && (blocks32 || t == DType::q4_k);
}

int layout_rows(std::string_view layout) {
  return layout == "rows" ? 1 : layout == "rows8" ? 8 : layout == "rows16" ? 16 : 0;
}

std::string layout_name(int rows) {
  if (rows != 1 && rows != 8 && rows != 16)
    fail<ValueError>("quant.layout_name", "expected 1, 8 or 16 rows per group, got ", rows);
  return rows == 1 ? "rows" : "rows" + std::to_string(rows);
}

namespace {

void expect_interleaved(const char* where, DType t, int rows, int64_t n, int64_t k) {
  if (rows != 8 && rows != 16)
    fail<ValueError>(where, "expected groups of 8 or 16 rows, got ", rows);
  if (!interleavable(t, rows))
    fail<TypeError>(where, "expected a dtype with a rows", rows, " form (",
                    rows == 8 ? "q4_0, q8_0" : "q4_0, q8_0, q4_k", "), got ", dtype_name(t));
  const int64_t blk = dtype_block(t);
  if (n < 0 || n % rows != 0 || k < 0 || k % blk != 0)
    fail<ValueError>(where, "expected rows a multiple of ", rows, " and k of ", blk, ", got [", n,
                     ", ", k, "]");
}

// Calls f(plain, grouped, bytes) for every piece of one group of `rows` rows: the piece's
// offset in the rows' plain bytes (row after row) and in the interleaved group.
//  - q4_0 / q8_0: each block is a 2-byte f16 scale, then its value bytes (16 / 32) in runs of
//    4; rows8 keeps a block's 8 scales before its runs, rows16 all the group's scales first.
//  - q4_k (rows16): a block of the 16 rows is 2304 bytes: the 16 d, the 16 dmin, the three
//    scale words of each row (word j of every row together), then its 32 runs.
template <class F>
void for_each_piece(DType t, int rows, int64_t k, F&& f) {
  const int64_t nb = k / dtype_block(t), bb = int64_t(dtype_size(t));
  if (t == DType::q4_k) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t p = (r * nb + b) * bb, u = b * rows * bb;
        f(p, u + 2 * r, 2);
        f(p + 2, u + 2 * rows + 2 * r, 2);
        for (int64_t j = 0; j < 3; ++j) f(p + 4 + 4 * j, u + 4 * rows * (1 + j) + 4 * r, 4);
        for (int64_t v = 0; v < 32; ++v) f(p + 16 + 4 * v, u + 4 * rows * (4 + v) + 4 * r, 4);
      }
    return;
  }
  const int64_t vb = bb - 2;  // value bytes: 16 (q4_0), 32 (q8_0)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t p = (r * nb + b) * bb;
      if (rows == 8) {
        f(p, b * 8 * bb + 2 * r, 2);
        for (int64_t v = 0; v < vb / 4; ++v) f(p + 2 + 4 * v, b * 8 * bb + 16 + 32 * v + 4 * r, 4);
      } else {
        f(p, b * 2 * rows + 2 * r, 2);
        for (int64_t v = 0; v < vb / 4; ++v)
          f(p + 2 + 4 * v, nb * 2 * rows + b * rows * vb + 4 * rows * v + 4 * r, 4);
      }
    }
}

}  // namespace

void interleave(DType t, int rows, const void* src, void* dst, int64_t n, int64_t k) {
  expect_interleaved("quant.interleave", t, rows, n, k);
  const int64_t gb = rows * int64_t(dtype_nbytes(t, k));
  for (int64_t g = 0; g < n / rows; ++g) {
    const auto* in = static_cast<const uint8_t*>(src) + g * gb;
    auto* out = static_cast<uint8_t*>(dst) + g * gb;
    for_each_piece(t, rows, k,
                   [&](int64_t p, int64_t q, size_t len) { std::memcpy(out + q, in + p, len); });
  }
}

void deinterleave(DType t, int rows, const void* group, void* dst, int64_t k) {
  expect_interleaved("quant.deinterleave", t, rows, rows, k);
  const auto* in = static_cast<const uint8_t*>(group);
  auto* out = static_cast<uint8_t*>(dst);
  for_each_piece(t, rows, k,
                 [&](int64_t p, int64_t q, size_t len) { std::memcpy(out + p, in + q, len); });
}

bool tileable(DType t) { return t == DType::q8_0 || t == DType::q4_k; }

namespace {

// Calls f(plain, tiled, bytes) for every piece of each group of 16 rows (tiles16): the
// piece's offset in the rows' plain bytes and in the tiled group.
template <class F>
void for_each_tile_piece(const char* where, DType t, int64_t n, int64_t k, F&& f) {
  if (!tileable(t))
    fail<TypeError>(where, "expected a dtype with the tiles16 form (q8_0, q4_k), got ",
                    dtype_name(t));
  const int64_t blk = dtype_block(t);
  if (n < 0 || n % 16 != 0 || k < 0 || k % blk != 0)
    fail<ValueError>(where, "expected rows a multiple of 16 and k of ", blk, ", got [", n, ", ", k,
                     "]");
  const int64_t nb = k / blk, bb = int64_t(dtype_size(t)), gb = 16 * nb * bb;
  for (int64_t g = 0; g < n / 16; ++g)
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t p = g * gb + (r * nb + b) * bb, u = g * gb + b * 16 * bb;
        const int64_t pair = r % 8, half = r / 8;
        if (t == DType::q4_k) {
          f(p, u + 8 * pair + 4 * half, 4);              // d, dmin
          f(p + 4, u + 64 + 24 * pair + 12 * half, 12);  // the packed scales and mins
          for (int64_t c = 0; c < 4; ++c)                // 64-value chunks
            for (int64_t j = 0; j < 4; ++j)
              f(p + 16 + 32 * c + 8 * j, u + 256 + 512 * c + 16 * (4 * pair + j) + 8 * half, 8);
          continue;
        }
        f(p, u + 4 * pair + 2 * half, 2);
        for (int64_t j = 0; j < 4; ++j)
          f(p + 2 + 8 * j, u + 32 + 16 * (4 * pair + j) + 8 * half, 8);
      }
}

}  // namespace

void tile(DType t, const void* src, void* dst, int64_t n, int64_t k) {
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for_each_tile_piece("quant.tile", t, n, k,
                      [&](int64_t p, int64_t u, size_t len) { std::memcpy(out + u, in + p, len); });
}

void untile(DType t, const void* src, void* dst, int64_t n, int64_t k) {
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for_each_tile_piece("quant.untile", t, n, k,
                      [&](int64_t p, int64_t u, size_t len) { std::memcpy(out + p, in + u, len); });
}

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  if (n < 0 || n % kQK_K != 0)
    fail<ValueError>("quant.quantize_row_q8_k", "expected a multiple of 256 values, got ", n);
  for (int64_t nb = n / kQK_K; nb--; ++y, x += kQK_K) {
    const float max = signed_absmax(x, kQK_K);
    std::memset(y->bsums, 0, sizeof y->bsums);
    if (max == 0) {
      y->d = 0;
      std::memset(y->qs, 0, sizeof y->qs);
      continue;
    }
    // -127 (not -128) keeps every value in [-127, 127], so sign tricks in the dot
    // products cannot overflow.
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      y->qs[j] = int8_t(std::min(127, nearest(iscale * x[j])));
      y->bsums[j / 16] = int16_t(y->bsums[j / 16] + y->qs[j]);
    }
    y->d = 1 / iscale;
  }
}

}  // namespace rlx::quant
