// resize (ONNX Resize on every dim), as the CPU computes it (backend/cpu/resize.cpp): nearest
// is one gather; linear is separable, one 1-D pass per dim that changes, in f32 (f64 for f64)
// between passes. Each thread works out its sample positions in double with the CPU's
// formulas (resize_map.h), so the indices and weights are the CPU's to the bit, and no
// tables travel to the device.
#include "backend/cpu/resize_map.h"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::gpu {

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
__global__ void linear_pass(const In* src, Out* dst, int64_t n, int64_t inner, Axis a,
                            int transform) {
  RLX_GRID_STRIDE(idx, n) {
    int64_t t = idx % inner, r = idx / inner, j = r % a.out, o = r / a.out;
    double x = source_coord(transform, j, a);
    x = x < 0.0 ? 0.0 : x > double(a.in - 1) ? double(a.in - 1) : x;
    int64_t i0 = int64_t(floor(x)), i1 = i0 + 1 < a.in ? i0 + 1 : a.in - 1;
    double w = x - double(i0);
    C w0 = C(1.0 - w), w1 = C(w);
    const In* s = src + o * a.in * inner + t;
    dst[idx] = store<Out>(w0 * C(load(s[i0 * inner])) + w1 * C(load(s[i1 * inner])));
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

template <class T>
void resize_linear(const KernelContext& ctx, const Tensor& x, const Tensor& y) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  cudaStream_t s = stream_of(ctx);
  int transform = transform_of(ctx.attrs);
  std::vector<int64_t> shape = x.shape();
  std::vector<size_t> dims;  // the dims whose map is not the identity (as the CPU decides)
  for (size_t d = 0; d < shape.size(); ++d)
    if (!cpu::axis_map(ctx.attrs, d, x.shape()[d], y.shape()[d], true).identity) dims.push_back(d);
  if (dims.empty()) return copy_strided(x, y, s);
  Tensor cur;  // the last pass's output, when it went to a buffer
  for (size_t k = 0; k < dims.size(); ++k) {
    size_t d = dims[k];
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= shape[i];
    for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
    Axis a = axis_of(ctx.attrs, d, shape[d], y.shape()[d]);
    shape[d] = y.shape()[d];
    int64_t n = outer * a.out * inner;
    bool first = k == 0, last = k + 1 == dims.size();
    Tensor next = last ? y : Tensor::empty(dtype_of<C>(), shape, y.device());
    auto launch = [&](auto* src, auto* dst) {
      linear_pass<C><<<blocks_for(n), kThreads, 0, s>>>(src, dst, n, inner, a, transform);
    };
    auto* src_t = static_cast<const T*>(x.data());
    auto* src_c = first ? nullptr : static_cast<const C*>(cur.data());
    if (first && last)
      launch(src_t, static_cast<T*>(next.data()));
    else if (first)
      launch(src_t, static_cast<C*>(next.data()));
    else if (last)
      launch(src_c, static_cast<T*>(next.data()));
    else
      launch(src_c, static_cast<C*>(next.data()));
    RLX_CUDA_LAUNCHED("resize");
    cur = next;
  }
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

bool resize_supported(const KernelQuery& q) {
  const TensorType& x = q.inputs[0];
  if (x.rank() < 1 || x.rank() > kMaxDims) return false;
  return q.attrs.get_string("mode") == "linear" ? is_float(x.dtype)
                                                : dtype_in_set(x.dtype, kNumeric);
}

}  // namespace

void register_resize(KernelRegistry& r) {
  add_kernel(r, "resize", resize_kernel, resize_supported);
}

}  // namespace rlx::gpu
