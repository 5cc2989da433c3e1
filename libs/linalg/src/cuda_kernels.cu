// CUDA kernels for linalg.*: cuSOLVER (getrf / getrs, potrf, geqrf / orgqr, syevd, gesvdj)
// and cuBLAS (trsm, gemm), the CPU kernels' routines on the device. As on the CPU, each
// matrix of the batch is copied to a column-major workspace (one small kernel for the whole
// batch), factored or solved there by a loop over the batch, and copied back row-major.
// Factorisations report through devInfo: a singular or non-SPD matrix is read back after
// the batch (one sync) and becomes the CPU's ValueError, with the same words.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::linalg {

namespace {

// ---- errors and handles -------------------------------------------------------------------

[[noreturn]] void throw_device(const char* lib, const char* call, const std::string& got,
                               bool oom) {
  std::string msg = str_cat("[", lib, "] expected ", call, " to succeed, got ", got);
  if (oom) throw OutOfMemory(msg);
  throw DeviceError(msg);
}
void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw_device("cuda", call, str_cat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)),
                 e == cudaErrorMemoryAllocation);
}
void check(cusolverStatus_t s, const char* call) {
  if (s != CUSOLVER_STATUS_SUCCESS)
    throw_device("cusolver", call, str_cat("status ", int(s)), s == CUSOLVER_STATUS_ALLOC_FAILED);
}
void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw_device("cublas", call, str_cat(cublasGetStatusName(s), ": ", cublasGetStatusString(s)),
                 s == CUBLAS_STATUS_ALLOC_FAILED);
}
#define RLX_LA(call) check((call), #call)
#define RLX_LA_LAUNCHED(name) check(cudaGetLastError(), name)

// The device's cuSOLVER and cuBLAS handles (made once, kept for the process), bound to the
// kernel's stream; the lock serialises the calls that share them.
struct Handles {
  cusolverDnHandle_t solver;
  cublasHandle_t blas;
  std::unique_lock<std::mutex> lock;
};
Handles handles(const KernelContext& ctx) {
  struct State {
    std::once_flag once;
    std::mutex mu;
    cusolverDnHandle_t solver = nullptr;
    cublasHandle_t blas = nullptr;
  };
  static std::array<State, 64> states;
  const int d = ctx.device.index;
  if (d < 0 || d >= 64) fail<ValueError>(ctx.op.name, "expected a CUDA device index < 64, got ", d);
  State& s = states[size_t(d)];
  std::call_once(s.once, [&] {
    RLX_LA(cusolverDnCreate(&s.solver));
    RLX_LA(cublasCreate(&s.blas));
  });
  Handles h{s.solver, s.blas, std::unique_lock<std::mutex>(s.mu)};
  auto stream = static_cast<cudaStream_t>(ctx.stream);
  RLX_LA(cusolverDnSetStream(h.solver, stream));
  RLX_LA(cublasSetStream(h.blas, stream));
  return h;
}

cudaStream_t stream_of(const KernelContext& ctx) { return static_cast<cudaStream_t>(ctx.stream); }

// Device scratch from rlx's pool (stream-ordered; freed when the tensor goes).
Tensor scratch(DType t, int64_t n, Device d) {
  return Tensor::empty(t, {std::max<int64_t>(n, 1)}, d);
}

int64_t dim(const Tensor& t, int64_t from_end) { return t.shape()[size_t(t.rank() - from_end)]; }
int64_t batch(const Tensor& t) {
  int64_t b = 1;
  for (int64_t i = 0; i + 2 < t.rank(); ++i) b *= t.shape()[size_t(i)];
  return b;
}
int to_int(int64_t v, const std::string& op) {
  if (v > std::numeric_limits<int>::max())
    fail<ValueError>(op, "expected matrix sizes that fit cuSOLVER's int, got ", v);
  return int(v);
}

// The info of every matrix of the batch, on the host (waits for the stream).
std::vector<int> infos(const Tensor& info, int64_t b, cudaStream_t s) {
  std::vector<int> h(size_t(std::max<int64_t>(b, 1)), 0);
  RLX_LA(
      cudaMemcpyAsync(h.data(), info.data(), size_t(b) * sizeof(int), cudaMemcpyDeviceToHost, s));
  RLX_LA(cudaStreamSynchronize(s));
  return h;
}

[[noreturn]] void fail_solver(const std::string& op, const char* routine, int info) {
  fail<Error>(op, routine, " failed: expected info = 0, got ", info);
}

// ---- copies ------------------------------------------------------------------------------

enum Keep : int { kAll = 0, kUpper = 1, kLower = 2 };  // the rest written as 0

// dst[b, i, j] = src[b, i, j] for i < rows, j < cols, through strides (elements): the
// row-major <-> column-major copies, the triangles of R and L.
struct Strides {
  int64_t batch, row, col;
};
template <class T>
__global__ void copy2d_kernel(const T* src, Strides s, T* dst, Strides d, int64_t nb, int64_t rows,
                              int64_t cols, int keep) {
  const int64_t total = nb * rows * cols;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % cols, i = (e / cols) % rows, b = e / (rows * cols);
    const bool zero = (keep == kUpper && j < i) || (keep == kLower && j > i);
    dst[b * d.batch + i * d.row + j * d.col] =
        zero ? T(0) : src[b * s.batch + i * s.row + j * s.col];
  }
}
template <class T>
void copy2d(const T* src, Strides s, T* dst, Strides d, int64_t nb, int64_t rows, int64_t cols,
            cudaStream_t st, int keep = kAll) {
  const int64_t total = nb * rows * cols;
  if (total == 0) return;
  const int grid = int(std::min<int64_t>((total + 255) / 256, 4096));
  copy2d_kernel<<<grid, 256, 0, st>>>(src, s, dst, d, nb, rows, cols, keep);
  RLX_LA_LAUNCHED("linalg copy");
}
// Row-major [rows, cols] matrices -> column-major with leading dimension ld, and back.
template <class T>
void to_col(const T* src, int64_t nb, int64_t rows, int64_t cols, T* dst, int64_t ld,
            cudaStream_t s) {
  copy2d(src, {rows * cols, cols, 1}, dst, {ld * cols, 1, ld}, nb, rows, cols, s);
}
template <class T>
void from_col(const T* src, int64_t ld, int64_t nb, int64_t rows, int64_t cols, T* dst,
              cudaStream_t s, int keep = kAll) {
  copy2d(src, {ld * cols, 1, ld}, dst, {rows * cols, cols, 1}, nb, rows, cols, s, keep);
}

template <class T>
__global__ void eye_kernel(T* a, int64_t nb, int64_t n) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < nb * n * n;
       e += int64_t(gridDim.x) * blockDim.x)
    a[e] = (e % (n * n)) / n == e % n ? T(1) : T(0);
}

// ---- the cuSOLVER / cuBLAS routines by type -----------------------------------------------

#define RLX_BY_TYPE(T, sname, dname)      \
  if constexpr (std::is_same_v<T, float>) \
    return sname;                         \
  else                                    \
    return dname

template <class T>
struct Cu {
  static cusolverStatus_t getrf_size(cusolverDnHandle_t h, int n, T* a, int* lw) {
    RLX_BY_TYPE(T, cusolverDnSgetrf_bufferSize(h, n, n, (float*)a, n, lw),
                cusolverDnDgetrf_bufferSize(h, n, n, (double*)a, n, lw));
  }
  static cusolverStatus_t getrf(cusolverDnHandle_t h, int n, T* a, T* w, int* piv, int* info) {
    RLX_BY_TYPE(T, cusolverDnSgetrf(h, n, n, (float*)a, n, (float*)w, piv, info),
                cusolverDnDgetrf(h, n, n, (double*)a, n, (double*)w, piv, info));
  }
  static cusolverStatus_t getrs(cusolverDnHandle_t h, int n, int k, const T* a, const int* piv,
                                T* b, int* info) {
    RLX_BY_TYPE(
        T, cusolverDnSgetrs(h, CUBLAS_OP_N, n, k, (const float*)a, n, piv, (float*)b, n, info),
        cusolverDnDgetrs(h, CUBLAS_OP_N, n, k, (const double*)a, n, piv, (double*)b, n, info));
  }
  static cusolverStatus_t potrf_size(cusolverDnHandle_t h, int n, T* a, int* lw) {
    RLX_BY_TYPE(T, cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, (float*)a, n, lw),
                cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, (double*)a, n, lw));
  }
  static cusolverStatus_t potrf(cusolverDnHandle_t h, int n, T* a, T* w, int lw, int* info) {
    RLX_BY_TYPE(
        T, cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, (float*)a, n, (float*)w, lw, info),
        cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, n, (double*)a, n, (double*)w, lw, info));
  }
  static cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, T* a, int* lw) {
    RLX_BY_TYPE(T, cusolverDnSgeqrf_bufferSize(h, m, n, (float*)a, m, lw),
                cusolverDnDgeqrf_bufferSize(h, m, n, (double*)a, m, lw));
  }
  static cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, T* a, T* tau, T* w, int lw,
                                int* info) {
    RLX_BY_TYPE(T, cusolverDnSgeqrf(h, m, n, (float*)a, m, (float*)tau, (float*)w, lw, info),
                cusolverDnDgeqrf(h, m, n, (double*)a, m, (double*)tau, (double*)w, lw, info));
  }
  static cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int k, T* a, T* tau, int* lw) {
    RLX_BY_TYPE(T, cusolverDnSorgqr_bufferSize(h, m, k, k, (float*)a, m, (float*)tau, lw),
                cusolverDnDorgqr_bufferSize(h, m, k, k, (double*)a, m, (double*)tau, lw));
  }
  static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int k, T* a, T* tau, T* w, int lw,
                                int* info) {
    RLX_BY_TYPE(T, cusolverDnSorgqr(h, m, k, k, (float*)a, m, (float*)tau, (float*)w, lw, info),
                cusolverDnDorgqr(h, m, k, k, (double*)a, m, (double*)tau, (double*)w, lw, info));
  }
  static cusolverStatus_t syevd_size(cusolverDnHandle_t h, int n, T* a, T* w, int* lw) {
    RLX_BY_TYPE(T,
                cusolverDnSsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                            (float*)a, n, (float*)w, lw),
                cusolverDnDsyevd_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                            (double*)a, n, (double*)w, lw));
  }
  static cusolverStatus_t syevd(cusolverDnHandle_t h, int n, T* a, T* ev, T* w, int lw, int* info) {
    RLX_BY_TYPE(T,
                cusolverDnSsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, (float*)a,
                                 n, (float*)ev, (float*)w, lw, info),
                cusolverDnDsyevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, (double*)a,
                                 n, (double*)ev, (double*)w, lw, info));
  }
  // Economy SVD of a column-major r x c matrix (r >= c): U r x c, V c x c.
  static cusolverStatus_t gesvdj_size(cusolverDnHandle_t h, int r, int c, T* a, T* s, T* u, T* v,
                                      int* lw, gesvdjInfo_t p) {
    RLX_BY_TYPE(T,
                cusolverDnSgesvdj_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, 1, r, c, (float*)a, r,
                                             (float*)s, (float*)u, r, (float*)v, c, lw, p),
                cusolverDnDgesvdj_bufferSize(h, CUSOLVER_EIG_MODE_VECTOR, 1, r, c, (double*)a, r,
                                             (double*)s, (double*)u, r, (double*)v, c, lw, p));
  }
  static cusolverStatus_t gesvdj(cusolverDnHandle_t h, int r, int c, T* a, T* s, T* u, T* v, T* w,
                                 int lw, int* info, gesvdjInfo_t p) {
    RLX_BY_TYPE(T,
                cusolverDnSgesvdj(h, CUSOLVER_EIG_MODE_VECTOR, 1, r, c, (float*)a, r, (float*)s,
                                  (float*)u, r, (float*)v, c, (float*)w, lw, info, p),
                cusolverDnDgesvdj(h, CUSOLVER_EIG_MODE_VECTOR, 1, r, c, (double*)a, r, (double*)s,
                                  (double*)u, r, (double*)v, c, (double*)w, lw, info, p));
  }
  static cublasStatus_t trsm(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t op,
                             cublasDiagType_t diag, int m, int n, const T* a, int lda, T* b,
                             int ldb) {
    const T one = 1;
    RLX_BY_TYPE(T,
                cublasStrsm(h, CUBLAS_SIDE_RIGHT, uplo, op, diag, m, n, (const float*)&one,
                            (const float*)a, lda, (float*)b, ldb),
                cublasDtrsm(h, CUBLAS_SIDE_RIGHT, uplo, op, diag, m, n, (const double*)&one,
                            (const double*)a, lda, (double*)b, ldb));
  }
  // C (m x n, ldc m) = op(A) B, column-major.
  static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t opb, int m, int n, int k,
                             const T* a, int lda, const T* b, int ldb, T* c) {
    const T one = 1, zero = 0;
    RLX_BY_TYPE(T,
                cublasSgemm(h, CUBLAS_OP_N, opb, m, n, k, (const float*)&one, (const float*)a, lda,
                            (const float*)b, ldb, (const float*)&zero, (float*)c, m),
                cublasDgemm(h, CUBLAS_OP_N, opb, m, n, k, (const double*)&one, (const double*)a,
                            lda, (const double*)b, ldb, (const double*)&zero, (double*)c, m));
  }
};

// ---- LU: solve, inv, det, slogdet ----------------------------------------------------------

// The column-major LU of every matrix of A [..., n, n]: lu [b, n, n], piv [b, n], info [b].
struct Lu {
  Tensor lu, piv, info;
};
template <class T>
Lu lu_batch(const KernelContext& ctx, const Tensor& A, Handles& h) {
  const std::string& op = ctx.op.name;
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(A), n = dim(A, 1);
  const int ni = to_int(n, op);
  Lu r{scratch(A.dtype(), b * n * n, ctx.device), scratch(DType::i32, b * n, ctx.device),
       scratch(DType::i32, b, ctx.device)};
  RLX_LA(cudaMemsetAsync(r.info.data(), 0, size_t(b) * sizeof(int), s));
  if (n == 0) return r;
  T* lu = r.lu.data_as<T>();
  to_col(A.data_as<T>(), b, n, n, lu, n, s);
  int lw = 0;
  RLX_LA(Cu<T>::getrf_size(h.solver, ni, lu, &lw));
  Tensor work = scratch(A.dtype(), lw, ctx.device);
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(Cu<T>::getrf(h.solver, ni, lu + i * n * n, work.data_as<T>(),
                        r.piv.data_as<int>() + i * n, r.info.data_as<int>() + i));
  return r;
}

void fail_singular(const std::string& op, const std::vector<int>& info) {
  for (size_t i = 0; i < info.size(); ++i) {
    if (info[i] > 0)
      fail<ValueError>(op, "expected a nonsingular matrix A, got a singular one (U[", info[i] - 1,
                       ",", info[i] - 1, "] = 0 in matrix ", i, " of the batch)");
    if (info[i] < 0) fail_solver(op, "getrf", info[i]);
  }
}

// X = A^-1 B with B [n, k] (or the identity when B is null: the inverse).
template <class T>
void lu_solve(const KernelContext& ctx, const Tensor& A, const Tensor* B, Tensor& X) {
  const std::string& op = ctx.op.name;
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(A), n = dim(A, 1), k = B ? dim(*B, 1) : n;
  if (b * n * k == 0) return;
  Handles h = handles(ctx);
  Lu f = lu_batch<T>(ctx, A, h);
  Tensor x = scratch(A.dtype(), b * n * k, ctx.device), info2 = scratch(DType::i32, b, ctx.device);
  T* xc = x.data_as<T>();
  if (B)
    to_col(B->data_as<T>(), b, n, k, xc, n, s);
  else {
    eye_kernel<<<int(std::min<int64_t>((b * n * n + 255) / 256, 4096)), 256, 0, s>>>(xc, b, n);
    RLX_LA_LAUNCHED("linalg eye");
  }
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(Cu<T>::getrs(h.solver, int(n), to_int(k, op), f.lu.data_as<T>() + i * n * n,
                        f.piv.data_as<int>() + i * n, xc + i * n * k, info2.data_as<int>() + i));
  from_col(xc, n, b, n, k, X.data_as<T>(), s);
  fail_singular(op, infos(f.info, b, s));
  for (int i2 : infos(info2, b, s))
    if (i2 != 0) fail_solver(op, "getrs", i2);
}

template <class T>
void solve_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  lu_solve<T>(ctx, in[0], &in[1], out[0]);
}
template <class T>
void inv_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  lu_solve<T>(ctx, in[0], nullptr, out[0]);
}

// det, or sign and log|det|, from the LU of each matrix (one thread a matrix).
template <class T>
__global__ void lu_det_kernel(const T* lu, const int* piv, const int* info, int64_t nb, int64_t n,
                              T* det, T* sign, T* logabs) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < nb;
       b += int64_t(gridDim.x) * blockDim.x) {
    const T* a = lu + b * n * n;
    const int* p = piv + b * n;
    if (info[b] > 0) {  // exactly singular
      if (det) det[b] = 0;
      if (sign) sign[b] = 0, logabs[b] = T(-INFINITY);
      continue;
    }
    T d = 1, sg = 1, la = 0;
    for (int64_t j = 0; j < n; ++j) {
      T u = a[j * n + j];
      d *= u;
      if (u < 0) sg = -sg;
      if (p[j] != int(j + 1)) d = -d, sg = -sg;
      la += ::log(::fabs(u));
    }
    if (det) det[b] = d;
    if (sign) sign[b] = sg, logabs[b] = la;
  }
}

template <class T>
void det_like(const KernelContext& ctx, std::span<const Tensor> in, T* det, T* sign, T* logabs) {
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(in[0]), n = dim(in[0], 1);
  if (b == 0) return;
  Handles h = handles(ctx);
  Lu f = lu_batch<T>(ctx, in[0], h);
  lu_det_kernel<<<int(std::min<int64_t>((b + 127) / 128, 4096)), 128, 0, s>>>(
      f.lu.data_as<T>(), f.piv.data_as<int>(), f.info.data_as<int>(), b, n, det, sign, logabs);
  RLX_LA_LAUNCHED("linalg det");
  for (int i : infos(f.info, b, s))
    if (i < 0) fail_solver(ctx.op.name, "getrf", i);
}
template <class T>
void det_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  det_like<T>(ctx, in, out[0].data_as<T>(), nullptr, nullptr);
}
template <class T>
void slogdet_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  det_like<T>(ctx, in, nullptr, out[0].data_as<T>(), out[1].data_as<T>());
}

// ---- cholesky, qr, eigh ----------------------------------------------------------------

template <class T>
void cholesky_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(in[0]), n = dim(in[0], 1);
  if (b * n == 0) return;
  const int ni = to_int(n, op);
  Handles h = handles(ctx);
  Tensor a = scratch(in[0].dtype(), b * n * n, ctx.device),
         info = scratch(DType::i32, b, ctx.device);
  RLX_LA(cudaMemsetAsync(info.data(), 0, size_t(b) * sizeof(int), s));
  T* ac = a.data_as<T>();
  to_col(in[0].data_as<T>(), b, n, n, ac, n, s);
  int lw = 0;
  RLX_LA(Cu<T>::potrf_size(h.solver, ni, ac, &lw));
  Tensor work = scratch(in[0].dtype(), lw, ctx.device);
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(
        Cu<T>::potrf(h.solver, ni, ac + i * n * n, work.data_as<T>(), lw, info.data_as<int>() + i));
  from_col(ac, n, b, n, n, out[0].data_as<T>(), s, kLower);
  auto inf = infos(info, b, s);
  for (size_t i = 0; i < inf.size(); ++i) {
    if (inf[i] > 0)
      fail<ValueError>(op, "expected a symmetric positive definite matrix, got one whose leading ",
                       inf[i], "x", inf[i], " minor is not positive definite (matrix ", i,
                       " of the batch)");
    if (inf[i] < 0) fail_solver(op, "potrf", inf[i]);
  }
}

template <class T>
void qr_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(in[0]), m = dim(in[0], 2), n = dim(in[0], 1), k = std::min(m, n);
  if (b * k == 0) return;
  const int mi = to_int(m, op), ni = to_int(n, op), ki = int(k);
  Handles h = handles(ctx);
  Tensor a = scratch(in[0].dtype(), b * m * n, ctx.device),
         tau = scratch(in[0].dtype(), b * k, ctx.device), info = scratch(DType::i32, b, ctx.device);
  RLX_LA(cudaMemsetAsync(info.data(), 0, size_t(b) * sizeof(int), s));
  T* ac = a.data_as<T>();
  to_col(in[0].data_as<T>(), b, m, n, ac, m, s);
  int lw1 = 0, lw2 = 0;
  RLX_LA(Cu<T>::geqrf_size(h.solver, mi, ni, ac, &lw1));
  RLX_LA(Cu<T>::orgqr_size(h.solver, mi, ki, ac, tau.data_as<T>(), &lw2));
  const int lw = std::max(lw1, lw2);
  Tensor work = scratch(in[0].dtype(), lw, ctx.device);
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(Cu<T>::geqrf(h.solver, mi, ni, ac + i * m * n, tau.data_as<T>() + i * k,
                        work.data_as<T>(), lw, info.data_as<int>() + i));
  // R [k, n]: the upper triangle of the first k rows, before orgqr overwrites them.
  copy2d(ac, {m * n, 1, m}, out[1].data_as<T>(), {k * n, n, 1}, b, k, n, s, kUpper);
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(Cu<T>::orgqr(h.solver, mi, ki, ac + i * m * n, tau.data_as<T>() + i * k,
                        work.data_as<T>(), lw, info.data_as<int>() + i));
  copy2d(ac, {m * n, 1, m}, out[0].data_as<T>(), {m * k, k, 1}, b, m, k, s);  // Q: k columns
  for (int i : infos(info, b, s))
    if (i != 0) fail_solver(op, "geqrf / orgqr", i);
}

template <class T>
void eigh_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(in[0]), n = dim(in[0], 1);
  if (b * n == 0) return;
  const int ni = to_int(n, op);
  Handles h = handles(ctx);
  Tensor a = scratch(in[0].dtype(), b * n * n, ctx.device),
         info = scratch(DType::i32, b, ctx.device);
  RLX_LA(cudaMemsetAsync(info.data(), 0, size_t(b) * sizeof(int), s));
  T* ac = a.data_as<T>();
  T* w = out[0].data_as<T>();
  to_col(in[0].data_as<T>(), b, n, n, ac, n, s);
  int lw = 0;
  RLX_LA(Cu<T>::syevd_size(h.solver, ni, ac, w, &lw));
  Tensor work = scratch(in[0].dtype(), lw, ctx.device);
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(Cu<T>::syevd(h.solver, ni, ac + i * n * n, w + i * n, work.data_as<T>(), lw,
                        info.data_as<int>() + i));
  from_col(ac, n, b, n, n, out[1].data_as<T>(), s);
  for (int i : infos(info, b, s))
    if (i != 0) fail_solver(op, "syevd", i);
}

// ---- svd and lstsq (gesvdj) ----------------------------------------------------------------

// The economy SVD of every matrix of A [..., m, n] (k = min(m, n)): U [b] column-major m x k,
// S [b, k] descending, V [b] column-major n x k. gesvdj is given r x c with r >= c: A itself
// (column-major) when m >= n, else A^T, which is the row-major buffer as it stands; then
// A = V' S U'^T, so U and V swap.
struct Svd {
  Tensor u, s, v;
};
template <class T>
Svd svd_batch(const KernelContext& ctx, const Tensor& A, Handles& h) {
  const std::string& op = ctx.op.name;
  cudaStream_t st = stream_of(ctx);
  const int64_t b = batch(A), m = dim(A, 2), n = dim(A, 1), k = std::min(m, n);
  const bool tall = m >= n;
  const int64_t r = tall ? m : n, c = tall ? n : m;  // gesvdj's r x c, r >= c = k
  const int ri = to_int(r, op), ci = to_int(c, op);
  const DType dt = A.dtype();
  Tensor a = scratch(dt, b * m * n, ctx.device), info = scratch(DType::i32, b, ctx.device);
  Svd o{scratch(dt, b * m * k, ctx.device), scratch(dt, b * k, ctx.device),
        scratch(dt, b * n * k, ctx.device)};
  RLX_LA(cudaMemsetAsync(info.data(), 0, size_t(b) * sizeof(int), st));
  T* ac = a.data_as<T>();
  if (tall)
    to_col(A.data_as<T>(), b, m, n, ac, m, st);
  else
    RLX_LA(
        cudaMemcpyAsync(ac, A.data(), size_t(b * m * n) * sizeof(T), cudaMemcpyDeviceToDevice, st));
  // gesvdj's U is r x k, its V c x k: U' / V' of A^T when wide.
  T* gu = (tall ? o.u : o.v).data_as<T>();
  T* gv = (tall ? o.v : o.u).data_as<T>();
  gesvdjInfo_t params = nullptr;
  RLX_LA(cusolverDnCreateGesvdjInfo(&params));
  struct Guard {
    gesvdjInfo_t p;
    ~Guard() { cusolverDnDestroyGesvdjInfo(p); }
  } guard{params};
  RLX_LA(cusolverDnXgesvdjSetSortEig(params, 1));
  int lw = 0;
  RLX_LA(Cu<T>::gesvdj_size(h.solver, ri, ci, ac, o.s.data_as<T>(), gu, gv, &lw, params));
  Tensor work = scratch(dt, lw, ctx.device);
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(Cu<T>::gesvdj(h.solver, ri, ci, ac + i * m * n, o.s.data_as<T>() + i * k, gu + i * r * k,
                         gv + i * c * k, work.data_as<T>(), lw, info.data_as<int>() + i, params));
  for (int i : infos(info, b, st))
    if (i != 0) fail_solver(op, "gesvdj", i);
  return o;
}

template <class T>
void svd_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(in[0]), m = dim(in[0], 2), n = dim(in[0], 1), k = std::min(m, n);
  if (b * k == 0) return;
  Handles h = handles(ctx);
  Svd f = svd_batch<T>(ctx, in[0], h);
  from_col(f.u.data_as<T>(), m, b, m, k, out[0].data_as<T>(), s);
  RLX_LA(cudaMemcpyAsync(out[1].data(), f.s.data(), size_t(b * k) * sizeof(T),
                         cudaMemcpyDeviceToDevice, s));
  // Vt [k, n] row-major is V (n x k) column-major, element for element.
  RLX_LA(cudaMemcpyAsync(out[2].data(), f.v.data(), size_t(b * n * k) * sizeof(T),
                         cudaMemcpyDeviceToDevice, s));
}

// Column i of C^T (kb x k, column-major) times 1 / s_i, or 0 where s_i <= rcond * s_max.
template <class T>
__global__ void pinv_scale_kernel(T* ct, const T* s, int64_t kb, int64_t k, T rcond) {
  const T thr = rcond * s[0];
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < kb * k;
       e += int64_t(gridDim.x) * blockDim.x) {
    const T si = s[e / kb];
    ct[e] = si > thr ? ct[e] / si : T(0);
  }
}

// X = V diag(1/s) U^T B, in row-major terms: X^T = (B^T U diag(1/s)) V^T, where B^T and
// X^T are the row-major buffers read column-major: no copies.
template <class T>
void lstsq_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(in[0]), m = dim(in[0], 2), n = dim(in[0], 1), kb = dim(in[1], 1);
  const int64_t k = std::min(m, n);
  T* X = out[0].data_as<T>();
  if (b * n * kb == 0) return;
  if (m == 0) {
    RLX_LA(cudaMemsetAsync(X, 0, out[0].nbytes(), s));
    return;
  }
  Handles h = handles(ctx);
  Svd f = svd_batch<T>(ctx, in[0], h);
  double rc = ctx.attrs.get_float("rcond");
  const T rcond = T(rc < 0 ? std::numeric_limits<T>::epsilon() : rc);
  Tensor ct = scratch(in[0].dtype(), kb * k, ctx.device);
  const int kbi = to_int(kb, op), ki = to_int(k, op), mi = to_int(m, op), ni = to_int(n, op);
  for (int64_t i = 0; i < b; ++i) {
    const T* Bt = in[1].data_as<T>() + i * m * kb;  // kb x m, ld kb
    RLX_LA(Cu<T>::gemm(h.blas, CUBLAS_OP_N, kbi, ki, mi, Bt, kbi, f.u.data_as<T>() + i * m * k, mi,
                       ct.data_as<T>()));
    pinv_scale_kernel<<<int(std::min<int64_t>((kb * k + 255) / 256, 4096)), 256, 0, s>>>(
        ct.data_as<T>(), f.s.data_as<T>() + i * k, kb, k, rcond);
    RLX_LA_LAUNCHED("linalg lstsq scale");
    RLX_LA(Cu<T>::gemm(h.blas, CUBLAS_OP_T, kbi, ni, ki, ct.data_as<T>(), kbi,
                       f.v.data_as<T>() + i * n * k, ni, X + i * n * kb));
  }
}

// ---- triangular_solve (trsm) ------------------------------------------------------------

// info[b] = i + 1 for the first zero on matrix b's diagonal, else 0.
template <class T>
__global__ void zero_diag_kernel(const T* a, int64_t nb, int64_t n, int* info) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < nb;
       b += int64_t(gridDim.x) * blockDim.x) {
    int first = 0;
    for (int64_t i = n - 1; i >= 0; --i)
      if (a[b * n * n + i * n + i] == T(0)) first = int(i + 1);
    info[b] = first;
  }
}

// op(A) X = B for row-major A, B, X: read column-major, A is S = A^T and B, X are B^T, X^T,
// so X^T op(A)^T = B^T is a right-side trsm on S: op(A)^T is S (no transpose) or S^T, and
// A's lower triangle is S's upper.
template <class T>
void trisolve_k(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  cudaStream_t s = stream_of(ctx);
  const int64_t b = batch(in[0]), n = dim(in[0], 1), k = dim(in[1], 1);
  if (b * n * k == 0) return;
  const int ni = to_int(n, op), ki = to_int(k, op);
  const bool lower = ctx.attrs.get_bool("lower"), trans = ctx.attrs.get_bool("transpose");
  const bool unit = ctx.attrs.get_bool("unit_diagonal");
  Handles h = handles(ctx);
  T* X = out[0].data_as<T>();
  const T* A = in[0].data_as<T>();
  RLX_LA(
      cudaMemcpyAsync(X, in[1].data(), size_t(b * n * k) * sizeof(T), cudaMemcpyDeviceToDevice, s));
  for (int64_t i = 0; i < b; ++i)
    RLX_LA(Cu<T>::trsm(h.blas, lower ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER,
                       trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                       unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT, ki, ni, A + i * n * n, ni,
                       X + i * n * k, ki));
  if (unit) return;
  Tensor info = scratch(DType::i32, b, ctx.device);
  zero_diag_kernel<<<int(std::min<int64_t>((b + 127) / 128, 4096)), 128, 0, s>>>(
      A, b, n, info.data_as<int>());
  RLX_LA_LAUNCHED("linalg diagonal check");
  auto inf = infos(info, b, s);
  for (size_t i = 0; i < inf.size(); ++i)
    if (inf[i] > 0)
      fail<ValueError>(op, "expected a nonsingular triangular matrix A, got A[", inf[i] - 1, ",",
                       inf[i] - 1, "] = 0 (matrix ", i, " of the batch)");
}

using Fn = void (*)(const KernelContext&, std::span<const Tensor>, std::span<Tensor>);

void add(const char* op, Fn f32, Fn f64) {
  KernelRegistry::global().add(
      op, DeviceKind::cuda,
      [f32, f64](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        (in[0].dtype() == DType::f64 ? f64 : f32)(ctx, in, out);
      });
}

}  // namespace

void register_cuda_kernels() {
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
