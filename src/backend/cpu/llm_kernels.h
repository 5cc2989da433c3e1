// The LLM family's CPU kernels, one file each: rope and kv_cache_write (llm.cpp),
// attention_cached (llm_attention.cpp), sample (llm_sample.cpp); swiglu's row, which
// fused_quant_matmul (quant.cpp) applies too.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/isa.h"

// g++ 12's AVX-512 headers hand some intrinsics an undefined operand on purpose and warn
// where they inline (GCC bug 105593, fixed in 13): in the files of these kernels the warnings
// name no value of ours.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

void register_attention_cached(KernelRegistry& r);  // llm_attention.cpp
void register_sample(KernelRegistry& r);            // llm_sample.cpp
// attention_cached's kernel (llm_attention.cpp), which rope_attention_cached's runs too.
void attention_cached_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                             std::span<Tensor> out);

// llama.cpp's own e^x (ggml-cpu's vectorised expf: a degree-5 polynomial after a
// round-to-nearest reduction by ln 2), in the form its AVX-512 and its AVX2 builds take.
// SwiGLU and the attention softmax use it instead of fm::exp: with quantized weights
// each activation is rounded to int8 next, and one ulp apart can round it the other way,
// which a random-weight model then amplifies until greedy tokens part from llama.cpp's.
namespace gx {
#if defined(__AVX512F__)
constexpr int kLanes = 16;
using V = __m512;
inline V load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V set1(float c) { return _mm512_set1_ps(c); }
// The first n < 16 of p, the rest -inf (e^-inf = 0: the masked keys of ggml's rows).
inline V load_part(const float* p, int n) {
  return _mm512_mask_loadu_ps(set1(-std::numeric_limits<float>::infinity()),
                              __mmask16((1u << n) - 1), p);
}
inline void store_part(float* p, V v, int n) {
  _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v);
}
inline float sum(V v) { return _mm512_reduce_add_ps(v); }  // halves, then quarters, ...
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V div(V a, V b) { return _mm512_div_ps(a, b); }
inline V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
using V = __m256;
inline V load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V set1(float c) { return _mm256_set1_ps(c); }
inline __m256i first(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline V load_part(const float* p, int n) {
  const __m256i m = first(n);
  return _mm256_blendv_ps(set1(-std::numeric_limits<float>::infinity()), _mm256_maskload_ps(p, m),
                          _mm256_castsi256_ps(m));
}
inline void store_part(float* p, V v, int n) { _mm256_maskstore_ps(p, first(n), v); }
inline float sum(V v) {  // halves, then quarters, then the last pair
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V div(V a, V b) { return _mm256_div_ps(a, b); }
inline V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
#else
constexpr int kLanes = 0;  // ggml's scalar paths: libm's expf
#endif

#if defined(__AVX2__) && defined(__FMA__)
using fm::add;  // elementwise_math.h's lane operations, for V as for the other kernels
using fm::fmadd;
using fm::mul;

// x = n ln 2 + b (n rounded to nearest by adding 1.5 * 2^23: z holds n in its low bits), u = b^2
// and the polynomial's part both forms share, p = (c5 b + c4) u + (c3 b + c2).
struct Reduced {
  V z, n, b, u, p;
};
inline Reduced reduce(V x) {
  const V r = set1(0x1.8p23f), z = fmadd(x, set1(0x1.715476p+0f), r), n = sub(z, r);
  const V b = fnmadd(n, set1(0x1.7f7d1cp-20f), fnmadd(n, set1(0x1.62e4p-1f), x)), u = mul(b, b);
  return {z, n, b, u,
          fmadd(fmadd(set1(0x1.0e4020p-7f), b, set1(0x1.573e2ep-5f)), u,
                fmadd(set1(0x1.555e66p-3f), b, set1(0x1.fffdb6p-2f)))};
}

inline V exp(V x) {
  const Reduced e = reduce(x);
#if defined(__AVX512F__)
  // j = p u + (c1 b + 1), scaled by 2^n exactly; beyond |n| = 192 the limit (inf or 0).
  const V j = fmadd(e.p, e.u, fmadd(set1(0x1.ffffecp-1f), e.b, set1(1.f)));
  const V res = _mm512_scalef_ps(j, e.n);
  const __mmask16 far = _mm512_cmp_ps_mask(_mm512_abs_ps(e.n), set1(192.f), _CMP_GT_OQ);
  if (!far) return res;
  const V inf_or_zero =
      _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e.n, _mm512_setzero_ps(), _CMP_LE_OQ),
                           set1(std::numeric_limits<float>::infinity()), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(far, res, inf_or_zero);
#else
  // j = p u + c1 b, then k + k j with k = 2^n from n's bits; beyond |n| = 126 2^n in two
  // factors, beyond 192 the limit (inf or 0).
  const V j = fmadd(e.p, e.u, mul(set1(0x1.ffffecp-1f), e.b));
  const __m256i bits = _mm256_slli_epi32(_mm256_castps_si256(e.z), 23);
  const V k = _mm256_castsi256_ps(_mm256_add_epi32(bits, _mm256_castps_si256(set1(1.f))));
  const V an = _mm256_andnot_ps(set1(-0.f), e.n);
  const V c = _mm256_cmp_ps(an, set1(126.f), _CMP_GT_OQ);
  if (!_mm256_movemask_ps(c)) return fmadd(j, k, k);
  const __m256i g =
      _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(e.n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                       _mm256_set1_epi32(int(0x82000000u)));
  const V s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const V s2 = _mm256_castsi256_ps(_mm256_sub_epi32(bits, g));
  const V d = _mm256_cmp_ps(an, set1(192.f), _CMP_GT_OQ);
  const V scaled = _mm256_blendv_ps(fmadd(k, j, k), mul(fmadd(s2, j, s2), s1), c);
  return _mm256_blendv_ps(scaled, mul(s1, s1), d);
#endif
}

// x / (1 + e^-x), a true division (ggml_v_silu).
inline V silu(V x) { return div(x, add(set1(1.f), exp(sub(set1(0.f), x)))); }
#endif
}  // namespace gx

// swiglu of one row: y[i] = silu(a[i]) * a[f + i] for the row's halves a[0, f), a[f, 2f)
// (the swiglu kernel, llm.cpp, and fused_quant_matmul's, quant.cpp), rounded as
// ggml_vec_swiglu_f32: whole vectors through gx::silu, the tail through libm's expf.
inline void swiglu_row(const float* a, float* y, int64_t f) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; i + gx::kLanes <= f; i += gx::kLanes)
    gx::store(y + i, gx::mul(gx::silu(gx::load(a + i)), gx::load(a + f + i)));
#endif
  for (; i < f; ++i) y[i] = a[i] / (1.f + std::exp(-a[i])) * a[f + i];
}

// x[i] = e^(x[i] - m) over n floats as ggml_vec_soft_max_f32 forms them on a row whose
// masked tail is -inf: whole vectors of gx::exp, each vector's sum in float, those added
// in double. Returns the double sum.
inline double softmax_exp(float* x, int64_t n, float m) {
  double total = 0;
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const gx::V vm = gx::set1(m);
  for (; i + gx::kLanes <= n; i += gx::kLanes) {
    const gx::V e = gx::exp(gx::load(x + i) - vm);
    gx::store(x + i, e);
    total += double(gx::sum(e));
  }
  if (i < n) {
    const int r = int(n - i);
    const gx::V e = gx::exp(gx::load_part(x + i, r) - vm);
    gx::store_part(x + i, e, r);
    total += double(gx::sum(e));
    i = n;
  }
#endif
  for (; i < n; ++i) total += double(x[i] = std::exp(x[i] - m));
  return total;
}

// The B positions of an i32 / i64 tensor, checked so that pos[b] + rows <= limit; the
// error names the op, the offending entry, S and C.
inline void read_positions(const char* op, const Tensor& pos, int64_t rows, int64_t limit,
                           std::vector<int64_t>& out) {
  out.resize(size_t(pos.numel()));
  visit_int(pos.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = pos.data_as<I>();
    for (size_t b = 0; b < out.size(); ++b) out[b] = int64_t(p[b]);
  });
  for (size_t b = 0; b < out.size(); ++b)
    if (out[b] < 0 || out[b] > limit - rows)
      fail<ValueError>(op, "expected 0 <= pos[b] and pos[b] + S <= C = ", limit, ", got pos[", b,
                       "] = ", out[b], " with S = ", rows);
}

// The largest of n floats (-inf for none; NaN is skipped: it reaches the sum instead).
inline float max_of(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
#if defined(__AVX2__)
  __m256 v = _mm256_set1_ps(m);
  for (; i + 8 <= n; i += 8) v = _mm256_max_ps(_mm256_loadu_ps(x + i), v);
  float lanes[8];
  _mm256_storeu_ps(lanes, v);
  for (float l : lanes) m = l > m ? l : m;
#endif
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// x[i] = e^(x[i] - m) over n floats; returns their sum.
inline float exp_shifted(float* x, int64_t n, float m) {
  float sum = 0;
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 e = fm::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  for (float l : lanes) sum += l;
#endif
  for (; i < n; ++i) sum += x[i] = fm::exp(x[i] - m);
  return sum;
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
