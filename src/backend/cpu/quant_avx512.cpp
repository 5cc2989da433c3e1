// AVX-512 VNNI dots, used where the build targets AVX-512 VNNI: rows16 weights (q4_0, q8_0,
// q4_k; the loader's form there, further down), rows8 weights (q4_0, q8_0) and plain q4_k rows
// (dot_fn), all behind quant_dot.h's dot_groups / dot_fn. The AVX2 rows8 kernels
// (quant_avx2.cpp) meet one block of a group's 8 rows per step in 256-bit lanes; here two
// consecutive blocks share each 512-bit register (rows 0-7 of block b in the low half,
// of block b + 1 in the high one), which halves the vector instructions per weight byte
// (bench/RESULTS.md, decode on the Xeon).
//
// The activations come expanded per pair of blocks (Rows8Pair): each 4-byte run broadcast
// to its block's half, the 8 Σa and the scales likewise, so the products take them as
// memory operands. An odd last block pairs with a zero block whose weights are the last
// block's own (its products are zero: zero runs, sums and scales).
//
// GCC 12's AVX-512 intrinsics seed their results with self-initialised "undefined"
// registers, which its flow analysis reports once inlined here (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/isa.h"
#include "backend/cpu/quant_simd.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace qdot {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__F16C__)

namespace {

using namespace quant;

struct Rows8Pair {
  int8_t run[8][64];  // run v: bytes 4v .. 4v + 3 of block b's qs in lanes 0-7, b + 1's in 8-15
  int32_t sum8[16];   // 8 Σqs of each block
  float d[16];        // each block's scale
};

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
// 32 bytes at p in the low half, 32 at q in the high one.
inline __m512i load_pair(const uint8_t* p, const uint8_t* q) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p)), load256(q), 1);
}
// The 8 f16 scales of the group at p (low half) and at q (high half), widened.
inline __m512 scales(const uint8_t* p, const uint8_t* q) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// Decode streams every weight from memory once: each pair of groups prefetches 2 KiB past
// what it reads (the distance quant_avx2.cpp measured), a line per 64 bytes.
template <size_t Bytes>
inline void prefetch_ahead(const uint8_t* p) {
  for (size_t o = 0; o < Bytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p) + 2048 + o, _MM_HINT_T0);
}

// The 8 row sums, low half + high half.
inline __m256 fold(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v),
                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// One pair of blocks of a q4_0 group (g: block b's 8 rows, g2: block b + 1's) against nr
// activation pairs: the -8 of every value joins as -8 Σa on the low nibbles' chain.
template <int NR>
struct Q4 {
  static constexpr size_t kGroup = 8 * sizeof(BlockQ4_0);
  static void step(const uint8_t* g, const uint8_t* g2, const Rows8Pair* const* a, __m512* acc) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512 d = scales(g, g2);
    __m512i lo[4], hi[4];  // hi: 16 times the high nibbles (no shift per byte)
    for (int v = 0; v < 4; ++v) {
      const __m512i q = load_pair(g + 16 + 32 * v, g2 + 16 + 32 * v);
      lo[v] = _mm512_and_si512(q, m4);
      hi[v] = _mm512_andnot_si512(m4, q);
    }
    for (int r = 0; r < NR; ++r) {
      __m512i s_lo = _mm512_sub_epi32(_mm512_setzero_si512(), load512(a[r]->sum8)),
              s_hi = _mm512_setzero_si512();
      for (int v = 0; v < 4; ++v) {
        s_lo = _mm512_dpbusd_epi32(s_lo, lo[v], load512(a[r]->run[v]));
        s_hi = _mm512_dpbusd_epi32(s_hi, hi[v], load512(a[r]->run[4 + v]));
      }
      // s_hi is a multiple of 16 (each u8 at most 240: 4 products of 240 * 127 per lane).
      acc[r] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s_lo, _mm512_srai_epi32(s_hi, 4))),
                          _mm512_mul_ps(d, _mm512_loadu_ps(a[r]->d)), acc[r]);
    }
  }
};

// q8_0: signed weight bytes enter biased (w ^ 0x80 = w + 128) and 128 Σa comes off.
template <int NR>
struct Q8 {
  static constexpr size_t kGroup = 8 * sizeof(BlockQ8_0);
  static void step(const uint8_t* g, const uint8_t* g2, const Rows8Pair* const* a, __m512* acc) {
    const __m512i bias = _mm512_set1_epi8(char(0x80));
    const __m512 d = scales(g, g2);
    __m512i w[8];
    for (int v = 0; v < 8; ++v)
      w[v] = _mm512_xor_si512(load_pair(g + 16 + 32 * v, g2 + 16 + 32 * v), bias);
    for (int r = 0; r < NR; ++r) {
      // sum8 holds 8 Σa: 16 times that is the bias's 128 Σa.
      __m512i s0 = _mm512_sub_epi32(_mm512_setzero_si512(),
                                    _mm512_slli_epi32(load512(a[r]->sum8), 4)),
              s1 = _mm512_setzero_si512();
      for (int v = 0; v < 8; v += 2) {
        s0 = _mm512_dpbusd_epi32(s0, w[v], load512(a[r]->run[v]));
        s1 = _mm512_dpbusd_epi32(s1, w[v + 1], load512(a[r]->run[v + 1]));
      }
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                               _mm512_mul_ps(d, _mm512_loadu_ps(a[r]->d)), acc[r]);
    }
  }
};

template <template <int> class K, int NR>
void dot(const uint8_t* g, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  constexpr size_t G = K<NR>::kGroup;
  const int64_t nb = k / kQK;
  __m512 acc[NR];
  const Rows8Pair* a[NR];
  for (int r = 0; r < NR; ++r) {
    acc[r] = _mm512_setzero_ps();
    a[r] = reinterpret_cast<const Rows8Pair*>(act + r * as);
  }
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, g += 2 * G) {
    prefetch_ahead<2 * G>(g);
    K<NR>::step(g, g + G, a, acc);
    for (int r = 0; r < NR; ++r) ++a[r];
  }
  if (b < nb) K<NR>::step(g, g, a, acc);
  for (int r = 0; r < NR; ++r) _mm256_storeu_ps(out + r * os, fold(acc[r]));
}

// ---- rows16: 16 rows a group, their scales apart (rlx/quant.h) ---------------------------
// A 64-byte load holds one run of the 16 rows, so the activations need no expanding: each
// product takes its 4 activation bytes as an embedded broadcast of the plain BlockQ8 row,
// and the 16 scales convert in one instruction straight from memory. Every weight load is
// of whole cache lines (rows8's pairs of 32-byte halves cost an insert each and straddle
// lines), which streams closer to the read bandwidth (bench/RESULTS.md, "rows16").
inline __m512i bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// q4_0: one block of the group against NR activation blocks, the -8 of every value as
// -8 Σa on the low nibbles' chain; q8_0: the weights biased to unsigned (w ^ 0x80 = w + 128)
// and 128 Σa off.
template <bool kQ4, int NR>
inline void step16(const uint8_t* scale, const uint8_t* runs, const BlockQ8* const* a, int64_t b,
                   __m512* acc) {
  const __m512 d = _mm512_cvtph_ps(load256(scale));
  __m512i w[8];  // q4_0: the low nibbles of its 4 runs, then the high ones; q8_0: its 8 runs
  if constexpr (kQ4) {
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int v = 0; v < 4; ++v) {
      const __m512i q = load512(runs + 64 * v);
      w[v] = _mm512_and_si512(q, m4);
      w[4 + v] = _mm512_andnot_si512(m4, q);  // 16 times the high nibbles
    }
  } else {
    const __m512i bias = _mm512_set1_epi8(char(0x80));
    for (int v = 0; v < 8; ++v) w[v] = _mm512_xor_si512(load512(runs + 64 * v), bias);
  }
  for (int r = 0; r < NR; ++r) {
    const BlockQ8& x = a[r][b];
    __m512i s0 = _mm512_set1_epi32((kQ4 ? -8 : -128) * x.sum), s1 = _mm512_setzero_si512();
    for (int v = 0; v < 4; ++v) {
      if constexpr (kQ4) {
        s0 = _mm512_dpbusd_epi32(s0, w[v], bcast(x.qs + 4 * v));
        s1 = _mm512_dpbusd_epi32(s1, w[4 + v], bcast(x.qs + 16 + 4 * v));
      } else {
        s0 = _mm512_dpbusd_epi32(s0, w[2 * v], bcast(x.qs + 8 * v));
        s1 = _mm512_dpbusd_epi32(s1, w[2 * v + 1], bcast(x.qs + 8 * v + 4));
      }
    }
    // q4_0's s1 is a multiple of 16 (each u8 at most 240: 4 products of 240 * 127 per lane).
    const __m512i s = _mm512_add_epi32(s0, kQ4 ? _mm512_srai_epi32(s1, 4) : s1);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(x.d)), acc[r]);
  }
}

template <bool kQ4, int NR>
void dot16(const uint8_t* g, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  constexpr int64_t kBlock = 16 * (kQ4 ? 16 : 32);  // a block's runs
  const int64_t nb = k / kQK;
  const uint8_t* runs = g + 32 * nb;
  __m512 acc[NR];
  const BlockQ8* a[NR];
  for (int r = 0; r < NR; ++r) {
    acc[r] = _mm512_setzero_ps();
    a[r] = reinterpret_cast<const BlockQ8*>(act + r * as);
  }
  for (int64_t b = 0; b < nb; ++b, runs += kBlock) {
    prefetch_ahead<kBlock>(runs);
    if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(g + 32 * b + 512), _MM_HINT_T0);
    step16<kQ4, NR>(g + 32 * b, runs, a, b, acc);
  }
  for (int r = 0; r < NR; ++r) _mm512_storeu_ps(out + r * os, acc[r]);
}

// q4_0 decode: one activation row against four groups side by side, block by block. Four
// streams of the matrix in flight per thread instead of one (as llama.cpp's AMX backend
// reads its tiles of 16 rows) decode faster than dot16 group after group, though a
// stand-alone stream reads no faster (bench/RESULTS.md, "rows16"). Each group's sums run in
// step16's order (the same products); step16's q4_0 arithmetic is written out here with the
// activation broadcasts hoisted out of the groups: calling step16 per group, or both
// through shared helpers, decoded slower.
constexpr int kSideBySide = 4;

void dot16_q4_side(const uint8_t* g0, size_t gbytes, const BlockQ8* a, int64_t k, float* out) {
  constexpr int64_t kBlock = 16 * 16;  // a block's runs
  const int64_t nb = k / kQK;
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512 acc[kSideBySide];
  for (int i = 0; i < kSideBySide; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8& x = a[b];
    __m512i lo[4], hi[4];  // the activation bytes each run's low and high nibbles meet
    for (int v = 0; v < 4; ++v) lo[v] = bcast(x.qs + 4 * v), hi[v] = bcast(x.qs + 16 + 4 * v);
    const __m512i bias = _mm512_set1_epi32(-8 * x.sum);
    const __m512 xd = _mm512_set1_ps(x.d);
    for (int i = 0; i < kSideBySide; ++i) {
      const uint8_t* g = g0 + i * gbytes;
      const uint8_t* runs = g + 32 * nb + b * kBlock;
      prefetch_ahead<kBlock>(runs);
      if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(g + 32 * b + 512), _MM_HINT_T0);
      __m512i s0 = bias, s1 = _mm512_setzero_si512();
      for (int v = 0; v < 4; ++v) {
        const __m512i q = load512(runs + 64 * v);
        s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(q, m4), lo[v]);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_andnot_si512(m4, q), hi[v]);
      }
      const __m512i sum = _mm512_add_epi32(s0, _mm512_srai_epi32(s1, 4));
      const __m512 d = _mm512_cvtph_ps(load256(g + 32 * b));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, xd), acc[i]);
    }
  }
  for (int i = 0; i < kSideBySide; ++i) _mm512_storeu_ps(out + 16 * i, acc[i]);
}

// q4_k in rows16: a block of the 16 rows (2304 bytes, rlx/quant.h) is their d and dmin, the
// three words of packed scales (each lane a row: k4_scale_words on 16 rows at once), then 32
// runs of nibbles; chunk c (runs 8c .. 8c + 7) holds groups 2c (low nibbles) and 2c + 1 (high,
// kept as 16 x value). Each group's int32 sums meet their 6-bit scales in integers (at most
// 2^25 a block), the mins meet the activations' sums of 32 the same way, and the block ends in
// two f32 products: about a fifth of the row-at-a-time dot's instructions per weight.
template <int NR>
void dot16_q4k(const uint8_t* g, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  constexpr int64_t kUnit = 16 * int64_t(sizeof(BlockQ4_K));
  const int64_t nb = k / kQK_K;
  const __m512i m4 = _mm512_set1_epi8(15), m6 = _mm512_set1_epi8(0x3f), m2 = _mm512_set1_epi8(3),
                byte = _mm512_set1_epi32(0xff);
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, g += kUnit) {
    prefetch_ahead<kUnit>(g);
    const __m512 d = _mm512_cvtph_ps(load256(g)), dmin = _mm512_cvtph_ps(load256(g + 32));
    const __m512i w0 = load512(g + 64), w1 = load512(g + 128), w2 = load512(g + 192);
    // Per lane the scales of groups 0-3 and 4-7, and the mins likewise, a byte each.
    const __m512i hi0 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), m2), 4),
                  hi1 = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), m2), 4);
    const __m512i sc[2] = {_mm512_and_si512(w0, m6),
                           _mm512_or_si512(_mm512_and_si512(w2, m4), hi0)};
    const __m512i mn[2] = {_mm512_and_si512(w1, m6),
                           _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), m4), hi1)};
    auto group_byte = [&](const __m512i(&v)[2], int grp) {
      return _mm512_and_si512(_mm512_srli_epi32(v[grp / 4], 8 * (grp % 4)), byte);
    };
    __m512i isum[NR], msum[NR];
    for (int r = 0; r < NR; ++r) isum[r] = msum[r] = _mm512_setzero_si512();
    const uint8_t* runs = g + 256;
    for (int c = 0; c < 4; ++c) {
      __m512i lo[8], hi[8];
      for (int v = 0; v < 8; ++v) {
        const __m512i q = load512(runs + 64 * (8 * c + v));
        lo[v] = _mm512_and_si512(q, m4);
        hi[v] = _mm512_andnot_si512(m4, q);
      }
      const __m512i s_lo = group_byte(sc, 2 * c), s_hi = group_byte(sc, 2 * c + 1);
      for (int r = 0; r < NR; ++r) {
        const BlockQ8K& a = reinterpret_cast<const BlockQ8K*>(act + r * as)[b];
        __m512i t0 = _mm512_setzero_si512(), t1 = _mm512_setzero_si512();
        for (int v = 0; v < 8; ++v) {
          t0 = _mm512_dpbusd_epi32(t0, lo[v], bcast(a.qs + 64 * c + 4 * v));
          t1 = _mm512_dpbusd_epi32(t1, hi[v], bcast(a.qs + 64 * c + 32 + 4 * v));
        }
        isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(t0, s_lo));
        isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(_mm512_srai_epi32(t1, 4), s_hi));
      }
    }
    for (int r = 0; r < NR; ++r) {
      const BlockQ8K& a = reinterpret_cast<const BlockQ8K*>(act + r * as)[b];
      for (int grp = 0; grp < 8; ++grp)
        msum[r] = _mm512_add_epi32(
            msum[r],
            _mm512_mullo_epi32(group_byte(mn, grp),
                               _mm512_set1_epi32(a.bsums[2 * grp] + a.bsums[2 * grp + 1])));
      const __m512 ad = _mm512_set1_ps(a.d);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(d, ad), acc[r]);
      acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[r]), _mm512_mul_ps(dmin, ad), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) _mm512_storeu_ps(out + r * os, acc[r]);
}

// ---- q4_k, one row at a time (plain layout) ----------------------------------------------
// A 64-byte load holds two of a block's four 32-byte runs: low nibbles = groups 4c and 4c + 2,
// high nibbles (kept as 16 x value: no shift) = 4c + 1 and 4c + 3. Two 128-bit shuffles put
// groups 4c, 4c + 1 and 4c + 2, 4c + 3 side by side, which is the activations' own order, so
// every product takes 64 activation bytes straight from the Q8_K block (about half the
// AVX2 dot's instructions per block). Each group's int32
// sums meet its scale in f32 (d * scale, / 16 for the high nibbles), the mins go as in AVX2
// (the activation sums of each 16 against every min twice).
template <int NR>
void dot_q4k(const void* wv, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  const int64_t nb = k / kQK_K;
  const __m512i m4 = _mm512_set1_epi8(15);
  // pick[p]: lanes 0-7 take scale 2p, lanes 8-15 scale 2p + 1.
  alignas(64) static constexpr int32_t pick[4][16] = {
      {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
      {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
      {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};
  alignas(32) static constexpr float odd16[8] = {1, 1.f / 16, 1, 1.f / 16,
                                                 1, 1.f / 16, 1, 1.f / 16};
  __m512 acc[NR];  // the mins' sums come off in the low 8 lanes
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = static_cast<const BlockQ4_K*>(wv)[i];
    prefetch_ahead<sizeof(BlockQ4_K)>(reinterpret_cast<const uint8_t*>(&b));
    const K4Scales ks = k4_scale_words(b.scales);
    const __m256 f = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, int(ks.sc[1]), int(ks.sc[0])))),
        _mm256_mul_ps(_mm256_set1_ps(half(b.d)), _mm256_load_ps(odd16)));
    __m512 sc[4];
    for (int p = 0; p < 4; ++p)
      sc[p] = _mm512_permutexvar_ps(load512(pick[p]), _mm512_castps256_ps512(f));
    __m512i w[4];  // w[2c], w[2c + 1]: groups 4c, 4c + 1 and 4c + 2, 4c + 3
    for (int c = 0; c < 2; ++c) {
      const __m512i q = load512(b.qs + 64 * c);
      const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_andnot_si512(m4, q);
      w[2 * c] = _mm512_shuffle_i64x2(lo, hi, 0x44);
      w[2 * c + 1] = _mm512_shuffle_i64x2(lo, hi, 0xee);
    }
    const __m128i mn = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(ks.mn[1]), int(ks.mn[0])));
    const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn));
    const float dmin = half(b.dmin);
    for (int r = 0; r < NR; ++r) {
      const auto& a = reinterpret_cast<const BlockQ8K*>(act + r * as)[i];
      __m512 t = _mm512_mul_ps(
          _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], load512(a.qs))),
          sc[0]);
      for (int p = 1; p < 4; ++p)
        t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[p],
                                                                   load512(a.qs + 64 * p))),
                            sc[p], t);
      acc[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(a.d), acc[r]);
      const __m256i m = _mm256_madd_epi16(load256(a.bsums), mins);
      acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(m)),
                                _mm512_set1_ps(dmin * a.d), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * os] = _mm512_reduce_add_ps(acc[r]);
}

}  // namespace

DotFn avx512_dot_fn(DType w, int nr) {
  // With AMX, llama.cpp's q4_K sums a super-block in int32 first: avx2_dot_fn's kSuper form.
  if (w != DType::q4_k || amx_usable()) return nullptr;
  return with_rows(nr, []<int NR>() -> DotFn { return dot_q4k<NR>; });
}

size_t avx512_rows8_act_bytes(int64_t k) { return size_t((k / kQK + 1) / 2) * sizeof(Rows8Pair); }

bool avx512_rows8_act(const float* x, void* dst, int64_t k) {
  auto* y = static_cast<Rows8Pair*>(dst);
  const int64_t nb = k / kQK;
  BlockQ8 blk;
  for (int64_t b = 0; b < nb + (nb & 1); ++b) {
    Rows8Pair& p = y[b / 2];
    const int h = int(b & 1) * 8;  // the block's first lane
    if (b < nb) {
      quantize_q8_fast(x + kQK * b, &blk, kQK);
    } else {
      std::memset(&blk, 0, sizeof blk);
    }
    expand_rows8(blk, p.run[0] + 4 * h, sizeof p.run[0], p.sum8 + h, p.d + h);
  }
  return true;
}

bool avx512_dot_rows16(DType w, const void* first, size_t gbytes, int64_t count, const uint8_t* act,
                       size_t as, int nr, int64_t k, float* out, int64_t os) {
  const auto* g = static_cast<const uint8_t*>(first);
  if (w != DType::q4_0 && w != DType::q8_0 && w != DType::q4_k) return false;
  int64_t j = 0;
  if (nr == kWideRows) {
    if (w == DType::q4_k) return false;  // tile_rows never asks
    for (; j < count; ++j)
      w == DType::q4_0 ? dot16<true, kWideRows>(g + j * gbytes, act, as, k, out + 16 * j, os)
                       : dot16<false, kWideRows>(g + j * gbytes, act, as, k, out + 16 * j, os);
    return true;
  }
  if (w == DType::q4_0 && nr == 1)
    for (; j + kSideBySide <= count; j += kSideBySide)
      dot16_q4_side(g + j * gbytes, gbytes, reinterpret_cast<const BlockQ8*>(act), k, out + 16 * j);
  for (; j < count; ++j)
    with_rows(nr, [&]<int NR>() {
      const uint8_t* gj = g + j * gbytes;
      if (w == DType::q4_k)
        dot16_q4k<NR>(gj, act, as, k, out + 16 * j, os);
      else if (w == DType::q4_0)
        dot16<true, NR>(gj, act, as, k, out + 16 * j, os);
      else
        dot16<false, NR>(gj, act, as, k, out + 16 * j, os);
    });
  return true;
}

bool avx512_wide_rows16(DType w) { return w == DType::q4_0 || w == DType::q8_0; }

bool avx512_dot_rows8(DType w, const void* group, const uint8_t* act, size_t as, int nr, int64_t k,
                      float* out, int64_t os) {
  const auto* g = static_cast<const uint8_t*>(group);
  if (w != DType::q4_0 && w != DType::q8_0) return false;
  with_rows(nr, [&]<int NR>() {
    w == DType::q4_0 ? dot<Q4, NR>(g, act, as, k, out, os) : dot<Q8, NR>(g, act, as, k, out, os);
  });
  return true;
}

#else  // no AVX-512 VNNI: quant_avx2.cpp's kernels serve

DotFn avx512_dot_fn(DType, int) { return nullptr; }
size_t avx512_rows8_act_bytes(int64_t) { return 0; }
bool avx512_rows8_act(const float*, void*, int64_t) { return false; }
bool avx512_dot_rows8(DType, const void*, const uint8_t*, size_t, int, int64_t, float*, int64_t) {
  return false;
}
bool avx512_dot_rows16(DType, const void*, size_t, int64_t, const uint8_t*, size_t, int, int64_t,
                       float*, int64_t) {
  return false;
}
bool avx512_wide_rows16(DType) { return false; }

#endif

}  // namespace qdot
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
