// Internals shared by quant_dot.cpp (portable) and quant_avx2.cpp (AVX2): half-precision
// loads and the entry points of the vector code.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "backend/cpu/isa.h"
#include "backend/cpu/quant_dot.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace qdot {

// Storage of f16 / bf16 weights.
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};

inline float half(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}
// f rounded to the nearest half-precision value (ggml keeps activation scales as f16).
inline float round_half(float f) {
#if defined(__F16C__)
  return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
  return f16_to_f32(f32_to_f16(f));
#endif
}
inline float to_float(float f) { return f; }
inline float to_float(Half h) { return half(h.bits); }
inline float to_float(BHalf h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <DType T>
inline constexpr int dtype_block_v = T >= DType::q2_k&& T <= DType::q6_k ? quant::kQK_K
                                     : is_quantized(T)                   ? quant::kQK
                                                                         : 1;

// The 8 six-bit scales and 8 mins of a q4_k / q5_k block (quant::k4_scale_min), 4 bytes per
// word: sc[0] scales 0-3, sc[1] scales 4-7, mn likewise.
struct K4Scales {
  uint32_t sc[2], mn[2];
};
inline K4Scales k4_scale_words(const uint8_t* scales) {
  uint32_t s[3];
  std::memcpy(s, scales, 12);
  return {{s[0] & 0x3f3f3f3f, (s[2] & 0x0f0f0f0f) | (((s[0] >> 6) & 0x03030303) << 4)},
          {s[1] & 0x3f3f3f3f, ((s[2] >> 4) & 0x0f0f0f0f) | (((s[1] >> 6) & 0x03030303) << 4)}};
}

#if defined(__AVX2__)
// One block of rows8 activations in the form the rows8 dots read: run v (bytes 4v .. 4v + 3
// of the block's qs) broadcast to 32 bytes at runs + v * run_stride, 8 Σqs and the scale
// broadcast to 8 lanes each.
inline void expand_rows8(const BlockQ8& b, int8_t* runs, size_t run_stride, int32_t* sum8,
                         float* d) {
  for (int v = 0; v < 8; ++v) {
    int32_t run;
    std::memcpy(&run, b.qs + 4 * v, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(runs + v * run_stride), _mm256_set1_epi32(run));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sum8), _mm256_set1_epi32(8 * b.sum));
  _mm256_storeu_ps(d, _mm256_set1_ps(b.d));
}
#endif

// The AVX2 dots (null when not built with AVX2, or for a dtype without one), in_fours: for
// rows that llama.cpp's repacked GEMM takes four at a time (dot_fn).
DotFn avx2_dot_fn(DType w, int nr, bool in_fours);
// The AVX2 form of rows8 activation rows (expanded for the dots: 320 bytes per 32 values),
// made from k floats; 0 bytes / false when not built with AVX2.
size_t avx2_rows8_act_bytes(int64_t k);
bool avx2_rows8_act(const float* x, void* dst, int64_t k);
// The AVX2 dot_rows8 of q4_0 or q8_0 weights on those activations (false when not built
// with AVX2).
bool avx2_dot_rows8(DType w, const void* group, const uint8_t* act, size_t as, int nr, int64_t k,
                    float* out, int64_t os);
// The AVX-512 VNNI dots (quant_avx512.cpp; null where not built with it or for a dtype
// without one), tried before the AVX2 ones.
DotFn avx512_dot_fn(DType w, int nr);
// avx2_rows8_* for AVX-512 VNNI (640 bytes per 64 values), tried first.
size_t avx512_rows8_act_bytes(int64_t k);
bool avx512_rows8_act(const float* x, void* dst, int64_t k);
bool avx512_dot_rows8(DType w, const void* group, const uint8_t* act, size_t as, int nr, int64_t k,
                      float* out, int64_t os);
// The rows16 dots (rlx/quant.h) of `count` consecutive groups (gbytes apart) of q4_0, q8_0
// or q4_k weights on quantize_act's plain activation rows, group j's rows at out + 16 j;
// false where not built with AVX-512 VNNI (or another dtype). nr in [1, kMaxRows], or
// kWideRows where avx512_wide_rows16(w).
bool avx512_dot_rows16(DType w, const void* first, size_t gbytes, int64_t count, const uint8_t* act,
                       size_t as, int nr, int64_t k, float* out, int64_t os);
// Whether avx512_dot_rows16 takes kWideRows activation rows at once for w (q4_0, q8_0).
bool avx512_wide_rows16(DType w);
// Decodes like decode_row where AVX2 has a decoder for t (f16, bf16, q4_0 … q8_0); false
// otherwise (the portable decoder then runs).
bool avx2_decode_row(DType t, const void* src, float* dst, int64_t n);
// Activation quantizers: vectorised where AVX2 is, else the reference loops.
void quantize_q8_fast(const float* x, BlockQ8* y, int64_t k);
void quantize_q8k_fast(const float* x, BlockQ8K* y, int64_t k);
void quantize_q8_ref(const float* x, BlockQ8* y, int64_t k);
void quantize_q8k_ref(const float* x, BlockQ8K* y, int64_t k);

}  // namespace qdot
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
