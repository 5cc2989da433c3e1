"""rlx: an ML compiler and runtime, from Python.

    import numpy as np, rlx
    g = rlx.Graph()
    x = g.input("x", (None, 4))            # None: a symbolic dim
    w = g.param("w", (4, 3))
    g.output(rlx.relu(x @ w + 1.0), "y")
    cg = rlx.Session("cpu").compile(g)
    cg.set_param("w", np.ones((4, 3), np.float32))
    print(cg.run({"x": np.ones((2, 4), np.float32)})["y"])

Graphs are built from Values (operators + - * / @ ** < <= > >= and unary -, Python
numbers as constants, NumPy basic indexing x[0, 1:3, None]), rlx.<core op> functions,
rlx.op(name, ...) and rlx.ops.<name> for every registered op. @rlx.jit traces a Python
function over arrays into a compiled graph. Transforms (grad, value_and_grad, vjp, jvp,
vmap, ...) take a graph and return a graph, or take a Python function and return the
JAX-style transformed function; those nest in any order, with jit too. rlx.optim trains graphs (SGD, Adam, AdamW,
a Trainer); rlx.onnx imports ONNX models; rlx.cuda says whether a GPU is there, reports
and frees its memory pool, and picks how f32 matmul runs on it. rlx's errors raise ValueError, TypeError,
NotImplementedError or OSError with rlx's message. rlx.settings holds the runtime switches
(each starts from its RLX_* environment variable; docs/settings.md lists them).
"""
from . import _rlx
from ._rlx import (
    __version__,
    cpu_isa,
    settings,
    DType,
    Tensor,
    Graph,
    Value,
    Session,
    CompiledGraph,
    dtype,
    bf16_to_f32,
    f32_to_bf16,
    op,
    op_names,
    op_schema,
    register_op,
    parse_graph,
    # core ops with hand-written docs
    matmul,
    relu,
    gelu,
    exp,
    log,
    tanh,
    sigmoid,
    softmax,
    sum,
    mean,
    reshape,
    transpose,
    cast,
    # transforms
    hvp,
    jacfwd,
    jacrev,
    prune,
)
from ._rlx import f32, f64, f16, bf16, i8, i16, i32, i64, u8, bool_, string, c64, c128
from ._rlx import cuda
from . import ops, onnx, optim, llm, linalg, sparse, fft, signal
from .jit import jit
from . import functional as _functional


def _graph_or_function(name):
    graph_form = getattr(_rlx, name)
    function_form = getattr(_functional, name)

    def transform(f, *args, **kwargs):
        if isinstance(f, Graph):
            return graph_form(f, *args, **kwargs)
        if callable(f):
            return function_form(f, *args, **kwargs)
        raise TypeError(f"[{name}] expected an rlx.Graph or a function, got {type(f).__name__}")

    transform.__name__ = name
    transform.__doc__ = (f"rlx.{name}(graph, ...) -> Graph, or rlx.{name}(function, ...), the "
                         f"JAX-style function transform.\n\nOn a graph:\n"
                         f"{graph_form.__doc__}\n\nOn a function:\n{function_form.__doc__}")
    return transform


grad = _graph_or_function("grad")
value_and_grad = _graph_or_function("value_and_grad")
vjp = _graph_or_function("vjp")
jvp = _graph_or_function("jvp")
vmap = _graph_or_function("vmap")
from ._indexing import getitem as _getitem, iterate as _iterate, length as _length
from ._indexing import no_truth_value as _no_truth_value

boolean = bool_
Value.__getitem__ = _getitem
Value.__iter__ = _iterate
Value.__len__ = _length
Value.__bool__ = _no_truth_value
