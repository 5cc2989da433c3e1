// GGUF metadata values and the ggml type table.
#include <bit>
#include <limits>

#include "frontend/gguf/gguf_internal.h"
#include "rlx/error.h"

namespace rlx::gguf {

namespace {

constexpr std::string_view kValueTypeNames[] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

bool is_int_type(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::u16:
    case ValueType::i16:
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::u64:
    case ValueType::i64:
      return true;
    default:
      return false;
  }
}
bool is_signed_type(ValueType t) {
  return t == ValueType::i8 || t == ValueType::i16 || t == ValueType::i32 || t == ValueType::i64;
}
bool is_float_type(ValueType t) { return t == ValueType::f32 || t == ValueType::f64; }

// The scalar of type t in `bits` (its little-endian bytes, zero-extended).
int64_t bits_to_int(ValueType t, uint64_t bits) {
  switch (t) {
    case ValueType::i8:
      return int8_t(bits);
    case ValueType::i16:
      return int16_t(bits);
    case ValueType::i32:
      return int32_t(bits);
    case ValueType::i64:
      return int64_t(bits);
    case ValueType::u64:
      if (bits > uint64_t(std::numeric_limits<int64_t>::max()))
        fail<ValueError>("gguf", "expected an integer that fits int64, got u64 ", bits);
      return int64_t(bits);
    default:
      return int64_t(bits);  // u8 u16 u32 bool
  }
}
double bits_to_float(ValueType t, uint64_t bits) {
  if (t == ValueType::f32) return std::bit_cast<float>(uint32_t(bits));
  if (t == ValueType::f64) return std::bit_cast<double>(bits);
  if (t == ValueType::u64) return double(bits);
  return double(bits_to_int(t, bits));
}

uint64_t load_bits(const uint8_t* p, size_t n) {
  uint64_t b = 0;
  std::memcpy(&b, p, n);  // little-endian host (checked in reader.cpp)
  return b;
}

// Whether v fits the integer type t.
bool fits(ValueType t, int64_t v) {
  switch (t) {
    case ValueType::u8:
      return v >= 0 && v <= 0xFF;
    case ValueType::i8:
      return v >= -128 && v <= 127;
    case ValueType::u16:
      return v >= 0 && v <= 0xFFFF;
    case ValueType::i16:
      return v >= -32768 && v <= 32767;
    case ValueType::u32:
      return v >= 0 && v <= 0xFFFFFFFFll;
    case ValueType::i32:
      return v >= INT32_MIN && v <= INT32_MAX;
    case ValueType::u64:
      return v >= 0;
    case ValueType::i64:
      return true;
    case ValueType::boolean:
      return v == 0 || v == 1;
    default:
      return false;
  }
}

[[noreturn]] void wrong(const Value& v, std::string_view expected) {
  std::string got(value_type_name(v.type()));
  if (v.is_array()) got = str_cat("array of ", value_type_name(v.elem_type()));
  fail<TypeError>("gguf", "expected ", expected, ", got ", got);
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  auto i = size_t(t);
  return i < std::size(kValueTypeNames) ? kValueTypeNames[i] : "unknown";
}

bool valid_value_type(uint32_t t) { return t <= uint32_t(ValueType::f64); }

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return 1;
    case ValueType::u16:
    case ValueType::i16:
      return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32:
      return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
      return 8;
    default:
      return 0;
  }
}

Value::Value(bool v) : type_(ValueType::boolean), bits_(v ? 1 : 0) {}
Value::Value(uint8_t v) : type_(ValueType::u8), bits_(v) {}
Value::Value(int8_t v) : type_(ValueType::i8), bits_(uint8_t(v)) {}
Value::Value(uint16_t v) : type_(ValueType::u16), bits_(v) {}
Value::Value(int16_t v) : type_(ValueType::i16), bits_(uint16_t(v)) {}
Value::Value(uint32_t v) : type_(ValueType::u32), bits_(v) {}
Value::Value(int32_t v) : type_(ValueType::i32), bits_(uint32_t(v)) {}
Value::Value(uint64_t v) : type_(ValueType::u64), bits_(v) {}
Value::Value(int64_t v) : type_(ValueType::i64), bits_(uint64_t(v)) {}
Value::Value(float v) : type_(ValueType::f32), bits_(std::bit_cast<uint32_t>(v)) {}
Value::Value(double v) : type_(ValueType::f64), bits_(std::bit_cast<uint64_t>(v)) {}
Value::Value(std::string v) : type_(ValueType::string), str_(std::move(v)) {}

Value Value::int_array(ValueType elem, const std::vector<int64_t>& values) {
  if (!is_int_type(elem) && elem != ValueType::boolean)
    fail<TypeError>("gguf", "expected an integer or bool element type, got ",
                    value_type_name(elem));
  const size_t w = scalar_size(elem);
  std::vector<uint8_t> raw(values.size() * w);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!fits(elem, values[i]))
      fail<ValueError>("gguf", "expected values that fit ", value_type_name(elem), ", got ",
                       values[i]);
    uint64_t b = uint64_t(values[i]);
    std::memcpy(raw.data() + i * w, &b, w);
  }
  return ValueAccess::raw_array(elem, std::move(raw));
}

Value Value::float_array(ValueType elem, const std::vector<double>& values) {
  if (!is_float_type(elem))
    fail<TypeError>("gguf", "expected element type f32 or f64, got ", value_type_name(elem));
  const size_t w = scalar_size(elem);
  std::vector<uint8_t> raw(values.size() * w);
  for (size_t i = 0; i < values.size(); ++i) {
    if (elem == ValueType::f32) {
      float f = float(values[i]);
      std::memcpy(raw.data() + i * 4, &f, 4);
    } else {
      std::memcpy(raw.data() + i * 8, &values[i], 8);
    }
  }
  return ValueAccess::raw_array(elem, std::move(raw));
}

Value Value::string_array(std::vector<std::string> values) {
  Value v;
  v.type_ = ValueType::array;
  v.elem_ = ValueType::string;
  v.strs_ = std::move(values);
  return v;
}

Value Value::array(ValueType elem, std::vector<Value> items) {
  for (const Value& it : items)
    if (it.type() != elem)
      fail<TypeError>("gguf", "expected array items of type ", value_type_name(elem), ", got ",
                      value_type_name(it.type()));
  if (elem == ValueType::string) {
    std::vector<std::string> s;
    s.reserve(items.size());
    for (Value& it : items) s.push_back(std::move(it.str_));
    return string_array(std::move(s));
  }
  if (elem == ValueType::array) return ValueAccess::nested(elem, std::move(items));
  if (!valid_value_type(uint32_t(elem)))
    fail<TypeError>("gguf", "expected a metadata value type, got ", uint32_t(elem));
  const size_t w = scalar_size(elem);
  std::vector<uint8_t> raw(items.size() * w);
  for (size_t i = 0; i < items.size(); ++i) std::memcpy(raw.data() + i * w, &items[i].bits_, w);
  return ValueAccess::raw_array(elem, std::move(raw));
}

size_t Value::size() const {
  if (!is_array()) return 1;
  if (elem_ == ValueType::string) return strs_.size();
  if (elem_ == ValueType::array) return items_.size();
  return raw_.size() / scalar_size(elem_);
}

int64_t Value::as_int() const {
  if (!is_int_type(type_)) wrong(*this, "an integer");
  return bits_to_int(type_, bits_);
}

uint64_t Value::as_uint() const {
  if (!is_int_type(type_)) wrong(*this, "an integer");
  if (is_signed_type(type_) && bits_to_int(type_, bits_) < 0)
    fail<ValueError>("gguf", "expected a non-negative integer, got ", bits_to_int(type_, bits_));
  return type_ == ValueType::u64 ? bits_ : uint64_t(bits_to_int(type_, bits_));
}

double Value::as_float() const {
  if (!is_float_type(type_) && !is_int_type(type_)) wrong(*this, "a number");
  return bits_to_float(type_, bits_);
}

bool Value::as_bool() const {
  if (type_ != ValueType::boolean) wrong(*this, "a bool");
  return bits_ != 0;
}

const std::string& Value::as_string() const {
  if (type_ != ValueType::string) wrong(*this, "a string");
  return str_;
}

std::vector<int64_t> Value::as_ints() const {
  if (!is_array() || !(is_int_type(elem_) || elem_ == ValueType::boolean))
    wrong(*this, "an array of integers");
  const size_t w = scalar_size(elem_), n = raw_.size() / w;
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bits_to_int(elem_, load_bits(raw_.data() + i * w, w));
  return out;
}

std::vector<double> Value::as_floats() const {
  if (!is_array() || !(is_float_type(elem_) || is_int_type(elem_)))
    wrong(*this, "an array of numbers");
  const size_t w = scalar_size(elem_), n = raw_.size() / w;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bits_to_float(elem_, load_bits(raw_.data() + i * w, w));
  return out;
}

const std::vector<std::string>& Value::as_strings() const {
  if (!is_array() || elem_ != ValueType::string) wrong(*this, "an array of strings");
  return strs_;
}

std::vector<Value> Value::items() const {
  if (!is_array()) wrong(*this, "an array");
  if (elem_ == ValueType::array) return items_;
  std::vector<Value> out;
  out.reserve(size());
  if (elem_ == ValueType::string) {
    for (const std::string& s : strs_) out.emplace_back(s);
    return out;
  }
  const size_t w = scalar_size(elem_);
  for (size_t i = 0; i < raw_.size() / w; ++i)
    out.push_back(ValueAccess::scalar(elem_, load_bits(raw_.data() + i * w, w)));
  return out;
}

bool Value::operator==(const Value& o) const {
  return type_ == o.type_ && elem_ == o.elem_ && bits_ == o.bits_ && str_ == o.str_ &&
         raw_ == o.raw_ && strs_ == o.strs_ && items_ == o.items_;
}

void encode_value(const Value& v, std::string& out) {
  auto put = [&](uint64_t b, size_t n) { out.append(reinterpret_cast<const char*>(&b), n); };
  auto put_str = [&](const std::string& s) {
    put(s.size(), 8);
    out += s;
  };
  switch (v.type()) {
    case ValueType::string:
      put_str(v.as_string());
      return;
    case ValueType::array:
      put(uint32_t(v.elem_type()), 4);
      put(v.size(), 8);
      if (v.elem_type() == ValueType::string) {
        for (const std::string& s : v.as_strings()) put_str(s);
      } else if (v.elem_type() == ValueType::array) {
        for (const Value& it : ValueAccess::nested_items(v)) encode_value(it, out);
      } else {
        out.append(reinterpret_cast<const char*>(v.raw().data()), v.raw().size());
      }
      return;
    default:
      put(ValueAccess::bits(v), scalar_size(v.type()));
  }
}

// ---- ggml types ------------------------------------------------------------------------

GgmlType ggml_type_info(uint32_t type) {
  switch (type) {
    case 0:
      return {"F32", 1, 4};
    case 1:
      return {"F16", 1, 2};
    case 2:
      return {"Q4_0", 32, 18};
    case 3:
      return {"Q4_1", 32, 20};
    case 6:
      return {"Q5_0", 32, 22};
    case 7:
      return {"Q5_1", 32, 24};
    case 8:
      return {"Q8_0", 32, 34};
    case 9:
      return {"Q8_1", 32, 36};
    case 10:
      return {"Q2_K", 256, 84};
    case 11:
      return {"Q3_K", 256, 110};
    case 12:
      return {"Q4_K", 256, 144};
    case 13:
      return {"Q5_K", 256, 176};
    case 14:
      return {"Q6_K", 256, 210};
    case 15:
      return {"Q8_K", 256, 292};
    case 16:
      return {"IQ2_XXS", 256, 66};
    case 17:
      return {"IQ2_XS", 256, 74};
    case 18:
      return {"IQ3_XXS", 256, 98};
    case 19:
      return {"IQ1_S", 256, 50};
    case 20:
      return {"IQ4_NL", 32, 18};
    case 21:
      return {"IQ3_S", 256, 110};
    case 22:
      return {"IQ2_S", 256, 82};
    case 23:
      return {"IQ4_XS", 256, 136};
    case 24:
      return {"I8", 1, 1};
    case 25:
      return {"I16", 1, 2};
    case 26:
      return {"I32", 1, 4};
    case 27:
      return {"I64", 1, 8};
    case 28:
      return {"F64", 1, 8};
    case 29:
      return {"IQ1_M", 256, 56};
    case 30:
      return {"BF16", 1, 2};
    case 34:
      return {"TQ1_0", 256, 54};
    case 35:
      return {"TQ2_0", 256, 66};
    case 39:
      return {"MXFP4", 32, 17};
    case 40:
      return {"NVFP4", 64, 36};
    case 41:
      return {"Q1_0", 128, 18};
    case 42:
      return {"Q2_0", 64, 18};
    default:
      return {};
  }
}

std::string ggml_type_name(uint32_t type) {
  GgmlType t = ggml_type_info(type);
  return t.block ? std::string(t.name) : str_cat("type ", type);
}

namespace {
struct Pair {
  uint32_t ggml;
  DType dtype;
};
constexpr Pair kPairs[] = {
    {0, DType::f32},   {1, DType::f16},   {30, DType::bf16}, {28, DType::f64},  {24, DType::i8},
    {25, DType::i16},  {26, DType::i32},  {27, DType::i64},  {2, DType::q4_0},  {3, DType::q4_1},
    {6, DType::q5_0},  {7, DType::q5_1},  {8, DType::q8_0},  {10, DType::q2_k}, {11, DType::q3_k},
    {12, DType::q4_k}, {13, DType::q5_k}, {14, DType::q6_k}};
}  // namespace

std::optional<DType> dtype_of_ggml(uint32_t type) {
  for (const Pair& p : kPairs)
    if (p.ggml == type) return p.dtype;
  return std::nullopt;
}

uint32_t ggml_of_dtype(DType t) {
  for (const Pair& p : kPairs)
    if (p.dtype == t) return p.ggml;
  fail<NotSupported>("gguf", "expected a dtype GGUF can store, got ", dtype_name(t));
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

uint32_t llama_file_type(DType t) {
  switch (t) {
    case DType::f32:
      return 0;
    case DType::f16:
      return 1;
    case DType::q4_0:
      return 2;
    case DType::q4_1:
      return 3;
    case DType::q8_0:
      return 7;
    case DType::q5_0:
      return 8;
    case DType::q5_1:
      return 9;
    case DType::q2_k:
      return 10;
    case DType::q3_k:
      return 12;
    case DType::q4_k:
      return 15;
    case DType::q5_k:
      return 17;
    case DType::q6_k:
      return 18;
    case DType::bf16:
      return 32;
    default:
      fail<NotSupported>("gguf", "expected a weight dtype llama.cpp names, got ", dtype_name(t));
  }
}

}  // namespace rlx::gguf
