// CPU kernels for linalg.*: LAPACK (the Fortran symbols, as OpenBLAS or the reference
// liblapack export them). Each matrix of the batch is copied to a column-major workspace,
// factored or solved there, and copied back row-major.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "rlx/rlx.h"

extern "C" {
// Fortran LAPACK; character arguments carry a hidden length (size_t) at the end.
void sgesv_(const int*, const int*, float*, const int*, int*, float*, const int*, int*);
void dgesv_(const int*, const int*, double*, const int*, int*, double*, const int*, int*);
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void sgetri_(const int*, float*, const int*, const int*, float*, const int*, int*);
void dgetri_(const int*, double*, const int*, const int*, double*, const int*, int*);
void spotrf_(const char*, const int*, float*, const int*, int*, size_t);
void dpotrf_(const char*, const int*, double*, const int*, int*, size_t);
void sgeqrf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
void dgeqrf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
void sorgqr_(const int*, const int*, const int*, float*, const int*, const float*, float*,
             const int*, int*);
void dorgqr_(const int*, const int*, const int*, double*, const int*, const double*, double*,
             const int*, int*);
void ssyevd_(const char*, const char*, const int*, float*, const int*, float*, float*, const int*,
             int*, const int*, int*, size_t, size_t);
void dsyevd_(const char*, const char*, const int*, double*, const int*, double*, double*,
             const int*, int*, const int*, int*, size_t, size_t);
void sgesdd_(const char*, const int*, const int*, float*, const int*, float*, float*, const int*,
             float*, const int*, float*, const int*, int*, int*, size_t);
void dgesdd_(const char*, const int*, const int*, double*, const int*, double*, double*, const int*,
             double*, const int*, double*, const int*, int*, int*, size_t);
void strtrs_(const char*, const char*, const char*, const int*, const int*, const float*,
             const int*, float*, const int*, int*, size_t, size_t, size_t);
void dtrtrs_(const char*, const char*, const char*, const int*, const int*, const double*,
             const int*, double*, const int*, int*, size_t, size_t, size_t);
void sgelsd_(const int*, const int*, const int*, float*, const int*, float*, const int*, float*,
             const float*, int*, float*, const int*, int*, int*);
void dgelsd_(const int*, const int*, const int*, double*, const int*, double*, const int*, double*,
             const double*, int*, double*, const int*, int*, int*);
}

namespace rlx::linalg {

namespace {

// Overloads that pick the s / d routine.
struct Lapack {
  static void gesv(int n, int k, float* a, int* p, float* b, int* info) {
    sgesv_(&n, &k, a, &n, p, b, &n, info);
  }
  static void gesv(int n, int k, double* a, int* p, double* b, int* info) {
    dgesv_(&n, &k, a, &n, p, b, &n, info);
  }
  static void getrf(int n, float* a, int* p, int* info) { sgetrf_(&n, &n, a, &n, p, info); }
  static void getrf(int n, double* a, int* p, int* info) { dgetrf_(&n, &n, a, &n, p, info); }
  static void getri(int n, float* a, const int* p, float* w, int lw, int* info) {
    sgetri_(&n, a, &n, p, w, &lw, info);
  }
  static void getri(int n, double* a, const int* p, double* w, int lw, int* info) {
    dgetri_(&n, a, &n, p, w, &lw, info);
  }
  static void potrf(int n, float* a, int* info) { spotrf_("L", &n, a, &n, info, 1); }
  static void potrf(int n, double* a, int* info) { dpotrf_("L", &n, a, &n, info, 1); }
  static void geqrf(int m, int n, float* a, float* tau, float* w, int lw, int* info) {
    sgeqrf_(&m, &n, a, &m, tau, w, &lw, info);
  }
  static void geqrf(int m, int n, double* a, double* tau, double* w, int lw, int* info) {
    dgeqrf_(&m, &n, a, &m, tau, w, &lw, info);
  }
  static void orgqr(int m, int n, int k, float* a, const float* tau, float* w, int lw, int* info) {
    sorgqr_(&m, &n, &k, a, &m, tau, w, &lw, info);
  }
  static void orgqr(int m, int n, int k, double* a, const double* tau, double* w, int lw,
                    int* info) {
    dorgqr_(&m, &n, &k, a, &m, tau, w, &lw, info);
  }
  static void syevd(int n, float* a, float* w, float* wk, int lw, int* iw, int liw, int* info) {
    ssyevd_("V", "L", &n, a, &n, w, wk, &lw, iw, &liw, info, 1, 1);
  }
  static void syevd(int n, double* a, double* w, double* wk, int lw, int* iw, int liw, int* info) {
    dsyevd_("V", "L", &n, a, &n, w, wk, &lw, iw, &liw, info, 1, 1);
  }
  static void gesdd(int m, int n, float* a, float* s, float* u, float* vt, float* w, int lw,
                    int* iw, int* info) {
    int k = std::min(m, n);
    sgesdd_("S", &m, &n, a, &m, s, u, &m, vt, &k, w, &lw, iw, info, 1);
  }
  static void gesdd(int m, int n, double* a, double* s, double* u, double* vt, double* w, int lw,
                    int* iw, int* info) {
    int k = std::min(m, n);
    dgesdd_("S", &m, &n, a, &m, s, u, &m, vt, &k, w, &lw, iw, info, 1);
  }
  static void trtrs(char uplo, char trans, char diag, int n, int k, const float* a, float* b,
                    int* info) {
    strtrs_(&uplo, &trans, &diag, &n, &k, a, &n, b, &n, info, 1, 1, 1);
  }
  static void trtrs(char uplo, char trans, char diag, int n, int k, const double* a, double* b,
                    int* info) {
    dtrtrs_(&uplo, &trans, &diag, &n, &k, a, &n, b, &n, info, 1, 1, 1);
  }
  static void gelsd(int m, int n, int k, float* a, float* b, int ldb, float* s, float rc, int* rank,
                    float* w, int lw, int* iw, int* info) {
    sgelsd_(&m, &n, &k, a, &m, b, &ldb, s, &rc, rank, w, &lw, iw, info);
  }
  static void gelsd(int m, int n, int k, double* a, double* b, int ldb, double* s, double rc,
                    int* rank, double* w, int lw, int* iw, int* info) {
    dgelsd_(&m, &n, &k, a, &m, b, &ldb, s, &rc, rank, w, &lw, iw, info);
  }
};

// Row-major [rows, cols] at src -> column-major with leading dimension ld.
template <class T>
void to_col(const T* src, int64_t rows, int64_t cols, T* dst, int64_t ld) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * ld + i] = src[i * cols + j];
}
template <class T>
void from_col(const T* src, int64_t ld, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[j * ld + i];
}

int64_t dim(const Tensor& t, int64_t from_end) { return t.shape()[size_t(t.rank() - from_end)]; }
int64_t batch(const Tensor& t) {
  int64_t b = 1;
  for (int64_t i = 0; i + 2 < t.rank(); ++i) b *= t.shape()[size_t(i)];
  return b;
}
int to_int(int64_t v, const std::string& op) {
  if (v > std::numeric_limits<int>::max())
    fail<ValueError>(op, "expected matrix sizes that fit LAPACK's int, got ", v);
  return int(v);
}

template <class T>
[[noreturn]] void fail_lapack(const std::string& op, const char* routine, int info) {
  fail<Error>(op, routine, " failed: expected info = 0, got ", info);
}

template <class T>
void solve_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t b = batch(in[0]), n = dim(in[0], 1), k = dim(in[1], 1);
  int ni = to_int(n, op), ki = to_int(k, op);
  std::vector<T> a(size_t(n * n)), x(size_t(n * k));
  std::vector<int> piv(static_cast<size_t>(n));
  const T* A = in[0].data_as<T>();
  const T* B = in[1].data_as<T>();
  T* X = out[0].data_as<T>();
  for (int64_t i = 0; i < b; ++i) {
    to_col(A + i * n * n, n, n, a.data(), n);
    to_col(B + i * n * k, n, k, x.data(), n);
    int info = 0;
    if (n > 0) Lapack::gesv(ni, ki, a.data(), piv.data(), x.data(), &info);
    if (info > 0)
      fail<ValueError>(op, "expected a nonsingular matrix A, got a singular one (U[", info - 1, ",",
                       info - 1, "] = 0 in matrix ", i, " of the batch)");
    if (info < 0) fail_lapack<T>(op, "gesv", info);
    from_col(x.data(), n, n, k, X + i * n * k);
  }
}

// LU of each matrix: calls f(i, lu (column-major), piv, singular).
template <class T, class F>
void each_lu(const Tensor& t, const std::string& op, F f) {
  int64_t b = batch(t), n = dim(t, 1);
  int ni = to_int(n, op);
  std::vector<T> a(size_t(n * n));
  std::vector<int> piv(static_cast<size_t>(n));
  const T* A = t.data_as<T>();
  for (int64_t i = 0; i < b; ++i) {
    to_col(A + i * n * n, n, n, a.data(), n);
    int info = 0;
    if (n > 0) Lapack::getrf(ni, a.data(), piv.data(), &info);
    if (info < 0) fail_lapack<T>(op, "getrf", info);
    f(i, a, piv, info);
  }
}

template <class T>
void inv_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t n = dim(in[0], 1);
  int ni = to_int(n, op);
  T* Y = out[0].data_as<T>();
  std::vector<T> work(size_t(std::max<int64_t>(1, 64 * n)));
  each_lu<T>(in[0], op, [&](int64_t i, std::vector<T>& a, std::vector<int>& piv, int info) {
    if (info > 0)
      fail<ValueError>(op, "expected a nonsingular matrix A, got a singular one (U[", info - 1, ",",
                       info - 1, "] = 0 in matrix ", i, " of the batch)");
    if (n > 0) Lapack::getri(ni, a.data(), piv.data(), work.data(), int(work.size()), &info);
    if (info != 0) fail_lapack<T>(op, "getri", info);
    from_col(a.data(), n, n, n, Y + i * n * n);
  });
}

// sign and log|det| from an LU factorisation.
template <class T>
std::pair<T, T> lu_slogdet(const std::vector<T>& a, const std::vector<int>& piv, int64_t n,
                           int info) {
  if (info > 0) return {T(0), -std::numeric_limits<T>::infinity()};
  T sign = 1, logabs = 0;
  for (int64_t j = 0; j < n; ++j) {
    T d = a[size_t(j * n + j)];
    if (d < 0) sign = -sign;
    if (piv[size_t(j)] != int(j + 1)) sign = -sign;
    logabs += std::log(std::abs(d));
  }
  return {sign, logabs};
}

template <class T>
void det_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  int64_t n = dim(in[0], 1);
  T* D = out[0].data_as<T>();
  each_lu<T>(in[0], ctx.op.name,
             [&](int64_t i, std::vector<T>& a, std::vector<int>& piv, int info) {
               if (info > 0) {
                 D[i] = 0;
                 return;
               }
               T d = 1;
               for (int64_t j = 0; j < n; ++j) {
                 d *= a[size_t(j * n + j)];
                 if (piv[size_t(j)] != int(j + 1)) d = -d;
               }
               D[i] = d;
             });
}

template <class T>
void slogdet_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  int64_t n = dim(in[0], 1);
  T* S = out[0].data_as<T>();
  T* L = out[1].data_as<T>();
  each_lu<T>(in[0], ctx.op.name,
             [&](int64_t i, std::vector<T>& a, std::vector<int>& piv, int info) {
               auto [s, l] = lu_slogdet(a, piv, n, info);
               S[i] = s;
               L[i] = l;
             });
}

template <class T>
void cholesky_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t b = batch(in[0]), n = dim(in[0], 1);
  int ni = to_int(n, op);
  std::vector<T> a(size_t(n * n));
  const T* A = in[0].data_as<T>();
  T* L = out[0].data_as<T>();
  for (int64_t i = 0; i < b; ++i) {
    to_col(A + i * n * n, n, n, a.data(), n);
    int info = 0;
    if (n > 0) Lapack::potrf(ni, a.data(), &info);
    if (info > 0)
      fail<ValueError>(op, "expected a symmetric positive definite matrix, got one whose leading ",
                       info, "x", info, " minor is not positive definite (matrix ", i,
                       " of the batch)");
    if (info < 0) fail_lapack<T>(op, "potrf", info);
    T* l = L + i * n * n;
    from_col(a.data(), n, n, n, l);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = r + 1; c < n; ++c) l[r * n + c] = 0;
  }
}

template <class T>
void qr_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t b = batch(in[0]), m = dim(in[0], 2), n = dim(in[0], 1), k = std::min(m, n);
  int mi = to_int(m, op), ni = to_int(n, op), ki = int(k);
  std::vector<T> a(size_t(m * n)), tau(size_t(std::max<int64_t>(k, 1)));
  std::vector<T> work(size_t(std::max<int64_t>(1, 64 * std::max(m, n))));
  const T* A = in[0].data_as<T>();
  T* Q = out[0].data_as<T>();
  T* R = out[1].data_as<T>();
  for (int64_t i = 0; i < b; ++i) {
    T* r = R + i * k * n;
    T* q = Q + i * m * k;
    if (k == 0) continue;
    to_col(A + i * m * n, m, n, a.data(), m);
    int info = 0;
    Lapack::geqrf(mi, ni, a.data(), tau.data(), work.data(), int(work.size()), &info);
    if (info != 0) fail_lapack<T>(op, "geqrf", info);
    for (int64_t row = 0; row < k; ++row)
      for (int64_t c = 0; c < n; ++c) r[row * n + c] = c >= row ? a[size_t(c * m + row)] : T(0);
    Lapack::orgqr(mi, ki, ki, a.data(), tau.data(), work.data(), int(work.size()), &info);
    if (info != 0) fail_lapack<T>(op, "orgqr", info);
    from_col(a.data(), m, m, k, q);
  }
}

template <class T>
void eigh_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t b = batch(in[0]), n = dim(in[0], 1);
  int ni = to_int(n, op);
  std::vector<T> a(size_t(n * n));
  const T* A = in[0].data_as<T>();
  T* W = out[0].data_as<T>();
  T* V = out[1].data_as<T>();
  if (n == 0) return;
  // Workspace query.
  T wq = 0;
  int iwq = 0, info = 0;
  Lapack::syevd(ni, a.data(), W, &wq, -1, &iwq, -1, &info);
  std::vector<T> work(size_t(std::max<T>(wq, 1)));
  std::vector<int> iwork(size_t(std::max(iwq, 1)));
  for (int64_t i = 0; i < b; ++i) {
    to_col(A + i * n * n, n, n, a.data(), n);
    Lapack::syevd(ni, a.data(), W + i * n, work.data(), int(work.size()), iwork.data(),
                  int(iwork.size()), &info);
    if (info != 0) fail_lapack<T>(op, "syevd", info);
    from_col(a.data(), n, n, n, V + i * n * n);
  }
}

template <class T>
void svd_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t b = batch(in[0]), m = dim(in[0], 2), n = dim(in[0], 1), k = std::min(m, n);
  if (k == 0) return;
  int mi = to_int(m, op), ni = to_int(n, op);
  std::vector<T> a(size_t(m * n)), u(size_t(m * k)), vt(size_t(k * n));
  std::vector<int> iwork(size_t(8 * k));
  const T* A = in[0].data_as<T>();
  T* U = out[0].data_as<T>();
  T* S = out[1].data_as<T>();
  T* Vt = out[2].data_as<T>();
  T wq = 0;
  int info = 0;
  Lapack::gesdd(mi, ni, a.data(), S, u.data(), vt.data(), &wq, -1, iwork.data(), &info);
  std::vector<T> work(size_t(std::max<T>(wq, 1)));
  for (int64_t i = 0; i < b; ++i) {
    to_col(A + i * m * n, m, n, a.data(), m);
    Lapack::gesdd(mi, ni, a.data(), S + i * k, u.data(), vt.data(), work.data(), int(work.size()),
                  iwork.data(), &info);
    if (info != 0) fail_lapack<T>(op, "gesdd", info);
    from_col(u.data(), m, m, k, U + i * m * k);
    from_col(vt.data(), k, k, n, Vt + i * k * n);
  }
}

template <class T>
void trisolve_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t b = batch(in[0]), n = dim(in[0], 1), k = dim(in[1], 1);
  int ni = to_int(n, op), ki = to_int(k, op);
  char uplo = ctx.attrs.get_bool("lower") ? 'L' : 'U';
  char trans = ctx.attrs.get_bool("transpose") ? 'T' : 'N';
  char diag = ctx.attrs.get_bool("unit_diagonal") ? 'U' : 'N';
  std::vector<T> a(size_t(n * n)), x(size_t(n * k));
  const T* A = in[0].data_as<T>();
  const T* B = in[1].data_as<T>();
  T* X = out[0].data_as<T>();
  for (int64_t i = 0; i < b; ++i) {
    to_col(A + i * n * n, n, n, a.data(), n);
    to_col(B + i * n * k, n, k, x.data(), n);
    int info = 0;
    if (n > 0 && k > 0) Lapack::trtrs(uplo, trans, diag, ni, ki, a.data(), x.data(), &info);
    if (info > 0)
      fail<ValueError>(op, "expected a nonsingular triangular matrix A, got A[", info - 1, ",",
                       info - 1, "] = 0 (matrix ", i, " of the batch)");
    if (info < 0) fail_lapack<T>(op, "trtrs", info);
    from_col(x.data(), n, n, k, X + i * n * k);
  }
}

template <class T>
void lstsq_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  int64_t b = batch(in[0]), m = dim(in[0], 2), n = dim(in[0], 1), k = dim(in[1], 1);
  int64_t ldb = std::max<int64_t>({m, n, 1});
  T* X = out[0].data_as<T>();
  if (m == 0 || n == 0 || k == 0) {
    std::fill(X, X + b * n * k, T(0));
    return;
  }
  int mi = to_int(m, op), ni = to_int(n, op), ki = to_int(k, op), ldbi = to_int(ldb, op);
  std::vector<T> a(size_t(m * n)), x(size_t(ldb * k)), s(size_t(std::min(m, n)));
  T rcond = T(ctx.attrs.get_float("rcond"));
  const T* A = in[0].data_as<T>();
  const T* B = in[1].data_as<T>();
  T wq = 0;
  int iwq = 0, rank = 0, info = 0;
  Lapack::gelsd(mi, ni, ki, a.data(), x.data(), ldbi, s.data(), rcond, &rank, &wq, -1, &iwq, &info);
  std::vector<T> work(size_t(std::max<T>(wq, 1)));
  std::vector<int> iwork(size_t(std::max(iwq, 1)));
  for (int64_t i = 0; i < b; ++i) {
    to_col(A + i * m * n, m, n, a.data(), m);
    std::fill(x.begin(), x.end(), T(0));
    to_col(B + i * m * k, m, k, x.data(), ldb);
    Lapack::gelsd(mi, ni, ki, a.data(), x.data(), ldbi, s.data(), rcond, &rank, work.data(),
                  int(work.size()), iwork.data(), &info);
    if (info != 0) fail_lapack<T>(op, "gelsd", info);
    from_col(x.data(), ldb, n, k, X + i * n * k);
  }
}

using Fn = void (*)(const KernelContext&, std::span<const Tensor>, std::span<Tensor>);

void add(const char* op, Fn f32, Fn f64) {
  KernelRegistry::global().add(
      op, DeviceKind::cpu,
      [f32, f64](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        (in[0].dtype() == DType::f64 ? f64 : f32)(ctx, in, out);
      });
}

}  // namespace

void register_cpu_kernels() {
  add("linalg.solve", solve_k<float>, solve_k<double>);
  add("linalg.inv", inv_k<float>, inv_k<double>);
  add("linalg.det", det_k<float>, det_k<double>);
  add("linalg.slogdet", slogdet_k<float>, slogdet_k<double>);
  add("linalg.cholesky", cholesky_k<float>, cholesky_k<double>);
  add("linalg.qr", qr_k<float>, qr_k<double>);
  add("linalg.eigh", eigh_k<float>, eigh_k<double>);
  add("linalg.svd", svd_k<float>, svd_k<double>);
  add("linalg.triangular_solve", trisolve_k<float>, trisolve_k<double>);
  add("linalg.lstsq", lstsq_k<float>, lstsq_k<double>);
}

}  // namespace rlx::linalg
