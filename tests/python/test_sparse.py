"""rlx.sparse against scipy.sparse and scipy.sparse.linalg: construction, products, direct
and iterative solves, gradients w.r.t. the nonzeros and the right-hand side, jit and vmap."""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import rlx

rng = np.random.default_rng(11)


def system(n=30, density=0.1, spd=False):
    a = sp.random(n, n, density=density, random_state=3, format="csr")
    if spd:
        a = a @ a.T
    a = (a + n * sp.eye(n)).tocsr()
    a.sort_indices()
    return a


def test_construction_matches_scipy():
    s = system()
    dense = s.toarray()
    for a in (rlx.sparse.csr_matrix(s), rlx.sparse.csr_matrix(dense),
              rlx.sparse.csr_matrix((s.data, s.indices, s.indptr), shape=s.shape)):
        assert a.shape == s.shape and a.nnz == s.nnz
        np.testing.assert_array_equal(a.toarray(), dense)
    # COO entries out of order, with a duplicate (summed).
    row, col, val = [2, 0, 2, 1], [1, 0, 1, 2], [1.0, 2.0, 3.0, 4.0]
    a = rlx.sparse.csr_matrix((val, (row, col)), shape=(3, 3))
    np.testing.assert_array_equal(a.toarray(), sp.coo_matrix((val, (row, col)), shape=(3, 3)).toarray())
    assert rlx.sparse.issparse(a) and not rlx.sparse.issparse(dense)
    with pytest.raises(ValueError, match="indptr"):
        rlx.sparse.csr_matrix((s.data, s.indices, s.indptr[:-1]), shape=s.shape)


def test_products():
    s = system()
    a = rlx.sparse.csr_matrix(s)
    x = rng.standard_normal(30)
    xs = rng.standard_normal((30, 4))
    np.testing.assert_allclose(a @ x, s @ x, rtol=1e-12)
    np.testing.assert_allclose(rlx.sparse.spmv(a, x), s @ x, rtol=1e-12)
    np.testing.assert_allclose(a @ xs, s @ xs, rtol=1e-12)
    np.testing.assert_allclose(a.T @ x, s.T @ x, rtol=1e-12)
    np.testing.assert_allclose(a.T.dot(xs), s.T @ xs, rtol=1e-12)
    a32 = rlx.sparse.csr_matrix(s, dtype=np.float32)
    assert (a32 @ x).dtype == np.float32


def test_solves_match_scipy():
    s = system()
    a = rlx.sparse.csr_matrix(s)
    b = rng.standard_normal(30)
    np.testing.assert_allclose(rlx.sparse.spsolve(a, b), spla.spsolve(s, b), rtol=1e-10)
    np.testing.assert_allclose(rlx.sparse.linalg.spsolve(a.T, b), spla.spsolve(s.T.tocsc(), b),
                               rtol=1e-10)
    bs = rng.standard_normal((30, 3))
    np.testing.assert_allclose(rlx.sparse.spsolve(a, bs), spla.spsolve(s.tocsc(), bs), rtol=1e-10)
    p = system(spd=True)
    ap = rlx.sparse.csr_matrix(p)
    exact = spla.spsolve(p.tocsc(), b)
    for solve in (rlx.sparse.cg, rlx.sparse.bicgstab, rlx.sparse.gmres):
        x, info = solve(ap, b, rtol=1e-10)
        assert info == 0
        np.testing.assert_allclose(x, exact, rtol=1e-7, atol=1e-9)
    x, info = rlx.sparse.cg(ap, b, rtol=1e-14, maxiter=2)
    assert info == 2  # not converged: the iterations run (SciPy's info)
    with pytest.raises(NotImplementedError, match="x0"):
        rlx.sparse.cg(ap, b, x0=b)
    with pytest.raises(ValueError, match="square"):
        rlx.sparse.spsolve(rlx.sparse.csr_matrix(np.ones((2, 3))), np.ones(2))


def test_grad_through_values_and_rhs():
    s = system(12, 0.3)
    a = rlx.sparse.csr_matrix(s)
    b = rng.standard_normal(12)
    w = rng.standard_normal(12)

    def loss(v, b):
        return rlx.sum(rlx.sparse.spsolve(a.with_data(v), b) * w)

    def loss_np(v, bb):
        m = sp.csr_matrix((v, s.indices, s.indptr), shape=s.shape)
        return float(np.sum(spla.spsolve(m.tocsc(), bb) * w))

    dv, db = rlx.grad(loss, argnums=(0, 1))(s.data, b)
    eps = 1e-6
    fd_v = np.array([(loss_np(s.data + eps * e, b) - loss_np(s.data - eps * e, b)) / (2 * eps)
                     for e in np.eye(s.nnz)])
    fd_b = np.array([(loss_np(s.data, b + eps * e) - loss_np(s.data, b - eps * e)) / (2 * eps)
                     for e in np.eye(12)])
    np.testing.assert_allclose(dv, fd_v, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(db, fd_b, rtol=1e-5, atol=1e-8)


def test_jit_and_vmap():
    s = system()
    a = rlx.sparse.csr_matrix(s)
    f = rlx.jit(lambda v, x: a.with_data(v) @ x)
    x = rng.standard_normal(30)
    np.testing.assert_allclose(f(s.data, x), s @ x, rtol=1e-12)
    bs = rng.standard_normal((5, 30))
    xs = rlx.vmap(lambda b: rlx.sparse.spsolve(a, b))(bs)
    np.testing.assert_allclose(xs, spla.spsolve(s.tocsc(), bs.T).T, rtol=1e-10)
