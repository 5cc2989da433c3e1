"""Dense linear algebra with NumPy's signatures (numpy.linalg, and SciPy's solve_triangular),
through the ops of rlx's linalg package (rlx.ops.linalg.*: LAPACK on the CPU, cuSOLVER and
cuBLAS on the GPU).

    import numpy as np, rlx
    x = rlx.linalg.solve(a, b)                     # arrays in, arrays out
    w, v = rlx.linalg.eigh(a)
    g = rlx.grad(lambda a: rlx.sum(rlx.linalg.inv(a)))(a)   # inside grad, jit and vmap

Each function takes arrays (float32 stays float32, other dtypes compute in float64, as
NumPy does) or rlx.Values; leading dims are batch dims, broadcast between the operands.
Results are NumPy arrays, or Values inside a trace. The ops and their gradients'
conditions (distinct eigenvalues for eigh's, a full-rank A for lstsq's, ...) are
described in libs/linalg/include/rlx_linalg/linalg.h; a singular or indefinite matrix
raises ValueError where NumPy raises LinAlgError.
"""
import numpy as np

from ._rlx import f32 as _rlx_f32, op as _op
from ._apply import as_float, call, is_traced

__all__ = ["solve", "inv", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd",
           "lstsq", "solve_triangular", "pinv", "norm"]


def _batch_shape(x):
    return tuple(x.shape[:-2])


def _broadcast_batch(a, b, b_core):
    """a [..., m, n] and b [..., *b_core dims] with their batch dims broadcast together (as
    numpy.linalg does); the linalg ops take equal batch dims."""
    ba, bb = _batch_shape(a), tuple(b.shape[:b.ndim - b_core])
    if ba == bb or None in ba or None in bb:
        return a, b
    batch = np.broadcast_shapes(ba, bb)
    if ba != batch:
        a = _op("broadcast_to", a, shape=list(batch + tuple(a.shape[-2:])))
    if bb != batch:
        b = _op("broadcast_to", b, shape=list(batch + tuple(b.shape[b.ndim - b_core:])))
    return a, b


def _eps(x):
    """The machine precision of x's dtype (f32 or f64)."""
    single = x.dtype == (_rlx_f32 if is_traced(x) else np.float32)
    return np.finfo(np.float32 if single else np.float64).eps


def _tol(a, rcond):
    """The relative cutoff of a's singular values: rcond, or NumPy's default (machine
    precision times max(m, n))."""
    return _eps(a) * max(a.shape[-2], a.shape[-1]) if rcond is None else rcond


def _floats(*xs):
    """Array operands in one float dtype (their NumPy result type, f32 or f64)."""
    if is_traced(*xs):
        return xs
    xs = [as_float(x) for x in xs]
    dt = np.result_type(*xs)
    return tuple(x.astype(dt, copy=False) for x in xs)


def solve(a, b):
    """x with a @ x = b; b [..., n] is a vector when it has rank 1 (NumPy 2's rule), else
    [..., n, k]."""
    a, b = _floats(a, b)

    def f(a, b):
        vec = b.ndim == 1
        if vec:
            b = b[:, None]
        a, b = _broadcast_batch(a, b, 2)
        x = _op("linalg.solve", a, b)
        return x[..., 0] if vec else x

    return call(("solve",), f, a, b)


def inv(a):
    """The inverse of a [..., n, n]."""
    return call(("inv",), lambda a: _op("linalg.inv", a), *_floats(a))


def det(a):
    """The determinant of a [..., n, n]."""
    return call(("det",), lambda a: _op("linalg.det", a), *_floats(a))


def slogdet(a):
    """(sign, logabsdet) of a [..., n, n]."""
    return call(("slogdet",), lambda a: tuple(_op("linalg.slogdet", a)), *_floats(a))


def cholesky(a, upper=False):
    """The lower Cholesky factor L (a = L L^T) of a symmetric positive definite a, from its
    lower triangle; upper=True gives L^T."""
    def f(a):
        ell = _op("linalg.cholesky", a)
        return _swap(ell) if upper else ell

    return call(("cholesky", upper), f, *_floats(a))


def _swap(x):
    perm = list(range(x.ndim))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return _op("transpose", x, perm=perm)


def qr(a, mode="reduced"):
    """(Q, R) of a [..., m, n]: mode "reduced" (Q [..., m, k], R [..., k, n], k = min(m,
    n)), "r" (R only) or "complete" where it equals "reduced" (m <= n)."""
    if mode not in ("reduced", "r", "complete"):
        raise ValueError(f"qr: expected mode 'reduced', 'complete' or 'r', got {mode!r}")
    (a,) = _floats(a)
    if mode == "complete" and (a.shape[-2] is None or a.shape[-1] is None or a.shape[-2] > a.shape[-1]):
        raise NotImplementedError("qr: mode 'complete' with m > n (a full basis of Q) is not "
                                  "implemented; expected m <= n or mode 'reduced'")

    def f(a):
        q, r = _op("linalg.qr", a)
        return r if mode == "r" else (q, r)

    return call(("qr", mode), f, a)


def _lower(a, uplo):
    if uplo not in ("L", "U"):
        raise ValueError(f"expected UPLO 'L' or 'U', got {uplo!r}")
    # The upper triangle of a is the lower one of a^T.
    return a if uplo == "L" else _swap(a)


def eigh(a, UPLO="L"):
    """(w, v): the eigenvalues (ascending) and eigenvectors (columns) of a symmetric a,
    read from its lower (UPLO="L") or upper triangle."""
    return call(("eigh", UPLO), lambda a: tuple(_op("linalg.eigh", _lower(a, UPLO))), *_floats(a))


def eigvalsh(a, UPLO="L"):
    """The eigenvalues (ascending) of a symmetric a."""
    return call(("eigvalsh", UPLO), lambda a: _op("linalg.eigh", _lower(a, UPLO))[0], *_floats(a))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """(U, S, Vh) with a = U diag(S) Vh, S descending; compute_uv=False gives S. The
    complete bases of full_matrices=True exist here only where a is square (otherwise
    pass full_matrices=False: the reduced U [..., m, k], Vh [..., k, n])."""
    del hermitian  # a hint in NumPy; the SVD is the same
    (a,) = _floats(a)
    m, n = a.shape[-2], a.shape[-1]
    if compute_uv and full_matrices and (m is None or n is None or m != n):
        raise NotImplementedError(
            f"svd: full_matrices=True of a {m} x {n} matrix (complete bases) is not "
            "implemented; expected a square matrix or full_matrices=False")

    def f(a):
        u, s, vt = _op("linalg.svd", a)
        return (u, s, vt) if compute_uv else s

    return call(("svd", compute_uv), f, a)


def lstsq(a, b, rcond=None):
    """(x, residuals, rank, s) as numpy.linalg.lstsq: the minimum-norm least-squares x of
    a x = b (b [m] or [m, k]), the squared residual norm of each column (empty unless
    rank = n < m), the effective rank of a and its singular values. rcond=None: machine
    precision times max(m, n), as NumPy."""
    a, b = _floats(a, b)
    m, n = a.shape[-2], a.shape[-1]
    tol = _tol(a, rcond)

    def f(a, b):
        vec = b.ndim == 1
        bb = b[:, None] if vec else b
        x = _op("linalg.lstsq", a, bb, rcond=float(tol))
        s = _op("linalg.svd", a)[1]
        rank = _op("sum", _op("cast", s > s[..., :1] * tol, dtype="i32"), axes=[-1])
        r = bb - a @ x
        res = _op("sum", r * r, axes=[-2])
        return (x[..., 0] if vec else x), (res[..., 0] if vec else res), rank, s

    x, res, rank, s = call(("lstsq", tol), f, a, b)
    if not is_traced(x) and np.ndim(rank) == 0 and (int(rank) < n or m <= n):
        res = np.zeros((0,), dtype=x.dtype)  # NumPy's empty residuals
    return x, res, rank, s


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False):
    """SciPy's scipy.linalg.solve_triangular: x with op(a) x = b, a read as its lower or
    upper triangle, op = identity (trans 0 / "N") or transpose (1 / "T"); b [n] or [n, k]."""
    t = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}.get(trans)
    if t is None:
        raise ValueError(f"solve_triangular: expected trans 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    a, b = _floats(a, b)

    def f(a, b):
        vec = b.ndim == a.ndim - 1
        bb = b[..., None] if vec else b
        x = _op("linalg.triangular_solve", a, bb, lower=bool(lower), transpose=t,
                unit_diagonal=bool(unit_diagonal))
        return x[..., 0] if vec else x

    return call(("solve_triangular", t, bool(lower), bool(unit_diagonal)), f, a, b)


def pinv(a, rcond=None):
    """The Moore-Penrose pseudo-inverse of a [..., m, n] (through the SVD; singular values
    below rcond * max are dropped; rcond=None: machine precision times max(m, n))."""
    (a,) = _floats(a)
    m, n = a.shape[-2], a.shape[-1]
    tol = _tol(a, rcond)

    def f(a):
        u, s, vt = _op("linalg.svd", a)
        keep = _op("cast", s > s[..., :1] * tol, dtype=s.dtype)
        inv_s = keep / (s + (1.0 - keep))  # 1 / s where kept, 0 elsewhere
        return _swap(vt) @ (inv_s[..., :, None] * _swap(u))

    return call(("pinv", tol), f, a)


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector 2-norms and matrix Frobenius norms as numpy.linalg.norm takes them: ord None,
    2 (a vector axis) or "fro" (two axes); axis None: the whole array's 2-norm."""
    if ord not in (None, 2, "fro"):
        raise NotImplementedError(f"norm: expected ord None, 2 (vectors) or 'fro', got {ord!r}")
    if ord == 2 and (axis is None or isinstance(axis, (tuple, list))) and np.ndim(x) != 1:
        raise NotImplementedError("norm: ord=2 of a matrix (its largest singular value) is not "
                                  "implemented; use rlx.linalg.svd")
    (x,) = _floats(x)
    axes = list(range(x.ndim)) if axis is None else (
        list(axis) if isinstance(axis, (tuple, list)) else [axis])

    def f(x):
        return _op("sqrt", _op("sum", x * x, axes=axes, keepdims=bool(keepdims)))

    return call(("norm", tuple(axes), bool(keepdims)), f, x)
