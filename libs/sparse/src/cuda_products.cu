// CUDA kernels for the products. spmv is rlx's own kernel, which checks the pattern as it
// reads it (rows.cuh) and reports a bad one at the end of the run: one pass over A and no
// wait for the device, so a CUDA Graph can hold it. spmv_t, spmm and spmm_t go through
// cuSPARSE's generic API (SpMV / SpMM on CSR; A^T is the library's transpose operation,
// not a converted copy), after a device check of the pattern that waits for its verdict:
// a library reading a row pointer or column out of range would fault the context, and the
// CPU turns the same input into a ValueError.
#include "cuda_common.h"
#include "rlx/cuda.h"
#include "rows.cuh"

namespace rlx::sparse::cuda {

void register_iterative_cuda_kernels();  // cuda_iterative.cu

namespace {

template <class I>
__global__ void pattern_kernel(const I* rp, const I* col, int64_t rows, int64_t nnz, int64_t cols,
                               int* bad) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  bool b = tid == 0 && (rp[0] != 0 || rp[rows] != I(nnz));
  for (int64_t i = tid; i < rows; i += stride) b |= rp[i + 1] < rp[i];
  for (int64_t e = tid; e < nnz; e += stride) b |= col[e] < 0 || int64_t(col[e]) >= cols;
  if (b) *bad = 1;
}

// y = A x, the pattern checked as it is read (Guarded); block 0 also checks its ends.
template <int TPR, class T, class I>
__global__ void spmv_kernel(Csr<T, I> a, const T* x, T* y, Guarded g) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && (a.rp[0] != 0 || int64_t(a.rp[a.n]) != g.nnz))
    g.report(a.rp[0], 0);
  rows_of<TPR>(
      a, At<T>{x}, [&](int64_t i, T v) { y[i] = v; }, g);
}

}  // namespace

void check_pattern(const std::string& op, const Tensor& col_idx, const Tensor& row_ptr,
                   int64_t cols, cudaStream_t s) {
  const int64_t rows = row_ptr.numel() - 1, nnz = col_idx.numel();
  Tensor flag = scratch(DType::i32, 1, row_ptr.device());
  int* bad = flag.data_as<int>();
  RLX_SP_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), s));
  const int64_t work = std::max(rows, nnz);
  const int grid = int(std::clamp<int64_t>((work + 255) / 256, 1, 8 * sm_count(row_ptr.device())));
  if (col_idx.dtype() == DType::i64)
    pattern_kernel<<<grid, 256, 0, s>>>(row_ptr.data_as<int64_t>(), col_idx.data_as<int64_t>(),
                                        rows, nnz, cols, bad);
  else
    pattern_kernel<<<grid, 256, 0, s>>>(row_ptr.data_as<int32_t>(), col_idx.data_as<int32_t>(),
                                        rows, nnz, cols, bad);
  RLX_SP_LAUNCHED("sparse pattern check");
  int host = 0;
  RLX_SP_CHECK(cudaMemcpyAsync(&host, bad, sizeof(int), cudaMemcpyDeviceToHost, s));
  RLX_SP_CHECK(cudaStreamSynchronize(s));
  if (host) throw_pattern_error(op, col_idx, row_ptr, cols);
}

namespace {

// cuSPARSE descriptors, destroyed with the scope.
struct SpMat {
  cusparseConstSpMatDescr_t d = nullptr;
  ~SpMat() {
    if (d) cusparseDestroySpMat(d);
  }
};
struct DnVec {
  cusparseConstDnVecDescr_t d = nullptr;
  ~DnVec() {
    if (d) cusparseDestroyDnVec(d);
  }
};
struct DnMat {
  cusparseConstDnMatDescr_t d = nullptr;
  ~DnMat() {
    if (d) cusparseDestroyDnMat(d);
  }
};
// Outputs: made writable (cuSPARSE may refuse to write through a const descriptor).
struct DnVecOut {
  cusparseDnVecDescr_t d = nullptr;
  ~DnVecOut() {
    if (d) cusparseDestroyDnVec(d);
  }
};
struct DnMatOut {
  cusparseDnMatDescr_t d = nullptr;
  ~DnMatOut() {
    if (d) cusparseDestroyDnMat(d);
  }
};

// A as a cuSPARSE CSR matrix (values, col_idx, row_ptr at in[0..2]).
template <class T, class I>
void make_csr(SpMat& a, std::span<const Tensor> in, int64_t cols) {
  const int64_t rows = in[2].numel() - 1, nnz = in[1].numel();
  RLX_SP_CHECK(cusparseCreateConstCsr(&a.d, rows, cols, nnz, in[2].data(), in[1].data(),
                                      in[0].data(), index_type<I>(), index_type<I>(),
                                      CUSPARSE_INDEX_BASE_ZERO, value_type<T>()));
}

// The leading (batch) elements of a [..., n, k] tensor, and its k.
int64_t batch_of(const Tensor& t) {
  int64_t b = 1;
  for (int64_t i = 0; i + 2 < t.rank(); ++i) b *= t.shape()[size_t(i)];
  return b;
}
int64_t k_of(const Tensor& t) { return t.rank() >= 2 ? t.shape().back() : 1; }

// y = A x with the pattern checked in the same pass; a bad one throws the CPU's ValueError
// when the run ends.
template <class T, class I>
void spmv_own(const KernelContext& ctx, std::span<const Tensor> in, Tensor& y) {
  const int64_t n = in[2].numel() - 1, nnz = in[1].numel(), cols = in[3].numel();
  const Csr<T, I> a{in[2].data_as<I>(), in[1].data_as<I>(), in[0].data_as<T>(), n};
  Guarded g{rlx::cuda::deferred_check(
                ctx, [op = ctx.op.name, c = in[1], r = in[2], cols](
                         int64_t, int64_t) { throw_pattern_error(op, c, r, cols); }),
            nnz, cols};
  // One lane a row up to 8 entries a row (the 5-point Poisson rows: 1 lane, two rows a
  // thread), more for longer rows.
  const int tpr = lanes_for(n, nnz, 8);
  // Asked once (one GPU architecture a process): spmv runs every step, and the occupancy
  // query is host work on its path.
  static const int per_sm =
      blocks_per_sm({(const void*)spmv_kernel<1, T, I>, (const void*)spmv_kernel<32, T, I>});
  const int grid = balanced_grid(row_blocks(n, tpr), per_sm * sm_count(ctx.device));
  cudaStream_t s = stream_of(ctx);
#define RLX_SPMV(L) spmv_kernel<L><<<grid, kBlock, 0, s>>>(a, in[3].data_as<T>(), y.data_as<T>(), g)
  RLX_LANES(tpr, RLX_SPMV);
#undef RLX_SPMV
  RLX_SP_LAUNCHED("sparse.spmv");
}

// y = op(A) x: x [cols] (transpose: [rows]).
template <class T, class I>
void spmv_k(bool transpose, const KernelContext& ctx, std::span<const Tensor> in,
            std::span<Tensor> out) {
  if (!transpose) return spmv_own<T, I>(ctx, in, out[0]);
  cudaStream_t s = stream_of(ctx);
  const int64_t rows = in[2].numel() - 1, nnz = in[1].numel();
  const int64_t cols = ctx.attrs.get_int("cols");
  check_pattern(ctx.op.name, in[1], in[2], cols, s);
  Tensor& y = out[0];
  if (y.numel() == 0) return;
  if (nnz == 0 || in[3].numel() == 0) {
    RLX_SP_CHECK(cudaMemsetAsync(y.data(), 0, y.nbytes(), s));
    return;
  }
  SpMat a;
  make_csr<T, I>(a, in, cols);
  DnVec x;
  DnVecOut yv;
  RLX_SP_CHECK(cusparseCreateConstDnVec(&x.d, in[3].numel(), in[3].data(), value_type<T>()));
  RLX_SP_CHECK(cusparseCreateDnVec(&yv.d, y.numel(), y.data(), value_type<T>()));
  const T alpha = 1, beta = 0;
  const auto opA = transpose ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseDnVecDescr_t yd = yv.d;
  Handle h = cusparse(ctx.device, s);
  size_t bytes = 0;
  RLX_SP_CHECK(cusparseSpMV_bufferSize(h.h, opA, &alpha, a.d, x.d, &beta, yd, value_type<T>(),
                                       CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
  Tensor buf = scratch(DType::u8, int64_t(bytes), ctx.device);
  RLX_SP_CHECK(cusparseSpMV(h.h, opA, &alpha, a.d, x.d, &beta, yd, value_type<T>(),
                            CUSPARSE_SPMV_ALG_DEFAULT, buf.data()));
}

// Y[b] = op(A) X[b]: X [..., cols, k] (transpose: [..., rows, k]), row-major.
template <class T, class I>
void spmm_k(bool transpose, const KernelContext& ctx, std::span<const Tensor> in,
            std::span<Tensor> out) {
  cudaStream_t s = stream_of(ctx);
  const Tensor& X = in[3];
  Tensor& Y = out[0];
  const int64_t rows = in[2].numel() - 1, nnz = in[1].numel(), k = k_of(X), nb = batch_of(X);
  const int64_t xr = X.rank() >= 2 ? X.shape()[size_t(X.rank() - 2)] : X.numel();
  const int64_t cols = transpose ? ctx.attrs.get_int("cols") : xr;
  check_pattern(ctx.op.name, in[1], in[2], cols, s);
  if (Y.numel() == 0) return;
  if (nnz == 0 || X.numel() == 0) {
    RLX_SP_CHECK(cudaMemsetAsync(Y.data(), 0, Y.nbytes(), s));
    return;
  }
  const int64_t yr = transpose ? cols : rows;
  SpMat a;
  make_csr<T, I>(a, in, cols);
  const auto opA = transpose ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
  const T alpha = 1, beta = 0;
  Handle h = cusparse(ctx.device, s);
  Tensor buf;
  // Batch elements whose rows do not keep 16-byte alignment go through aligned staging
  // copies (the pool's buffers are aligned; an element inside one need not be).
  const bool stage =
      nb > 1 && ((xr * k * int64_t(sizeof(T))) % 16 || (yr * k * int64_t(sizeof(T))) % 16);
  Tensor xs, ys;
  if (stage) {
    xs = scratch(X.dtype(), xr * k, ctx.device);
    ys = scratch(X.dtype(), yr * k, ctx.device);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const T* xb = X.data_as<T>() + b * xr * k;
    T* yb = Y.data_as<T>() + b * yr * k;
    if (stage) {
      RLX_SP_CHECK(
          cudaMemcpyAsync(xs.data(), xb, size_t(xr * k) * sizeof(T), cudaMemcpyDeviceToDevice, s));
      xb = xs.data_as<T>();
    }
    DnMat x;
    DnMatOut y;
    RLX_SP_CHECK(cusparseCreateConstDnMat(&x.d, xr, k, k, xb, value_type<T>(), CUSPARSE_ORDER_ROW));
    RLX_SP_CHECK(cusparseCreateDnMat(&y.d, yr, k, k, stage ? ys.data() : yb, value_type<T>(),
                                     CUSPARSE_ORDER_ROW));
    cusparseDnMatDescr_t yd = y.d;
    if (b == 0) {  // one workspace serves every batch element (same sizes)
      size_t bytes = 0;
      RLX_SP_CHECK(cusparseSpMM_bufferSize(h.h, opA, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a.d,
                                           x.d, &beta, yd, value_type<T>(),
                                           CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
      buf = scratch(DType::u8, int64_t(bytes), ctx.device);
    }
    RLX_SP_CHECK(cusparseSpMM(h.h, opA, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a.d, x.d, &beta,
                              yd, value_type<T>(), CUSPARSE_SPMM_ALG_DEFAULT, buf.data()));
    if (stage)
      RLX_SP_CHECK(
          cudaMemcpyAsync(yb, ys.data(), size_t(yr * k) * sizeof(T), cudaMemcpyDeviceToDevice, s));
  }
}

template <bool Matrix, bool Transpose>
void add(const char* op) {
  KernelRegistry::global().add(
      op, DeviceKind::cuda,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        dispatch(in[0].dtype(), in[1].dtype(), [&](auto t, auto i) {
          using T = decltype(t);
          using I = decltype(i);
          if constexpr (Matrix)
            spmm_k<T, I>(Transpose, ctx, in, out);
          else
            spmv_k<T, I>(Transpose, ctx, in, out);
        });
      });
}

}  // namespace

}  // namespace rlx::sparse::cuda

namespace rlx::sparse {

void register_cuda_kernels() {
  cuda::add<false, false>("sparse.spmv");
  cuda::add<false, true>("sparse.spmv_t");
  cuda::add<true, false>("sparse.spmm");
  cuda::add<true, true>("sparse.spmm_t");
  cuda::register_iterative_cuda_kernels();
}

}  // namespace rlx::sparse
