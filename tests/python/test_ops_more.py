"""The rest of the core ops against NumPy (test_ops.py has the arithmetic, matmul, sums,
softmax and basic shape ops): math functions, comparisons and logic, reductions,
indexing, shape ops, normalisation, pooling and convolution, over shapes and dtypes."""
import math

import numpy as np
import pytest

import rlx
from conftest import run_graph, tolerance

FLOATS = [rlx.f32, rlx.f64, rlx.f16]
F32_64 = [rlx.f32, rlx.f64]
INTS = [rlx.i32, rlx.i64]
SOME = [rlx.f32, rlx.f64, rlx.i32]
SHAPES = [(), (7,), (3, 4), (2, 3, 5)]

erf = np.vectorize(math.erf)


def sample(dt, shape, rng, domain="any"):
    if dt == rlx.bool_:
        return rng.random(shape) < 0.5
    if not dt.is_float:
        lo = {"positive": 1, "small": -3}.get(domain, -20)
        return rng.integers(lo, 4 if domain == "small" else 20, shape).astype(dt.numpy)
    a = {"any": lambda: rng.standard_normal(shape),
         "positive": lambda: np.abs(rng.standard_normal(shape)) + 0.5,
         "small": lambda: rng.uniform(-1, 1, shape),
         "half": lambda: rng.integers(-6, 7, shape) / 2.0 + 0.25 * (rng.random(shape) < 0.3)}
    return a[domain]().astype(dt.numpy)


def compare(build, fn, arrays, dts, out_dt=None):
    """Builds build(*inputs) (one Value or a tuple), runs it, and checks every output
    against fn(*arrays) computed in float64 (for float inputs)."""
    g = rlx.Graph()
    xs = [g.input(f"x{i}", a.shape, dt) for i, (a, dt) in enumerate(zip(arrays, dts))]
    ys = build(*xs)
    ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
    for i, y in enumerate(ys):
        g.output(y, f"y{i}")
    out = run_graph(g, arrays)
    ref = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    with np.errstate(all="ignore"):
        wants = fn(*ref)
    wants = list(wants) if isinstance(wants, (tuple, list)) else [wants]
    assert len(wants) == len(ys)
    for i, (y, want) in enumerate(zip(ys, wants)):
        got = out[f"y{i}"]
        want = np.asarray(want)
        dt = out_dt or y.dtype
        assert got.shape == want.shape, (i, got.shape, want.shape)
        if y.dtype.is_float:
            rtol, atol = tolerance(y.dtype)
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)
        else:
            assert got.dtype == dt.numpy
            np.testing.assert_array_equal(got, want.astype(dt.numpy))


def cases(table, shapes):
    return [pytest.param(*row, dt, shape, id=f"{row[0]}-{dt}-{shape}")
            for row in table for dt in row[3] for shape in shapes]


def gelu_tanh(a):
    return 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))


# name, builder, NumPy reference, dtypes, domain
UNARY = [
    ("ceil", rlx.ops.ceil, np.ceil, FLOATS, "half"),
    ("floor", rlx.ops.floor, np.floor, FLOATS, "half"),
    ("round", rlx.ops.round, np.round, FLOATS, "half"),  # ties to even, as NumPy
    ("sign", rlx.ops.sign, np.sign, FLOATS + INTS, "half"),
    ("cos", rlx.ops.cos, np.cos, FLOATS, "any"),
    ("tan", rlx.ops.tan, np.tan, FLOATS, "small"),
    ("erf", rlx.ops.erf, erf, FLOATS, "any"),
    ("expm1", rlx.ops.expm1, np.expm1, FLOATS, "small"),
    ("log1p", rlx.ops.log1p, np.log1p, FLOATS, "positive"),
    ("reciprocal", rlx.ops.reciprocal, np.reciprocal, FLOATS, "positive"),
    ("rsqrt", rlx.ops.rsqrt, lambda a: 1 / np.sqrt(a), FLOATS, "positive"),
    ("softplus", rlx.ops.softplus, lambda a: np.logaddexp(0, a), FLOATS, "any"),
    ("silu", rlx.ops.silu, lambda a: a / (1 + np.exp(-a)), FLOATS, "any"),
    ("gelu", rlx.gelu, lambda a: 0.5 * a * (1 + erf(a / math.sqrt(2))), FLOATS, "any"),
    ("gelu_tanh", lambda x: rlx.ops.gelu(x, approximate="tanh"), gelu_tanh, F32_64, "any"),
    ("elu", lambda x: rlx.ops.elu(x, alpha=0.7), lambda a: np.where(a > 0, a, 0.7 * np.expm1(a)),
     F32_64, "any"),
    ("leaky_relu", lambda x: rlx.ops.leaky_relu(x, alpha=0.1),
     lambda a: np.where(a > 0, a, 0.1 * a), F32_64, "any"),
    ("hard_sigmoid", rlx.ops.hard_sigmoid, lambda a: np.clip(0.2 * a + 0.5, 0, 1), F32_64, "any"),
    ("stop_gradient", rlx.ops.stop_gradient, lambda a: a, SOME, "any"),
]


@pytest.mark.parametrize("name,build,fn,dtypes,domain,dt,shape", cases(UNARY, SHAPES))
def test_unary_math(name, build, fn, dtypes, domain, dt, shape, rng):
    compare(build, fn, [sample(dt, shape, rng, domain)], [dt])


BINARY = [
    ("atan2", rlx.ops.atan2, np.arctan2, F32_64, ("any", "any")),
    ("fmod", rlx.ops.fmod, np.fmod, F32_64 + INTS, ("any", "positive")),
    ("mod", rlx.ops.mod, np.mod, F32_64 + INTS, ("any", "positive")),
    ("eq", rlx.ops.eq, np.equal, SOME + [rlx.bool_], ("small", "small")),
    ("ne", rlx.ops.ne, np.not_equal, SOME, ("small", "small")),
    ("bitwise_and", rlx.ops.bitwise_and, np.bitwise_and, INTS, ("any", "any")),
    ("bitwise_or", rlx.ops.bitwise_or, np.bitwise_or, INTS, ("any", "any")),
    ("bitwise_xor", rlx.ops.bitwise_xor, np.bitwise_xor, INTS, ("any", "any")),
    ("logical_and", rlx.ops.logical_and, np.logical_and, [rlx.bool_], ("any", "any")),
    ("logical_or", rlx.ops.logical_or, np.logical_or, [rlx.bool_], ("any", "any")),
    ("logical_xor", rlx.ops.logical_xor, np.logical_xor, [rlx.bool_], ("any", "any")),
]
BROADCAST = [((6,), (6,)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("name,build,fn,dtypes,domains,dt,shapes", cases(BINARY, BROADCAST))
def test_binary_math_and_logic(name, build, fn, dtypes, domains, dt, shapes, rng):
    arrays = [sample(dt, s, rng, d) for s, d in zip(shapes, domains)]
    if dt.is_float and name in ("eq", "ne"):
        arrays = [np.round(a) for a in arrays]  # equal values happen
    compare(build, fn, arrays, [dt, dt])


@pytest.mark.parametrize("dt", F32_64, ids=str)
def test_predicates_and_logical_not(dt, rng):
    a = sample(dt, (3, 4), rng)
    a[0, 0], a[1, 2], a[2, 3] = np.nan, np.inf, -np.inf
    compare(lambda x: (rlx.ops.isnan(x), rlx.ops.isinf(x)),
            lambda v: (np.isnan(v), np.isinf(v)), [a], [dt])
    b = sample(rlx.bool_, (5, 2), rng)
    compare(rlx.ops.logical_not, np.logical_not, [b], [rlx.bool_])


def logsumexp(a, axis):
    m = a.max(axis=axis, keepdims=True)
    return np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m


# name, builder(x), reference(a), dtypes
REDUCE = [
    ("prod", lambda x: rlx.ops.prod(x, axes=[1]), lambda a: a.prod(axis=1), SOME),
    ("reduce_min", lambda x: rlx.ops.reduce_min(x, axes=[0, 2], keepdims=True),
     lambda a: a.min(axis=(0, 2), keepdims=True), SOME),
    ("argmax", lambda x: rlx.ops.argmax(x, axis=1), lambda a: a.argmax(axis=1), SOME),
    ("argmin", lambda x: rlx.ops.argmin(x, axis=-1, keepdims=True),
     lambda a: a.argmin(axis=-1)[..., None], SOME),
    ("logsumexp", lambda x: rlx.ops.logsumexp(x, axes=[2]),
     lambda a: logsumexp(a, 2)[..., 0], F32_64),
    ("log_softmax", lambda x: rlx.ops.log_softmax(x, axis=1),
     lambda a: a - logsumexp(a, 1), F32_64),
    ("l1_norm", lambda x: rlx.ops.l1_norm(x, axes=[1, 2]), lambda a: np.abs(a).sum(axis=(1, 2)),
     F32_64),
    ("l2_norm", lambda x: rlx.ops.l2_norm(x, axes=[0]), lambda a: np.sqrt((a * a).sum(axis=0)),
     F32_64),
    ("sort", lambda x: rlx.ops.sort(x, axis=1, stable=True),
     lambda a: (np.sort(a, axis=1, kind="stable"), np.argsort(a, axis=1, kind="stable")), SOME),
    ("top_k", lambda x: rlx.ops.top_k(x, k=2, axis=-1),
     lambda a: (-np.sort(-a, axis=-1)[..., :2], np.argsort(-a, axis=-1, kind="stable")[..., :2]),
     F32_64),
    # shape ops
    ("broadcast_to", lambda x: rlx.ops.broadcast_to(x, shape=[2] + list(x.shape)),
     lambda a: np.broadcast_to(a, (2,) + a.shape), SOME),
    ("expand_dims", lambda x: rlx.ops.expand_dims(x, axes=[0, 3]),
     lambda a: np.expand_dims(a, (0, 3)), SOME),
    ("squeeze", lambda x: rlx.ops.squeeze(rlx.ops.expand_dims(x, axes=[1]), axes=[1]),
     lambda a: a, SOME),
    ("flip", lambda x: rlx.ops.flip(x, axes=[0, 2]), lambda a: np.flip(a, (0, 2)), SOME),
    ("tile", lambda x: rlx.ops.tile(x, repeats=[1, 2, 3]), lambda a: np.tile(a, (1, 2, 3)), SOME),
    ("pad", lambda x: rlx.ops.pad(x, pads=[0, 1, 2, 1, 0, 1], value=1.5),
     lambda a: np.pad(a, [(0, 1), (1, 0), (2, 1)], constant_values=1.5), F32_64),
    ("pad_reflect", lambda x: rlx.ops.pad(x, pads=[0, 0, 1, 0, 1, 1], mode="reflect"),
     lambda a: np.pad(a, [(0, 0), (0, 1), (1, 1)], mode="reflect"), SOME),
    ("pad_edge", lambda x: rlx.ops.pad(x, pads=[1, 0, 0, 0, 0, 2], mode="edge"),
     lambda a: np.pad(a, [(1, 0), (0, 0), (0, 2)], mode="edge"), SOME),
    ("split", lambda x: rlx.ops.split(x, axis=2, sizes=[1, x.shape[2] - 1]),
     lambda a: tuple(np.split(a, [1], axis=2)), SOME),
    ("clamp", lambda x: rlx.ops.clamp(x, -0.5 * x.ndim, x.ndim + 0.0),
     lambda a: np.clip(a, -1.5, 3.0), F32_64),
    ("select", lambda x: rlx.ops.select(x > 0, x, x * 3),
     lambda a: np.where(a > 0, a, a * 3), SOME),
]
R_SHAPES = [(2, 3, 4), (3, 5, 2), (1, 4, 3)]


@pytest.mark.parametrize("name,build,fn,dtypes,dt,shape", cases(REDUCE, R_SHAPES))
def test_reductions_and_shape_ops(name, build, fn, dtypes, dt, shape, rng):
    a = sample(dt, shape, rng, "small" if name == "prod" else "any")
    if name == "sort" or name == "top_k":
        if dt.is_float:  # distinct values: the order of ties is not the point here
            a = (a + np.arange(a.size).reshape(shape) * 1e-3).astype(a.dtype)
    compare(build, fn, [a], [dt])


@pytest.mark.parametrize("dt", SOME, ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1], ids=str)
def test_gather_family(dt, axis, rng):
    data = sample(dt, (4, 5), rng)
    idx = rng.integers(0, data.shape[axis], (3, 2)).astype(np.int64)
    compare(lambda d, i: rlx.ops.gather(d, i, axis=axis),
            lambda d, i: np.take(d, i, axis=axis), [data, idx], [dt, rlx.i64])
    el = rng.integers(0, data.shape[axis], (4, 5)).astype(np.int64)
    compare(lambda d, i: rlx.ops.gather_elements(d, i, axis=axis),
            lambda d, i: np.take_along_axis(d, i, axis=axis), [data, el], [dt, rlx.i64])
    table, ids = sample(dt, (6, 3), rng), rng.integers(0, 6, (2, 4)).astype(np.int32)
    compare(rlx.ops.embedding, lambda t, i: t[i], [table, ids], [dt, rlx.i32])


@pytest.mark.parametrize("dt", F32_64, ids=str)
def test_one_hot_iota_and_dot_general(dt, rng):
    labels = rng.integers(0, 4, (5,)).astype(np.int64)
    compare(lambda i: rlx.ops.one_hot(i, depth=4, dtype=dt), lambda i: np.eye(4)[i],
            [labels], [rlx.i64])
    compare(lambda x: x + rlx.ops.iota(shape=[2, 3], dtype=dt, axis=1, graph=x.graph),
            lambda a: a + np.arange(3)[None, :], [sample(dt, (2, 3), rng)], [dt])
    a, b = sample(dt, (2, 3, 4), rng), sample(dt, (2, 4, 5), rng)
    compare(lambda x, y: rlx.ops.dot_general(x, y, lhs_contracting=[2], rhs_contracting=[1],
                                             lhs_batch=[0], rhs_batch=[0]),
            lambda x, y: np.einsum("bij,bjk->bik", x, y), [a, b], [dt, dt])


def normalise(a, axes, eps):
    m = a.mean(axis=axes, keepdims=True)
    return (a - m) / np.sqrt(((a - m) ** 2).mean(axis=axes, keepdims=True) + eps)


@pytest.mark.parametrize("dt", F32_64, ids=str)
@pytest.mark.parametrize("shape", [(4, 8), (2, 3, 6)], ids=str)
def test_normalisation(dt, shape, rng):
    x, s, b = sample(dt, shape, rng), sample(dt, shape[-1:], rng), sample(dt, shape[-1:], rng)
    compare(lambda x, s, b: rlx.ops.layer_norm(x, s, b, epsilon=1e-3),
            lambda x, s, b: normalise(x, -1, 1e-3) * s + b, [x, s, b], [dt] * 3)
    compare(lambda x, s: rlx.ops.rms_norm(x, s, epsilon=1e-4),
            lambda x, s: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-4) * s,
            [x, s], [dt] * 2)
    c = shape[1]
    if len(shape) == 3:  # [N, C, L]: batch norm (inference) and group norm
        p = [sample(dt, (c,), rng) for _ in range(3)] + [sample(dt, (c,), rng, "positive")]
        col = lambda v: v[None, :, None]  # noqa: E731
        compare(lambda x, s, b, m, v: rlx.ops.batch_norm(x, s, b, m, v, epsilon=1e-5),
                lambda x, s, b, m, v: (x - col(m)) / np.sqrt(col(v) + 1e-5) * col(s) + col(b),
                [x] + p, [dt] * 5)


@pytest.mark.parametrize("dt", F32_64, ids=str)
def test_cross_entropy(dt, rng):
    logits, labels = sample(dt, (6, 5), rng), rng.integers(0, 5, (6,)).astype(np.int64)

    def ref(z, y):
        return -(z - logsumexp(z, 1))[np.arange(6), y].mean()

    compare(rlx.ops.cross_entropy, ref, [logits, labels], [dt, rlx.i64])


def windows(a, k, s):
    """[N, C, H, W] -> [N, C, OH, OW, kh, kw] sliding windows (no padding)."""
    n, c, h, w = a.shape
    oh, ow = (h - k[0]) // s + 1, (w - k[1]) // s + 1
    out = np.empty((n, c, oh, ow) + tuple(k), a.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = a[:, :, i * s:i * s + k[0], j * s:j * s + k[1]]
    return out


@pytest.mark.parametrize("dt", F32_64, ids=str)
@pytest.mark.parametrize("stride", [1, 2], ids=str)
def test_pooling_and_conv(dt, stride, rng):
    x = sample(dt, (2, 3, 6, 5), rng)
    k = [2, 3]
    compare(lambda v: rlx.ops.max_pool(v, kernel_shape=k, strides=[stride, stride]),
            lambda a: windows(a, k, stride).max(axis=(4, 5)), [x], [dt])
    compare(lambda v: rlx.ops.avg_pool(v, kernel_shape=k, strides=[stride, stride]),
            lambda a: windows(a, k, stride).mean(axis=(4, 5)), [x], [dt])
    compare(rlx.ops.global_avg_pool, lambda a: a.mean(axis=(2, 3), keepdims=True), [x], [dt])
    w, b = sample(dt, (4, 3, 2, 3), rng), sample(dt, (4,), rng)
    compare(lambda v, w, b: rlx.ops.conv(v, w, b, strides=[stride, stride]),
            lambda a, w, b: np.einsum("ncijkl,mckl->nmij", windows(a, k, stride), w)
            + b[None, :, None, None], [x, w, b], [dt] * 3)
