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

#include "backend/cpu/llm_kernels.h"

namespace rlx::cpu {

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

// kt[e * kKeys + j] = k[j][e] as floats for the n <= kKeys rows of a chunk; krow: d floats
// of scratch. Blocks of 8 x 8 go through registers (a scalar transpose would cost more than
// the scores' GEMM at decode).
template <class T>
inline void keys_transposed(const T* k, int64_t n, int64_t d, float* kt, float* krow) {
  int64_t j = 0;
#if defined(__AVX2__) && defined(__F16C__)
  if (d % 8 == 0)
    for (; j + 8 <= n; j += 8)
      for (int64_t e = 0; e < d; e += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = load8(k + (j + i) * d + e);
        transpose8(r);
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt + (e + i) * kKeys + j, r[i]);
      }
#endif
  for (; j < n; ++j) {
    widen_row(k + j * d, krow, d);
    for (int64_t e = 0; e < d; ++e) kt[e * kKeys + j] = krow[e];
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
  std::vector<float> q, kt, krow, v, s, o;
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

// One task in three passes over its keys: the scores of every visible key, the softmax of
// each row (normalised before the values meet it), then the values weighted. With a half
// cache the queries and the probabilities are rounded to the cache's precision first, so
// both products are half x half with f32 sums: what ggml computes for an f16 cache (and
// the GPU kernels do), so greedy decoding follows llama.cpp's tokens.
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
  const bool direct = m <= kDirectRows;
  if (direct) direct_scores(w.q.data(), m, kb, keys, d, w.s.data(), ls, w.krow.data());
  for (int64_t j0 = 0; !direct && j0 < keys; j0 += kKeys) {
    const int64_t n = std::min(kKeys, keys - j0);
    // The chunk's keys as [D, kKeys] (unused columns zero).
    keys_transposed(kb + j0 * d, n, d, w.kt.data(), w.krow.data());
    if (n < kKeys)
      for (int64_t e = 0; e < d; ++e)
        std::fill(w.kt.begin() + e * kKeys + n, w.kt.begin() + (e + 1) * kKeys, 0.f);
    by_row_blocks(m, [&]<int MR>(int64_t r) {
      score_block<MR>(w.q.data() + r * d, d, w.kt.data(), w.s.data() + r * ls + j0, ls);
    });
  }
  for (int64_t r = 0; r < m; ++r) {
    float* sr = w.s.data() + r * ls;
    const int64_t nv = std::min(w.at[size_t(r)] + 1, keys);  // causal: keys up to its position
    for (int64_t j = 0; j < nv; ++j) sr[j] *= pb.scale;
    exp_shifted(sr, nv, max_of(sr, nv));
    double sum = 0;  // in double, then one f32 factor: ggml's rounding of the normaliser
    for (int64_t j = 0; j < nv; ++j) sum += sr[j];
    const float inv = float(1.0 / sum);
    scale_rounded<TK>(sr, nv, inv);
    std::fill(sr + nv, sr + ls, 0.f);
  }
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
  for (int64_t si = s0; si < s1; ++si)
    for (int64_t gg = 0; gg < g; ++gg) {
      const int64_t r = (si - s0) * g + gg;
      const float* orow = w.o.data() + r * d;
      TQ* yr = y + ((b * pb.s + si) * pb.h + kh * g + gg) * d;
      for (int64_t e = 0; e < d; ++e) yr[e] = store<TQ>(orow[e]);
    }
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

}  // namespace rlx::cpu
