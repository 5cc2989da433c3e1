// resize (ONNX Resize on every dim) and resize_grad, as the CPU computes them
// (backend/cpu/resize.cpp, window_grad.cpp): nearest is one gather; linear is separable, one
// 1-D pass per dim that changes, in f32 (f64 for f64) between passes; resize_grad runs the
// transposed passes in reverse order. Each thread works out its sample positions in double
// with the CPU's formulas (resize_map.h), so the indices and weights are the CPU's to the
// bit and no tables travel to the device. The transposed pass gathers: the outputs that
// sampled an input are a run of them (the positions grow with the index), found by
// bisection, and summed in the CPU's order, without atomics.
#include "backend/cpu/resize_map.h"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::cuda {

namespace {

enum Transform : int { kHalfPixel, kAlignCorners, kAsymmetric };
enum Nearest : int { kPreferFloor, kPreferCeil, kFloor, kCeil };

// One dim resized from `in` to `out`.
struct Axis {
  int64_t in, out;
  double scale;
};

__device__ __forceinline__ double source_coord(int transform, int64_t o, const Axis& a) {
  if (transform == kAlignCorners)
    return a.out == 1 ? 0.0 : double(o) * double(a.in - 1) / double(a.out - 1);
  if (transform == kAsymmetric) return double(o) / a.scale;
  return (double(o) + 0.5) / a.scale - 0.5;
}

__device__ __forceinline__ int64_t round_nearest(double x, int mode) {
  if (mode == kFloor) return int64_t(floor(x));
  if (mode == kCeil) return int64_t(ceil(x));
  double f = floor(x);
  if (x - f == 0.5) return int64_t(mode == kPreferCeil ? f + 1 : f);
  return int64_t(round(x));
}

// Where output j of one dim samples the input: (1 - w) * in[i0] + w * in[i1] (nearest: i0,
// with w = 0).
struct Sampler {
  Axis a;
  int transform, mode;
  bool linear;

  __device__ __forceinline__ void operator()(int64_t j, int64_t& i0, int64_t& i1, double& w) const {
    double x = source_coord(transform, j, a);
    if (linear) {
      x = x < 0.0 ? 0.0 : x > double(a.in - 1) ? double(a.in - 1) : x;
      i0 = int64_t(floor(x));
      i1 = i0 + 1 < a.in ? i0 + 1 : a.in - 1;
      w = x - double(i0);
    } else {
      i0 = round_nearest(x, mode);
      i0 = i0 < 0 ? 0 : i0 > a.in - 1 ? a.in - 1 : i0;
      i1 = i0;
      w = 0.0;
    }
  }
  // The first output j whose i0 is at least v (a.out when none is).
  __device__ int64_t first_reaching(int64_t v) const {
    int64_t lo = 0, hi = a.out, i0, i1;
    double w;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      (*this)(mid, i0, i1, w);
      if (i0 < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }
};

struct NearestMap {
  int rank, transform, mode;
  Axis axis[kMaxDims];
};

// y[o...] = x[i(o_0), ..., i(o_last)]; T is an element of the right size.
template <class T>
__global__ void nearest_kernel(const T* x, T* y, int64_t n, NearestMap m) {
  RLX_GRID_STRIDE(idx, n) {
    int64_t r = idx, off = 0, stride = 1;
    for (int d = m.rank - 1; d >= 0; --d) {
      const Axis& a = m.axis[d];
      int64_t j = r % a.out;
      r /= a.out;
      int64_t i = round_nearest(source_coord(m.transform, j, a), m.mode);
      i = i < 0 ? 0 : i > a.in - 1 ? a.in - 1 : i;
      off += i * stride;
      stride *= a.in;
    }
    y[idx] = x[off];
  }
}

// One linear pass along a dim: src [outer, in, inner] -> dst [outer, out, inner].
template <class C, class In, class Out>
__global__ void linear_pass(const In* src, Out* dst, int64_t n, int64_t inner, Sampler m) {
  RLX_GRID_STRIDE(idx, n) {
    int64_t t = idx % inner, r = idx / inner, j = r % m.a.out, o = r / m.a.out, i0, i1;
    double w;
    m(j, i0, i1, w);
    C w0 = C(1.0 - w), w1 = C(w);
    const In* s = src + o * m.a.in * inner + t;
    dst[idx] = store<Out>(w0 * C(load(s[i0 * inner])) + w1 * C(load(s[i1 * inner])));
  }
}

// The transpose of a pass (nearest or linear): src [outer, out, inner] -> dst [outer, in,
// inner], each input the sum of the samples that read it. In output order, as the CPU adds
// them: those with i1 here (i0 one below, a nonzero weight), then those with i0 here.
template <class C, class In, class Out>
__global__ void transposed_pass(const In* src, Out* dst, int64_t n, int64_t inner, Sampler m) {
  RLX_GRID_STRIDE(idx, n) {
    int64_t t = idx % inner, r = idx / inner, i = r % m.a.in, o = r / m.a.in, i0, i1;
    double w;
    const In* s = src + o * m.a.out * inner + t;
    int64_t here = m.first_reaching(i), next = m.first_reaching(i + 1);
    C acc = C(0);
    if (m.linear && i > 0)
      for (int64_t j = m.first_reaching(i - 1); j < here; ++j) {
        m(j, i0, i1, w);
        C w1 = C(w);
        if (i1 == i && w1 != C(0)) acc += w1 * C(load(s[j * inner]));
      }
    for (int64_t j = here; j < next; ++j) {
      m(j, i0, i1, w);
      acc += C(1.0 - w) * C(load(s[j * inner]));
    }
    dst[idx] = store<Out>(acc);
  }
}

int transform_of(const Attrs& a) {
  const std::string& t = a.get_string("coordinate_transformation");
  return t == "align_corners" ? kAlignCorners : t == "asymmetric" ? kAsymmetric : kHalfPixel;
}

int nearest_of(const Attrs& a) {
  const std::string& m = a.get_string("nearest_mode");
  return m == "round_prefer_ceil" ? kPreferCeil
         : m == "floor"           ? kFloor
         : m == "ceil"            ? kCeil
                                  : kPreferFloor;
}

Axis axis_of(const Attrs& a, size_t d, int64_t in, int64_t out) {
  const FloatList& scales = a.get_floats("scales");
  return {in, out, scales.empty() ? double(out) / double(in) : scales[d]};
}

Sampler sampler(const Attrs& a, size_t d, int64_t in, int64_t out, bool linear) {
  return {axis_of(a, d, in, out), transform_of(a), nearest_of(a), linear};
}

// Runs one pass per dim in `dims` (maps[k] for dims[k]) from x to y, with buffers of C
// between passes; `shape` starts as x's. pass(blocks, src, dst, n, inner, map) launches one.
template <class T, class C, class Pass>
void run_passes(const Tensor& x, const Tensor& y, std::vector<int64_t> shape,
                const std::vector<size_t>& dims, const std::vector<Sampler>& maps, cudaStream_t s,
                Pass&& pass) {
  if (dims.empty()) return copy_strided(x, y, s);
  Tensor cur;  // the last pass's output, when it went to a buffer
  for (size_t k = 0; k < dims.size(); ++k) {
    size_t d = dims[k];
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= shape[i];
    for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
    shape[d] = y.shape()[d];
    int64_t n = outer * shape[d] * inner;
    bool first = k == 0, last = k + 1 == dims.size();
    Tensor next = last ? y : Tensor::empty(dtype_of<C>(), shape, y.device());
    int blocks = blocks_for(n);
    const Sampler& m = maps[k];
    auto* src_t = static_cast<const T*>(x.data());
    auto* src_c = first ? nullptr : static_cast<const C*>(cur.data());
    if (first && last)
      pass(blocks, src_t, static_cast<T*>(next.data()), n, inner, m);
    else if (first)
      pass(blocks, src_t, static_cast<C*>(next.data()), n, inner, m);
    else if (last)
      pass(blocks, src_c, static_cast<T*>(next.data()), n, inner, m);
    else
      pass(blocks, src_c, static_cast<C*>(next.data()), n, inner, m);
    RLX_CUDA_LAUNCHED("resize");
    cur = next;
  }
}

template <class T>
void resize_linear(const KernelContext& ctx, const Tensor& x, const Tensor& y) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  std::vector<size_t> dims;  // the dims whose map is not the identity (as the CPU decides)
  std::vector<Sampler> maps;
  for (size_t d = 0; d < size_t(x.rank()); ++d) {
    int64_t in = x.shape()[d], out = y.shape()[d];
    if (cpu::axis_map(ctx.attrs, d, in, out, true).identity) continue;
    dims.push_back(d);
    maps.push_back(sampler(ctx.attrs, d, in, out, true));
  }
  cudaStream_t s = stream_of(ctx);
  run_passes<T, C>(x, y, x.shape(), dims, maps, s,
                   [&](int blocks, auto* src, auto* dst, auto... a) {
                     linear_pass<C><<<blocks, kThreads, 0, s>>>(src, dst, a...);
                   });
}

void resize_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &x = in[0], &y = out[0];
  int64_t n = y.numel();
  if (n == 0) return;
  cudaStream_t s = stream_of(ctx);
  if (ctx.attrs.get_string("mode") == "linear") {
    visit(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (is_float_v<T>) resize_linear<T>(ctx, x, y);
    });
    return;
  }
  NearestMap m{int(x.rank()), transform_of(ctx.attrs), nearest_of(ctx.attrs), {}};
  for (size_t d = 0; d < size_t(x.rank()); ++d)
    m.axis[d] = axis_of(ctx.attrs, d, x.shape()[d], y.shape()[d]);
  visit_bytes(dtype_size(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    nearest_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x.data()),
                                                         static_cast<T*>(y.data()), n, m);
  });
  RLX_CUDA_LAUNCHED("resize");
}

// resize_grad(x, ct): the transposed passes over the dims that change, last dim first.
void resize_grad_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  const Tensor &x = in[0], &ct = in[1];
  Tensor& dx = out[0];
  if (dx.numel() == 0) return;
  if (ct.numel() == 0) return fill(dx, 0, stream_of(ctx));
  bool linear = ctx.attrs.get_string("mode") == "linear";
  std::vector<size_t> dims;
  std::vector<Sampler> maps;
  for (size_t d = size_t(x.rank()); d-- > 0;) {
    int64_t n_in = x.shape()[d], n_out = ct.shape()[d];
    if (cpu::axis_map(ctx.attrs, d, n_in, n_out, linear).identity) continue;
    dims.push_back(d);
    maps.push_back(sampler(ctx.attrs, d, n_in, n_out, linear));
  }
  cudaStream_t s = stream_of(ctx);
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    if constexpr (is_float_v<T>)
      run_passes<T, C>(ct, dx, ct.shape(), dims, maps, s,
                       [&](int blocks, auto* src, auto* dst, auto... a) {
                         transposed_pass<C><<<blocks, kThreads, 0, s>>>(src, dst, a...);
                       });
  });
}

bool resize_supported(const KernelQuery& q) {
  const TensorType& x = q.inputs[0];
  if (x.rank() < 1 || x.rank() > kMaxDims) return false;
  return q.attrs.get_string("mode") == "linear" ? is_float(x.dtype)
                                                : dtype_in_set(x.dtype, kNumeric);
}

}  // namespace

void register_resize(KernelRegistry& r) {
  add_kernel(r, "resize", resize_kernel, resize_supported);
  add_kernel(r, "resize_grad", resize_grad_kernel, dtype_in(kFloat));
}

}  // namespace rlx::cuda
