#include "rlx/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "rlx/error.h"

namespace rlx {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;        // of one block for quantized dtypes
  int64_t block = 1;  // values per block
};
constexpr DTypeInfo kInfo[] = {
    {DType::f32, "f32", 4},
    {DType::f64, "f64", 8},
    {DType::f16, "f16", 2},
    {DType::bf16, "bf16", 2},
    {DType::i8, "i8", 1},
    {DType::i16, "i16", 2},
    {DType::i32, "i32", 4},
    {DType::i64, "i64", 8},
    {DType::u8, "u8", 1},
    {DType::boolean, "bool", 1},
    {DType::string, "string", 8},
    // ggml's block layouts (rlx/quant.h): Q*_0 / Q*_1 blocks of 32, K-quants of 256.
    {DType::q4_0, "q4_0", 18, 32},
    {DType::q4_1, "q4_1", 20, 32},
    {DType::q5_0, "q5_0", 22, 32},
    {DType::q5_1, "q5_1", 24, 32},
    {DType::q8_0, "q8_0", 34, 32},
    {DType::q2_k, "q2_k", 84, 256},
    {DType::q3_k, "q3_k", 110, 256},
    {DType::q4_k, "q4_k", 144, 256},
    {DType::q5_k, "q5_k", 176, 256},
    {DType::q6_k, "q6_k", 210, 256},
    {DType::c64, "c64", 8},
    {DType::c128, "c128", 16},
};
static_assert(std::size(kInfo) == size_t(DType::c128) + 1, "one row per dtype, in enum order");

// Rank within a kind; the wider type has the larger rank.
int width_rank(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return 1;
    case DType::f32:
      return 2;
    case DType::f64:
      return 3;
    case DType::i8:
    case DType::u8:
      return 1;
    case DType::i16:
      return 2;
    case DType::i32:
      return 3;
    case DType::i64:
      return 4;
    default:  // bool, string, quantized: never promoted by width
      return 0;
  }
}
}  // namespace

size_t dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }
int64_t dtype_block(DType t) { return kInfo[static_cast<int>(t)].block; }
size_t dtype_nbytes(DType t, int64_t n) {
  const DTypeInfo& i = kInfo[static_cast<int>(t)];
  return size_t((n + i.block - 1) / i.block) * i.size;
}
std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_string(a) || is_string(b) || is_quantized(a) || is_quantized(b))
    fail<TypeError>("promote_types", "expected two numeric or bool dtypes, got ", dtype_name(a),
                    " and ", dtype_name(b));
  if (is_bool(a)) return b;
  if (is_bool(b)) return a;
  if (is_complex(a) || is_complex(b)) {
    const bool wide = a == DType::c128 || b == DType::c128 || a == DType::f64 || b == DType::f64;
    return wide ? DType::c128 : DType::c64;
  }
  if (is_float(a) != is_float(b)) return is_float(a) ? a : b;
  if (is_float(a)) {
    int ra = width_rank(a), rb = width_rank(b);
    if (ra == rb) return DType::f32;  // f16 with bf16: neither holds the other
    return ra > rb ? a : b;
  }
  // Integers: unsigned u8 against a signed type needs one more bit.
  if (a == DType::u8 || b == DType::u8) {
    DType s = a == DType::u8 ? b : a;
    return s == DType::i8 ? DType::i16 : s;
  }
  return width_rank(a) > width_rank(b) ? a : b;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return uint16_t(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {                                  // subnormal or zero in f16
    if (absx < 0x33000000u) return uint16_t(sign);
    // value = man * 2^(e-150); in units of the f16 subnormal step 2^-24 that is
    // man >> (126 - e), rounded to nearest even on the dropped bits.
    uint32_t e = absx >> 23, man = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;
    uint32_t mant = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (mant & 1))) ++mant;
    return uint16_t(sign | mant);
  }
  uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u);  // round to nearest even
  return uint16_t(sign | (((r >> 13) - ((127 - 15) << 10)) & 0x7fffu));
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

namespace {
template <class T>
T load(const void* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}
template <class T>
void put(void* p, T x) {
  std::memcpy(p, &x, sizeof(T));
}
// double -> integer without undefined behaviour: saturates, NaN gives 0.
template <class I>
I saturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return I(v);
}
}  // namespace

double load_double(DType t, const void* p) {
  switch (t) {
    case DType::f32:
      return load<float>(p);
    case DType::f64:
      return load<double>(p);
    case DType::f16:
      return f16_to_f32(load<uint16_t>(p));
    case DType::bf16:
      return bf16_to_f32(load<uint16_t>(p));
    case DType::i8:
      return load<int8_t>(p);
    case DType::i16:
      return load<int16_t>(p);
    case DType::i32:
      return load<int32_t>(p);
    case DType::i64:
      return double(load<int64_t>(p));
    case DType::u8:
      return load<uint8_t>(p);
    case DType::boolean:
      return load<uint8_t>(p) ? 1.0 : 0.0;
    default:  // string, quantized, complex
      break;
  }
  fail<TypeError>("load_double", "expected a real numeric or bool element, got ", dtype_name(t));
}

ComplexValue load_complex(DType t, const void* p) {
  if (t == DType::c64) {
    const auto v = load<std::array<float, 2>>(p);
    return {v[0], v[1]};
  }
  if (t == DType::c128) {
    const auto v = load<std::array<double, 2>>(p);
    return {v[0], v[1]};
  }
  return {load_double(t, p), 0};
}

void store_complex(DType t, void* p, ComplexValue v) {
  if (t == DType::c64) return put(p, std::array<float, 2>{float(v.re), float(v.im)});
  if (t == DType::c128) return put(p, std::array<double, 2>{v.re, v.im});
  store_double(t, p, v.re);
}

void store_double(DType t, void* p, double v) {
  switch (t) {
    case DType::f32:
      return put(p, float(v));
    case DType::f64:
      return put(p, v);
    case DType::f16:
      return put(p, f32_to_f16(float(v)));
    case DType::bf16:
      return put(p, f32_to_bf16(float(v)));
    case DType::i8:
      return put(p, saturate<int8_t>(v));
    case DType::i16:
      return put(p, saturate<int16_t>(v));
    case DType::i32:
      return put(p, saturate<int32_t>(v));
    case DType::i64:
      return put(p, saturate<int64_t>(v));
    case DType::u8:
      return put(p, saturate<uint8_t>(v));
    case DType::boolean:
      return put(p, uint8_t(v != 0 ? 1 : 0));
    case DType::c64:
      return put(p, std::array<float, 2>{float(v), 0.f});
    case DType::c128:
      return put(p, std::array<double, 2>{v, 0.0});
    case DType::string:
      if (v != 0)
        fail<TypeError>("store_double", "expected 0 (the empty string) for a string element, got ",
                        v);
      return put(p, static_cast<const void*>(nullptr));
    default:  // quantized: a value is no single element's
      fail<TypeError>("store_double", "expected a numeric or bool element, got ", dtype_name(t));
  }
}

}  // namespace rlx
