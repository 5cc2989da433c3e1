"""@rlx.jit: traced once per signature, compiled, run; results against NumPy."""
import numpy as np
import pytest

import rlx


def test_jit_matches_numpy_and_caches_by_signature(rng):
    @rlx.jit
    def f(x, w):
        return rlx.softmax(rlx.relu(x @ w) * 2.0)

    def ref(x, w):
        h = np.maximum(x @ w, 0) * 2
        e = np.exp(h - h.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    w = rng.standard_normal((4, 3)).astype(np.float32)
    for n in (2, 2, 5, 2, 5):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_allclose(f(x, w), ref(x, w), rtol=1e-5, atol=1e-6)
    assert f.traces == 2  # (2, 4) and (5, 4)
    f(rng.standard_normal((2, 4)), w.astype(np.float64))  # new dtypes: a new trace
    assert f.traces == 3
    assert f.__name__ == "f"


def test_jit_structures_and_options(rng):
    @rlx.jit(opt_level=0, threads=1)
    def stats(x):
        return {"sum": rlx.sum(x, 0), "max": rlx.ops.reduce_max(x), "x": x}

    @rlx.jit
    def pair(a, b):
        return a + b, a * b

    x = rng.standard_normal((3, 4))
    out = stats(x)
    assert list(out) == ["sum", "max", "x"]
    np.testing.assert_allclose(out["sum"], x.sum(0), rtol=1e-12)
    assert out["max"] == x.max()
    np.testing.assert_array_equal(out["x"], x)
    s, p = pair(np.arange(3), 2)  # numbers and lists go through numpy.asarray
    np.testing.assert_array_equal(s, [2, 3, 4])
    np.testing.assert_array_equal(p, [0, 2, 4])
    assert "graph jit(%a0: f64[3,4])" in str(stats.trace(x))


def test_jit_errors():
    @rlx.jit
    def bad_shapes(a, b):
        return a @ b

    with pytest.raises(ValueError, match=r"^\[matmul\]"):
        bad_shapes(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))

    @rlx.jit
    def returns_number(a):
        return 3

    with pytest.raises(TypeError, match="jit"):
        returns_number(np.ones(2))
    with pytest.raises(ValueError, match=r"\[mul\]"):  # an inner jit's error, from the outer
        rlx.jit(lambda a: rlx.jit(lambda b: b * rlx.transpose(b))(a))(np.ones((2, 3)))
    with pytest.raises(TypeError, match="NumPy dtype"):
        rlx.jit(lambda a: a)(np.ones(2, np.uint32))
