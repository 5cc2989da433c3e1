"""rlx's typed errors raise the Python exception of the same meaning, with rlx's message:
ValueError, TypeError, NotImplementedError (NotSupported), OSError (IoError)."""
import numpy as np
import pytest

import rlx


def test_value_error_keeps_the_message():
    g = rlx.Graph()
    g.input("x", (2,))
    with pytest.raises(ValueError) as e:
        g.input("x", (3,))
    assert str(e.value) == "[input] expected a new name, got duplicate 'x'"
    with pytest.raises(ValueError, match=r"^\[input\] expected an identifier as the name"):
        g.input("1bad", (3,))


def test_shape_errors_are_value_errors():
    g = rlx.Graph()
    a, b = g.input("a", (2, 3)), g.input("b", (4, 5))
    with pytest.raises(ValueError, match=r"^\[matmul\]"):
        a @ b
    with pytest.raises(ValueError, match=r"^\[add\]"):
        a + b
    with pytest.raises(ValueError):
        g.input("c", (-1, 2))


def test_attribute_errors():
    g = rlx.Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(TypeError, match=r"^\[softmax\] expected attribute 'axis' of kind int, got"):
        rlx.ops.softmax(x, axis="last")
    with pytest.raises(TypeError, match="kind int"):
        rlx.ops.softmax(x, axis=True)  # a bool is not an int here
    with pytest.raises(TypeError, match="kind ints"):
        rlx.ops.transpose(x, perm=[1.5, 0])
    with pytest.raises(ValueError, match="colour"):
        rlx.ops.softmax(x, colour=1)  # unknown attribute
    with pytest.raises(ValueError):
        rlx.ops.gelu(x, approximate="cubic")  # not one of the choices
    with pytest.raises(ValueError, match="no_such_op"):
        rlx.op("no_such_op", x)
    with pytest.raises(ValueError, match="subgraph 'then'"):
        rlx.ops.cond(g.input("p", (), rlx.bool_), x)


def test_run_errors():
    g = rlx.Graph()
    x = g.input("x", ("n", 3))
    g.output(x * 2.0, "y")
    cg = rlx.Session("cpu").compile(g)
    with pytest.raises(TypeError, match="x"):
        cg.run({"x": np.zeros((2, 3), np.float64)})  # f64 array for an f32 input
    with pytest.raises(ValueError, match="x"):
        cg.run({"x": np.zeros((2, 4), np.float32)})
    with pytest.raises(ValueError):
        cg.run({})  # missing input
    with pytest.raises(ValueError, match="expected 1 inputs"):
        cg.run([np.zeros((2, 3), np.float32)] * 2)
    with pytest.raises(TypeError, match="expected a dict"):
        cg.run(3)
    with pytest.raises(TypeError, match="NumPy dtype"):
        cg.run({"x": np.zeros((2, 3), np.uint32)})
    # Python lists and numbers take the input's dtype.
    np.testing.assert_array_equal(cg.run({"x": [[1, 2, 3]]})["y"], [[2, 4, 6]])


def test_param_errors():
    g = rlx.Graph()
    w = g.param("w", (2, 2))
    g.output(w * 1.0, "y")
    cg = rlx.Session().compile(g)
    assert cg.param("w") is None
    with pytest.raises(ValueError):
        cg.run({})  # w unset
    with pytest.raises(TypeError, match=r"^\[set_param\] expected param 'w' of type f32\[2,2\]"):
        cg.set_param("w", np.zeros(4, np.float32))  # rank: checked when set
    with pytest.raises(TypeError, match="f64"):
        cg.set_param("w", np.zeros((2, 2)))
    cg.set_param("w", np.zeros((3, 3), np.float32))  # static dims: checked at run time
    with pytest.raises(ValueError, match="w"):
        cg.run({})
    with pytest.raises(ValueError):
        cg.set_param("nope", np.zeros((2, 2), np.float32))


def test_parse_errors_are_value_errors():
    with pytest.raises(ValueError, match=r"^\[text:1:"):
        rlx.parse_graph("graph main(%x: f32[2]) { %0 = nosuchop(%x) : f32[2] return y=%0 }")
    with pytest.raises(ValueError):
        rlx.parse_graph("not a graph")


def test_device_errors():
    with pytest.raises(ValueError, match="expected a device"):
        rlx.Session("tpu")


def test_io_errors_are_os_errors(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(OSError) as e:
        rlx.onnx.load(str(missing))
    assert str(e.value) == f"[onnx] cannot open '{missing}'"
    with pytest.raises(OSError, match=r"^\[onnx\] cannot open '.*input_9\.pb'$"):
        rlx.onnx.read_tensor(tmp_path / "input_9.pb")
    g = rlx.Graph()
    g.output(rlx.sum(g.input("x", (2,)) * g.param("w", (2,))), "loss")
    trainer = rlx.optim.Trainer(g, rlx.optim.SGD(), lr=0.1)
    with pytest.raises(OSError, match=r"^\[safetensors\] .*ck\.safetensors: expected a readable"):
        trainer.load(str(tmp_path / "ck.safetensors"))


def test_not_supported_is_not_implemented_error():
    # nonzero's output size depends on the data: it has no batching rule.
    g = rlx.Graph()
    x = g.input("x", (4,))
    g.output(rlx.ops.nonzero(x), "idx")
    with pytest.raises(NotImplementedError, match=r"^\[nonzero\] vmap"):
        rlx.vmap(g)
    # the same error from a function transform, nested in another
    with pytest.raises(NotImplementedError) as e:
        rlx.jit(rlx.vmap(lambda a: rlx.ops.nonzero(a)))(np.ones((2, 4), np.float32))
    assert str(e.value) == ("[nonzero] vmap: the number of nonzeros, and so the output's shape, "
                            "differs between batch elements")


def test_wrong_python_types_are_type_errors():
    g = rlx.Graph()
    x = g.input("x", (2, 2))
    with pytest.raises(TypeError):
        rlx.ops.cond(g.input("p", (), rlx.bool_), x, then=3, else_=4)
    with pytest.raises(TypeError):
        rlx.grad(g, wrt=[1, 2])
    with pytest.raises(TypeError):
        rlx.vmap(g, in_axes={"x": "zero"})
    with pytest.raises(TypeError, match="shape"):
        g.input("y", "2x2")
    for transform in (rlx.grad, rlx.value_and_grad, rlx.vjp, rlx.jvp, rlx.vmap, rlx.hvp,
                      rlx.Session().compile):
        with pytest.raises(TypeError):
            transform(None)  # not a null graph
    with pytest.raises(TypeError, match="expected an rlx.Value, a number or an array"):
        x + "one"
