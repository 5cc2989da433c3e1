// Shape ops that only move data: views (reshape, expand_dims, squeeze, contiguous
// slices), and the ops built on one strided N-d copy (transpose, broadcast_to, slice,
// concat, split, pad, tile, flip), plus constant and iota. The copies read their inputs through the
// input strides, so a transposed or sliced view is copied once, not made contiguous first.
#include <cstring>

#include "backend/copy_views.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/shape_util.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// One collapsed dim of a copy: size, source stride, destination stride (elements).
struct CopyDim {
  int64_t n, s, d;
};

template <class E>
void copy_rows(char* dst, const char* src, std::span<const int64_t> outer,
               std::span<const int64_t> outer_s, std::span<const int64_t> outer_d, CopyDim in,
               int64_t r0, int64_t r1) {
  RowWalker<2> w(outer, {outer_s, outer_d}, r0);
  for (int64_t r = r0; r < r1; ++r, w.next()) {
    const E* s = reinterpret_cast<const E*>(src) + w.off[0];
    E* d = reinterpret_cast<E*>(dst) + w.off[1];
    if (in.d == 1 && in.s == 1) {
      std::memcpy(d, s, size_t(in.n) * sizeof(E));
    } else if (in.d == 1 && in.s == 0) {
      std::fill(d, d + in.n, *s);
    } else if (in.d == 1 && in.s == -1) {
      for (int64_t j = 0; j < in.n; ++j) d[j] = s[-j];
    } else if (in.d == 1) {
      for (int64_t j = 0; j < in.n; ++j) d[j] = s[j * in.s];
    } else {
      for (int64_t j = 0; j < in.n; ++j) d[j * in.d] = s[j * in.s];
    }
  }
}

// Transposing copies: the destination's inner dim `a` reads the source with a stride
// while dim `b` is contiguous in the source. Square tiles keep both sides in cache. Work
// items are (outer row, strip of kTile along b).
constexpr int64_t kTile = 32;

template <class E>
void copy_tiled(char* dst, const char* src, std::span<const int64_t> outer,
                std::span<const int64_t> outer_s, std::span<const int64_t> outer_d, CopyDim a,
                CopyDim b, int64_t i0, int64_t i1) {
  int64_t strips = (b.n + kTile - 1) / kTile;
  int64_t row = i0 / strips;
  E tile[kTile][kTile];
  RowWalker<2> w(outer, {outer_s, outer_d}, row);
  for (int64_t it = i0; it < i1; ++it) {
    for (; row < it / strips; ++row) w.next();
    const E* s = reinterpret_cast<const E*>(src) + w.off[0];
    E* d = reinterpret_cast<E*>(dst) + w.off[1];
    int64_t x0 = (it % strips) * kTile, x1 = std::min(b.n, x0 + kTile);
    for (int64_t y0 = 0; y0 < a.n; y0 += kTile) {
      // Through a small buffer: each source and destination line is touched once per
      // tile, so power-of-two strides cannot evict lines that are still needed.
      int64_t y1 = std::min(a.n, y0 + kTile);
      for (int64_t y = y0; y < y1; ++y)
        for (int64_t x = x0; x < x1; ++x) tile[y - y0][x - x0] = s[x * b.s + y * a.s];
      for (int64_t x = x0; x < x1; ++x)
        for (int64_t y = y0; y < y1; ++y) d[x * b.d + y * a.d] = tile[y - y0][x - x0];
    }
  }
}

}  // namespace

void copy_strided(void* dst, std::span<const int64_t> dst_strides, const void* src,
                  std::span<const int64_t> src_strides, std::span<const int64_t> shape,
                  size_t elem) {
  // Size-1 dims go; neighbours that are contiguous on both sides merge.
  std::vector<CopyDim> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return;
    if (shape[i] == 1) continue;
    CopyDim c{shape[i], src_strides[i], dst_strides[i]};
    if (!dims.empty() && dims.back().s == c.s * c.n && dims.back().d == c.d * c.n) {
      dims.back() = {dims.back().n * c.n, c.s, c.d};
    } else {
      dims.push_back(c);
    }
  }
  if (dims.empty()) dims.push_back({1, 1, 1});
  CopyDim inner = dims.back();
  size_t tiled = dims.size();  // the source-contiguous dim of a transposing copy, if any
  if (inner.s != 1 && inner.s != 0 && inner.n >= kTile / 2)
    for (size_t i = 0; i + 1 < dims.size(); ++i)
      if (dims[i].s == 1 && dims[i].n >= kTile / 2) tiled = i;
  std::vector<int64_t> outer, os, od;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    if (i == tiled) continue;
    outer.push_back(dims[i].n);
    os.push_back(dims[i].s);
    od.push_back(dims[i].d);
  }
  int64_t rows = dims_product(outer);
  visit_bytes(elem, [&](auto tag) {
    using E = typename decltype(tag)::type;
    auto* d = static_cast<char*>(dst);
    auto* s = static_cast<const char*>(src);
    if (tiled < dims.size()) {
      CopyDim b = dims[tiled];
      int64_t items = rows * ((b.n + kTile - 1) / kTile);
      int64_t grain = std::max<int64_t>(1, kCopyGrain / (kTile * inner.n));
      parallel_for(items, grain, [&](int64_t i0, int64_t i1) {
        copy_tiled<E>(d, s, outer, os, od, inner, b, i0, i1);
      });
      return;
    }
    if (rows == 1) {  // one long row: split the row itself
      parallel_for(inner.n, kCopyGrain, [&](int64_t j0, int64_t j1) {
        CopyDim part{j1 - j0, inner.s, inner.d};
        int64_t es = int64_t(sizeof(E));
        copy_rows<E>(d + j0 * inner.d * es, s + j0 * inner.s * es, {}, {}, {}, part, 0, 1);
      });
      return;
    }
    parallel_for(rows, std::max<int64_t>(1, kCopyGrain / inner.n),
                 [&](int64_t r0, int64_t r1) { copy_rows<E>(d, s, outer, os, od, inner, r0, r1); });
  });
}

void fill_value(Tensor& t, double value) {
  alignas(16) unsigned char pattern[16] = {};  // c128: two doubles
  store_double(t.dtype(), pattern, value);
  visit_bytes(dtype_size(t.dtype()), [&](auto tag) {
    using E = typename decltype(tag)::type;
    E v;
    std::memcpy(&v, pattern, sizeof(E));
    E* p = t.data_as<E>();
    parallel_for(t.numel(), kCopyGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
  });
}

namespace {

// Copies into all of `y` (contiguous) from `src` read through `src_strides`.
void copy_to(Tensor& y, const void* src, std::span<const int64_t> src_strides) {
  auto ys = contiguous_strides(y.shape());
  copy_strided(y.data(), ys, src, src_strides, y.shape(), elem_size(y));
}

const char* at(const Tensor& t, int64_t elem_offset) {
  return static_cast<const char*>(t.data()) + elem_offset * int64_t(elem_size(t));
}

// reshape, expand_dims, squeeze: the output is the contiguous input under a new shape.
// Inputs arrive contiguous, so the reshape is a view: no copy, no output allocation.
void view_kernel(const KernelContext& ctx, Ins in, Outs out) {
  out[0] = in[0].reshape(ctx.output_shapes[0]);
}

void shape_of_kernel(const KernelContext&, Ins in, Outs out) {
  int64_t* p = out[0].data_as<int64_t>();
  for (int64_t d : in[0].shape()) *p++ = d;
}

// The target as ONNX Reshape reads it: 0 copies the input dim, one -1 is inferred. As in
// reshape's inference, copied dims leave both sides of the element count.
std::vector<int64_t> reshape_target(const Tensor& x, const Tensor& spec) {
  const int64_t* s = spec.data_as<int64_t>();
  const std::vector<int64_t> given(s, s + spec.numel());
  std::vector<int64_t> dims = given;
  auto bad = [&](auto... why) -> std::vector<int64_t> {
    fail<ValueError>("dynamic_reshape", "expected ", why..., ", got shape ", ints_str(given),
                     " for ", x.type().str());
  };
  std::vector<bool> copied(size_t(x.rank()), false);
  int64_t target = 1, infer_at = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) {
      if (int64_t(i) >= x.rank()) return bad("0 (copy) only at indices < ", x.rank());
      dims[i] = x.shape()[i];
      copied[i] = true;
    } else if (dims[i] == -1) {
      if (infer_at >= 0) return bad("at most one -1");
      infer_at = int64_t(i);
    } else if (dims[i] < 0) {
      return bad("entries >= -1");
    } else if (__builtin_mul_overflow(target, dims[i], &target)) {
      return bad("a shape whose size fits in int64");
    }
  }
  int64_t rest = 1;  // the input's elements outside the copied dims
  for (size_t i = 0; i < copied.size(); ++i)
    if (!copied[i]) rest *= x.shape()[i];
  if (infer_at >= 0) {
    if (rest % target != 0) return bad("a shape that divides the elements");
    dims[size_t(infer_at)] = rest / target;
  } else if (rest != target) {
    return bad("as many elements as the input");
  }
  return dims;
}

void dynamic_reshape_kernel(const KernelContext&, Ins in, Outs out) {
  out[0] = in[0].reshape(reshape_target(in[0], in[1]));
}

// All of y from x read as `src` says (copy_views.h).
void copy_view(Tensor& y, const Tensor& x, const views::Source& src) {
  copy_to(y, at(x, src.offset), src.strides);
}

void transpose_kernel(const KernelContext& ctx, Ins in, Outs out) {
  copy_view(out[0], in[0], views::transpose(in[0], ctx.attrs.get_ints("perm")));
}

void broadcast_to_kernel(const KernelContext&, Ins in, Outs out) {
  copy_view(out[0], in[0], views::broadcast(in[0], out[0].shape()));
}

void slice_copy(const KernelContext& ctx, const Tensor& x, Tensor& y) {
  if (y.numel() == 0) return;
  copy_view(y, x, views::slice(ctx.attrs, x, y.shape()));
}

void slice_kernel(const KernelContext& ctx, Ins in, Outs out) { slice_copy(ctx, in[0], out[0]); }

// Whether a slice of a contiguous input is one contiguous run of it (so a view): before
// the first output axis of size other than 1 anything goes, that axis steps by 1, and
// every axis past it is whole. Decided on types, so the
// memory planner knows ahead of a run that the output needs no memory.
bool contiguous_slice(const KernelQuery& q) {
  const Shape& x = q.inputs[0].shape;
  const Shape& y = q.outputs[0].shape;
  const IntList& starts = q.attrs.get_ints("starts");
  const IntList& steps = q.attrs.get_ints("steps");
  const IntList& axes = q.attrs.get_ints("axes");
  std::vector<int64_t> step(x.size(), 0);  // 0: not sliced
  for (size_t i = 0; i < starts.size(); ++i)
    step[size_t(axes.empty() ? int64_t(i) : norm_axis(axes[i], int64_t(x.size())))] =
        steps.empty() ? 1 : steps[i];
  size_t first = 0;
  while (first < y.size() && y[first].is(1)) ++first;
  if (first == y.size()) return true;
  if (step[first] != 0 && step[first] != 1) return false;
  for (size_t d = first + 1; d < y.size(); ++d)
    if (step[d] != 0 && !(x[d].known_equal(y[d]) && (step[d] == 1 || y[d].is(1)))) return false;
  return true;
}

// A contiguous slice (contiguous_slice): a view of the input, which arrives contiguous.
void slice_view_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  const std::vector<int64_t>& shape = ctx.output_shapes[0];
  Tensor v = x;
  bool ok = true;
  if (checked_numel(shape, "slice") > 0)
    for (const views::SliceAxis& a : views::slice_axes(ctx.attrs, x)) {
      int64_t len = shape[a.axis];
      ok &= a.step == 1 || len == 1;
      v = v.slice(int64_t(a.axis), a.start, a.start + len);
    }
  if (ok && v.shape() == shape && v.is_contiguous()) {
    out[0] = std::move(v);
    return;
  }
  out[0] = Tensor::empty(x.dtype(), shape);  // not reached for the nodes it supports
  slice_copy(ctx, x, out[0]);
}

void concat_kernel(const KernelContext& ctx, Ins in, Outs out) {
  Tensor& y = out[0];
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), y.rank()));
  auto ys = contiguous_strides(y.shape());
  int64_t pos = 0;
  for (const Tensor& x : in) {
    char* dst = static_cast<char*>(y.data()) + pos * ys[axis] * int64_t(elem_size(y));
    copy_strided(dst, ys, x.data(), x.strides(), x.shape(), elem_size(y));
    pos += x.shape()[axis];
  }
}

void split_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), x.rank()));
  int64_t pos = 0;
  for (Tensor& y : out) {
    copy_to(y, at(x, pos * x.strides()[axis]), x.strides());
    pos += y.shape()[axis];
  }
}

// The source offset (elements) that output index j of one dim reads (rlx/axes.h's
// pad_source).
struct PadMap {
  int64_t n, lo, stride;
  bool reflect;
  int64_t operator()(int64_t j) const { return pad_source(j - lo, n, reflect) * stride; }
};

// maps[d][j]: the source offset of output index j of outer dim d; `last` maps the last dim,
// whose [j0, j1) is the interior, a plain copy when the source rows are contiguous (the
// map then serves the pads alone: a long signal's row costs one memcpy).
template <class E>
void pad_rows(const Tensor& x, Tensor& y, const std::vector<std::vector<int64_t>>& maps,
              const PadMap& last, int64_t j0, int64_t j1) {
  const E* src = x.data_as<E>();
  E* dst = y.data_as<E>();
  if (y.rank() == 0) {
    *dst = *src;
    return;
  }
  const auto& shape = y.shape();
  std::span<const int64_t> outer(shape.data(), shape.size() - 1);
  int64_t m = shape.back();
  parallel_for(dims_product(outer), std::max<int64_t>(1, kCopyGrain / m),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   int64_t rest = r, base = 0;
                   for (size_t d = outer.size(); d-- > 0;) {
                     base += maps[d][size_t(rest % outer[d])];
                     rest /= outer[d];
                   }
                   E* row = dst + r * m;
                   for (int64_t j = 0; j < j0; ++j) row[j] = src[base + last(j)];
                   if (j1 > j0)
                     std::memcpy(row + j0, src + base + last(j0), size_t(j1 - j0) * sizeof(E));
                   for (int64_t j = std::max(j0, j1); j < m; ++j) row[j] = src[base + last(j)];
                 }
               });
}

void pad_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  const IntList& pads = ctx.attrs.get_ints("pads");
  const std::string& mode = ctx.attrs.get_string("mode");
  size_t r = size_t(x.rank());
  if (mode == "constant") {
    bool grows = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p > 0; });
    if (grows) fill_value(y, ctx.attrs.get_float("value"));
    views::Copy c = views::pad_interior(x, y.shape(), pads);
    if (c.empty) return;
    char* dst = static_cast<char*>(y.data()) + c.dst_offset * int64_t(elem_size(y));
    copy_strided(dst, c.dst_strides, at(x, c.src_offset), c.src_strides, c.shape, elem_size(y));
    return;
  }
  auto map_of = [&](size_t d) {
    return PadMap{x.shape()[d], pads[d], x.strides()[d], mode == "reflect"};
  };
  std::vector<std::vector<int64_t>> maps(r);
  for (size_t d = 0; d + 1 < r; ++d) {
    const PadMap f = map_of(d);
    for (int64_t j = 0; j < y.shape()[d]; ++j) maps[d].push_back(f(j));
  }
  int64_t j0 = 0, j1 = 0;  // an empty interior: every element through the map
  if (r > 0 && x.strides().back() == 1) {
    int64_t lo = pads[r - 1];
    j0 = std::clamp<int64_t>(lo, 0, y.shape().back());
    j1 = std::min(y.shape().back(), lo + x.shape().back());
  }
  const PadMap last = r > 0 ? map_of(r - 1) : PadMap{1, 0, 0, false};
  visit_bytes(elem_size(y),
              [&](auto tag) { pad_rows<typename decltype(tag)::type>(x, y, maps, last, j0, j1); });
}

// y viewed as [r0, n0, r1, n1, …]: the repeat dims read x with stride 0.
void tile_kernel(const KernelContext& ctx, Ins in, Outs out) {
  Tensor& y = out[0];
  views::Copy c = views::tile(in[0], y.shape(), ctx.attrs.get_ints("repeats"));
  copy_strided(y.data(), c.dst_strides, in[0].data(), c.src_strides, c.shape, elem_size(y));
}

void flip_kernel(const KernelContext& ctx, Ins in, Outs out) {
  if (in[0].numel() == 0) return;
  copy_view(out[0], in[0], views::flip(in[0], ctx.attrs.get_ints("axes")));
}

// The literal's own bytes, not a copy (weights are read on every run); the runtime
// copies a constant that is returned as a graph output, so no caller writes into it.
void constant_kernel(const KernelContext& ctx, Ins, Outs out) {
  const Literal& v = ctx.attrs.get_tensor("value");
  out[0] = Tensor::wrap(v.dtype(), v.shape(), const_cast<void*>(v.data()), [keep = v](void*) {});
}

void iota_kernel(const KernelContext& ctx, Ins, Outs out) {
  Tensor& y = out[0];
  AxisSplit s = split_at(y.shape(), norm_axis(ctx.attrs.get_int("axis"), y.rank()));
  visit(y.dtype(), kNumeric, "iota", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = y.data_as<T>();
    parallel_for(s.outer * s.n, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(s.inner, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t row = b; row < e; ++row) {
                     T v = store<T>(compute_t<T>(row % s.n));
                     std::fill(p + row * s.inner, p + (row + 1) * s.inner, v);
                   }
                 });
  });
}

}  // namespace

void register_shape(KernelRegistry& r) {
  KernelFlags strided{.strided_inputs = true};
  for (const char* op : {"reshape", "expand_dims", "squeeze"})
    add_kernel(r, op, view_kernel, {}, {.makes_outputs = true, .any_device = true});
  add_kernel(r, "slice", slice_view_kernel, contiguous_slice, {.makes_outputs = true});
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
                         {"pad", pad_kernel},
                         {"tile", tile_kernel},
                         {"flip", flip_kernel}})
    add_kernel(r, e.op, e.fn, {}, strided);
  add_kernel(r, "shape_of", shape_of_kernel, {}, strided);
  add_kernel(r, "dynamic_reshape", dynamic_reshape_kernel, {}, {.makes_outputs = true});
  add_kernel(r, "constant", constant_kernel, {}, {.makes_outputs = true});
  add_kernel(r, "iota", iota_kernel, dtype_in(kNumeric));
  register_shape_index(r);
  register_shape_sort(r);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
