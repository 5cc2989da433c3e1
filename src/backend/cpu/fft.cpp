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
#include "ops/stft_frames.h"
#include "rlx/axes.h"

// pocketfft's buffers call aligned_alloc(64, n) with n not a multiple of 64, which C11
// forbids and AddressSanitizer reports (a fuzz finding: tests/data/fuzz/onnx); its calls go
// to one that rounds n up. The header's own includes come first, so the macro meets only
// pocketfft's code.
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <thread>

namespace rlx::cpu::pocketfft_alloc {
inline void* aligned_alloc(size_t align, size_t n) {
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}
}  // namespace rlx::cpu::pocketfft_alloc

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define aligned_alloc rlx::cpu::pocketfft_alloc::aligned_alloc
#include <pythran/pythonic/numpy/fft/pocketfft.hpp>
#undef aligned_alloc
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
  // more than a small batch's transforms (bench/RESULTS.md, "FFTs on the CPU").
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

// ---- stft of a real signal ------------------------------------------------------------
// (ops/stft.cpp defines it.) A task takes kFrames frames of one row: each frame's values
// (the centre padding read in place: reflect / constant / edge) times the window into a
// buffer, one pocketfft r2c over the buffer's rows, and the spectra written into the output
// [..., F, frames] a run of kFrames columns per frequency. The decomposition's framing
// (gather), window product and rfft each passed over all the frames (bench/RESULTS.md, "FFTs
// on the CPU"). The products and the transform are the decomposition's, in its order.
constexpr int64_t kFrames = 64;

void stft_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t rank = y.rank(), freqs = y.shape()[size_t(rank - 2)],
                frames = y.shape()[size_t(rank - 1)], len = x.shape().back();
  if (y.numel() == 0) return;
  const detail::Frames fr = detail::frames_of(ctx.attrs);
  const int64_t n_fft = fr.n_fft, hop = fr.hop, pad = fr.pad;
  const std::string& mode = ctx.attrs.get_string("pad_mode");
  const bool constant = mode == "constant", reflect = mode == "reflect";
  const double fct = ctx.attrs.get_bool("normalized") ? 1 / std::sqrt(double(n_fft)) : 1.0;
  const int64_t rows = y.numel() / (freqs * frames), blocks = (frames + kFrames - 1) / kFrames;
  const int64_t w_len = in.size() > 1 ? in[1].numel() : 0, w_left = fr.window_left(w_len);
  auto run = [&](auto tag) {
    using R = typename decltype(tag)::type;
    using C = std::complex<R>;
    const R* xp = x.data_as<R>();
    // The window zero-padded to n_fft (empty without one).
    std::vector<R> window;
    if (w_len) {
      window.assign(size_t(n_fft), R(0));
      std::copy_n(in[1].data_as<R>(), w_len, window.begin() + w_left);
    }
    C* yp = y.data_as<C>();
    parallel_for(rows * blocks, 1, [&](int64_t lo, int64_t hi) {
      std::vector<R> buf(size_t(kFrames * n_fft));
      std::vector<C> spec(size_t(kFrames * freqs));
      for (int64_t task = lo; task < hi; ++task) {
        const int64_t r = task / blocks, t0 = task % blocks * kFrames;
        const int64_t n = std::min(kFrames, frames - t0);
        const R* row = xp + r * len;
        for (int64_t f = 0; f < n; ++f) {
          R* b = buf.data() + f * n_fft;
          const int64_t start = (t0 + f) * hop - pad;
          if (start >= 0 && start + n_fft <= len) {
            std::copy_n(row + start, n_fft, b);  // inside the signal: a plain run
          } else {
            for (int64_t j = 0; j < n_fft; ++j) {
              const int64_t at = start + j;
              const bool inside = at >= 0 && at < len;  // (an empty signal pads with zeros)
              b[j] = inside || (!constant && len > 0) ? row[pad_source(at, len, reflect)] : R(0);
            }
          }
          if (w_len)
            for (int64_t j = 0; j < n_fft; ++j) b[j] *= window[size_t(j)];
        }
        const std::ptrdiff_t rs = std::ptrdiff_t(sizeof(R)), cs = std::ptrdiff_t(sizeof(C));
        pocketfft::r2c({size_t(n), size_t(n_fft)}, {rs * n_fft, rs}, {cs * freqs, cs}, {1}, true,
                       buf.data(), spec.data(), R(fct), 1);
        // Transposed into [F, frames] 8 frequencies at a time: a line of each spectrum
        // read, 8 output rows written in runs (a frequency at a time read a line a value).
        C* dst = yp + r * freqs * frames + t0;
        for (int64_t k0 = 0; k0 < freqs; k0 += 8) {
          const int64_t k1 = std::min(k0 + 8, freqs);
          for (int64_t f = 0; f < n; ++f)
            for (int64_t k = k0; k < k1; ++k) dst[k * frames + f] = spec[size_t(f * freqs + k)];
        }
      }
    });
  };
  if (x.dtype() == DType::f64)
    run(Tag<double>{});
  else
    run(Tag<float>{});
}

// A real signal, one-sided (the CUDA kernel's cases); the rest decomposes.
bool stft_native(const KernelQuery& q) {
  const DType t = q.inputs[0].dtype;
  return (t == DType::f32 || t == DType::f64) && q.attrs.get_bool("onesided") &&
         q.inputs[0].rank() >= 1;
}

}  // namespace

void register_fft(KernelRegistry& r) {
  r.add("fft", DeviceKind::cpu, kernel<Kind::c2c_forward>, {}, {});
  r.add("ifft", DeviceKind::cpu, kernel<Kind::c2c_inverse>, {}, {});
  r.add("rfft", DeviceKind::cpu, kernel<Kind::r2c>, {}, {});
  r.add("irfft", DeviceKind::cpu, kernel<Kind::c2r>, {}, {});
  r.add("stft", DeviceKind::cpu, stft_kernel, stft_native, {});
}

}  // namespace rlx::cpu
