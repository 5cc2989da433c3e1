// CPU kernels for the products: spmv, spmv_t, spmm, spmm_t, sddmm (OpenMP over rows).
#include <cstring>

#include "csr.h"

namespace rlx::sparse {

namespace {

template <class I>
Pattern<I> pattern_of(std::span<const Tensor> in, size_t first, int64_t cols) {
  const Tensor &c = in[first], &r = in[first + 1];
  return {r.data_as<I>(), c.data_as<I>(), r.numel() - 1, cols, c.numel()};
}

// Leading (batch) elements of a [..., n, k] operand, and its k.
int64_t batch_of(const Tensor& t) {
  int64_t b = 1;
  for (int64_t i = 0; i + 2 < t.rank(); ++i) b *= t.shape()[size_t(i)];
  return b;
}
int64_t k_of(const Tensor& t) { return t.rank() >= 2 ? t.shape().back() : 1; }

template <class T, class I>
void spmv_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  CsrRef<T, I> a{pattern_of<I>(in, 1, in[3].numel()), in[0].data_as<T>()};
  spmv(ctx.op.name, a, in[3].data_as<T>(), out[0].data_as<T>());
}

// Y[b] = A X[b] for X [..., cols, k].
template <class T, class I>
void spmm_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& X = in[3];
  int64_t k = k_of(X), nb = batch_of(X), cols = X.shape()[size_t(X.rank() - 2)];
  Pattern<I> p = pattern_of<I>(in, 1, cols);
  check_pattern(ctx.op.name, p);
  const T* v = in[0].data_as<T>();
  const T* x = X.data_as<T>();
  T* y = out[0].data_as<T>();
#pragma omp parallel for schedule(static) collapse(2) if (nb * (p.nnz + p.rows) * k >= kGrain)
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < p.rows; ++i) {
      T* yr = y + (b * p.rows + i) * k;
      std::fill(yr, yr + k, T(0));
      for (int64_t e = p.row_ptr[i]; e < p.row_ptr[i + 1]; ++e) {
        const T* xr = x + (b * cols + p.col[e]) * k;
        T ve = v[e];
#pragma omp simd
        for (int64_t j = 0; j < k; ++j) yr[j] += ve * xr[j];
      }
    }
}

// Y[b] = A^T X[b] for X [..., rows, k]: each thread scatters its rows into a private
// buffer, then the buffers are summed (no atomics, deterministic for a thread count).
template <class T, class I>
void spmm_t_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& X = in[3];
  int64_t k = k_of(X), nb = batch_of(X), cols = ctx.attrs.get_int("cols");
  Pattern<I> p = pattern_of<I>(in, 1, cols);
  check_pattern(ctx.op.name, p);
  const T* v = in[0].data_as<T>();
  const T* x = X.data_as<T>();
  T* y = out[0].data_as<T>();
  const int64_t m = cols * k;  // one batch element of the output
  const int nt = (p.nnz + p.rows) * k < kGrain ? 1 : omp_get_max_threads();
  std::vector<T> priv(static_cast<size_t>((nt - 1) * m));
  for (int64_t b = 0; b < nb; ++b) {
    const T* xb = x + b * p.rows * k;
    T* yb = y + b * m;
    std::fill(yb, yb + m, T(0));
#pragma omp parallel num_threads(nt)
    {
      int t = omp_get_thread_num(), n = omp_get_num_threads();
      T* acc = t == 0 ? yb : priv.data() + (t - 1) * m;
      if (t > 0) std::fill(acc, acc + m, T(0));
      int64_t lo = p.rows * t / n, hi = p.rows * (t + 1) / n;
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t e = p.row_ptr[i]; e < p.row_ptr[i + 1]; ++e) {
          T* yr = acc + int64_t(p.col[e]) * k;
          const T* xr = xb + i * k;
          T ve = v[e];
#pragma omp simd
          for (int64_t j = 0; j < k; ++j) yr[j] += ve * xr[j];
        }
#pragma omp barrier
#pragma omp for schedule(static)
      for (int64_t j = 0; j < m; ++j) {
        T s = yb[j];
        for (int u = 1; u < n; ++u) s += priv[size_t((u - 1) * m + j)];
        yb[j] = s;
      }
    }
  }
}

// s[e] = sum over batch and k of U[b, row(e), :] . V[b, col(e), :].
template <class T, class I>
void sddmm_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &U = in[2], &V = in[3];
  int64_t k = k_of(U), nb = batch_of(U);
  int64_t cols = V.rank() >= 2 ? V.shape()[size_t(V.rank() - 2)] : V.numel();
  Pattern<I> p = pattern_of<I>(in, 0, cols);
  check_pattern(ctx.op.name, p);
  const T* u = U.data_as<T>();
  const T* w = V.data_as<T>();
  T* s = out[0].data_as<T>();
#pragma omp parallel for schedule(static) if (nb * (p.nnz + p.rows) * k >= kGrain)
  for (int64_t i = 0; i < p.rows; ++i)
    for (int64_t e = p.row_ptr[i]; e < p.row_ptr[i + 1]; ++e) {
      T acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const T* ur = u + (b * p.rows + i) * k;
        const T* vr = w + (b * cols + p.col[e]) * k;
        for (int64_t j = 0; j < k; ++j) acc += ur[j] * vr[j];
      }
      s[e] = acc;
    }
}

// Registers f(T{}, I{}, ctx, in, out) for every values / index dtype pair; `value` and
// `index` are the input positions that carry the two dtypes.
template <class F>
void add(const char* op, size_t value, size_t index, F f) {
  KernelRegistry::global().add(
      op, DeviceKind::cpu,
      [=](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        dispatch(in[value].dtype(), in[index].dtype(),
                 [&](auto t, auto i) { f(t, i, ctx, in, out); });
      });
}

#define RLX_SPARSE_FN(fn) [](auto t, auto i, auto&&... a) { fn<decltype(t), decltype(i)>(a...); }

}  // namespace

void register_product_kernels() {
  add("sparse.spmv", 0, 1, RLX_SPARSE_FN(spmv_k));
  add("sparse.spmv_t", 0, 1, RLX_SPARSE_FN(spmm_t_k));  // a vector is one column
  add("sparse.spmm", 0, 1, RLX_SPARSE_FN(spmm_k));
  add("sparse.spmm_t", 0, 1, RLX_SPARSE_FN(spmm_t_k));
  add("sparse.sddmm", 2, 0, RLX_SPARSE_FN(sddmm_k));
}

}  // namespace rlx::sparse
