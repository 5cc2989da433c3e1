"""How rlx.linalg, rlx.fft-style and rlx.sparse functions run: on rlx.Values (inside
@rlx.jit, a transform or a graph being built) a function adds its ops to the values'
graph and returns Values; on arrays it runs through a jitted function, traced and
compiled once per (function, static arguments, input signature), and returns NumPy
arrays. So one definition serves NumPy-style calls, jit, grad and vmap alike."""
import numpy as np

from ._rlx import Value
from .jit import jit

_jitted = {}


def is_traced(*items):
    """Whether any of items is an rlx.Value (the call is part of a graph)."""
    return any(isinstance(a, Value) for a in items)


def call(key, fn, *args):
    """fn(*args): directly on Values; on arrays through jit(fn), cached under key (what
    fn closes over: the function's name and its static arguments)."""
    if is_traced(*args):
        return fn(*args)
    j = _jitted.get(key)
    if j is None:
        j = _jitted[key] = jit(fn)
    return j(*args)


def as_float(a):
    """An array argument as the float dtype the linear-algebra kernels take (f32 stays,
    every other dtype becomes f64, as NumPy computes integers); Values pass through."""
    if isinstance(a, Value):
        return a
    a = np.asarray(a)
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float64)
