"""Discrete Fourier transforms with numpy.fft's signatures, through rlx's fft ops (pocketfft
on the CPU).

    X = rlx.fft.rfft(x)                              # arrays in, arrays out
    y = rlx.fft.irfft(X * H, n=x.shape[-1])
    g = rlx.grad(lambda x: rlx.sum(rlx.ops.real(rlx.fft.fft(x)) ** 2))(x)   # in grad, jit, vmap

Precision follows the input (float32 / complex64 -> complex64, otherwise complex128; NumPy
computes everything in complex128); real inputs to the complex transforms are made complex
first, as NumPy does. norm: None or "backward", "ortho", "forward". Gradients follow JAX's
convention for complex numbers (docs/python.md).
"""
import numpy as np

from ._rlx import Value, op as _op
from ._apply import call, is_traced

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")


def _norm(norm):
    if norm not in _NORMS:
        raise ValueError(f'expected norm None, "backward", "ortho" or "forward", got {norm!r}')
    return norm or "backward"


def _swap(norm):
    """The norm of the inverse direction (hfft / ihfft are irfft / rfft seen backward)."""
    return {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]


def _array(a, kind):
    """An array operand as the transform takes it: complex ("c") or real ("r"), keeping
    single precision."""
    a = np.asarray(a)
    single = a.dtype in (np.float32, np.complex64, np.float16)
    if kind == "c":
        return a.astype(np.complex64 if single else np.complex128, copy=False)
    if np.iscomplexobj(a):
        raise TypeError(f"expected a real array, got {a.dtype}")
    return a.astype(np.float32 if single else np.float64, copy=False)


def _as_complex(x):
    """A traced Value as a complex one (a cast: real ones get imaginary part 0)."""
    from ._rlx import c64, c128, f64
    if x.dtype in (c64, c128):
        return x
    return _op("cast", x, dtype=c128 if x.dtype == f64 else c64)


def _axes_and_sizes(a, s, axes):
    """The transform's axes (default all, or the last len(s)) and lengths (empty: the
    input's)."""
    if axes is None:
        axes = range(a.ndim) if s is None else range(a.ndim - len(s), a.ndim)
    axes = [int(x) for x in axes]
    if s is not None and len(s) != len(axes):
        raise ValueError(f"expected s of one length per axis ({len(axes)}), got {list(s)}")
    return axes, ([] if s is None else [int(v) for v in s])


def _run(name, kind, a, s, axes, norm, conj_in=False, conj_out=False):
    norm = _norm(norm)
    if not is_traced(a):
        a = _array(a, kind)
    axes, n = _axes_and_sizes(a, s, axes)

    def f(x):
        if kind == "c":
            x = _as_complex(x)
        if conj_in:
            x = _op("conj", x)
        y = _op(name, x, axes=axes, n=n, norm=norm)
        return _op("conj", y) if conj_out else y

    return call((name, tuple(axes), tuple(n), norm, conj_in, conj_out), f, a)


def _one(n, axis):
    return (None if n is None else [n]), [axis]


def fft(a, n=None, axis=-1, norm=None):
    """The 1-D DFT along axis (n: crop or zero-pad to n first)."""
    s, axes = _one(n, axis)
    return _run("fft", "c", a, s, axes, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The 1-D inverse DFT along axis."""
    s, axes = _one(n, axis)
    return _run("ifft", "c", a, s, axes, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The 1-D DFT of a real a: the n // 2 + 1 non-negative frequencies."""
    s, axes = _one(n, axis)
    return _run("rfft", "r", a, s, axes, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of rfft: a real output of length n (default 2 (m - 1))."""
    s, axes = _one(n, axis)
    return _run("irfft", "c", a, s, axes, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The DFT of a Hermitian-symmetric signal given by its first half: real, length n."""
    s, axes = _one(n, axis)
    return _run("irfft", "c", a, s, axes, _swap(_norm(norm)), conj_in=True)


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft: the first n // 2 + 1 values of a real signal's inverse DFT."""
    s, axes = _one(n, axis)
    return _run("rfft", "r", a, s, axes, _swap(_norm(norm)), conj_out=True)


def fftn(a, s=None, axes=None, norm=None):
    """The n-D DFT over axes (default all, or the last len(s))."""
    return _run("fft", "c", a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    return _run("ifft", "c", a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The n-D DFT of a real a; the last axis keeps its non-negative frequencies."""
    return _run("rfft", "r", a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    return _run("irfft", "c", a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _run("fft", "c", a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _run("ifft", "c", a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _run("rfft", "r", a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _run("irfft", "c", a, s, axes, norm)


# The frequency helpers are plain NumPy (no graph needed).
fftfreq = np.fft.fftfreq
rfftfreq = np.fft.rfftfreq
fftshift = np.fft.fftshift
ifftshift = np.fft.ifftshift
