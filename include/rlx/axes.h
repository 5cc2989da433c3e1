// Axes as ops take them (NumPy's convention: -1 is the last dim) and the shape arithmetic
// around them. One definition for the ops, the transforms, the passes, the frontends and
// every backend's kernels (downstream packages too); shape inference has already checked
// the range (ops/infer_util.h normalize_axis names a bad one).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rlx {

// Axis `axis` in [-rank, rank) as an index in [0, rank).
constexpr int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// The index into an axis of size n that position s of its padded form reads (s counted
// from the axis's first element: the leading pad is s < 0). reflect mirrors without
// repeating the edge (its pads are below n: shape inference checks), else the edge repeats.
// The CPU and CUDA pads and the CUDA stft's framing share it (constexpr: device code too).
constexpr int64_t pad_source(int64_t s, int64_t n, bool reflect) {
  if (reflect) {
    if (s < 0) s = -s;
    if (s >= n) s = 2 * (n - 1) - s;
  }
  return s < 0 ? 0 : s >= n ? n - 1 : s;
}

// A transpose's perm as a full list of indices in [0, rank): an empty one reverses the
// dims (NumPy's default), negative entries count from the end.
inline std::vector<int64_t> full_perm(std::vector<int64_t> perm, int64_t rank) {
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  for (int64_t& p : perm) p = norm_axis(p, rank);
  return perm;
}

// The product of dims[from, to) (to clamped to the rank); 1 for an empty range.
constexpr int64_t dims_product(std::span<const int64_t> dims, size_t from = 0,
                               size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, dims.size()); ++i) p *= dims[i];
  return p;
}

// A shape seen around one axis: the dims before it (outer), the axis (n), the dims after it
// (inner), as a kernel over that axis walks it.
struct AxisSplit {
  int64_t outer, n, inner;
};
constexpr AxisSplit split_at(std::span<const int64_t> shape, int64_t axis) {
  const auto a = size_t(norm_axis(axis, int64_t(shape.size())));
  return {dims_product(shape, 0, a), shape[a], dims_product(shape, a + 1)};
}

}  // namespace rlx
