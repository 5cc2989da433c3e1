// Iterative solves on the CPU: preconditioned CG, BiCGSTAB and restarted GMRES, written
// with the multithreaded spmv of csr.h and fused OpenMP vector loops (dot products
// accumulated in double). Each right-hand side is solved on its own.
#include <cmath>
#include <limits>

#include "csr.h"

namespace rlx::sparse {

namespace {

struct Result {
  int64_t iterations = 0;
  bool converged = false;
};

// The matrix an iterative solve works with (A or A^T) and its Jacobi preconditioner.
template <class T, class I>
struct System {
  std::string op;
  CsrRef<T, I> a;
  std::vector<T> dinv;  // 1 / diag(A) (1 where the diagonal is 0); empty: no preconditioner
  double norm_inf = 0;  // max row sum of |a_ij|
  int64_t n() const { return a.p.rows; }
  // y = A x; returns w . y when w is given.
  double apply(const T* x, T* y, const T* w = nullptr) const {
    double d = 0;
    spmv_checked(a, x, y, w, &d);  // the pattern was checked once before the solve
    return d;
  }
  T precond(const T* v, int64_t i) const { return dinv.empty() ? v[i] : dinv[size_t(i)] * v[i]; }
};

template <class T, class I>
System<T, I> make_system(const std::string& op, const CsrRef<T, I>& a, bool jacobi) {
  System<T, I> s{op, a, {}, 0};
  std::vector<T> diag(static_cast<size_t>(a.p.rows), T(0));
  double ninf = 0;
#pragma omp parallel for schedule(static) reduction(max : ninf) if (a.p.nnz >= kGrain)
  for (int64_t i = 0; i < a.p.rows; ++i) {
    double row = 0;
    for (int64_t e = a.p.row_ptr[i]; e < a.p.row_ptr[i + 1]; ++e) {
      row += std::abs(double(a.v[e]));
      if (a.p.col[e] == i) diag[size_t(i)] += a.v[e];
    }
    ninf = std::max(ninf, row);
  }
  s.norm_inf = ninf;
  if (jacobi) {
    s.dinv.resize(diag.size());
    for (size_t i = 0; i < diag.size(); ++i) s.dinv[i] = diag[i] != T(0) ? T(1) / diag[i] : T(1);
  }
  return s;
}

// ---- CG ------------------------------------------------------------------------------

template <class T, class I>
Result cg(const System<T, I>& s, const T* b, T* x, double tol, int64_t max_iter) {
  const int64_t n = s.n();
  std::vector<T> r(static_cast<size_t>(n)), p(r), q(r);
  double bn = norm2(b, n), rz = 0, pp = 0;
#pragma omp parallel for schedule(static) reduction(+ : rz, pp) if (n >= kGrain)
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0;
    r[size_t(i)] = b[i];
    T z = s.precond(b, i);
    p[size_t(i)] = z;
    rz += double(b[i]) * z;
    pp += double(z) * z;
  }
  double rr = bn * bn;
  const double stop = tol * bn;
  Result res;
  while (std::sqrt(rr) > stop && res.iterations < max_iter) {
    double pq = s.apply(p.data(), q.data(), p.data());
    // p^T A p <= 0 for p != 0: A is not positive definite (beyond rounding), or CG broke down.
    if (pq <= 0) {
      if (pq < -64 * std::numeric_limits<T>::epsilon() * s.norm_inf * pp)
        fail<ValueError>(s.op, "expected a symmetric positive definite matrix, got p^T A p = ", pq,
                         " < 0 at iteration ", res.iterations);
      break;
    }
    const T alpha = T(rz / pq);
    double rz_new = 0;
    rr = 0;
#pragma omp parallel for schedule(static) reduction(+ : rz_new, rr) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) {
      x[i] += alpha * p[size_t(i)];
      T ri = r[size_t(i)] - alpha * q[size_t(i)];
      r[size_t(i)] = ri;
      rz_new += double(ri) * double(s.precond(r.data(), i));
      rr += double(ri) * ri;
    }
    const T beta = T(rz_new / rz);
    rz = rz_new;
    pp = 0;
#pragma omp parallel for schedule(static) reduction(+ : pp) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) {
      T pi = s.precond(r.data(), i) + beta * p[size_t(i)];
      p[size_t(i)] = pi;
      pp += double(pi) * pi;
    }
    ++res.iterations;
  }
  res.converged = std::sqrt(rr) <= stop;
  return res;
}

// ---- BiCGSTAB (right preconditioned) --------------------------------------------------

template <class T, class I>
Result bicgstab(const System<T, I>& s, const T* b, T* x, double tol, int64_t max_iter) {
  const int64_t n = s.n();
  const bool pc = !s.dinv.empty();
  std::vector<T> r(b, b + n), rhat(r), p(static_cast<size_t>(n), T(0)), v(p), t(p);
  std::vector<T> phat_(pc ? size_t(n) : 0), shat_(pc ? size_t(n) : 0);
  T* phat = pc ? phat_.data() : p.data();
  T* shat = pc ? shat_.data() : r.data();
  std::fill(x, x + n, T(0));
  double bn = norm2(b, n), rr = bn * bn, rho = 1, alpha = 1, omega = 1;
  const double stop = tol * bn;
  Result res;
  while (std::sqrt(rr) > stop && res.iterations < max_iter) {
    double rho_new = dot(rhat.data(), r.data(), n);
    if (rho_new == 0) break;  // breakdown: r is orthogonal to the shadow residual
    const T beta = T((rho_new / rho) * (alpha / omega));
    rho = rho_new;
#pragma omp parallel for schedule(static) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) {
      p[size_t(i)] = r[size_t(i)] + beta * (p[size_t(i)] - T(omega) * v[size_t(i)]);
      if (pc) phat[i] = s.dinv[size_t(i)] * p[size_t(i)];
    }
    double rv = s.apply(phat, v.data(), rhat.data());
    if (rv == 0) break;
    alpha = rho / rv;
    double ss = 0;
#pragma omp parallel for schedule(static) reduction(+ : ss) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) {
      T si = r[size_t(i)] - T(alpha) * v[size_t(i)];  // s, kept in r
      r[size_t(i)] = si;
      ss += double(si) * si;
      if (pc) shat[i] = s.dinv[size_t(i)] * si;
    }
    ++res.iterations;
    if (std::sqrt(ss) <= stop) {
#pragma omp parallel for schedule(static) if (n >= kGrain)
      for (int64_t i = 0; i < n; ++i) x[i] += T(alpha) * phat[i];
      rr = ss;
      break;
    }
    s.apply(shat, t.data());
    double tt = 0, ts = 0;
#pragma omp parallel for schedule(static) reduction(+ : tt, ts) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) {
      tt += double(t[size_t(i)]) * t[size_t(i)];
      ts += double(t[size_t(i)]) * r[size_t(i)];
    }
    omega = tt > 0 ? ts / tt : 0;
    rr = 0;
#pragma omp parallel for schedule(static) reduction(+ : rr) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) {
      x[i] += T(alpha) * phat[i] + T(omega) * shat[i];
      T ri = r[size_t(i)] - T(omega) * t[size_t(i)];
      r[size_t(i)] = ri;
      rr += double(ri) * ri;
    }
    if (omega == 0) break;
  }
  res.converged = std::sqrt(rr) <= stop;
  return res;
}

// ---- GMRES(m) (right preconditioned, modified Gram-Schmidt, Givens rotations) ---------

template <class T, class I>
Result gmres(const System<T, I>& s, const T* b, T* x, double tol, int64_t max_iter,
             int64_t restart) {
  const int64_t n = s.n(), m = std::max<int64_t>(1, std::min(restart, std::max<int64_t>(n, 1)));
  std::vector<std::vector<T>> V(static_cast<size_t>(m + 1), std::vector<T>(static_cast<size_t>(n)));
  std::vector<double> H(static_cast<size_t>((m + 1) * m)), cs(static_cast<size_t>(m)), sn(cs),
      g(static_cast<size_t>(m + 1)), y(cs);
  std::vector<T> z(static_cast<size_t>(n)), w(z);
  auto h = [&](int64_t i, int64_t j) -> double& { return H[size_t(i * m + j)]; };
  std::fill(x, x + n, T(0));
  const double bn = norm2(b, n), stop = tol * bn;
  Result res;
  while (true) {
    // r = b - A x, the start of a cycle.
    s.apply(x, w.data());
    T* v0 = V[0].data();
#pragma omp parallel for schedule(static) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) v0[i] = b[i] - w[size_t(i)];
    double beta = norm2(v0, n);
    if (beta <= stop) {
      res.converged = true;
      break;
    }
    if (res.iterations >= max_iter) break;
#pragma omp parallel for schedule(static) if (n >= kGrain)
    for (int64_t i = 0; i < n; ++i) v0[i] = T(v0[i] / beta);
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;
    int64_t j = 0;
    while (j < m && res.iterations < max_iter) {
#pragma omp parallel for schedule(static) if (n >= kGrain)
      for (int64_t i = 0; i < n; ++i) z[size_t(i)] = s.precond(V[size_t(j)].data(), i);
      s.apply(z.data(), w.data());
      for (int64_t i = 0; i <= j; ++i) {
        double hij = dot(w.data(), V[size_t(i)].data(), n);
        h(i, j) = hij;
        const T* vi = V[size_t(i)].data();
#pragma omp parallel for schedule(static) if (n >= kGrain)
        for (int64_t e = 0; e < n; ++e) w[size_t(e)] -= T(hij) * vi[e];
      }
      double hn = norm2(w.data(), n);
      h(j + 1, j) = hn;
      if (hn > 0) {
        T* vn = V[size_t(j + 1)].data();
#pragma omp parallel for schedule(static) if (n >= kGrain)
        for (int64_t e = 0; e < n; ++e) vn[e] = T(w[size_t(e)] / hn);
      }
      for (int64_t i = 0; i < j; ++i) {  // earlier rotations on the new column
        double a = h(i, j), c = h(i + 1, j);
        h(i, j) = cs[size_t(i)] * a + sn[size_t(i)] * c;
        h(i + 1, j) = -sn[size_t(i)] * a + cs[size_t(i)] * c;
      }
      double a = h(j, j), c = h(j + 1, j), d = std::hypot(a, c);
      cs[size_t(j)] = d > 0 ? a / d : 1;
      sn[size_t(j)] = d > 0 ? c / d : 0;
      h(j, j) = d;
      h(j + 1, j) = 0;
      g[size_t(j + 1)] = -sn[size_t(j)] * g[size_t(j)];
      g[size_t(j)] = cs[size_t(j)] * g[size_t(j)];
      ++j;
      ++res.iterations;
      if (std::abs(g[size_t(j)]) <= stop || hn == 0) break;
    }
    // y = H^-1 g (upper triangular), then x += M (V y).
    for (int64_t i = j - 1; i >= 0; --i) {
      double acc = g[size_t(i)];
      for (int64_t l = i + 1; l < j; ++l) acc -= h(i, l) * y[size_t(l)];
      y[size_t(i)] = h(i, i) != 0 ? acc / h(i, i) : 0;
    }
#pragma omp parallel for schedule(static) if (n >= kGrain)
    for (int64_t e = 0; e < n; ++e) {
      double acc = 0;
      for (int64_t i = 0; i < j; ++i) acc += y[size_t(i)] * V[size_t(i)][size_t(e)];
      z[size_t(e)] = T(acc);
    }
#pragma omp parallel for schedule(static) if (n >= kGrain)
    for (int64_t e = 0; e < n; ++e) x[e] += s.precond(z.data(), e);
  }
  return res;
}

// ---- the kernel ---------------------------------------------------------------------

enum class Method { cg, bicgstab, gmres };

template <class T, class I>
void iterative_k(Method method, const KernelContext& ctx, std::span<const Tensor> in,
                 std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  const Attrs& at = ctx.attrs;
  const Tensor& B = in[3];
  int64_t n = in[2].numel() - 1;
  CsrRef<T, I> a{{in[2].data_as<I>(), in[1].data_as<I>(), n, n, in[1].numel()}, in[0].data_as<T>()};
  check_pattern(op, a.p);
  Transposed<T, I> at_storage;
  if (at.has("transpose") && at.get_bool("transpose")) {
    at_storage = transpose(a);
    a = at_storage.ref(n, n);
  }
  System<T, I> s = make_system(op, a, at.get_string("preconditioner") == "jacobi");
  double tol = at.get_float("tol");
  int64_t max_iter = at.get_int("max_iter");
  if (max_iter < 0) max_iter = 10 * n;
  int64_t k = B.rank() >= 2 ? B.shape().back() : 1, cols = B.numel() / std::max<int64_t>(n, 1);
  if (n == 0) cols = out[1].numel();
  const T* b = B.data_as<T>();
  T* X = out[0].data_as<T>();
  int32_t* iters = out[1].data_as<int32_t>();
  T* resid = out[2].data_as<T>();
  std::vector<T> bc(static_cast<size_t>(n)), xc(bc), r(bc);
  for (int64_t c = 0; c < cols; ++c) {
    int64_t bi = c / k, j = c % k;
    auto at_ij = [&](int64_t i) { return (bi * n + i) * k + j; };  // column c of [..., n, k]
    for (int64_t i = 0; i < n; ++i) bc[size_t(i)] = b[at_ij(i)];
    Result res;
    if (method == Method::cg)
      res = cg(s, bc.data(), xc.data(), tol, max_iter);
    else if (method == Method::bicgstab)
      res = bicgstab(s, bc.data(), xc.data(), tol, max_iter);
    else
      res = gmres(s, bc.data(), xc.data(), tol, max_iter, at.get_int("restart"));
    // The residual reported is the true one, ||b - A x|| / ||b||, not the recurrence's.
    s.apply(xc.data(), r.data());
    double rn = 0, bn = norm2(bc.data(), n);
    for (int64_t i = 0; i < n; ++i) rn += std::pow(double(bc[size_t(i)]) - r[size_t(i)], 2);
    for (int64_t i = 0; i < n; ++i) X[at_ij(i)] = xc[size_t(i)];
    iters[c] = int32_t(std::min<int64_t>(res.iterations, INT32_MAX));
    resid[c] = T(bn > 0 ? std::sqrt(rn) / bn : 0);
  }
}

template <Method method>
void add(const char* op) {
  KernelRegistry::global().add(
      op, DeviceKind::cpu,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        dispatch(in[0].dtype(), in[1].dtype(), [&](auto t, auto i) {
          iterative_k<decltype(t), decltype(i)>(method, ctx, in, out);
        });
      });
}

}  // namespace

void register_iterative_kernels() {
  add<Method::cg>("sparse.cg_solve");
  add<Method::bicgstab>("sparse.bicgstab_solve");
  add<Method::gmres>("sparse.gmres_solve");
}

}  // namespace rlx::sparse
