// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
//   rlx::Tensor x = rlx::load_npy("x.npy");
//   rlx::save_npy("y.npy", y);
//
// dtypes, as NumPy spells them in the header's 'descr':
//   f32 '<f4'  f64 '<f8'  f16 '<f2'  i8 '|i1'  i16 '<i2'  i32 '<i4'  i64 '<i8'  u8 '|u1'
//   bool '|b1'  bf16 '<V2'
// NumPy has no bfloat16. rlx writes bf16 as '<V2' (two raw bytes, the bf16 bit pattern),
// which is what np.save writes for an ml_dtypes.bfloat16 array; NumPy loads it as void
// and `.view(ml_dtypes.bfloat16)` (or `.view('<u2')` for the bits) recovers it. On read,
// any 2-byte void ('<V2', '|V2') is taken as bf16. '<u2' is rejected: rlx has no u16.
//
// Reading: big-endian data ('>f4', …) is byte-swapped; fortran_order True arrays are
// transposed into row-major order; bool bytes other than 0 / 1 read as true. The data
// must be exactly numel * itemsize bytes. Writing: little-endian, C order, format 1.0
// (2.0 when the header would not fit), header padded to a multiple of 64 bytes.
// Every malformed input is an IoError naming the file (or "<memory>") and what was
// expected vs found; nothing reads past the end of the input.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/tensor.h"

namespace rlx {

Tensor load_npy(const std::string& path);
// `name` is what errors call the input.
Tensor read_npy(std::span<const uint8_t> bytes, std::string_view name = "<memory>");

// Any host tensor (views are written in element order). Throws IoError when the file
// cannot be written, ValueError for an undefined tensor.
std::vector<uint8_t> write_npy_bytes(const Tensor& t);
void save_npy(const std::string& path, const Tensor& t);

}  // namespace rlx
