"""The ONNX reference models (tests/data/onnx) from Python: load, compile, run with
test_data_set_0's inputs, compare with its outputs (read with the onnx module when it is
importable, else with rlx.onnx.read_tensor)."""
import numpy as np
import pytest

import rlx
from conftest import ONNX_DATA

# The hand-made reference models, and the ones real exporters wrote (realworld/: quantized,
# f16, NHWC, recurrent; export_realworld.py says which), as ctest's onnx_* tests run them.
MODELS = ["mlp", "cnn", "tiny_gpt", "vocos_head", "bert_tiny"] + sorted(
    f"realworld/{p.parent.name}" for p in ONNX_DATA.glob("realworld/*/model.onnx"))

try:
    import onnx
    from onnx import numpy_helper
except ImportError:  # the reference outputs are then read by rlx itself
    onnx = None


def read_expected(path):
    if onnx is not None:
        t = onnx.TensorProto()
        t.ParseFromString(path.read_bytes())
        return numpy_helper.to_array(t)
    return rlx.onnx.read_tensor(str(path))


@pytest.mark.parametrize("name", MODELS)
def test_reference_model(name):
    folder = ONNX_DATA / name
    data = folder / "test_data_set_0"
    model = rlx.onnx.load(folder / "model.onnx")  # a path-like or a str
    g = model.graph
    assert len(model.inputs) == len(g.input_names) and len(model.outputs) == len(g.output_names)
    inputs = {}
    for i, onnx_name in enumerate(model.inputs):
        path = data / f"input_{i}.pb"
        assert rlx.onnx.read_tensor_name(str(path)) in ("", onnx_name)
        inputs[g.input_names[i]] = rlx.onnx.read_tensor(path)
    out = rlx.Session("cpu").compile(g).run(inputs)
    outputs = sorted(data.glob("output_*.pb"))
    assert len(outputs) == len(model.outputs)
    for i, path in enumerate(outputs):
        want = read_expected(path)
        got = out[g.output_names[i]]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-4,
                                   atol=1e-5)


def test_fixed_input_shapes_fold_at_import():
    folder = ONNX_DATA / "mlp"
    x = rlx.onnx.read_tensor(str(folder / "test_data_set_0" / "input_0.pb"))
    name = rlx.onnx.load(str(folder / "model.onnx")).inputs[0]
    model = rlx.onnx.load(str(folder / "model.onnx"), input_shapes={name: list(x.shape)})
    assert model.graph.arg(model.graph.input_names[0]).shape == x.shape
    want = read_expected(folder / "test_data_set_0" / "output_0.pb")
    got = rlx.Session().compile(model.graph).run([x])
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-4, atol=1e-5)


def test_read_tensor_matches_onnx_module():
    if onnx is None:
        pytest.skip("the onnx Python module is not installed (python3-onnx)")
    for name in MODELS:
        for path in sorted((ONNX_DATA / name / "test_data_set_0").glob("*.pb")):
            mine, theirs = rlx.onnx.read_tensor(str(path)), read_expected(path)
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs)


def test_load_errors(tmp_path):
    with pytest.raises(OSError, match="no_such_model.onnx"):
        rlx.onnx.load(str(tmp_path / "no_such_model.onnx"))
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"\x08\x07\x12\xff\xff\xff\xff\xff")
    with pytest.raises(OSError):
        rlx.onnx.load(str(bad))
    with pytest.raises(OSError):
        rlx.onnx.read_tensor(str(tmp_path / "missing.pb"))


def test_unsupported_op_is_not_implemented(tmp_path):
    if onnx is None:
        pytest.skip("the onnx Python module is not installed (python3-onnx)")
    from onnx import helper, TensorProto

    node = helper.make_node("NoSuchOp", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    path = tmp_path / "unsupported.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(NotImplementedError, match="NoSuchOp"):
        rlx.onnx.load(str(path))
