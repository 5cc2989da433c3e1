"""@rlx.jit: a Python function over arrays, traced into a graph once per input signature
(shapes and dtypes) and compiled; later calls with the same signature only run it.

    @rlx.jit
    def f(x, w):
        return rlx.softmax(x @ w)

    f(np.ones((2, 4), np.float32), np.ones((4, 3), np.float32))   # traces, compiles, runs
    f.trace(x, w)      # the traced rlx.Graph, for inspection (print(f.trace(x, w)))

The function sees rlx.Values (one graph input per argument, named a0, a1, ...) and
returns a Value, a tuple / list of Values or a dict {name: Value}; the call returns
NumPy arrays in the same structure. Arguments are arrays (or anything numpy.asarray
takes); bf16 data is not accepted here (a uint16 array is ambiguous): build a Graph.
"""
import functools

import numpy as np

from ._rlx import Graph, Session, Value, dtype as _dtype


def _signature(args):
    arrays = [a if isinstance(a, np.ndarray) else np.asarray(a) for a in args]
    return arrays, tuple((a.shape, a.dtype.str) for a in arrays)


def _outputs(result):
    """(kind, names, values) of what the traced function returned."""
    if isinstance(result, Value):
        return "value", ["out"], [result]
    if isinstance(result, (tuple, list)):
        return type(result).__name__, [f"out{i}" for i in range(len(result))], list(result)
    if isinstance(result, dict):
        return "dict", list(result), list(result.values())
    raise TypeError(f"[jit] expected the function to return an rlx.Value, a tuple / list or a "
                    f"dict of them, got {type(result).__name__}")


class _Jitted:
    def __init__(self, fn, device, compile_args):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._session = Session(device)
        self._compile_args = compile_args
        self._cache = {}
        self.traces = 0  # how many times the function was traced (one per signature)

    def trace(self, *args):
        """The graph the function builds for these arguments' shapes and dtypes."""
        arrays, _ = _signature(args)
        return self._trace(arrays)[0]

    def _trace(self, arrays):
        g = Graph("jit")
        inputs = [g.input(f"a{i}", a.shape, _dtype(a.dtype)) for i, a in enumerate(arrays)]
        kind, names, values = _outputs(self._fn(*inputs))
        for i, (name, v) in enumerate(zip(names, values)):
            if not isinstance(v, Value):
                raise TypeError(f"[jit] expected output '{name}' to be an rlx.Value, got "
                                f"{type(v).__name__}")
            g.output(v, name if kind == "dict" and name.isidentifier() else f"out{i}")
        return g, kind, names

    def __call__(self, *args):
        arrays, key = _signature(args)
        entry = self._cache.get(key)
        if entry is None:
            g, kind, names = self._trace(arrays)
            self.traces += 1
            entry = self._session.compile(g, **self._compile_args), kind, names
            self._cache[key] = entry
        compiled, kind, names = entry
        values = list(compiled.run(arrays).values())  # in output order
        if kind == "value":
            return values[0]
        if kind == "dict":
            return dict(zip(names, values))
        return tuple(values) if kind == "tuple" else values


def jit(fn=None, *, device="cpu", opt_level=-1, threads=0):
    """Traces fn once per input signature into a graph, compiles it for device, and
    runs the compiled graph on each call (see the module's doc)."""
    compile_args = {"opt_level": opt_level, "threads": threads}
    if fn is None:
        return lambda f: _Jitted(f, device, compile_args)
    return _Jitted(fn, device, compile_args)
