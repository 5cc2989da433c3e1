// The LLM family's CPU kernels, one file each: rope and kv_cache_write (llm.cpp),
// attention_cached (llm_attention.cpp), sample (llm_sample.cpp); swiglu's row, which
// fused_quant_matmul (quant.cpp) applies too.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_math.h"

namespace rlx::cpu {

void register_attention_cached(KernelRegistry& r);  // llm_attention.cpp
void register_sample(KernelRegistry& r);            // llm_sample.cpp
// attention_cached's kernel (llm_attention.cpp), which rope_attention_cached's runs too.
void attention_cached_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                             std::span<Tensor> out);

// swiglu of one row: y[i] = silu(a[i]) * a[f + i] for the row's halves a[0, f), a[f, 2f)
// (the swiglu kernel, llm.cpp, and fused_quant_matmul's, quant.cpp).
inline void swiglu_row(const float* a, float* y, int64_t f) {
  fm::silu_n(a, y, f);
  for (int64_t i = 0; i < f; ++i) y[i] *= a[f + i];
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

}  // namespace rlx::cpu
