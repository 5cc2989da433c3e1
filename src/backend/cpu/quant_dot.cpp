// The portable half of quant_dot.h: activation quantizers, row decoders and scalar dots
// (every type), and the dispatch that prefers the AVX2 dots (quant_avx2.cpp) when built.
// The formats are ggml's (rlx/quant.h); each unpack below follows the layout comment of
// its block struct.
#include "backend/cpu/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/isa.h"
#include "backend/cpu/quant_simd.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace qdot {

namespace {

using namespace quant;

// ---- unpacking --------------------------------------------------------------------------
// A block as integers: x[i] = D * sc[i / 16] * v[i] - M * mn[i / 16].

struct Unpacked {
  int v[kQK_K];
  int sc[kQK_K / 16], mn[kQK_K / 16];
  float D, M;
};

// The 6-bit scales and mins of q4_k / q5_k (8 each, packed in 12 bytes).
void k4_scales(const uint8_t* s, int* sc, int* mn) {
  for (int g = 0; g < 8; ++g) quant::k4_scale_min(s, g, sc[g], mn[g]);
}

// 32-value blocks: x[i] = D * v[i] - M (sc = mn = 1).
void unpack32(DType t, const void* p, Unpacked& u) {
  std::fill(u.sc, u.sc + 2, 1);
  std::fill(u.mn, u.mn + 2, 1);
  auto nib = [&](const uint8_t* qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; };
  auto hbit = [](const uint8_t* qh, int i) {
    uint32_t h;
    std::memcpy(&h, qh, 4);
    return int((h >> i) & 1) << 4;
  };
  switch (t) {
    case DType::q4_0: {
      auto* b = static_cast<const BlockQ4_0*>(p);
      for (int i = 0; i < kQK; ++i) u.v[i] = nib(b->qs, i) - 8;
      u.D = half(b->d), u.M = 0;
      break;
    }
    case DType::q4_1: {
      auto* b = static_cast<const BlockQ4_1*>(p);
      for (int i = 0; i < kQK; ++i) u.v[i] = nib(b->qs, i);
      u.D = half(b->d), u.M = -half(b->m);
      break;
    }
    case DType::q5_0: {
      auto* b = static_cast<const BlockQ5_0*>(p);
      for (int i = 0; i < kQK; ++i) u.v[i] = (nib(b->qs, i) | hbit(b->qh, i)) - 16;
      u.D = half(b->d), u.M = 0;
      break;
    }
    case DType::q5_1: {
      auto* b = static_cast<const BlockQ5_1*>(p);
      for (int i = 0; i < kQK; ++i) u.v[i] = nib(b->qs, i) | hbit(b->qh, i);
      u.D = half(b->d), u.M = -half(b->m);
      break;
    }
    default: {  // q8_0
      auto* b = static_cast<const BlockQ8_0*>(p);
      for (int i = 0; i < kQK; ++i) u.v[i] = b->qs[i];
      u.D = half(b->d), u.M = 0;
    }
  }
}

void unpack256(DType t, const void* p, Unpacked& u) {
  switch (t) {
    case DType::q2_k: {
      auto* b = static_cast<const BlockQ2_K*>(p);
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < 32; ++l)
            u.v[128 * h + 32 * j + l] = (b->qs[32 * h + l] >> (2 * j)) & 3;
      for (int g = 0; g < 16; ++g) u.sc[g] = b->scales[g] & 15, u.mn[g] = b->scales[g] >> 4;
      u.D = half(b->d), u.M = half(b->dmin);
      break;
    }
    case DType::q3_k: {
      auto* b = static_cast<const BlockQ3_K*>(p);
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < 32; ++l) {
            int lo = (b->qs[32 * h + l] >> (2 * j)) & 3;
            int hi = (b->hmask[l] >> (4 * h + j)) & 1;
            u.v[128 * h + 32 * j + l] = lo - (hi ? 0 : 4);
          }
      for (int g = 0; g < 16; ++g) u.sc[g] = quant::k3_scale(b->scales, g);
      std::fill(u.mn, u.mn + 16, 0);
      u.D = half(b->d), u.M = 0;
      break;
    }
    case DType::q4_k:
    case DType::q5_k: {
      bool five = t == DType::q5_k;
      const uint8_t *scales, *qs, *qh = nullptr;
      uint16_t d, dmin;
      if (five) {
        auto* b = static_cast<const BlockQ5_K*>(p);
        scales = b->scales, qs = b->qs, qh = b->qh, d = b->d, dmin = b->dmin;
      } else {
        auto* b = static_cast<const BlockQ4_K*>(p);
        scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
      }
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          int lo = qs[32 * j + l] & 15, hi = qs[32 * j + l] >> 4;
          if (qh) {
            lo |= ((qh[l] >> (2 * j)) & 1) << 4;
            hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
          }
          u.v[64 * j + l] = lo;
          u.v[64 * j + 32 + l] = hi;
        }
      int sc[8], mn[8];
      k4_scales(scales, sc, mn);
      for (int g = 0; g < 16; ++g) u.sc[g] = sc[g / 2], u.mn[g] = mn[g / 2];
      u.D = half(d), u.M = half(dmin);
      break;
    }
    default: {  // q6_k
      auto* b = static_cast<const BlockQ6_K*>(p);
      for (int h = 0; h < 2; ++h) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int* v = u.v + 128 * h;
        for (int l = 0; l < 32; ++l) {
          v[l] = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
          v[l + 32] = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
          v[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          v[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        }
      }
      for (int g = 0; g < 16; ++g) u.sc[g] = b->scales[g], u.mn[g] = 0;
      u.D = half(b->d), u.M = 0;
    }
  }
}

// ---- scalar dots ------------------------------------------------------------------------

template <int NR>
void dot32_scalar(DType t, const void* w, const uint8_t* act, size_t astride, int64_t k, float* out,
                  int64_t os) {
  const size_t bs = dtype_size(t);
  float acc[NR] = {};
  Unpacked u;
  for (int64_t b = 0; b < k / kQK; ++b) {
    unpack32(t, static_cast<const uint8_t*>(w) + b * bs, u);
    for (int r = 0; r < NR; ++r) {
      const BlockQ8& a = reinterpret_cast<const BlockQ8*>(act + r * astride)[b];
      int s = 0;
      for (int i = 0; i < kQK; ++i) s += u.v[i] * a.qs[i];
      acc[r] += u.D * a.d * float(s) - u.M * a.s;
    }
  }
  for (int r = 0; r < NR; ++r) out[r * os] = acc[r];
}

template <int NR>
void dot256_scalar(DType t, const void* w, const uint8_t* act, size_t astride, int64_t k,
                   float* out, int64_t os) {
  const size_t bs = dtype_size(t);
  float acc[NR] = {};
  Unpacked u;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    unpack256(t, static_cast<const uint8_t*>(w) + b * bs, u);
    for (int r = 0; r < NR; ++r) {
      const BlockQ8K& a = reinterpret_cast<const BlockQ8K*>(act + r * astride)[b];
      int isum = 0, imin = 0;
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int i = 0; i < 16; ++i) s += u.v[16 * g + i] * a.qs[16 * g + i];
        isum += u.sc[g] * s;
        imin += u.mn[g] * a.bsums[g];
      }
      acc[r] += a.d * (u.D * float(isum) - u.M * float(imin));
    }
  }
  for (int r = 0; r < NR; ++r) out[r * os] = acc[r];
}

template <class T, int NR>
void dot_float_scalar(const void* w, const uint8_t* act, size_t astride, int64_t k, float* out,
                      int64_t os) {
  const T* p = static_cast<const T*>(w);
  for (int r = 0; r < NR; ++r) {
    const float* x = reinterpret_cast<const float*>(act + r * astride);
    float s = 0;
    for (int64_t i = 0; i < k; ++i) s += to_float(p[i]) * x[i];
    out[r * os] = s;
  }
}

// The scalar dots as DotFn (one per dtype and row count).
template <DType T, int NR>
void scalar_dot(const void* w, const uint8_t* act, size_t astride, int64_t k, float* out,
                int64_t os) {
  if constexpr (T == DType::f32)
    dot_float_scalar<float, NR>(w, act, astride, k, out, os);
  else if constexpr (T == DType::f16)
    dot_float_scalar<Half, NR>(w, act, astride, k, out, os);
  else if constexpr (T == DType::bf16)
    dot_float_scalar<BHalf, NR>(w, act, astride, k, out, os);
  else if constexpr (dtype_block_v<T> == kQK)
    dot32_scalar<NR>(T, w, act, astride, k, out, os);
  else
    dot256_scalar<NR>(T, w, act, astride, k, out, os);
}

template <DType T>
DotFn scalar_for_rows(int nr) {
  return with_rows(nr, []<int NR>() -> DotFn { return scalar_dot<T, NR>; });
}

}  // namespace

size_t act_row_bytes(DType w, int64_t k, int rows) {
  if (rows == 8 && quant::interleavable(w, 8)) {  // rows16 reads the plain blocks
    if (size_t b = avx512_rows8_act_bytes(k)) return b;
    if (size_t b = avx2_rows8_act_bytes(k)) return b;
  }
  if (!is_quantized(w)) return size_t(k) * sizeof(float);
  if (dtype_block(w) == kQK) return size_t(k / kQK) * sizeof(BlockQ8);
  return size_t(k / kQK_K) * sizeof(BlockQ8K);
}

void quantize_act(DType w, const float* x, void* dst, int64_t k, int rows) {
  if (rows == 8 && quant::interleavable(w, 8) &&
      (avx512_rows8_act(x, dst, k) || avx2_rows8_act(x, dst, k)))
    return;
  if (!is_quantized(w))
    std::memcpy(dst, x, size_t(k) * sizeof(float));
  else if (dtype_block(w) == kQK)
    quantize_q8_fast(x, static_cast<BlockQ8*>(dst), k);
  else
    quantize_q8k_fast(x, static_cast<BlockQ8K*>(dst), k);
}

const uint8_t* PlainRows::row(int64_t r) {
  if (rows_ <= 1) return src_ + r * int64_t(rb_);
  thread_local std::vector<uint8_t> buf;
  if (r / rows_ != held_) {
    held_ = r / rows_;
    buf.resize(rows_ * rb_);
    quant::deinterleave(w_, rows_, src_ + held_ * rows_ * int64_t(rb_), buf.data(), k_);
  }
  return buf.data() + r % rows_ * rb_;
}

void dot_groups(DType w, int rows, const void* first, int64_t count, const uint8_t* act, size_t as,
                int nr, int64_t k, float* out, int64_t os) {
  const size_t gbytes = size_t(rows) * dtype_nbytes(w, k);
  if (rows == 16 && avx512_dot_rows16(w, first, gbytes, count, act, as, nr, k, out, os)) return;
  const auto* g = static_cast<const uint8_t*>(first);
  const DotFn f = dot_fn(w, nr);
  for (int64_t j = 0; j < count; ++j, g += gbytes, out += rows) {
    if (rows == 8 && (avx512_dot_rows8(w, g, act, as, nr, k, out, os) ||
                      avx2_dot_rows8(w, g, act, as, nr, k, out, os)))
      continue;
    // The portable dots on the group's rows in the plain layout.
    PlainRows plain(w, rows, g, k);
    for (int i = 0; i < rows; ++i) f(plain.row(i), act, as, k, out + i, os);
  }
}

int tile_rows(DType w, int rows) {
  return rows == 16 && avx512_wide_rows16(w) ? kWideRows : kMaxRows;
}

void decode_group(DType w, int rows, const void* group, float* dst, int64_t k) {
  PlainRows plain(w, rows, static_cast<const uint8_t*>(group), k);
  for (int i = 0; i < rows; ++i) decode_row(w, plain.row(i), dst + i * k, k);
}

void round_act(DType w, const float* x, float* y, int64_t k) {
  if (!is_quantized(w)) {
    std::memcpy(y, x, size_t(k) * sizeof(float));
  } else if (dtype_block(w) == kQK) {
    BlockQ8 b;
    for (int64_t i = 0; i < k; i += kQK) {
      quantize_q8_fast(x + i, &b, kQK);
      for (int j = 0; j < kQK; ++j) y[i + j] = b.d * float(b.qs[j]);
    }
  } else {
    BlockQ8K b;
    for (int64_t i = 0; i < k; i += kQK_K) {
      quantize_q8k_fast(x + i, &b, kQK_K);
      for (int j = 0; j < kQK_K; ++j) y[i + j] = b.d * float(b.qs[j]);
    }
  }
}

// ---- activations --------------------------------------------------------------------

// ggml's activation quantizers, to the rounding: a product is then the same integers and
// scales as llama.cpp's, and greedy decoding follows the same tokens. 32-value blocks as
// its x86 quantize_row_q8_0 / q8_1: d = amax / 127 stored as f16, qs = round-half-even(x *
// (127 / amax)), s = d * Σqs stored as f16 (both kept here as the f32 of those halves).
void quantize_q8_ref(const float* x, BlockQ8* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK) {
    float amax = 0;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
    int sum = 0;
    for (int i = 0; i < kQK; ++i) {
      int q = int(std::nearbyint(x[i] * id));
      y[b].qs[i] = int8_t(q);
      sum += q;
    }
    y[b].d = round_half(d);
    y[b].sum = sum;
    y[b].s = round_half(d * float(sum));
  }
}

// Q8_K blocks: rlx/quant.h's quantizer is ggml's (scale from the signed maximum).
void quantize_q8k_ref(const float* x, BlockQ8K* y, int64_t k) { quant::quantize_row_q8_k(x, y, k); }

void decode_row(DType t, const void* src, float* dst, int64_t n) {
  if (avx2_decode_row(t, src, dst, n)) return;
  const auto* p = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = to_float(reinterpret_cast<const Half*>(p)[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = to_float(reinterpret_cast<const BHalf*>(p)[i]);
      return;
    default:
      break;
  }
  const int64_t blk = dtype_block(t);
  const size_t bs = dtype_size(t);
  Unpacked u;
  for (int64_t b = 0; b < n / blk; ++b, p += bs, dst += blk) {
    if (blk == kQK)
      unpack32(t, p, u);
    else
      unpack256(t, p, u);
    for (int64_t i = 0; i < blk; ++i)
      dst[i] = u.D * float(u.sc[i / 16]) * float(u.v[i]) - u.M * float(u.mn[i / 16]);
  }
}

DotFn scalar_dot_fn(DType w, int nr) {
  nr = std::clamp(nr, 1, kMaxRows);
  switch (w) {
#define RLX_QDOT_CASE(T) \
  case DType::T:         \
    return scalar_for_rows<DType::T>(nr);
    RLX_QDOT_TYPES(RLX_QDOT_CASE)
#undef RLX_QDOT_CASE
    default:
      return nullptr;
  }
}

DotFn dot_fn(DType w, int nr, bool in_fours) {
  if (DotFn f = avx512_dot_fn(w, std::clamp(nr, 1, kMaxRows))) return f;
  if (DotFn f = avx2_dot_fn(w, std::clamp(nr, 1, kMaxRows), in_fours)) return f;
  return scalar_dot_fn(w, nr);
}

int64_t four_rows(DType w, int64_t m) {
#if defined(__AVX512F__) && defined(__AVX2__)
  if (w == DType::q2_k) return m - m % 4;
#endif
  (void)w, (void)m;
  return 0;
}

}  // namespace qdot
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
