"""Function transforms nest, in any order (vmap of grad, grad of grad, jvp of grad, jit
of grad, grad of jit, ...): checked against finite differences and loops."""
import numpy as np
import pytest

import rlx

EPS = 1e-5


def loss(w, x):
    return rlx.sum(rlx.tanh(x @ w)) + rlx.mean(w * w * w)


def cube_tanh(x):  # scalar in, scalar out
    return x * x * x * rlx.tanh(x) + rlx.exp(x * 0.5)


def central(f, a, eps=EPS):
    """d f / d a by central differences (f: array -> array, a: float64 array)."""
    a = np.asarray(a, np.float64)
    f0 = np.asarray(f(a))
    out = np.zeros(f0.shape + a.shape)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        out[(...,) + i] = (np.asarray(f(hi)) - np.asarray(f(lo))) / (2 * eps)
    return out


def test_vmap_of_grad_is_per_example_gradients(rng):
    w = rng.standard_normal((4, 2))
    xs = rng.standard_normal((6, 3, 4))
    per_example = rlx.vmap(rlx.grad(loss), in_axes=(None, 0))(w, xs)
    assert per_example.shape == (6, 4, 2)
    for i in range(6):
        np.testing.assert_allclose(per_example[i], rlx.grad(loss)(w, xs[i]), rtol=1e-12)
        np.testing.assert_allclose(per_example[i], central(lambda v: rlx.jit(loss)(v, xs[i]), w),
                                   rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("x", [-1.3, 0.2, 0.9])
def test_grad_of_grad_of_a_scalar_function(x):
    x = np.float64(x)
    d1 = rlx.grad(cube_tanh)
    d2 = rlx.grad(rlx.grad(cube_tanh))
    d3 = rlx.grad(rlx.grad(rlx.grad(cube_tanh)))
    np.testing.assert_allclose(d2(x), central(d1, x), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(d3(x), central(d2, x), rtol=1e-7, atol=1e-9)
    # tanh'' by hand: d/dx (1 - t^2) = -2 t (1 - t^2)
    t = np.tanh(x)
    np.testing.assert_allclose(rlx.grad(rlx.grad(rlx.tanh))(x), -2 * t * (1 - t * t), rtol=1e-12)


def test_jvp_of_grad_is_a_hessian_vector_product(rng):
    w, v = rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    x = rng.standard_normal((3, 4))
    grad_w = rlx.grad(loss)
    g, hv = rlx.jvp(lambda a: grad_w(a, x), (w,), (v,))
    np.testing.assert_allclose(g, grad_w(w, x), rtol=1e-12)
    want = (grad_w(w + EPS * v, x) - grad_w(w - EPS * v, x)) / (2 * EPS)
    np.testing.assert_allclose(hv, want, rtol=1e-6, atol=1e-8)
    # the graph transform hvp agrees
    gr = rlx.Graph()
    gr.output(loss(gr.input("w", w.shape, rlx.f64), gr.input("x", x.shape, rlx.f64)), "loss")
    out = rlx.Session("cpu").compile(rlx.hvp(gr, wrt=["w"])).run({"w": w, "x": x, "tan.w": v})
    np.testing.assert_allclose(hv, out["hvp.w"], rtol=1e-10)


def test_grad_of_jit_and_jit_of_grad(rng):
    w, x = rng.standard_normal((4, 2)), rng.standard_normal((3, 4))
    want = central(lambda v: rlx.jit(loss)(v, x), w)
    jitted = rlx.jit(loss)
    np.testing.assert_allclose(rlx.grad(jitted)(w, x), want, rtol=1e-6, atol=1e-8)
    jit_of_grad = rlx.jit(rlx.grad(loss, argnums=(0, 1)))
    dw, dx = jit_of_grad(w, x)
    np.testing.assert_allclose(dw, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dx, central(lambda v: rlx.jit(loss)(w, v), x), rtol=1e-6,
                               atol=1e-8)
    jit_of_grad(w, x)
    assert jit_of_grad.traces == 1
    # a jit inside a jit is inlined
    outer = rlx.jit(lambda a, b: jitted(a, b) * 2.0)
    np.testing.assert_allclose(outer(w, x), 2 * jitted(w, x), rtol=1e-12)


def test_vmap_of_vmap_matches_a_double_loop(rng):
    def f(a, b):
        return rlx.softmax(a * b + 1.0), rlx.sum(a)

    a = rng.standard_normal((3, 5, 4)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    p, s = rlx.vmap(rlx.vmap(f, in_axes=(0, 0)), in_axes=(0, None))(a, b)
    assert p.shape == (3, 5, 4) and s.shape == (3, 5)
    single = rlx.jit(f)
    for i in range(3):
        for j in range(5):
            pij, sij = single(a[i, j], b[j])
            np.testing.assert_allclose(p[i, j], pij, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(s[i, j], sij, rtol=1e-5, atol=1e-6)


def test_grad_of_vmap_and_of_value_and_grad(rng):
    w, xs = rng.standard_normal((4, 2)), rng.standard_normal((5, 3, 4))

    def total(w):
        return rlx.sum(rlx.vmap(loss, in_axes=(None, 0))(w, xs))

    np.testing.assert_allclose(rlx.grad(total)(w), sum(rlx.grad(loss)(w, x) for x in xs),
                               rtol=1e-10)
    vg = rlx.vmap(rlx.value_and_grad(loss), in_axes=(None, 0))
    values, grads = vg(w, xs)
    for i in range(5):
        np.testing.assert_allclose(values[i], rlx.jit(loss)(w, xs[i]), rtol=1e-12)
        np.testing.assert_allclose(grads[i], rlx.grad(loss)(w, xs[i]), rtol=1e-12)


def test_vjp_and_jvp_inside_other_transforms(rng):
    def f(x):
        return rlx.tanh(x) * x

    x, u, v = (rng.standard_normal(4) for _ in range(3))
    # the vjp of f along v, as a function of x, then its own gradient
    def pulled(x):
        out, pullback = rlx.vjp(f, x)
        return rlx.sum(pullback(v)[0] * u) + rlx.sum(out) * 0.0

    want = central(lambda a: rlx.jit(pulled)(a), x)
    np.testing.assert_allclose(rlx.grad(pulled)(x), want, rtol=1e-6, atol=1e-8)
    # second directional derivative: jvp of jvp
    second = rlx.jvp(lambda a: rlx.jvp(f, (a,), (u,))[1], (x,), (u,))[1]
    t = np.tanh(x)
    f2 = 2 * (1 - t * t) - 2 * x * t * (1 - t * t)  # f'' of x tanh x
    np.testing.assert_allclose(second, f2 * u * u, rtol=1e-10)


def test_transformed_functions_build_graphs():
    # called on Values of a graph under construction, they add nodes to it
    g = rlx.Graph()
    x = g.input("x", ("n",), rlx.f64)
    g.output(rlx.grad(lambda a: rlx.sum(a * a * a))(x), "dx")
    out = rlx.Session("cpu").compile(g).run({"x": np.arange(4.0)})["dx"]
    np.testing.assert_allclose(out, 3 * np.arange(4.0) ** 2)
    ys = rlx.vmap(lambda a: a * 2.0)(x)
    assert ys.graph is not None and ys.shape == ("n",)
    # called with arrays but closing over a Value of g: the result is a Value of g too
    h = rlx.Graph()
    c = h.input("c", (2,), rlx.f64)
    dw = rlx.grad(lambda w: rlx.sum(rlx.exp(w * c)))(np.array([0.5, -1.0]))
    assert isinstance(dw, rlx.Value)
    h.output(dw, "dw")
    cv = np.array([2.0, 3.0])
    out = rlx.Session("cpu").compile(h).run({"c": cv})["dw"]
    np.testing.assert_allclose(out, cv * np.exp(np.array([0.5, -1.0]) * cv), rtol=1e-12)


def test_closures_over_outer_values(rng):
    w, xs = rng.standard_normal((4, 2)), rng.standard_normal((5, 3, 4))

    # per-example gradients with x closed over: the inner grad's constant, the vmap's
    # batched input
    def per_example(x):
        return rlx.grad(lambda v: loss(v, x))(w)

    got = rlx.vmap(per_example)(xs)
    for i in range(5):
        np.testing.assert_allclose(got[i], rlx.grad(loss)(w, xs[i]), rtol=1e-12)

    # the outer grad sees through the closed-over value: d/dx of (d/dw loss(w, x)) . u
    u = rng.standard_normal((4, 2))

    def mixed(x):
        return rlx.sum(rlx.grad(lambda v: loss(v, x))(w) * u)

    want = central(lambda a: rlx.jit(mixed)(a), xs[0])
    np.testing.assert_allclose(rlx.grad(mixed)(xs[0]), want, rtol=1e-6, atol=1e-8)

    # a closure over a Value two levels up, through jvp and vjp
    def two_up(x):
        def middle(v):
            out, pullback = rlx.vjp(lambda a: rlx.tanh(a * x), v)
            return rlx.sum(pullback(rlx.jvp(lambda b: b * x, (v,), (v,))[1])[0])
        return rlx.grad(middle)(x)

    def middle_np(v, x):  # what middle computes
        return np.sum(v * x * x * (1 - np.tanh(v * x) ** 2))

    x0 = rng.standard_normal(3)
    want = central(lambda v: middle_np(v, x0), x0)
    np.testing.assert_allclose(rlx.jit(two_up)(x0), want, rtol=1e-6, atol=1e-8)
    batch = rng.standard_normal((4, 3))
    got = rlx.vmap(two_up)(batch)
    for i in range(4):
        np.testing.assert_allclose(got[i], central(lambda v: middle_np(v, batch[i]), batch[i]),
                                   rtol=1e-6, atol=1e-8)


def test_nesting_errors(rng):
    w = rng.standard_normal((4, 2))

    with pytest.raises(ValueError, match="argnums"):
        rlx.jit(lambda a: rlx.grad(loss, argnums=3)(a, a))(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"\[inline\] expected 2 args"):
        g = rlx.Graph()
        g.inline(rlx.grad(_graph_of(loss, w.shape, (3, 4)), wrt=["a0"]), [g.input("a", (4, 2))])
    with pytest.raises(TypeError, match=r"\[inline_call\] expected arg 'a0' of type f64\[4,2\]"):
        g = rlx.Graph()
        callee = _graph_of(loss, (4, 2), (3, 4))
        g.inline(callee, [g.input("a", (4, 2), rlx.f32), g.input("b", (3, 4), rlx.f64)])


def _graph_of(fn, *shapes):
    g = rlx.Graph("f")
    g.output(fn(*[g.input(f"a{i}", s, rlx.f64) for i, s in enumerate(shapes)]), "out")
    return g


def test_nested_results_keep_their_structure(rng):
    # jit of value_and_grad returns (value, (dw, dx)); vjp's cotangent mirrors the result
    w, x = rng.standard_normal((4, 2)), rng.standard_normal((3, 4))
    value, (dw, dx) = rlx.jit(rlx.value_and_grad(loss, argnums=(0, 1)))(w, x)
    np.testing.assert_allclose(value, rlx.jit(loss)(w, x), rtol=1e-12)
    np.testing.assert_allclose(dw, rlx.grad(loss)(w, x), rtol=1e-12)
    np.testing.assert_allclose(dx, rlx.grad(loss, argnums=1)(w, x), rtol=1e-12)

    def f(a):
        return {"sq": a * a, "pair": [rlx.sum(a), (rlx.tanh(a),)]}

    out = rlx.jit(f)(x)
    assert set(out) == {"sq", "pair"} and isinstance(out["pair"], tuple)
    np.testing.assert_allclose(out["pair"][1][0], np.tanh(x), rtol=1e-12)
    assert rlx.jit(f).trace(x).output_names == ["sq", "pair_0", "pair_1_0"]
    value, pullback = rlx.vjp(f, x)
    ct = {"sq": np.ones_like(x), "pair": (2.0, (np.full_like(x, 3.0),))}
    (gx,) = pullback(ct)
    np.testing.assert_allclose(gx, 2 * x + 2.0 + 3.0 * (1 - np.tanh(x) ** 2), rtol=1e-12)
    _, tan = rlx.jvp(f, (x,), (np.ones_like(x),))
    np.testing.assert_allclose(tan["pair"][0], np.sum(np.ones_like(x)), rtol=1e-12)
    with pytest.raises(ValueError, match="structure of fn's result"):
        pullback({"sq": np.ones_like(x)})
    with pytest.raises(TypeError, match="at 'pair_1'"):
        rlx.jit(lambda a: {"pair": (a, 3)})(x)
