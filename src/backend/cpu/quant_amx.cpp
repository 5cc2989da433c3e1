// The many-row quant_matmul on Intel AMX (quant_dot.h): int8 tile products (TDPBSSD, 16 x 16
// int32 sums over a group of 16 or 32 values) of weights unpacked to int8 and activations
// quantized as the integer dots quantize them, each group's sums scaled in f32 (AVX-512) by
// the weight's and the activation's scale of that group. The group is the finest scale of the
// weight type: 32 values (q4_0 … q8_0, q4_k, q5_k) or 16 (q2_k, q3_k, q6_k). Every value of
// a format becomes a signed int8 (offsets such as q4_0's 8 or q6_k's 32 applied); minimums
// (q4_1, q5_1, q2_k, q4_k, q5_k) meet the activations' group sums. So the products are the
// integer dots' own, in another order of the f32 sums. Except q4_k, q5_k and q6_k, which
// sum as ggml's AMX kernels do (what llama.cpp runs for them on such a CPU): a group's scale
// and minimum stay integers, a whole block of 256 is summed in int32, and its sums meet the
// block's d and dmin once (block_sums), so the outputs are llama.cpp's to the bit.
//
// The functions that touch tiles or AVX-512 are compiled for those features alone (target
// attributes): the file builds for any x86-64 and runs them only where amx_usable() says
// the CPU has them and the kernel granted the tile state (arch_prctl).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/isa.h"
#include "backend/cpu/quant_simd.h"
#include "rlx/cpu_isa.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define RLX_HAVE_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define RLX_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,fma")))
#endif

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace qdot {

using namespace quant;

int amx_group(DType w) {
  if (!is_quantized(w)) return 0;
  return w == DType::q2_k || w == DType::q3_k || w == DType::q6_k ? 16 : 32;
}

namespace {

bool has_min(DType w) {
  return w == DType::q4_1 || w == DType::q5_1 || w == DType::q2_k || w == DType::q4_k ||
         w == DType::q5_k;
}

// The K-quants ggml has AMX kernels for: integer scales and mins per group, d and dmin per
// block (the strip's block scales), raw group sums of the activations.
bool block_sums(DType w) { return w == DType::q4_k || w == DType::q5_k || w == DType::q6_k; }

// ---- weights: a row to int8 values, a scale and a minimum per group ---------------------
// x = sc[g] * q + mn[g]; sc and mn are written every `st` floats (the strip's column).
// Written per format rather than through the portable dots' block decoder (quant_dot.cpp's
// ints), which made prefill slower (bench/RESULTS.md, "AMX").

template <class B>
const B* blocks(const uint8_t* p) {
  return reinterpret_cast<const B*>(p);
}

// The 16 bytes of a 32-value block's nibbles: values 0-15 low, 16-31 high.
inline void nibbles(const uint8_t* qs, int8_t* q, int zero) {
  for (int l = 0; l < 16; ++l) {
    q[l] = int8_t((qs[l] & 15) - zero);
    q[l + 16] = int8_t((qs[l] >> 4) - zero);
  }
}
// q5_0 / q5_1: bit l of qh is bit 4 of value l.
inline void fifth_bits(const uint8_t* qh, int8_t* q) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  for (int l = 0; l < 32; ++l) q[l] = int8_t(q[l] + int((h >> l) & 1) * 16);
}

// block_sums types: sc, mn hold the integer scale and min of each group, bd, bm the d and
// dmin of each block (also every `st` floats).
void unpack_row(DType w, const uint8_t* src, int64_t k, int8_t* q, float* sc, float* mn, float* bd,
                float* bm, int64_t st) {
  switch (w) {
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q8_0:
      for (int64_t b = 0; b < k / kQK; ++b, q += kQK) {
        float d = 0, m = 0;
        if (w == DType::q4_0) {
          const BlockQ4_0& x = blocks<BlockQ4_0>(src)[b];
          d = half(x.d), nibbles(x.qs, q, 8);
        } else if (w == DType::q4_1) {
          const BlockQ4_1& x = blocks<BlockQ4_1>(src)[b];
          d = half(x.d), m = half(x.m), nibbles(x.qs, q, 0);
        } else if (w == DType::q5_0) {
          const BlockQ5_0& x = blocks<BlockQ5_0>(src)[b];
          d = half(x.d), nibbles(x.qs, q, 16), fifth_bits(x.qh, q);
        } else if (w == DType::q5_1) {
          const BlockQ5_1& x = blocks<BlockQ5_1>(src)[b];
          d = half(x.d), m = half(x.m), nibbles(x.qs, q, 0), fifth_bits(x.qh, q);
        } else {
          const BlockQ8_0& x = blocks<BlockQ8_0>(src)[b];
          d = half(x.d), std::memcpy(q, x.qs, kQK);
        }
        sc[b * st] = d, mn[b * st] = m;
      }
      return;
    case DType::q4_k:
    case DType::q5_k:
      for (int64_t b = 0; b < k / kQK_K; ++b) {
        const uint8_t *scales, *qs, *qh = nullptr;
        float d, dmin;
        if (w == DType::q5_k) {
          const BlockQ5_K& x = blocks<BlockQ5_K>(src)[b];
          scales = x.scales, qs = x.qs, qh = x.qh, d = half(x.d), dmin = half(x.dmin);
        } else {
          const BlockQ4_K& x = blocks<BlockQ4_K>(src)[b];
          scales = x.scales, qs = x.qs, d = half(x.d), dmin = half(x.dmin);
        }
        bd[b * st] = d, bm[b * st] = dmin;
        for (int g = 0; g < 8; ++g, q += 32) {
          int s, m;
          k4_scale_min(scales, g, s, m);
          sc[(8 * b + g) * st] = float(s), mn[(8 * b + g) * st] = float(m);
          const uint8_t* p = qs + 32 * (g / 2);
          const int shift = 4 * (g % 2);
          for (int l = 0; l < 32; ++l) q[l] = int8_t((p[l] >> shift) & 15);
          if (qh)
            for (int l = 0; l < 32; ++l) q[l] = int8_t(q[l] | (((qh[l] >> g) & 1) << 4));
        }
      }
      return;
    case DType::q2_k:
    case DType::q3_k:
    case DType::q6_k:
      // Value 128 h + 32 s + l: 2 bits at shift 2 s of byte 32 h + l (q2_k, q3_k, q6_k's
      // high bits); q6_k's low 4 in byte 64 h + 32 (s % 2) + l, the high nibble for s >= 2;
      // q3_k's third bit in bit 4 h + s of hmask[l].
      for (int64_t b = 0; b < k / kQK_K; ++b, q += kQK_K) {
        float* s16 = sc + 16 * b * st;
        float* m16 = mn + 16 * b * st;
        const uint8_t *bits, *lo = nullptr, *hm = nullptr;
        if (w == DType::q2_k) {
          const BlockQ2_K& x = blocks<BlockQ2_K>(src)[b];
          const float d = half(x.d), dmin = half(x.dmin);
          for (int g = 0; g < 16; ++g)
            s16[g * st] = d * float(x.scales[g] & 15),
                    m16[g * st] = -dmin * float(x.scales[g] >> 4);
          bits = x.qs;
        } else if (w == DType::q3_k) {
          const BlockQ3_K& x = blocks<BlockQ3_K>(src)[b];
          const float d = half(x.d);
          for (int g = 0; g < 16; ++g)
            s16[g * st] = d * float(k3_scale(x.scales, g)), m16[g * st] = 0;
          bits = x.qs, hm = x.hmask;
        } else {
          const BlockQ6_K& x = blocks<BlockQ6_K>(src)[b];
          bd[b * st] = half(x.d), bm[b * st] = 0;
          for (int g = 0; g < 16; ++g) s16[g * st] = float(x.scales[g]), m16[g * st] = 0;
          bits = x.qh, lo = x.ql;
        }
        for (int h = 0; h < 2; ++h)
          for (int s = 0; s < 4; ++s) {
            int8_t* o = q + 128 * h + 32 * s;
            const uint8_t* p = bits + 32 * h;
            for (int l = 0; l < 32; ++l) o[l] = int8_t((p[l] >> (2 * s)) & 3);
            if (lo) {
              const uint8_t* pl = lo + 64 * h + 32 * (s % 2);
              const int shift = s >= 2 ? 4 : 0;
              for (int l = 0; l < 32; ++l)
                o[l] = int8_t((((pl[l] >> shift) & 15) | (o[l] << 4)) - 32);
            } else if (hm) {
              const int bit = 4 * h + s;
              for (int l = 0; l < 32; ++l) o[l] = int8_t(o[l] - (((hm[l] >> bit) & 1) ? 0 : 4));
            }
          }
      }
      return;
    default:
      return;
  }
}

}  // namespace

// ---- strips of 16 weight rows -------------------------------------------------------------
// int8 values [16][k] (row-major: a tile's rows), then the scales and the minimums
// [k / G][16] (a group's 16 in one line).

size_t amx_bytes(DType w, int64_t k) {
  const int64_t groups = k / std::max(amx_group(w), 1);
  const int64_t blocks = block_sums(w) ? k / kQK_K : 0;  // d and dmin per block and row
  return size_t(16 * k + 2 * 16 * (groups + blocks) * int64_t(sizeof(float)));
}

void amx_unpack(DType w, int rows, const uint8_t* src, int64_t n, int64_t k, int64_t strip,
                uint8_t* dst) {
  const int64_t groups = k / amx_group(w);
  auto* q = reinterpret_cast<int8_t*>(dst);
  auto* sc = reinterpret_cast<float*>(dst + 16 * k);
  float* mn = sc + 16 * groups;
  float* bd = mn + 16 * groups;  // block_sums types only
  float* bm = bd + 16 * (k / kQK_K);
  PlainRows plain(w, rows, src, k);
  for (int i = 0; i < 16; ++i) {
    const int64_t row = 16 * strip + i;
    if (row >= n) {  // past the last row: zeros
      std::memset(q + i * k, 0, size_t(k));
      for (int64_t g = 0; g < groups; ++g) sc[g * 16 + i] = mn[g * 16 + i] = 0;
      if (block_sums(w))
        for (int64_t b = 0; b < k / kQK_K; ++b) bd[b * 16 + i] = bm[b * 16 + i] = 0;
      continue;
    }
    const uint8_t* r = plain.row(row);
    unpack_row(w, r, k, q + i * k, sc + i, mn + i, bd + i, bm + i, 16);
  }
}

// ---- activations: blocks of 16 rows -------------------------------------------------------
// Per group: the int8 values as a tile's B operand ([G / 4][16 rows][4]), then the scales
// and the group sums times the scale [k / G][16] (block_sums types: the sums alone):
// amx_bytes, as a strip.

void amx_pack_act(DType w, const uint8_t* act, size_t ab, int rows, int64_t k, uint8_t* dst) {
  const int G = amx_group(w);
  const int64_t groups = k / G;
  auto* q = reinterpret_cast<int8_t*>(dst);
  auto* dx = reinterpret_cast<float*>(dst + 16 * k);
  float* sx = dx + 16 * groups;
  std::memset(dst, 0, amx_bytes(w, k));  // rows past the last: zeros
  const bool k_blocks = dtype_block(w) == kQK_K;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = act + r * ab;
    for (int64_t g = 0; g < groups; ++g) {
      const int8_t* p;
      float d, s;
      if (!k_blocks) {
        const BlockQ8& b = reinterpret_cast<const BlockQ8*>(row)[g];
        p = b.qs, d = b.d, s = b.s;
      } else {
        const int per = kQK_K / G;  // groups per block of 256
        const BlockQ8K& b = reinterpret_cast<const BlockQ8K*>(row)[g / per];
        const int j = int(g % per);
        p = b.qs + G * j, d = b.d;
        int sum = b.bsums[j * G / 16];
        if (G == 32) sum += b.bsums[2 * j + 1];
        s = block_sums(w) ? float(sum) : d * float(sum);
      }
      int8_t* o = q + g * G * 16;
      for (int c = 0; c < G / 4; ++c) std::memcpy(o + (c * 16 + r) * 4, p + 4 * c, 4);
      dx[g * 16 + r] = d, sx[g * 16 + r] = s;
    }
  }
}

// ---- the tile product ---------------------------------------------------------------------

#if defined(RLX_HAVE_AMX)

namespace {

struct TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0, 1: the int32 sums (16 weight rows x 16 activation rows); 2, 3: weights (16 rows
// of G bytes); 4, 5: activations (G / 4 rows of 16 x 4 bytes). Two of each, so that the next
// group's product runs while this one's sums are scaled.
TileConfig config_for(int G) {
  TileConfig c;
  for (int t : {0, 1}) c.rows[t] = 16, c.colsb[t] = 64;
  for (int t : {2, 3}) c.rows[t] = 16, c.colsb[t] = uint16_t(G);
  for (int t : {4, 5}) c.rows[t] = uint8_t(G / 4), c.colsb[t] = 64;
  return c;
}

// acc[r] (activation rows in the lanes) += the group's sums of weight row r, scaled.
RLX_AMX inline void scale_into(__m512 (&acc)[16], const int32_t* c, const float* ws,
                               const float* wm, const float* ad, const float* as, bool mins) {
  const __m512 dx = _mm512_loadu_ps(ad), sx = _mm512_loadu_ps(as);
  for (int r = 0; r < 16; ++r) {
    // (The masked form: GCC 12 warns on the unmasked one's undefined source.)
    const __m512 v = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_load_si512(c + 16 * r));
    acc[r] = _mm512_fmadd_ps(v, _mm512_mul_ps(dx, _mm512_set1_ps(ws[r])), acc[r]);
    if (mins) acc[r] = _mm512_fmadd_ps(sx, _mm512_set1_ps(wm[r]), acc[r]);
  }
}

// Groups g and g + 1: the int32 sums of the strip's 16 weight rows by the block's 16
// activation rows into c[0], c[1] (two tiles, so that the second product runs while the
// first one's sums are scaled).
RLX_AMX inline void tile_pair(const int8_t* wq, const int8_t* aq, int64_t g, int G, int64_t k,
                              int32_t (&c)[2][256]) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_loadd(2, wq + g * G, k);
  _tile_loadd(4, aq + g * G * 16, 64);
  _tile_dpbssd(0, 2, 4);
  _tile_loadd(3, wq + (g + 1) * G, k);
  _tile_loadd(5, aq + (g + 1) * G * 16, 64);
  _tile_dpbssd(1, 3, 5);
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
}

// One group's tile sums t into a block's integer sums (times the integer scales ws) and the
// activation group sums as into its min sums (times the integer mins wm). A function, not a
// lambda: GCC gives a lambda no target attribute of its enclosing function.
RLX_AMX inline void group_sums(__m512i (&isum)[16], __m512 (&msum)[16], const int32_t* t,
                               const float* ws, const float* wm, const float* as, bool mins) {
  for (int r = 0; r < 16; ++r)
    isum[r] = _mm512_add_epi32(
        isum[r], _mm512_mullo_epi32(_mm512_load_si512(t + 16 * r), _mm512_set1_epi32(int(ws[r]))));
  if (!mins) return;
  const __m512 gs = _mm512_loadu_ps(as);
  for (int r = 0; r < 16; ++r) msum[r] = _mm512_fmadd_ps(gs, _mm512_set1_ps(wm[r]), msum[r]);
}

// The block_sums form of amx_tile: per block of 256, int32 sums of every group's tile times
// its integer scale (and of the activation group sums times the integer mins), then
// acc = fma(sums, d_w d_x, acc) and acc = fma(mins, -(d_x dmin_w), acc): ggml's AMX order.
// The mins' sums go in f32, exactly: every partial sum is an integer below 2^24 (8 groups of
// 32 values, |sum| <= 32 * 127, mins <= 63). Two groups' tiles in flight, as amx_tile.
RLX_AMX void tile_block_sums(DType w, const uint8_t* strip, int64_t k, const uint8_t* act,
                             __m512 (&acc)[16]) {
  const int G = amx_group(w), per = kQK_K / G;
  const int64_t groups = k / G;
  const auto* wq = reinterpret_cast<const int8_t*>(strip);
  const auto* ws = reinterpret_cast<const float*>(strip + 16 * k);
  const float *wm = ws + 16 * groups, *bd = wm + 16 * groups, *bm = bd + 16 * (k / kQK_K);
  const auto* aq = reinterpret_cast<const int8_t*>(act);
  const auto* ad = reinterpret_cast<const float*>(act + 16 * k);
  const float* as = ad + 16 * groups;
  const bool mins = has_min(w);
  alignas(64) int32_t c[2][256];
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    __m512i isum[16];
    __m512 msum[16];
    for (int r = 0; r < 16; ++r) isum[r] = _mm512_setzero_si512(), msum[r] = _mm512_setzero_ps();
    for (int64_t g = b * per; g < (b + 1) * per; g += 2) {  // per is even (8 or 16)
      tile_pair(wq, aq, g, G, k, c);
      group_sums(isum, msum, c[0], ws + 16 * g, wm + 16 * g, as + 16 * g, mins);
      group_sums(isum, msum, c[1], ws + 16 * (g + 1), wm + 16 * (g + 1), as + 16 * (g + 1), mins);
    }
    const __m512 dx = _mm512_loadu_ps(ad + 16 * b * per);  // the activation rows' block d
    for (int r = 0; r < 16; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, isum[r]),
                               _mm512_mul_ps(dx, _mm512_set1_ps(bd[16 * b + r])), acc[r]);
      if (mins)
        acc[r] =
            _mm512_fmadd_ps(msum[r], _mm512_mul_ps(dx, _mm512_set1_ps(-bm[16 * b + r])), acc[r]);
    }
  }
}

}  // namespace

bool amx_usable() {
  static const bool ok = [] {
    if (!cpu_isa_avx512()) return false;  // a lower level chosen (RLX_CPU_ISA), or no AVX-512
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx = (d >> 24 & 1) && (d >> 25 & 1);  // tile, int8
    const bool avx512 =
        (b >> 16 & 1) && (b >> 17 & 1) && (b >> 30 & 1) && (b >> 31 & 1);  // f dq bw vl
    if (!amx || !avx512 || !__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return false;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    // The OS saves SSE, AVX, the AVX-512 state and the tile state (bits 17, 18).
    if ((lo & 0x600e6u) != 0x600e6u) return false;
    // Linux hands the tile data state out on request (ARCH_REQ_XCOMP_PERM, XTILEDATA).
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return ok;
}

RLX_AMX void amx_tile(DType w, const uint8_t* strip, int64_t k, const uint8_t* act, int mrows,
                      int nrows, float* y, int64_t ldy) {
  const int G = amx_group(w);
  const int64_t groups = k / G;
  const TileConfig cfg = config_for(G);
  _tile_loadconfig(&cfg);
  const auto* wq = reinterpret_cast<const int8_t*>(strip);
  const auto* ws = reinterpret_cast<const float*>(strip + 16 * k);
  const float* wm = ws + 16 * groups;
  const auto* aq = reinterpret_cast<const int8_t*>(act);
  const auto* ad = reinterpret_cast<const float*>(act + 16 * k);
  const float* as = ad + 16 * groups;
  const bool mins = has_min(w);
  alignas(64) int32_t c[2][256];
  __m512 acc[16];
  for (auto& v : acc) v = _mm512_setzero_ps();
  int64_t g = block_sums(w) ? groups : 0;
  if (block_sums(w)) tile_block_sums(w, strip, k, act, acc);
  for (; g + 2 <= groups; g += 2) {
    tile_pair(wq, aq, g, G, k, c);
    scale_into(acc, c[0], ws + 16 * g, wm + 16 * g, ad + 16 * g, as + 16 * g, mins);
    scale_into(acc, c[1], ws + 16 * (g + 1), wm + 16 * (g + 1), ad + 16 * (g + 1),
               as + 16 * (g + 1), mins);
  }
  if (g < groups) {  // an odd group count
    _tile_zero(0);
    _tile_loadd(2, wq + g * G, k);
    _tile_loadd(4, aq + g * G * 16, 64);
    _tile_dpbssd(0, 2, 4);
    _tile_stored(0, c[0], 64);
    scale_into(acc, c[0], ws + 16 * g, wm + 16 * g, ad + 16 * g, as + 16 * g, mins);
  }
  alignas(64) float out[16][16];
  for (int r = 0; r < 16; ++r) _mm512_store_ps(out[r], acc[r]);
  for (int i = 0; i < mrows; ++i)
    for (int r = 0; r < nrows; ++r) y[i * ldy + r] = out[r][i];
}

RLX_AMX void amx_release() { _tile_release(); }

#else

bool amx_usable() { return false; }
void amx_tile(DType, const uint8_t*, int64_t, const uint8_t*, int, int, float*, int64_t) {}
void amx_release() {}

#endif

bool amx_supported(DType w) { return is_quantized(w) && amx_usable(); }

}  // namespace qdot
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
