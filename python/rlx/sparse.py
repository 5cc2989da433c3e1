"""Sparse matrices (CSR) and sparse solvers in SciPy's terms (scipy.sparse.csr_matrix,
scipy.sparse.linalg), through the ops of rlx's sparse package (rlx.ops.sparse.*:
SuiteSparse's UMFPACK and CHOLMOD and rlx's Krylov solvers on the CPU, cuSPARSE on the GPU).

    import numpy as np, scipy.sparse as sp, rlx
    A = rlx.sparse.csr_matrix(sp.random(100, 100, density=0.05) + 10 * sp.eye(100))
    y = A @ x                                   # sparse.spmv / spmm
    x = rlx.sparse.spsolve(A, b)                # LU (UMFPACK)
    x, info = rlx.sparse.cg(A, b, rtol=1e-8)    # info 0: converged
    # gradients w.r.t. the nonzeros and the right-hand side:
    dv = rlx.grad(lambda v: rlx.sum(rlx.sparse.spsolve(A.with_data(v), b)))(A.data)

A csr_matrix holds data (float32 / float64: an array, or an rlx.Value inside a trace, so
that a function of the values differentiates), indices and indptr (int32 or int64) and
its shape. Functions take arrays or Values as rlx.linalg's do (rlx/_apply.py). The ops,
their rules and their errors are described in libs/sparse/include/rlx_sparse/sparse.h.
"""
import numpy as np

from ._rlx import Value, op as _op
from ._apply import call, is_traced

__all__ = ["csr_matrix", "spmv", "spsolve", "cg", "bicgstab", "gmres", "linalg", "issparse"]


class csr_matrix:
    """A CSR matrix: csr_matrix(S) for a SciPy sparse matrix or a dense 2-D array,
    csr_matrix((data, indices, indptr), shape=(m, n)) or csr_matrix((data, (row, col)),
    shape=(m, n)) (COO entries: sorted by row and column, duplicates summed)."""

    def __init__(self, arg, shape=None, dtype=None):
        if hasattr(arg, "tocsr"):  # a SciPy sparse matrix
            s = arg.tocsr()
            data, indices, indptr, shape = s.data, s.indices, s.indptr, s.shape
        elif isinstance(arg, tuple) and len(arg) == 2:
            data, (row, col) = arg
            if shape is None:
                raise ValueError("csr_matrix: expected shape= with (data, (row, col))")
            data, indices, indptr = _from_coo(data, row, col, shape)
        elif isinstance(arg, tuple) and len(arg) == 3:
            data, indices, indptr = arg
            if shape is None:
                raise ValueError("csr_matrix: expected shape= with (data, indices, indptr)")
        else:
            dense = np.asarray(arg)
            if dense.ndim != 2:
                raise ValueError(f"csr_matrix: expected a 2-D array, got shape {dense.shape}")
            row, col = np.nonzero(dense)
            shape = dense.shape
            data, indices, indptr = _from_coo(dense[row, col], row, col, shape)
        if not isinstance(data, Value):
            data = np.asarray(data, dtype=dtype)
            if data.dtype not in (np.float32, np.float64):
                data = data.astype(np.float64)
        self.data = data
        self.indices = np.asarray(indices)
        self.indptr = np.asarray(indptr)
        if self.indices.dtype not in (np.int32, np.int64):
            self.indices = self.indices.astype(np.int64)
        self.indptr = self.indptr.astype(self.indices.dtype, copy=False)
        self.shape = (int(shape[0]), int(shape[1]))
        if len(self.indptr) != self.shape[0] + 1:
            raise ValueError(f"csr_matrix: expected indptr of length {self.shape[0] + 1} "
                             f"for {self.shape[0]} rows, got {len(self.indptr)}")

    @property
    def nnz(self):
        return len(self.indices)

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def T(self):
        """The transpose, as a matrix whose products run A^T x (sparse.spmv_t)."""
        return _Transposed(self)

    def with_data(self, data):
        """The same pattern with other values (an array or a Value)."""
        return csr_matrix((data, self.indices, self.indptr), shape=self.shape)

    def toarray(self):
        """The dense [m, n] NumPy array (data must be an array)."""
        out = np.zeros(self.shape, dtype=self.data.dtype)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        np.add.at(out, (rows, self.indices), self.data)
        return out

    def dot(self, x):
        return _product(self, x, False)

    def __matmul__(self, x):
        return _product(self, x, False)

    def __repr__(self):
        return f"<rlx.sparse.csr_matrix {self.shape[0]}x{self.shape[1]}, {self.nnz} stored, {self.dtype}>"


class _Transposed:
    def __init__(self, a):
        self._a = a
        self.shape = (a.shape[1], a.shape[0])

    @property
    def T(self):
        return self._a

    def dot(self, x):
        return _product(self._a, x, True)

    def __matmul__(self, x):
        return _product(self._a, x, True)


def issparse(x):
    return isinstance(x, (csr_matrix, _Transposed))


def _from_coo(data, row, col, shape):
    row, col = np.asarray(row, np.int64), np.asarray(col, np.int64)
    data = np.asarray(data)
    if row.shape != col.shape or row.shape != data.shape:
        raise ValueError(f"csr_matrix: expected data, row and col of one length, got "
                         f"{data.shape}, {row.shape}, {col.shape}")
    m, n = int(shape[0]), int(shape[1])
    if len(row) and (row.min() < 0 or row.max() >= m or col.min() < 0 or col.max() >= n):
        raise ValueError(f"csr_matrix: expected indices inside {m} x {n}")
    key = row * n + col
    order = np.argsort(key, kind="stable")
    key, data = key[order], data[order]
    uniq, first = np.unique(key, return_index=True)
    data = np.add.reduceat(data, first) if len(data) else data
    r, c = uniq // n, uniq % n
    indptr = np.zeros(m + 1, np.int64)
    np.add.at(indptr, r + 1, 1)
    itype = np.int32 if max(m, n, len(uniq)) < 2**31 else np.int64
    return data, c.astype(itype), np.cumsum(indptr).astype(itype)


def _csr_args(a, *dense):
    """The operands of a sparse op: values, col_idx, row_ptr, then the dense ones (array
    operands in the matrix's dtype)."""
    v = a.data
    if not is_traced(v, *dense):
        dense = tuple(np.asarray(d, dtype=v.dtype) for d in dense)
    return (v, a.indices, a.indptr) + tuple(dense)


def _product(a, x, transpose):
    name = "sparse.spmv" if np.ndim(x) == 1 else "sparse.spmm"
    if transpose:
        name += "_t"
    attrs = {"cols": a.shape[1]} if transpose else {}
    return call((name, a.shape), lambda v, c, r, x: _op(name, v, c, r, x, **attrs),
                *_csr_args(a, x))


def spmv(a, x):
    """a @ x for a csr_matrix a (or its .T) and a vector or [..., n, k] matrix x."""
    return a @ x


def _square(a, name):
    if not isinstance(a, csr_matrix):
        raise TypeError(f"{name}: expected an rlx.sparse.csr_matrix, got {type(a).__name__}")
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"{name}: expected a square matrix, got {a.shape[0]} x {a.shape[1]}")


def spsolve(a, b, permc_spec=None, use_umfpack=True):
    """x with a x = b (LU, UMFPACK); b [n] or [n, k]. a may be a csr_matrix's .T."""
    del permc_spec, use_umfpack  # SciPy's choices of ordering and solver
    transpose = isinstance(a, _Transposed)
    a = a.T if transpose else a
    _square(a, "spsolve")
    return call(("spsolve", transpose),
                lambda v, c, r, b: _op("sparse.lu_solve", v, c, r, b, transpose=transpose),
                *_csr_args(a, b))


def _iterative(name, a, b, x0, rtol, atol, maxiter, M, extra):
    _square(a, name)
    if x0 is not None:
        raise NotImplementedError(f"{name}: a starting guess x0 is not supported (the solve "
                                  "starts from 0); expected x0=None")
    if atol:
        raise NotImplementedError(f"{name}: atol is not supported (the stop is ||r|| <= rtol "
                                  "||b||); expected atol=0")
    if M not in (None, "jacobi"):
        raise NotImplementedError(f"{name}: expected M None or 'jacobi' (a diagonal "
                                  f"preconditioner), got {type(M).__name__}")
    attrs = dict(tol=float(rtol), max_iter=-1 if maxiter is None else int(maxiter),
                 preconditioner="jacobi" if M == "jacobi" else "none", **extra)
    op_name = f"sparse.{name}_solve"

    def f(v, c, r, b):
        x, iters, res = _op(op_name, v, c, r, b, **attrs)
        # SciPy's info: 0 when converged, else the iterations run.
        info = _op("select", res <= attrs["tol"], iters * 0, iters)
        return x, info

    x, info = call((op_name, tuple(sorted(attrs.items()))), f, *_csr_args(a, b))
    if not is_traced(x) and np.ndim(info) == 0:
        info = int(info)
    return x, info


def cg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None):
    """Conjugate gradients for a symmetric positive definite A: (x, info), info 0 when
    ||b - A x|| <= rtol ||b||, else the iterations run (SciPy's). M None or "jacobi"."""
    return _iterative("cg", A, b, x0, rtol, atol, maxiter, M, {})


def bicgstab(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None):
    """BiCGSTAB: (x, info) as cg's."""
    return _iterative("bicgstab", A, b, x0, rtol, atol, maxiter, M, {})


def gmres(A, b, x0=None, *, rtol=1e-5, atol=0.0, restart=None, maxiter=None, M=None):
    """Restarted GMRES (restart default 30 as SciPy's): (x, info) as cg's."""
    return _iterative("gmres", A, b, x0, rtol, atol, maxiter, M,
                      {"restart": 30 if restart is None else int(restart)})


class _Linalg:
    """rlx.sparse.linalg: the solvers under SciPy's scipy.sparse.linalg names."""
    spsolve = staticmethod(spsolve)
    cg = staticmethod(cg)
    bicgstab = staticmethod(bicgstab)
    gmres = staticmethod(gmres)


linalg = _Linalg()
