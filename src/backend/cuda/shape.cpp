// Shape ops that only move data, each one strided copy on the device (copy.cu): transpose,
// broadcast_to, slice, concat, split, pad (constant mode), tile, flip. The copies read the
// inputs through their strides, as the CPU's do (backend/cpu/shape.cpp has the layouts).
#include <algorithm>

#include "backend/cuda/cuda_util.h"
#include "backend/cuda/families.h"

namespace rlx::gpu {

namespace {

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }
size_t elem(const Tensor& t) { return dtype_size(t.dtype()); }
const char* at(const Tensor& t, int64_t elem_offset) {
  return static_cast<const char*>(t.data()) + elem_offset * int64_t(elem(t));
}
char* at(Tensor& t, int64_t elem_offset) {
  return static_cast<char*>(t.data()) + elem_offset * int64_t(elem(t));
}

// All of y (contiguous) from src read through src_strides.
void copy_to(const KernelContext& ctx, Tensor& y, const void* src,
             const std::vector<int64_t>& src_strides) {
  copy_raw(y.data(), contiguous_strides(y.shape()), src, src_strides, y.shape(), elem(y),
           stream_of(ctx));
}

void transpose_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  int64_t r = x.rank();
  IntList perm = ctx.attrs.get_ints("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> s(static_cast<size_t>(r));
  for (size_t i = 0; i < s.size(); ++i) s[i] = x.strides()[size_t(norm_axis(perm[i], r))];
  copy_to(ctx, out[0], x.data(), s);
}

void broadcast_to_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  const auto& shape = out[0].shape();
  size_t lead = shape.size() - size_t(x.rank());
  std::vector<int64_t> s(shape.size(), 0);
  for (size_t i = 0; i < size_t(x.rank()); ++i)
    if (x.shape()[i] == shape[lead + i]) s[lead + i] = x.strides()[i];
  copy_to(ctx, out[0], x.data(), s);
}

void slice_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  const IntList& starts = ctx.attrs.get_ints("starts");
  const IntList& steps = ctx.attrs.get_ints("steps");
  const IntList& axes = ctx.attrs.get_ints("axes");
  std::vector<int64_t> s = x.strides();
  int64_t off = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t ax = size_t(axes.empty() ? int64_t(i) : norm_axis(axes[i], x.rank()));
    int64_t step = steps.empty() ? 1 : steps[i], n = x.shape()[ax];
    int64_t start = std::clamp<int64_t>(starts[i] < 0 ? starts[i] + n : starts[i], 0,
                                        step > 0 ? n : n - 1);
    off += start * s[ax];
    s[ax] = y.shape()[ax] > 1 ? s[ax] * step : 0;  // one element needs no stride
  }
  copy_to(ctx, y, at(x, off), s);
}

void concat_kernel(const KernelContext& ctx, Ins in, Outs out) {
  Tensor& y = out[0];
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), y.rank()));
  auto ys = contiguous_strides(y.shape());
  int64_t pos = 0;
  for (const Tensor& x : in) {
    copy_raw(at(y, pos * ys[axis]), ys, x.data(), x.strides(), x.shape(), elem(y),
             stream_of(ctx));
    pos += x.shape()[axis];
  }
}

void split_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), x.rank()));
  int64_t pos = 0;
  for (Tensor& y : out) {
    copy_to(ctx, y, at(x, pos * x.strides()[axis]), x.strides());
    pos += y.shape()[axis];
  }
}

// Constant mode: fill, then copy the part of x that survives (negative pads crop).
void pad_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  const IntList& pads = ctx.attrs.get_ints("pads");
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p > 0; }))
    fill(y, ctx.attrs.get_float("value"), stream_of(ctx));
  size_t r = size_t(x.rank());
  auto ys = contiguous_strides(y.shape());
  std::vector<int64_t> len(r);
  int64_t src_off = 0, dst_off = 0;
  for (size_t d = 0; d < r; ++d) {
    int64_t lo = pads[d], src0 = std::max<int64_t>(-lo, 0), dst0 = std::max<int64_t>(lo, 0);
    len[d] = std::min(x.shape()[d] - src0, y.shape()[d] - dst0);
    if (len[d] <= 0) return;
    src_off += src0 * x.strides()[d];
    dst_off += dst0 * ys[d];
  }
  copy_raw(at(y, dst_off), ys, at(x, src_off), x.strides(), len, elem(y), stream_of(ctx));
}

bool constant_pad(const KernelQuery& q) { return q.attrs.get_string("mode") == "constant"; }

// y viewed as [r0, n0, r1, n1, …]: the repeat dims read x with stride 0.
void tile_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const IntList& reps = ctx.attrs.get_ints("repeats");
  auto ys = contiguous_strides(y.shape());
  std::vector<int64_t> shape, ds, ss;
  for (size_t d = 0; d < size_t(x.rank()); ++d) {
    int64_t n = x.shape()[d];
    shape.insert(shape.end(), {reps[d], n});
    ds.insert(ds.end(), {n * ys[d], ys[d]});
    ss.insert(ss.end(), {0, x.strides()[d]});
  }
  copy_raw(y.data(), ds, x.data(), ss, shape, elem(y), stream_of(ctx));
}

void flip_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  if (x.numel() == 0) return;
  const IntList& axes = ctx.attrs.get_ints("axes");
  std::vector<int64_t> s = x.strides();
  std::vector<bool> flip(s.size(), axes.empty());
  for (int64_t a : axes) flip[size_t(norm_axis(a, x.rank()))] = true;
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!flip[d]) continue;
    off += (x.shape()[d] - 1) * s[d];
    s[d] = -s[d];
  }
  copy_to(ctx, out[0], at(x, off), s);
}

// The literal uploaded; a program keeps the result for every later run (it has no inputs).
void constant_kernel(const KernelContext& ctx, Ins, Outs out) {
  const Literal& v = ctx.attrs.get_tensor("value");
  Tensor host = Tensor::wrap(v.dtype(), v.shape(), const_cast<void*>(v.data()), [keep = v](void*) {});
  out[0] = host.to(ctx.device);
}

}  // namespace

void register_shape(KernelRegistry& r) {
  add_kernel(r, "constant", constant_kernel, {}, {.makes_outputs = true});
  KernelFlags strided{.strided_inputs = true};
  struct Entry {
    const char* op;
    void (*fn)(const KernelContext&, Ins, Outs);
  };
  for (const Entry& e : {Entry{"transpose", transpose_kernel},
                         {"broadcast_to", broadcast_to_kernel},
                         {"slice", slice_kernel},
                         {"concat", concat_kernel},
                         {"split", split_kernel},
                         {"tile", tile_kernel},
                         {"flip", flip_kernel}})
    add_kernel(r, e.op, e.fn, {}, strided);
  add_kernel(r, "pad", pad_kernel, constant_pad, strided);
}

}  // namespace rlx::gpu
