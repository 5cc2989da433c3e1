// The many-row product of 4-bit weights (q4_0, q4_k) on AVX2: an integer GEMM.
//
// A prompt's rows meet each weight many times, so the weights are first repacked, a few
// groups of 8 rows at a time, into the form the inner loop wants (quant_dot.h, gemm4_*):
// per 32 values, the 8 rows' nibbles in 4 runs of 32 bytes (lane i = row i, as the rows8
// layout of rlx/quant.h) and the 8 rows' scales (and minimums) as f32. The activations are
// int8 in one contiguous run per row with their block scales beside. Then one tile is 8
// weight rows x up to 4 activation rows: per 32 values, 8 _mm256_maddubs_epi16 per
// activation row against 4-byte broadcasts, summed in int16 (8 * 2 * 15 * 127 < 2^15)
// and widened once, so 256 multiply-adds cost 9 multiplier instructions (the integer dots
// of quant_avx2.cpp need 16; sgemm on decoded panels 32 FMAs).
//
// The activations are rounded as the integer dots round them (ggml's rules: blocks of 32
// for q4_0, Q8_K blocks of 256 for q4_k), so every path computes the same integer products;
// only the order of the f32 sums differs.
#include <algorithm>

#include "backend/cpu/isa.h"
#include "backend/cpu/quant_simd.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace qdot {

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

namespace {

using namespace quant;

constexpr int64_t kRun = 128;  // nibble bytes of 8 rows x 32 values

// q4_0 has a zero point (x = d (u - 8)), applied in int32 through the activation sums;
// q4_k a minimum per 32 values (x = s u + m), applied in f32.
bool has_min(DType w) { return w == DType::q4_k; }

// Bytes per 32 values of a packed group: nibbles, 8 scales, 8 minimums where the type has them.
int64_t sub_bytes(DType w) { return kRun + (has_min(w) ? 64 : 32); }

// Activations: k int8, then per 32 values the f32 scale and (d x the int sum) for types
// with a minimum, or 8 x the int32 sum for q4_0's zero point.
struct Act {
  const int8_t* qs;
  const float* d;
  const void* sums;
};
inline Act act_of(const uint8_t* p, int64_t k) {
  const int64_t nb = k / kQK;
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const float*>(p + k),
          p + k + 4 * nb};
}

// The nibble runs of 8 rows for 32 values, from each row's 16 nibble bytes in q4_0's order
// (byte j: value j low, value 16 + j high): dword v of row i goes to lane i of run v, a
// transpose of two 4 x 4 dword blocks.
void put_nibbles(const __m128i* rows, uint8_t* dst) {
  __m128i t[2][4];
  for (int h = 0; h < 2; ++h) {
    const __m128i* x = rows + 4 * h;
    const __m128i a = _mm_unpacklo_epi32(x[0], x[1]), b = _mm_unpackhi_epi32(x[0], x[1]);
    const __m128i c = _mm_unpacklo_epi32(x[2], x[3]), d = _mm_unpackhi_epi32(x[2], x[3]);
    t[h][0] = _mm_unpacklo_epi64(a, c), t[h][1] = _mm_unpackhi_epi64(a, c);
    t[h][2] = _mm_unpacklo_epi64(b, d), t[h][3] = _mm_unpackhi_epi64(b, d);
  }
  for (int v = 0; v < 4; ++v)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * v),
                        _mm256_set_m128i(t[1][v], t[0][v]));
}

// The 4 bytes at p in every 32-bit lane.
inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// One tile: 8 packed weight rows against NR activation rows, out[r * 8 + i].
template <int NR, bool kMin>
void tile(const uint8_t* g, int64_t k, const uint8_t* act, size_t as, float* out) {
  const int64_t nb = k / kQK, sb = kRun + (kMin ? 64 : 32);
  const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  Act a[NR];
  for (int r = 0; r < NR; ++r) a[r] = act_of(act + r * as, k);
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, g += sb) {
    // The 8 rows' 32 values as bytes first, then one activation row at a time: one
    // int16 sum live per row, so the 8 unpacked runs, the row accumulators and the
    // broadcasts fit the 16 registers (interleaving the rows spilled: ~1.5x slower).
    __m256i w[8];
    for (int v = 0; v < 4; ++v) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32 * v));
      w[v] = _mm256_and_si256(q, m4);
      w[4 + v] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
    const __m256 scale = _mm256_loadu_ps(reinterpret_cast<const float*>(g + kRun));
    for (int r = 0; r < NR; ++r) {
      const int8_t* qa = a[r].qs + 32 * b;
      __m256i s16 = _mm256_maddubs_epi16(w[0], bcast4(qa));
      for (int v = 1; v < 4; ++v)
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[v], bcast4(qa + 4 * v)));
      for (int v = 0; v < 4; ++v)
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[4 + v], bcast4(qa + 16 + 4 * v)));
      __m256i s32 = _mm256_madd_epi16(s16, ones);
      if constexpr (kMin) {
        const __m256 mn = _mm256_loadu_ps(reinterpret_cast<const float*>(g + kRun + 32));
        acc[r] =
            _mm256_fmadd_ps(mn, _mm256_set1_ps(static_cast<const float*>(a[r].sums)[b]), acc[r]);
      } else {  // x = d (u - 8): the activation sums hold 8 Σa
        s32 = _mm256_sub_epi32(s32, _mm256_set1_epi32(static_cast<const int32_t*>(a[r].sums)[b]));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32),
                               _mm256_mul_ps(scale, _mm256_set1_ps(a[r].d[b])), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) _mm256_storeu_ps(out + 8 * r, acc[r]);
}

template <bool kMin>
void tile_rows(int nr, const uint8_t* g, int64_t k, const uint8_t* act, size_t as, float* out) {
  switch (nr) {
    case 1:
      return tile<1, kMin>(g, k, act, as, out);
    case 2:
      return tile<2, kMin>(g, k, act, as, out);
    case 3:
      return tile<3, kMin>(g, k, act, as, out);
    default:
      return tile<4, kMin>(g, k, act, as, out);
  }
}

}  // namespace

bool gemm4_supported(DType w) { return w == DType::q4_0 || w == DType::q4_k; }

size_t gemm4_act_bytes(DType, int64_t k) { return size_t(k) + size_t(k / kQK) * 8; }

void gemm4_act(DType w, const float* x, uint8_t* dst, int64_t k) {
  const int64_t nb = k / kQK;
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + k);
  if (w == DType::q4_0) {
    auto* sum = reinterpret_cast<int32_t*>(d + nb);
    BlockQ8 blk;
    for (int64_t b = 0; b < nb; ++b) {
      quantize_q8_fast(x + kQK * b, &blk, kQK);
      std::memcpy(qs + kQK * b, blk.qs, kQK);
      d[b] = blk.d, sum[b] = 8 * blk.sum;
    }
    return;
  }
  auto* ds = d + nb;  // q4_k: Q8_K blocks of 256, the sums of each 32 from bsums
  BlockQ8K blk;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    quantize_q8k_fast(x + kQK_K * b, &blk, kQK_K);
    std::memcpy(qs + kQK_K * b, blk.qs, kQK_K);
    for (int g = 0; g < 8; ++g) {
      d[8 * b + g] = blk.d;
      ds[8 * b + g] = blk.d * float(blk.bsums[2 * g] + blk.bsums[2 * g + 1]);
    }
  }
}

size_t gemm4_group_bytes(DType w, int64_t k) { return size_t(k / kQK * sub_bytes(w)); }

void gemm4_pack(DType w, int rows, const uint8_t* src, int64_t n, int64_t k, int64_t g,
                uint8_t* dst) {
  const int64_t nb = k / kQK, sb = sub_bytes(w);
  const size_t rb = dtype_nbytes(w, k);
  if (rows == 8) {  // q4_0's rows8 groups are already nibble runs: convert the scales
    const uint8_t* p = src + g * 8 * int64_t(rb);
    for (int64_t b = 0; b < nb; ++b, p += 8 * sizeof(BlockQ4_0), dst += sb) {
      std::memcpy(dst, p + 16, kRun);
      _mm256_storeu_ps(reinterpret_cast<float*>(dst + kRun),
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
    return;
  }
  const __m128i m4 = _mm_set1_epi8(15);
  __m128i nib[8];  // each row's 16 nibble bytes of one 32-value slice
  PlainRows plain(w, rows, src, k);
  for (int64_t b = 0; b < nb; ++b, dst += sb) {
    auto* scale = reinterpret_cast<float*>(dst + kRun);
    for (int i = 0; i < 8; ++i) {
      const int64_t row = 8 * g + i;
      if (row >= n) {  // past the matrix: zero rows
        nib[i] = _mm_setzero_si128();
        scale[i] = 0;
        if (has_min(w)) scale[8 + i] = 0;
        continue;
      }
      const uint8_t* rp = plain.row(row);
      if (w == DType::q4_0) {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(rp)[b];
        nib[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
        scale[i] = half(blk.d);
      } else {  // q4_k: 32-value group s of block b / 8, the low or high nibbles of 32 bytes
        const auto& blk = reinterpret_cast<const BlockQ4_K*>(rp)[b / 8];
        const int s = int(b % 8);
        const uint8_t* q = blk.qs + 32 * (s / 2);
        __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
        if (s % 2) lo = _mm_srli_epi16(lo, 4), hi = _mm_srli_epi16(hi, 4);
        nib[i] = _mm_or_si128(_mm_and_si128(lo, m4), _mm_slli_epi16(_mm_and_si128(hi, m4), 4));
        int sc, mn;
        k4_scale_min(blk.scales, s, sc, mn);
        scale[i] = half(blk.d) * float(sc);
        scale[8 + i] = -half(blk.dmin) * float(mn);
      }
    }
    put_nibbles(nib, dst);
  }
}

void gemm4_tile(DType w, const uint8_t* group, int64_t k, const uint8_t* act, size_t as, int nr,
                float* out) {
  if (has_min(w))
    tile_rows<true>(nr, group, k, act, as, out);
  else
    tile_rows<false>(nr, group, k, act, as, out);
}

#else  // no AVX2: the other paths serve

bool gemm4_supported(DType) { return false; }
size_t gemm4_act_bytes(DType, int64_t) { return 0; }
void gemm4_act(DType, const float*, uint8_t*, int64_t) {}
size_t gemm4_group_bytes(DType, int64_t) { return 0; }
void gemm4_pack(DType, int, const uint8_t*, int64_t, int64_t, int64_t, uint8_t*) {}
void gemm4_tile(DType, const uint8_t*, int64_t, const uint8_t*, size_t, int, float*) {}

#endif

}  // namespace qdot
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
