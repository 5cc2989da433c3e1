// Block-quantized dtypes (q4_0 … q6_k): ggml's block layouts, the one definition every
// layer reads (the GGUF reader and writer, the CPU and CUDA kernels, the tests), and the
// reference codecs written from the format description.
//
// A row of a quantized tensor is a run of blocks; each block holds dtype_block(t) values
// (32, or 256 for the K-quants) in dtype_size(t) bytes. Half-precision scales are f16 bit
// patterns (rlx::f16_to_f32). All fields are little-endian, as in GGUF files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rlx/dtype.h"

namespace rlx::quant {

// The block-quantized dtypes, for dispatch switches: X(q4_0) X(q4_1) … X(q6_k).
#define RLX_QUANT_DTYPES(X) \
  X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k)

inline constexpr int kQK = 32;     // values per block of the Q*_0 / Q*_1 types
inline constexpr int kQK_K = 256;  // values per super-block of the K-quants

// x = d * (q - 8), q in [0, 16): byte j holds q[j] (low nibble) and q[j + 16] (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q in [0, 16); nibbles as q4_0.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kQK / 2];
};
// x = d * (q - 16), q in [0, 32): low nibbles as q4_0, bit 4 of q[j] in bit j of qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q in [0, 32); bits as q5_0.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q, q in [-127, 127].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q in [0, 4);
// qs: 2-bit values, each 32-byte half of 128 values holding 4 shifts of 32.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d, dmin;
};
// 16 groups of 16: x = d * (s[g] - 32) * (q - 4 * !hbit), 2 low bits in qs (as q2_k), the
// high bit in hmask; 6-bit signed scales packed in 12 bytes.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 groups of 32: x = d * sc[g] * q - dmin * m[g], q in [0, 16); 6-bit sc and m packed in
// 12 bytes; qs: each 32 bytes hold two groups (low nibbles, then high nibbles).
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// As q4_k with a fifth bit per value in qh (bit g of qh[l] for value l of group g).
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 groups of 16: x = d * scales[g] * (q - 32), q in [0, 64): low 4 bits in ql, high 2
// in qh.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Activations for the K-quant dot products (never stored in files): f32 scale, 256
// int8 values and the sums of each 16.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ2_K) == 84 &&
              sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 &&
              sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of 32-value group g (0..7) of a q4_k / q5_k block, from its 12
// packed bytes: groups 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); groups
// 4-7 split into a low nibble in bytes 8-11 and their top two bits in the spare top bits of
// bytes 0-7. constexpr, so the CUDA kernels call it too.
constexpr void k4_scale_min(const uint8_t* s, int g, int& sc, int& m) {
  if (g < 4) {
    sc = s[g] & 63;
    m = s[g + 4] & 63;
  } else {
    sc = (s[g + 4] & 0xF) | ((s[g - 4] >> 6) << 4);
    m = (s[g + 4] >> 4) | ((s[g] >> 6) << 4);
  }
}

// The signed 6-bit scale of 16-value group g (0..15) of a q3_k block, from its 12 packed
// bytes (stored + 32): the low nibbles of bytes 0-7 hold scales 0-7's low 4 bits, their high
// nibbles scales 8-15's; the top 2 bits of scale g sit in byte 8 + g % 4 at shift
// 2 * (g / 4). constexpr, so the CUDA kernels call it too.
constexpr int k3_scale(const uint8_t* s, int g) {
  const int lo = g < 8 ? (s[g] & 15) : (s[g - 8] >> 4);
  const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// The reference codecs: n values (a multiple of dtype_block(t)) of row `src` decoded to
// f32, or f32 values encoded. f32 / f16 / bf16 are accepted too (a copy / conversion).
// quantize_row is llama.cpp's reference quantizer for each type (round-to-nearest for
// q4_0 … q8_0, the searched scales of the K-quants), so files it writes decode as
// llama.cpp's would (bit for bit: tests/frontend/quant_test.cpp checks every type
// against ggml's library). Other dtypes are a TypeError; n not a multiple of the block a
// ValueError.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Activations for the K-quant dot products: n (a multiple of 256) values to n / 256
// blocks, as ggml's quantize_row_q8_K_ref: d = -max / 127 where max is the value of
// largest magnitude, qs = round-half-even(x * -127 / max) (so qs is in [-127, 127]), bsums
// the sums of each 16 qs. A zero block has d = 0 and zero qs / bsums. ValueError for n.
void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n);

// Interleaved weights (quant_matmul's layouts "rows8" and "rows16", the CPU decode
// kernels' forms) of a matrix [n, k]: the rows in groups of 8 or 16, so that one vector load
// holds a slice of every row of a group, one row per 32-bit lane, and a dot product leaves
// the group's results in the lanes of one vector (no horizontal sums); the group's scales
// convert in one instruction. Same bytes as the plain layout, permuted. "Runs" are 4 bytes
// of each row's value bytes: run v holds bytes 4v .. 4v + 3 of every row, row r at 4r.
//  - rows8 (AVX2's 256-bit vectors; q4_0, q8_0): the group block by block, each block the 8
//    rows' f16 scales, then its runs of 32 bytes (4 for q4_0's 16 nibble bytes, 8 for q8_0's
//    32 values).
//  - rows16 (AVX-512's 512-bit vectors): q4_0 / q8_0: the group's scales first, [k / 32][16]
//    f16, then its blocks' runs of 64 bytes, [k / 32][runs][16][4]; q4_k: block by block, each
//    the 16 rows' d, their dmin, the three 4-byte words of each row's packed scales (word j
//    of the 16 rows together), then the block's 32 runs of its 128 nibble bytes. Every load
//    is of whole cache lines.
bool interleavable(DType t, int rows);  // whether t has the form of `rows` (8, 16) a group
// The rows per group of a quant_matmul layout: 1 ("rows", plain), 8 ("rows8"), 16
// ("rows16"); 0 for any other name.
int layout_rows(std::string_view layout);
// The layout name of `rows` rows per group (1, 8 or 16); ValueError otherwise.
std::string layout_name(int rows);
// src [n, k] in the plain layout to dst interleaved in groups of `rows` (8 or 16);
// ValueError unless n % rows == 0 and k is a whole number of blocks; TypeError for a type
// without that form.
void interleave(DType t, int rows, const void* src, void* dst, int64_t n, int64_t k);
// The rows of one group (the bytes of its k / 32 blocks) back in the plain layout, row i at
// dst + i * dtype_nbytes(t, k).
void deinterleave(DType t, int rows, const void* group, void* dst, int64_t k);
// Tensor-core tiles (quant_matmul's layout "tiles16", the form CUDA's decode kernels read;
// q8_0, q4_k): the rows in groups of 16, each group block by block, the rows paired (i, i + 8).
//  - q8_0: a block of the 16 rows in 544 bytes: their f16 scales (8 pairs), then 32 runs of 16
//    bytes, run 4 i + j holding values 8 j .. 8 j + 7 of row i, then the same of row i + 8.
//  - q4_k: a block in 2304 bytes: d and dmin of the pairs (8 bytes a pair), their 12-byte
//    packed scales (24 a pair), then for each 64-value chunk c 32 runs of 16 bytes, run 4 i + j
//    holding chunk bytes 8 j .. 8 j + 7 of row i (values 8 j .. of sub-blocks 2 c and 2 c + 1,
//    low and high nibbles), then the same of row i + 8.
// Run l is lane l's part of an m16n8k32 int8 product's A operand (its k order permuted, the
// activations' alike): one aligned 16-byte load. Same bytes as the plain layout, permuted.
inline constexpr std::string_view kTiles16 = "tiles16";
bool tileable(DType t);  // q8_0, q4_k
// src [n, k] plain to dst in tiles16, and back; ValueError unless n % 16 == 0 and k is a
// whole number of blocks; TypeError for a type without the form.
void tile(DType t, const void* src, void* dst, int64_t n, int64_t k);
void untile(DType t, const void* src, void* dst, int64_t n, int64_t k);
// The rows per group of the layout the CPU's decode kernels read fastest for t: 16 where the
// build has AVX-512 VNNI (q4_0, q8_0, q4_k), else 8 (q4_0, q8_0); 1 (plain) otherwise.
int cpu_layout_rows(DType t);

}  // namespace rlx::quant
