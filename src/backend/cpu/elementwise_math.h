// Branch-free f32 math for the elementwise kernels. libm's expf & co. are calls the
// compiler cannot vectorise (errno, no libmvec without -ffast-math), so the common
// transcendental functions are written here as straight-line code that g++ vectorises
// when inlined into a loop. Accuracy (measured over all f32 inputs by sampling):
// exp, log ~1 ulp; expm1, log1p, tanh, sigmoid a few ulp; erf a few ulp (abs. < 1e-7).
// Special values follow C: exp(-inf) = 0, log(0) = -inf, log(<0) = NaN, NaN propagates.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__AVX__)
#include <immintrin.h>

#include "backend/cpu/isa.h"
#endif

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace fm {

#define RLX_FM_INLINE inline __attribute__((always_inline))

constexpr float kInf = std::numeric_limits<float>::infinity();

RLX_FM_INLINE float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

// 2^n for integer n in [-252, 254], as two factors that are normal floats.
RLX_FM_INLINE float scale_pow2(float y, int32_t n) {
  int32_t n1 = n >> 1, n2 = n - n1;
  float s1 = std::bit_cast<float>((n1 + 127) << 23);
  float s2 = std::bit_cast<float>((n2 + 127) << 23);
  return y * s1 * s2;
}

// exp's constants: the clamp of x (e^89 overflows to inf after the scaling, e^-104 to 0),
// 1 / ln 2, ln 2 split in two (Cody-Waite: nf * kLn2Hi is exact), and the
// cephes polynomial of e^r on [-ln 2 / 2, ln 2 / 2], highest degree first.
constexpr float kExpHi = 89.f, kExpLo = -104.f;
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = -0.693359375f, kLn2Lo = 2.12194440e-4f;
constexpr float kExpPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                              4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// The lane operations exp_reduced needs, for float and (below) the vector types; `like`
// only picks the overload.
RLX_FM_INLINE float splat(float, float c) { return c; }
RLX_FM_INLINE float fmadd(float a, float b, float c) { return fma(a, b, c); }
RLX_FM_INLINE float mul(float a, float b) { return a * b; }
RLX_FM_INLINE float add(float a, float b) { return a + b; }
#if defined(__AVX512F__)
RLX_FM_INLINE __m512 splat(__m512, float c) { return _mm512_set1_ps(c); }
RLX_FM_INLINE __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
RLX_FM_INLINE __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
RLX_FM_INLINE __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
#endif
#if defined(__AVX2__) && defined(__FMA__)
RLX_FM_INLINE __m256 splat(__m256, float c) { return _mm256_set1_ps(c); }
RLX_FM_INLINE __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
RLX_FM_INLINE __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
RLX_FM_INLINE __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
#endif

// e^(x - nf ln 2) for x already clamped and nf = round(x / ln 2): the one reduction and
// polynomial that exp, exp8 and exp16 scale by 2^nf.
template <class V>
RLX_FM_INLINE V exp_reduced(V x, V nf) {
  V r = fmadd(nf, splat(x, kLn2Hi), x);
  r = fmadd(nf, splat(x, kLn2Lo), r);
  V p = splat(x, kExpPoly[0]);  // unrolled by hand: a loop here stays a loop in exp()
  p = fmadd(p, r, splat(x, kExpPoly[1]));
  p = fmadd(p, r, splat(x, kExpPoly[2]));
  p = fmadd(p, r, splat(x, kExpPoly[3]));
  p = fmadd(p, r, splat(x, kExpPoly[4]));
  p = fmadd(p, r, splat(x, kExpPoly[5]));
  return add(fmadd(p, mul(r, r), r), splat(x, 1.f));
}

// e^x = 2^n e^r with n = round(x / ln 2) and a Cody-Waite reduced r; the cephes
// polynomial for e^r. Out-of-range x saturates to inf / 0 through the scaling.
RLX_FM_INLINE float exp(float x) {
  float xc = x > kExpHi ? kExpHi : (x < kExpLo ? kExpLo : x);  // NaN stays NaN
  constexpr float kShift = 12582912.f;                         // 1.5 * 2^23: rounds to int
  float t = xc * kLog2e + kShift;
  int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShift);
  return scale_pow2(exp_reduced(xc, t - kShift), n);
}

#if defined(__AVX512F__)
// e^v on 16 lanes: the reduction and polynomial of exp() with roundscale for n and scalef
// for the 2^n scaling (one instruction each, overflow and subnormal results included).
RLX_FM_INLINE __m512 exp16(__m512 v) {
  const __m512 hi = _mm512_set1_ps(kExpHi), lo = _mm512_set1_ps(kExpLo);
  // Clamp with ordered compares, so NaN lanes keep v (NaN propagates).
  v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), v, hi);
  v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), v, lo);
  // The masked forms (all lanes on) avoid g++ 12's -Wmaybe-uninitialized false positive
  // on the unmasked intrinsics' undefined pass-through operand.
  const __m512 zero = _mm512_setzero_ps();
  __m512 nf = _mm512_mask_roundscale_ps(zero, 0xffff, _mm512_mul_ps(v, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_mask_scalef_ps(zero, 0xffff, exp_reduced(v, nf), nf);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
// e^v on 8 lanes (the AVX2 loops, and kernels working on 8 lanes anyway): exp()'s reduction and
// polynomial; 2^n as two factors built in the exponent field, as scale_pow2 does (n in [-150, 129]
// after the clamp).
RLX_FM_INLINE __m256 exp8(__m256 v) {
  const __m256 hi = _mm256_set1_ps(kExpHi), lo = _mm256_set1_ps(kExpLo);
  // Ordered compares: NaN lanes keep v (NaN propagates).
  v = _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
  v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
  __m256 nf = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(kLog2e)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 e = exp_reduced(v, nf);
  __m256i n = _mm256_cvtps_epi32(nf);  // NaN lanes: an integer whose scaling keeps NaN
  __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
}
#endif

// exp over n contiguous values. With AVX-512, exp16 runs 16 lanes at a time, which is
// what keeps exp at the memory bandwidth rather than compute-bound on a few cores; the
// tail uses exp() above.
inline void exp_n(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
#elif defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = exp(x[i]);
}

// log x = e ln 2 + log m with m in [sqrt(1/2), sqrt(2)); the cephes polynomial for
// log(1 + f). Subnormal x is scaled by 2^23 first.
RLX_FM_INLINE float log(float x) {
  // Operands of selects are computed unconditionally: g++ will not if-convert (so not
  // vectorise) a select over an expression that may trap under -ftrapping-math.
  float scaled = x * 8388608.f;
  bool sub = x < 1.17549435e-38f;
  int32_t bits = std::bit_cast<int32_t>(sub ? scaled : x);
  int32_t e = ((bits >> 23) & 0xff) - 126 - (sub ? 23 : 0);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  bool low = m < 0.707106781186547524f;
  float m2 = m + m - 1.f, m1 = m - 1.f;
  float f = low ? m2 : m1;
  float ef = float(e - (low ? 1 : 0));
  float z = f * f;
  float p = 7.0376836292e-2f;
  p = fma(p, f, -1.1514610310e-1f);
  p = fma(p, f, 1.1676998740e-1f);
  p = fma(p, f, -1.2420140846e-1f);
  p = fma(p, f, 1.4249322787e-1f);
  p = fma(p, f, -1.6668057665e-1f);
  p = fma(p, f, 2.0000714765e-1f);
  p = fma(p, f, -2.4999993993e-1f);
  p = fma(p, f, 3.3333331174e-1f);
  float y = p * f * z;
  y = fma(ef, -2.12194440e-4f, y);
  y = fma(z, -0.5f, y);
  float r = f + y;
  r = fma(ef, 0.693359375f, r);
  // Special values as an added term, not a select on r: a select lets g++ sink the
  // polynomial into a branch, which stops vectorisation.
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  float zero = x == 0.f ? -kInf : 0.f;
  float inf = x == kInf ? kInf : 0.f;
  float nan = x >= 0.f ? 0.f : kNaN;  // x < 0 or NaN
  return r + zero + inf + nan;
}

// Taylor series near 0 (where e^x - 1 cancels), e^x - 1 elsewhere.
RLX_FM_INLINE float expm1(float x) {
  float p = 1.f / 40320.f;
  p = fma(p, x, 1.f / 5040.f);
  p = fma(p, x, 1.f / 720.f);
  p = fma(p, x, 1.f / 120.f);
  p = fma(p, x, 1.f / 24.f);
  p = fma(p, x, 1.f / 6.f);
  p = fma(p, x, 0.5f);
  float small = fma(p * x, x, x);
  float r = std::fabs(x) < 0.5f ? small : exp(x) - 1.f;
  return std::copysign(r, x);  // keeps -0
}

// log(u) * x / (u - 1) with u = 1 + x corrects the rounding of 1 + x (Goldberg); where
// u rounds to 1, log(u) = 0 and the added term gives x. The result has the sign of x.
RLX_FM_INLINE float log1p(float x) {
  float u = 1.f + x;
  float d = u - 1.f;
  float xd = x / d;  // unconditionally: see log
  float q = d == 0.f || u == kInf ? 1.f : xd;
  float r = fma(log(u), q, d == 0.f ? x : 0.f);
  return std::copysign(r, x);
}

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (keeps tiny results for x << 0).
RLX_FM_INLINE float sigmoid(float x) {
  float e = exp(-std::fabs(x));
  float r = 1.f / (1.f + e);
  return x < 0.f ? e * r : r;
}

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
// sigmoid on 8 lanes: e = exp(-|v|), 1 / (1 + e) by division (AVX2 has no exact rcp),
// e / (1 + e) where v < 0.
RLX_FM_INLINE __m256 sigmoid8(__m256 v) {
  const __m256 one = _mm256_set1_ps(1.f);
  __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.f), v);
  __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), a));
  __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, e));
  __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(r, _mm256_mul_ps(e, r), neg);
}
#endif

// sigmoid over n contiguous values. With AVX-512: exp16, and 1 / (1 + e) as rcp14 and
// one Newton step (d is in [1, 2], so the step keeps full f32 accuracy) instead of a
// division, whose throughput would bound the whole loop.
inline void sigmoid_n(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f), two = _mm512_set1_ps(2.f);
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512 e = exp16(_mm512_sub_ps(zero, _mm512_abs_ps(v)));
    __m512 d = _mm512_add_ps(one, e);
    __m512 r = _mm512_maskz_rcp14_ps(0xffff, d);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, two));
    __mmask16 neg = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
    _mm512_storeu_ps(y + i, _mm512_mask_mul_ps(r, neg, e, r));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, sigmoid8(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = sigmoid(x[i]);
}

// x * sigmoid(x) over n contiguous values; -inf gives -0 (the limit; the product would
// be NaN), NaN propagates.
inline void silu_n(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
  const __m256 ninf = _mm256_set1_ps(-kInf), nzero = _mm256_set1_ps(-0.f);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 s = _mm256_mul_ps(v, sigmoid8(v));
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(s, nzero, _mm256_cmp_ps(v, ninf, _CMP_EQ_OQ)));
  }
#endif
  for (; i < n; ++i) y[i] = x[i] == -kInf ? -0.f : x[i] * sigmoid(x[i]);
}

// cephes tanhf: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above.
RLX_FM_INLINE float tanh(float x) {
  float a = std::fabs(x);
  float s = x * x;
  float p = -5.70498872745e-3f;
  p = fma(p, s, 2.06390887954e-2f);
  p = fma(p, s, -5.37397155531e-2f);
  p = fma(p, s, 1.33314422036e-1f);
  p = fma(p, s, -3.33332819422e-1f);
  float small = fma(p * s, x, x);
  float big = std::copysign(1.f - 2.f / (exp(a + a) + 1.f), x);
  return a < 0.625f ? small : big;
}

// The rational approximation of Eigen / XLA on [-4, 4] (erf(4) rounds to 1 in f32): its
// numerator and denominator in c^2, highest degree first (region_jit.cpp reads them too).
constexpr float kErfP[] = {-2.72614225801306e-10f, 2.77068142495902e-08f,  -2.10102402082508e-06f,
                           -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                           -1.60960333262415e-02f};
constexpr float kErfQ[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                           -7.37332916720468e-03f, -1.42647390514189e-02f};
RLX_FM_INLINE float erf(float x) {
  float c = x > 4.f ? 4.f : (x < -4.f ? -4.f : x);
  float s = c * c;
  float p = kErfP[0];  // unrolled by hand, as exp_reduced
  p = fma(p, s, kErfP[1]);
  p = fma(p, s, kErfP[2]);
  p = fma(p, s, kErfP[3]);
  p = fma(p, s, kErfP[4]);
  p = fma(p, s, kErfP[5]);
  p = fma(p, s, kErfP[6]);
  float q = kErfQ[0];
  q = fma(q, s, kErfQ[1]);
  q = fma(q, s, kErfQ[2]);
  q = fma(q, s, kErfQ[3]);
  q = fma(q, s, kErfQ[4]);
  float r = c * (p / q);
  return r > 1.f ? 1.f : (r < -1.f ? -1.f : r);
}

// Rounding toward -inf / +inf through nearbyint, which g++ vectorises (floor and ceil it
// does not, with the default -ftrapping-math). Exact: |x| >= 2^23 is already integral.
template <class C>
RLX_FM_INLINE C floor(C x) {
  C r = std::nearbyint(x);
  return r > x ? r - C(1) : r;
}
template <class C>
RLX_FM_INLINE C ceil(C x) {
  C r = std::nearbyint(x);
  return r < x ? r + C(1) : r;
}

// sqrt (or 1 / sqrt) of n contiguous values. std::sqrt keeps a branch that sets errno for
// x < 0, which stops g++ from vectorising it (this file is not built with
// -fno-math-errno), so the vector instruction is used directly; both round correctly.
template <class C>
inline void sqrt_n(const C* x, C* y, int64_t n, bool recip) {
  int64_t i = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<C, float>) {
    const __m256 one = _mm256_set1_ps(1.f);
    for (; i + 8 <= n; i += 8) {
      __m256 r = _mm256_sqrt_ps(_mm256_loadu_ps(x + i));
      _mm256_storeu_ps(y + i, recip ? _mm256_div_ps(one, r) : r);
    }
  } else {
    const __m256d one = _mm256_set1_pd(1.0);
    for (; i + 4 <= n; i += 4) {
      __m256d r = _mm256_sqrt_pd(_mm256_loadu_pd(x + i));
      _mm256_storeu_pd(y + i, recip ? _mm256_div_pd(one, r) : r);
    }
  }
#endif
  for (; i < n; ++i) y[i] = recip ? C(1) / std::sqrt(x[i]) : std::sqrt(x[i]);
}

#undef RLX_FM_INLINE

}  // namespace fm
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
