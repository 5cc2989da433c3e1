// Elementwise kernels: unary math, binary arithmetic / logic / comparison, select and
// clamp, with NumPy broadcasting (stride-0 views) and strided inputs read in place. Same-
// shape contiguous operands take a flat loop; the rest go through an Indexer.
#include <algorithm>

#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_ops.cuh"
#include "backend/cuda/elementwise_table.h"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::cuda {

namespace {

using namespace ewop;
using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

// Flat loops move 16 bytes per load (kVec elements of the widest operand type) when every
// pointer is aligned for it; the tail goes element by element.
template <class... Ts>
constexpr int kVec = 16 / std::max({sizeof(Ts)...});

// visit, with c64 / c128 as Cx<float> / Cx<double> (rows with kComplex).
template <class F>
void visit_numbers(DType dt, F&& f) {
  if (dt == DType::c64) return f(Tag<Cx<float>>{});
  if (dt == DType::c128) return f(Tag<Cx<double>>{});
  visit(dt, f);
}

template <class T, class U, class Op>
__global__ void unary_flat(const T* x, U* y, int64_t n, Op op) {
  constexpr int V = kVec<T, U>;
  int64_t nv = n / V;
  RLX_GRID_STRIDE(i, nv) {
    Vec<T, V> a = reinterpret_cast<const Vec<T, V>*>(x)[i];
    Vec<U, V> r;
#pragma unroll
    for (int e = 0; e < V; ++e) r.v[e] = store<U>(op(load(a.v[e])));
    reinterpret_cast<Vec<U, V>*>(y)[i] = r;
  }
  RLX_GRID_STRIDE(i, n - nv * V) y[nv * V + i] = store<U>(op(load(x[nv * V + i])));
}
template <class T, class U, class Op>
__global__ void unary_flat_scalar(const T* x, U* y, int64_t n, Op op) {
  RLX_GRID_STRIDE(i, n) y[i] = store<U>(op(load(x[i])));
}
template <class T, class U, class Op>
__global__ void unary_strided(const T* x, U* y, int64_t n, Indexer<2> ix, Op op) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    y[off[0]] = store<U>(op(load(x[off[1]])));
  }
}

template <class T, class U, class Op>
__global__ void binary_flat(const T* a, const T* b, U* y, int64_t n, Op op) {
  constexpr int V = kVec<T, U>;
  int64_t nv = n / V;
  RLX_GRID_STRIDE(i, nv) {
    Vec<T, V> va = reinterpret_cast<const Vec<T, V>*>(a)[i];
    Vec<T, V> vb = reinterpret_cast<const Vec<T, V>*>(b)[i];
    Vec<U, V> r;
#pragma unroll
    for (int e = 0; e < V; ++e) r.v[e] = store<U>(op(load(va.v[e]), load(vb.v[e])));
    reinterpret_cast<Vec<U, V>*>(y)[i] = r;
  }
  RLX_GRID_STRIDE(i, n - nv * V) {
    int64_t j = nv * V + i;
    y[j] = store<U>(op(load(a[j]), load(b[j])));
  }
}
template <class T, class U, class Op>
__global__ void binary_flat_scalar(const T* a, const T* b, U* y, int64_t n, Op op) {
  RLX_GRID_STRIDE(i, n) y[i] = store<U>(op(load(a[i]), load(b[i])));
}

// A same-shape operand and a single value (x * 2, x + bias scalar): no indexer.
template <class T, class U, class Op, bool kScalarFirst>
__global__ void binary_scalar(const T* a, const T* s, U* y, int64_t n, Op op) {
  auto c = load(*s);
  RLX_GRID_STRIDE(i, n) y[i] = store<U>(kScalarFirst ? op(c, load(a[i])) : op(load(a[i]), c));
}
// Operands made of rows of `inner` contiguous elements, each at its own row stride (0: one
// row for all, as a broadcast bias or position table): 16 bytes a load, one division per
// vector (3x faster than one division per element: bench/RESULTS.md, "GPU rows").
template <class T, class U, class Op>
__global__ void binary_rows(const T* a, const T* b, U* y, int64_t n, int64_t inner, int64_t sa,
                            int64_t sb, int64_t sy, Op op) {
  constexpr int V = kVec<T, U>;
  RLX_GRID_STRIDE(i, n / V) {
    int64_t e = i * V, row = e / inner, c = e - row * inner;
    Vec<T, V> va = *reinterpret_cast<const Vec<T, V>*>(a + row * sa + c);
    Vec<T, V> vb = *reinterpret_cast<const Vec<T, V>*>(b + row * sb + c);
    Vec<U, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = store<U>(op(load(va.v[k]), load(vb.v[k])));
    *reinterpret_cast<Vec<U, V>*>(y + row * sy + c) = r;
  }
}
template <class T, class U, class Op>
__global__ void binary_strided(const T* a, const T* b, U* y, int64_t n, Indexer<3> ix, Op op) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    y[off[0]] = store<U>(op(load(a[off[1]]), load(b[off[2]])));
  }
}

template <class A, class B, class T, class Op>
__global__ void ternary_strided(const A* a, const B* b, const T* c, T* y, int64_t n, Indexer<4> ix,
                                Op op) {
  RLX_GRID_STRIDE(i, n) {
    int64_t off[4];
    ix.offsets(i, off);
    y[off[0]] = op(a[off[1]], b[off[2]], c[off[3]]);
  }
}

bool flat(const Tensor& in, const Tensor& out) {
  return in.shape() == out.shape() && in.is_contiguous();
}

// Applies op elementwise from storage T to storage U.
template <class T, class U, class Op>
void unary_apply(const Tensor& x, const Tensor& y, Op op, cudaStream_t s) {
  int64_t n = y.numel();
  if (n == 0) return;
  const T* xp = static_cast<const T*>(x.data());
  U* yp = static_cast<U*>(y.data());
  if (flat(x, y) && aligned<kVec<T, U>>(xp, yp)) {
    unary_flat<T, U, Op><<<blocks_for(n, kVec<T, U>), kThreads, 0, s>>>(xp, yp, n, op);
  } else if (flat(x, y)) {
    unary_flat_scalar<T, U, Op><<<blocks_for(n), kThreads, 0, s>>>(xp, yp, n, op);
  } else {
    Tensor xb = x.broadcast_to(y.shape());
    auto ix = make_indexer<2>(y.shape(), {&y.strides(), &xb.strides()});
    unary_strided<T, U, Op><<<blocks_for(n), kThreads, 0, s>>>(xp, yp, n, ix, op);
  }
  RLX_CUDA_LAUNCHED("unary elementwise kernel");
}

template <unsigned kSet, bool ToBool = false, class Op>
void unary_kernel(const KernelContext& ctx, Ins in, Outs out, Op op) {
  visit_numbers(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = std::conditional_t<ToBool, bool, T>;
    if constexpr (in_set<T>(kSet)) unary_apply<T, U>(in[0], out[0], op, stream_of(ctx));
  });
}

// A row's functor, its fields the node's float attributes `names`.
template <class Op, class... Names>
Op make_op(const Attrs& a, Names... names) {
  return Op{a.get_float(names)...};
}

void gelu_kernel(const KernelContext& ctx, Ins in, Outs out) {
  if (ctx.attrs.get_string("approximate") == "tanh")
    unary_kernel<kFloat>(ctx, in, out, GeluTanh{});
  else
    unary_kernel<kFloat>(ctx, in, out, GeluErf{});
}

template <class Op, unsigned kSet, bool ToBool = false>
void binary_kernel(const KernelContext& ctx, Ins in, Outs out) {
  visit_numbers(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = std::conditional_t<ToBool, bool, T>;
    if constexpr (in_set<T>(kSet)) {
      const Tensor &a = in[0], &b = in[1], &y = out[0];
      int64_t n = y.numel();
      if (n == 0) return;
      auto ap = static_cast<const T*>(a.data()), bp = static_cast<const T*>(b.data());
      auto yp = static_cast<U*>(y.data());
      cudaStream_t s = stream_of(ctx);
      constexpr int V = kVec<T, U>;
      if (flat(a, y) && flat(b, y) && aligned<V>(ap, bp, yp)) {
        binary_flat<T, U, Op><<<blocks_for(n, V), kThreads, 0, s>>>(ap, bp, yp, n, Op{});
      } else if (flat(a, y) && flat(b, y)) {
        binary_flat_scalar<T, U, Op><<<blocks_for(n), kThreads, 0, s>>>(ap, bp, yp, n, Op{});
      } else if (flat(a, y) && b.numel() == 1) {
        binary_scalar<T, U, Op, false><<<blocks_for(n), kThreads, 0, s>>>(ap, bp, yp, n, Op{});
      } else if (flat(b, y) && a.numel() == 1) {
        binary_scalar<T, U, Op, true><<<blocks_for(n), kThreads, 0, s>>>(bp, ap, yp, n, Op{});
      } else {
        Tensor ab = a.broadcast_to(y.shape()), bb = b.broadcast_to(y.shape());
        auto ix = make_indexer<3>(y.shape(), {&y.strides(), &ab.strides(), &bb.strides()});
        const int64_t inner = ix.size[ix.rank - 1];
        bool rows = ix.rank == 2 && inner % V == 0 && aligned<V>(ap, bp, yp);
        for (int k = 0; k < 3 && rows; ++k) rows = ix.stride[k][1] == 1 && ix.stride[k][0] % V == 0;
        if (rows)
          binary_rows<T, U, Op><<<blocks_for(n, V), kThreads, 0, s>>>(
              ap, bp, yp, n, inner, ix.stride[1][0], ix.stride[2][0], ix.stride[0][0], Op{});
        else
          binary_strided<T, U, Op><<<blocks_for(n), kThreads, 0, s>>>(ap, bp, yp, n, ix, Op{});
      }
      RLX_CUDA_LAUNCHED("binary elementwise kernel");
    }
  });
}

template <class A, class B, class T, class Op>
void ternary_apply(Ins in, const Tensor& y, Op op, cudaStream_t s) {
  int64_t n = y.numel();
  if (n == 0) return;
  Tensor a = in[0].broadcast_to(y.shape()), b = in[1].broadcast_to(y.shape()),
         c = in[2].broadcast_to(y.shape());
  auto ix = make_indexer<4>(y.shape(), {&y.strides(), &a.strides(), &b.strides(), &c.strides()});
  ternary_strided<A, B, T, Op><<<blocks_for(n), kThreads, 0, s>>>(
      static_cast<const A*>(a.data()), static_cast<const B*>(b.data()),
      static_cast<const T*>(c.data()), static_cast<T*>(y.data()), n, ix, op);
  RLX_CUDA_LAUNCHED("ternary elementwise kernel");
}

struct SelectOp {
  template <class T>
  __device__ T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};
void select_kernel(const KernelContext& ctx, Ins in, Outs out) {
  visit_bytes(dtype_size(in[1].dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ternary_apply<bool, T, T>(in, out[0], SelectOp{}, stream_of(ctx));
  });
}

struct ClampOp {
  template <class T>
  __device__ T operator()(T x, T lo, T hi) const {
    using C = compute_t<T>;
    return store<T>(Min{}(Max{}(C(load(x)), C(load(lo))), C(load(hi))));
  }
};
void clamp_kernel(const KernelContext& ctx, Ins in, Outs out) {
  visit(in[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_set<T>(kNumeric))
      ternary_apply<T, T, T>(in, out[0], ClampOp{}, stream_of(ctx));
  });
}

struct Entry {
  const char* name;
  KernelFn fn;
  unsigned set;
};

}  // namespace

bool activation_inplace_supported(std::string_view act) {
  for (const char* a : {"none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"})
    if (act == a) return true;
  return false;
}

void activation_inplace(const Tensor& y, std::string_view act, cudaStream_t s) {
  visit(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_set<T>(kFloat)) {
      auto go = [&](auto op) { unary_apply<T, T>(y, y, op, s); };
      if (act == "relu") go(Relu{});
      if (act == "gelu") go(GeluErf{});
      if (act == "gelu_tanh") go(GeluTanh{});
      if (act == "silu") go(Silu{});
      if (act == "sigmoid") go(Sigmoid{});
      if (act == "tanh") go(Tanh{});
    }
  });
}

SupportsFn dtype_in(unsigned set, size_t index) {
  return [set, index](const KernelQuery& q) {
    if (index < q.inputs.size()) return dtype_in_set(q.inputs[index].dtype, set);
    return !q.outputs.empty() && dtype_in_set(q.outputs[0].dtype, set);
  };
}

void register_elementwise(KernelRegistry& r) {
  // The rows of elementwise_table.h.
#define RLX_UNARY_ROW(op, F, set, ...)                                              \
  {#op,                                                                             \
   [](const KernelContext& c, Ins in, Outs out) {                                   \
     unary_kernel<set>(c, in, out, make_op<F>(c.attrs __VA_OPT__(, ) __VA_ARGS__)); \
   },                                                                               \
   set},
#define RLX_UNARY_BOOL_ROW(op, F, set)                                                         \
  {#op,                                                                                        \
   [](const KernelContext& c, Ins in, Outs out) { unary_kernel<set, true>(c, in, out, F{}); }, \
   set},
#define RLX_BINARY_ROW(op, F, set) {#op, binary_kernel<F, set>, set},
#define RLX_BINARY_BOOL_ROW(op, F, set) {#op, binary_kernel<F, set, true>, set},
  const Entry entries[] = {
      RLX_CUDA_UNARY_OPS(RLX_UNARY_ROW)              //
      RLX_CUDA_UNARY_BOOL_OPS(RLX_UNARY_BOOL_ROW)    //
      RLX_CUDA_BINARY_OPS(RLX_BINARY_ROW)            //
      RLX_CUDA_BINARY_BOOL_OPS(RLX_BINARY_BOOL_ROW)  //
      {"gelu", gelu_kernel, kFloat},
      {"clamp", clamp_kernel, kNumeric},
  };
#undef RLX_UNARY_ROW
#undef RLX_UNARY_BOOL_ROW
#undef RLX_BINARY_ROW
#undef RLX_BINARY_BOOL_ROW
  // Element i of every same-shaped input is read before output element i is written, so
  // outputs may take over a dying input's storage.
  KernelFlags flags{.strided_inputs = true, .inplace = true};
  for (const Entry& e : entries) add_kernel(r, e.name, e.fn, dtype_in(e.set), flags);
  add_kernel(r, "select", select_kernel, dtype_in(kAll, 1), flags);
}

}  // namespace rlx::cuda
