"""Value.__getitem__: NumPy basic indexing (ints, slices, None, ...) as slice /
squeeze / expand_dims nodes. Indexing by arrays is rlx.ops.gather's job."""
from . import _rlx

_BIG = 2**63 - 1


def _slice_bounds(s):
    """A Python slice as ONNX-Slice (start, stop, step): out-of-range bounds clamp."""
    step = 1 if s.step is None else int(s.step)
    if step == 0:
        raise ValueError("[getitem] expected a non-zero slice step, got 0")
    start = s.start if s.start is not None else (0 if step > 0 else _BIG)
    stop = s.stop if s.stop is not None else (_BIG if step > 0 else -_BIG - 1)
    return int(start), int(stop), step


def getitem(value, index):
    if not isinstance(index, tuple):
        index = (index,)
    if sum(i is Ellipsis for i in index) > 1:
        raise IndexError("[getitem] expected at most one '...', got several")
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    if consumed > value.ndim:
        raise IndexError(f"[getitem] expected at most {value.ndim} indices, got {consumed}")
    ellipsis = [k for k, i in enumerate(index) if i is Ellipsis]
    if ellipsis:
        at = ellipsis[0]
        index = index[:at] + (slice(None),) * (value.ndim - consumed) + index[at + 1:]
    starts, stops, steps, axes, squeeze, new_axes = [], [], [], [], [], []
    axis = 0  # axis of the input
    out_axis = 0  # axis of the result before squeezing
    for i in index:
        if i is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        if isinstance(i, slice):
            if i != slice(None):
                start, stop, step = _slice_bounds(i)
                starts.append(start), stops.append(stop), steps.append(step), axes.append(axis)
        elif hasattr(i, "__index__") and not isinstance(i, bool) and getattr(i, "ndim", 0) == 0:
            k = int(i.__index__())
            dim = value.shape[axis]
            if isinstance(dim, int) and not -dim <= k < dim:
                raise IndexError(f"[getitem] expected an index in [{-dim}, {dim}) for axis "
                                 f"{axis}, got {k}")
            starts.append(k), stops.append(k + 1 if k != -1 else _BIG), steps.append(1)
            axes.append(axis)
            squeeze.append(out_axis)
        else:
            raise TypeError(f"[getitem] expected ints, slices, None or '...', got "
                            f"{type(i).__name__} (rlx.ops.gather indexes by arrays)")
        axis += 1
        out_axis += 1
    out = value
    if axes:
        out = _rlx.op("slice", out, starts=starts, stops=stops, steps=steps, axes=axes)
    if new_axes:
        # expand_dims positions count in the result before squeezing; the squeezed
        # positions shift past them.
        out = _rlx.op("expand_dims", out, axes=new_axes)
    if squeeze:
        out = _rlx.op("squeeze", out, axes=squeeze)
    return out


def iterate(value):
    """The slices value[0], value[1], ... along a static first axis."""
    if value.ndim == 0:
        raise TypeError("[iter] expected a value of rank >= 1, got a scalar")
    n = value.shape[0]
    if not isinstance(n, int):
        raise TypeError(f"[iter] expected a static first dim, got symbol '{n}'")
    return (getitem(value, i) for i in range(n))


def length(value):
    if value.ndim == 0:
        raise TypeError("[len] expected a value of rank >= 1, got a scalar")
    n = value.shape[0]
    if not isinstance(n, int):
        raise TypeError(f"[len] expected a static first dim, got symbol '{n}'")
    return n


def no_truth_value(value):
    raise TypeError("[Value] a graph value has no truth value while the graph is built; "
                    "choose with rlx.ops.select(cond, a, b) or rlx.ops.cond")
