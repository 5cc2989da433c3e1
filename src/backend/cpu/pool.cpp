// max_pool, avg_pool (1-D to 3-D windows) and the global pools: direct loops, parallel over
// the N * C planes. resize lives in resize.cpp and is registered here.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/window.h"

namespace rlx::cpu {

void register_resize(KernelRegistry& r);  // resize.cpp

namespace {

// Planes per parallel chunk for `work` operations per plane.
int64_t plane_grain(int64_t work) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(work, 1));
}

// NaN-propagating maximum: once a NaN is seen it stays.
template <class C>
inline C max_nan(C m, C v) {
  return v > m || v != v ? v : m;
}

// One output row (fixed d, h) at a time, tap by tap: each tap updates the contiguous run
// of outputs whose input it reaches, a loop that vectorises.
template <class T, bool kMax>
void pool_planes(const Window& w, const T* x, T* y, int64_t planes, bool include_pad) {
  using C = compute_t<T>;
  const DimTaps td[3] = {dim_taps(w, 0), dim_taps(w, 1), dim_taps(w, 2)};
  const DimTaps &D = td[0], &H = td[1], &W = td[2];
  std::vector<TapRange> run;  // per tap along w: the outputs it reaches
  for (int64_t kw = 0; kw < w.ker[2]; ++kw)
    run.push_back(out_range(kw * w.dil[2] - w.pad[2], w.stride[2], w.in[2], w.out[2]));
  parallel_for(planes, plane_grain(w.out_size * w.ker_size), [&](int64_t b, int64_t e) {
    std::vector<C> acc(size_t(w.out[2]));
    for (int64_t p = b; p < e; ++p) {
      const T* xp = x + p * w.in_size;
      T* yp = y + p * w.out_size;
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh) {
          std::fill(acc.begin(), acc.end(), kMax ? -std::numeric_limits<C>::infinity() : C(0));
          C* a = acc.data();
          for (int64_t kd = D.first[od]; kd < D.last[od]; ++kd)
            for (int64_t kh = H.first[oh]; kh < H.last[oh]; ++kh) {
              const T* row =
                  xp + w.in_off(D.start[od] + kd * w.dil[0], H.start[oh] + kh * w.dil[1], 0);
              for (int64_t kw = 0; kw < w.ker[2]; ++kw) {
                int64_t off = kw * w.dil[2] - w.pad[2], s = w.stride[2];
                for (int64_t ow = run[size_t(kw)].first; ow < run[size_t(kw)].last; ++ow) {
                  C v = load(row[ow * s + off]);
                  if constexpr (kMax)
                    a[ow] = max_nan(a[ow], v);
                  else
                    a[ow] += v;
                }
              }
            }
          T* yr = yp + w.out_off(od, oh, 0);
          if constexpr (kMax) {
            for (int64_t ow = 0; ow < w.out[2]; ++ow) yr[ow] = store<T>(a[ow]);
          } else {
            int64_t dh = include_pad ? D.padded[od] * H.padded[oh]
                                     : (D.last[od] - D.first[od]) * (H.last[oh] - H.first[oh]);
            for (int64_t ow = 0; ow < w.out[2]; ++ow) {
              int64_t n = include_pad ? W.padded[ow] : W.last[ow] - W.first[ow];
              yr[ow] = store<T>(a[ow] / C(dh * n));
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

}  // namespace rlx::cpu
