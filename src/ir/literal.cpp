#include "rlx/literal.h"

#include <cmath>
#include <cstring>

#include "rlx/error.h"

namespace rlx {

namespace {
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail<ValueError>("Literal", "expected sizes >= 0, got ", shape_str(to_shape({d})));
    n *= d;
  }
  return n;
}

void store(DType t, uint8_t* p, double v) {
  switch (t) {
    case DType::f32: { float x = float(v); std::memcpy(p, &x, 4); break; }
    case DType::f64: std::memcpy(p, &v, 8); break;
    case DType::f16: { uint16_t x = f32_to_f16(float(v)); std::memcpy(p, &x, 2); break; }
    case DType::bf16: { uint16_t x = f32_to_bf16(float(v)); std::memcpy(p, &x, 2); break; }
    case DType::i8: { int8_t x = int8_t(v); std::memcpy(p, &x, 1); break; }
    case DType::i16: { int16_t x = int16_t(v); std::memcpy(p, &x, 2); break; }
    case DType::i32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
    case DType::i64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
    case DType::u8: { uint8_t x = uint8_t(v); std::memcpy(p, &x, 1); break; }
    case DType::boolean: *p = v != 0 ? 1 : 0; break;
  }
}

template <class T>
T load(const uint8_t* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}
}  // namespace

Literal::Literal() : Literal(DType::f32, {}, std::vector<uint8_t>(4, 0)) {}

Literal::Literal(DType dtype, std::vector<int64_t> shape, std::span<const uint8_t> bytes)
    : dtype_(dtype), shape_(std::move(shape)) {
  size_t want = size_t(checked_numel(shape_)) * dtype_size(dtype);
  if (bytes.size() != want)
    fail<ValueError>("Literal", "expected ", want, " bytes for ", type().str(), ", got ",
                     bytes.size());
  data_ = std::make_shared<const std::vector<uint8_t>>(bytes.begin(), bytes.end());
}

Literal Literal::full(DType dtype, std::vector<int64_t> shape, double value) {
  int64_t n = checked_numel(shape);
  size_t es = dtype_size(dtype);
  std::vector<uint8_t> buf(size_t(n) * es);
  for (int64_t i = 0; i < n; ++i) store(dtype, buf.data() + i * es, value);
  return Literal(dtype, std::move(shape), buf);
}

Literal Literal::from_doubles(DType dtype, std::vector<int64_t> shape,
                              const std::vector<double>& values) {
  int64_t n = checked_numel(shape);
  if (int64_t(values.size()) != n)
    fail<ValueError>("Literal", "expected ", n, " values for shape ", shape_str(to_shape(shape)),
                     ", got ", values.size());
  size_t es = dtype_size(dtype);
  std::vector<uint8_t> buf(size_t(n) * es);
  for (int64_t i = 0; i < n; ++i) store(dtype, buf.data() + i * es, values[size_t(i)]);
  return Literal(dtype, std::move(shape), buf);
}

int64_t Literal::numel() const { return checked_numel(shape_); }

double Literal::at(int64_t i) const {
  if (i < 0 || i >= numel()) fail<ValueError>("Literal", "expected index < ", numel(), ", got ", i);
  const uint8_t* p = data_->data() + size_t(i) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::f32: return load<float>(p);
    case DType::f64: return load<double>(p);
    case DType::f16: return f16_to_f32(load<uint16_t>(p));
    case DType::bf16: return bf16_to_f32(load<uint16_t>(p));
    case DType::i8: return load<int8_t>(p);
    case DType::i16: return load<int16_t>(p);
    case DType::i32: return load<int32_t>(p);
    case DType::i64: return double(load<int64_t>(p));
    case DType::u8: return load<uint8_t>(p);
    case DType::boolean: return *p ? 1.0 : 0.0;
  }
  return 0;
}

int64_t Literal::at_int(int64_t i) const {
  if (dtype_ == DType::i64) {
    if (i < 0 || i >= numel())
      fail<ValueError>("Literal", "expected index < ", numel(), ", got ", i);
    return load<int64_t>(data_->data() + size_t(i) * 8);
  }
  return int64_t(at(i));
}

std::vector<double> Literal::to_doubles() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = at(int64_t(i));
  return out;
}

std::vector<int64_t> Literal::to_ints() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = at_int(int64_t(i));
  return out;
}

bool Literal::operator==(const Literal& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ &&
         (data_ == o.data_ || *data_ == *o.data_);
}

}  // namespace rlx
