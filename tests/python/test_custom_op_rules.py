"""Autodiff and batching rules of Python custom ops, written with rlx ops in Python:
grad, jvp and vmap go through the op, checked against finite differences and loops."""
import itertools

import numpy as np
import pytest

import rlx

_ids = itertools.count()
EPS = 1e-6


def unique(name):
    return f"pyrules{next(_ids)}.{name}"  # ops are registered once per process


def same_type(inputs, attrs):
    return inputs[0]


def elementwise_vmap(name):
    """The vmap rule of an elementwise op: the op on the batched input, same axis."""
    def rule(inputs, in_axes, attrs):
        return [rlx.op(name, inputs[0])], [in_axes[0]]
    return rule


def register_sin_cos():
    """pkg.sin and pkg.cos with NumPy kernels, each differentiated through the other, so
    grad of grad goes through the rules twice."""
    sin, cos = unique("sin"), unique("cos")
    rlx.register_op(sin, same_type, lambda a, attrs: np.sin(a[0]),
                    vjp=lambda ins, outs, cts, attrs: [cts[0] * rlx.op(cos, ins[0])],
                    jvp=lambda ins, outs, tans, attrs: [tans[0] * rlx.op(cos, ins[0])],
                    vmap=elementwise_vmap(sin))
    rlx.register_op(cos, same_type, lambda a, attrs: np.cos(a[0]),
                    vjp=lambda ins, outs, cts, attrs: [-(cts[0] * rlx.op(sin, ins[0]))],
                    jvp=lambda ins, outs, tans, attrs: [-(tans[0] * rlx.op(sin, ins[0]))],
                    vmap=elementwise_vmap(cos))
    return sin, cos


def central(f, a):
    out = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += EPS
        lo[i] -= EPS
        out[i] = (f(hi) - f(lo)) / (2 * EPS)
    return out


@pytest.mark.parametrize("shape", [(3,), (2, 4), ()], ids=str)
def test_grad_through_a_python_custom_op(shape, rng):
    sin, _ = register_sin_cos()

    def f(x, w):
        return rlx.sum(rlx.op(sin, x * w) * rlx.tanh(x))

    x, w = rng.standard_normal(shape), rng.standard_normal(shape)
    value = rlx.jit(f)
    np.testing.assert_allclose(value(x, w), np.sum(np.sin(x * w) * np.tanh(x)), rtol=1e-12)
    dx, dw = rlx.grad(f, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(dx, central(lambda v: value(v, w), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, central(lambda v: value(x, v), w), rtol=1e-6, atol=1e-8)
    # second order: through the vjp rules of sin and then cos
    d2 = rlx.grad(rlx.grad(lambda a: rlx.sum(rlx.op(sin, a))))(np.float64(0.7))
    np.testing.assert_allclose(d2, -np.sin(0.7), rtol=1e-12)


def test_jvp_and_vmap_through_a_python_custom_op(rng):
    sin, cos = register_sin_cos()
    x, t = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    out, tan = rlx.jvp(lambda a: rlx.op(cos, a) * a, (x,), (t,))
    np.testing.assert_allclose(out, np.cos(x) * x, rtol=1e-12)
    f = rlx.jit(lambda a: rlx.op(cos, a) * a)
    np.testing.assert_allclose(tan, (f(x + EPS * t) - f(x - EPS * t)) / (2 * EPS), rtol=1e-6,
                               atol=1e-8)
    # hvp = jvp of grad, through both rules
    grad_f = rlx.grad(lambda a: rlx.sum(rlx.op(sin, a) * a))
    _, hv = rlx.jvp(grad_f, (x,), (t,))
    np.testing.assert_allclose(hv, (grad_f(x + EPS * t) - grad_f(x - EPS * t)) / (2 * EPS),
                               rtol=1e-6, atol=1e-8)
    # vmap over the op, and per-example gradients
    xs = rng.standard_normal((4, 2, 3))
    np.testing.assert_allclose(rlx.vmap(lambda a: rlx.op(sin, a) + 1.0, in_axes=1)(xs),
                               np.sin(xs).transpose(1, 0, 2) + 1.0, rtol=1e-12)
    per = rlx.vmap(rlx.grad(lambda a: rlx.sum(rlx.op(sin, a) * a)))(xs)
    for i in range(4):
        np.testing.assert_allclose(per[i], grad_f(xs[i]), rtol=1e-12)


def test_a_rule_may_give_no_gradient(rng):
    name = unique("scale_by")  # x * s; no gradient for s, on purpose

    rlx.register_op(name, same_type, lambda a, attrs: a[0] * a[1], min_inputs=2, max_inputs=2,
                    vjp=lambda ins, outs, cts, attrs: [cts[0] * ins[1], None])
    x, s = rng.standard_normal(3), rng.standard_normal(3)
    dx, ds = rlx.grad(lambda a, b: rlx.sum(rlx.op(name, a, b)), argnums=(0, 1))(x, s)
    np.testing.assert_allclose(dx, s, rtol=1e-12)
    np.testing.assert_array_equal(ds, np.zeros(3))


def test_custom_op_rule_errors(rng):
    x = rng.standard_normal(3)
    plain = unique("plain")
    rlx.register_op(plain, same_type, lambda a, attrs: a[0] * 2)
    with pytest.raises(NotImplementedError, match=f"vjp rule for op '{plain}'"):
        rlx.grad(lambda a: rlx.sum(rlx.op(plain, a)))(x)
    with pytest.raises(NotImplementedError, match=f"vmap rule for op '{plain}'"):
        rlx.vmap(lambda a: rlx.op(plain, a))(np.ones((2, 3)))

    def registered(vjp):
        name = unique("bad_rule")
        rlx.register_op(name, same_type, lambda a, attrs: a[0], vjp=vjp)
        return lambda a: rlx.sum(rlx.op(name, a))

    with pytest.raises(TypeError, match="vjp rule to return a list of 1"):
        rlx.grad(registered(lambda i, o, c, at: [c[0], c[0]]))(x)
    with pytest.raises(TypeError, match="vjp rule to return rlx.Values"):
        rlx.grad(registered(lambda i, o, c, at: [np.ones(3)]))(x)
    with pytest.raises(TypeError, match=r"vjp rule's result 0 of type f64\[3\], got f32\[3\]"):
        rlx.grad(registered(lambda i, o, c, at: [c[0].astype(rlx.f32)]))(x)
    with pytest.raises(ZeroDivisionError):  # the rule's own exception, as it is
        rlx.grad(registered(lambda i, o, c, at: [c[0] * (1 / 0)]))(x)
    with pytest.raises(TypeError, match="callable vjp rule"):
        rlx.register_op(unique("not_callable"), same_type, vjp=3)
