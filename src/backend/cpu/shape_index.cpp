// Shape ops driven by index values: gather, gather_elements, gather_nd, scatter_elements,
// scatter_nd, one_hot and nonzero. Indices of any integer dtype are checked before
// anything is written; the copies move bytes by element size.
#include <cstring>

#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/shape_util.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// Row q of y (`len` elements) = the `len` elements of x from element src_off(q).
template <class SrcOff>
void gather_rows(const Tensor& x, Tensor& y, int64_t rows, int64_t len, SrcOff src_off) {
  if (len == 0) return;
  visit_bytes(elem_size(y), [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* px = x.data_as<E>();
    E* py = y.data_as<E>();
    parallel_for(rows, std::max<int64_t>(1, kCopyGrain / len), [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) {
        const E* s = px + src_off(q);
        E* d = py + q * len;
        if (len == 1)
          *d = *s;
        else
          std::memcpy(d, s, size_t(len) * sizeof(E));
      }
    });
  });
}

// y = x for contiguous tensors of one size, copied in parallel blocks.
void copy_all(const Tensor& x, Tensor& y) {
  size_t es = elem_size(y);
  const char* s = static_cast<const char*>(x.data());
  char* d = static_cast<char*>(y.data());
  parallel_for(y.numel(), kCopyGrain * 4, [&](int64_t b, int64_t e) {
    std::memcpy(d + size_t(b) * es, s + size_t(b) * es, size_t(e - b) * es);
  });
}

void gather_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1];
  int64_t axis = norm_axis(ctx.attrs.get_int("axis"), x.rank());
  AxisSplit s = split_at(x.shape(), axis);
  const int64_t m = idx.numel();
  if (s.inner == 1 && m > 0) {  // an element per index (framing a signal): indices read in
    visit_int(idx.dtype(), ctx.op.name.c_str(), [&](auto itag) {  // place, no division each
      using I = typename decltype(itag)::type;
      const I* ip = idx.data_as<I>();
      check_indices(ip, m, x.shape(), ctx.op.name, [axis](int64_t) { return axis; });
      visit_bytes(elem_size(out[0]), [&](auto tag) {
        using E = typename decltype(tag)::type;
        const E* px = x.data_as<E>();
        E* py = out[0].data_as<E>();
        parallel_for(s.outer * m, kCopyGrain, [&](int64_t b, int64_t e) {
          int64_t o = b / m, q = b % m;
          for (int64_t i = b; i < e; ++i) {
            py[i] = px[o * s.n + wrap_index(int64_t(ip[q]), s.n)];
            if (++q == m) q = 0, ++o;
          }
        });
      });
    });
    return;
  }
  auto iv = read_indices(idx, x.shape(), ctx.op.name, [axis](int64_t) { return axis; });
  gather_rows(x, out[0], s.outer * m, s.inner,
              [&](int64_t q) { return ((q / m) * s.n + iv[size_t(q % m)]) * s.inner; });
}

void gather_nd_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1];
  const auto& xsh = x.shape();
  size_t b = size_t(ctx.attrs.get_int("batch_dims"));
  size_t m = size_t(idx.shape().back());
  auto iv = read_indices(idx, xsh, ctx.op.name, [b, m](int64_t i) { return int64_t(b + i % m); });
  std::span<const int64_t> is(idx.shape());
  int64_t per_batch = dims_product(is.subspan(b, is.size() - 1 - b));  // tuples per batch
  int64_t len = dims_product(std::span<const int64_t>(xsh).subspan(b + m));
  auto xs = contiguous_strides(xsh);
  int64_t batch_stride = b ? xs[b - 1] : 0;
  int64_t rows = dims_product(is.first(is.size() - 1));
  gather_rows(x, out[0], rows, len, [&](int64_t q) {
    int64_t off = (q / per_batch) * batch_stride;
    for (size_t k = 0; k < m; ++k) off += iv[size_t(q) * m + k] * xs[b + k];
    return off;
  });
}

// Element-wise index ops read their indices in place (no int64 copy of a tensor as large
// as the output).
void gather_elements_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1];
  Tensor& y = out[0];
  int64_t r = x.rank();
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), r));
  // Rows along the last dim of idx; the axis coordinate comes from the index instead.
  std::vector<int64_t> xs = contiguous_strides(x.shape());
  int64_t axis_stride = xs[axis], n = x.shape()[axis];
  xs[axis] = 0;
  int64_t last_stride = xs.back();
  const auto& ish = idx.shape();
  std::span<const int64_t> outer(ish.data(), ish.size() - 1);
  int64_t len = ish.back();
  visit_int(idx.dtype(), ctx.op.name.c_str(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* pi = idx.data_as<I>();
    check_indices(pi, idx.numel(), x.shape(), ctx.op.name, [&](int64_t) { return int64_t(axis); });
    if (y.numel() == 0) return;
    visit_bytes(elem_size(y), [&](auto tag) {
      using E = typename decltype(tag)::type;
      const E* px = x.data_as<E>();
      E* py = y.data_as<E>();
      parallel_for(
          dims_product(outer), std::max<int64_t>(1, kCopyGrain / len), [&](int64_t r0, int64_t r1) {
            RowWalker<1> w(outer, {std::span<const int64_t>(xs)}, r0);
            for (int64_t row = r0; row < r1; ++row, w.next()) {
              const I* ir = pi + row * len;
              E* d = py + row * len;
              for (int64_t j = 0; j < len; ++j)
                d[j] = px[w.off[0] + j * last_stride + wrap_index(int64_t(ir[j]), n) * axis_stride];
            }
          });
    });
  });
}

// ---------------------------------------------------------------------------------------
// scatter

enum class Reduce { none, add, mul, max, min };

Reduce reduction(const KernelContext& ctx, DType dt) {
  const std::string& s = ctx.attrs.get_string("reduction");
  // On bool, add is or (= max) and mul is and (= min).
  if (s == "add") return is_bool(dt) ? Reduce::max : Reduce::add;
  if (s == "mul") return is_bool(dt) ? Reduce::min : Reduce::mul;
  if (s == "max") return Reduce::max;
  if (s == "min") return Reduce::min;
  return Reduce::none;
}

// a (the value in place) combined with update b; max and min propagate NaN (inference
// refuses them on complex numbers).
template <class T>
inline T combine(Reduce red, T a, T b) {
  using C = compute_t<T>;
  if (red == Reduce::none) return b;
  if constexpr (is_complex_v<T>) {
    return red == Reduce::mul ? a * b : a + b;
  } else {
    C x = load(a), y = load(b);
    switch (red) {
      case Reduce::add:
        return store<T>(x + y);
      case Reduce::mul:
        return store<T>(x * y);
      case Reduce::max:
        return x != x ? a : y != y ? b : x >= y ? a : b;
      default:
        return x != x ? a : y != y ? b : x <= y ? a : b;
    }
  }
}

// Lines along the axis: different lines write different outputs, so lines run in
// parallel while the updates of one line apply in order (deterministic with duplicates).
// Off the last axis, blocks of neighbouring lines step together so that idx, updates and
// y are read along their contiguous last dim.
// f(tag) with the element type of a scatter's data: any numeric, bool or complex dtype.
template <class F>
void visit_data(DType t, const char* where, F&& f) {
  if (is_complex(t))
    visit_complex(t, where, f);
  else
    visit(t, kAll, where, f);
}

void scatter_elements_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1], &upd = in[2];
  Tensor& y = out[0];
  int64_t r = x.rank();
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), r));
  Reduce red = reduction(ctx, x.dtype());
  std::vector<int64_t> rows, is, ys;  // the line dims, but the last when it is not the axis
  auto ics = contiguous_strides(idx.shape()), ycs = contiguous_strides(y.shape());
  for (size_t d = 0; d + (axis + 1 < size_t(r) ? 1 : 0) < size_t(r); ++d) {
    if (d == axis) continue;
    rows.push_back(idx.shape()[d]);
    is.push_back(ics[d]);
    ys.push_back(ycs[d]);
  }
  int64_t width = axis + 1 < size_t(r) ? idx.shape().back() : 1;  // lines per row
  int64_t n = idx.shape()[axis], size = x.shape()[axis], istep = ics[axis], ystep = ycs[axis];
  constexpr int64_t kBlock = 64;
  int64_t blocks = (width + kBlock - 1) / kBlock;
  visit_int(idx.dtype(), ctx.op.name.c_str(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* pi = idx.data_as<I>();
    check_indices(pi, idx.numel(), x.shape(), ctx.op.name, [&](int64_t) { return int64_t(axis); });
    copy_all(x, y);
    if (idx.numel() == 0) return;
    visit_data(x.dtype(), "scatter_elements", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* pu = upd.data_as<T>();
      T* py = y.data_as<T>();
      int64_t grain = std::max<int64_t>(1, kCopyGrain / (n * std::min(width, kBlock)));
      parallel_for(dims_product(rows) * blocks, grain, [&](int64_t i0, int64_t i1) {
        int64_t row = i0 / blocks;
        RowWalker<2> w(rows, {std::span<const int64_t>(is), std::span<const int64_t>(ys)}, row);
        for (int64_t it = i0; it < i1; ++it) {
          for (; row < it / blocks; ++row) w.next();
          int64_t j0 = (it % blocks) * kBlock, j1 = std::min(width, j0 + kBlock);
          for (int64_t k = 0; k < n; ++k) {
            int64_t ik = w.off[0] + k * istep;
            for (int64_t j = j0; j < j1; ++j) {
              T& dst = py[w.off[1] + wrap_index(int64_t(pi[ik + j]), size) * ystep + j];
              dst = combine(red, dst, pu[ik + j]);
            }
          }
        }
      });
    });
  });
}

// Each index tuple addresses a slice of `len` elements; threads split the slice
// elements and each applies every tuple in order (deterministic with duplicates).
void scatter_nd_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1], &upd = in[2];
  Tensor& y = out[0];
  const auto& xsh = x.shape();
  size_t m = size_t(idx.shape().back());
  auto iv = read_indices(idx, xsh, ctx.op.name, [m](int64_t i) { return int64_t(i % m); });
  Reduce red = reduction(ctx, x.dtype());
  copy_all(x, y);
  std::span<const int64_t> is(idx.shape());
  int64_t tuples = dims_product(is.first(is.size() - 1));
  int64_t len = dims_product(std::span<const int64_t>(xsh).subspan(m));
  if (tuples == 0 || len == 0) return;
  auto xs = contiguous_strides(xsh);
  std::vector<int64_t> offs(size_t(tuples), 0);
  for (size_t t = 0; t < offs.size(); ++t)
    for (size_t k = 0; k < m; ++k) offs[t] += iv[t * m + k] * xs[k];
  visit_data(x.dtype(), "scatter_nd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pu = upd.data_as<T>();
    T* py = y.data_as<T>();
    parallel_for(len, std::max<int64_t>(1, kCopyGrain / tuples), [&](int64_t b, int64_t e) {
      for (int64_t t = 0; t < tuples; ++t) {
        T* d = py + offs[size_t(t)];
        const T* u = pu + t * len;
        for (int64_t j = b; j < e; ++j) d[j] = combine(red, d[j], u[j]);
      }
    });
  });
}

// ---------------------------------------------------------------------------------------
// one_hot, nonzero

// Indices outside [-depth, depth) give an all-off row (ONNX OneHot).
void one_hot_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& idx = in[0];
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  const auto& a = ctx.attrs;
  fill_value(y, a.get_float("off_value"));
  AxisSplit s = split_at(y.shape(), norm_axis(a.get_int("axis"), y.rank()));
  alignas(16) unsigned char on[16] = {};  // c128: two doubles
  store_double(y.dtype(), on, a.get_float("on_value"));
  visit_int(idx.dtype(), ctx.op.name.c_str(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* pi = idx.data_as<I>();
    visit_bytes(elem_size(y), [&](auto tag) {
      using E = typename decltype(tag)::type;
      E v;
      std::memcpy(&v, on, sizeof(E));
      E* py = y.data_as<E>();
      parallel_for(idx.numel(), kCopyGrain, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          int64_t k = int64_t(pi[p]);
          if (k < 0) k += s.n;
          if (k < 0 || k >= s.n) continue;
          py[((p / s.inner) * s.n + k) * s.inner + p % s.inner] = v;
        }
      });
    });
  });
}

// Counts per block, then each block writes its coordinates from its prefix offset.
void nonzero_kernel(const KernelContext&, Ins in, Outs out) {
  const Tensor& x = in[0];
  int64_t n = x.numel(), r = x.rank();
  constexpr int64_t kBlock = 1 << 16;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<int64_t> start(size_t(blocks) + 1, 0);
  visit(x.dtype(), kAll, "nonzero", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data_as<T>();
    auto nz = [p](int64_t i) { return load(p[i]) != compute_t<T>(0); };
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t c = 0;
        for (int64_t i = b * kBlock, e = std::min(n, i + kBlock); i < e; ++i) c += nz(i);
        start[size_t(b) + 1] = c;
      }
    });
    for (size_t b = 0; b < size_t(blocks); ++b) start[b + 1] += start[b];
    int64_t total = start.back();
    out[0] = Tensor::empty(DType::i64, {r, total});
    int64_t* o = out[0].data_as<int64_t>();
    const auto& shape = x.shape();
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t i = b * kBlock, e = std::min(n, i + kBlock), pos = start[size_t(b)];
        std::vector<int64_t> c(static_cast<size_t>(r));
        for (int64_t d = r - 1, rest = i; d >= 0; --d) {
          c[size_t(d)] = rest % shape[size_t(d)];
          rest /= shape[size_t(d)];
        }
        for (; i < e; ++i) {
          if (nz(i)) {
            for (int64_t d = 0; d < r; ++d) o[d * total + pos] = c[size_t(d)];
            ++pos;
          }
          for (int64_t d = r - 1; d >= 0 && ++c[size_t(d)] == shape[size_t(d)]; --d)
            c[size_t(d)] = 0;
        }
      }
    });
  });
}

}  // namespace

void register_shape_index(KernelRegistry& r) {
  add_kernel(r, "gather", gather_kernel);
  add_kernel(r, "gather_elements", gather_elements_kernel);
  add_kernel(r, "gather_nd", gather_nd_kernel);
  add_kernel(r, "scatter_elements", scatter_elements_kernel);
  add_kernel(r, "scatter_nd", scatter_nd_kernel);
  add_kernel(r, "one_hot", one_hot_kernel);
  add_kernel(r, "nonzero", nonzero_kernel);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
