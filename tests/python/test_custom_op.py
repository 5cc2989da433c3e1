"""Custom ops from Python: a type rule and a CPU kernel in Python, registered in rlx's
registries and used in graphs like any op."""
import itertools

import numpy as np
import pytest

import rlx

_ids = itertools.count()


def unique(name):
    return f"pytest{next(_ids)}.{name}"  # ops are registered once per process


def register_scaled_cumsum():
    name = unique("scaled_cumsum")

    def infer(inputs, attrs):
        (shape, dt), = inputs
        if not dt.is_float:
            raise TypeError(f"[{name}] expected a float input, got {dt}")
        return shape, dt

    def kernel(arrays, attrs):
        return np.cumsum(arrays[0], axis=attrs["axis"]).astype(arrays[0].dtype) * attrs["scale"]

    rlx.register_op(name, infer, kernel, attrs={"axis": ("int", 0), "scale": ("float", 1.0)},
                    doc="scale * cumsum(x, axis)")
    return name


def test_custom_op_in_a_graph(rng):
    name = register_scaled_cumsum()
    assert name in rlx.op_names()
    pkg, leaf = name.split(".")
    fn = getattr(getattr(rlx.ops, pkg), leaf)
    assert "scale * cumsum(x, axis)" in fn.__doc__ and "scale: float = 1.0" in fn.__doc__
    g = rlx.Graph()
    x = g.input("x", ("n", 4))
    y = fn(rlx.relu(x), axis=1, scale=0.5)
    assert (y.shape, y.dtype) == (("n", 4), rlx.f32)
    g.output(y * 2.0 + 1.0, "y")
    assert name in str(g)
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    for opt_level in (0, 2):
        out = rlx.Session().compile(g, opt_level=opt_level).run([xv])["y"]
        np.testing.assert_allclose(out, np.cumsum(np.maximum(xv, 0), 1) + 1, rtol=1e-6)
    # the text format reads it back (the op is in the registry)
    h = rlx.parse_graph(str(g))
    np.testing.assert_allclose(rlx.Session().compile(h).run([xv])["y"], out, rtol=1e-6)


def test_custom_op_with_two_outputs_and_a_data_dependent_shape(rng):
    name = unique("positives")

    def infer(inputs, attrs):
        (shape, dt), = inputs
        return [((None,), dt), ((), rlx.i64)]  # None: known when the kernel runs

    def kernel(arrays, attrs):
        x = arrays[0]
        return [x[x > 0], np.array((x > 0).sum(), np.int64)]

    rlx.register_op(name, infer, kernel)
    g = rlx.Graph()
    x = g.input("x", (6,))
    pos, count = rlx.op(name, x)
    g.output(pos, "pos")
    g.output(count, "count")
    xv = np.array([1, -2, 3, 0, -5, 6], np.float32)
    out = rlx.Session().compile(g).run([xv])
    np.testing.assert_array_equal(out["pos"], [1, 3, 6])
    assert out["count"] == 3


def test_custom_op_errors(rng):
    name = register_scaled_cumsum()
    g = rlx.Graph()
    with pytest.raises(TypeError, match="expected a float input"):
        rlx.op(name, g.input("i", (3,), rlx.i32))  # the rule's own error
    with pytest.raises(TypeError, match="kind int"):
        rlx.op(name, g.input("x", (3,)), axis="0")
    with pytest.raises(ValueError):
        rlx.register_op(name, lambda i, a: i[0])  # taken
    with pytest.raises(ValueError, match="attribute kind"):
        rlx.register_op(unique("bad"), lambda i, a: i[0], attrs={"k": "complex"})

    wrong = unique("wrong_kernel")
    rlx.register_op(wrong, lambda i, a: i[0], lambda arrays, attrs: arrays[0][:1])
    h = rlx.Graph()
    h.output(rlx.op(wrong, h.input("x", (3,))), "y")
    with pytest.raises(ValueError, match=r"expected kernel output 0 of type f32\[3\]"):
        rlx.Session().compile(h, opt_level=0).run([np.ones(3, np.float32)])

    raising = unique("raising_kernel")

    def kernel(arrays, attrs):
        raise KeyError("from the kernel")

    rlx.register_op(raising, lambda i, a: i[0], kernel)
    k = rlx.Graph()
    k.output(rlx.op(raising, k.input("x", (3,))), "y")
    with pytest.raises(KeyError, match="from the kernel"):
        rlx.Session().compile(k, opt_level=0).run([np.ones(3, np.float32)])

    readonly = unique("writes_input")

    def writes(arrays, attrs):
        arrays[0][0] = 1
        return arrays[0]

    rlx.register_op(readonly, lambda i, a: i[0], writes)
    r = rlx.Graph()
    r.output(rlx.op(readonly, r.input("x", (3,))), "y")
    with pytest.raises(ValueError, match="read-only"):
        rlx.Session().compile(r, opt_level=0).run([np.zeros(3, np.float32)])


def test_custom_op_without_a_kernel_is_not_supported():
    name = unique("no_kernel")
    rlx.register_op(name, lambda inputs, attrs: inputs[0])
    g = rlx.Graph()
    g.output(rlx.op(name, g.input("x", (2,))), "y")
    with pytest.raises(NotImplementedError, match=name.replace(".", r"\.")):
        rlx.Session().compile(g).run([np.zeros(2, np.float32)])
