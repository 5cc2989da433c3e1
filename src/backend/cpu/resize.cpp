// resize (ONNX Resize on every dim): nearest is one gather through per-dim index tables;
// linear is separable, one 1-D interpolation pass per dim that changes, in f32 (f64 for
// f64) between passes.
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/resize_map.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// Nearest: y[o...] = x[i0_0[o0], ..., i0_last[olast]], one output row (the last dim) at a
// time.
template <class T>
void gather_nearest(const T* x, T* y, const std::vector<int64_t>& in_shape,
                    const std::vector<int64_t>& out_shape, const std::vector<AxisMap>& maps) {
  size_t r = in_shape.size();
  std::vector<std::vector<int64_t>> off(r);  // input offsets per dim and output index
  int64_t stride = 1;
  for (size_t d = r; d-- > 0;) {
    for (int64_t i : maps[d].i0) off[d].push_back(i * stride);
    stride *= in_shape[d];
  }
  int64_t last = out_shape[r - 1], rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= out_shape[d];
  const int64_t* lo = off[r - 1].data();
  parallel_for(rows, std::max<int64_t>(1, 32768 / last), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t base = 0;
      for (size_t d = r - 1, rest = size_t(row); d-- > 0;) {
        base += off[d][rest % size_t(out_shape[d])];
        rest /= size_t(out_shape[d]);
      }
      T* yr = y + row * last;
      for (int64_t j = 0; j < last; ++j) yr[j] = x[base + lo[j]];
    }
  });
}

// One linear pass along a dim: src [outer, in, inner] -> dst [outer, out, inner], over
// the outer * out output rows.
template <class C, class In, class Out>
void linear_pass(const In* src, Out* dst, int64_t outer, int64_t in, int64_t inner,
                 const AxisMap& m) {
  int64_t out = int64_t(m.i0.size());
  std::vector<C> w0(m.w.size()), w1(m.w.size());
  for (size_t j = 0; j < m.w.size(); ++j) {
    w0[j] = C(1.0 - m.w[j]);
    w1[j] = C(m.w[j]);
  }
  if (inner == 1) {  // the last dim: one gathering loop per row
    parallel_for(outer, std::max<int64_t>(1, 32768 / out), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const In* s = src + o * in;
        Out* q = dst + o * out;
        for (int64_t j = 0; j < out; ++j)
          q[j] = store<Out>(w0[size_t(j)] * C(load(s[m.i0[size_t(j)]])) +
                            w1[size_t(j)] * C(load(s[m.i1[size_t(j)]])));
      }
    });
    return;
  }
  parallel_for(outer * out, std::max<int64_t>(1, 32768 / inner), [&](int64_t b, int64_t e) {
    int64_t o = b / out, j = b % out;
    for (int64_t row = b; row < e; ++row) {
      const In* p0 = src + (o * in + m.i0[size_t(j)]) * inner;
      const In* p1 = src + (o * in + m.i1[size_t(j)]) * inner;
      C a = w0[size_t(j)], c = w1[size_t(j)];
      Out* q = dst + row * inner;
      for (int64_t t = 0; t < inner; ++t)
        q[t] = store<Out>(a * C(load(p0[t])) + c * C(load(p1[t])));
      if (++j == out) {
        j = 0;
        ++o;
      }
    }
  });
}

template <class T>
void resize_linear(const T* x, T* y, std::vector<int64_t> shape,
                   const std::vector<int64_t>& out_shape, const std::vector<AxisMap>& maps) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!maps[d].identity) dims.push_back(d);
  if (dims.empty()) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::copy(x, x + n, y);
    return;
  }
  std::vector<C> a, b;
  const C* cur = nullptr;  // the last pass's output, when it went to a buffer
  for (size_t k = 0; k < dims.size(); ++k) {
    size_t d = dims[k];
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= shape[i];
    for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
    bool first = k == 0, last = k + 1 == dims.size();
    if (!last) b.resize(size_t(outer * out_shape[d] * inner));
    if (first && last)
      linear_pass<C>(x, y, outer, shape[d], inner, maps[d]);
    else if (first)
      linear_pass<C>(x, b.data(), outer, shape[d], inner, maps[d]);
    else if (last)
      linear_pass<C>(cur, y, outer, shape[d], inner, maps[d]);
    else
      linear_pass<C>(cur, b.data(), outer, shape[d], inner, maps[d]);
    shape[d] = out_shape[d];
    std::swap(a, b);
    cur = a.data();
  }
}

void resize_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &y = out[0];
  if (y.numel() == 0) return;
  bool linear = ctx.attrs.get_string("mode") == "linear";
  std::vector<AxisMap> maps;
  for (size_t d = 0; d < size_t(x.rank()); ++d)
    maps.push_back(axis_map(ctx.attrs, d, x.shape()[d], y.shape()[d], linear));
  visit(x.dtype(), linear ? kFloat : kNumeric, "resize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (linear)
      resize_linear(x.data_as<T>(), y.data_as<T>(), x.shape(), y.shape(), maps);
    else
      gather_nearest(x.data_as<T>(), y.data_as<T>(), x.shape(), y.shape(), maps);
  });
}

}  // namespace

void register_resize(KernelRegistry& r) {
  add_kernel(r, "resize", resize_kernel, dtype_in(kNumeric));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
