// AVX2 dots of quant_dot.h. Every quantized type unpacks a block to unsigned bytes in
// natural value order (no sign handling in the hot loop: the formats' offsets and minimums
// are applied through the activation sums), multiplies them with the int8 activations in
// _mm256_maddubs_epi16 (pairs of u8 x i8 into i16: at most 2 * 63 * 127, no saturation),
// and widens with _mm256_madd_epi16 against the group scales (or ones). The K-quants stay
// in int32 across a whole 256-value block (bounded by 256 * 63 * 127 * 127 < 2^31) and
// meet the f32 scales once per block; the 32-value types once per block too, alternating
// two accumulators so that the FMA latency does not bound a single row.
//
// Up to kMaxRows activation rows share each unpacked weight block (decode of a few
// sequences, and the tiles of the many-row path).
#include <algorithm>
#include <cmath>

#include "backend/cpu/isa.h"
#include "backend/cpu/quant_simd.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace qdot {

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

namespace {

using namespace quant;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The low (h = 0) or high 128 bits of v in both halves.
inline __m256i half_lanes(__m256i v, int h) {
  return h ? _mm256_permute2x128_si256(v, v, 0x11) : _mm256_permute2x128_si256(v, v, 0x00);
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Decode streams every weight from memory once. Each kernel prefetches kAhead bytes past
// what it reads, a line per 64 bytes as it goes: prefetching a whole next row at once stalls
// on the core's miss buffers, slower than no software prefetch at all (bench/RESULTS.md,
// "LLM decode streaming").
constexpr int64_t kAhead = 2048;
template <size_t Bytes, int64_t Ahead = kAhead>
inline void prefetch_ahead(const void* p) {
  const char* c = static_cast<const char*>(p) + Ahead;
  for (size_t o = 0; o < Bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

// acc + Σ u·a over each 4 bytes: unsigned weights u, signed activations a. One VNNI
// instruction where the CPU has it (exact int32 sums, as the two AVX2 steps give here: no
// pair sum of the formats reaches maddubs' int16 saturation).
inline __m256i dot_u8i8(__m256i acc, __m256i u, __m256i a) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, a);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, a);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
#endif
}
inline __m256i dot_u8i8(__m256i u, __m256i a) { return dot_u8i8(_mm256_setzero_si256(), u, a); }

// Byte j of the result is 0x10 where bit j of x is set, else 0.
inline __m256i bits_0x10(const uint8_t* qh) {
  uint32_t x;
  std::memcpy(&x, qh, 4);
  const __m256i spread =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(int(x)), spread);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// 16 nibble bytes of a 32-value block: low nibbles are values 0-15, high ones 16-31.
// (A broadcast load and a blend: no lane-crossing shuffle.)
inline __m256i nibbles(const uint8_t* qs) {
  __m256i r = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  r = _mm256_blend_epi32(r, _mm256_srli_epi16(r, 4), 0xf0);
  return _mm256_and_si256(r, _mm256_set1_epi8(15));
}

// ---- 32-value blocks ---------------------------------------------------------------------
// unpack(): the values u as unsigned bytes (signed for q8_0); x = d * (u - kZero), or
// d * u + m for the types with a minimum (kMin).

struct Q4_0 {
  using B = BlockQ4_0;
  static constexpr bool kSigned = false, kMin = false;
  static constexpr int kZero = 8;
  static __m256i unpack(const B& b) { return nibbles(b.qs); }
};
struct Q4_1 {
  using B = BlockQ4_1;
  static constexpr bool kSigned = false, kMin = true;
  static constexpr int kZero = 0;
  static __m256i unpack(const B& b) { return nibbles(b.qs); }
};
struct Q5_0 {
  using B = BlockQ5_0;
  static constexpr bool kSigned = false, kMin = false;
  static constexpr int kZero = 16;
  static __m256i unpack(const B& b) { return _mm256_or_si256(nibbles(b.qs), bits_0x10(b.qh)); }
};
struct Q5_1 {
  using B = BlockQ5_1;
  static constexpr bool kSigned = false, kMin = true;
  static constexpr int kZero = 0;
  static __m256i unpack(const B& b) { return _mm256_or_si256(nibbles(b.qs), bits_0x10(b.qh)); }
};
struct Q8_0 {
  using B = BlockQ8_0;
  static constexpr bool kSigned = true, kMin = false;
  static constexpr int kZero = 0;
  static __m256i unpack(const B& b) { return load(b.qs); }
};

// The orders of a dot's f32 sums: kFast (blocks in flight in separate accumulators), and
// llama.cpp's, to the bit: kVec (ggml_vec_dot_*_q8_*: one accumulator of 8 lanes, int32 lane
// j holding bytes 4j .. 4j + 3 of each block, summed by halving at the end) and kSuper
// (ggml's AMX kernels: each block's int32 total meets its scales in one f32 sum per row).
// q2_K on AVX-512 CPUs, where llama.cpp repacks it (8 rows interleaved): kRepack (its GEMV,
// one row) sums each block's int32 total and its mins' into two f32 sums, subtracted at the
// end; kRepackHalf (its GEMM, rows in fours) the same per half block of 128.
enum class Order { kFast, kVec, kSuper, kRepack, kRepackHalf };

template <class T, int NR, Order O = Order::kFast>
void dot32(const void* wv, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  // U blocks in flight, each with its own accumulators: one row alone would otherwise
  // wait on the FMA latency (4 cycles) every block.
  constexpr int U = O != Order::kFast ? 1 : NR == 1 ? 4 : NR == 2 ? 2 : 1;
  float sup[NR] = {};
  const auto* w = static_cast<const typename T::B*>(wv);
  const int64_t nb = k / kQK;
  __m256 acc[U][NR];
  float off[U][NR];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < NR; ++r) acc[u][r] = _mm256_setzero_ps(), off[u][r] = 0;
  auto step = [&](int64_t i, int u) {
    const auto& b = w[i];
    const float d = half(b.d);
    // x = d (u - z): the signed values u - z, whose signs move to the activations
    // (_mm256_maddubs_epi16 takes unsigned weights).
    __m256i q = T::unpack(b);
    if constexpr (T::kZero > 0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(T::kZero));
    constexpr bool kSign = T::kSigned || T::kZero > 0;
    const __m256i wu = kSign ? _mm256_abs_epi8(q) : q;
    for (int r = 0; r < NR; ++r) {
      const BlockQ8& a = reinterpret_cast<const BlockQ8*>(act + r * as)[i];
      __m256i av = load(a.qs);
      if constexpr (kSign) av = _mm256_sign_epi8(av, q);
      const __m256i p = dot_u8i8(wu, av);
      if constexpr (O == Order::kSuper) {
        sup[r] = std::fma(float(hsum_i32(p)), d * a.d, sup[r]);
        if constexpr (T::kMin) sup[r] = std::fma(half(b.m), a.s, sup[r]);
        continue;
      }
      acc[u][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * a.d), acc[u][r]);
      if constexpr (T::kMin) off[u][r] += half(b.m) * a.s;  // x = d u + m
    }
  };
  int64_t i = 0;
  for (; i + U <= nb; i += U) {
    prefetch_ahead<U * sizeof(typename T::B)>(w + i);
    for (int u = 0; u < U; ++u) step(i + u, u);
  }
  for (; i < nb; ++i) step(i, 0);
  for (int r = 0; r < NR; ++r) {
    for (int u = 1; u < U; ++u)
      acc[0][r] = _mm256_add_ps(acc[0][r], acc[u][r]), off[0][r] += off[u][r];
    out[r * os] = O == Order::kSuper ? sup[r] : hsum(acc[0][r]) + off[0][r];
  }
}

// ---- K-quants ----------------------------------------------------------------------------

// shuffle_epi8 masks over 8 int16 scales held in both 128-bit lanes: kGroup[g] puts
// scale g in every lane (groups of 32 values), kPair[p] scale 2p in the low half and
// 2p + 1 in the high half (two groups of 16 in one vector of 32 values).
struct Masks {
  __m256i group[8], pair[4], byte_pair[8];
  Masks() {
    // byte_pair[q]: byte 2q of 16 scale bytes (in both lanes) as int16 in the low half,
    // byte 2q + 1 in the high half (0x80 zeroes the upper byte of each int16).
    for (int q = 0; q < 8; ++q)
      byte_pair[q] = _mm256_set_m128i(_mm_set1_epi16(int16_t((2 * q + 1) | 0x8000)),
                                      _mm_set1_epi16(int16_t((2 * q) | 0x8000)));
    for (int g = 0; g < 8; ++g) group[g] = _mm256_set1_epi16(int16_t((2 * g) | ((2 * g + 1) << 8)));
    for (int p = 0; p < 4; ++p) {
      __m128i lo = _mm_set1_epi16(int16_t((4 * p) | ((4 * p + 1) << 8)));
      __m128i hi = _mm_set1_epi16(int16_t((4 * p + 2) | ((4 * p + 3) << 8)));
      pair[p] = _mm256_set_m128i(hi, lo);
    }
  }
};
const Masks& masks() {
  static const Masks m;
  return m;
}

inline const BlockQ8K& kact(const uint8_t* act, size_t as, int r, int64_t i) {
  return reinterpret_cast<const BlockQ8K*>(act + r * as)[i];
}

// ggml's AMX kernels (what llama.cpp runs for q4_K, q5_K and q6_K on a CPU with AMX, from
// one row up) sum a whole super-block in int32 and meet the scales once per block:
// acc = fma(Σ, d_w d_x, acc), then acc -= Σ_mins (dmin_w d_x). kSuper dots do the same, one
// f32 sum per row in block order, so that their bits are ggml's; the others keep lanes of
// partial sums (faster, other roundings).
template <int NR>
struct SuperSums {
  float acc[NR] = {};
  void add(int r, __m256i isum, float scale) {
    acc[r] = std::fma(float(hsum_i32(isum)), scale, acc[r]);
  }
  void sub(int r, __m256i msum, float scale) {
    acc[r] = std::fma(-float(hsum_i32(msum)), scale, acc[r]);
  }
};

// q4_k and q5_k: 8 groups of 32 with 6-bit scales and mins.
template <int NR, bool kFive, Order O>
void dot_q45k(const void* wv, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  constexpr bool kSuper = O == Order::kSuper;
  const Masks& mk = masks();
  const int64_t nb = k / kQK_K;
  const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1), two = _mm256_set1_epi8(2);
  __m256 acc[NR], accm[NR];
  for (int r = 0; r < NR; ++r) acc[r] = accm[r] = _mm256_setzero_ps();
  SuperSums<NR> sup;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t *scales, *qs, *qh = nullptr;
    uint16_t d16, m16;
    if constexpr (kFive) {
      const auto& b = static_cast<const BlockQ5_K*>(wv)[i];
      prefetch_ahead<sizeof(BlockQ5_K)>(&b);
      scales = b.scales, qs = b.qs, qh = b.qh, d16 = b.d, m16 = b.dmin;
    } else {
      const auto& b = static_cast<const BlockQ4_K*>(wv)[i];
      prefetch_ahead<sizeof(BlockQ4_K)>(&b);
      scales = b.scales, qs = b.qs, d16 = b.d, m16 = b.dmin;
    }
    const K4Scales ks = k4_scale_words(scales);
    const __m256i sc = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(ks.sc[1]), int(ks.sc[0]))));
    const __m128i mn = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(ks.mn[1]), int(ks.mn[0])));
    // Each min twice: it pairs with the two 16-value sums of its group.
    const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn));
    __m256i hb = kFive ? load(qh) : _mm256_setzero_si256();
    __m256i isum[NR];
    for (int r = 0; r < NR; ++r) isum[r] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load(qs + 32 * j);
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFive) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(hb, two), 3));
        hb = _mm256_srli_epi16(hb, 2);
      }
      const __m256i s_lo = _mm256_shuffle_epi8(sc, mk.group[2 * j]);
      const __m256i s_hi = _mm256_shuffle_epi8(sc, mk.group[2 * j + 1]);
      for (int r = 0; r < NR; ++r) {
        const int8_t* a = kact(act, as, r, i).qs + 64 * j;
        __m256i p =
            _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(a)), s_lo),
                             _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(a + 32)), s_hi));
        isum[r] = _mm256_add_epi32(isum[r], p);
      }
    }
    const float d = half(d16), dmin = half(m16);
    for (int r = 0; r < NR; ++r) {
      const BlockQ8K& a = kact(act, as, r, i);
      __m256i m = _mm256_madd_epi16(load(a.bsums), mins);
      if constexpr (kSuper) {
        sup.add(r, isum[r], d * a.d);
        sup.sub(r, m, dmin * a.d);
        continue;
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * a.d), acc[r]);
      accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dmin * a.d), accm[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * os] = kSuper ? sup.acc[r] : hsum(acc[r]) - hsum(accm[r]);
}

template <int NR, Order O>
void dot_q6k(const void* wv, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  constexpr bool kSuper = O == Order::kSuper;
  const Masks& mk = masks();
  const int64_t nb = k / kQK_K;
  const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  SuperSums<NR> sup;
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6_K& b = static_cast<const BlockQ6_K*>(wv)[i];
    prefetch_ahead<sizeof(BlockQ6_K)>(&b);
    const __m256i sc =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    __m256i isum[NR];
    // The -32 of every value: -32 Σ_g sc[g] · Σa over group g.
    for (int r = 0; r < NR; ++r)
      isum[r] = _mm256_sub_epi32(
          _mm256_setzero_si256(),
          _mm256_slli_epi32(_mm256_madd_epi16(sc, load(kact(act, as, r, i).bsums)), 5));
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load(b.ql + 64 * h), ql1 = load(b.ql + 64 * h + 32),
                    qh = load(b.qh + 32 * h);
      const __m256i sb = half_lanes(sc, h);
      __m256i v[4];
      v[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                             _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
      v[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
      v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
      v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
      for (int p = 0; p < 4; ++p) {
        const __m256i s = _mm256_shuffle_epi8(sb, mk.pair[p]);
        for (int r = 0; r < NR; ++r) {
          const int8_t* a = kact(act, as, r, i).qs + 128 * h + 32 * p;
          isum[r] =
              _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v[p], load(a)), s));
        }
      }
    }
    const float d = half(b.d);
    for (int r = 0; r < NR; ++r) {
      if constexpr (kSuper)
        sup.add(r, isum[r], d * kact(act, as, r, i).d);
      else
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]),
                                 _mm256_set1_ps(d * kact(act, as, r, i).d), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * os] = kSuper ? sup.acc[r] : hsum(acc[r]);
}

// q3_k: 2 low bits in qs (as q2_k), the high bit in hmask; value = u - 4 with u in [0, 8).
template <int NR, Order O>
void dot_q3k(const void* wv, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  constexpr bool kVec = O == Order::kVec;
  const Masks& mk = masks();
  const int64_t nb = k / kQK_K;
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ3_K& b = static_cast<const BlockQ3_K*>(wv)[i];
    prefetch_ahead<sizeof(BlockQ3_K)>(&b);
    // The 16 scales, 4 per word: low 4 bits from bytes 0-7 (low nibbles, then high), the
    // top 2 from bytes 8-11 (2 bits per scale); stored with +32.
    uint32_t w[3];
    std::memcpy(w, b.scales, 12);
    const __m128i packed =
        _mm_setr_epi32(int((w[0] & 0x0f0f0f0f) | ((w[2] & 0x03030303) << 4)),
                       int((w[1] & 0x0f0f0f0f) | (((w[2] >> 2) & 0x03030303) << 4)),
                       int(((w[0] >> 4) & 0x0f0f0f0f) | (((w[2] >> 4) & 0x03030303) << 4)),
                       int(((w[1] >> 4) & 0x0f0f0f0f) | (((w[2] >> 6) & 0x03030303) << 4)));
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_sub_epi8(packed, _mm_set1_epi8(32)));
    __m256i isum[NR];
    // The -4 of every value: -4 Σ_g sc[g] · Σa over group g at once, or (kVec) in each
    // value's own lane, as ggml subtracts it.
    for (int r = 0; r < NR; ++r)
      isum[r] =
          kVec ? _mm256_setzero_si256()
               : _mm256_sub_epi32(
                     _mm256_setzero_si256(),
                     _mm256_slli_epi32(_mm256_madd_epi16(sc, load(kact(act, as, r, i).bsums)), 2));
    __m256i hm = load(b.hmask);
    for (int h = 0; h < 2; ++h) {
      __m256i q = load(b.qs + 32 * h);
      const __m256i sb = half_lanes(sc, h);
      for (int j = 0; j < 4; ++j) {
        __m256i u = _mm256_or_si256(_mm256_and_si256(q, m3),
                                    _mm256_slli_epi16(_mm256_and_si256(hm, one), 2));
        q = _mm256_srli_epi16(q, 2);
        hm = _mm256_srli_epi16(hm, 1);
        const __m256i s = _mm256_shuffle_epi8(sb, mk.pair[j]);
        for (int r = 0; r < NR; ++r) {
          const int8_t* a = kact(act, as, r, i).qs + 128 * h + 32 * j;
          __m256i p = _mm256_maddubs_epi16(u, load(a));
          if constexpr (kVec) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(four, load(a)));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, s));
        }
      }
    }
    const float d = half(b.d);
    for (int r = 0; r < NR; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]),
                               _mm256_set1_ps(d * kact(act, as, r, i).d), acc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r * os] = hsum(acc[r]);
}

template <int NR, Order O>
void dot_q2k(const void* wv, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  const Masks& mk = masks();
  const int64_t nb = k / kQK_K;
  const __m256i m3 = _mm256_set1_epi8(3);
  constexpr bool kVec = O == Order::kVec;
  constexpr bool kRepack = O == Order::kRepack || O == Order::kRepackHalf;
  __m256 acc[NR], accm[NR];
  for (int r = 0; r < NR; ++r) acc[r] = accm[r] = _mm256_setzero_ps();
  float sum[NR] = {}, mins[NR] = {};  // kRepack's two f32 sums
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ2_K& b = static_cast<const BlockQ2_K*>(wv)[i];
    prefetch_ahead<sizeof(BlockQ2_K)>(&b);
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    // The scales as bytes in both lanes (each pair of groups picked by one shuffle), the
    // mins widened for the products with the activation sums.
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_and_si128(s8, _mm_set1_epi8(15)));
    const __m256i mn =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(15)));
    const float d = half(b.d), dmin = half(b.dmin);
    __m256i isum[NR], msum[NR];
    for (int r = 0; r < NR; ++r)
      isum[r] = _mm256_setzero_si256(),
      msum[r] = _mm256_madd_epi16(mn, load(kact(act, as, r, i).bsums));
    for (int h = 0; h < 2; ++h) {
      if (O == Order::kRepackHalf && h == 1)  // the first half's sum, alone
        for (int r = 0; r < NR; ++r) {
          sum[r] = std::fma(float(hsum_i32(isum[r])), d * kact(act, as, r, i).d, sum[r]);
          isum[r] = _mm256_setzero_si256();
        }
      __m256i q = load(b.qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const __m256i u = _mm256_and_si256(q, m3);
        q = _mm256_srli_epi16(q, 2);
        const __m256i s = _mm256_shuffle_epi8(sc, mk.byte_pair[4 * h + j]);
        for (int r = 0; r < NR; ++r) {
          const int8_t* a = kact(act, as, r, i).qs + 128 * h + 32 * j;
          isum[r] =
              _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u, load(a)), s));
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      const BlockQ8K& a = kact(act, as, r, i);
      if constexpr (kRepack) {
        const __m128i mlo = _mm256_castsi256_si128(msum[r]),
                      mhi = _mm256_extracti128_si256(msum[r], 1);
        if constexpr (O == Order::kRepackHalf) {  // halves: groups 0-7 in lanes 0-3, 8-15 in 4-7
          sum[r] = std::fma(float(hsum_i32(isum[r])), d * a.d, sum[r]);
          mins[r] = std::fma(float(hsum_i32(mlo)), dmin * a.d, mins[r]);
          mins[r] = std::fma(float(hsum_i32(mhi)), dmin * a.d, mins[r]);
        } else {
          sum[r] = std::fma(float(hsum_i32(isum[r])), d * a.d, sum[r]);
          mins[r] = std::fma(float(hsum_i32(msum[r])), dmin * a.d, mins[r]);
        }
        continue;
      }
      const __m256 m = _mm256_cvtepi32_ps(msum[r]);
      if constexpr (kVec) {  // ggml: one accumulator, the mins (negated) first
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(-a.d * dmin), m, acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(a.d * d), _mm256_cvtepi32_ps(isum[r]), acc[r]);
        continue;
      }
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * a.d), acc[r]);
      accm[r] = _mm256_fmadd_ps(m, _mm256_set1_ps(dmin * a.d), accm[r]);
    }
  }
  for (int r = 0; r < NR; ++r)
    out[r * os] = kRepack ? sum[r] - mins[r] : hsum(acc[r]) - hsum(accm[r]);
}

// ---- f16 / bf16 / f32 weights against f32 activations ---------------------------------------

inline __m256 widen8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 widen8(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 widen8(const BHalf* p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// Float rows go through a block in a few cycles: they take their lines 1 KiB ahead (faster
// than 2 or 4 KiB: bench/RESULTS.md, "LLM decode streaming").
constexpr int64_t kFloatAhead = 1024;

template <class T, int NR>
void dot_float(const void* wv, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  constexpr int U = NR == 1 ? 4 : 2;  // independent FMA chains per row
  const T* w = static_cast<const T*>(wv);
  const float* x[NR];
  for (int r = 0; r < NR; ++r) x[r] = reinterpret_cast<const float*>(act + r * as);
  __m256 acc[NR][U];
  for (int r = 0; r < NR; ++r)
    for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 * U <= k; i += 8 * U) {
    prefetch_ahead<8 * U * sizeof(T), kFloatAhead>(w + i);
    __m256 wv8[U];
    for (int u = 0; u < U; ++u) wv8[u] = widen8(w + i + 8 * u);
    for (int r = 0; r < NR; ++r)
      for (int u = 0; u < U; ++u)
        acc[r][u] = _mm256_fmadd_ps(wv8[u], _mm256_loadu_ps(x[r] + i + 8 * u), acc[r][u]);
  }
  for (; i + 8 <= k; i += 8) {
    __m256 w8 = widen8(w + i);
    for (int r = 0; r < NR; ++r)
      acc[r][0] = _mm256_fmadd_ps(w8, _mm256_loadu_ps(x[r] + i), acc[r][0]);
  }
  for (int r = 0; r < NR; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm256_add_ps(acc[r][0], acc[r][u]);
    float s = hsum(acc[r][0]);
    for (int64_t j = i; j < k; ++j) s += to_float(w[j]) * x[r][j];
    out[r * os] = s;
  }
}

template <DType T, int NR, Order O = Order::kFast>
void avx2_dot(const void* w, const uint8_t* act, size_t as, int64_t k, float* out, int64_t os) {
  if constexpr (T == DType::f32) dot_float<float, NR>(w, act, as, k, out, os);
  if constexpr (T == DType::f16) dot_float<Half, NR>(w, act, as, k, out, os);
  if constexpr (T == DType::bf16) dot_float<BHalf, NR>(w, act, as, k, out, os);
  if constexpr (T == DType::q4_0) dot32<Q4_0, NR, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q4_1) dot32<Q4_1, NR, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q5_0) dot32<Q5_0, NR, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q5_1) dot32<Q5_1, NR, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q8_0) dot32<Q8_0, NR, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q2_k) dot_q2k<NR, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q3_k) dot_q3k<NR, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q4_k) dot_q45k<NR, false, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q5_k) dot_q45k<NR, true, O>(w, act, as, k, out, os);
  if constexpr (T == DType::q6_k) dot_q6k<NR, O>(w, act, as, k, out, os);
}

// llama.cpp's order for T (in_fours: rows that its repacked GEMM takes four at a time): its
// AMX kernels' where it has them and the CPU has AMX; q2_K's repacked GEMV / GEMM where it
// repacks q2_K (AVX-512); else ggml_vec_dot's (x86, AVX2 form) for q5_0, q5_1, q2_K and
// q3_K; the fast order for the rest (without AMX llama.cpp repacks q4_0 and q4_K and sums
// otherwise anyway).
template <DType T>
Order llama_order(bool in_fours) {
  constexpr bool amx_kernels = T == DType::q4_0 || T == DType::q4_1 || T == DType::q8_0 ||
                               T == DType::q4_k || T == DType::q5_k || T == DType::q6_k;
  if (amx_kernels && amx_usable()) return Order::kSuper;
#if defined(__AVX512F__)
  if (T == DType::q2_k) return in_fours ? Order::kRepackHalf : Order::kRepack;
#endif
  if (T == DType::q5_0 || T == DType::q5_1 || T == DType::q2_k || T == DType::q3_k)
    return Order::kVec;
  return Order::kFast;
}

template <DType T, Order O>
DotFn with_order(int nr) {
  return with_rows(nr, []<int NR>() -> DotFn { return avx2_dot<T, NR, O>; });
}

template <DType T>
DotFn for_rows(int nr, bool in_fours) {
  switch (llama_order<T>(in_fours)) {
    case Order::kSuper:
      return with_order<T, Order::kSuper>(nr);
    case Order::kVec:
      return with_order<T, Order::kVec>(nr);
    case Order::kRepack:
      return with_order<T, Order::kRepack>(nr);
    case Order::kRepackHalf:
      return with_order<T, Order::kRepackHalf>(nr);
    default:
      return with_order<T, Order::kFast>(nr);
  }
}

// Eight int32 vectors of one 32-value block → int8 in order (the packs interleave lanes).
inline __m256i pack32(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline float amax_of(const float* x, int n) {
  const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 values times id, rounded to nearest even (MXCSR default), as int32 in q[4].
inline void round32(const float* x, float id, __m256i* q) {
  const __m256 m = _mm256_set1_ps(id);
  for (int j = 0; j < 4; ++j)
    q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), m));
}

// ---- row decoders (the panels of the many-row path) ---------------------------------------

// 32-value blocks: x = d * u + c, with u the unpacked bytes (signed for q8_0).
template <class T>
void decode32(const void* src, float* y, int64_t nb) {
  const auto* w = static_cast<const typename T::B*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto& b = w[i];
    const float d = half(b.d);
    float c = 0;
    if constexpr (T::kMin) c = half(b.m);
    if constexpr (T::kZero > 0) c = -float(T::kZero) * d;
    const __m256i q = T::unpack(b);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    const __m256 dv = _mm256_set1_ps(d), cv = _mm256_set1_ps(c);
    for (int j = 0; j < 4; ++j) {
      const __m256i v = T::kSigned ? _mm256_cvtepi8_epi32(part[j]) : _mm256_cvtepu8_epi32(part[j]);
      _mm256_storeu_ps(y + 8 * j, _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), dv, cv));
    }
  }
}

template <class T>
void decode_float(const void* src, float* y, int64_t n) {
  const T* p = static_cast<const T*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, widen8(p + i));
  for (; i < n; ++i) y[i] = to_float(p[i]);
}

}  // namespace

DotFn avx2_dot_fn(DType w, int nr, bool in_fours) {
  switch (w) {
#define RLX_QDOT_CASE(T) \
  case DType::T:         \
    return for_rows<DType::T>(nr, in_fours);
    RLX_QDOT_TYPES(RLX_QDOT_CASE)
#undef RLX_QDOT_CASE
    default:
      return nullptr;
  }
}

// rows8 q4_0 (rlx/quant.h): per block, the 8 rows' nibbles in 4 runs of 32 bytes (lane i
// of a run = row i), met by 4-byte broadcasts of the activations; the int16 pair sums of
// the 8 products (each at most 2 * 15 * 127, 8 of them under 2^15) add up before one widen,
// and the -8 of every value joins as -8 Σa. The 8 results stay in the lanes.
//
// The activations come expanded (Rows8Act): each block's 8 runs of 4 bytes already
// broadcast to 32, its 8 Σa and scale too, so the products read them as memory operands.
// A decode step meets one activation row with every group of the matrix: expanding it once
// saves the kernel 10 of its ~45 instructions per block.
struct Rows8Act {
  int8_t run[8][32];  // run v: bytes 4v .. 4v + 3 of the block's qs in every lane
  int32_t sum8[8];    // 8 Σqs
  float d[8];         // the block scale
};

template <int NR>
void dot_rows8_q4_0(const uint8_t* g, const uint8_t* act, size_t as, int64_t k, float* out,
                    int64_t os) {
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kQK; ++b, g += 8 * sizeof(BlockQ4_0)) {
    prefetch_ahead<8 * sizeof(BlockQ4_0)>(g);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g)));
    __m256i lo[4], hi[4];
    for (int v = 0; v < 4; ++v) {
      const __m256i q = load(g + 16 + 32 * v);
      lo[v] = _mm256_and_si256(q, m4);
      hi[v] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
    for (int r = 0; r < NR; ++r) {
      const Rows8Act& a = reinterpret_cast<const Rows8Act*>(act + r * as)[b];
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) || defined(__AVXVNNI__)
      // Two chains of int32 dots (the low and the high nibbles), the -8 Σa on the first.
      __m256i s_lo = _mm256_sub_epi32(_mm256_setzero_si256(), load(a.sum8)),
              s_hi = _mm256_setzero_si256();
      for (int v = 0; v < 4; ++v) {
        s_lo = dot_u8i8(s_lo, lo[v], load(a.run[v]));
        s_hi = dot_u8i8(s_hi, hi[v], load(a.run[4 + v]));
      }
      const __m256i s32 = _mm256_add_epi32(s_lo, s_hi);
#else
      __m256i s16 = _mm256_maddubs_epi16(lo[0], load(a.run[0]));
      for (int v = 1; v < 4; ++v)
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo[v], load(a.run[v])));
      for (int v = 0; v < 4; ++v)
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi[v], load(a.run[4 + v])));
      const __m256i s32 =
          _mm256_sub_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), load(a.sum8));
#endif
      acc[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_mul_ps(d, _mm256_loadu_ps(a.d)), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) _mm256_storeu_ps(out + r * os, acc[r]);
}

// rows8 q8_0: as q4_0's, with 8 runs of signed bytes. VNNI multiplies unsigned by signed
// bytes, so each weight byte enters biased (w + 128 as w ^ 0x80) and 128 Σa comes off; plain
// AVX2 moves the weights' signs to the activations (maddubs would saturate on w + 128).
template <int NR>
void dot_rows8_q8_0(const uint8_t* g, const uint8_t* act, size_t as, int64_t k, float* out,
                    int64_t os) {
  constexpr size_t kGroup = 8 * sizeof(BlockQ8_0);
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kQK; ++b, g += kGroup) {
    prefetch_ahead<kGroup>(g);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g)));
    __m256i w[8];
    for (int v = 0; v < 8; ++v) w[v] = load(g + 16 + 32 * v);
    for (int r = 0; r < NR; ++r) {
      const Rows8Act& a = reinterpret_cast<const Rows8Act*>(act + r * as)[b];
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) || defined(__AVXVNNI__)
      const __m256i bias = _mm256_set1_epi8(char(0x80));
      // sum8 holds 8 Σa: 16 times that is the bias's 128 Σa.
      __m256i s0 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(load(a.sum8), 4)),
              s1 = _mm256_setzero_si256();
      for (int v = 0; v < 8; v += 2) {
        s0 = dot_u8i8(s0, _mm256_xor_si256(w[v], bias), load(a.run[v]));
        s1 = dot_u8i8(s1, _mm256_xor_si256(w[v + 1], bias), load(a.run[v + 1]));
      }
      const __m256i s32 = _mm256_add_epi32(s0, s1);
#else
      __m256i s32 = _mm256_setzero_si256();
      for (int v = 0; v < 8; ++v)
        s32 = dot_u8i8(s32, _mm256_abs_epi8(w[v]), _mm256_sign_epi8(load(a.run[v]), w[v]));
#endif
      acc[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_mul_ps(d, _mm256_loadu_ps(a.d)), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) _mm256_storeu_ps(out + r * os, acc[r]);
}

// The rounding of quantize_q8_ref / quantize_q8k_ref in quant_dot.cpp (ggml's), vectorised.
void quantize_q8_fast(const float* x, BlockQ8* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK) {
    const float amax = amax_of(x, kQK);
    const float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
    __m256i q[4];
    round32(x, id, q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), pack32(q[0], q[1], q[2], q[3]));
    y[b].d = round_half(d);
    y[b].sum =
        hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    y[b].s = round_half(d * float(y[b].sum));
  }
}

void quantize_q8k_fast(const float* x, BlockQ8K* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K) {
    const float amax = amax_of(x, kQK_K);
    if (!(amax > 0)) {  // all zero (or NaN): the reference's zero block
      std::memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    // The scale comes from the first value of largest magnitude, with its sign.
    int j = 0;
    while (j < kQK_K - 1 && std::fabs(x[j]) != amax) ++j;
    const float iscale = -127.f / (std::fabs(x[j]) == amax ? x[j] : amax);
    for (int c = 0; c < kQK_K / 32; ++c) {
      __m256i q[4];
      round32(x + 32 * c, iscale, q);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + 32 * c),
                          pack32(q[0], q[1], q[2], q[3]));
      y[b].bsums[2 * c] = int16_t(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      y[b].bsums[2 * c + 1] = int16_t(hsum_i32(_mm256_add_epi32(q[2], q[3])));
    }
    y[b].d = 1 / iscale;
  }
}

size_t avx2_rows8_act_bytes(int64_t k) { return size_t(k / kQK) * sizeof(Rows8Act); }

bool avx2_rows8_act(const float* x, void* dst, int64_t k) {
  auto* y = static_cast<Rows8Act*>(dst);
  BlockQ8 blk;
  for (int64_t b = 0; b < k / kQK; ++b) {
    quantize_q8_fast(x + kQK * b, &blk, kQK);
    expand_rows8(blk, y[b].run[0], sizeof y[b].run[0], y[b].sum8, y[b].d);
  }
  return true;
}

bool avx2_dot_rows8(DType w, const void* group, const uint8_t* act, size_t as, int nr, int64_t k,
                    float* out, int64_t os) {
  const auto* g = static_cast<const uint8_t*>(group);
  if (w != DType::q4_0 && w != DType::q8_0) return false;
  with_rows(nr, [&]<int NR>() {
    w == DType::q4_0 ? dot_rows8_q4_0<NR>(g, act, as, k, out, os)
                     : dot_rows8_q8_0<NR>(g, act, as, k, out, os);
  });
  return true;
}

bool avx2_decode_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::f16:
      return decode_float<Half>(src, dst, n), true;
    case DType::bf16:
      return decode_float<BHalf>(src, dst, n), true;
    case DType::q4_0:
      return decode32<Q4_0>(src, dst, n / kQK), true;
    case DType::q4_1:
      return decode32<Q4_1>(src, dst, n / kQK), true;
    case DType::q5_0:
      return decode32<Q5_0>(src, dst, n / kQK), true;
    case DType::q5_1:
      return decode32<Q5_1>(src, dst, n / kQK), true;
    case DType::q8_0:
      return decode32<Q8_0>(src, dst, n / kQK), true;
    default:
      return false;
  }
}

#else  // no AVX2: the portable code serves

DotFn avx2_dot_fn(DType, int, bool) { return nullptr; }
size_t avx2_rows8_act_bytes(int64_t) { return 0; }
bool avx2_rows8_act(const float*, void*, int64_t) { return false; }
bool avx2_dot_rows8(DType, const void*, const uint8_t*, size_t, int, int64_t, float*, int64_t) {
  return false;
}
bool avx2_decode_row(DType, const void*, float*, int64_t) { return false; }
void quantize_q8_fast(const float* x, BlockQ8* y, int64_t k) { quantize_q8_ref(x, y, k); }
void quantize_q8k_fast(const float* x, BlockQ8K* y, int64_t k) { quantize_q8k_ref(x, y, k); }

#endif

}  // namespace qdot
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
