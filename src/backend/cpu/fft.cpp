// The FFT family's kernels (ops/fft.cpp) through pocketfft, the C++ FFT SciPy uses (BSD;
// Debian ships its header with python3-pythran): mixed radix with Bluestein for large
// prime factors, any strides, its plans cached per length, batches over its own threads.
// Built once (CMakeLists.txt, RLX_CPU_ONCE): the header picks its vector width itself.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "rlx/axes.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <pythran/pythonic/numpy/fft/pocketfft.hpp>
#pragma GCC diagnostic pop

namespace rlx::cpu {

namespace {

enum class Kind { c2c_forward, c2c_inverse, r2c, c2r };

// x cropped or zero-padded on `axes` to `lengths`: a crop is a view (pocketfft reads any
// strides); a pad copies the kept values into zeros, a row of the last dim at a time.
Tensor resized(const Tensor& x, const std::vector<int64_t>& axes,
               const std::vector<int64_t>& lengths) {
  std::vector<int64_t> shape = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) shape[size_t(axes[i])] = lengths[i];
  Tensor kept = x;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < kept.shape()[d]) kept = kept.slice(int64_t(d), 0, shape[d]);
  if (kept.shape() == shape) return kept;
  Tensor y = Tensor::zeros(x.dtype(), shape);
  if (kept.numel() == 0) return y;
  const Tensor c = kept.contiguous();
  const std::vector<int64_t>& cs = c.shape();
  const size_t es = dtype_size(x.dtype()), row = size_t(cs.back()) * es;
  const std::vector<int64_t> ys = y.strides();
  std::vector<int64_t> idx(cs.size(), 0);
  const char* src = static_cast<const char*>(c.data());
  for (int64_t r = 0, rows = c.numel() / cs.back(); r < rows; ++r, src += row) {
    int64_t dst = 0;
    for (size_t d = 0; d + 1 < cs.size(); ++d) dst += idx[d] * ys[d];
    std::memcpy(static_cast<char*>(y.data()) + size_t(dst) * es, src, row);
    for (size_t d = cs.size() - 1; d-- > 0;) {
      if (++idx[d] < cs[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

pocketfft::stride_t byte_strides(const Tensor& t) {
  pocketfft::stride_t s;
  for (int64_t v : t.strides()) s.push_back(std::ptrdiff_t(v * int64_t(dtype_size(t.dtype()))));
  return s;
}

pocketfft::shape_t sizes(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

void fft_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out,
                Kind kind) {
  const Tensor& x0 = in[0];
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  const int64_t rank = x0.rank();
  std::vector<int64_t> axes = ctx.attrs.get_ints("axes");
  for (int64_t& a : axes) a = norm_axis(a, rank);
  // The lengths the input takes on each axis, and N (the transform's size, for the norm).
  std::vector<int64_t> lengths;
  double n_total = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t len = y.shape()[size_t(axes[i])];
    const bool last = i + 1 == axes.size();
    if (kind == Kind::r2c && last) {
      const std::vector<int64_t> n = ctx.attrs.get_ints("n");
      const int64_t real = n.empty() ? x0.shape()[size_t(axes[i])] : n.back();
      lengths.push_back(real);
      n_total *= double(real);
    } else if (kind == Kind::c2r && last) {
      lengths.push_back(len / 2 + 1);
      n_total *= double(len);
    } else {
      lengths.push_back(len);
      n_total *= double(len);
    }
  }
  const Tensor x = resized(x0, axes, lengths);
  const std::string& norm = ctx.attrs.get_string("norm");
  const bool inverse = kind == Kind::c2c_inverse || kind == Kind::c2r;
  const double fct = norm == "ortho"                  ? 1.0 / std::sqrt(n_total)
                     : (norm == "forward") != inverse ? 1.0 / n_total
                                                      : 1.0;
  // The transforms along `pass` of xs into ys (slices of x and y, or y in place), scaled by
  // f, on `threads` of pocketfft's own.
  auto run = [&](auto tag, const Tensor& xs, const Tensor& ys, const std::vector<int64_t>& pass,
                 double f, size_t threads) {
    using R = typename decltype(tag)::type;
    using C = std::complex<R>;
    const pocketfft::shape_t ax = sizes(pass);
    switch (kind) {
      case Kind::c2c_forward:
      case Kind::c2c_inverse:
        pocketfft::c2c(sizes(xs.shape()), byte_strides(xs), byte_strides(ys), ax,
                       kind == Kind::c2c_forward, xs.data_as<C>(), ys.data_as<C>(), R(f), threads);
        break;
      case Kind::r2c:
        pocketfft::r2c(sizes(xs.shape()), byte_strides(xs), byte_strides(ys), ax, true,
                       xs.data_as<R>(), ys.data_as<C>(), R(f), threads);
        break;
      case Kind::c2r:
        pocketfft::c2r(sizes(ys.shape()), byte_strides(xs), byte_strides(ys), ax, false,
                       xs.data_as<C>(), ys.data_as<R>(), R(f), threads);
        break;
    }
  };
  // A batch (an axis the pass does not transform, the outermost long enough) splits over the
  // OpenMP threads, each running pocketfft on its slice alone: its own pool's hand-offs cost
  // more than a small batch's transforms (rfft of [64, 1024] f64, 2 threads: 0.32 ms against
  // 0.29 on one; bench/RESULTS.md, "FFTs on the CPU").
  const int64_t threads = threads_here();
  auto batch_axis = [&](const std::vector<int64_t>& pass) {
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(pass.begin(), pass.end(), d) == pass.end() && x.shape()[size_t(d)] >= threads)
        return d;
    return int64_t(-1);
  };
  auto split_run = [&](auto tag, const Tensor& xs, const Tensor& ys,
                       const std::vector<int64_t>& pass, double f) {
    const int64_t b = batch_axis(pass);
    if (threads <= 1 || b < 0)
      return run(tag, xs, ys, pass, f, size_t(std::max<int64_t>(threads, 1)));
    parallel_for(xs.shape()[size_t(b)], 1, [&](int64_t lo, int64_t hi) {
      run(tag, xs.slice(b, lo, hi), ys.slice(b, lo, hi), pass, f, 1);
    });
  };
  // A complex transform over every long axis (fft2 of one [256, 256] image) goes one axis at
  // a time, each pass batched over the others (y in place after the first).
  const bool c2c = kind == Kind::c2c_forward || kind == Kind::c2c_inverse;
  auto dispatch = [&](auto tag) {
    if (!c2c || axes.size() < 2 || threads <= 1 || batch_axis(axes) >= 0)
      return split_run(tag, x, y, axes, fct);
    split_run(tag, x, y, {axes[0]}, fct);
    for (size_t i = 1; i < axes.size(); ++i) split_run(tag, y, y, {axes[i]}, 1.0);
  };
  const DType real = kind == Kind::r2c   ? x.dtype()
                     : kind == Kind::c2r ? y.dtype()
                                         : real_of(x.dtype());
  if (real == DType::f64)
    dispatch(Tag<double>{});
  else
    dispatch(Tag<float>{});
}

template <Kind kKind>
void kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  fft_kernel(ctx, in, out, kKind);
}

}  // namespace

void register_fft(KernelRegistry& r) {
  r.add("fft", DeviceKind::cpu, kernel<Kind::c2c_forward>, {}, {});
  r.add("ifft", DeviceKind::cpu, kernel<Kind::c2c_inverse>, {}, {});
  r.add("rfft", DeviceKind::cpu, kernel<Kind::r2c>, {}, {});
  r.add("irfft", DeviceKind::cpu, kernel<Kind::c2r>, {}, {});
}

}  // namespace rlx::cpu
