"""Graph transforms from Python: grad / value_and_grad / vjp / jvp / hvp against finite
differences, vmap against a loop."""
import numpy as np
import pytest

import rlx
from conftest import run_graph

EPS = 1e-6


def loss_graph(batch=3, n=4, m=2, c_seed=7):
    """loss = sum(tanh(x @ w) * c) + mean(w * w): x input, w param, all f64."""
    c = np.random.default_rng(c_seed).standard_normal((batch, m))
    g = rlx.Graph()
    x = g.input("x", (batch, n), rlx.f64)
    w = g.param("w", (n, m), rlx.f64)
    g.output(rlx.sum(rlx.tanh(x @ w) * c) + rlx.mean(w * w), "loss")
    return g


def evaluate(g, inputs, params):
    cg = rlx.Session("cpu").compile(g)
    for k, v in params.items():
        cg.set_param(k, v)
    return cg.run(inputs)


def finite_difference(f, a):
    """Central differences of the scalar f at every element of a."""
    out = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += EPS
        lo[i] -= EPS
        out[i] = (f(hi) - f(lo)) / (2 * EPS)
    return out


@pytest.mark.parametrize("shape", [(3, 4, 2), (1, 5, 3), (6, 2, 1)], ids=str)
def test_grad_wrt_param_matches_finite_differences(shape, rng):
    batch, n, m = shape
    g = loss_graph(batch, n, m)
    xv, wv = rng.standard_normal((batch, n)), rng.standard_normal((n, m))
    dg = rlx.grad(g, wrt=["w"])
    assert dg.output_names == ["grad.w"]
    got = evaluate(dg, {"x": xv}, {"w": wv})["grad.w"]
    f = lambda w: evaluate(g, {"x": xv}, {"w": w})["loss"]  # noqa: E731
    np.testing.assert_allclose(got, finite_difference(f, wv), rtol=1e-6, atol=1e-8)


def test_grad_wrt_input_and_value_and_grad(rng):
    g = loss_graph()
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    vg = rlx.value_and_grad(g, wrt="x", output="loss")
    assert vg.output_names == ["loss", "grad.x"]
    out = evaluate(vg, {"x": xv}, {"w": wv})
    f = lambda x: evaluate(g, {"x": x}, {"w": wv})["loss"]  # noqa: E731
    np.testing.assert_allclose(out["loss"], f(xv), rtol=1e-12)
    np.testing.assert_allclose(out["grad.x"], finite_difference(f, xv), rtol=1e-6, atol=1e-8)


def elementwise_graph():
    g = rlx.Graph()
    x = g.input("x", (2, 3), rlx.f64)
    g.output(rlx.tanh(x) * x + rlx.exp(x * 0.5), "y")
    return g


def test_vjp_and_jvp_match_finite_differences(rng):
    g = elementwise_graph()
    f = lambda x: run_graph(g, {"x": x})["y"]  # noqa: E731
    xv, ct, tan = (rng.standard_normal((2, 3)) for _ in range(3))

    vg = rlx.vjp(g, wrt=["x"])
    assert vg.input_names == ["x", "ct.y"] and vg.output_names == ["y", "grad.x"]
    out = run_graph(vg, {"x": xv, "ct.y": ct})
    np.testing.assert_allclose(out["y"], f(xv), rtol=1e-12)
    want = finite_difference(lambda x: float(np.sum(f(x) * ct)), xv)
    np.testing.assert_allclose(out["grad.x"], want, rtol=1e-6, atol=1e-8)

    jg = rlx.jvp(g, wrt=["x"])
    assert jg.input_names == ["x", "tan.x"] and jg.output_names == ["y", "tan.y"]
    out = run_graph(jg, {"x": xv, "tan.x": tan})
    want = (f(xv + EPS * tan) - f(xv - EPS * tan)) / (2 * EPS)
    np.testing.assert_allclose(out["tan.y"], want, rtol=1e-6, atol=1e-8)


def test_hvp_matches_finite_differences_of_grad(rng):
    g = loss_graph()
    xv, wv, tv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    hg = rlx.hvp(g, wrt=["w"])
    got = evaluate(hg, {"x": xv, "tan.w": tv}, {"w": wv})["hvp.w"]
    dg = rlx.grad(g, wrt=["w"])
    gr = lambda w: evaluate(dg, {"x": xv}, {"w": w})["grad.w"]  # noqa: E731
    want = (gr(wv + EPS * tv) - gr(wv - EPS * tv)) / (2 * EPS)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def mlp_graph():
    g = rlx.Graph()
    x = g.input("x", (4,))
    w = g.param("w", (4, 3))
    b = g.input("b", (3,))
    g.output(rlx.softmax(x @ w + b), "p")
    return g


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("axis", [0, 1])
def test_vmap_matches_loop(batch, axis, rng):
    g = mlp_graph()
    wv = rng.standard_normal((4, 3)).astype(np.float32)
    bv = rng.standard_normal(3).astype(np.float32)
    xs = rng.standard_normal((batch, 4)).astype(np.float32)
    bg = rlx.vmap(g, in_axes={"x": axis, "b": None})
    xin = xs if axis == 0 else xs.T.copy()
    got = evaluate(bg, {"x": xin, "b": bv}, {"w": wv})["p"]
    assert got.shape == (batch, 3)
    cg = rlx.Session().compile(g)
    cg.set_param("w", wv)
    want = np.stack([cg.run({"x": x, "b": bv})["p"] for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_vmap_of_grad_gives_per_example_gradients(rng):
    g = rlx.Graph()
    x = g.input("x", (3,), rlx.f64)
    w = g.param("w", (3,), rlx.f64)
    g.output(rlx.sum(rlx.tanh(x * w)), "loss")
    pg = rlx.vmap(rlx.grad(g, wrt="w"), in_axes={"x": 0}, size=4)
    xs, wv = rng.standard_normal((4, 3)), rng.standard_normal(3)
    got = evaluate(pg, {"x": xs}, {"w": wv})["grad.w"]
    want = np.stack([x * (1 - np.tanh(x * wv) ** 2) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_transform_errors():
    g = elementwise_graph()
    with pytest.raises(ValueError):
        rlx.grad(g)  # y is not a scalar
    with pytest.raises(ValueError, match="nope"):
        rlx.grad(loss_graph(), wrt=["nope"])
