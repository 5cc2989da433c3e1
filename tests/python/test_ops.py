"""Core ops against NumPy: a table of ops x shapes x dtypes, each compiled and run."""
import math

import numpy as np
import pytest

import rlx
from conftest import run_graph, tolerance

FLOATS = [rlx.f32, rlx.f64, rlx.f16]
NUMBERS = FLOATS + [rlx.i32, rlx.i64]
SOME = [rlx.f32, rlx.f64, rlx.i32]


def sample(dt, shape, rng, domain="any"):
    np_dt = dt.numpy
    if dt.is_float:
        a = rng.standard_normal(shape)
        if domain == "positive":
            a = np.abs(a) + 0.5
        return a.astype(np_dt)
    lo = 1 if domain == "positive" else -20
    return rng.integers(lo, 20, shape).astype(np_dt)


def reference(fn, arrays, dt):
    """NumPy's result, computed in float64 for floats, cast to dt's NumPy dtype."""
    if dt.is_float:
        arrays = [a.astype(np.float64) for a in arrays]
    with np.errstate(all="ignore"):
        return np.asarray(fn(*arrays)).astype(dt.numpy)


def check(build, fn, arrays, dt):
    g = rlx.Graph()
    xs = [g.input(f"x{i}", a.shape, dt) for i, a in enumerate(arrays)]
    y = build(*xs)
    assert y.dtype == dt
    g.output(y, "y")
    out = run_graph(g, arrays)["y"]
    want = reference(fn, arrays, dt)
    assert out.shape == want.shape
    rtol, atol = tolerance(dt)
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol)


sigmoid = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731


def softmax(a, axis=-1):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name, rlx builder, NumPy reference, dtypes, input domain
UNARY = [
    ("neg", lambda x: -x, np.negative, NUMBERS, "any"),
    ("relu", rlx.relu, lambda a: np.maximum(a, 0), NUMBERS, "any"),
    ("abs", rlx.ops.abs, np.abs, NUMBERS, "any"),
    ("exp", rlx.exp, np.exp, FLOATS, "any"),
    ("log", rlx.log, np.log, FLOATS, "positive"),
    ("sqrt", rlx.ops.sqrt, np.sqrt, FLOATS, "positive"),
    ("tanh", rlx.tanh, np.tanh, FLOATS, "any"),
    ("sigmoid", rlx.sigmoid, sigmoid, FLOATS, "any"),
    ("sin", rlx.ops.sin, np.sin, FLOATS, "any"),
    ("square", rlx.ops.square, np.square, NUMBERS, "any"),
    ("scale_shift", lambda x: 2 * x - 3, lambda a: 2 * a - 3, NUMBERS, "any"),
    ("rdiv", lambda x: 1.0 / x, lambda a: 1 / a, FLOATS, "positive"),
]
UNARY_SHAPES = [(), (7,), (3, 4), (2, 3, 5)]


def cases(table, shapes):
    """(row..., dtype, shape) for each row of an op table, each of its dtypes, each shape."""
    return [pytest.param(*row, dt, shape, id=f"{row[0]}-{dt}-{shape}")
            for row in table for dt in row[3] for shape in shapes]


@pytest.mark.parametrize("name,build,fn,dtypes,domain,dt,shape", cases(UNARY, UNARY_SHAPES))
def test_unary(name, build, fn, dtypes, domain, dt, shape, rng):
    check(build, fn, [sample(dt, shape, rng, domain)], dt)


BINARY = [
    ("add", lambda a, b: a + b, np.add, NUMBERS, "any"),
    ("sub", lambda a, b: a - b, np.subtract, NUMBERS, "any"),
    ("mul", lambda a, b: a * b, np.multiply, NUMBERS, "any"),
    ("div", lambda a, b: a / b, np.divide, FLOATS, "positive"),
    ("max", rlx.ops.max, np.maximum, NUMBERS, "any"),
    ("min", rlx.ops.min, np.minimum, NUMBERS, "any"),
    ("pow", rlx.ops.pow, np.power, [rlx.f32, rlx.f64], "positive"),
    ("pow_operator", lambda a, b: a**b, np.power, [rlx.f32, rlx.f64], "positive"),
]
BROADCAST = [((5,), (5,)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (3, 2)), ((2, 3), (1, 1))]


@pytest.mark.parametrize("name,build,fn,dtypes,domain,dt,shapes", cases(BINARY, BROADCAST))
def test_binary(name, build, fn, dtypes, domain, dt, shapes, rng):
    arrays = [sample(dt, s, rng, domain) for s in shapes]
    check(build, fn, arrays, dt)


MATMUL = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 6)), ((1, 7), (7, 1)),
          ((4, 2, 3, 5), (1, 2, 5, 2))]


@pytest.mark.parametrize("shapes", MATMUL, ids=str)
@pytest.mark.parametrize("dt", [rlx.f32, rlx.f64], ids=str)
def test_matmul(dt, shapes, rng):
    arrays = [sample(dt, s, rng) for s in shapes]
    check(lambda a, b: a @ b, np.matmul, arrays, dt)


# name, builder(x), reference(a), dtypes
REDUCE_SHAPE = [
    ("sum_all", lambda x: rlx.sum(x), lambda a: a.sum(), SOME),
    ("sum_axis1", lambda x: rlx.sum(x, 1), lambda a: a.sum(axis=1), SOME),
    ("sum_method", lambda x: x.sum(2), lambda a: a.sum(axis=2), SOME),
    ("mean_method", lambda x: x.mean([0, 1]), lambda a: a.mean(axis=(0, 1)), [rlx.f32, rlx.f64]),
    ("sum_keep", lambda x: x.sum([0, 2], keepdims=True), lambda a: a.sum((0, 2), keepdims=True),
     SOME),
    ("mean_last", lambda x: rlx.mean(x, -1), lambda a: a.mean(axis=-1), [rlx.f32, rlx.f64]),
    ("reduce_max", lambda x: rlx.ops.reduce_max(x, axes=[0]), lambda a: a.max(axis=0), SOME),
    ("softmax", lambda x: rlx.softmax(x, axis=-1), softmax, [rlx.f32, rlx.f64]),
    ("softmax0", lambda x: rlx.ops.softmax(x, axis=0), lambda a: softmax(a, 0), [rlx.f32, rlx.f64]),
    ("transpose", lambda x: rlx.transpose(x), lambda a: a.transpose(), SOME),
    ("permute", lambda x: rlx.transpose(x, [1, 2, 0]), lambda a: a.transpose(1, 2, 0), SOME),
    ("reshape", lambda x: x.reshape([-1, 4]), lambda a: a.reshape(-1, 4), SOME),
    ("slice", lambda x: rlx.ops.slice(x, starts=[1], stops=[3], axes=[2]),
     lambda a: a[:, :, 1:3], SOME),
    ("concat", lambda x: rlx.ops.concat(x, x * 2, axis=1),
     lambda a: np.concatenate([a, a * 2], axis=1), SOME),
    ("cumsum", lambda x: rlx.ops.cumsum(x, axis=2), lambda a: np.cumsum(a, axis=2), SOME),
    ("cast_f64", lambda x: rlx.cast(x, rlx.f64).astype(x.dtype), lambda a: a, SOME),
]
RS_SHAPES = [(2, 3, 4), (3, 2, 8), (1, 5, 4)]


@pytest.mark.parametrize("name,build,fn,dtypes,dt,shape", cases(REDUCE_SHAPE, RS_SHAPES))
def test_reduce_and_shape(name, build, fn, dtypes, dt, shape, rng):
    check(build, fn, [sample(dt, shape, rng)], dt)


@pytest.mark.parametrize("src,dst", [(rlx.f32, rlx.i32), (rlx.i32, rlx.f32), (rlx.f32, rlx.f16),
                                     (rlx.f64, rlx.f32), (rlx.i64, rlx.bool_), (rlx.u8, rlx.f32)],
                         ids=str)
def test_cast(src, dst, rng):
    a = (rng.standard_normal((3, 5)) * 10).astype(src.numpy)
    g = rlx.Graph()
    g.output(rlx.cast(g.input("x", a.shape, src), dst), "y")
    out = run_graph(g, [a])["y"]
    assert out.dtype == dst.numpy
    np.testing.assert_array_equal(out, a.astype(dst.numpy))


def test_symbolic_batch_runs_with_several_sizes(rng):
    g = rlx.Graph()
    x = g.input("x", (None, 4))
    w = g.param("w", (4, 3))
    b = g.input("b", ("n",))  # a named symbol
    assert x.shape == ("x.d0", 4) and b.shape == ("n",)
    g.output(rlx.relu(x @ w) * 0.5, "y")
    g.output(b + 1.0, "z")
    cg = rlx.Session("cpu").compile(g)
    wv = rng.standard_normal((4, 3)).astype(np.float32)
    cg.set_param("w", wv)
    np.testing.assert_array_equal(cg.param("w"), wv)
    for n in (1, 5, 17):
        xv = rng.standard_normal((n, 4)).astype(np.float32)
        out = cg.run({"x": xv, "b": np.zeros(n + 1, np.float32)})
        assert list(out) == ["y", "z"]
        np.testing.assert_allclose(out["y"], np.maximum(xv @ wv, 0) * 0.5, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out["z"], np.ones(n + 1, np.float32))


def test_multi_output_op_and_list_inputs(rng):
    g = rlx.Graph()
    x = g.input("x", (4, 6))
    a, b, c = rlx.ops.split(x, axis=1, num=3)
    g.output(a + c, "ac")
    g.output(b, "b")
    xv = rng.standard_normal((4, 6)).astype(np.float32)
    out = run_graph(g, [xv])
    np.testing.assert_allclose(out["ac"], xv[:, 0:2] + xv[:, 4:6], rtol=1e-6)
    np.testing.assert_array_equal(out["b"], xv[:, 2:4])


def test_scalars_and_arrays_in_operators(rng):
    g = rlx.Graph()
    x = g.input("x", (2, 3), rlx.f64)
    k = np.arange(3, dtype=np.float64)
    g.output((3 - x) / 2 + k * x, "y")
    xv = rng.standard_normal((2, 3))
    np.testing.assert_allclose(run_graph(g, [xv])["y"], (3 - xv) / 2 + k * xv, rtol=1e-12)


def test_mixed_dtypes_promote(rng):
    g = rlx.Graph()
    i = g.input("i", (3,), rlx.i32)
    f = g.input("f", (3,), rlx.f32)
    y = i + f
    assert y.dtype == rlx.f32
    g.output(y, "y")
    iv, fv = np.array([1, 2, 3], np.int32), rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(run_graph(g, [iv, fv])["y"], iv + fv, rtol=1e-6)


def test_bf16_graph_through_uint16_bits(rng):
    g = rlx.Graph()
    x = g.input("x", (8,), rlx.bf16)
    g.output(x * 2.0, "y")
    xv = rng.standard_normal(8).astype(np.float32)
    bits = rlx.f32_to_bf16(xv)
    out = run_graph(g, {"x": bits})["y"]
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(rlx.bf16_to_f32(out), rlx.bf16_to_f32(bits) * 2)


@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_opt_levels_agree_with_numpy(opt_level, rng):
    wv = rng.standard_normal((8, 8)).astype(np.float32)
    g = rlx.Graph()
    x = g.input("x", (4, 8))
    g.output(rlx.gelu(x @ g.constant(wv) + 1.0) * rlx.sigmoid(x), "y")
    xv = rng.standard_normal((4, 8)).astype(np.float32)
    got = run_graph(g, [xv], opt_level=opt_level, threads=1)["y"]
    h = xv.astype(np.float64) @ wv + 1.0
    erf = np.vectorize(math.erf)
    want = h * 0.5 * (1 + erf(h / math.sqrt(2))) * sigmoid(xv.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# comparisons: Value operators against NumPy, result bool
COMPARE = [("lt", lambda a, b: a < b, np.less), ("le", lambda a, b: a <= b, np.less_equal),
           ("gt", lambda a, b: a > b, np.greater), ("ge", lambda a, b: a >= b, np.greater_equal)]


@pytest.mark.parametrize("name,build,fn", COMPARE, ids=[c[0] for c in COMPARE])
@pytest.mark.parametrize("dt", [rlx.f32, rlx.i32, rlx.i64], ids=str)
@pytest.mark.parametrize("shapes", [((6,), (6,)), ((2, 3), (3,)), ((4, 1), ())], ids=str)
def test_comparisons(name, build, fn, dt, shapes, rng):
    arrays = [rng.integers(-3, 3, s).astype(dt.numpy) for s in shapes]  # with ties
    g = rlx.Graph()
    a, b = (g.input(f"x{i}", x.shape, dt) for i, x in enumerate(arrays))
    y = build(a, b)
    assert y.dtype == rlx.bool_
    g.output(y, "y")
    g.output(build(a, 0), "y0")  # against a scalar
    out = run_graph(g, arrays)
    np.testing.assert_array_equal(out["y"], fn(*arrays))
    np.testing.assert_array_equal(out["y0"], fn(arrays[0], 0))


def test_scalar_powers(rng):
    g = rlx.Graph()
    x = g.input("x", (5,), rlx.f64)
    g.output(x**2 + 2.0**x, "y")
    xv = rng.standard_normal(5)
    np.testing.assert_allclose(run_graph(g, [xv])["y"], xv**2 + 2.0**xv, rtol=1e-12)


@pytest.mark.parametrize("precision", ["f32", "auto_bf16", "bf16"])
def test_compile_precision(precision, rng):
    g = rlx.Graph()
    x = g.input("x", (8, 16))
    w = g.param("w", (16, 4))
    g.output(x @ w, "y")
    xv, wv = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)
    cg = rlx.Session().compile(g, precision=precision, cache=False)
    cg.set_param("w", wv)
    out = cg.run([xv])["y"]
    assert out.dtype == np.float32
    rtol = 1e-5 if precision == "f32" else 3e-2
    np.testing.assert_allclose(out, xv @ wv, rtol=rtol, atol=rtol * 4)
    with pytest.raises(ValueError, match="precision"):
        rlx.Session().compile(g, precision="f8")


def test_compile_pass_options(rng):
    g = rlx.Graph()
    x = g.input("x", (4,))
    g.output(rlx.exp(x) * 2.0 + 1.0, "y")
    xv = rng.standard_normal(4).astype(np.float32)
    want = np.exp(xv) * 2 + 1
    for kwargs in ({"passes": []}, {"disable_passes": ["elementwise_fusion"]}, {"dims": {}}):
        np.testing.assert_allclose(run_graph(g, [xv], **kwargs)["y"], want, rtol=1e-6)
    with pytest.raises(ValueError):
        run_graph(g, [xv], passes=["no_such_pass"])


def test_runs_from_several_python_threads(rng):
    # run() releases the GIL; each run has its own arena, so threads may share a graph.
    import concurrent.futures

    g = rlx.Graph()
    x = g.input("x", ("n", 16))
    w = g.param("w", (16, 16))
    g.output(rlx.tanh(x @ w), "y")
    cg = rlx.Session().compile(g, threads=1)
    wv = rng.standard_normal((16, 16)).astype(np.float32)
    cg.set_param("w", wv)
    xs = [rng.standard_normal((n, 16)).astype(np.float32) for n in range(1, 33)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: cg.run([x])["y"], xs))
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out, np.tanh(x @ wv), rtol=1e-5, atol=1e-6)
