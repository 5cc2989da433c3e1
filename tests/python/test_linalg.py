"""rlx.linalg against numpy.linalg (and scipy.linalg.solve_triangular): arrays in and out,
batched and broadcast, inside jit, grad (against finite differences) and vmap."""
import numpy as np
import pytest
import scipy.linalg

import rlx

rng = np.random.default_rng(7)


def spd(n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_registered_in_python():
    names = rlx.op_names()
    for op in ("linalg.solve", "linalg.eigh", "linalg.svd", "sparse.spmv", "sparse.cg_solve"):
        assert op in names
    assert "solve" in dir(rlx.ops.linalg)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_solve_matches_numpy(dtype):
    a = (rng.standard_normal((4, 4)) + 4 * np.eye(4)).astype(dtype)
    b = rng.standard_normal((4, 3)).astype(dtype)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    x = rlx.linalg.solve(a, b)
    assert x.dtype == dtype
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=tol, atol=tol)
    v = rng.standard_normal(4).astype(dtype)
    np.testing.assert_allclose(rlx.linalg.solve(a, v), np.linalg.solve(a, v), rtol=tol, atol=tol)


def test_solve_broadcasts_batch_dims_and_promotes_ints():
    a = rng.standard_normal((2, 1, 3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((1, 5, 3, 2))
    np.testing.assert_allclose(rlx.linalg.solve(a, b), np.linalg.solve(a, b), rtol=1e-10)
    ai = np.array([[2, 1], [1, 3]])
    bi = np.array([[1], [2]])
    x = rlx.linalg.solve(ai, bi)
    assert x.dtype == np.float64
    np.testing.assert_allclose(x, np.linalg.solve(ai, bi), rtol=1e-12)


def test_decompositions_match_numpy():
    a = rng.standard_normal((3, 5, 4))
    s = spd(4, (2,))
    np.testing.assert_allclose(rlx.linalg.inv(s), np.linalg.inv(s), rtol=1e-10)
    np.testing.assert_allclose(rlx.linalg.det(s), np.linalg.det(s), rtol=1e-10)
    sign, logdet = rlx.linalg.slogdet(a[:, :4, :])
    ns, nl = np.linalg.slogdet(a[:, :4, :])
    np.testing.assert_allclose(sign, ns)
    np.testing.assert_allclose(logdet, nl, rtol=1e-10)
    np.testing.assert_allclose(rlx.linalg.cholesky(s), np.linalg.cholesky(s), rtol=1e-10)
    u = rlx.linalg.cholesky(s, upper=True)
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, s, rtol=1e-10)
    q, r = rlx.linalg.qr(a)
    np.testing.assert_allclose(q @ r, a, atol=1e-10)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4), (3, 4, 4)),
                               atol=1e-10)
    np.testing.assert_allclose(np.abs(rlx.linalg.qr(a, mode="r")), np.abs(np.linalg.qr(a, mode="r")),
                               atol=1e-10)
    w, v = rlx.linalg.eigh(s)
    nw, _ = np.linalg.eigh(s)
    np.testing.assert_allclose(w, nw, rtol=1e-10)
    np.testing.assert_allclose(v @ (w[..., None] * np.swapaxes(v, -1, -2)), s, atol=1e-9)
    # The upper triangle: a matrix whose lower triangle is garbage.
    up = np.triu(s[0]) + np.tril(rng.standard_normal((4, 4)), -1)
    np.testing.assert_allclose(rlx.linalg.eigvalsh(up, UPLO="U"), np.linalg.eigvalsh(up, UPLO="U"),
                               rtol=1e-10)
    uu, ss, vt = rlx.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(ss, np.linalg.svd(a, compute_uv=False), rtol=1e-10)
    np.testing.assert_allclose((uu * ss[..., None, :]) @ vt, a, atol=1e-10)
    np.testing.assert_allclose(rlx.linalg.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False),
                               rtol=1e-10)
    sq = rng.standard_normal((4, 4))
    u4, s4, v4 = rlx.linalg.svd(sq)  # full_matrices=True of a square matrix
    np.testing.assert_allclose((u4 * s4) @ v4, sq, atol=1e-10)
    with pytest.raises(NotImplementedError, match="full_matrices"):
        rlx.linalg.svd(a)
    np.testing.assert_allclose(rlx.linalg.pinv(a), np.linalg.pinv(a), atol=1e-10)


def test_lstsq_and_solve_triangular_and_norm():
    a = rng.standard_normal((6, 3))
    b = rng.standard_normal((6, 2))
    x, res, rank, s = rlx.linalg.lstsq(a, b)
    nx, nres, nrank, ns = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(x, nx, rtol=1e-10)
    np.testing.assert_allclose(res, nres, rtol=1e-10)
    assert int(rank) == nrank
    np.testing.assert_allclose(s, ns, rtol=1e-10)
    t = np.triu(rng.standard_normal((4, 4))) + 4 * np.eye(4)
    c = rng.standard_normal((4, 2))
    for trans in (0, 1):
        np.testing.assert_allclose(rlx.linalg.solve_triangular(t, c, trans=trans),
                                   scipy.linalg.solve_triangular(t, c, trans=trans), rtol=1e-10)
    lo = t.T
    np.testing.assert_allclose(rlx.linalg.solve_triangular(lo, c[:, 0], lower=True, unit_diagonal=True),
                               scipy.linalg.solve_triangular(lo, c[:, 0], lower=True, unit_diagonal=True),
                               rtol=1e-10)
    np.testing.assert_allclose(rlx.linalg.norm(a), np.linalg.norm(a), rtol=1e-12)
    np.testing.assert_allclose(rlx.linalg.norm(a, axis=0), np.linalg.norm(a, axis=0), rtol=1e-12)
    np.testing.assert_allclose(rlx.linalg.norm(a, "fro"), np.linalg.norm(a, "fro"), rtol=1e-12)


def test_errors_are_typed():
    with pytest.raises(ValueError, match="singular"):
        rlx.linalg.solve(np.zeros((3, 3)), np.ones((3, 1)))
    with pytest.raises(ValueError):
        rlx.linalg.cholesky(-np.eye(3))
    with pytest.raises(ValueError, match="mode"):
        rlx.linalg.qr(np.eye(3), mode="full")


def finite_difference(f, a, eps=1e-6):
    out = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        out[i] = (f(hi) - f(lo)) / (2 * eps)
    return out


def test_grad_jit_and_vmap():
    a = spd(3)
    b = rng.standard_normal((3, 2))

    def loss(a, b):
        return rlx.sum(rlx.linalg.solve(a, b) * rlx.linalg.inv(a)[:, :2]) + rlx.linalg.slogdet(a)[1]

    def loss_np(a):
        return float(np.sum(np.linalg.solve(a, b) * np.linalg.inv(a)[:, :2]) + np.linalg.slogdet(a)[1])

    g = rlx.grad(loss)(a, b)
    np.testing.assert_allclose(g, finite_difference(loss_np, a), rtol=1e-6, atol=1e-7)
    f = rlx.jit(lambda a: rlx.linalg.eigh(a)[0])
    np.testing.assert_allclose(f(a), np.linalg.eigvalsh(a), rtol=1e-10)
    batch = spd(3, (4,))
    dets = rlx.vmap(lambda a: rlx.linalg.det(a))(batch)
    np.testing.assert_allclose(dets, np.linalg.det(batch), rtol=1e-10)
