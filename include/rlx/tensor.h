// Tensors: a dtype, a shape, strides, and a reference-counted buffer on a device.
// Host buffers are 64-byte aligned. f16 / bf16 are stored as such (16-bit patterns).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "rlx/device.h"
#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/literal.h"
#include "rlx/shape.h"

namespace rlx {

// Raw device memory with an owner-supplied release function.
class Buffer {
 public:
  // 64-byte aligned host memory (uninitialised). Throws on allocation failure.
  static std::shared_ptr<Buffer> allocate_host(size_t bytes);
  // Uninitialised memory on `device` (the device's pool for CUDA). Throws OutOfMemory.
  static std::shared_ptr<Buffer> allocate(size_t bytes, Device device);
  // Memory owned elsewhere: `release` (may be empty) runs when the last tensor lets go.
  static std::shared_ptr<Buffer> wrap(void* data, size_t bytes, Device device,
                                      std::function<void(void*)> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Device device() const { return device_; }

 private:
  Buffer(void* data, size_t size, Device device, std::function<void(void*)> release)
      : data_(data), size_(size), device_(device), release_(std::move(release)) {}
  void* data_;
  size_t size_;
  Device device_;
  std::function<void(void*)> release_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds no buffer

  // Uninitialised / filled tensors on the host.
  static Tensor empty(DType dtype, std::vector<int64_t> shape);
  // Uninitialised, contiguous, on `device`.
  static Tensor empty(DType dtype, std::vector<int64_t> shape, Device device);
  static Tensor zeros(DType dtype, std::vector<int64_t> shape) { return full(dtype, shape, 0); }
  static Tensor full(DType dtype, std::vector<int64_t> shape, double value);
  // Copies `data` (numel * dtype_size bytes, row-major).
  static Tensor from_data(DType dtype, std::vector<int64_t> shape, const void* data);
  // Wraps caller memory without copying; the caller keeps it alive until `release` runs.
  static Tensor wrap(DType dtype, std::vector<int64_t> shape, void* data,
                     std::function<void(void*)> release = {});
  // The same for memory on `device`.
  static Tensor wrap(DType dtype, std::vector<int64_t> shape, void* data, Device device,
                     std::function<void(void*)> release = {});
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, std::vector<int64_t> shape) {
    check_count(values.size(), shape);
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> b(values.begin(), values.end());
      return from_data(DType::boolean, std::move(shape), b.data());
    } else {
      return from_data(dtype_of<T>(), std::move(shape), values.data());
    }
  }
  // Converts each double to `dtype` (f16/bf16 rounded to nearest even).
  static Tensor from_doubles(DType dtype, std::vector<int64_t> shape,
                             const std::vector<double>& values);
  static Tensor from_literal(const Literal& lit);
  // A string tensor (rlx/strings.h) of `values`, row-major.
  static Tensor from_strings(const std::vector<std::string>& values, std::vector<int64_t> shape);

  bool defined() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }  // in elements
  int64_t rank() const { return int64_t(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return dtype_nbytes(dtype_, numel()); }
  Device device() const;
  TensorType type() const { return {dtype_, to_shape(shape_)}; }
  bool is_contiguous() const;
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  int64_t offset() const { return offset_; }  // in elements

  // The first element (buffer start + offset).
  void* data() const;
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

  // This tensor on `device`: itself when already there, else a contiguous copy. Copies
  // between host and a GPU go through pinned staging memory and wait for the copy.
  Tensor to(Device device) const;

  // Element-order copies out (from any device). to_vector<T> needs T to match the dtype.
  template <class T>
  std::vector<T> to_vector() const {
    if (dtype_of<T>() != dtype_)
      fail<TypeError>("Tensor", "expected to_vector of ", dtype_name(dtype_), ", got ",
                      dtype_name(dtype_of<T>()));
    Tensor c = to(Device::cpu()).contiguous();
    std::vector<T> out(size_t(c.numel()));
    if constexpr (std::is_same_v<T, bool>) {
      const auto* p = static_cast<const uint8_t*>(c.data());
      for (size_t i = 0; i < out.size(); ++i) out[i] = p[i] != 0;
    } else {
      if (!out.empty()) std::memcpy(out.data(), c.data(), c.nbytes());
    }
    return out;
  }
  std::vector<double> to_doubles() const;
  std::vector<std::string> to_strings() const;  // a string tensor's elements, row-major
  Literal to_literal() const;

  // Views share the buffer; contiguous() copies only when needed.
  Tensor reshape(std::vector<int64_t> shape) const;  // a view when contiguous
  Tensor permute(const std::vector<int64_t>& perm) const;
  Tensor swap_last2() const;  // the last two dims swapped (a view); rank >= 2
  Tensor slice(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  Tensor broadcast_to(const std::vector<int64_t>& shape) const;  // stride-0 view
  Tensor contiguous() const;
  Tensor clone() const;  // always a fresh contiguous copy, on the same device

 private:
  static void check_count(size_t n, const std::vector<int64_t>& shape);
  Tensor clone_rows(Tensor& out) const;

  std::shared_ptr<Buffer> buffer_;
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
};

// Host buffers of 256 KiB and more are reused after release (up to RLX_HOST_CACHE_MB,
// default 2048). Frees the cached ones; returns the bytes freed.
size_t empty_host_cache();

// Row-major strides for a shape (in elements).
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

}  // namespace rlx
