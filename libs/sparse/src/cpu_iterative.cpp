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
    spmv_rows<false>(a, x, y, w, &d);  // the pattern was checked once, before the solve
    return d;
  }
  T precond(const T* v, int64_t i) const { return dinv.empty() ? v[i] : dinv[size_t(i)] * v[i]; }
};

template <class T, class I>
System<T, I> make_system(const std::string& op, const CsrRef<T, I>& a, bool jacobi) {
  System<T, I> s{op, a, {}, 0};
  std::vector<T> diag(static_cast<size_t>(a.p.rows), T(0));
  for (int64_t i = 0; i < a.p.rows; ++i) {
    double row = 0;
    for (int64_t e = a.p.row_ptr[i]; e < a.p.row_ptr[i + 1]; ++e) {
      row += std::abs(double(a.v[e]));
      if (a.p.col[e] == i) diag[size_t(i)] += a.v[e];
    }
    s.norm_inf = std::max(s.norm_inf, row);
  }
  if (jacobi) {
    s.dinv.resize(diag.size());
    for (size_t i = 0; i < diag.size(); ++i) s.dinv[i] = diag[i] != T(0) ? T(1) / diag[i] : T(1);
  }
  return s;
}

// ---- CG ------------------------------------------------------------------------------

// Three passes an iteration: q = A p with p . q; x, r and r . z, r . r (z = M r, never
// stored); p = z + beta p.
template <class T, class I>
Result cg(const System<T, I>& s, const T* b, T* x, double tol, int64_t max_iter) {
  const int64_t n = s.n();
  std::vector<T> r_(b, b + n), p_(static_cast<size_t>(n)), q_(p_);
  T *r = r_.data(), *p = p_.data(), *q = q_.data();
  auto [rz, pp] = parallel_sum2(n, [&](int64_t i) {
    x[i] = 0;
    T z = s.precond(r, i);
    p[i] = z;
    return std::pair{double(r[i]) * z, double(z) * z};
  });
  const double bn = norm2(b, n), stop = tol * bn;
  double rr = bn * bn;
  Result res;
  while (std::sqrt(rr) > stop && res.iterations < max_iter) {
    double pq = s.apply(p, q, p);
    // p^T A p <= 0 for p != 0: A is not positive definite (beyond rounding), or CG broke down.
    if (pq <= 0) {
      if (pq < -64 * std::numeric_limits<T>::epsilon() * s.norm_inf * pp)
        fail<ValueError>(s.op, "expected a symmetric positive definite matrix, got p^T A p = ", pq,
                         " < 0 at iteration ", res.iterations);
      break;
    }
    const T alpha = T(rz / pq);
    auto [rz_new, rr_new] = parallel_sum2(n, [&](int64_t i) {
      x[i] += alpha * p[i];
      T ri = r[i] - alpha * q[i];
      r[i] = ri;
      return std::pair{double(ri) * double(s.precond(r, i)), double(ri) * ri};
    });
    const T beta = T(rz_new / rz);
    rz = rz_new, rr = rr_new;
    pp = parallel_sum(n, [&](int64_t i) {
      T pi = s.precond(r, i) + beta * p[i];
      p[i] = pi;
      return double(pi) * pi;
    });
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
  const size_t sz = static_cast<size_t>(n);
  std::vector<T> r_(b, b + n), rhat_(r_), p_(sz, T(0)), v_(sz, T(0)), t_(sz), phat_(pc ? sz : 0),
      shat_(pc ? sz : 0);
  T *r = r_.data(), *rhat = rhat_.data(), *p = p_.data(), *v = v_.data(), *t = t_.data();
  T* phat = pc ? phat_.data() : p;  // M p and M s; p and s themselves without M
  T* shat = pc ? shat_.data() : r;
  std::fill(x, x + n, T(0));
  const double bn = norm2(b, n), stop = tol * bn;
  double rr = bn * bn, rho = 1, alpha = 1, omega = 1;
  Result res;
  while (std::sqrt(rr) > stop && res.iterations < max_iter) {
    double rho_new = dot(rhat, r, n);
    if (rho_new == 0) break;  // breakdown: r is orthogonal to the shadow residual
    const T beta = T((rho_new / rho) * (alpha / omega)), om = T(omega);
    rho = rho_new;
    parallel_for(n, [&](int64_t i) {
      p[i] = r[i] + beta * (p[i] - om * v[i]);
      if (pc) phat[i] = s.dinv[size_t(i)] * p[i];
    });
    double rv = s.apply(phat, v, rhat);
    if (rv == 0) break;
    alpha = rho / rv;
    const T al = T(alpha);
    double ss = parallel_sum(n, [&](int64_t i) {
      T si = r[i] - al * v[i];  // s, kept in r
      r[i] = si;
      if (pc) shat[i] = s.dinv[size_t(i)] * si;
      return double(si) * si;
    });
    ++res.iterations;
    if (std::sqrt(ss) <= stop) {
      parallel_for(n, [&](int64_t i) { x[i] += al * phat[i]; });
      rr = ss;
      break;
    }
    s.apply(shat, t);
    auto [tt, ts] = parallel_sum2(n, [&](int64_t i) {
      return std::pair{double(t[i]) * t[i], double(t[i]) * r[i]};
    });
    omega = tt > 0 ? ts / tt : 0;
    const T w = T(omega);
    rr = parallel_sum(n, [&](int64_t i) {
      x[i] += al * phat[i] + w * shat[i];
      T ri = r[i] - w * t[i];
      r[i] = ri;
      return double(ri) * ri;
    });
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
  const size_t sz = static_cast<size_t>(n);
  std::vector<std::vector<T>> V(static_cast<size_t>(m + 1), std::vector<T>(sz));
  std::vector<double> H(static_cast<size_t>((m + 1) * m)), cs(static_cast<size_t>(m)), sn(cs),
      g(static_cast<size_t>(m + 1)), y(cs);
  std::vector<T> z_(sz), w_(sz);
  T *z = z_.data(), *w = w_.data();
  auto h = [&](int64_t i, int64_t j) -> double& { return H[size_t(i * m + j)]; };
  std::fill(x, x + n, T(0));
  const double bn = norm2(b, n), stop = tol * bn;
  Result res;
  while (true) {
    // A cycle starts from the true residual r = b - A x.
    s.apply(x, w);
    T* v0 = V[0].data();
    double beta = std::sqrt(parallel_sum(n, [&](int64_t i) {
      v0[i] = b[i] - w[i];
      return double(v0[i]) * v0[i];
    }));
    if (beta <= stop) {
      res.converged = true;
      break;
    }
    if (res.iterations >= max_iter) break;
    parallel_for(n, [&](int64_t i) { v0[i] = T(v0[i] / beta); });
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;
    int64_t j = 0;
    while (j < m && res.iterations < max_iter) {
      const T* vj = V[size_t(j)].data();
      parallel_for(n, [&](int64_t i) { z[i] = s.precond(vj, i); });
      s.apply(z, w);
      for (int64_t i = 0; i <= j; ++i) {
        const T* vi = V[size_t(i)].data();
        const double hij = dot(w, vi, n);
        h(i, j) = hij;
        parallel_for(n, [&](int64_t e) { w[e] -= T(hij) * vi[e]; });
      }
      const double hn = norm2(w, n);
      h(j + 1, j) = hn;
      if (hn > 0) {
        T* vn = V[size_t(j + 1)].data();
        parallel_for(n, [&](int64_t e) { vn[e] = T(w[e] / hn); });
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
    parallel_for(n, [&](int64_t e) {
      double acc = 0;
      for (int64_t i = 0; i < j; ++i) acc += y[size_t(i)] * V[size_t(i)][size_t(e)];
      z[e] = T(acc);
    });
    parallel_for(n, [&](int64_t e) { x[e] += s.precond(z, e); });
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
