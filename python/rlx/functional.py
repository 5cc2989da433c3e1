"""Transforms over Python functions, in the JAX style: rlx.grad(fn), value_and_grad,
jvp, vjp and vmap. Each traces fn (like @rlx.jit, once per input signature) into a
graph and applies the graph transform to it.

    def loss(w, x):
        return rlx.sum(rlx.tanh(x @ w))

    dw = rlx.grad(loss)(w, x)                     # d loss / d w (argnums=0)
    ys = rlx.vmap(f, in_axes=(0, None))(xs, w)    # f over the rows of xs
    hess = rlx.grad(rlx.grad(f))(x)               # they nest, in any order
    per_example = rlx.vmap(rlx.grad(loss), in_axes=(None, 0))(w, xs)

Called with arrays, a transformed function compiles the transformed graph and runs
it. Called with rlx.Values (inside another transform, @rlx.jit or a graph being
built), it inlines the transformed graph into the values' graph and returns Values:
that is how the transforms compose, since graph transforms compose.

A nested function may use Values of an outer trace it closes over, as in
rlx.grad(lambda w: loss(w, x))(w) inside another transform: the inner trace takes each
as an extra input (c0, c1, ...: constants to the inner transform; the outer transforms
see through them) and the call binds it to the outer Value.
"""
import numpy as np

from . import _rlx
from ._rlx import Graph, Session, Value, dtype as _dtype


def _outer(items):
    """The graph being built when one of items is a Value (a nested call: the innermost
    trace among their graphs), else None."""
    return _rlx._op_graph(*items)


def _arrays(args):
    """args as Values (kept) and NumPy arrays."""
    return [a if isinstance(a, (np.ndarray, Value)) else np.asarray(a) for a in args]


def _trace(fn, specs, name):
    """(graph, tree, output names, captured): the graph fn builds for inputs a0, a1, ...
    of (shape, dtype) specs; tree is fn's result with each Value replaced by the index of
    its output (see _flatten); captured, the outer Values fn closes over, which the graph
    takes as inputs c0, c1, ... after the a's."""
    g = Graph(name)
    inputs = [g.input(f"a{i}", shape, _dtype(dt)) for i, (shape, dt) in enumerate(specs)]
    g._trace_push()
    try:
        tree, leaves, names = _flatten(fn(*inputs), name)
        for n, v in zip(names, leaves):
            g.output(v, n)
    finally:
        captured = g._trace_pop()
    return g, tree, names, captured


def _flatten(result, name):
    """(tree, leaves, names) of a function's result: a Value, or tuples / lists / dicts of
    them, nested. tree has each Value replaced by its leaf index (lists become tuples);
    names are the leaves' output names, by path: "out" for a lone Value, "out1" for the
    second of a tuple, the key of a dict, "out1_w" for a nested one."""
    leaves, names = [], []

    def walk(x, path):
        if isinstance(x, Value):
            leaves.append(x)
            names.append(path or "out")
            return len(leaves) - 1
        if isinstance(x, (tuple, list)):
            return tuple(walk(v, f"{path}_{i}" if path else f"out{i}") for i, v in enumerate(x))
        if isinstance(x, dict) and all(isinstance(k, str) for k in x):
            return {k: walk(v, f"{path}_{k}" if path else k) for k, v in x.items()}
        raise TypeError(f"[{name}] expected fn to return an rlx.Value, or tuples / lists / "
                        f"dicts (with str keys) of them, got {type(x).__name__}"
                        + (f" at '{path}'" if path else ""))

    tree = walk(result, "")
    if len(set(names)) != len(names):  # dict keys that clash with generated names
        names = [f"out{i}" for i in range(len(leaves))]
    return tree, leaves, names


def _pack(tree, values):
    """tree (from _flatten) with its leaf indices replaced by values."""
    if isinstance(tree, int):
        return values[tree]
    if isinstance(tree, tuple):
        return tuple(_pack(t, values) for t in tree)
    return {k: _pack(t, values) for k, t in tree.items()}


def _leaves_like(tree, x, name):
    """The leaves of x, which has tree's structure (a cotangent of fn's result)."""
    if isinstance(tree, int):
        return [x]
    if isinstance(tree, tuple) and isinstance(x, (tuple, list)) and len(x) == len(tree):
        return [leaf for t, v in zip(tree, x) for leaf in _leaves_like(t, v, name)]
    if isinstance(tree, dict) and isinstance(x, dict) and set(x) == set(tree):
        return [leaf for k, t in tree.items() for leaf in _leaves_like(t, x[k], name)]
    raise ValueError(f"[{name}] expected a cotangent with the structure of fn's result, got "
                     f"{type(x).__name__} where the result has {_describe(tree)}")


def _describe(tree):
    if isinstance(tree, int):
        return "a Value"
    if isinstance(tree, tuple):
        return f"a tuple of {len(tree)}"
    return f"a dict with keys {sorted(tree)}"


def _specs(items):
    """The signature of arrays and Values: ((shape, rlx dtype), ...); a symbolic dim is
    its name."""
    return tuple((tuple(a.shape), a.dtype if isinstance(a, Value) else _dtype(a.dtype))
                 for a in items)


def _call(graph, items, compiled=None):
    """graph's outputs {name: array or Value} with its args (inputs, in order) bound to
    items: inlined into the graph being built when an item is a Value, else compiled (or
    `compiled`, graph's compiled form) and run."""
    outer = _outer(items)
    if outer is not None:
        return dict(zip(graph.output_names, outer.inline(graph, list(items))))
    if compiled is None:
        compiled = Session("cpu").compile(graph)
    return compiled.run(dict(zip(graph.input_names, items)))


def _argnums(argnums, n, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in nums:
        if not -n <= k < n:
            raise ValueError(f"[{name}] expected argnums in [{-n}, {n}), got {k}")
    return tuple(k % n for k in nums)


class _Cached:
    """The transformed graphs of one function by signature, and their compiled forms."""

    def __init__(self, fn, name, session=None, compile_args=None):
        self.fn, self.name, self.graphs, self.compiled = fn, name, {}, {}
        self.session, self.compile_args = session or Session("cpu"), compile_args or {}
        self.traces = 0  # how many times fn was traced (one per signature)

    def get(self, key, build):
        """(graph, extra, captured) for key; build() makes them the first time. A graph
        that captured outer Values is particular to this call: it is not kept."""
        entry = self.graphs.get(key)
        if entry is None:
            entry = build()
            self.traces += 1
            if not entry[2]:
                self.graphs[key] = entry
        return entry

    def call(self, key, graph, items):
        """_call with graph compiled once per key."""
        if _outer(items) is not None:
            return _call(graph, items)
        compiled = self.compiled.get(key)
        if compiled is None:
            compiled = self.compiled[key] = self.session.compile(graph, **self.compile_args)
        return _call(graph, items, compiled)


def _grad_fn(fn, argnums, with_value, name):
    cached = _Cached(fn, name)

    def transformed(*args):
        items = _arrays(args)
        nums = _argnums(argnums, len(items), name)
        key = (_specs(items), nums)

        def build():
            g, tree, _, captured = _trace(fn, key[0], name)
            if tree != 0:
                raise TypeError(f"[{name}] expected fn to return one scalar rlx.Value")
            wrt = [f"a{k}" for k in nums]
            transform = _rlx.value_and_grad if with_value else _rlx.grad
            return transform(g, wrt=wrt, output="out"), None, captured

        graph, _, captured = cached.get(key, build)
        out = cached.call(key, graph, items + captured)
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
    """(fn(*args), grad(fn, argnums)(*args)) from one graph."""
    return _grad_fn(fn, argnums, True, "value_and_grad")


def vmap(fn, in_axes=0, out_axes=0):
    """fn mapped over an axis of its arguments: in_axes is an int (every argument) or a
    tuple with an axis or None (not batched) per argument; out_axes an int for all
    outputs."""
    cached = _Cached(fn, "vmap")

    def transformed(*args):
        items = _arrays(args)
        axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(items)
        if len(axes) != len(items):
            raise ValueError(f"[vmap] expected {len(items)} in_axes, got {len(axes)}")
        axes = tuple(None if ax is None else ax % max(a.ndim, 1) for ax, a in zip(axes, items))
        sizes = {a.shape[ax] for ax, a in zip(axes, items) if ax is not None}
        if len(sizes) != 1:
            raise ValueError(f"[vmap] expected one batch size over the batched arguments, got "
                             f"{sorted(sizes, key=str) if sizes else 'no batched argument'}")
        size = sizes.pop()
        specs = tuple((shape if ax is None else shape[:ax] + shape[ax + 1:], dt)
                      for ax, (shape, dt) in zip(axes, _specs(items)))
        key = (specs, axes, out_axes, size)

        def build():
            g, tree, names, captured = _trace(fn, specs, "vmap")
            in_ax = {f"a{i}": ax for i, ax in enumerate(axes)}
            in_ax.update({f"c{k}": None for k in range(len(captured))})  # not batched here
            bg = _rlx.vmap(g, in_axes=in_ax, out_axes={n: out_axes for n in names}, size=size)
            return bg, (tree, names), captured

        graph, (tree, names), captured = cached.get(key, build)
        out = cached.call(key, graph, items + captured)
        return _pack(tree, [out[n] for n in names])

    transformed.__wrapped__ = fn
    transformed._cached = cached
    return transformed


def jvp(fn, primals, tangents):
    """(fn(*primals), the directional derivative of fn at primals along tangents)."""
    primals, tangents = _arrays(primals), _arrays(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"[jvp] expected one tangent per primal ({len(primals)}), got "
                         f"{len(tangents)}")
    g, tree, names, captured = _trace(fn, _specs(primals), "jvp")
    jg = _rlx.jvp(g, wrt=[f"a{i}" for i in range(len(primals))])
    out = _call(jg, primals + captured + tangents)
    return (_pack(tree, [out[n] for n in names]),
            _pack(tree, [out[f"tan.{n}"] for n in names]))


def vjp(fn, *primals):
    """(fn(*primals), vjp_fn): vjp_fn(cotangent) gives the tuple of cotangents of the
    primals (the cotangent has fn's output structure)."""
    primals = _arrays(primals)
    g, tree, names, captured = _trace(fn, _specs(primals), "vjp")
    vg = _rlx.vjp(g, wrt=[f"a{i}" for i in range(len(primals))])
    args = primals + captured
    compiled = None if _outer(args) is not None else Session("cpu").compile(vg)
    value = _call(g, args)

    def cotangents(ct):
        cts = _leaves_like(tree, ct, "vjp")
        by_name = dict(zip(names, _arrays(cts)))
        # vg's inputs: g's args, then a cotangent per float output.
        items = args + [by_name[n[len("ct."):]] for n in vg.input_names if n.startswith("ct.")]
        nested = _outer(items) is not None
        out = _call(vg, items, None if nested else compiled)
        return tuple(out[f"grad.a{i}"] for i in range(len(primals)))

    return _pack(tree, [value[n] for n in names]), cotangents
