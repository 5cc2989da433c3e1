// The FFT family's kernels (ops/fft.cpp) through cuFFT, as the CPU computes them
// (backend/cpu/fft.cpp): the input cropped or zero-padded to each axis's length; up to three
// trailing axes in one cuFFT plan written into the output, other axes one batched 1-D
// transform each (an axis that is not the last moved there by a copy first, and back
// after), r2c on the last of rfft's axes before the others, c2r on the last of irfft's
// after them; `norm`'s factor scales the result once. Plans are cached per (type, lengths,
// batch) and run on the node's stream; cuFFT allocates their work areas.
#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backend/cuda/copy.h"
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"
#include "ops/stft_frames.h"
#include "rlx/axes.h"

namespace rlx::cuda {

namespace {

enum class Kind { c2c_forward, c2c_inverse, r2c, c2r };

void check_fft(cufftResult r, const char* call) {
  if (r == CUFFT_SUCCESS) return;
  if (r == CUFFT_ALLOC_FAILED) fail<OutOfMemory>("fft", call, " could not allocate its work area");
  fail<DeviceError>("fft", "expected ", call, " to succeed, got cufftResult ", int(r));
}

// One plan per (type, dims, batch), kept for the process: cuFFT plans hold device work
// areas, and decode-style workloads repeat the same few shapes. The mutex covers a plan's
// stream binding and launch (one plan is not to be driven from two threads at once).
struct Plans {
  std::mutex mu;
  std::map<std::tuple<int, std::vector<int>, int>, cufftHandle> plans;

  // dims: the transform's (real) lengths, outermost first; r2c halves the last on output,
  // c2r on input.
  cufftHandle get(cufftType type, std::vector<int> dims, int batch) {
    auto key = std::make_tuple(int(type), dims, batch);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    const bool c2r = type == CUFFT_C2R || type == CUFFT_Z2D;
    const bool r2c = type == CUFFT_R2C || type == CUFFT_D2Z;
    int points = 1;
    for (int d : dims) points *= d;
    const int half = points / dims.back() * (dims.back() / 2 + 1);
    cufftHandle h;
    check_fft(cufftPlanMany(&h, int(dims.size()), dims.data(), nullptr, 1, c2r ? half : points,
                            nullptr, 1, r2c ? half : points, type, batch),
              "cufftPlanMany");
    plans.emplace(std::move(key), h);
    return h;
  }
};

Plans& plans() {
  static Plans* p = new Plans;  // never destroyed: plans may outlive static destruction order
  return *p;
}

// A batch of transforms over the trailing dims of the contiguous `in` into `out`; dims are
// the (real) transform lengths.
void exec(Kind kind, bool dbl, const std::vector<int64_t>& dims, int64_t batch, void* in, void* out,
          cudaStream_t s) {
  std::vector<int> d32;
  int64_t points = 1;
  for (int64_t d : dims) {
    d32.push_back(int(d));
    points *= d;
  }
  if (points > INT32_MAX || batch > INT32_MAX)
    fail<NotSupported>("fft", "expected transforms of at most 2^31 points and batches, got ",
                       points, " points x ", batch);
  cufftType type = kind == Kind::r2c   ? (dbl ? CUFFT_D2Z : CUFFT_R2C)
                   : kind == Kind::c2r ? (dbl ? CUFFT_Z2D : CUFFT_C2R)
                                       : (dbl ? CUFFT_Z2Z : CUFFT_C2C);
  Plans& p = plans();
  std::lock_guard lock(p.mu);
  cufftHandle h = p.get(type, std::move(d32), int(batch));
  check_fft(cufftSetStream(h, s), "cufftSetStream");
  const int dir = kind == Kind::c2c_inverse ? CUFFT_INVERSE : CUFFT_FORWARD;
  switch (type) {
    case CUFFT_C2C:
      return check_fft(
          cufftExecC2C(h, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(out), dir),
          "cufftExecC2C");
    case CUFFT_Z2Z:
      return check_fft(cufftExecZ2Z(h, static_cast<cufftDoubleComplex*>(in),
                                    static_cast<cufftDoubleComplex*>(out), dir),
                       "cufftExecZ2Z");
    case CUFFT_R2C:
      return check_fft(
          cufftExecR2C(h, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)),
          "cufftExecR2C");
    case CUFFT_D2Z:
      return check_fft(
          cufftExecD2Z(h, static_cast<cufftDoubleReal*>(in), static_cast<cufftDoubleComplex*>(out)),
          "cufftExecD2Z");
    case CUFFT_C2R:
      return check_fft(
          cufftExecC2R(h, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)),
          "cufftExecC2R");
    default:
      return check_fft(
          cufftExecZ2D(h, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleReal*>(out)),
          "cufftExecZ2D");
  }
}

Tensor contiguous_copy(const Tensor& view, cudaStream_t s) {
  Tensor c = Tensor::empty(view.dtype(), view.shape(), view.device());
  copy_strided(view, c, s);
  return c;
}

// x (contiguous) cropped or zero-padded on `axes` to `lengths`; x itself when nothing
// changes.
Tensor resized(const Tensor& x, const std::vector<int64_t>& axes,
               const std::vector<int64_t>& lengths, cudaStream_t s) {
  std::vector<int64_t> shape = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) shape[size_t(axes[i])] = lengths[i];
  if (shape == x.shape()) return x;
  Tensor y = Tensor::empty(x.dtype(), shape, x.device());
  RLX_CUDA(cudaMemsetAsync(y.data(), 0, y.nbytes(), s));
  Tensor src = x, dst = y;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t common = std::min(shape[d], x.shape()[d]);
    src = src.slice(int64_t(d), 0, common);
    dst = dst.slice(int64_t(d), 0, common);
  }
  if (src.numel() > 0) copy_strided(src, dst, s);
  return y;
}

DType result_dtype(Kind kind, DType x) {
  return kind == Kind::r2c ? complex_of(x) : kind == Kind::c2r ? real_of(x) : x;
}

// The transforms over the trailing dims.size() axes of the contiguous x (their real lengths
// `dims`), into `into` when given (a contiguous tensor of the result's shape), else into a
// new tensor.
Tensor transform_trailing(const Tensor& x, Kind kind, const std::vector<int64_t>& dims,
                          cudaStream_t s, const Tensor* into = nullptr) {
  std::vector<int64_t> shape = x.shape();
  shape.back() = kind == Kind::r2c ? dims.back() / 2 + 1 : dims.back();
  Tensor out = into ? *into : Tensor::empty(result_dtype(kind, x.dtype()), shape, x.device());
  int64_t batch = 1;
  for (size_t d = 0; d + dims.size() < shape.size(); ++d) batch *= shape[d];
  const bool dbl = x.dtype() == DType::f64 || x.dtype() == DType::c128;
  if (out.numel() > 0) exec(kind, dbl, dims, batch, x.data(), out.data(), s);
  return out;
}

// One transform along `axis` of the contiguous x: a new contiguous tensor, the axis's
// length n (c2r: the real output's; r2c: the real input's). c2r overwrites its input, which
// is therefore always a copy.
Tensor transform_axis(const Tensor& x, int64_t axis, Kind kind, int64_t n, cudaStream_t s) {
  const int64_t rank = x.rank();
  const bool last = axis == rank - 1;
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[size_t(i)] = i;
  std::swap(perm[size_t(axis)], perm.back());
  Tensor in = last && kind != Kind::c2r ? x : contiguous_copy(x.permute(perm), s);
  Tensor out = transform_trailing(in, kind, {n}, s);
  return last ? out : contiguous_copy(out.permute(perm), s);
}

template <class R>
__global__ void scale_kernel(R* p, int64_t count, R f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] *= f;
}

void scale(Tensor& t, double f, cudaStream_t s) {
  const bool dbl = t.dtype() == DType::f64 || t.dtype() == DType::c128;
  const int64_t count = t.numel() * (is_complex(t.dtype()) ? 2 : 1);
  const int blocks = blocks_for(count);
  if (dbl)
    scale_kernel<<<blocks, kThreads, 0, s>>>(static_cast<double*>(t.data()), count, f);
  else
    scale_kernel<<<blocks, kThreads, 0, s>>>(static_cast<float*>(t.data()), count, float(f));
  RLX_CUDA_LAUNCHED("fft scale");
}

void fft_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out,
                Kind kind) {
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  cudaStream_t s = stream_of(ctx);
  const Tensor& x0 = in[0];
  const int64_t rank = x0.rank();
  std::vector<int64_t> axes = ctx.attrs.get_ints("axes");
  for (int64_t& a : axes) a = norm_axis(a, rank);
  // The lengths the input takes on each axis (as the CPU's kernel), and N for the norm.
  std::vector<int64_t> lengths, n;
  double n_total = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t len = y.shape()[size_t(axes[i])];
    const bool last = i + 1 == axes.size();
    int64_t real = len;
    if (kind == Kind::r2c && last) {
      const std::vector<int64_t> attr_n = ctx.attrs.get_ints("n");
      real = attr_n.empty() ? x0.shape()[size_t(axes[i])] : attr_n.back();
    }
    lengths.push_back(kind == Kind::c2r && last ? len / 2 + 1 : real);
    n.push_back(real);
    n_total *= double(real);
  }
  Tensor x = resized(x0, axes, lengths, s);
  const std::string& norm = ctx.attrs.get_string("norm");
  const bool inverse = kind == Kind::c2c_inverse || kind == Kind::c2r;
  const double fct = norm == "ortho"                  ? 1.0 / std::sqrt(n_total)
                     : (norm == "forward") != inverse ? 1.0 / n_total
                                                      : 1.0;
  // Axes that are the last k (c2c's in any order; r2c's and c2r's halved axis last), k <= 3,
  // take one cuFFT plan of rank k, written straight into y: as torch.fft, no copies.
  std::vector<size_t> order(axes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (kind == Kind::c2c_forward || kind == Kind::c2c_inverse)
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return axes[a] < axes[b]; });
  bool trailing = axes.size() <= 3;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < order.size(); ++i) {
    trailing = trailing && axes[order[i]] == rank - int64_t(axes.size()) + int64_t(i);
    dims.push_back(n[order[i]]);
  }
  if (trailing) {
    if (kind == Kind::c2r && x.data() == x0.data()) x = contiguous_copy(x, s);
    transform_trailing(x, kind, dims, s, &y);
    if (fct != 1.0) scale(y, fct, s);
    return;
  }
  const size_t k = axes.size() - 1;
  switch (kind) {
    case Kind::c2c_forward:
    case Kind::c2c_inverse:
      for (size_t i = 0; i <= k; ++i) x = transform_axis(x, axes[i], kind, n[i], s);
      break;
    case Kind::r2c:
      x = transform_axis(x, axes[k], Kind::r2c, n[k], s);
      for (size_t i = 0; i < k; ++i) x = transform_axis(x, axes[i], Kind::c2c_forward, n[i], s);
      break;
    case Kind::c2r:
      for (size_t i = 0; i < k; ++i) x = transform_axis(x, axes[i], Kind::c2c_inverse, n[i], s);
      x = transform_axis(x, axes[k], Kind::c2r, n[k], s);
      break;
  }
  if (fct != 1.0) scale(x, fct, s);
  RLX_CUDA(cudaMemcpyAsync(y.data(), x.data(), y.nbytes(), cudaMemcpyDeviceToDevice, s));
}

template <Kind kKind>
void kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  fft_kernel(ctx, in, out, kKind);
}

// ---- stft of a real signal ------------------------------------------------------------
// (ops/stft.cpp defines it.) One kernel frames the signal, the centre padding read in
// place (reflect / constant / edge), each frame times the window (zero-padded to n_fft,
// and 1 / sqrt(n_fft) when normalized) into [rows, frames, n_fft]; cuFFT's r2c makes
// [rows, frames, F] of it; the output is that buffer's view [..., F, frames], as torch.stft
// returns (a consumer that needs it contiguous gets a copy). The decomposition would take
// five passes: pad, gather, mul, rfft, transpose.
enum class PadMode : int { constant, reflect, edge };

template <class R>
__global__ void frame_kernel(const R* x, const R* w, R* out, int64_t count, int64_t len,
                             int64_t frames, int64_t n_fft, int64_t hop, int64_t pad, PadMode mode,
                             int64_t w_len, int64_t w_left, R scale) {
  RLX_GRID_STRIDE(i, count) {
    const int64_t j = i % n_fft, rt = i / n_fft, t = rt % frames, r = rt / frames;
    const int64_t at = t * hop + j - pad;
    const bool inside = at >= 0 && at < len;
    // (An empty signal, which only edge padding accepts, pads with zeros, as on the CPU.)
    const R v = inside || (mode != PadMode::constant && len > 0)
                    ? x[r * len + pad_source(at, len, mode == PadMode::reflect)]
                    : R(0);
    const int64_t wj = j - w_left;
    const R wv = w ? (wj >= 0 && wj < w_len ? w[wj] : R(0)) : R(1);
    out[i] = v * wv * scale;
  }
}

void stft_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  const std::vector<int64_t>& shape = ctx.output_shapes[0];
  const int64_t rank = int64_t(shape.size()), freqs = shape[size_t(rank - 2)],
                frames = shape[size_t(rank - 1)], len = x.shape().back();
  const detail::Frames fr = detail::frames_of(ctx.attrs);
  const int64_t n_fft = fr.n_fft, hop = fr.hop, pad = fr.pad;
  const std::string& m = ctx.attrs.get_string("pad_mode");
  const PadMode mode = m == "reflect"    ? PadMode::reflect
                       : m == "constant" ? PadMode::constant
                                         : PadMode::edge;  // edge, replicate
  // (Counted from the leading dims, not numel / len: an empty signal has rows too.)
  const int64_t rows = dims_product(x.shape(), 0, x.shape().size() - 1);
  std::vector<int64_t> spec_shape(shape.begin(), shape.end() - 2);
  spec_shape.push_back(frames);
  spec_shape.push_back(freqs);
  Tensor spec = Tensor::empty(complex_of(x.dtype()), spec_shape, x.device());
  if (spec.numel() > 0) {
    cudaStream_t s = stream_of(ctx);
    Tensor framed = Tensor::empty(x.dtype(), {rows, frames, n_fft}, x.device());
    const int64_t w_len = in.size() > 1 ? in[1].numel() : 0, w_left = fr.window_left(w_len);
    const double scale = ctx.attrs.get_bool("normalized") ? 1 / std::sqrt(double(n_fft)) : 1.0;
    const int64_t count = framed.numel();
    auto go = [&](auto tag) {
      using R = typename decltype(tag)::type;
      frame_kernel<R><<<blocks_for(count), kThreads, 0, s>>>(
          x.data_as<R>(), in.size() > 1 ? in[1].data_as<R>() : nullptr, framed.data_as<R>(), count,
          len, frames, n_fft, hop, pad, mode, w_len, w_left, R(scale));
    };
    const bool dbl = x.dtype() == DType::f64;
    if (dbl)
      go(Tag<double>{});
    else
      go(Tag<float>{});
    RLX_CUDA_LAUNCHED("stft frame_kernel");
    exec(Kind::r2c, dbl, {n_fft}, rows * frames, framed.data(), spec.data(), s);
  }
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[size_t(i)] = i;
  std::swap(perm[size_t(rank - 1)], perm[size_t(rank - 2)]);
  out[0] = spec.permute(perm);
}

// A real signal (contiguous: the kernel reads rows), one-sided; the rest decomposes.
bool stft_native(const KernelQuery& q) {
  const DType t = q.inputs[0].dtype;
  return (t == DType::f32 || t == DType::f64) && q.attrs.get_bool("onesided") &&
         q.inputs[0].rank() >= 1;
}

// c64 / c128 (f32 / f64 for rfft's input): the dtypes the op accepts.
bool precise(const KernelQuery& q) {
  DType t = q.inputs[0].dtype;
  return t == DType::f32 || t == DType::f64 || t == DType::c64 || t == DType::c128;
}

}  // namespace

void register_fft(KernelRegistry& r) {
  add_kernel(r, "fft", kernel<Kind::c2c_forward>, precise);
  add_kernel(r, "ifft", kernel<Kind::c2c_inverse>, precise);
  add_kernel(r, "rfft", kernel<Kind::r2c>, precise);
  add_kernel(r, "irfft", kernel<Kind::c2r>, precise);
  add_kernel(r, "stft", stft_kernel, stft_native, {.makes_outputs = true});
}

}  // namespace rlx::cuda
