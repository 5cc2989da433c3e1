#include "rlx/literal.h"

#include <cmath>
#include <cstring>

#include "rlx/error.h"
#include "rlx/strings.h"

namespace rlx {

Literal::Literal() : Literal(DType::f32, {}, std::vector<uint8_t>(4, 0)) {}

Literal::Literal(DType dtype, std::vector<int64_t> shape, std::span<const uint8_t> bytes)
    : dtype_(dtype), shape_(std::move(shape)) {
  size_t want = dtype_nbytes(dtype, checked_numel(shape_, "Literal"));
  if (bytes.size() != want)
    fail<ValueError>("Literal", "expected ", want, " bytes for ", type().str(), ", got ",
                     bytes.size());
  data_ = std::make_shared<const std::vector<uint8_t>>(bytes.begin(), bytes.end());
}

Literal Literal::full(DType dtype, std::vector<int64_t> shape, double value) {
  int64_t n = checked_numel(shape, "Literal");
  size_t es = dtype_size(dtype);
  std::vector<uint8_t> buf(size_t(n) * es);
  for (int64_t i = 0; i < n; ++i) store_double(dtype, buf.data() + i * es, value);
  return Literal(dtype, std::move(shape), buf);
}

Literal Literal::from_doubles(DType dtype, std::vector<int64_t> shape,
                              const std::vector<double>& values) {
  int64_t n = checked_numel(shape, "Literal");
  if (int64_t(values.size()) != n)
    fail<ValueError>("Literal", "expected ", n, " values for shape ", ints_str(shape), ", got ",
                     values.size());
  size_t es = dtype_size(dtype);
  std::vector<uint8_t> buf(size_t(n) * es);
  for (int64_t i = 0; i < n; ++i) store_double(dtype, buf.data() + i * es, values[size_t(i)]);
  return Literal(dtype, std::move(shape), buf);
}

Literal Literal::from_strings(const std::vector<std::string>& values, std::vector<int64_t> shape) {
  int64_t n = checked_numel(shape, "Literal");
  if (int64_t(values.size()) != n)
    fail<ValueError>("Literal", "expected ", n, " strings for shape ", ints_str(shape), ", got ",
                     values.size());
  std::vector<StringHandle> h;
  for (const std::string& v : values) h.push_back(intern(v));
  return Literal(DType::string, std::move(shape),
                 {reinterpret_cast<const uint8_t*>(h.data()), h.size() * sizeof(StringHandle)});
}

std::string_view Literal::string_at(int64_t i) const {
  if (dtype_ != DType::string)
    fail<TypeError>("Literal", "expected a string literal, got ", dtype_name(dtype_));
  if (i < 0 || i >= numel()) fail<ValueError>("Literal", "expected index < ", numel(), ", got ", i);
  StringHandle h;
  std::memcpy(&h, data_->data() + size_t(i) * sizeof h, sizeof h);
  return string_of(h);
}

int64_t Literal::numel() const { return checked_numel(shape_, "Literal"); }

double Literal::at(int64_t i) const {
  if (i < 0 || i >= numel()) fail<ValueError>("Literal", "expected index < ", numel(), ", got ", i);
  return load_double(dtype_, data_->data() + size_t(i) * dtype_size(dtype_));
}

int64_t Literal::at_int(int64_t i) const {
  if (dtype_ == DType::i64) {
    if (i < 0 || i >= numel())
      fail<ValueError>("Literal", "expected index < ", numel(), ", got ", i);
    int64_t x;
    std::memcpy(&x, data_->data() + size_t(i) * 8, 8);
    return x;
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
  return dtype_ == o.dtype_ && shape_ == o.shape_ && (data_ == o.data_ || *data_ == *o.data_);
}

}  // namespace rlx
