// Dot products of weight rows in storage form (block-quantized, f16, bf16, f32) with
// activation rows, the inner loops of quant_matmul on the CPU.
//
// For the block-quantized types the activations are quantized once per call, as the
// fastest CPU engines do: to int8 blocks of 32 (BlockQ8, with the scaled block sum that
// the types with an offset need) for q4_0 … q8_0, and to Q8_K blocks of 256 (with the sums
// of each 16) for the K-quants. A weight block then unpacks to unsigned bytes, which meet
// the int8 activations in _mm256_maddubs_epi16; every offset and minimum of the format
// becomes a product with the activation sums, so no weight value is ever widened to f32.
// f16 / bf16 / f32 weights take f32 activations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/isa.h"
#include "rlx/dtype.h"
#include "rlx/quant.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {
namespace qdot {

// Activations for 32-value weight blocks: x ≈ d * qs; sum = Σ qs, s = d * sum.
struct BlockQ8 {
  float d, s;
  int32_t sum;
  int8_t qs[quant::kQK];
};
using BlockQ8K = quant::BlockQ8_K;

// Bytes of one activation row of k values prepared for weights of dtype w (k a multiple
// of w's block): int8 blocks for the quantized types, k floats for the others; for weights
// interleaved in groups of `rows` (rlx/quant.h's layouts) the form dot_groups reads.
size_t act_row_bytes(DType w, int64_t k, int rows = 1);
// Prepares one activation row (k floats) for weights of dtype w into dst.
void quantize_act(DType w, const float* x, void* dst, int64_t k, int rows = 1);

// out[r * out_stride] = <w row, activation row r> for r < nr: one weight row of k values
// against nr activation rows, the r-th at act + r * act_stride bytes.
using DotFn = void (*)(const void* w, const uint8_t* act, size_t act_stride, int64_t k, float* out,
                       int64_t out_stride);
inline constexpr int kMaxRows = 4;  // rows one call shares the unpacked weights among
// Rows the AVX-512 rows16 q4_0 / q8_0 dots share a block among in the many-row path: half
// the unpacking and L2 reads per activation row of 4-row tiles (bench/RESULTS.md, "Wide
// tiles"); the other kernels keep kMaxRows.
inline constexpr int kWideRows = 8;
// f.template operator()<NR>() with NR = nr for nr in [1, kMaxRows) and kMaxRows otherwise:
// the row-count dispatch of every family of dot kernels.
template <class F>
decltype(auto) with_rows(int nr, F&& f) {
  static_assert(kMaxRows == 4);
  switch (nr) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
      return f.template operator()<3>();
    default:
      return f.template operator()<4>();
  }
}
// y = the activation row x as quantize_act rounds it for weights of dtype w (d * qs per
// block; x itself for unquantized w): decoded weights times y make the integer dots'
// products, so the many-row path agrees with the decode path.
void round_act(DType w, const float* x, float* y, int64_t k);
// The weight dtypes with dots, for the dispatch switches: f32, f16, bf16 and every
// block-quantized dtype.
// clang-format off
#define RLX_QDOT_TYPES(X) X(f32) X(f16) X(bf16) RLX_QUANT_DTYPES(X)
// clang-format on
// The dot for weight dtype w and nr in [1, kMaxRows] rows; null for an unsupported dtype.
// Each sums as llama.cpp does on this CPU where the dtype allows (quant_avx2.cpp's orders);
// in_fours: for rows among the first four_rows(w, m) of m, which llama.cpp's repacked
// GEMM (q2_K with AVX-512) takes four at a time and sums otherwise than one row alone.
DotFn dot_fn(DType w, int nr, bool in_fours = false);
int64_t four_rows(DType w, int64_t m);

// Interleaved weights (layouts rows8 / rows16, rlx/quant.h): `count` consecutive groups of
// `rows` rows from `first` against nr in [1, kMaxRows] (or tile_rows(w, rows)) activation
// rows prepared by quantize_act for w and rows: out[r * out_stride + i] = <row i (from the
// first group's first), activation row r>.
void dot_groups(DType w, int rows, const void* first, int64_t count, const uint8_t* act,
                size_t act_stride, int nr, int64_t k, float* out, int64_t out_stride);

// The most activation rows one dot_groups call takes for w in groups of `rows`: kWideRows
// where the AVX-512 rows16 kernels have them, else kMaxRows.
int tile_rows(DType w, int rows);

// The rows of an interleaved group decoded to f32, row i at dst + i * k.
void decode_group(DType w, int rows, const void* group, float* dst, int64_t k);

// The rows of w [., k] held in groups of `rows` (1: plain) in the plain layout: in place for
// plain weights, else a row's group deinterleaved into this thread's buffer when first asked
// for (one reader per thread at a time; a group's rows are best asked for together).
class PlainRows {
 public:
  PlainRows(DType w, int rows, const uint8_t* src, int64_t k)
      : w_(w), rows_(rows), src_(src), k_(k), rb_(dtype_nbytes(w, k)) {}
  const uint8_t* row(int64_t r);

 private:
  DType w_;
  int rows_;
  const uint8_t* src_;
  int64_t k_;
  size_t rb_;
  int64_t held_ = -1;  // the group in the buffer
};

// Decodes n values (a multiple of the block) of a row of dtype w to f32: the weight
// panels of the many-row path and the dequantize op.
void decode_row(DType w, const void* src, float* dst, int64_t n);

// The portable dots (no SIMD; what dot_fn falls back to); same contract as dot_fn.
DotFn scalar_dot_fn(DType w, int nr);

// ---- the many-row product of 4-bit weights (quant_gemm_avx2.cpp) --------------------------
// An integer GEMM for q4_0 (plain or interleaved) and q4_k weights when built with AVX2: groups of
// 8 weight rows are repacked (gemm4_pack) and meet activation rows prepared by gemm4_act,
// 8 x up to 4 at a time (gemm4_tile). The activations round as quantize_act rounds them.
bool gemm4_supported(DType w);
// Bytes of one activation row of k values, and the row prepared from k floats.
size_t gemm4_act_bytes(DType w, int64_t k);
void gemm4_act(DType w, const float* x, uint8_t* dst, int64_t k);
// Bytes of one packed group of 8 rows, and group g (rows 8g .. 8g + 7 of w [n, k]; rows
// past n are zeros) packed into dst.
size_t gemm4_group_bytes(DType w, int64_t k);
void gemm4_pack(DType w, int rows, const uint8_t* src, int64_t n, int64_t k, int64_t g,
                uint8_t* dst);
// out[r * 8 + i] = <row i of the packed group, activation row r> for r < nr (1 to 4), the
// activation rows act_stride bytes apart.
void gemm4_tile(DType w, const uint8_t* group, int64_t k, const uint8_t* act, size_t act_stride,
                int nr, float* out);

// ---- the many-row product on AMX (quant_amx.cpp) ------------------------------------------
// Where the CPU has AMX-INT8 and AVX-512 and the OS grants the tile state: weights unpacked
// in strips of 16 rows to int8 with a scale (and a minimum) per group of amx_group(w) values,
// activation rows (quantize_act's blocks) packed 16 at a time, int32 tile sums scaled per
// group. Every quantized dtype.
bool amx_usable();
bool amx_supported(DType w);
int amx_group(DType w);  // 16 or 32: the finest scale of w's format (0: not quantized)
// Bytes of one strip of 16 weight rows or one block of 16 activation rows (the same shape:
// 16 rows of int8 values, then a scale and a second float per group and row).
size_t amx_bytes(DType w, int64_t k);
// Strip s (rows 16 s .. 16 s + 15 of w [n, k], in groups of `rows`; rows past n are zeros)
// unpacked into dst.
void amx_unpack(DType w, int rows, const uint8_t* src, int64_t n, int64_t k, int64_t s,
                uint8_t* dst);
// `rows` (<= 16) rows of quantize_act's output (ab bytes apart) packed into dst as a block of
// 16 (the rest zeros).
void amx_pack_act(DType w, const uint8_t* act, size_t ab, int rows, int64_t k, uint8_t* dst);
// y[i * ldy + r] = <weight row r of the strip, activation row i of the block> for i < mrows,
// r < nrows. Configures the tiles of the calling thread; amx_release() hands them back.
void amx_tile(DType w, const uint8_t* strip, int64_t k, const uint8_t* act, int mrows, int nrows,
              float* y, int64_t ldy);
void amx_release();

}  // namespace qdot
}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
