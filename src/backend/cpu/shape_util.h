// Shared pieces of the shape-family kernels (shape.cpp, shape_index.cpp, shape_sort.cpp):
// data movement by element size, the strided N-d copy, axis layouts and index reading.
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/isa.h"
#include "rlx/axes.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

// Elements per parallel chunk for plain copies.
inline constexpr int64_t kCopyGrain = 32768;

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

inline size_t elem_size(const Tensor& t) { return dtype_size(t.dtype()); }

// Walks rows (every dim of `outer`, row-major) keeping K offsets off[k] = sum idx_d *
// strides[k][d], updated incrementally; starts at row `row`.
template <size_t K>
class RowWalker {
 public:
  RowWalker(std::span<const int64_t> outer, std::array<std::span<const int64_t>, K> strides,
            int64_t row)
      : shape_(outer), strides_(strides), idx_(outer.size(), 0) {
    off.fill(0);
    for (size_t d = outer.size(); d-- > 0;) {
      idx_[d] = row % outer[d];
      row /= outer[d];
      for (size_t k = 0; k < K; ++k) off[k] += idx_[d] * strides_[k][d];
    }
  }
  void next() {
    for (size_t d = shape_.size(); d-- > 0;) {
      for (size_t k = 0; k < K; ++k) off[k] += strides_[k][d];
      if (++idx_[d] < shape_[d]) return;
      for (size_t k = 0; k < K; ++k) off[k] -= strides_[k][d] * shape_[d];
      idx_[d] = 0;
    }
  }
  std::array<int64_t, K> off;

 private:
  std::span<const int64_t> shape_;
  std::array<std::span<const int64_t>, K> strides_;
  std::vector<int64_t> idx_;
};

// dst[i] = src[i] for every index i of `shape`. Strides are in elements and may be zero
// (broadcast) or negative (flip); dims are collapsed where both sides allow it and rows
// that are contiguous on both sides are memcpy'd.
void copy_strided(void* dst, std::span<const int64_t> dst_strides, const void* src,
                  std::span<const int64_t> src_strides, std::span<const int64_t> shape,
                  size_t elem);

// Fills `t` (contiguous) with `value` converted to its dtype.
void fill_value(Tensor& t, double value);

inline int64_t wrap_index(int64_t v, int64_t n) { return v < 0 ? v + n : v; }

// Checks the n indices at p (negatives wrap once, ONNX): element i addresses axis
// axis_of(i) of `data`. One out of range throws ValueError naming the op, the index and
// the valid range; kernels check before they write anything.
template <class I, class AxisOf>
void check_indices(const I* p, int64_t n, const std::vector<int64_t>& data, const std::string& op,
                   AxisOf axis_of) {
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t v = int64_t(p[i]), axis = axis_of(i), size = data[size_t(axis)];
      int64_t w = wrap_index(v, size);
      if (w < 0 || w >= size)
        fail<ValueError>(op, "expected indices in [", -size, ", ", size, ") for axis ", axis,
                         " of data ", ints_str(data), ", got ", v);
    }
  });
}

// The indices of `idx` (any integer dtype), checked, wrapped and widened to int64.
template <class AxisOf>
std::vector<int64_t> read_indices(const Tensor& idx, const std::vector<int64_t>& data,
                                  const std::string& op, AxisOf axis_of) {
  std::vector<int64_t> out(size_t(idx.numel()));
  visit_int(idx.dtype(), op.c_str(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = idx.data_as<I>();
    check_indices(p, idx.numel(), data, op, axis_of);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = wrap_index(int64_t(p[i]), data[size_t(axis_of(int64_t(i)))]);
  });
  return out;
}

// Kernels of the other shape files, registered by register_shape().
void register_shape_index(KernelRegistry& r);  // shape_index.cpp
void register_shape_sort(KernelRegistry& r);   // shape_sort.cpp

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
