// CPU kernels of the sliding-window backward ops (src/ops/window_grad.cpp). The pools'
// walk every output window tap by tap (window.h geometry), parallel over the N * C
// planes, accumulating each plane in the compute type; resize_grad runs the transposed
// separable passes of resize.cpp in reverse order.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/resize_map.h"
#include "backend/cpu/window.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// ---- pools ---------------------------------------------------------------------------

struct Windows {
  Window w;
  DimTaps t[3];

  // Calls f(input offset in the plane) for each tap of output (od, oh, ow) inside the
  // input, in row-major tap order (the order max_pool compares them in).
  template <class F>
  void taps(int64_t od, int64_t oh, int64_t ow, F&& f) const {
    const DimTaps &D = t[0], &H = t[1], &W = t[2];
    for (int64_t kd = D.first[od]; kd < D.last[od]; ++kd)
      for (int64_t kh = H.first[oh]; kh < H.last[oh]; ++kh) {
        int64_t row = w.in_off(D.start[od] + kd * w.dil[0], H.start[oh] + kh * w.dil[1], 0);
        for (int64_t kw = W.first[ow]; kw < W.last[ow]; ++kw) f(row + W.start[ow] + kw * w.dil[2]);
      }
  }
  // avg_pool's divisor of output (od, oh, ow).
  int64_t divisor(int64_t od, int64_t oh, int64_t ow, bool include_pad) const {
    if (include_pad) return t[0].padded[od] * t[1].padded[oh] * t[2].padded[ow];
    int64_t n = 1;
    for (int i = 0; i < 3; ++i) {
      int64_t o = i == 0 ? od : i == 1 ? oh : ow;
      n *= t[i].last[o] - t[i].first[o];
    }
    return n;
  }
};

// x: [N, C, D...]; y: the forward output [N, C, O...].
Windows make_windows(const Attrs& a, const Tensor& x, const std::vector<int64_t>& y) {
  Windows ws;
  ws.w = make_window(a, x.shape(), y, a.get_ints("kernel_shape"));
  for (int i = 0; i < 3; ++i) ws.t[i] = dim_taps(ws.w, i);
  return ws;
}

// The plane offset of the first maximum of x in window (od, oh, ow) (NaN counts as the
// largest), or -1 when the window holds no input.
template <class T>
int64_t argmax(const Windows& ws, const T* x, int64_t od, int64_t oh, int64_t ow) {
  using C = compute_t<T>;
  int64_t best = -1;
  C m = 0;
  ws.taps(od, oh, ow, [&](int64_t i) {
    C v = load(x[i]);
    if (best < 0 || (v > m && m == m) || (v != v && m == m)) {
      best = i;
      m = v;
    }
  });
  return best;
}

int64_t plane_grain(int64_t work) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(work, 1));
}

// Calls f(output offset, od, oh, ow) for every output of a plane.
template <class F>
void each_output(const Window& w, F&& f) {
  for (int64_t od = 0; od < w.out[0]; ++od)
    for (int64_t oh = 0; oh < w.out[1]; ++oh)
      for (int64_t ow = 0; ow < w.out[2]; ++ow) f(w.out_off(od, oh, ow), od, oh, ow);
}

// max_pool_grad / avg_pool_grad (inputs x, ct; output like x): per plane, each output's
// cotangent added to its window (at the argmax, or to every tap over the divisor).
template <bool kMax>
void pool_grad_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &ct = in[1];
  Tensor& dx = out[0];
  if (dx.numel() == 0) return;
  Windows ws = make_windows(ctx.attrs, x, ct.shape());
  const Window& w = ws.w;
  bool include_pad = !kMax && ctx.attrs.get_bool("count_include_pad");
  int64_t planes = x.shape()[0] * x.shape()[1];
  visit_float(x.dtype(), ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T *xp = x.data_as<T>(), *cp = ct.data_as<T>();
    T* dp = dx.data_as<T>();
    parallel_for(planes, plane_grain(w.out_size * w.ker_size), [&](int64_t b, int64_t e) {
      std::vector<C> acc(size_t(w.in_size));
      for (int64_t p = b; p < e; ++p) {
        std::fill(acc.begin(), acc.end(), C(0));
        const T *xq = xp + p * w.in_size, *cq = cp + p * w.out_size;
        each_output(w, [&](int64_t o, int64_t od, int64_t oh, int64_t ow) {
          C g = load(cq[o]);
          if constexpr (kMax) {
            int64_t i = argmax(ws, xq, od, oh, ow);
            if (i >= 0) acc[size_t(i)] += g;
          } else {
            C v = g / C(std::max<int64_t>(ws.divisor(od, oh, ow, include_pad), 1));
            ws.taps(od, oh, ow, [&](int64_t i) { acc[size_t(i)] += v; });
          }
        });
        T* d = dp + p * w.in_size;
        for (int64_t i = 0; i < w.in_size; ++i) d[i] = store<T>(acc[size_t(i)]);
      }
    });
  });
}

// max_pool_gather (inputs x, u; output like max_pool(x)): u at each window's argmax.
void max_pool_gather_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                            std::span<Tensor> out) {
  const Tensor &x = in[0], &u = in[1];
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  Windows ws = make_windows(ctx.attrs, x, y.shape());
  const Window& w = ws.w;
  int64_t planes = x.shape()[0] * x.shape()[1];
  visit_float(x.dtype(), "max_pool_gather", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *xp = x.data_as<T>(), *up = u.data_as<T>();
    T* yp = y.data_as<T>();
    parallel_for(planes, plane_grain(w.out_size * w.ker_size), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const T *xq = xp + p * w.in_size, *uq = up + p * w.in_size;
        T* yq = yp + p * w.out_size;
        each_output(w, [&](int64_t o, int64_t od, int64_t oh, int64_t ow) {
          int64_t i = argmax(ws, xq, od, oh, ow);
          yq[o] = i >= 0 ? uq[i] : store<T>(0.0f);
        });
      }
    });
  });
}

// ---- resize_grad -----------------------------------------------------------------------

// The transpose of one resize pass along a dim: src [outer, out, inner] is added into
// dst [outer, in, inner] (zeroed here) at the positions each output sampled.
template <class C>
void scatter_pass(const C* src, C* dst, int64_t outer, int64_t in, int64_t inner,
                  const AxisMap& m) {
  int64_t out = int64_t(m.i0.size());
  std::fill(dst, dst + outer * in * inner, C(0));
  parallel_for(outer, std::max<int64_t>(1, 32768 / std::max<int64_t>(out * inner, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t o = b; o < e; ++o)
                   for (int64_t j = 0; j < out; ++j) {
                     const C* s = src + (o * out + j) * inner;
                     C w1 = C(m.w[size_t(j)]), w0 = C(1.0 - m.w[size_t(j)]);
                     C* d0 = dst + (o * in + m.i0[size_t(j)]) * inner;
                     C* d1 = dst + (o * in + m.i1[size_t(j)]) * inner;
                     for (int64_t t = 0; t < inner; ++t) d0[t] += w0 * s[t];
                     if (w1 != C(0))
                       for (int64_t t = 0; t < inner; ++t) d1[t] += w1 * s[t];
                   }
               });
}

void resize_grad_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  const Tensor &x = in[0], &ct = in[1];
  Tensor& dx = out[0];
  if (dx.numel() == 0) return;
  bool linear = ctx.attrs.get_string("mode") == "linear";
  std::vector<int64_t> shape = ct.shape();  // the shape of the current buffer
  std::vector<AxisMap> maps;
  for (size_t d = 0; d < size_t(x.rank()); ++d)
    maps.push_back(axis_map(ctx.attrs, d, x.shape()[d], shape[d], linear));
  visit_float(x.dtype(), "resize_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    std::vector<C> cur(size_t(ct.numel())), next;
    const T* cp = ct.data_as<T>();
    for (size_t i = 0; i < cur.size(); ++i) cur[i] = C(load(cp[i]));
    // resize runs its passes in dim order; their transposes run in reverse.
    for (size_t d = maps.size(); d-- > 0;) {
      if (maps[d].identity) continue;
      int64_t outer = 1, inner = 1;
      for (size_t i = 0; i < d; ++i) outer *= shape[i];
      for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
      next.resize(size_t(outer * x.shape()[d] * inner));
      scatter_pass(cur.data(), next.data(), outer, x.shape()[d], inner, maps[d]);
      shape[d] = x.shape()[d];
      std::swap(cur, next);
    }
    T* dp = dx.data_as<T>();
    for (size_t i = 0; i < cur.size(); ++i) dp[i] = store<T>(cur[i]);
  });
}

}  // namespace

void register_window_grad(KernelRegistry& r) {
  add_kernel(r, "max_pool_grad", pool_grad_kernel<true>, dtype_in(kFloat));
  add_kernel(r, "avg_pool_grad", pool_grad_kernel<false>, dtype_in(kFloat));
  add_kernel(r, "max_pool_gather", max_pool_gather_kernel, dtype_in(kFloat));
  add_kernel(r, "resize_grad", resize_grad_kernel, dtype_in(kFloat));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
