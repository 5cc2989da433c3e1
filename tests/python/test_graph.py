"""Graph building from Python: args, constants, outputs, rlx.op / rlx.ops with each
attribute kind, subgraphs, the text format."""
import numpy as np
import pytest

import rlx
from conftest import run_graph


def test_args_and_types():
    g = rlx.Graph("net")
    x = g.input("x", (None, "seq", 8), rlx.bf16)
    w = g.param("w", 8, "f32")
    s = g.input("s", ())
    assert (x.shape, x.dtype, x.ndim) == (("x.d0", "seq", 8), rlx.bf16, 3)
    assert (w.shape, w.dtype) == ((8,), rlx.f32)
    assert s.shape == () and s.ndim == 0
    assert g.input_names == ["x", "s"] and g.param_names == ["w"] and g.name == "net"
    assert g.arg("w").shape == (8,)
    g.output(s * 2.0)
    g.output(w, "w_out")
    assert g.output_names == ["out0", "w_out"]
    assert set(g.outputs()) == {"out0", "w_out"}
    assert "rlx.Value" in repr(s) and "f32[]" in repr(s)


def test_print_and_parse_roundtrip(rng):
    g = rlx.Graph()
    x = g.input("x", ("batch", 4))
    w = g.param("w", (4, 2))
    g.output(rlx.softmax(rlx.relu(x @ w) - 1.0, axis=-1), "y")
    text = str(g)
    assert text.startswith("graph main(%x: f32[batch,4], param %w: f32[4,2])")
    assert "matmul(%x, %w)" in text and "softmax" in text and "return y=" in text
    h = rlx.parse_graph(text)
    assert str(h) == text
    xv, wv = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    outs = []
    for graph in (g, h):
        cg = rlx.Session().compile(graph)
        cg.set_param("w", wv)
        outs.append(cg.run({"x": xv})["y"])
    np.testing.assert_array_equal(outs[0], outs[1])


def test_parse_hand_written_text(rng):
    h = rlx.parse_graph("""
      graph main(%a: f32[3], %b: f32[3]) {
        %s = add(%a, %b) : f32[3]
        %m = mul(%s, %a) : f32[3]   // a comment
        return out=%m
      }""")
    av, bv = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(run_graph(h, [av, bv])["out"], (av + bv) * av, rtol=1e-6)


def test_constants(rng):
    g = rlx.Graph()
    c = g.constant(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert (c.dtype, c.shape) == (rlx.i32, (2, 3))
    h = g.constant([1.5, 2.5, 3.5], dtype=rlx.f32)
    assert h.dtype == rlx.f32
    b = g.constant([1.0, 2.0, 3.0], dtype=rlx.bf16)
    assert b.dtype == rlx.bf16
    g.output(c, "c")
    g.output(h * 2.0, "h")
    out = run_graph(g, {})
    np.testing.assert_array_equal(out["c"], np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(out["h"], [3, 5, 7])


# op, inputs (shapes), attrs (one of each kind), NumPy reference
ATTR_CASES = [
    ("int", "softmax", [(2, 5)], {"axis": 0},
     lambda a: np.exp(a) / np.exp(a).sum(0, keepdims=True)),
    ("int_numpy", "cumsum", [(3, 4)], {"axis": np.int64(1)}, lambda a: np.cumsum(a, 1)),
    ("float", "leaky_relu", [(6,)], {"alpha": 0.25}, lambda a: np.where(a > 0, a, 0.25 * a)),
    ("float_from_int", "leaky_relu", [(6,)], {"alpha": 2}, lambda a: np.where(a > 0, a, 2 * a)),
    ("string", "gelu", [(5,)], {"approximate": "tanh"},
     lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))),
    ("bool", "sum", [(2, 3)], {"axes": [1], "keepdims": True}, lambda a: a.sum(1, keepdims=True)),
    ("ints", "transpose", [(2, 3, 4)], {"perm": (2, 0, 1)}, lambda a: a.transpose(2, 0, 1)),
    ("ints_from_int", "sum", [(2, 3)], {"axes": 0}, lambda a: a.sum(0)),
    ("ints_numpy", "reshape", [(2, 6)], {"shape": np.array([3, 4])}, lambda a: a.reshape(3, 4)),
    ("dtype", "cast", [(4,)], {"dtype": rlx.i32}, lambda a: a.astype(np.int32)),
    ("dtype_name", "cast", [(4,)], {"dtype": "f64"}, lambda a: a.astype(np.float64)),
    ("dtype_numpy", "cast", [(4,)], {"dtype": np.float16}, lambda a: a.astype(np.float16)),
]


@pytest.mark.parametrize("kind,name,shapes,attrs,fn", ATTR_CASES, ids=[c[0] for c in ATTR_CASES])
@pytest.mark.parametrize("via", ["op", "ops"])
def test_attribute_kinds(kind, name, shapes, attrs, fn, via, rng):
    arrays = [(rng.standard_normal(s) * 3).astype(np.float32) for s in shapes]
    g = rlx.Graph()
    xs = [g.input(f"x{i}", a.shape) for i, a in enumerate(arrays)]
    y = rlx.op(name, *xs, **attrs) if via == "op" else getattr(rlx.ops, name)(*xs, **attrs)
    g.output(y, "y")
    out = run_graph(g, arrays)["y"]
    want = fn(*arrays)
    assert out.dtype == want.dtype
    np.testing.assert_allclose(out, want, rtol=1e-3 if want.dtype == np.float16 else 1e-5,
                               atol=1e-5)


def test_tensor_and_float_list_attributes():
    g = rlx.Graph()
    c = rlx.op("constant", graph=g, value=np.array([[1, 2], [3, 4]], np.int64))
    assert (c.dtype, c.shape) == (rlx.i64, (2, 2))
    oh = rlx.ops.one_hot(g.constant(np.array([0, 2], np.int64)), depth=3, on_value=5.0,
                         off_value=-1.0, dtype=rlx.f32)
    g.output(c, "c")
    g.output(oh, "oh")
    out = run_graph(g, {})
    np.testing.assert_array_equal(out["c"], [[1, 2], [3, 4]])
    np.testing.assert_array_equal(out["oh"], [[5, -1, -1], [-1, -1, 5]])


def test_zero_input_op_needs_a_graph():
    g = rlx.Graph()
    i = rlx.ops.iota(graph=g, shape=[2, 3], axis=1)
    assert (i.dtype, i.shape) == (rlx.i64, (2, 3))
    g.output(i, "i")
    np.testing.assert_array_equal(run_graph(g, {})["i"], [[0, 1, 2], [0, 1, 2]])
    with pytest.raises(ValueError, match="graph="):
        rlx.ops.iota(shape=[2])


def test_multi_output_ops_return_tuples(rng):
    g = rlx.Graph()
    x = g.input("x", (2, 5))
    vals, idx = rlx.ops.top_k(x, k=2)
    assert (vals.shape, idx.dtype) == ((2, 2), rlx.i64)
    g.output(vals, "v")
    g.output(idx, "i")
    xv = rng.standard_normal((2, 5)).astype(np.float32)
    out = run_graph(g, [xv])
    want_idx = np.argsort(-xv, axis=1)[:, :2]
    np.testing.assert_array_equal(out["i"], want_idx)
    np.testing.assert_array_equal(out["v"], np.take_along_axis(xv, want_idx, 1))


def test_cond_with_subgraphs(rng):
    def branch(scale):
        b = rlx.Graph("branch")
        v = b.input("v", (3,))
        b.output(v * scale, "r")
        return b

    g = rlx.Graph()
    p = g.input("p", (), rlx.bool_)
    x = g.input("x", (3,))
    g.output(rlx.ops.cond(p, x, then=branch(2.0), else_=branch(-1.0)), "y")
    xv = rng.standard_normal(3).astype(np.float32)
    cg = rlx.Session().compile(g)
    np.testing.assert_allclose(cg.run({"p": np.array(True), "x": xv})["y"], 2 * xv)
    np.testing.assert_allclose(cg.run({"p": np.array(False), "x": xv})["y"], -xv)


def test_ops_namespace_is_the_registry():
    names = rlx.op_names()
    assert len(names) > 50 and names == sorted(names)
    for name in ("add", "matmul", "softmax", "conv", "layer_norm", "cross_entropy"):
        assert name in names
        assert name in dir(rlx.ops)
        fn = getattr(rlx.ops, name)
        schema = rlx.op_schema(name)
        assert schema["doc"] and schema["doc"] in fn.__doc__
        assert fn.__doc__.startswith(name + "(")
        for a in schema["attrs"]:
            assert a["name"] in fn.__doc__
    assert "axis: int = -1" in rlx.ops.softmax.__doc__
    assert 'in {mean, sum, none}' in rlx.ops.cross_entropy.__doc__
    assert rlx.ops.while_ is getattr(rlx.ops, "while")  # keywords take a trailing _
    assert "body" in rlx.ops.while_.__doc__
    with pytest.raises(AttributeError, match="no op 'no_such_op'"):
        rlx.ops.no_such_op
    for fn in (rlx.matmul, rlx.relu, rlx.softmax, rlx.sum, rlx.grad, rlx.vmap):
        assert fn.__doc__ and len(fn.__doc__) > 20


def test_onnx_namespace_ops_after_load():
    from conftest import ONNX_DATA
    rlx.onnx.load(str(ONNX_DATA / "mlp" / "model.onnx"))
    onnx_ops = [n for n in rlx.op_names() if n.startswith("onnx.")]
    if not onnx_ops:
        pytest.skip("no onnx.* ops registered")
    leaf = onnx_ops[0].split(".", 1)[1]
    assert leaf in dir(rlx.ops.onnx)
    assert getattr(rlx.ops.onnx, leaf).__doc__.startswith(onnx_ops[0])


def test_values_of_two_graphs_do_not_mix():
    g, h = rlx.Graph("g"), rlx.Graph("h")
    a, b = g.input("a", (2,)), h.input("b", (2,))
    with pytest.raises(ValueError, match="one graph"):
        a + b
    with pytest.raises(ValueError, match="graph 'g'"):
        h.output(a)


# index expressions, built with a helper so that each reads as written
class _I:
    def __getitem__(self, i):
        return i


I = _I()
INDEXES = [I[0], I[-1], I[1:3], I[::2], I[::-1], I[-3:], I[:, 1], I[..., 0], I[1, ..., 2:],
           I[None], I[:, None, 2], I[0, :, None, ::-2], I[2:1], I[-100:100], I[1, 2, 3],
           I[..., None]]


@pytest.mark.parametrize("index", INDEXES, ids=str)
def test_getitem_matches_numpy(index, rng):
    xv = rng.standard_normal((4, 5, 6)).astype(np.float32)
    g = rlx.Graph()
    x = g.input("x", xv.shape)
    y = x[index]
    want = xv[index]
    assert y.shape == want.shape
    g.output(y, "y")
    np.testing.assert_array_equal(run_graph(g, [xv])["y"], want)


def test_getitem_errors():
    g = rlx.Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(IndexError):
        x[2]
    with pytest.raises(IndexError):
        x[0, 0, 0]
    with pytest.raises(ValueError, match="step"):
        x[::0]
    with pytest.raises(TypeError, match="gather"):
        x[np.array([0, 1])]


def test_iteration_length_and_truth(rng):
    g = rlx.Graph()
    x = g.input("x", (3, 2))
    rows = list(x)
    assert len(rows) == 3 == len(x) and rows[0].shape == (2,)
    g.output(rows[2] - rows[0], "d")
    xv = rng.standard_normal((3, 2)).astype(np.float32)
    np.testing.assert_array_equal(run_graph(g, [xv])["d"], xv[2] - xv[0])
    s = g.input("s", (None, 2))
    with pytest.raises(TypeError, match="static first dim"):
        list(s)
    with pytest.raises(TypeError, match="static first dim"):
        len(s)
    with pytest.raises(TypeError, match="no truth value"):
        if x > 0:
            pass
