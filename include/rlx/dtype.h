// Element types, their sizes and names, and the promotion rules (all in one place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

namespace rlx {

// `string`: one handle per element (rlx/strings.h), not a number; no arithmetic takes it.
// q4_0 … q6_k: block-quantized weights in ggml's layouts (rlx/quant.h). The last dim is
// stored in blocks of dtype_block(t) values, dtype_size(t) bytes each; only dequantize,
// quant_matmul and the ops that move whole rows (embedding rows, reshape) take them.
// c64 / c128: complex numbers, two f32 / f64 (real, imaginary) as std::complex stores them;
// the ops that define them on complex say so in their dtype rules (arithmetic, the complex
// family: complex, real, imag, conj; the FFTs), the others refuse them.
// clang-format off
enum class DType : uint8_t {
  f32, f64, f16, bf16, i8, i16, i32, i64, u8, boolean, string,
  q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k,
  c64, c128,
};
// clang-format on

// The numeric and bool dtypes (every dtype but string).
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64,    DType::f16, DType::bf16,
                                       DType::i8,  DType::i16,    DType::i32, DType::i64,
                                       DType::u8,  DType::boolean};

// The complex dtypes.
inline constexpr DType kComplexDTypes[] = {DType::c64, DType::c128};

// The block-quantized dtypes, in enum order.
inline constexpr DType kQuantDTypes[] = {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                                         DType::q8_0, DType::q2_k, DType::q3_k, DType::q4_k,
                                         DType::q5_k, DType::q6_k};

// Bytes of one element; of one block for a quantized dtype.
size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", …, "bool", "q4_k"
std::optional<DType> dtype_from_name(std::string_view name);

constexpr bool is_quantized(DType t) { return t >= DType::q4_0 && t <= DType::q6_k; }
// Values per block: 32 or 256 for a quantized dtype, 1 for every other.
int64_t dtype_block(DType t);
// Bytes of n values (n a multiple of dtype_block(t); rounded up to whole blocks otherwise).
size_t dtype_nbytes(DType t, int64_t n);

constexpr bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
constexpr bool is_complex(DType t) { return t == DType::c64 || t == DType::c128; }
// The complex dtype of a real one's precision (f64: c128; f32, f16, bf16: c64), and the
// real dtype of a complex one's parts (c64: f32, c128: f64).
constexpr DType complex_of(DType real) { return real == DType::f64 ? DType::c128 : DType::c64; }
constexpr DType real_of(DType complex) { return complex == DType::c128 ? DType::f64 : DType::f32; }
constexpr bool is_bool(DType t) { return t == DType::boolean; }
constexpr bool is_string(DType t) { return t == DType::string; }
constexpr bool is_integer(DType t) {
  return !is_float(t) && !is_bool(t) && !is_string(t) && !is_quantized(t) && !is_complex(t);
}
constexpr bool is_signed_integer(DType t) {
  return t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64;
}
// Numbers that can be negative: floats and signed integers.
constexpr bool is_signed(DType t) { return is_float(t) || is_signed_integer(t); }

// The dtype two operands of a binary op are computed in: bool < integers < floats <
// complex; within a kind the wider wins; u8 with a signed integer gives the next signed
// width that holds both; f16 with bf16 gives f32; complex with a real dtype is the complex
// dtype of the wider precision (c64 with f64: c128). string promotes with string only
// (TypeError).
DType promote_types(DType a, DType b);

// Half-precision conversions (round to nearest even), used by constants and kernels.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

// One element at p of dtype t, read as / written from a double (slow path: constants,
// tests, conversions; not kernels). Integer stores truncate toward zero. A string element
// is no number: loading one throws TypeError, and only 0 (the empty string) is stored. A
// complex element stores v + 0i; loading one throws TypeError (load_complex reads it).
double load_double(DType t, const void* p);
void store_double(DType t, void* p, double v);

// One element of any numeric dtype as a complex double (a real one with imaginary part 0),
// and a complex value stored into a complex dtype (or its real part into a real one).
struct ComplexValue {
  double re = 0, im = 0;
};
ComplexValue load_complex(DType t, const void* p);
void store_complex(DType t, void* p, ComplexValue v);

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace rlx
