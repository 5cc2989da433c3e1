// The shape ops that move data, as one strided copy each: where each output element is
// read from (an element offset into the input and per-dim strides; zero for a broadcast,
// negative for a flip). Shared by the CPU and CUDA kernels (backend/*/shape.cpp), which
// differ only in the copy that follows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/axes.h"
#include "rlx/kernel.h"
#include "rlx/tensor.h"

namespace rlx::views {

// Reading x through `strides` from element `offset` gives the output in row-major order.
struct Source {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// transpose: output dim i is input dim perm[i] (empty perm: reversed).
inline Source transpose(const Tensor& x, const IntList& perm) {
  Source s;
  for (int64_t p : full_perm(perm, x.rank())) s.strides.push_back(x.strides()[size_t(p)]);
  return s;
}

// broadcast_to `shape` (right-aligned; size-1 dims repeat).
inline Source broadcast(const Tensor& x, const std::vector<int64_t>& shape) {
  size_t lead = shape.size() - size_t(x.rank());
  Source s{0, std::vector<int64_t>(shape.size(), 0)};
  for (size_t i = 0; i < size_t(x.rank()); ++i)
    if (x.shape()[i] == shape[lead + i]) s.strides[lead + i] = x.strides()[i];
  return s;
}

// The axis, first index (clamped) and step of each sliced axis of x.
struct SliceAxis {
  size_t axis;
  int64_t start, step;
};
inline std::vector<SliceAxis> slice_axes(const Attrs& a, const Tensor& x) {
  const IntList& starts = a.get_ints("starts");
  const IntList& steps = a.get_ints("steps");
  const IntList& axes = a.get_ints("axes");
  std::vector<SliceAxis> out;
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t ax = size_t(axes.empty() ? int64_t(i) : norm_axis(axes[i], x.rank()));
    int64_t step = steps.empty() ? 1 : steps[i];
    int64_t n = x.shape()[ax];
    int64_t start = starts[i] < 0 ? starts[i] + n : starts[i];
    out.push_back({ax, std::clamp<int64_t>(start, 0, step > 0 ? n : n - 1), step});
  }
  return out;
}

// slice into an output of `shape` (not empty).
inline Source slice(const Attrs& a, const Tensor& x, const std::vector<int64_t>& shape) {
  Source s{0, x.strides()};
  for (const SliceAxis& ax : slice_axes(a, x)) {
    s.offset += ax.start * s.strides[ax.axis];
    // A single element needs no stride (and step may be huge).
    s.strides[ax.axis] = shape[ax.axis] > 1 ? s.strides[ax.axis] * ax.step : 0;
  }
  return s;
}

// flip along `axes` (empty: all).
inline Source flip(const Tensor& x, const IntList& axes) {
  Source s{0, x.strides()};
  std::vector<bool> flipped(s.strides.size(), axes.empty());
  for (int64_t a : axes) flipped[size_t(norm_axis(a, x.rank()))] = true;
  for (size_t d = 0; d < s.strides.size(); ++d) {
    if (!flipped[d]) continue;
    s.offset += (x.shape()[d] - 1) * s.strides[d];
    s.strides[d] = -s.strides[d];
  }
  return s;
}

// A copy over its own index space: both sides' strides, and offsets into each.
struct Copy {
  std::vector<int64_t> shape, dst_strides, src_strides;
  int64_t dst_offset = 0, src_offset = 0;
  bool empty = false;  // nothing to copy
};

// tile: y (contiguous) viewed as [r0, n0, r1, n1, …]; the repeat dims read x with stride 0.
inline Copy tile(const Tensor& x, const std::vector<int64_t>& y_shape, const IntList& reps) {
  auto ys = contiguous_strides(y_shape);
  Copy c;
  for (size_t d = 0; d < size_t(x.rank()); ++d) {
    int64_t n = x.shape()[d];
    c.shape.insert(c.shape.end(), {reps[d], n});
    c.dst_strides.insert(c.dst_strides.end(), {n * ys[d], ys[d]});
    c.src_strides.insert(c.src_strides.end(), {0, x.strides()[d]});
  }
  return c;
}

// pad in constant mode: after the fill, the part of x that survives (negative pads crop)
// goes to its place in y (contiguous).
inline Copy pad_interior(const Tensor& x, const std::vector<int64_t>& y_shape,
                         const IntList& pads) {
  Copy c;
  c.dst_strides = contiguous_strides(y_shape);
  c.src_strides = x.strides();
  for (size_t d = 0; d < size_t(x.rank()); ++d) {
    int64_t lo = pads[d], src0 = std::max<int64_t>(-lo, 0), dst0 = std::max<int64_t>(lo, 0);
    int64_t len = std::min(x.shape()[d] - src0, y_shape[d] - dst0);
    if (len <= 0) c.empty = true;
    c.shape.push_back(len);
    c.src_offset += src0 * x.strides()[d];
    c.dst_offset += dst0 * c.dst_strides[d];
  }
  return c;
}

// split where every dim before the axis is 1 (a decode step's [1, 1, n] product split
// into its parts): each part is a contiguous run of the input, so the parts are views of
// it (makes_outputs) and no byte moves.
inline bool split_is_views(const KernelQuery& q) {
  const Shape& x = q.inputs[0].shape;
  const int64_t axis = norm_axis(q.attrs.get_int("axis"), int64_t(x.size()));
  for (int64_t d = 0; d < axis; ++d)
    if (!x[size_t(d)].is(1)) return false;
  return true;
}

inline void split_views(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  const Tensor& x = in[0];
  const int64_t axis = norm_axis(ctx.attrs.get_int("axis"), x.rank());
  int64_t at = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t len = ctx.output_shapes[i][size_t(axis)];
    out[i] = x.slice(axis, at, at + len);
    at += len;
  }
}

}  // namespace rlx::views
