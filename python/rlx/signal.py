"""Short-time Fourier transforms and windows with torch's signatures, through rlx's stft /
istft ops (built from pad, gather, the FFTs and an overlap-add, so they run in jit, grad and
vmap and on every device that runs those).

    w = rlx.signal.hann_window(400)
    S = rlx.signal.stft(wave, n_fft=400, hop_length=160, window=w)     # [..., 201, frames]
    y = rlx.signal.istft(S, n_fft=400, hop_length=160, window=w, length=wave.shape[-1])

Arrays in give NumPy arrays out; rlx.Values give Values. Precision follows the input
(float32 -> complex64, float64 -> complex128); the window is cast to the signal's real
precision.
"""
import numpy as np

from ._rlx import Value, op as _op
from ._apply import call, is_traced

__all__ = ["stft", "istft", "hann_window", "hamming_window", "blackman_window",
           "mel_filterbank"]

_PAD_MODES = ("reflect", "constant", "replicate")


def _cosine_window(n, periodic, coeffs, dtype):
    """a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N), N = n (periodic) or n - 1."""
    n = int(n)
    if n < 0:
        raise ValueError(f"expected a window length >= 0, got {n}")
    if n <= 1:
        return np.ones(n, dtype)
    k = np.arange(n, dtype=np.float64)
    t = 2 * np.pi * k / (n if periodic else n - 1)
    a0, a1, a2 = coeffs
    return (a0 - a1 * np.cos(t) + a2 * np.cos(2 * t)).astype(dtype)


def hann_window(window_length, periodic=True, dtype=np.float32):
    """torch.hann_window: 0.5 - 0.5 cos(2 pi k / N)."""
    return _cosine_window(window_length, periodic, (0.5, 0.5, 0.0), dtype)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, dtype=np.float32):
    """torch.hamming_window: alpha - beta cos(2 pi k / N)."""
    return _cosine_window(window_length, periodic, (alpha, beta, 0.0), dtype)


def blackman_window(window_length, periodic=True, dtype=np.float32):
    """torch.blackman_window: 0.42 - 0.5 cos(2 pi k / N) + 0.08 cos(4 pi k / N)."""
    return _cosine_window(window_length, periodic, (0.42, 0.5, 0.08), dtype)


def _hz_to_mel(f, scale):
    if scale == "htk":
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f = np.asarray(f, np.float64)  # slaney: linear to 1 kHz, logarithmic above
    return np.where(f < 1000.0, f * 3.0 / 200.0,
                    15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0))


def _mel_to_hz(m, scale):
    if scale == "htk":
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    m = np.asarray(m, np.float64)
    return np.where(m < 15.0, m * 200.0 / 3.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)))


def mel_filterbank(n_freqs, f_min, f_max, n_mels, sample_rate, norm=None, mel_scale="htk",
                   dtype=np.float32):
    """torchaudio.functional.melscale_fbanks: [n_freqs, n_mels] triangular filters over the
    frequencies of a one-sided spectrum (n_freqs = n_fft // 2 + 1), spaced evenly in mel
    (mel_scale "htk" or "slaney"); norm "slaney" scales each to unit area."""
    if mel_scale not in ("htk", "slaney") or norm not in (None, "slaney"):
        raise ValueError(f"expected mel_scale htk / slaney and norm None / slaney, got "
                         f"{mel_scale!r}, {norm!r}")
    freqs = np.linspace(0, sample_rate // 2, n_freqs)
    m = np.linspace(_hz_to_mel(f_min, mel_scale), _hz_to_mel(f_max, mel_scale), n_mels + 2)
    f_pts = _mel_to_hz(m, mel_scale)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = np.maximum(0.0, np.minimum(down, up))
    if norm == "slaney":
        fb *= 2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels])
    return fb.astype(dtype)


def _signal(x):
    """An array signal as the op takes it: f32 / c64 stay, other reals become f64, other
    complex numbers c128."""
    if isinstance(x, Value):
        return x
    x = np.asarray(x)
    if np.iscomplexobj(x):
        return x.astype(np.complex64 if x.dtype == np.complex64 else np.complex128, copy=False)
    return x.astype(np.float32 if x.dtype in (np.float32, np.float16) else np.float64,
                    copy=False)


def _real_dtype(x):
    from ._rlx import f32, c64
    if isinstance(x, Value):
        return np.float32 if x.dtype in (f32, c64) else np.float64
    return np.float32 if x.dtype in (np.float32, np.complex64) else np.float64


def _window(x, n_fft, win_length, window):
    """The window as an array of the signal's real precision (a rectangular one of
    win_length when only that is given; None: none)."""
    win_length = n_fft if win_length is None else int(win_length)
    if not 1 <= win_length <= n_fft:
        raise ValueError(f"expected 1 <= win_length <= n_fft = {n_fft}, got {win_length}")
    if window is None:
        return None if win_length == n_fft else np.ones(win_length, _real_dtype(x))
    if isinstance(window, Value):
        return window
    window = np.asarray(window)
    if window.ndim != 1 or window.shape[0] != win_length:
        raise ValueError(f"expected a 1-D window of win_length = {win_length} values, got "
                         f"shape {window.shape}")
    return window.astype(_real_dtype(x), copy=False)


def _is_complex(x):
    from ._rlx import c64, c128
    return x.dtype in (c64, c128) if isinstance(x, Value) else np.iscomplexobj(x)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=True):
    """torch.stft: [..., L] -> [..., n_fft // 2 + 1 (onesided) or n_fft, frames], complex
    (return_complex=False: the real and imaginary parts in a last axis of 2)."""
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"expected pad_mode in {_PAD_MODES}, got {pad_mode!r}")
    x = _signal(input)
    n_fft = int(n_fft)
    w = _window(x, n_fft, win_length, window)
    onesided = not _is_complex(x) if onesided is None else bool(onesided)
    attrs = dict(n_fft=n_fft, hop_length=int(hop_length or n_fft // 4), center=bool(center),
                 pad_mode=pad_mode, normalized=bool(normalized), onesided=onesided)

    def f(x, *w):
        y = _op("stft", x, *w, **attrs)
        if return_complex:
            return y
        parts = [_op("expand_dims", _op(p, y), axes=[-1]) for p in ("real", "imag")]
        return _op("concat", *parts, axis=-1)

    key = ("stft", tuple(sorted(attrs.items())), bool(return_complex), w is None)
    return call(key, f, x, *([] if w is None else [w]))


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """torch.istft: [..., freqs, frames] complex -> [..., length] real."""
    if return_complex:
        raise NotImplementedError("istft returns real signals (return_complex=False)")
    x = input if isinstance(input, Value) else np.asarray(input)
    if not _is_complex(x):
        raise TypeError(f"expected a complex spectrogram, got {x.dtype}")
    if not isinstance(x, Value):
        x = x.astype(np.complex64 if x.dtype == np.complex64 else np.complex128, copy=False)
    n_fft = int(n_fft)
    w = _window(x, n_fft, win_length, window)
    freqs = x.shape[-2]
    onesided = (freqs != n_fft) if onesided is None else bool(onesided)
    attrs = dict(n_fft=n_fft, hop_length=int(hop_length or n_fft // 4), center=bool(center),
                 normalized=bool(normalized), onesided=onesided, length=int(length or 0))

    def f(x, *w):
        return _op("istft", x, *w, **attrs)

    key = ("istft", tuple(sorted(attrs.items())), w is None)
    return call(key, f, x, *([] if w is None else [w]))
