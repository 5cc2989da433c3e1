#include "rlx/tensor.h"

#include <cstdlib>
#include <new>
#include <numeric>

#include "rlx/strings.h"
#include "runtime/device_backend.h"

namespace rlx {

// ---- Buffer ---------------------------------------------------------------------------

std::shared_ptr<Buffer> Buffer::wrap(void* data, size_t bytes, Device device,
                                     std::function<void(void*)> release) {
  return std::shared_ptr<Buffer>(new Buffer(data, bytes, device, std::move(release)));
}

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes, Device device) {
  if (device.is_cpu()) return allocate_host(bytes);
  return detail::device_backend(device).allocate(bytes, device);
}

Buffer::~Buffer() {
  if (release_) release_(data_);
}

// ---- Tensor ---------------------------------------------------------------------------

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

void Tensor::check_count(size_t n, const std::vector<int64_t>& shape) {
  int64_t want = checked_numel(shape, "Tensor");
  if (int64_t(n) != want)
    fail<ValueError>("Tensor", "expected ", want, " values for shape ", ints_str(shape), ", got ",
                     n);
}

Tensor Tensor::empty(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  size_t bytes = dtype_nbytes(dtype, checked_numel(shape, "Tensor"));
  t.buffer_ = Buffer::allocate_host(bytes);
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::empty(DType dtype, std::vector<int64_t> shape, Device device) {
  if (device.is_cpu()) return empty(dtype, std::move(shape));
  Tensor t;
  size_t bytes = dtype_nbytes(dtype, checked_numel(shape, "Tensor"));
  t.buffer_ = Buffer::allocate(bytes, device);
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (!defined()) fail<ValueError>("Tensor::to", "expected a defined tensor, got an empty one");
  if (this->device() == device) return *this;
  Tensor out = empty(dtype_, shape_, device);
  detail::device_backend(device.is_cpu() ? this->device() : device).copy(*this, out);
  return out;
}

Tensor Tensor::full(DType dtype, std::vector<int64_t> shape, double value) {
  Tensor t = empty(dtype, std::move(shape));
  auto* p = static_cast<uint8_t*>(t.data());
  size_t es = dtype_size(dtype);
  uint8_t pattern[16];  // c128: two doubles
  store_double(dtype, pattern, value);
  for (int64_t i = 0, n = t.numel(); i < n; ++i) std::memcpy(p + i * es, pattern, es);
  return t;
}

Tensor Tensor::from_data(DType dtype, std::vector<int64_t> shape, const void* data) {
  Tensor t = empty(dtype, std::move(shape));
  if (t.nbytes()) std::memcpy(t.data(), data, t.nbytes());
  return t;
}

Tensor Tensor::wrap(DType dtype, std::vector<int64_t> shape, void* data,
                    std::function<void(void*)> release) {
  return wrap(dtype, std::move(shape), data, Device::cpu(), std::move(release));
}

Tensor Tensor::wrap(DType dtype, std::vector<int64_t> shape, void* data, Device device,
                    std::function<void(void*)> release) {
  Tensor t;
  size_t bytes = dtype_nbytes(dtype, checked_numel(shape, "Tensor"));
  t.buffer_ = Buffer::wrap(data, bytes, device, std::move(release));
  t.dtype_ = dtype;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::from_doubles(DType dtype, std::vector<int64_t> shape,
                            const std::vector<double>& values) {
  check_count(values.size(), shape);
  Tensor t = empty(dtype, std::move(shape));
  auto* p = static_cast<uint8_t*>(t.data());
  size_t es = dtype_size(dtype);
  for (size_t i = 0; i < values.size(); ++i) store_double(dtype, p + i * es, values[i]);
  return t;
}

Tensor Tensor::from_strings(const std::vector<std::string>& values, std::vector<int64_t> shape) {
  check_count(values.size(), shape);
  Tensor t = empty(DType::string, std::move(shape));
  auto* p = t.data_as<StringHandle>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = intern(values[i]);
  return t;
}

Tensor Tensor::from_literal(const Literal& lit) {
  return from_data(lit.dtype(), lit.shape(), lit.data());
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

Device Tensor::device() const { return buffer_ ? buffer_->device() : Device::cpu(); }

void* Tensor::data() const {
  if (!buffer_) fail<ValueError>("Tensor", "expected a defined tensor, got an empty one");
  auto* base = static_cast<uint8_t*>(buffer_->data());
  if (is_quantized(dtype_)) return base + dtype_nbytes(dtype_, offset_);  // whole blocks
  return base + offset_ * int64_t(dtype_size(dtype_));
}

bool Tensor::is_contiguous() const {
  int64_t acc = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

Tensor Tensor::contiguous() const {
  if (defined() && is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  if (!defined()) fail<ValueError>("Tensor::clone", "expected a defined tensor, got an empty one");
  if (!device().is_cpu()) {
    Tensor out = empty(dtype_, shape_, device());
    detail::device_backend(device()).copy(*this, out);
    return out;
  }
  Tensor out = empty(dtype_, shape_);
  if (is_quantized(dtype_)) return clone_rows(out);
  size_t es = dtype_size(dtype_);
  auto* dst = static_cast<uint8_t*>(out.data());
  const auto* base = static_cast<const uint8_t*>(data());
  int64_t n = numel(), r = rank();
  std::vector<int64_t> idx(size_t(r), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += idx[size_t(d)] * strides_[size_t(d)];
    std::memcpy(dst + i * int64_t(es), base + off * int64_t(es), es);
    for (int64_t d = r - 1; d >= 0; --d) {  // odometer increment
      if (++idx[size_t(d)] < shape_[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

// A quantized tensor is copied row by row: its last dim (whole blocks) must be dense.
Tensor Tensor::clone_rows(Tensor& out) const {
  int64_t r = rank(), row = r ? shape_.back() : 1;
  if (r && shape_.back() != 1 && strides_.back() != 1)
    fail<ValueError>("Tensor::clone", "expected a ", dtype_name(dtype_),
                     " tensor with dense rows (last stride 1), got strides ", ints_str(strides_));
  size_t row_bytes = dtype_nbytes(dtype_, row);
  auto* dst = static_cast<uint8_t*>(out.data());
  auto* base = static_cast<const uint8_t*>(buffer_->data());
  int64_t rows = row ? numel() / row : 0;
  std::vector<int64_t> idx(size_t(r > 0 ? r - 1 : 0), 0);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t off = offset_;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides_[d];
    std::memcpy(dst + size_t(i) * row_bytes, base + dtype_nbytes(dtype_, off), row_bytes);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < shape_[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<double> Tensor::to_doubles() const {
  Tensor c = to(Device::cpu()).contiguous();
  std::vector<double> out(size_t(c.numel()));
  const auto* p = static_cast<const uint8_t*>(c.data());
  size_t es = dtype_size(dtype_);
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_double(dtype_, p + i * es);
  return out;
}

std::vector<std::string> Tensor::to_strings() const {
  if (dtype_ != DType::string)
    fail<TypeError>("Tensor", "expected to_strings of a string tensor, got ", dtype_name(dtype_));
  Tensor c = to(Device::cpu()).contiguous();
  std::vector<std::string> out;
  const auto* p = c.data_as<const StringHandle>();
  for (int64_t i = 0; i < c.numel(); ++i) out.emplace_back(string_of(p[i]));
  return out;
}

Literal Tensor::to_literal() const {
  Tensor c = to(Device::cpu()).contiguous();
  return Literal(dtype_, shape_, {static_cast<const uint8_t*>(c.data()), c.nbytes()});
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer_at < 0) {
      infer_at = int64_t(i);
    } else if (shape[i] < 0) {
      fail<ValueError>("Tensor::reshape", "expected sizes >= 0 and at most one -1, got ",
                       ints_str(shape));
    } else {
      known *= shape[i];
    }
  }
  if (infer_at >= 0 && known != 0 && numel() % known == 0)
    shape[size_t(infer_at)] = numel() / known;
  if (infer_at >= 0 && shape[size_t(infer_at)] < 0)
    fail<ValueError>("Tensor::reshape", "expected a shape that divides ", numel(), " elements");
  if (checked_numel(shape, "Tensor") != numel())
    fail<ValueError>("Tensor::reshape", "expected ", numel(), " elements, got shape ",
                     ints_str(shape));
  Tensor t = contiguous();
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::swap_last2() const {
  if (rank() < 2) fail<ValueError>("Tensor::swap_last2", "expected rank >= 2, got ", rank());
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  return permute(perm);
}

Tensor Tensor::permute(const std::vector<int64_t>& perm) const {
  if (int64_t(perm.size()) != rank())
    fail<ValueError>("Tensor::permute", "expected ", rank(), " axes, got ", perm.size());
  std::vector<bool> seen(perm.size(), false);
  Tensor t = *this;
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= rank() || seen[size_t(p)])
      fail<ValueError>("Tensor::permute", "expected a permutation of 0..", rank() - 1,
                       ", got axis ", p, " at position ", i);
    seen[size_t(p)] = true;
    t.shape_[i] = shape_[size_t(p)];
    t.strides_[i] = strides_[size_t(p)];
  }
  return t;
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  if (axis < 0) axis += rank();
  if (axis < 0 || axis >= rank())
    fail<ValueError>("Tensor::slice", "expected an axis in [0, ", rank(), "), got ", axis);
  if (step <= 0) fail<ValueError>("Tensor::slice", "expected a positive step, got ", step);
  int64_t n = shape_[size_t(axis)];
  start = std::clamp<int64_t>(start < 0 ? start + n : start, 0, n);
  stop = std::clamp<int64_t>(stop < 0 ? stop + n : stop, 0, n);
  Tensor t = *this;
  int64_t len = stop > start ? (stop - start + step - 1) / step : 0;
  t.offset_ += start * strides_[size_t(axis)];
  t.shape_[size_t(axis)] = len;
  t.strides_[size_t(axis)] *= step;
  return t;
}

Tensor Tensor::broadcast_to(const std::vector<int64_t>& shape) const {
  if (shape.size() < shape_.size())
    fail<ValueError>("Tensor::broadcast_to", "expected a target rank >= ", rank(), ", got ",
                     ints_str(shape));
  Tensor t = *this;
  size_t lead = shape.size() - shape_.size();
  t.shape_ = shape;
  t.strides_.assign(shape.size(), 0);
  for (size_t i = 0; i < shape_.size(); ++i) {
    int64_t from = shape_[i], to = shape[lead + i];
    if (from == to)
      t.strides_[lead + i] = strides_[i];
    else if (from != 1)
      fail<ValueError>("Tensor::broadcast_to", "expected broadcastable shapes, got ",
                       ints_str(shape_), " and ", ints_str(shape));
  }
  return t;
}

}  // namespace rlx
