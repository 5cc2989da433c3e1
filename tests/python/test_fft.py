"""rlx.fft against numpy.fft (every length 1 … 64, primes and powers of two up to 4096, n-D,
each norm, n), complex arrays in and out, arithmetic on complex values, and the FFT and
complex ops' gradients (JAX's convention) against finite differences through real-valued
functions, with jit and vmap."""
import numpy as np
import pytest

import rlx

rng = np.random.default_rng(5)


def crandn(*shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def close(got, want, single=False):
    scale = max(1.0, float(np.max(np.abs(want)))) if np.size(want) else 1.0
    tol = (2e-5 if single else 1e-11) * scale
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


LENGTHS = list(range(1, 65)) + [97, 127, 128, 210, 256, 1009, 1024, 2048, 4093, 4096]


@pytest.mark.parametrize("n", LENGTHS)
def test_lengths_match_numpy(n):
    x = crandn(3, n)
    close(rlx.fft.fft(x), np.fft.fft(x))
    close(rlx.fft.ifft(x), np.fft.ifft(x))
    r = rng.standard_normal((2, n))
    close(rlx.fft.rfft(r), np.fft.rfft(r))
    h = np.fft.rfft(r)
    close(rlx.fft.irfft(h, n=n), np.fft.irfft(h, n=n))


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_norms_axes_and_n(norm):
    x = crandn(4, 6, 5)
    close(rlx.fft.fft(x, n=8, axis=1, norm=norm), np.fft.fft(x, n=8, axis=1, norm=norm))
    close(rlx.fft.ifft(x, n=3, axis=0, norm=norm), np.fft.ifft(x, n=3, axis=0, norm=norm))
    close(rlx.fft.fftn(x, norm=norm), np.fft.fftn(x, norm=norm))
    close(rlx.fft.ifft2(x, s=(7, 4), norm=norm), np.fft.ifft2(x, s=(7, 4), norm=norm))
    r = rng.standard_normal((4, 6, 5))
    close(rlx.fft.rfftn(r, norm=norm), np.fft.rfftn(r, norm=norm))
    close(rlx.fft.rfft2(r, s=(5, 9), norm=norm), np.fft.rfft2(r, s=(5, 9), norm=norm))
    spec = np.fft.rfftn(r, axes=(0, 2))
    close(rlx.fft.irfftn(spec, s=(4, 5), axes=(0, 2), norm=norm),
          np.fft.irfftn(spec, s=(4, 5), axes=(0, 2), norm=norm))
    close(rlx.fft.hfft(x[0, 0], n=8, norm=norm), np.fft.hfft(x[0, 0], n=8, norm=norm))
    close(rlx.fft.ihfft(r[0, 0], norm=norm), np.fft.ihfft(r[0, 0], norm=norm))


def test_precision_follows_the_input():
    x = crandn(8, dtype=np.complex64)
    y = rlx.fft.fft(x)
    assert y.dtype == np.complex64
    close(y, np.fft.fft(x), single=True)
    r = rng.standard_normal(16).astype(np.float32)
    assert rlx.fft.rfft(r).dtype == np.complex64
    assert rlx.fft.fft(r).dtype == np.complex64  # a real input made complex first
    close(rlx.fft.fft(r), np.fft.fft(r), single=True)
    with pytest.raises(ValueError, match="norm"):
        rlx.fft.fft(x, norm="half")


def test_complex_values_through_graphs():
    a, b = crandn(3, 4), crandn(4)
    f = rlx.jit(lambda a, b: (a * b - a / b + (-a)) * a)
    close(f(a, b), (a * b - a / b - a) * a)
    parts = rlx.jit(lambda z: (rlx.ops.real(z), rlx.ops.imag(z), rlx.ops.conj(z)))(a)
    close(parts[0], a.real)
    close(parts[1], a.imag)
    close(parts[2], np.conj(a))
    z = rlx.jit(lambda re, im: rlx.ops.complex(re, im))(a.real, a.imag)
    assert z.dtype == np.complex128
    close(z, a)
    assert rlx.c64.numpy == np.complex64 and rlx.c128.name == "c128"
    with pytest.raises(TypeError):  # no order on complex numbers
        rlx.jit(lambda z: rlx.ops.max(z, z))(a)


def finite_difference(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


def test_gradients_against_finite_differences():
    x = rng.standard_normal((3, 8))
    w = rng.standard_normal((3, 8))
    wc = rng.standard_normal((3, 5))

    def loss(x):
        spec = rlx.fft.rfft(x, norm="ortho")                      # rfft
        z = rlx.fft.fft(rlx.ops.complex(x, x * 0.5), axis=0)     # complex, fft
        back = rlx.fft.irfft(spec * rlx.fft.rfft(x), n=8)        # complex mul, irfft
        y = rlx.fft.ifft(z, n=6, axis=1, norm="forward")          # ifft with a crop
        return (rlx.sum(rlx.ops.real(spec) * wc) + rlx.sum(rlx.ops.imag(rlx.ops.conj(z)) * w)
                + rlx.sum(back * w) + rlx.sum(rlx.ops.real(y * y)))

    def loss_np(x):
        spec = np.fft.rfft(x, norm="ortho")
        z = np.fft.fft(x + 0.5j * x, axis=0)
        back = np.fft.irfft(spec * np.fft.rfft(x), n=8)
        y = np.fft.ifft(z, n=6, axis=1, norm="forward")
        return float(np.sum(spec.real * wc) + np.sum(np.conj(z).imag * w) + np.sum(back * w)
                     + np.sum((y * y).real))

    g = rlx.grad(loss)(x)
    np.testing.assert_allclose(g, finite_difference(loss_np, x), rtol=1e-6, atol=1e-6)


def test_gradient_of_a_complex_input_follows_jax():
    # For a real loss L(z), JAX's convention gives dL/dRe z - i dL/dIm z.
    re, im = rng.standard_normal(6), rng.standard_normal(6)

    def loss(re, im):
        z = rlx.ops.complex(re, im)
        s = rlx.fft.fft(z * z)
        return rlx.sum(rlx.ops.real(s * rlx.ops.conj(s)))

    def loss_np(re, im):
        s = np.fft.fft((re + 1j * im) ** 2)
        return float(np.sum(np.abs(s) ** 2))

    g_re, g_im = rlx.grad(loss, argnums=(0, 1))(re, im)
    np.testing.assert_allclose(g_re, finite_difference(lambda r: loss_np(r, im), re), rtol=1e-6)
    np.testing.assert_allclose(g_im, finite_difference(lambda i: loss_np(re, i), im), rtol=1e-6)


def test_jvp_and_vmap():
    x = rng.standard_normal((4, 10))
    t = rng.standard_normal((4, 10))
    f = lambda x: rlx.fft.irfft(rlx.fft.rfft(x) * rlx.fft.rfft(x), n=10)
    y, dy = rlx.jvp(f, (x,), (t,))
    eps = 1e-6
    fd = (np.fft.irfft(np.fft.rfft(x + eps * t) ** 2, n=10)
          - np.fft.irfft(np.fft.rfft(x - eps * t) ** 2, n=10)) / (2 * eps)
    np.testing.assert_allclose(dy, fd, rtol=1e-6, atol=1e-7)
    batched = rlx.vmap(lambda r: rlx.ops.real(rlx.fft.fft(rlx.ops.complex(r, r * 0), axis=0)))(x)
    np.testing.assert_allclose(batched, np.fft.fft(x, axis=1).real, atol=1e-12)
    spectra = rlx.vmap(lambda r: rlx.fft.rfft(r), in_axes=1, out_axes=1)(x)
    close(spectra, np.fft.rfft(x.T).T)
