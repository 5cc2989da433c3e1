// attention_cached(q [B, S, H, D], k_cache, v_cache [B, KVH, C, D], pos [B]) on the CPU.
//
// A task is one (sequence b, KV head, block of query rows): the block's G = H / KVH query
// heads of every row in it share the KV head's rows, so each key and value row is read
// (and widened from f16 / bf16) once per block, not once per query. Keys stream in chunks
// of kKeys rows: the scores of a chunk are a small GEMM against the chunk's keys
// transposed to [D, kKeys], the outputs a GEMM against its values. The scores of a task's
// rows are kept whole (rows x keys floats) so that each softmax is normalised before the
// values: the order of operations ggml uses, which greedy parity with llama.cpp needs.
// Decode (S = 1) makes B * KVH tasks of G rows; prefill blocks the rows so that a block has
// about 64 query vectors. Buffers are per thread and grow once (no allocation per call).
#include <cmath>
#include <iterator>
#include <limits>

#include "backend/cpu/isa.h"
#include "backend/cpu/llm_kernels.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

constexpr int64_t kKeys = 64;  // keys per chunk (the scores' GEMM width)
constexpr int64_t kRows = 64;  // query vectors per task, roughly

// n values of T as floats.
template <class T>
inline void widen_row(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
    return;
  }
  int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    if constexpr (std::is_same_v<T, f16_t>)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    else
      _mm256_storeu_ps(dst + i,
                       _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
#endif
  for (; i < n; ++i) dst[i] = load(src[i]);
}

#if defined(__AVX2__) && defined(__F16C__)
// 8 values of T as floats.
template <class T>
inline __m256 load8(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same_v<T, f16_t>) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// r[i][j] <- r[j][i] for an 8 x 8 block of floats.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}
#endif

// kt[e * ld + j] = k[j][e] as floats for n rows of d; krow: d floats of scratch. Blocks of
// 8 x 8 go through registers (a scalar transpose would cost more than the scores' GEMM at
// decode).
template <class T>
inline void keys_transposed(const T* k, int64_t n, int64_t d, float* kt, int64_t ld, float* krow) {
  int64_t j = 0;
#if defined(__AVX2__) && defined(__F16C__)
  if (d % 8 == 0)
    for (; j + 8 <= n; j += 8)
      for (int64_t e = 0; e < d; e += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = load8(k + (j + i) * d + e);
        transpose8(r);
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt + (e + i) * ld + j, r[i]);
      }
#endif
  for (; j < n; ++j) {
    widen_row(k + j * d, krow, d);
    for (int64_t e = 0; e < d; ++e) kt[e * ld + j] = krow[e];
  }
}

// Register tiles sized for 16 vector registers (AVX2): MR <= 4 rows by kTile floats keep
// at most 8 accumulators live, with room for the loads.
constexpr int64_t kTile = 16;

// s[r][0..kKeys) = q[r][0..d) . kt[0..d)[0..kKeys) for MR rows (q rows d apart, s rows ls).
template <int MR>
inline void score_block(const float* q, int64_t d, const float* kt, float* s, int64_t ls) {
  for (int64_t j0 = 0; j0 < kKeys; j0 += kTile) {
    float acc[MR][kTile] = {};
    for (int64_t e = 0; e < d; ++e) {
      const float* kr = kt + e * kKeys + j0;
      for (int r = 0; r < MR; ++r) {
        const float a = q[r * d + e];
#pragma omp simd
        for (int64_t j = 0; j < kTile; ++j) acc[r][j] += a * kr[j];
      }
    }
    for (int r = 0; r < MR; ++r) std::memcpy(s + r * ls + j0, acc[r], sizeof(acc[r]));
  }
}

// o[r][0..d) += sum_j p[r][j] v[j][0..d) over n keys, for MR rows (p rows lp apart).
template <int MR>
inline void value_block(const float* p, int64_t lp, int64_t n, const float* v, int64_t d,
                        float* o) {
  int64_t c0 = 0;
  for (; c0 + kTile <= d; c0 += kTile) {
    float acc[MR][kTile];
    for (int r = 0; r < MR; ++r) std::memcpy(acc[r], o + r * d + c0, sizeof(acc[r]));
    for (int64_t j = 0; j < n; ++j) {
      const float* vr = v + j * d + c0;
      for (int r = 0; r < MR; ++r) {
        const float pj = p[r * lp + j];
#pragma omp simd
        for (int64_t t = 0; t < kTile; ++t) acc[r][t] += pj * vr[t];
      }
    }
    for (int r = 0; r < MR; ++r) std::memcpy(o + r * d + c0, acc[r], sizeof(acc[r]));
  }
  if (c0 == d) return;
  for (int r = 0; r < MR; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const float pj = p[r * lp + j];
      for (int64_t t = c0; t < d; ++t) o[r * d + t] += pj * v[j * d + t];
    }
}

// Runs f.template operator()<MR>(first_row) over m rows in register blocks of 4, 2, 1.
template <class F>
inline void by_row_blocks(int64_t m, F&& f) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) f.template operator()<4>(i);
  for (; i + 2 <= m; i += 2) f.template operator()<2>(i);
  for (; i < m; ++i) f.template operator()<1>(i);
}

// A few query rows (decode: the G heads of one KV head) read each key and value row once,
// straight from the cache: per-key dot products cost less than the chunks' transposes.
constexpr int64_t kDirectRows = 8;

// s[r * ls + j] = q_r . k_j for the keys j < n (q rows d apart).
template <class TK>
void direct_scores(const float* q, int64_t m, const TK* k, int64_t n, int64_t d, float* s,
                   int64_t ls, float* krow) {
  for (int64_t j = 0; j < n; ++j) {
    const TK* kr = k + j * d;
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    if (d % 8 == 0) {
      for (int64_t r = 0; r < m; ++r) {
        const float* qr = q + r * d;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t e = 0; e < d; e += 8)
          acc = _mm256_fmadd_ps(load8(kr + e), _mm256_loadu_ps(qr + e), acc);
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        s[r * ls + j] = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
      }
      continue;
    }
#endif
    widen_row(kr, krow, d);
    for (int64_t r = 0; r < m; ++r) {
      float acc = 0;
      for (int64_t e = 0; e < d; ++e) acc += q[r * d + e] * krow[e];
      s[r * ls + j] = acc;
    }
  }
}

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
// direct_values for M rows and d % 8 == 0: eight columns at a time, the rows' sums in
// registers across every key (the same order of additions as a row at a time through
// memory, without its loads and stores).
template <int M, class TK>
void values_in_registers(const float* p, int64_t lp, const TK* v, int64_t n, int64_t d, float* o) {
  for (int64_t e = 0; e < d; e += 8) {
    __m256 acc[M];
    for (int r = 0; r < M; ++r) acc[r] = _mm256_loadu_ps(o + r * d + e);
    for (int64_t j = 0; j < n; ++j) {
      const __m256 ve = load8(v + j * d + e);
      for (int r = 0; r < M; ++r)
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + r * lp + j), ve, acc[r]);
    }
    for (int r = 0; r < M; ++r) _mm256_storeu_ps(o + r * d + e, acc[r]);
  }
}
#endif

// o[r] += Σ_j p[r * lp + j] v_j over the keys j < n.
template <class TK>
void direct_values(const float* p, int64_t lp, int64_t m, const TK* v, int64_t n, int64_t d,
                   float* o, float* vrow) {
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
  if (d % 8 == 0 && m >= 1 && m <= kDirectRows) {
    using Fn = void (*)(const float*, int64_t, const TK*, int64_t, int64_t, float*);
    static constexpr Fn by_rows[] = {values_in_registers<1, TK>, values_in_registers<2, TK>,
                                     values_in_registers<3, TK>, values_in_registers<4, TK>,
                                     values_in_registers<5, TK>, values_in_registers<6, TK>,
                                     values_in_registers<7, TK>, values_in_registers<8, TK>};
    static_assert(std::size(by_rows) == kDirectRows);
    return by_rows[m - 1](p, lp, v, n, d, o);
  }
#endif
  for (int64_t j = 0; j < n; ++j) {
    const TK* vr = v + j * d;
    widen_row(vr, vrow, d);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t e = 0; e < d; ++e) o[r * d + e] += p[r * lp + j] * vrow[e];
  }
}

struct Scratch {
  std::vector<float> q, kt, krow, v, s, o, acc, vt;
  std::vector<int64_t> at;  // each query vector's position
};

struct Problem {
  int64_t b = 0, s = 0, h = 0, kvh = 0, c = 0, d = 0, g = 0;  // g = H / KVH
  int64_t block = 1, blocks = 1;                              // query rows per task
  float scale = 1;
  const int64_t* pos = nullptr;
};

// x[0, n) times `scale`, rounded to T's precision (nearest even; nothing more for f32).
template <class T>
inline void scale_rounded(float* x, int64_t n, float scale) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    if constexpr (std::is_same_v<T, f16_t>) {
      v = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else if constexpr (std::is_same_v<T, bf16_t>) {  // add half an ulp (ties to even), cut
      __m256i u = _mm256_castps_si256(v);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
      u = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
      v = _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(int(0xffff0000u))));
    }
    _mm256_storeu_ps(x + i, v);
  }
#endif
  for (; i < n; ++i) {
    x[i] *= scale;
    if constexpr (!std::is_same_v<T, float>) x[i] = load(store<T>(x[i]));
  }
}

// The task's outputs (rows s0 .. s1 of sequence b, the query heads of KV head kh) into y.
template <class TQ>
void write_rows(const Problem& pb, int64_t b, int64_t kh, int64_t s0, int64_t s1, const float* o,
                TQ* y) {
  const int64_t d = pb.d, g = pb.g;
  for (int64_t si = s0; si < s1; ++si)
    for (int64_t gg = 0; gg < g; ++gg) {
      const float* orow = o + ((si - s0) * g + gg) * d;
      TQ* yr = y + ((b * pb.s + si) * pb.h + kh * g + gg) * d;
      for (int64_t e = 0; e < d; ++e) yr[e] = store<TQ>(orow[e]);
    }
}

// Each row's scores (s rows ls apart) scaled, softmaxed as ggml does (the sum in double,
// then one f32 factor) and rounded to TK, zero from its last visible key to ls.
template <class TK>
void softmax_rows(const Problem& pb, int64_t m, int64_t keys, int64_t ls, Scratch& w) {
  for (int64_t r = 0; r < m; ++r) {
    float* sr = w.s.data() + r * ls;
    const int64_t nv = std::min(w.at[size_t(r)] + 1, keys);  // causal: keys up to its position
    for (int64_t j = 0; j < nv; ++j) sr[j] *= pb.scale;
    const float inv = float(1.0 / softmax_exp(sr, nv, max_of(sr, nv)));
    scale_rounded<TK>(sr, nv, inv);
    std::fill(sr + nv, sr + ls, 0.f);
  }
}

#if defined(__AVX2__) && defined(__FMA__)
// ---- llama.cpp's order of additions ----------------------------------------------------
// ggml's CPU attention (no flash attention) is two matmuls around a softmax. A score is
// ggml_vec_dot (kGL-float lanes in four accumulators over blocks of 4 kGL floats, folded
// (a0 + a2) + (a1 + a3), then across the lanes; the tail one product at a time, in f32 for
// f32 and in f64 for f16), except from 2 query rows with a half cache, where llamafile's
// sgemm takes the product (one accumulator of kGL lanes per output, then across the
// lanes). The values are sgemm's from 2 query rows and ggml_vec_dot's for one. Each runs
// over llama.cpp's n_kv keys (the cache view padded to a multiple of 256), whose masked
// ones add exact zeros. The same additions in the same order give the same bits: with
// quantized weights every ulp can move an int8 rounding of the next matmul's input
// (llm_kernels.h, gx), and greedy tokens then part from llama.cpp's.
constexpr int kGL = gx::kLanes;

// The lanes' total as ggml_vec_dot folds them (AVX-512: the halving of
// _mm512_reduce_add_ps; AVX2: two hadds after the halves).
inline float vec_dot_lanes(gx::V a) {
#if defined(__AVX512F__)
  return _mm512_reduce_add_ps(a);
#else
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  t = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(t, t));
#endif
}

// kGL values of T (f32 or f16) as floats.
template <class T>
inline gx::V loadv(const T* p) {
  if constexpr (std::is_same_v<T, float>) return gx::load(p);
#if defined(__AVX512F__)
  else
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#else
  else
    return load8(p);
#endif
}

// ggml_vec_dot_f32 (Half: ggml_vec_dot_f16 on halves widened to x, y).
template <bool Half>
inline float vec_dot(const float* x, const float* y, int64_t n) {
  gx::V a[4] = {gx::set1(0.f), gx::set1(0.f), gx::set1(0.f), gx::set1(0.f)};
  int64_t i = 0;
  for (; i + 4 * kGL <= n; i += 4 * kGL)
    for (int t = 0; t < 4; ++t)
      a[t] = gx::fmadd(gx::load(x + i + t * kGL), gx::load(y + i + t * kGL), a[t]);
  const float s = vec_dot_lanes((a[0] + a[2]) + (a[1] + a[3]));
  if constexpr (Half) {
    double sd = s;
    for (; i < n; ++i) sd += double(x[i] * y[i]);
    return float(sd);
  } else {
    float sf = s;
    for (; i < n; ++i) sf = std::fma(x[i], y[i], sf);
    return sf;
  }
}

// sgemm's product of n % kGL == 0 floats: one accumulator, then the halving of the lanes.
inline float sgemm_dot(const float* x, const float* y, int64_t n) {
  gx::V a = gx::set1(0.f);
  for (int64_t i = 0; i < n; i += kGL) a = gx::fmadd(gx::load(x + i), gx::load(y + i), a);
  return gx::sum(a);
}

// llama.cpp's n_kv for `keys` visible keys in a cache of c rows.
inline int64_t ggml_kv_view(int64_t keys, int64_t c) {
  return std::min(c, std::max<int64_t>(256, (keys + 255) / 256 * 256));
}

// Halves a[0, 2h) into a[0, h) down to a[0]: the halving fold of the lanes.
inline gx::V halving(gx::V* a) {
  for (int h = kGL / 2; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l) a[l] = a[l] + a[l + h];
  return a[0];
}

// values_ggml's lane sums for d % kGL == 0, kGL outputs at a time with every lane in a
// register: lane l's chains over the keys j = l, l + kGL, ... (sgemm) or its four of
// ggml_vec_dot (lanes q kGL + l, q < 4, over the first np keys), folded as values_ggml folds
// them, into o.
template <class TK>
void lanes_in_registers(const float* p, int64_t np, const TK* v, int64_t d, bool sgemm, float* o) {
  const int64_t stride = sgemm ? kGL : 4 * kGL;
  const int chains = sgemm ? 1 : 4;
  for (int64_t e0 = 0; e0 < d; e0 += kGL) {
    gx::V t[kGL];
    for (int l = 0; l < kGL; ++l) {
      gx::V a[4] = {gx::set1(0.f), gx::set1(0.f), gx::set1(0.f), gx::set1(0.f)};
      for (int q = 0; q < chains; ++q)
        for (int64_t j = q * kGL + l; j < np; j += stride)
          a[q] = gx::fmadd(gx::set1(p[j]), loadv(v + j * d + e0), a[q]);
      t[l] = sgemm ? a[0] : (a[0] + a[2]) + (a[1] + a[3]);
    }
#if !defined(__AVX512F__)
    if (!sgemm) {  // vec_dot_lanes' AVX2 pairing
      for (int l = 0; l < 4; ++l) t[l] = t[l] + t[l + 4];
      gx::store(o + e0, (t[0] + t[1]) + (t[2] + t[3]));
      continue;
    }
#endif
    gx::store(o + e0, halving(t));
  }
}

// values_ggml's lane sums through memory (any d): acc (4 kGL * d floats) holds the lanes,
// folded into acc[0, d).
template <class TK>
void lanes_in_memory(const float* p, int64_t np, const TK* v, int64_t d, bool sgemm, float* acc) {
  const int64_t lanes = sgemm ? kGL : 4 * kGL;
  std::fill(acc, acc + lanes * d, 0.f);
  for (int64_t j = 0; j < np; ++j) {
    float* a = acc + (j % lanes) * d;
    const TK* vr = v + j * d;
    const gx::V pj = gx::set1(p[j]);
    int64_t e = 0;
    for (; e + kGL <= d; e += kGL) gx::store(a + e, gx::fmadd(pj, loadv(vr + e), gx::load(a + e)));
    for (; e < d; ++e) a[e] = std::fma(p[j], load(vr[e]), a[e]);
  }
  auto fold = [&](int64_t to, int64_t from) {
    float *a = acc + to * d, *b = acc + from * d;
#pragma omp simd
    for (int64_t e = 0; e < d; ++e) a[e] += b[e];
  };
  if (!sgemm)
    for (int64_t l = 0; l < kGL; ++l) {
      fold(l, 2 * kGL + l);
      fold(kGL + l, 3 * kGL + l);
      fold(l, kGL + l);
    }
#if !defined(__AVX512F__)
  if (!sgemm) {  // vec_dot_lanes' AVX2 pairing
    for (int64_t l = 0; l < 4; ++l) fold(l, l + 4);
    fold(0, 1);
    fold(2, 3);
    fold(0, 2);
  } else
#endif
    for (int64_t h = kGL / 2; h >= 1; h /= 2)  // the halving of the lanes
      for (int64_t l = 0; l < h; ++l) fold(l, l + h);
}

// o[0, d) = sum_j p[j] v[j] over the nv visible keys (v: rows of TK), in sgemm's lanes or
// (!sgemm) ggml_vec_dot's over n_kv keys. acc: 4 kGL * d floats of scratch.
template <bool Half, class TK>
void values_ggml(const float* p, int64_t nv, const TK* v, int64_t d, bool sgemm, int64_t n_kv,
                 float* acc, float* o) {
  const int64_t lanes = sgemm ? kGL : 4 * kGL;
  const int64_t np = sgemm ? nv : std::min(nv, n_kv / lanes * lanes);
  if (d % kGL == 0) {
    lanes_in_registers(p, np, v, d, sgemm, o);
  } else {
    lanes_in_memory(p, np, v, d, sgemm, acc);
    std::copy(acc, acc + d, o);
  }
  for (int64_t e = 0; e < d; ++e) {  // ggml_vec_dot's tail
    if constexpr (Half) {
      double sd = o[e];
      for (int64_t j = np; j < nv; ++j) sd += double(p[j] * load(v[j * d + e]));
      o[e] = float(sd);
    } else {
      for (int64_t j = np; j < nv; ++j) o[e] = std::fma(p[j], load(v[j * d + e]), o[e]);
    }
  }
}

// ---- the same sums, kGL keys or kGL outputs at a time -------------------------------
// Each lane of a per-key reduction becomes a vector over kGL keys (keys transposed), so
// the folds are vertical adds in the same pairing: the same bits, without a horizontal
// reduction per score.

// s[t] = the scores of q against kGL keys (kt: transposed, rows ld apart), as sgemm_dot
// (Sgemm) or vec_dot<Half> forms each.
template <bool Sgemm, bool Half>
inline void scores_block(const float* q, const float* kt, int64_t ld, int64_t d, float* s) {
  gx::V c[kGL];
  const int64_t np = Sgemm ? d : d / (4 * kGL) * (4 * kGL);
  if constexpr (Sgemm) {  // kGL independent chains, one step of each per block of kGL
    for (int l = 0; l < kGL; ++l) c[l] = gx::set1(0.f);
    for (int64_t b = 0; b < d; b += kGL)
      for (int l = 0; l < kGL; ++l)
        c[l] = gx::fmadd(gx::set1(q[b + l]), gx::load(kt + (b + l) * ld), c[l]);
  }
  for (int l = 0; l < kGL && !Sgemm; ++l) {  // four chains per lane
    gx::V a[4] = {gx::set1(0.f), gx::set1(0.f), gx::set1(0.f), gx::set1(0.f)};
    for (int64_t b = 0; b < np; b += 4 * kGL)
      for (int t = 0; t < 4; ++t) {
        const int64_t i = b + t * kGL + l;
        a[t] = gx::fmadd(gx::set1(q[i]), gx::load(kt + i * ld), a[t]);
      }
    c[l] = (a[0] + a[2]) + (a[1] + a[3]);
  }
  gx::V r;
#if !defined(__AVX512F__)
  if constexpr (!Sgemm) {  // vec_dot_lanes' AVX2 pairing
    for (int l = 0; l < 4; ++l) c[l] = c[l] + c[l + 4];
    r = (c[0] + c[1]) + (c[2] + c[3]);
  } else
#endif
    r = halving(c);
  gx::store(s, r);
  if (np == d) return;
  for (int t = 0; t < kGL; ++t) {  // vec_dot's tail
    if constexpr (Half) {
      double sd = s[t];
      for (int64_t i = np; i < d; ++i) sd += double(q[i] * kt[i * ld + t]);
      s[t] = float(sd);
    } else {
      for (int64_t i = np; i < d; ++i) s[t] = std::fma(q[i], kt[i * ld + t], s[t]);
    }
  }
}

#if defined(__AVX512F__)
// The 16 totals of a[t], each paired as _mm512_reduce_add_ps pairs its lanes (halves, then
// quarters, ...), folded together: lane 4 u + w holds a[4 w + u]'s.
inline __m512 fold16(const __m512* a) {
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 4; ++i)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int i = 0; i < 2; ++i) {
    const __m512d x = _mm512_castps_pd(c[2 * i]), y = _mm512_castps_pd(c[2 * i + 1]);
    d[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// sgemm_dot's scores of MR rows of q (4: against 4 keys, 1: against 16) from key row k
// (rows d apart, d % 16 == 0) into s (rows ls apart): one accumulator per score, loads
// shared across the tile, and fold16 for the 16 lane sums at once.
template <int MR>
inline void scores_tile(const float* q, const float* k, int64_t d, float* s, int64_t ls) {
  static_assert(MR == 4 || MR == 1);
  constexpr int NK = 16 / MR;
  __m512 a[16];
  for (auto& x : a) x = _mm512_setzero_ps();
  for (int64_t i = 0; i < d; i += 16) {
    __m512 kv[NK];
    for (int c = 0; c < NK; ++c) kv[c] = _mm512_loadu_ps(k + c * d + i);
    for (int r = 0; r < MR; ++r) {
      const __m512 qv = _mm512_loadu_ps(q + r * d + i);
      for (int c = 0; c < NK; ++c) a[MR * c + r] = _mm512_fmadd_ps(kv[c], qv, a[MR * c + r]);
    }
  }
  const __m512 v = fold16(a);
  if constexpr (MR == 4) {  // lane 4 r + c: row r, key c
    _mm_storeu_ps(s, _mm512_extractf32x4_ps(v, 0));
    _mm_storeu_ps(s + ls, _mm512_extractf32x4_ps(v, 1));
    _mm_storeu_ps(s + 2 * ls, _mm512_extractf32x4_ps(v, 2));
    _mm_storeu_ps(s + 3 * ls, _mm512_extractf32x4_ps(v, 3));
  } else {  // key c in lane 4 (c % 4) + c / 4
    const __m512i at = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(s, _mm512_permutexvar_ps(at, v));
  }
}

// vec_dot's scores of one row q against 16 keys from k (rows d apart, d % 64 == 0): each
// key's four accumulators folded as ggml folds them, then fold16 across the 16 keys.
template <class TK>
inline void scores_vec16(const float* q, const TK* k, int64_t d, float* s) {
  __m512 v[16];
  for (int c = 0; c < 16; ++c) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (int64_t i = 0; i < d; i += 64)
      for (int t = 0; t < 4; ++t)
        a[t] =
            _mm512_fmadd_ps(loadv(k + c * d + i + 16 * t), _mm512_loadu_ps(q + i + 16 * t), a[t]);
    v[c] = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
  }
  const __m512i at = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_ps(s, _mm512_permutexvar_ps(at, fold16(v)));
}
#endif

// o[r][e] = sum_j p[r][j] v[j][e] for MR rows (p rows lp apart, zero from each row's
// last visible key to n) and four outputs e0 .. e0 + 4, in sgemm's lanes: key j in lane
// j % kGL, the lanes summed by halving. vt: the values transposed, rows lv apart.
template <int MR>
inline void values_sgemm(const float* p, int64_t lp, int64_t n, const float* vt, int64_t lv,
                         int64_t e0, float* o, int64_t d) {
  gx::V a[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < 4; ++c) a[r][c] = gx::set1(0.f);
  for (int64_t j = 0; j < n; j += kGL) {
    gx::V v[4];
    for (int c = 0; c < 4; ++c) v[c] = gx::load(vt + (e0 + c) * lv + j);
    for (int r = 0; r < MR; ++r) {
      const gx::V pr = gx::load(p + r * lp + j);
      for (int c = 0; c < 4; ++c) a[r][c] = gx::fmadd(v[c], pr, a[r][c]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < 4; ++c) o[r * d + e0 + c] = gx::sum(a[r][c]);
}

// run_task's scores, softmax and values in ggml's order (the queries already rounded to
// TK). Many rows (prefill) read keys and values widened or transposed once per task; a
// few (decode) read them straight from the cache.
template <class TK>
void task_ggml(const Problem& pb, int64_t m, int64_t keys, int64_t n_kv, const TK* kb, const TK* vb,
               Scratch& w) {
  constexpr bool half = !std::is_same_v<TK, float>;
  const int64_t d = pb.d;
  const bool rows2 = pb.s >= 2;  // sgemm's products (its conditions on the sizes, too)
  const bool sgemm_scores = half && rows2 && d % kGL == 0 && n_kv % 4 == 0;
  const bool sgemm_values = rows2 && n_kv % kGL == 0 && d % 4 == 0;
  const int64_t ls = (keys + kGL - 1) / kGL * kGL;
  if (m >= kGL) {
    // Many rows: keys and values transposed once ([d, ls], zero past the keys); the scores
    // by blocks of kGL keys, the values by register tiles of rows x 4 outputs.
    auto transposed = [&](const TK* src, std::vector<float>& dst) {
      dst.resize(size_t(d * ls));
      w.krow.resize(size_t(d));
      keys_transposed(src, keys, d, dst.data(), ls, w.krow.data());
      for (int64_t e = 0; e < d; ++e)
        std::fill(dst.begin() + e * ls + keys, dst.begin() + (e + 1) * ls, 0.f);
    };
#if defined(__AVX512F__)
    if (sgemm_scores) {  // the default f16 cache: keys widened (zero past the last) in tiles
      w.krow.resize(size_t(ls * d));
      widen_row(kb, w.krow.data(), keys * d);
      std::fill(w.krow.begin() + keys * d, w.krow.end(), 0.f);
      const float* kf = w.krow.data();
      for (int64_t j0 = 0; j0 < keys; j0 += 16)  // a block of keys stays in L1 for every row
        by_row_blocks(m, [&]<int MR>(int64_t r) {
          const int64_t last = w.at[size_t(r + MR - 1)];  // the rows' last visible key
          if (last < j0) return;
          float* sr = w.s.data() + r * ls + j0;
          const float* qr = w.q.data() + r * d;
          if constexpr (MR == 4) {  // 4 rows x 4 keys
            for (int64_t c = 0; c < 16 && j0 + c <= last; c += 4)
              scores_tile<4>(qr, kf + (j0 + c) * d, d, sr + c, ls);
          } else {  // a row x 16 keys
            for (int i = 0; i < MR; ++i)
              scores_tile<1>(qr + i * d, kf + j0 * d, d, sr + i * ls, ls);
          }
        });
    } else
#endif
    {
      transposed(kb, w.kt);
      for (int64_t j0 = 0; j0 < keys; j0 += kGL)  // a block of keys stays in L1 for every row
        for (int64_t r = 0; r < m; ++r) {
          if (w.at[size_t(r)] < j0) continue;  // causal: no key of the block is visible
          const float* qr = w.q.data() + r * d;
          float* sr = w.s.data() + r * ls + j0;
          if (sgemm_scores)
            scores_block<true, half>(qr, w.kt.data() + j0, ls, d, sr);
          else
            scores_block<false, half>(qr, w.kt.data() + j0, ls, d, sr);
        }
    }
    softmax_rows<TK>(pb, m, keys, ls, w);
    if (sgemm_values) {
      transposed(vb, w.vt);
      by_row_blocks(m, [&]<int MR>(int64_t r) {
        const int64_t n = std::min(w.at[size_t(r + MR - 1)] + 1, keys);  // the rows' last key
        for (int64_t e0 = 0; e0 < d; e0 += 4)
          values_sgemm<MR>(w.s.data() + r * ls, ls, (n + kGL - 1) / kGL * kGL, w.vt.data(), ls, e0,
                           w.o.data() + r * d, d);
      });
      return;
    }
  }
  // Few rows (decode): straight from the cache.
  if (m < kGL) {
#if defined(__AVX512F__)
    const bool by16 = !sgemm_scores && d % 64 == 0;  // vec_dot without a tail
#else
    const bool by16 = false;
#endif
    w.krow.resize(size_t(d));
    for (int64_t r = 0; r < m; ++r) {
      const float* qr = w.q.data() + r * d;
      float* sr = w.s.data() + r * ls;
      const int64_t nv = std::min(w.at[size_t(r)] + 1, keys);
      int64_t j = 0;
#if defined(__AVX512F__)
      // Whole blocks of 16 cache rows (past the last key: scores nobody reads).
      for (; by16 && j < nv && j + 16 <= pb.c; j += 16) scores_vec16(qr, kb + j * d, d, sr + j);
#endif
      for (; j < nv; ++j) {
        const float* kr = reinterpret_cast<const float*>(kb + j * d);
        if constexpr (half) {
          widen_row(kb + j * d, w.krow.data(), d);
          kr = w.krow.data();
        }
        sr[j] = sgemm_scores ? sgemm_dot(kr, qr, d) : vec_dot<half>(kr, qr, d);
      }
    }
    softmax_rows<TK>(pb, m, keys, ls, w);
  }
  w.acc.resize(size_t(4 * kGL * d));
  for (int64_t r = 0; r < m; ++r)
    values_ggml<half>(w.s.data() + r * ls, std::min(w.at[size_t(r)] + 1, keys), vb, d, sgemm_values,
                      n_kv, w.acc.data(), w.o.data() + r * d);
}
#endif

// One task in three passes over its keys: the scores of every visible key, the softmax of
// each row (normalised before the values meet it), then the values weighted. With a half
// cache the queries and the probabilities are rounded to the cache's precision first, so
// both products are half x half with f32 sums: what ggml computes for an f16 cache (and
// the GPU kernels do). f32 and f16 caches then go through task_ggml (ggml's exact order);
// bf16 caches and builds without AVX2 / FMA through the GEMM tiles below.
template <class TQ, class TK>
void run_task(const Problem& pb, int64_t task, const TQ* q, const TK* k, const TK* v, TQ* y,
              Scratch& w) {
  const int64_t d = pb.d, g = pb.g;
  // Within a (b, KV head), blocks go from the last (most keys) to the first.
  const int64_t bh = task / pb.blocks, blk = pb.blocks - 1 - task % pb.blocks;
  const int64_t b = bh / pb.kvh, kh = bh % pb.kvh;
  const int64_t s0 = blk * pb.block, s1 = std::min(pb.s, s0 + pb.block);
  const int64_t m = (s1 - s0) * g, p0 = pb.pos[b];
  const int64_t keys = p0 + s1;                           // rows 0 .. the last query's position
  const int64_t ls = (keys + kKeys - 1) / kKeys * kKeys;  // a score row, whole chunks
  w.q.resize(size_t(m * d));
  w.o.assign(size_t(m * d), 0.f);
  w.s.resize(size_t(m * ls));
  w.at.resize(size_t(m));
  w.kt.resize(size_t(d * kKeys));
  w.krow.resize(size_t(d));
  w.v.resize(size_t(kKeys * d));
  for (int64_t si = s0; si < s1; ++si)
    for (int64_t gg = 0; gg < g; ++gg) {
      const int64_t r = (si - s0) * g + gg;
      float* qr = w.q.data() + r * d;
      widen_row(q + ((b * pb.s + si) * pb.h + kh * g + gg) * d, qr, d);
      scale_rounded<TK>(qr, d, 1.f);
      w.at[size_t(r)] = p0 + si;
    }
  const TK* kb = k + (b * pb.kvh + kh) * pb.c * d;
  const TK* vb = v + (b * pb.kvh + kh) * pb.c * d;
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (!std::is_same_v<TK, bf16_t>) {
    w.s.resize(size_t(m * ((keys + kGL - 1) / kGL * kGL)));
    // llama.cpp's n_kv covers the whole batch (its last position), not this task's rows:
    // it decides which product (sgemm or vec_dot) and which tail the values take.
    task_ggml(pb, m, keys, ggml_kv_view(p0 + pb.s, pb.c), kb, vb, w);
    return write_rows(pb, b, kh, s0, s1, w.o.data(), y);
  }
#endif
  const bool direct = m <= kDirectRows;
  if (direct) direct_scores(w.q.data(), m, kb, keys, d, w.s.data(), ls, w.krow.data());
  for (int64_t j0 = 0; !direct && j0 < keys; j0 += kKeys) {
    const int64_t n = std::min(kKeys, keys - j0);
    // The chunk's keys as [D, kKeys] (unused columns zero).
    keys_transposed(kb + j0 * d, n, d, w.kt.data(), kKeys, w.krow.data());
    if (n < kKeys)
      for (int64_t e = 0; e < d; ++e)
        std::fill(w.kt.begin() + e * kKeys + n, w.kt.begin() + (e + 1) * kKeys, 0.f);
    by_row_blocks(m, [&]<int MR>(int64_t r) {
      score_block<MR>(w.q.data() + r * d, d, w.kt.data(), w.s.data() + r * ls + j0, ls);
    });
  }
  softmax_rows<TK>(pb, m, keys, ls, w);
  if (direct) direct_values(w.s.data(), ls, m, vb, keys, d, w.o.data(), w.krow.data());
  for (int64_t j0 = 0; !direct && j0 < keys; j0 += kKeys) {
    const int64_t n = std::min(kKeys, keys - j0);
    const float* vc;
    if constexpr (std::is_same_v<TK, float>) {
      vc = vb + j0 * d;
    } else {
      widen_row(vb + j0 * d, w.v.data(), n * d);
      vc = w.v.data();
    }
    by_row_blocks(m, [&]<int MR>(int64_t r) {
      value_block<MR>(w.s.data() + r * ls + j0, ls, n, vc, d, w.o.data() + r * d);
    });
  }
  write_rows(pb, b, kh, s0, s1, w.o.data(), y);
}

}  // namespace

void attention_cached_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                             std::span<Tensor> out) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  Problem pb;
  pb.b = q.shape()[0];
  pb.s = q.shape()[1];
  pb.h = q.shape()[2];
  pb.d = q.shape()[3];
  pb.kvh = k.shape()[1];
  pb.c = k.shape()[2];
  if (pb.kvh == 0 || pb.h % pb.kvh != 0)
    fail<ValueError>("attention_cached", "expected query heads H = ", pb.h,
                     " to be a multiple of KV heads KVH = ", pb.kvh);
  thread_local std::vector<int64_t> pos;
  read_positions("attention_cached", in[3], pb.s, pb.c, pos);
  pb.pos = pos.data();
  if (out[0].numel() == 0) return;
  pb.g = pb.h / pb.kvh;
  double scale = ctx.attrs.get_float("scale");
  pb.scale = float(scale != 0 ? scale : 1.0 / std::sqrt(double(pb.d)));
  const int64_t threads = threads_here();
  pb.block = std::max<int64_t>(1, kRows / pb.g);
  auto blocks_of = [&](int64_t blk) { return (pb.s + blk - 1) / blk; };
  while (pb.block > 1 && pb.b * pb.kvh * blocks_of(pb.block) < 2 * threads) pb.block /= 2;
  pb.blocks = blocks_of(pb.block);
  const int64_t tasks = pb.b * pb.kvh * pb.blocks;
  auto run = [&](auto qt, auto kt) {
    using TQ = typename decltype(qt)::type;
    using TK = typename decltype(kt)::type;
    const TQ* qp = q.data_as<TQ>();
    const TK *kp = k.data_as<TK>(), *vp = v.data_as<TK>();
    TQ* yp = out[0].data_as<TQ>();
    const int nt = int(std::min(threads, tasks));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      thread_local Scratch w;
      run_task(pb, t, qp, kp, vp, yp, w);
    }
  };
  auto half_or_f32 = [](DType dt, const char* where, auto&& f) {
    visit_float(dt, where, [&](auto tag) {
      if constexpr (!std::is_same_v<typename decltype(tag)::type, double>) f(tag);
    });
  };
  half_or_f32(q.dtype(), "attention_cached", [&](auto qt) {
    half_or_f32(k.dtype(), "attention_cached", [&](auto kt) { run(qt, kt); });
  });
}

namespace {

// f64 runs through the decomposition (the gradient checks' dtype).
bool not_f64(const KernelQuery& q) {
  auto ok = [](DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; };
  return q.inputs.size() == 4 && ok(q.inputs[0].dtype) && ok(q.inputs[1].dtype);
}

}  // namespace

void register_attention_cached(KernelRegistry& r) {
  add_kernel(r, "attention_cached", attention_cached_kernel, not_f64);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
