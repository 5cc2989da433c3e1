// Pieces shared by the nn kernels (nn.cpp), attention (attention.cpp) and random.cpp: a
// vectorisable exp for softmax-style loops, Philox batches, row helpers, and the attention
// registration.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/philox.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

void register_attention(KernelRegistry& r);  // attention.cpp

// Sum of f over n values in explicit vector lanes: each lane adds the same values in the
// same order whether or not the compiler vectorises (a `simd reduction` loop that a
// sanitizer build left scalar summed 12,800 f32 in one chain, 3e-6 off), and each block's
// lanes fold into f64, so f32 error stays at ~kBlock / 32 additions whatever n is.
template <class C, class F>
double lane_sum(const C* x, int64_t n, F f) {
  using V [[gnu::vector_size(32)]] = C;
  constexpr int64_t kW = int64_t(sizeof(V) / sizeof(C)), kVecs = 4, kStep = kW * kVecs;
  constexpr int64_t kBlock = 1024;
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = std::min(n, b + kBlock), i = b;
    V acc[kVecs] = {};
    for (; i + kStep <= e; i += kStep)
      for (int64_t k = 0; k < kVecs; ++k) {
        V v;
        std::memcpy(&v, x + i + k * kW, sizeof(V));
        acc[k] += f(v);
      }
    C t = 0;
    for (; i < e; ++i) t += f(x[i]);
    V s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (int64_t j = 0; j < kW; ++j) t += s[j];
    total += double(t);
  }
  return total;
}

// rms_norm's sum of squares: each square rounded to C, the sum in f64 lanes (as ggml sums
// them, so that the scale rounds to the same f32 as llama.cpp's, a condition of equal
// greedy tokens on 8-bit activations: docs/llm.md).
template <class C>
double square_sum(const C* x, int64_t n) {
  constexpr int64_t kW = 8;
  double acc[kW] = {};
  int64_t i = 0;
  for (; i + kW <= n; i += kW)
    for (int64_t j = 0; j < kW; ++j) acc[j] += double(x[i + j] * x[i + j]);
  double t = 0;
  for (; i < n; ++i) t += double(x[i] * x[i]);
  for (int64_t j = 0; j < kW; ++j) t += acc[j];
  return t;
}

// The mean (0 when not centred, as rms_norm wants) and 1 / sqrt(variance + eps) of n
// values; two passes over them (they are in cache) rather than a one-pass formula that
// cancels badly.
template <class C>
std::pair<C, C> moments(const C* x, int64_t n, C eps, bool center) {
  C mean = center ? C(lane_sum(x, n, [](auto v) { return v; }) / double(n)) : C(0);
  double ss = center ? lane_sum(x, n, [mean](auto v) { return (v - mean) * (v - mean); })
                     : square_sum(x, n);
  return {mean, C(1) / std::sqrt(C(ss / double(n)) + eps)};
}

// One f32 row through rms_norm with scale g, as the rms_norm kernel computes it (nn.cpp:
// (x * inv) * g): fused_quant_matmul's norm gives the product the same rows.
inline void rms_norm_row(const float* x, const float* g, float eps, int64_t n, float* y) {
  const float inv = moments(x, n, eps, false).second;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * g[i];
}

// Runs f(first_block, count, words) over the Philox blocks [0, nblocks) of `st` in
// parallel chunks; `words` holds the 4 * count words of those blocks in order. Making a
// batch of blocks before using them runs about 3x faster than interleaving the two.
template <class F>
void for_philox_blocks(const philox::Stream& st, int64_t nblocks, F&& f) {
  constexpr int64_t kBatch = 256, kGrain = 8192;  // 32K words per chunk
  parallel_for(nblocks, kGrain, [&](int64_t b0, int64_t b1) {
    uint32_t w[4 * kBatch];
    for (int64_t b = b0; b < b1; b += kBatch) {
      int64_t nb = std::min(kBatch, b1 - b);
      for (int64_t j = 0; j < nb; ++j) {
        philox::Block blk = st.block(uint64_t(b + j));
        std::memcpy(w + 4 * j, blk.data(), sizeof(blk));
      }
      f(b, nb, static_cast<const uint32_t*>(w));
    }
  });
}

// exp for softmax-style loops (arguments <= 0 after subtracting the row max): the
// vectorisable f32 exp of the elementwise kernels; f64 uses libm.
inline float exp_nonpos(float x) { return fm::exp(x); }
inline double exp_nonpos(double x) { return std::exp(x); }

// A row of T as compute values: the data itself when T is its own compute type, else
// widened into `buf`.
template <class T>
const compute_t<T>* as_compute(const T* x, int64_t n, std::vector<float>& buf) {
  if constexpr (is_half_v<T>) {
    if (int64_t(buf.size()) < n) buf.resize(size_t(n));
    widen(x, buf.data(), n);
    return buf.data();
  } else {
    return x;
  }
}

// max, then sum of exp(x - max), over a row; NaN anywhere makes the sum NaN.
template <class C>
C row_max(const C* x, int64_t n) {
  C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}
template <class C>
C row_sum_exp(const C* x, int64_t n, C m) {
  C s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += exp_nonpos(x[i] - m);
  return s;
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
