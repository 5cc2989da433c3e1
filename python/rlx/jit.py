"""@rlx.jit: a Python function over arrays, traced into a graph once per input signature
(shapes and dtypes) and compiled; later calls with the same signature only run it.

    @rlx.jit
    def f(x, w):
        return rlx.softmax(x @ w)

    f(np.ones((2, 4), np.float32), np.ones((4, 3), np.float32))   # traces, compiles, runs
    print(f.trace(x, w))   # the traced rlx.Graph

The function sees rlx.Values (one graph input per argument, named a0, a1, ...) and
returns a Value, or tuples / lists / dicts {str: ...} of Values, nested; the call
returns NumPy arrays in the same structure (tuples for lists). Arguments are arrays (or
anything numpy.asarray takes); bf16 data is not accepted here (a uint16 array is
ambiguous): build a Graph for that.

Called with rlx.Values (inside a transform, another jit or a graph being built), a
jitted function inlines its traced graph there and returns Values: rlx.grad(f) of a
jitted f and rlx.jit(rlx.grad(f)) both work.
"""
import functools

import numpy as np

from ._rlx import Session
from .functional import _arrays, _Cached, _pack, _specs, _trace


def _array_key(items):
    """A call's signature when every item is a NumPy array: shapes and NumPy dtypes, which
    hash in C (the rlx dtypes of _specs take a binding call each); None otherwise."""
    if all(type(a) is np.ndarray for a in items):
        return tuple((a.shape, a.dtype) for a in items)
    return None


class _Jitted:
    def __init__(self, fn, device, compile_args):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._cached = _Cached(fn, "jit", Session(device), compile_args)
        # Calls on arrays by _array_key: (compiled graph, its input names, result tree,
        # output names), so a repeated signature only runs (~10 us less per call).
        self._ready = {}

    @property
    def traces(self):
        """How many times the function was traced (one per signature)."""
        return self._cached.traces

    def trace(self, *args):
        """The graph the function builds for these arguments' shapes and dtypes."""
        return _trace(self._fn, _specs(_arrays(args)), "jit")[0]

    def __call__(self, *args):
        items = _arrays(args)
        fast = _array_key(items)
        ready = self._ready.get(fast) if fast is not None else None
        if ready is not None:
            compiled, inputs, tree, names = ready
            out = compiled.run(dict(zip(inputs, items)))
            return _pack(tree, [out[n] for n in names])
        key = _specs(items)
        g, (tree, names), captured = self._cached.get(key, lambda: self._build(key))
        out = self._cached.call(key, g, items + captured)
        if fast is not None and not captured and key in self._cached.compiled:
            self._ready[fast] = (self._cached.compiled[key], g.input_names, tree, names)
        return _pack(tree, [out[n] for n in names])

    def _build(self, specs):
        g, tree, names, captured = _trace(self._fn, specs, "jit")
        return g, (tree, names), captured


def jit(fn=None, *, device="cpu", opt_level=-1, threads=0):
    """Traces fn once per input signature into a graph, compiles it for device, and
    runs the compiled graph on each call (see the module's doc)."""
    compile_args = {"opt_level": opt_level, "threads": threads}
    if fn is None:
        return lambda f: _Jitted(f, device, compile_args)
    return _Jitted(fn, device, compile_args)
