// Shape ops that only move data, each one strided copy on the device (copy.cu): transpose,
// broadcast_to, slice, concat, split, pad, tile, flip. The copies read the
// inputs through their strides, as the CPU's do (backend/cpu/shape.cpp has the layouts).
#include <algorithm>

#include "backend/copy_views.h"
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/families.h"

namespace rlx::cuda {

namespace {

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

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

// All of y from x read as `src` says (copy_views.h).
void copy_view(const KernelContext& ctx, Tensor& y, const Tensor& x, const views::Source& src) {
  copy_to(ctx, y, at(x, src.offset), src.strides);
}

void transpose_kernel(const KernelContext& ctx, Ins in, Outs out) {
  copy_view(ctx, out[0], in[0], views::transpose(in[0], ctx.attrs.get_ints("perm")));
}

void broadcast_to_kernel(const KernelContext& ctx, Ins in, Outs out) {
  copy_view(ctx, out[0], in[0], views::broadcast(in[0], out[0].shape()));
}

void slice_kernel(const KernelContext& ctx, Ins in, Outs out) {
  if (out[0].numel() == 0) return;
  copy_view(ctx, out[0], in[0], views::slice(ctx.attrs, in[0], out[0].shape()));
}

void concat_kernel(const KernelContext& ctx, Ins in, Outs out) {
  Tensor& y = out[0];
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), y.rank()));
  auto ys = contiguous_strides(y.shape());
  int64_t pos = 0;
  for (const Tensor& x : in) {
    copy_raw(at(y, pos * ys[axis]), ys, x.data(), x.strides(), x.shape(), elem(y), stream_of(ctx));
    pos += x.shape()[axis];
  }
}

// A contiguous x in one launch (a fused q/k/v product's parts, every decode step); else
// a strided copy per part.
void split_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), x.rank()));
  if (x.is_contiguous()) {
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (size_t d = axis + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
    std::vector<void*> dst;
    std::vector<int64_t> sizes;
    for (Tensor& y : out) dst.push_back(y.data()), sizes.push_back(y.shape()[axis]);
    if (split_contiguous(x.data(), outer, inner, dst, sizes, elem(x), stream_of(ctx))) return;
  }
  int64_t pos = 0;
  for (Tensor& y : out) {
    copy_to(ctx, y, at(x, pos * x.strides()[axis]), x.strides());
    pos += y.shape()[axis];
  }
}

// Constant mode: fill, then copy the part of x that survives. Edge and reflect: each
// element reads its source (copy.cu's pad_edges).
void pad_kernel(const KernelContext& ctx, Ins in, Outs out) {
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  const IntList& pads = ctx.attrs.get_ints("pads");
  const std::string& mode = ctx.attrs.get_string("mode");
  if (mode != "constant") return pad_edges(in[0], y, pads, mode == "reflect", stream_of(ctx));
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p > 0; }))
    fill(y, ctx.attrs.get_float("value"), stream_of(ctx));
  views::Copy c = views::pad_interior(in[0], y.shape(), pads);
  if (c.empty) return;
  copy_raw(at(y, c.dst_offset), c.dst_strides, at(in[0], c.src_offset), c.src_strides, c.shape,
           elem(y), stream_of(ctx));
}

bool pad_supported(const KernelQuery& q) {
  const std::string& mode = q.attrs.get_string("mode");
  return mode == "constant" ||
         ((mode == "edge" || mode == "reflect") && q.inputs[0].rank() <= kMaxPadRank);
}

void tile_kernel(const KernelContext& ctx, Ins in, Outs out) {
  Tensor& y = out[0];
  views::Copy c = views::tile(in[0], y.shape(), ctx.attrs.get_ints("repeats"));
  copy_raw(y.data(), c.dst_strides, in[0].data(), c.src_strides, c.shape, elem(y), stream_of(ctx));
}

void flip_kernel(const KernelContext& ctx, Ins in, Outs out) {
  if (in[0].numel() == 0) return;
  copy_view(ctx, out[0], in[0], views::flip(in[0], ctx.attrs.get_ints("axes")));
}

// The literal uploaded; a program keeps the result for every later run (it has no inputs).
void constant_kernel(const KernelContext& ctx, Ins, Outs out) {
  const Literal& v = ctx.attrs.get_tensor("value");
  Tensor host =
      Tensor::wrap(v.dtype(), v.shape(), const_cast<void*>(v.data()), [keep = v](void*) {});
  out[0] = host.to(ctx.device);
}

}  // namespace

void register_shape(KernelRegistry& r) {
  add_kernel(r, "constant", constant_kernel, {}, {.makes_outputs = true});
  KernelFlags strided{.strided_inputs = true};
  add_kernel(r, "split", views::split_views, views::split_is_views, {.makes_outputs = true});
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
  add_kernel(r, "pad", pad_kernel, pad_supported, strided);
}

}  // namespace rlx::cuda
