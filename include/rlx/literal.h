// A constant tensor held on the host: the payload of `constant` nodes and of
// tensor-valued attributes. Immutable; copies share the bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/shape.h"

namespace rlx {

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return DType::i8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return DType::i16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::i64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::u8;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::boolean;
  else
    static_assert(sizeof(T) == 0, "no rlx dtype for this C++ type");
}

class Literal {
 public:
  Literal();  // f32 scalar 0
  // Copies `bytes`, which must hold numel(shape) * dtype_size(dtype) bytes.
  Literal(DType dtype, std::vector<int64_t> shape, std::span<const uint8_t> bytes);

  template <class T>
  static Literal from(const std::vector<T>& values, std::vector<int64_t> shape) {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> b(values.begin(), values.end());
      return Literal(DType::boolean, std::move(shape), b);
    } else {
      return Literal(dtype_of<T>(), std::move(shape),
                     {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(T)});
    }
  }
  template <class T>
  static Literal from(const std::vector<T>& values) {
    return from(values, {static_cast<int64_t>(values.size())});
  }
  // A tensor of `shape` filled with `value` converted to `dtype`.
  static Literal full(DType dtype, std::vector<int64_t> shape, double value);
  static Literal scalar(DType dtype, double value) { return full(dtype, {}, value); }
  // Converts each double to `dtype` (f16/bf16 rounded to nearest even).
  static Literal from_doubles(DType dtype, std::vector<int64_t> shape,
                              const std::vector<double>& values);

  // A string literal (rlx/strings.h) of `values`, row-major.
  static Literal from_strings(const std::vector<std::string>& values, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  TensorType type() const { return {dtype_, to_shape(shape_)}; }
  int64_t numel() const;
  std::span<const uint8_t> bytes() const { return {data_->data(), data_->size()}; }
  const void* data() const { return data_->data(); }

  // Element i (row-major) converted to double / int64.
  double at(int64_t i) const;
  int64_t at_int(int64_t i) const;
  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_ints() const;
  std::string_view string_at(int64_t i) const;  // element i of a string literal

  bool operator==(const Literal& o) const;

 private:
  DType dtype_;
  std::vector<int64_t> shape_;
  std::shared_ptr<const std::vector<uint8_t>> data_;
};

}  // namespace rlx
