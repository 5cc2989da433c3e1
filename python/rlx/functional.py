"""Transforms over Python functions, in the JAX style: rlx.grad(fn), value_and_grad,
jvp, vjp and vmap. Each traces fn (like @rlx.jit, once per input signature) into a
graph, applies the graph transform, compiles the result and runs it on NumPy arrays.

    def loss(w, x):
        return rlx.sum(rlx.tanh(x @ w))

    dw = rlx.grad(loss)(w, x)                     # d loss / d w (argnums=0)
    ys = rlx.vmap(f, in_axes=(0, None))(xs, w)    # f over the rows of xs

These transforms do not nest yet (rlx.vmap(rlx.grad(fn)) raises NotImplementedError):
transform graphs for that, rlx.vmap(rlx.grad(g)), which do compose.
"""
import numpy as np

from . import _rlx
from ._rlx import Graph, Session, Value, dtype as _dtype


def _arrays(name, args):
    if any(isinstance(a, Value) for a in args):
        raise NotImplementedError(
            f"[{name}] function transforms and jit do not nest yet: build a graph and "
            f"transform it instead (graph transforms compose: rlx.vmap(rlx.grad(g)))")
    return [a if isinstance(a, np.ndarray) else np.asarray(a) for a in args]


def _trace(fn, specs, name):
    """(graph, kind, output names): the graph fn builds for inputs a0, a1, ... of
    (shape, dtype) specs; kind says how fn returned its outputs."""
    g = Graph(name)
    inputs = [g.input(f"a{i}", shape, _dtype(dt)) for i, (shape, dt) in enumerate(specs)]
    result = fn(*inputs)
    if isinstance(result, Value):
        kind, names, values = "value", ["out"], [result]
    elif isinstance(result, (tuple, list)):
        kind, names, values = "tuple", [f"out{i}" for i in range(len(result))], list(result)
    elif isinstance(result, dict) and all(isinstance(k, str) and k.isidentifier() for k in result):
        kind, names, values = "dict", list(result), list(result.values())
    else:
        raise TypeError(f"[{name}] expected fn to return an rlx.Value, a tuple / list or a dict "
                        f"of them, got {type(result).__name__}")
    for n, v in zip(names, values):
        if not isinstance(v, Value):
            raise TypeError(f"[{name}] expected output '{n}' to be an rlx.Value, got "
                            f"{type(v).__name__}")
        g.output(v, n)
    return g, kind, names


def _pack(kind, names, values):
    if kind == "value":
        return values[0]
    if kind == "dict":
        return dict(zip(names, values))
    return tuple(values)


def _specs(arrays):
    return tuple((a.shape, a.dtype.str) for a in arrays)


def _argnums(argnums, n, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in nums:
        if not -n <= k < n:
            raise ValueError(f"[{name}] expected argnums in [{-n}, {n}), got {k}")
    return tuple(k % n for k in nums)


class _Cached:
    """Compiled graphs of one transformed function, by input signature."""

    def __init__(self, fn, name):
        self.fn, self.name, self.cache, self.session = fn, name, {}, Session("cpu")
        self.traces = 0

    def get(self, key, build):
        entry = self.cache.get(key)
        if entry is None:
            g, extra = build()
            entry = self.session.compile(g), extra
            self.cache[key] = entry
            self.traces += 1
        return entry


def _grad_fn(fn, argnums, with_value, name):
    cached = _Cached(fn, name)

    def transformed(*args):
        arrays = _arrays(name, args)
        nums = _argnums(argnums, len(arrays), name)

        def build():
            g, kind, _ = _trace(fn, _specs(arrays), name)
            if kind != "value":
                raise TypeError(f"[{name}] expected fn to return one scalar rlx.Value")
            wrt = [f"a{k}" for k in nums]
            tg = (_rlx.value_and_grad if with_value else _rlx.grad)(g, wrt=wrt, output="out")
            return tg, None

        compiled, _ = cached.get((_specs(arrays), nums), build)
        out = compiled.run({f"a{i}": a for i, a in enumerate(arrays)})
        grads = [out[f"grad.a{k}"] for k in nums]
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        return (out["out"], g) if with_value else g

    transformed.__wrapped__ = fn
    transformed._cached = cached
    return transformed


def grad(fn, argnums=0):
    """d fn / d args[argnums] (an int, or a tuple for a tuple of gradients); fn returns a
    scalar float Value."""
    return _grad_fn(fn, argnums, False, "grad")


def value_and_grad(fn, argnums=0):
    """(fn(*args), grad(fn, argnums)(*args)) from one compiled graph."""
    return _grad_fn(fn, argnums, True, "value_and_grad")


def vmap(fn, in_axes=0, out_axes=0):
    """fn mapped over an axis of its arguments: in_axes is an int (every argument) or a
    tuple with an axis or None (not batched) per argument; out_axes an int for all
    outputs."""
    cached = _Cached(fn, "vmap")

    def transformed(*args):
        arrays = _arrays("vmap", args)
        axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(arrays)
        if len(axes) != len(arrays):
            raise ValueError(f"[vmap] expected {len(arrays)} in_axes, got {len(axes)}")
        axes = tuple(None if ax is None else ax % max(a.ndim, 1) for ax, a in zip(axes, arrays))
        sizes = {a.shape[ax] for ax, a in zip(axes, arrays) if ax is not None}
        if len(sizes) != 1:
            raise ValueError(f"[vmap] expected one batch size over the batched arguments, got "
                             f"{sorted(sizes) if sizes else 'no batched argument'}")
        specs = tuple((a.shape if ax is None else a.shape[:ax] + a.shape[ax + 1:], a.dtype.str)
                      for ax, a in zip(axes, arrays))

        def build():
            g, kind, names = _trace(fn, specs, "vmap")
            bg = _rlx.vmap(g, in_axes={f"a{i}": ax for i, ax in enumerate(axes)},
                           out_axes={n: out_axes for n in names}, size=sizes.pop())
            return bg, (kind, names)

        compiled, (kind, names) = cached.get((specs, axes, out_axes), build)
        out = compiled.run({f"a{i}": a for i, a in enumerate(arrays)})
        return _pack(kind, names, [out[n] for n in names])

    transformed.__wrapped__ = fn
    transformed._cached = cached
    return transformed


def jvp(fn, primals, tangents):
    """(fn(*primals), the directional derivative of fn at primals along tangents)."""
    primals, tangents = _arrays("jvp", primals), _arrays("jvp", tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"[jvp] expected one tangent per primal ({len(primals)}), got "
                         f"{len(tangents)}")
    g, kind, names = _trace(fn, _specs(primals), "jvp")
    jg = _rlx.jvp(g, wrt=[f"a{i}" for i in range(len(primals))])
    feed = {f"a{i}": a for i, a in enumerate(primals)}
    feed.update({f"tan.a{i}": t for i, t in enumerate(tangents)})
    out = Session("cpu").compile(jg).run(feed)
    return (_pack(kind, names, [out[n] for n in names]),
            _pack(kind, names, [out[f"tan.{n}"] for n in names]))


def vjp(fn, *primals):
    """(fn(*primals), vjp_fn): vjp_fn(cotangent) gives the tuple of cotangents of the
    primals (the cotangent has fn's output structure)."""
    primals = _arrays("vjp", primals)
    g, kind, names = _trace(fn, _specs(primals), "vjp")
    vg = _rlx.vjp(g, wrt=[f"a{i}" for i in range(len(primals))])
    compiled = Session("cpu").compile(vg)
    feed = {f"a{i}": a for i, a in enumerate(primals)}

    def cotangents(ct):
        cts = [ct] if kind == "value" else (
            [ct[n] for n in names] if kind == "dict" else list(ct))
        out = compiled.run({**feed, **{f"ct.{n}": c for n, c in zip(names, cts)}})
        return tuple(out[f"grad.a{i}"] for i in range(len(primals)))

    zero = {f"ct.{n}": np.zeros(s.shape, s.dtype) for n, s in
            zip(names, Session("cpu").compile(g).run(feed).values())}
    value = compiled.run({**feed, **zero})
    return _pack(kind, names, [value[n] for n in names]), cotangents
