"""@rlx.jit: a Python function over arrays, traced into a graph once per input signature
(shapes and dtypes) and compiled; later calls with the same signature only run it.

    @rlx.jit
    def f(x, w):
        return rlx.softmax(x @ w)

    f(np.ones((2, 4), np.float32), np.ones((4, 3), np.float32))   # traces, compiles, runs
    print(f.trace(x, w))   # the traced rlx.Graph

The function sees rlx.Values (one graph input per argument, named a0, a1, ...) and
returns a Value, a tuple / list of Values or a dict {name: Value}; the call returns
NumPy arrays in the same structure (a tuple for a list). Arguments are arrays (or
anything numpy.asarray takes); bf16 data is not accepted here (a uint16 array is
ambiguous): build a Graph for that.
"""
import functools

from ._rlx import Session
from .functional import _arrays, _pack, _specs, _trace


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
        return _trace(self._fn, _specs(_arrays("jit", args)), "jit")[0]

    def __call__(self, *args):
        arrays = _arrays("jit", args)
        key = _specs(arrays)
        entry = self._cache.get(key)
        if entry is None:
            g, kind, names = _trace(self._fn, key, "jit")
            self.traces += 1
            entry = self._session.compile(g, **self._compile_args), kind, names
            self._cache[key] = entry
        compiled, kind, names = entry
        out = compiled.run({f"a{i}": a for i, a in enumerate(arrays)})
        return _pack(kind, names, [out[n] for n in names])


def jit(fn=None, *, device="cpu", opt_level=-1, threads=0):
    """Traces fn once per input signature into a graph, compiles it for device, and
    runs the compiled graph on each call (see the module's doc)."""
    compile_args = {"opt_level": opt_level, "threads": threads}
    if fn is None:
        return lambda f: _Jitted(f, device, compile_args)
    return _Jitted(fn, device, compile_args)
