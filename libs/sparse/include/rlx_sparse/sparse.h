// rlx::sparse — sparse matrices (CSR) and sparse solvers as a downstream op package. It is
// built exactly as a package outside rlx would be: it sees only the public headers
// (include/rlx) and SuiteSparse, and registers everything with one call.
//
// A CSR matrix with `rows` rows is three tensors: values [nnz] (f32 / f64), col_idx [nnz]
// and row_ptr [rows + 1] (both i32 or both i64). Row i holds values[row_ptr[i] ..
// row_ptr[i + 1]) at columns col_idx[...]; duplicate entries are summed. Every op takes
// them as its first three inputs (sddmm only the last two), then its dense operand:
//
//   sparse.spmv(v, c, r, x[cols])            -> A x [rows]
//   sparse.spmv_t(v, c, r, x[rows]) {cols}   -> A^T x [cols]
//   sparse.spmm(v, c, r, X[..., cols, k])    -> A X [..., rows, k]
//   sparse.spmm_t(v, c, r, X[..., rows, k]) {cols} -> A^T X [..., cols, k]
//   sparse.sddmm(c, r, U[..., rows, k], V[..., cols, k]) -> s [nnz],
//       s[e] = sum over ... and k of U[..., row(e), k] V[..., col(e), k] (U, V rank 1: the
//       outer product u v^T sampled on the pattern; the vjp of the products w.r.t. values)
//
// Solves of a square A (rows = cols = n); b is [n] or [..., n, k] (each column a
// right-hand side), x has b's shape:
//   sparse.lu_solve(v, c, r, b) {transpose=false}  -> x, A x = b (or A^T x = b)  UMFPACK
//   sparse.cholesky_solve(v, c, r, b)              -> x, A symmetric positive definite,
//                                                     both triangles stored      CHOLMOD
//   sparse.cg_solve(v, c, r, b) {tol, max_iter, preconditioner}
//   sparse.bicgstab_solve(v, c, r, b) {tol, max_iter, preconditioner, transpose}
//   sparse.gmres_solve(v, c, r, b) {tol, max_iter, preconditioner, transpose, restart=30}
//       -> x, iterations (i32), residual (||b - A x|| / ||b||, computed from x at the end);
//          iterations and residual are scalars for b [n], [..., k] for b [..., n, k].
//       tol: stop when ||r|| <= tol ||b|| (default 1e-8); max_iter < 0: 10 n (SciPy's
//       default); preconditioner "jacobi" (default) or "none". A run that stops at
//       max_iter is no error: iterations and residual say so. cg_solve assumes A
//       symmetric positive definite (both triangles stored) and reports a ValueError
//       when it finds a direction of negative curvature.
//
// Direct solves cache their factorisation (the last few, by pattern and values; see
// factor_cache_stats): a solve with a known pattern skips the symbolic analysis, and one
// with known values (the adjoint solve of a vjp, a repeated solve) skips the numeric
// factorisation too. f32 systems are factored and solved in f64.
//
// Rules: vjp and jvp w.r.t. values and the dense operand (never the integer indices; an
// iterative solve's iterations and residual carry no gradient), as graph ops; solves by
// the adjoint method (the solve of A^T g, then dvalues on the pattern = -(A^-T g)_i x_j:
// an sddmm). cholesky_solve and cg_solve take A symmetric, so their gradients are
// symmetrised. vmap: batched right-hand sides become columns (or leading dims) of one
// call; batched matrices fall back to a scan.
//
// Errors: a wrong dtype is a TypeError; mismatched shapes, a row_ptr that does not start
// at 0, decrease or end at nnz, a column index out of range, a singular matrix (lu_solve),
// a matrix that is not symmetric positive definite (cholesky_solve) a ValueError naming
// the op, what was expected and what was found.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::sparse {

// Registers the sparse.* ops and their CPU kernels; safe to call more than once.
void register_ops();

// A CSR matrix on the host.
struct SparseMatrix {
  int64_t rows = 0, cols = 0;
  Tensor values;   // [nnz], f32 or f64
  Tensor col_idx;  // [nnz], i32 or i64
  Tensor row_ptr;  // [rows + 1], col_idx's dtype

  int64_t nnz() const { return values.defined() ? values.numel() : 0; }
  DType dtype() const { return values.dtype(); }
  DType index_dtype() const { return col_idx.dtype(); }

  // Throws TypeError (dtypes) or ValueError (lengths, row_ptr, column indices) naming the
  // first thing wrong.
  void validate() const;
  // Columns strictly increasing within every row (sorted, no duplicates).
  bool is_canonical() const;
  Tensor to_dense() const;  // [rows, cols] in dtype(), duplicates summed
  SparseMatrix transpose() const;
  // The same pattern with other values ([nnz], f32 or f64).
  SparseMatrix with_values(Tensor new_values) const;

  // COO -> CSR: columns sorted within each row, duplicates summed. row / col: integer
  // tensors [nnz]; values: f32 / f64 [nnz]. An index out of range is a ValueError.
  static SparseMatrix from_coo(int64_t rows, int64_t cols, const Tensor& row, const Tensor& col,
                               const Tensor& values, DType index_dtype = DType::i32);
  static SparseMatrix from_triplets(int64_t rows, int64_t cols, const std::vector<int64_t>& row,
                                    const std::vector<int64_t>& col,
                                    const std::vector<double>& values, DType dtype = DType::f64,
                                    DType index_dtype = DType::i32);
  // The nonzeros of a [rows, cols] dense tensor.
  static SparseMatrix from_dense(const Tensor& dense, DType index_dtype = DType::i32);
};

// The 5-point Laplacian of an n x n grid with zero Dirichlet boundaries (4 on the
// diagonal, -1 to each grid neighbour), scaled by `scale`: n^2 unknowns, SPD.
SparseMatrix poisson2d(int64_t n, DType dtype = DType::f64, DType index_dtype = DType::i32,
                       double scale = 1.0);

// A CSR matrix in a graph: three values and the column count.
struct Csr {
  Value values, col_idx, row_ptr;
  int64_t cols = 0;

  int64_t rows() const;
  Csr with_values(Value v) const { return {v, col_idx, row_ptr, cols}; }
};
// The matrix as constants of g.
Csr constant(Graph& g, const SparseMatrix& m);
// The pattern as constants, the values as the given value (an input, a param, …).
Csr with_pattern(const SparseMatrix& pattern, Value values);
// Inputs "<prefix>.values", "<prefix>.col_idx", "<prefix>.row_ptr" of m's types.
Csr input(Graph& g, const std::string& prefix, const SparseMatrix& m);

Value spmv(const Csr& a, Value x);
Value spmv_t(const Csr& a, Value x);
Value spmm(const Csr& a, Value x);
Value spmm_t(const Csr& a, Value x);
Value lu_solve(const Csr& a, Value b, bool transpose = false);
Value cholesky_solve(const Csr& a, Value b);

struct IterativeOptions {
  double tol = 1e-8;
  int64_t max_iter = -1;  // < 0: 10 n
  std::string preconditioner = "jacobi";
  bool transpose = false;  // bicgstab / gmres: solve A^T x = b
  int64_t restart = 30;    // gmres
};
struct Solution {
  Value x, iterations, residual;
};
Solution cg_solve(const Csr& a, Value b, const IterativeOptions& o = {});
Solution bicgstab_solve(const Csr& a, Value b, const IterativeOptions& o = {});
Solution gmres_solve(const Csr& a, Value b, const IterativeOptions& o = {});

// The direct solvers' factorisation cache (process-wide).
struct FactorCacheStats {
  int64_t analyses = 0;        // symbolic analyses (a pattern not in the cache)
  int64_t factorisations = 0;  // numeric factorisations (values not in the cache)
  int64_t reuses = 0;          // solves that reused a numeric factorisation
  int64_t entries = 0;         // factorisations held now
};
FactorCacheStats factor_cache_stats();
// Frees every cached factorisation; `capacity` (default 4, 0 turns caching off) sets how
// many are kept, least recently used dropped first.
void clear_factor_cache();
void set_factor_cache_capacity(int64_t capacity);

}  // namespace rlx::sparse
