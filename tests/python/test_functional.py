"""JAX-style transforms of Python functions: rlx.grad(fn), value_and_grad, jvp, vjp and
vmap, against finite differences and loops."""
import numpy as np
import pytest

import rlx

EPS = 1e-6


def loss(w, x):
    return rlx.sum(rlx.tanh(x @ w) * 0.5) + rlx.mean(w * w)


def loss_np(w, x):
    return float(np.sum(np.tanh(x @ w) * 0.5) + np.mean(w * w))


def finite_difference(f, a):
    out = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += EPS
        lo[i] -= EPS
        out[i] = (f(hi) - f(lo)) / (2 * EPS)
    return out


@pytest.mark.parametrize("shapes", [((4, 2), (3, 4)), ((1, 1), (5, 1)), ((3, 3), (2, 3))],
                         ids=str)
def test_grad_of_a_function(shapes, rng):
    w, x = (rng.standard_normal(s) for s in shapes)
    dw = rlx.grad(loss)(w, x)
    np.testing.assert_allclose(dw, finite_difference(lambda v: loss_np(v, x), w), rtol=1e-6,
                               atol=1e-8)
    dx = rlx.grad(loss, argnums=1)(w, x)
    np.testing.assert_allclose(dx, finite_difference(lambda v: loss_np(w, v), x), rtol=1e-6,
                               atol=1e-8)
    both = rlx.grad(loss, argnums=(0, 1))(w, x)
    assert isinstance(both, tuple) and len(both) == 2
    np.testing.assert_allclose(both[0], dw, rtol=1e-12)
    value, g = rlx.value_and_grad(loss)(w, x)
    assert value == pytest.approx(loss_np(w, x), rel=1e-12)
    np.testing.assert_allclose(g, dw, rtol=1e-12)


def test_function_transforms_cache_by_signature(rng):
    df = rlx.grad(loss)
    for n in (3, 3, 4):
        df(rng.standard_normal((4, 2)), rng.standard_normal((n, 4)))
    assert df._cached.traces == 2


@pytest.mark.parametrize("in_axes", [0, (0, None), (1, None)], ids=str)
def test_vmap_of_a_function_matches_loop(in_axes, rng):
    def f(x, w):
        return rlx.softmax(x @ w), rlx.sum(x)

    w = rng.standard_normal((4, 3)).astype(np.float32)
    xs = rng.standard_normal((5, 4)).astype(np.float32)
    x_in = xs.T.copy() if in_axes == (1, None) else xs
    if in_axes == 0:
        ws = np.stack([w] * 5)
        p, s = rlx.vmap(f, in_axes=0)(x_in, ws)
    else:
        p, s = rlx.vmap(f, in_axes=in_axes)(x_in, w)
    single = rlx.jit(f)
    for i in range(5):
        pi, si = single(xs[i], w)
        np.testing.assert_allclose(p[i], pi, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(s[i], si, rtol=1e-5, atol=1e-6)


def test_jvp_and_vjp_of_a_function(rng):
    def f(x, y):
        return rlx.tanh(x) * y + rlx.exp(x * 0.5)

    def f_np(x, y):
        return np.tanh(x) * y + np.exp(x * 0.5)

    x, y, tx, ty, ct = (rng.standard_normal((2, 3)) for _ in range(5))
    out, tan = rlx.jvp(f, (x, y), (tx, ty))
    np.testing.assert_allclose(out, f_np(x, y), rtol=1e-12)
    want = (f_np(x + EPS * tx, y + EPS * ty) - f_np(x - EPS * tx, y - EPS * ty)) / (2 * EPS)
    np.testing.assert_allclose(tan, want, rtol=1e-6, atol=1e-8)

    out, pullback = rlx.vjp(f, x, y)
    np.testing.assert_allclose(out, f_np(x, y), rtol=1e-12)
    gx, gy = pullback(ct)
    np.testing.assert_allclose(gx, finite_difference(lambda v: float(np.sum(f_np(v, y) * ct)), x),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, finite_difference(lambda v: float(np.sum(f_np(x, v) * ct)), y),
                               rtol=1e-6, atol=1e-8)


def test_function_transform_errors(rng):
    w, x = rng.standard_normal((4, 2)), rng.standard_normal((3, 4))
    with pytest.raises(TypeError, match="scalar"):
        rlx.grad(lambda w: (w, w))(w)
    with pytest.raises(ValueError):
        rlx.grad(lambda w: w * 2.0)(w)  # not a scalar
    with pytest.raises(ValueError, match="argnums"):
        rlx.grad(loss, argnums=2)(w, x)
    with pytest.raises(ValueError, match="batch size"):
        rlx.vmap(lambda a, b: a + b)(np.ones((2, 3)), np.ones((4, 3)))
    with pytest.raises(TypeError, match="Graph or a function"):
        rlx.grad(3)
