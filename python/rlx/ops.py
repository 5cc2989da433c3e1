"""Every registered op as a function, generated from rlx's op registry.

    rlx.ops.softmax(x, axis=-1)
    rlx.ops.conv(x, w, strides=[1, 1], pads=[1, 1, 1, 1])
    rlx.ops.onnx.<name>(...)          # namespaced ops ("onnx.*" after rlx.onnx.load)

Each function applies the op through rlx.op (see its doc for inputs, attributes and
subgraphs) and carries the op's doc string and attribute schema. Names that are Python
keywords take a trailing underscore: rlx.ops.and_ (or getattr(rlx.ops, "and")).
"""
from . import _rlx

_cache = {}


def _signature(s):
    lo, hi = s["min_inputs"], s["max_inputs"]
    if hi == -1:
        inputs = f"*inputs (at least {lo})"
    elif lo == hi:
        inputs = ", ".join(f"x{i}" for i in range(lo)) if lo else ""
    else:
        inputs = f"*inputs ({lo} to {hi})"
    parts = [inputs] if inputs else []
    for a in s["attrs"]:
        p = f"{a['name']}: {a['kind']}"
        if a["default"] is not None:
            p += f" = {a['default']}"
        if a["choices"]:
            p += " in {" + ", ".join(a["choices"]) + "}"
        parts.append(p)
    for sub in s["subgraphs"]:
        parts.append(f"{sub}: Graph")
    return f"{s['name']}({', '.join(parts)})"


def _make(name):
    fn = _cache.get(name)
    if fn is None:
        schema = _rlx.op_schema(name)

        def fn(*inputs, **attrs):
            return _rlx.op(name, *inputs, **attrs)

        fn.__name__ = name.rsplit(".", 1)[-1]
        fn.__qualname__ = name
        fn.__module__ = __name__
        fn.__doc__ = _signature(schema) + "\n\n" + (schema["doc"] or "(no doc)")
        _cache[name] = fn
    return fn


class _Namespace:
    """The ops of one namespace: rlx.ops.onnx.<name>."""

    def __init__(self, prefix):
        self._prefix = prefix

    def __getattr__(self, name):
        return _lookup(self._prefix + "." + name)

    def __dir__(self):
        return _children(self._prefix + ".")

    def __repr__(self):
        return f"<rlx.ops namespace '{self._prefix}'>"


def _children(prefix):
    out = set()
    for n in _rlx.op_names():
        if n.startswith(prefix):
            out.add(n[len(prefix):].split(".", 1)[0])
    return sorted(out)


def _lookup(full):
    names = _rlx.op_names()
    for cand in (full, full[:-1] if full.endswith("_") else None):
        if cand is None:
            continue
        if cand in names:
            return _make(cand)
        if any(n.startswith(cand + ".") for n in names):
            return _Namespace(cand)
    raise AttributeError(f"rlx.ops has no op '{full}' (rlx.op_names() lists them)")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _lookup(name)


def __dir__():
    return _children("")
