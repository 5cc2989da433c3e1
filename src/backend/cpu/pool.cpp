// max_pool, avg_pool (1-D to 3-D windows) and the global pools: direct loops, parallel over
// the N * C planes. resize lives in resize.cpp and is registered here.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/window.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

void register_resize(KernelRegistry& r);  // resize.cpp

namespace {

// Planes per parallel chunk for `work` operations per plane. Small: a pool's input is
// often a conv's output, which the threads wrote plane block by plane block, so each
// thread pooling its own planes reads them from its own cache (bench/RESULTS.md, "Pools").
int64_t plane_grain(int64_t work) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(work, 1));
}

// NaN-propagating maximum: once a NaN is seen it stays.
template <class C>
inline C max_nan(C m, C v) {
  return v > m || v != v ? v : m;
}

// a[ow] = max(a[ow], row[ow * s]) (or +=) for ow in [0, n); the first tap assigns.
template <bool kMax, int64_t kStride = 0, class C>
inline void tap(C* a, const C* row, int64_t n, bool first, int64_t s = kStride) {
  if constexpr (kStride > 0) s = kStride;
  if (first) {
    for (int64_t ow = 0; ow < n; ++ow) a[ow] = row[ow * s];
    return;
  }
  for (int64_t ow = 0; ow < n; ++ow) {
    if constexpr (kMax)
      a[ow] = max_nan(a[ow], row[ow * s]);
    else
      a[ow] += row[ow * s];
  }
}

// A plane in two passes. First the input rows each output row's window reaches are
// combined (max or sum) into one row of a buffer, widened by the padding on both sides,
// which holds the identity there: contiguous loops. Then each tap along w updates every
// output from those rows, with no bounds to test: over the whole plane in one loop where
// the windows tile the row exactly (a 2x2/2 pool), else row by row. Strides 1 and 2 are
// constants there, so the loads are vectors (2: two and a shuffle), not gathers: about
// twice as fast as tap by tap with each tap's bounds (bench/RESULTS.md, "Pools").
template <class T, bool kMax>
void pool_planes(const Window& w, const T* x, T* y, int64_t planes, bool include_pad) {
  using C = compute_t<T>;
  const C identity = kMax ? -std::numeric_limits<C>::infinity() : C(0);
  const DimTaps td[3] = {dim_taps(w, 0), dim_taps(w, 1), dim_taps(w, 2)};
  const DimTaps &D = td[0], &H = td[1], &W = td[2];
  // A widened row: input column c at c + pad; long enough for every output's taps.
  const int64_t pad = w.pad[2], s = w.stride[2], dil = w.dil[2], ow_n = w.out[2];
  const int64_t len = (ow_n - 1) * s + (w.ker[2] - 1) * dil + 1, rows = w.out[0] * w.out[1];
  const int64_t c0 = std::min(w.in[2], std::max<int64_t>(0, -pad)),
                c1 = std::max(c0, std::min(w.in[2], len - pad));
  const bool flat = len == ow_n * s;
  // a[i] = max / sum over the taps of wide[i * s + kw * dil], i in [0, n).
  auto taps = [&](C* a, const C* wide, int64_t n) {
    for (int64_t kw = 0; kw < w.ker[2]; ++kw) {
      const C* r = wide + kw * dil;
      switch (s) {
        case 1:
          tap<kMax, 1>(a, r, n, kw == 0);
          break;
        case 2:
          tap<kMax, 2>(a, r, n, kw == 0);
          break;
        default:
          tap<kMax>(a, r, n, kw == 0, s);
      }
    }
  };
  parallel_for(planes, plane_grain(w.out_size * w.ker_size), [&](int64_t b, int64_t e) {
    std::vector<C> acc(size_t(w.out_size)), wide(size_t(rows * len), identity);
    for (int64_t p = b; p < e; ++p) {
      const T* xp = x + p * w.in_size;
      for (int64_t od = 0, r = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh, ++r) {
          C* row = wide.data() + r * len + pad;  // row[c] for c in [c0, c1)
          bool first = true;
          for (int64_t kd = D.first[od]; kd < D.last[od]; ++kd)
            for (int64_t kh = H.first[oh]; kh < H.last[oh]; ++kh) {
              const T* in =
                  xp + w.in_off(D.start[od] + kd * w.dil[0], H.start[oh] + kh * w.dil[1], 0);
              if (first) {
                for (int64_t c = c0; c < c1; ++c) row[c] = load(in[c]);
              } else {
                for (int64_t c = c0; c < c1; ++c)
                  row[c] = kMax ? max_nan(row[c], load(in[c])) : row[c] + load(in[c]);
              }
              first = false;
            }
          if (first)  // no input row in the window: all padding
            for (int64_t c = c0; c < c1; ++c) row[c] = identity;
        }
      C* a = acc.data();
      if (flat)
        taps(a, wide.data(), rows * ow_n);
      else
        for (int64_t r = 0; r < rows; ++r) taps(a + r * ow_n, wide.data() + r * len, ow_n);
      T* yp = y + p * w.out_size;
      if constexpr (kMax) {
        for (int64_t i = 0; i < w.out_size; ++i) yp[i] = store<T>(a[i]);
      } else {
        for (int64_t od = 0, r = 0; od < w.out[0]; ++od)
          for (int64_t oh = 0; oh < w.out[1]; ++oh, ++r) {
            int64_t dh = include_pad ? D.padded[od] * H.padded[oh]
                                     : (D.last[od] - D.first[od]) * (H.last[oh] - H.first[oh]);
            for (int64_t ow = 0; ow < ow_n; ++ow) {
              int64_t n = include_pad ? W.padded[ow] : W.last[ow] - W.first[ow];
              yp[r * ow_n + ow] = store<T>(a[r * ow_n + ow] / C(dh * n));
            }
          }
      }
    }
  });
}

template <bool kMax>
void pool_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &y = out[0];
  if (y.numel() == 0) return;
  Window w = make_window(ctx.attrs, x.shape(), y.shape(), ctx.attrs.get_ints("kernel_shape"));
  bool include_pad = !kMax && ctx.attrs.get_bool("count_include_pad");
  int64_t planes = x.shape()[0] * x.shape()[1];
  visit(x.dtype(), kFloat, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool_planes<T, kMax>(w, x.data_as<T>(), y.data_as<T>(), planes, include_pad);
  });
}

// Sum of n values in double, in 8 independent lanes so that the loop vectorises.
template <class T>
double sum_of(const T* p, int64_t n) {
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += double(load(p[i + j]));
  double s = 0;
  for (; i < n; ++i) s += double(load(p[i]));
  for (double v : lane) s += v;
  return s;
}

template <class T>
compute_t<T> max_of(const T* p, int64_t n) {
  using C = compute_t<T>;
  C m = -std::numeric_limits<C>::infinity();
  for (int64_t i = 0; i < n; ++i) m = max_nan(m, load(p[i]));
  return m;
}

template <bool kMax>
void global_pool_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  const Tensor& x = in[0];
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t size = planes == 0 ? 0 : x.numel() / planes;
  visit(x.dtype(), kFloat, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data_as<T>();
    T* yp = out[0].data_as<T>();
    parallel_for(planes, plane_grain(size), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        if constexpr (kMax)
          yp[p] = store<T>(max_of(xp + p * size, size));
        else
          yp[p] = store<T>(sum_of(xp + p * size, size) / double(size));
      }
    });
  });
}

}  // namespace

void register_pool(KernelRegistry& r) {
  add_kernel(r, "max_pool", pool_kernel<true>, dtype_in(kFloat));
  add_kernel(r, "avg_pool", pool_kernel<false>, dtype_in(kFloat));
  add_kernel(r, "global_max_pool", global_pool_kernel<true>, dtype_in(kFloat));
  add_kernel(r, "global_avg_pool", global_pool_kernel<false>, dtype_in(kFloat));
  register_resize(r);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
