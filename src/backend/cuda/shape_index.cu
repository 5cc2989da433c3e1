// Index ops: gather, gather_elements, gather_nd, scatter_elements, scatter_nd, one_hot,
// and iota, with the CPU's semantics (backend/cpu/shape_index.cpp): negative indices wrap
// once; an index out of range is a ValueError naming it (found on the device, reported
// after the kernel: one small copy and a wait); scatters apply duplicate updates in index
// order, each output element owned by one thread, so results are deterministic and equal
// the CPU's.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"
#include "rlx/axes.h"

namespace rlx::cuda {

namespace {

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;
using ull = unsigned long long;

// The first bad index a kernel meets, reported after the run (deferred_check).
class BadIndex {
 public:
  BadIndex(const KernelContext& ctx, std::vector<int64_t> data)
      : slot_(deferred_check(
            ctx.device, [op = ctx.op.name, data = std::move(data)](int64_t v, int64_t axis) {
              int64_t size = data[size_t(axis)];
              fail<ValueError>(op, "expected indices in [", -size, ", ", size, ") for axis ", axis,
                               " of data ", ints_str(data), ", got ", v);
            })) {}
  ull* ptr() const { return slot_; }

 private:
  ull* slot_;
};

// v wrapped once into [0, n); -1 (and the value reported) when out of range.
__device__ __forceinline__ int64_t checked(int64_t v, int64_t n, int64_t axis, ull* bad) {
  int64_t w = v < 0 ? v + n : v;
  if (w >= 0 && w < n) return w;
  report_bad(bad, v, axis);
  return -1;
}

template <class F>
void visit_index(DType dt, F&& f) {
  visit(dt, [&](auto tag) {
    using I = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) f(tag);
  });
}

// ---- gather -------------------------------------------------------------------------------

template <class E, class I>
__global__ void gather_k(const E* x, const I* idx, E* y, int64_t outer, int64_t n, int64_t inner,
                         int64_t m, int64_t axis, ull* bad) {
  RLX_GRID_STRIDE(t, outer * m * inner) {
    int64_t q = t / inner, i = t - q * inner, o = q / m, k = q - o * m;
    int64_t j = checked(int64_t(idx[k]), n, axis, bad);
    if (j >= 0) y[t] = x[(o * n + j) * inner + i];
  }
}

void gather_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1];
  int64_t axis = norm_axis(ctx.attrs.get_int("axis"), x.rank());
  int64_t outer = dims_product(x.shape(), 0, size_t(axis)), n = x.shape()[size_t(axis)];
  int64_t inner = dims_product(x.shape(), size_t(axis) + 1, x.shape().size()), m = idx.numel();
  int64_t total = outer * m * inner;
  BadIndex bad(ctx, x.shape());
  if (total > 0)
    visit_bytes(dtype_size(x.dtype()), [&](auto etag) {
      using E = typename decltype(etag)::type;
      visit_index(idx.dtype(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        gather_k<E, I><<<blocks_for(total), kThreads, 0, stream_of(ctx)>>>(
            static_cast<const E*>(x.data()), static_cast<const I*>(idx.data()),
            static_cast<E*>(out[0].data()), outer, n, inner, m, axis, bad.ptr());
      });
    });
  RLX_CUDA_LAUNCHED("gather");
}

// y[p] = x[p with its axis coordinate replaced by idx[p]]; base: x's offset of p with
// the axis coordinate 0.
template <class E, class I>
__global__ void gather_elements_k(const E* x, const I* idx, E* y, int64_t total, Indexer<1> base,
                                  int64_t n, int64_t axis_stride, int64_t axis, ull* bad) {
  RLX_GRID_STRIDE(p, total) {
    int64_t off[1];
    base.offsets(p, off);
    int64_t j = checked(int64_t(idx[p]), n, axis, bad);
    if (j >= 0) y[p] = x[off[0] + j * axis_stride];
  }
}

void gather_elements_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1];
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), x.rank()));
  std::vector<int64_t> xs = contiguous_strides(x.shape());
  int64_t axis_stride = xs[axis];
  xs[axis] = 0;
  int64_t total = idx.numel();
  BadIndex bad(ctx, x.shape());
  if (total > 0) {
    Indexer<1> base = make_indexer<1>(idx.shape(), {&xs});
    visit_bytes(dtype_size(x.dtype()), [&](auto etag) {
      using E = typename decltype(etag)::type;
      visit_index(idx.dtype(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        gather_elements_k<E, I><<<blocks_for(total), kThreads, 0, stream_of(ctx)>>>(
            static_cast<const E*>(x.data()), static_cast<const I*>(idx.data()),
            static_cast<E*>(out[0].data()), total, base, x.shape()[axis], axis_stride,
            int64_t(axis), bad.ptr());
      });
    });
  }
  RLX_CUDA_LAUNCHED("gather_elements");
}

// Index tuples of m components address x from dim b on; tuple offsets first.
struct Tuples {
  int64_t m = 0, b = 0;
  int64_t size[kMaxDims], stride[kMaxDims];  // of x's dims b .. b + m
};

template <class I>
__global__ void tuple_offsets(const I* idx, int64_t tuples, Tuples tp, int64_t* offs, ull* bad) {
  RLX_GRID_STRIDE(t, tuples) {
    int64_t off = 0;
    for (int64_t k = 0; k < tp.m; ++k) {
      int64_t j = checked(int64_t(idx[t * tp.m + k]), tp.size[k], tp.b + k, bad);
      off += (j < 0 ? 0 : j) * tp.stride[k];
    }
    offs[t] = off;
  }
}

// Offsets (elements of x, contiguous) of every index tuple of idx [..., m].
Tensor tuple_offsets_of(const Tensor& idx, const std::vector<int64_t>& xsh, int64_t b,
                        const BadIndex& bad, cudaStream_t s) {
  int64_t m = idx.shape().back(), tuples = idx.numel() / std::max<int64_t>(m, 1);
  if (m > kMaxDims)
    fail<NotSupported>("cuda", "expected index tuples of at most ", kMaxDims, " components, got ",
                       m);
  if (m == 0) tuples = dims_product(idx.shape(), 0, idx.shape().size() - 1);
  Tuples tp;
  tp.m = m;
  tp.b = b;
  auto xs = contiguous_strides(xsh);
  for (int64_t k = 0; k < m; ++k) {
    tp.size[k] = xsh[size_t(b + k)];
    tp.stride[k] = xs[size_t(b + k)];
  }
  Tensor offs = Tensor::empty(DType::i64, {tuples}, idx.device());
  if (tuples > 0)
    visit_index(idx.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      tuple_offsets<I>
          <<<blocks_for(tuples), kThreads, 0, s>>>(static_cast<const I*>(idx.data()), tuples, tp,
                                                   static_cast<int64_t*>(offs.data()), bad.ptr());
    });
  RLX_CUDA_LAUNCHED("index tuples");
  return offs;
}

template <class E>
__global__ void gather_nd_k(const E* x, const int64_t* offs, E* y, int64_t rows, int64_t len,
                            int64_t per_batch, int64_t batch_stride) {
  RLX_GRID_STRIDE(t, rows * len) {
    int64_t q = t / len, e = t - q * len;
    y[t] = x[(q / per_batch) * batch_stride + offs[q] + e];
  }
}

void gather_nd_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1];
  const auto& xsh = x.shape();
  const auto& ish = idx.shape();
  int64_t b = ctx.attrs.get_int("batch_dims"), m = ish.back();
  cudaStream_t s = stream_of(ctx);
  BadIndex bad(ctx, xsh);
  Tensor offs = tuple_offsets_of(idx, xsh, b, bad, s);
  int64_t rows = dims_product(ish, 0, ish.size() - 1),
          len = dims_product(xsh, size_t(b + m), xsh.size());
  int64_t per_batch = dims_product(ish, size_t(b), ish.size() - 1);
  int64_t batch_stride = b ? contiguous_strides(xsh)[size_t(b - 1)] : 0;
  if (rows * len > 0)
    visit_bytes(dtype_size(x.dtype()), [&](auto etag) {
      using E = typename decltype(etag)::type;
      gather_nd_k<E><<<blocks_for(rows * len), kThreads, 0, s>>>(
          static_cast<const E*>(x.data()), static_cast<const int64_t*>(offs.data()),
          static_cast<E*>(out[0].data()), rows, len, std::max<int64_t>(per_batch, 1), batch_stride);
    });
  RLX_CUDA_LAUNCHED("gather_nd");
}

// ---- scatter ------------------------------------------------------------------------------

enum class Reduce { none, add, mul, max, min };

Reduce reduction(const KernelContext& ctx, DType dt) {
  const std::string& s = ctx.attrs.get_string("reduction");
  if (s == "add") return is_bool(dt) ? Reduce::max : Reduce::add;  // or on bool
  if (s == "mul") return is_bool(dt) ? Reduce::min : Reduce::mul;  // and on bool
  if (s == "max") return Reduce::max;
  if (s == "min") return Reduce::min;
  return Reduce::none;
}

// a (in place) combined with update b; max and min propagate NaN.
template <class T>
__device__ __forceinline__ T combine(Reduce red, T a, T b) {
  using C = compute_t<T>;
  if (red == Reduce::none) return b;
  C x = C(load(a)), y = C(load(b));
  switch (red) {
    case Reduce::add:
      return store<T>(x + y);
    case Reduce::mul:
      return store<T>(x * y);
    case Reduce::max:
      return x != x ? a : y != y ? b : x >= y ? a : b;
    default:
      return x != x ? a : y != y ? b : x <= y ? a : b;
  }
}

// One thread per line (every coordinate but the axis): its updates in index order.
template <class T, class I>
__global__ void scatter_elements_k(T* y, const I* idx, const T* upd, int64_t lines, Indexer<2> line,
                                   int64_t n, int64_t istep, int64_t ystep, int64_t size,
                                   int64_t axis, Reduce red, ull* bad) {
  RLX_GRID_STRIDE(l, lines) {
    int64_t off[2];
    line.offsets(l, off);
    for (int64_t k = 0; k < n; ++k) {
      int64_t ik = off[0] + k * istep;
      int64_t j = checked(int64_t(idx[ik]), size, axis, bad);
      if (j < 0) continue;
      T& d = y[off[1] + j * ystep];
      d = combine(red, d, upd[ik]);
    }
  }
}

void scatter_elements_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1], &upd = in[2];
  Tensor& y = out[0];
  cudaStream_t s = stream_of(ctx);
  copy_strided(x, y, s);
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), x.rank()));
  auto ics = contiguous_strides(idx.shape()), ycs = contiguous_strides(y.shape());
  std::vector<int64_t> lshape = idx.shape(), is = ics, ys = ycs;
  lshape[axis] = 1;  // the axis runs inside a thread
  int64_t lines = dims_product(lshape, 0, lshape.size());
  BadIndex bad(ctx, x.shape());
  if (idx.numel() > 0) {
    Indexer<2> line = make_indexer<2>(lshape, {&is, &ys});
    Reduce red = reduction(ctx, x.dtype());
    visit(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      visit_index(idx.dtype(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        scatter_elements_k<T, I><<<blocks_for(lines), kThreads, 0, s>>>(
            static_cast<T*>(y.data()), static_cast<const I*>(idx.data()),
            static_cast<const T*>(upd.data()), lines, line, idx.shape()[axis], ics[axis], ycs[axis],
            x.shape()[axis], int64_t(axis), red, bad.ptr());
      });
    });
  }
  RLX_CUDA_LAUNCHED("scatter_elements");
}

// One thread per slice element: every tuple's update to it, in order.
template <class T>
__global__ void scatter_nd_k(T* y, const int64_t* offs, const T* upd, int64_t tuples, int64_t len,
                             Reduce red) {
  RLX_GRID_STRIDE(e, len) {
    for (int64_t t = 0; t < tuples; ++t) {
      T& d = y[offs[t] + e];
      d = combine(red, d, upd[t * len + e]);
    }
  }
}

// Many tuples: sorted by destination (a stable sort, so equal destinations keep their
// index order), each run of equal destinations is applied by the thread at its head, one
// per slice element. The same order as above, with every destination in parallel (an
// embedding's gradient: a row per token into the vocabulary table).
template <class T>
__global__ void scatter_sorted_k(T* y, const int64_t* offs, const int64_t* order, const T* upd,
                                 int64_t tuples, int64_t len, Reduce red) {
  RLX_GRID_STRIDE(i, tuples * len) {
    int64_t t = i / len, e = i - t * len;
    int64_t o = offs[t];
    if (t > 0 && offs[t - 1] == o) continue;  // not the head of its run
    T& d = y[o + e];
    T acc = d;
    for (int64_t u = t; u < tuples && offs[u] == o; ++u)
      acc = combine(red, acc, upd[order[u] * len + e]);
    d = acc;
  }
}

__global__ void iota_k(int64_t* v, int64_t n) { RLX_GRID_STRIDE(i, n) v[i] = i; }

void scatter_sorted(const Tensor& y, const Tensor& offs, const Tensor& upd, int64_t len, Reduce red,
                    cudaStream_t s) {
  int64_t n = offs.numel();
  Device dev = y.device();
  Tensor keys = Tensor::empty(DType::i64, {n}, dev), order_in = Tensor::empty(DType::i64, {n}, dev),
         order = Tensor::empty(DType::i64, {n}, dev);
  iota_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<int64_t*>(order_in.data()), n);
  int bits = 1;
  while (bits < 63 && (int64_t(1) << bits) < y.numel()) ++bits;
  auto sort = [&](void* temp, size_t& bytes) {
    return cub::DeviceRadixSort::SortPairs(temp, bytes, static_cast<const int64_t*>(offs.data()),
                                           static_cast<int64_t*>(keys.data()),
                                           static_cast<const int64_t*>(order_in.data()),
                                           static_cast<int64_t*>(order.data()), int(n), 0, bits, s);
  };
  size_t bytes = 0;
  RLX_CUDA(sort(nullptr, bytes));
  Tensor temp = Tensor::empty(DType::u8, {int64_t(std::max<size_t>(bytes, 1))}, dev);
  RLX_CUDA(sort(temp.data(), bytes));
  visit(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_sorted_k<T><<<blocks_for(n * len), kThreads, 0, s>>>(
        static_cast<T*>(y.data()), static_cast<const int64_t*>(keys.data()),
        static_cast<const int64_t*>(order.data()), static_cast<const T*>(upd.data()), n, len, red);
  });
}

void scatter_nd_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &idx = in[1], &upd = in[2];
  Tensor& y = out[0];
  cudaStream_t s = stream_of(ctx);
  const auto& xsh = x.shape();
  BadIndex bad(ctx, xsh);  // a bad tuple addresses offset 0: in bounds, and the run fails
  Tensor offs = tuple_offsets_of(idx, xsh, 0, bad, s);
  copy_strided(x, y, s);
  int64_t tuples = offs.numel(), len = dims_product(xsh, size_t(idx.shape().back()), xsh.size());
  if (tuples == 0 || len == 0) return;
  Reduce red = reduction(ctx, x.dtype());
  // Few slice elements, many tuples: the serial loop would leave the device idle.
  if (tuples >= 64 && tuples * len >= 4 * int64_t(kThreads) * sm_count() &&
      len < 16 * int64_t(kThreads) * sm_count() && tuples < (int64_t(1) << 31)) {
    scatter_sorted(y, offs, upd, len, red, s);
    RLX_CUDA_LAUNCHED("scatter_nd");
    return;
  }
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_nd_k<T><<<blocks_for(len), kThreads, 0, s>>>(
        static_cast<T*>(y.data()), static_cast<const int64_t*>(offs.data()),
        static_cast<const T*>(upd.data()), tuples, len, red);
  });
  RLX_CUDA_LAUNCHED("scatter_nd");
}

// ---- one_hot, iota ------------------------------------------------------------------------

// Indices outside [-depth, depth) leave their row all off (ONNX OneHot).
template <class E, class I>
__global__ void one_hot_k(const I* idx, E* y, int64_t n, int64_t depth, int64_t inner, E on) {
  RLX_GRID_STRIDE(p, n) {
    int64_t k = int64_t(idx[p]);
    if (k < 0) k += depth;
    if (k >= 0 && k < depth) y[((p / inner) * depth + k) * inner + p % inner] = on;
  }
}

void one_hot_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor& idx = in[0];
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  cudaStream_t s = stream_of(ctx);
  fill(y, ctx.attrs.get_float("off_value"), s);
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), y.rank()));
  int64_t depth = y.shape()[axis], inner = dims_product(y.shape(), axis + 1, y.shape().size());
  uint64_t bits = 0;
  store_double(y.dtype(), &bits, ctx.attrs.get_float("on_value"));
  if (idx.numel() > 0)
    visit_bytes(dtype_size(y.dtype()), [&](auto etag) {
      using E = typename decltype(etag)::type;
      E on;
      std::memcpy(&on, &bits, sizeof(E));
      visit_index(idx.dtype(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        one_hot_k<E, I><<<blocks_for(idx.numel()), kThreads, 0, s>>>(
            static_cast<const I*>(idx.data()), static_cast<E*>(y.data()), idx.numel(), depth, inner,
            on);
      });
    });
  RLX_CUDA_LAUNCHED("one_hot");
}

template <class T>
__global__ void iota_k(T* y, int64_t total, int64_t n, int64_t inner) {
  RLX_GRID_STRIDE(t, total) y[t] = store<T>(compute_t<T>((t / inner) % n));
}

void iota_kernel(const KernelContext& ctx, Ins, Outs out) {
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), y.rank()));
  int64_t n = y.shape()[axis], inner = dims_product(y.shape(), axis + 1, y.shape().size());
  visit(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>)
      iota_k<T><<<blocks_for(y.numel()), kThreads, 0, stream_of(ctx)>>>(static_cast<T*>(y.data()),
                                                                        y.numel(), n, inner);
  });
  RLX_CUDA_LAUNCHED("iota");
}

}  // namespace

void register_shape_index(KernelRegistry& r) {
  add_kernel(r, "gather", gather_kernel);
  add_kernel(r, "gather_elements", gather_elements_kernel);
  add_kernel(r, "gather_nd", gather_nd_kernel);
  // Scatters combine elements in their dtype: complex data runs on the host.
  add_kernel(r, "scatter_elements", scatter_elements_kernel, dtype_in(kAll));
  add_kernel(r, "scatter_nd", scatter_nd_kernel, dtype_in(kAll));
  add_kernel(r, "one_hot", one_hot_kernel);
  add_kernel(r, "iota", iota_kernel, dtype_in(kNumeric));
}

}  // namespace rlx::cuda
