// Shared by the GGUF reader, writer and quantizer: the ggml type table and Value's wire
// form.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "rlx/gguf.h"

namespace rlx::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;  // GGML_MAX_DIMS
inline constexpr int kMaxArrayDepth = 16;

// A ggml type's name, values per block and bytes per block (0, 0 for unknown ids).
struct GgmlType {
  std::string_view name;
  int64_t block = 0;
  int64_t size = 0;
};
GgmlType ggml_type_info(uint32_t type);

// Bytes of one scalar of a metadata type (0 for string / array / unknown).
size_t scalar_size(ValueType t);
bool valid_value_type(uint32_t t);

// Value's internals for the reader and writer.
struct ValueAccess {
  static Value scalar(ValueType t, uint64_t bits) {
    Value v;
    v.type_ = t;
    v.bits_ = bits;
    return v;
  }
  static Value raw_array(ValueType elem, std::vector<uint8_t> raw) {
    Value v;
    v.type_ = ValueType::array;
    v.elem_ = elem;
    v.raw_ = std::move(raw);
    return v;
  }
  static Value string_array(std::vector<std::string> s) {
    return Value::string_array(std::move(s));
  }
  static Value nested(ValueType elem, std::vector<Value> items) {
    Value v;
    v.type_ = ValueType::array;
    v.elem_ = elem;
    v.items_ = std::move(items);
    return v;
  }
  static uint64_t bits(const Value& v) { return v.bits_; }
  static const std::vector<Value>& nested_items(const Value& v) { return v.items_; }
};

// Appends a value's wire form (without its type tag) to out.
void encode_value(const Value& v, std::string& out);

}  // namespace rlx::gguf
