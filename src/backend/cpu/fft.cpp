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
  const pocketfft::shape_t ax = sizes(axes);
  const size_t threads = size_t(std::max(1, threads_here()));
  auto run = [&](auto tag) {
    using R = typename decltype(tag)::type;
    using C = std::complex<R>;
    switch (kind) {
      case Kind::c2c_forward:
      case Kind::c2c_inverse:
        pocketfft::c2c(sizes(x.shape()), byte_strides(x), byte_strides(y), ax,
                       kind == Kind::c2c_forward, x.data_as<C>(), y.data_as<C>(), R(fct), threads);
        break;
      case Kind::r2c:
        pocketfft::r2c(sizes(x.shape()), byte_strides(x), byte_strides(y), ax, true, x.data_as<R>(),
                       y.data_as<C>(), R(fct), threads);
        break;
      case Kind::c2r:
        pocketfft::c2r(sizes(y.shape()), byte_strides(x), byte_strides(y), ax, false,
                       x.data_as<C>(), y.data_as<R>(), R(fct), threads);
        break;
    }
  };
  const DType real = kind == Kind::r2c   ? x.dtype()
                     : kind == Kind::c2r ? y.dtype()
                                         : real_of(x.dtype());
  if (real == DType::f64)
    run(Tag<double>{});
  else
    run(Tag<float>{});
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
