// Pieces shared by the nn kernels (nn.cpp), attention (attention.cpp) and random.cpp: a
// vectorisable exp for softmax-style loops, Philox batches, row helpers, and the attention
// registration.
#pragma once

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/philox.h"

namespace rlx::cpu {

void register_attention(KernelRegistry& r);  // attention.cpp

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

// exp(x) for x <= 0 (and -inf, NaN), as softmax needs it after subtracting the row max.
// glibc's expf does not vectorise without -ffast-math; this is the Cephes expf polynomial
// (about 1 ulp) written with arithmetic and selects only, so `omp simd` loops vectorise.
// Results below FLT_MIN (x < -87.3) are flushed to 0.
inline float exp_nonpos(float x) {
  constexpr float kLog2e = 1.44269504088896341f, kC1 = 0.693359375f, kC2 = -2.12194440e-4f;
  constexpr float kRound = 0x1.8p23f;  // adding it rounds to an integer held in the low bits
  float xc = std::max(x, -87.3f);      // NaN stays NaN (it is the first argument)
  float t = xc * kLog2e + kRound;
  float k = t - kRound;
  float r = xc - k * kC1 - k * kC2;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  uint32_t e = (std::bit_cast<uint32_t>(t) - 0x4b400000u + 127u) << 23;  // 2^k
  float y = p * std::bit_cast<float>(e);
  return x < -87.3f ? 0.0f : y;
}
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

}  // namespace rlx::cpu
