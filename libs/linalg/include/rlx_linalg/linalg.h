// rlx::linalg — dense linear algebra as a downstream op package. It is built exactly as a
// package outside rlx would be: it sees only the public headers (include/rlx) and LAPACK,
// and registers everything with one call.
//
// Ops (f32 and f64; every op is batched over the leading dims of its inputs, which must
// be equal between the inputs of one node — no broadcasting):
//   linalg.solve(A[...,n,n], B[...,n,k])            -> X      A X = B            (gesv)
//   linalg.inv(A[...,n,n])                          -> A^-1                      (getrf+getri)
//   linalg.det(A[...,n,n])                          -> d[...]                    (getrf)
//   linalg.slogdet(A[...,n,n])                      -> sign[...], logabsdet[...] (getrf)
//   linalg.cholesky(A[...,n,n])                     -> L lower, A = L L^T        (potrf; reads
//                                                      A's lower triangle)
//   linalg.qr(A[...,m,n])                           -> Q[...,m,k], R[...,k,n]    (geqrf+orgqr;
//                                                      k = min(m, n), reduced)
//   linalg.eigh(A[...,n,n])                         -> w[...,n] ascending, V[...,n,n],
//                                                      A = V diag(w) V^T        (syevd; lower)
//   linalg.svd(A[...,m,n])                          -> U[...,m,k], S[...,k] descending,
//                                                      Vt[...,k,n], A = U diag(S) Vt (gesdd)
//   linalg.triangular_solve(A[...,n,n], B[...,n,k]) {lower=true, transpose=false,
//                                                      unit_diagonal=false}
//                                                   -> X      op(A) X = B with op(A) = A or
//                                                      A^T, A read as its lower / upper
//                                                      triangle (unit diagonal if asked)
//   linalg.lstsq(A[...,m,n], B[...,m,k]) {rcond=-1} -> X[...,n,k] minimum-norm least
//                                                      squares (gelsd)
//
// vmap rules for every op (the batch axis moved to the front; an unbatched input is given
// the batch). Rules (vjp and jvp, written as graph ops) for every op; they need static matrix sizes
// (the batch dims may be symbolic). cholesky / eigh gradients are those of a symmetric
// input (symmetrised); eigh's need distinct eigenvalues, svd's distinct nonzero singular
// values, qr's m >= n, lstsq's a full-column-rank A with m >= n.
//
// Errors: a wrong dtype is a TypeError; a non-square matrix, mismatched batch dims or
// rows, a singular matrix (solve, inv, triangular_solve with a zero diagonal) or a
// matrix that is not positive definite (cholesky) a ValueError naming the op, what was
// expected and what was found.
#pragma once

namespace rlx::linalg {

// Registers the linalg.* ops and their CPU kernels; safe to call more than once.
void register_ops();

}  // namespace rlx::linalg
