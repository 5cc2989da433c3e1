"""A Fourier-neural-operator layer trained with rlx: it learns the solution operator of the
1-D heat equation u_t = nu u_xx on a periodic grid (the map from u(x, 0) to u(x, T)), with
gradients through rfft / irfft and complex spectral weights.

    PYTHONPATH=build/python python3 examples/fno/heat_fno.py [--steps 300] [--modes 16]

The layer is u -> irfft(W * rfft(u)[:modes], n) + b u: the exact operator multiplies mode k
by exp(-nu k^2 T), so a trained W can match it to the float precision. W is complex; its
gradient follows JAX's convention (dL/dre - i dL/dim), so descent steps along conj(grad)
(Adam here takes a complex parameter as its real pairs).
Prints the loss before and after, and the error against the exact solution on new data.
"""
import argparse

import numpy as np

import rlx


def heat_data(rng, batch, n, nu, t, modes):
    """Random smooth periodic fields (the first `modes` Fourier modes) and their exact
    evolution under the heat equation for time t."""
    coeffs = (rng.standard_normal((batch, modes)) + 1j * rng.standard_normal((batch, modes)))
    coeffs /= (1 + np.arange(modes)) ** 1.5
    spec = np.zeros((batch, n // 2 + 1), np.complex128)
    spec[:, :modes] = coeffs
    u0 = np.fft.irfft(spec, n=n) * n
    k = 2 * np.pi * np.arange(n // 2 + 1)  # wavenumbers on [0, 1)
    ut = np.fft.irfft(spec * np.exp(-nu * k ** 2 * t), n=n) * n
    return u0.astype(np.float32), ut.astype(np.float32)


def fno_layer(w, b, u, n):
    spec = rlx.fft.rfft(u)                       # [batch, n / 2 + 1] complex
    modes = w.shape[0]
    return rlx.fft.irfft(spec[:, :modes] * w, n=n) + b * u


class Adam:
    """Adam over real parameters; a complex one as its (re, im) pairs, whose gradient is
    conj(grad) seen as pairs: (dL/dre, dL/dim)."""

    def __init__(self, lr, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps, self.t, self.state = lr, b1, b2, eps, 0, {}

    def step(self, params, grads):
        self.t += 1
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            pr = np.array(p).view(np.float32) if np.iscomplexobj(p) else np.array(p, np.float32)
            gr = (np.conj(g).astype(np.complex64).view(np.float32) if np.iscomplexobj(p)
                  else np.asarray(g, np.float32))
            m, v = self.state.get(i, (np.zeros_like(pr), np.zeros_like(pr)))
            m = self.b1 * m + (1 - self.b1) * gr
            v = self.b2 * v + (1 - self.b2) * gr * gr
            self.state[i] = (m, v)
            mh, vh = m / (1 - self.b1 ** self.t), v / (1 - self.b2 ** self.t)
            pr = (pr - self.lr * mh / (np.sqrt(vh) + self.eps)).astype(np.float32)
            out.append(pr.view(np.complex64).reshape(np.shape(p)) if np.iscomplexobj(p) else pr)
        return out


def train(steps=300, modes=16, n=128, nu=0.01, t=0.1, lr=0.02, seed=0, verbose=True):
    rng = np.random.default_rng(seed)
    u0, ut = heat_data(rng, 64, n, nu, t, modes)
    w = np.zeros(modes, np.complex64)
    b = np.zeros((), np.float32)

    def loss(w, b, u0, ut):
        d = fno_layer(w, b, u0, n) - ut
        return rlx.mean(d * d)

    step = rlx.value_and_grad(loss, argnums=(0, 1))
    opt = Adam(lr)
    losses = []
    for i in range(steps):
        value, (gw, gb) = step(w, b, u0, ut)
        losses.append(float(value))
        w, b = opt.step([w, b], [gw, gb])
        if verbose and (i % max(steps // 6, 1) == 0 or i == steps - 1):
            print(f"step {i:4d}  loss {losses[-1]:.3e}")
    test0, test_t = heat_data(rng, 16, n, nu, t, modes)
    pred = rlx.jit(lambda w, b, u: fno_layer(w, b, u, n))(w, b, test0)
    err = float(np.max(np.abs(pred - test_t)) / np.max(np.abs(test_t)))
    return losses, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--modes", type=int, default=16)
    args = ap.parse_args()
    losses, err = train(args.steps, args.modes)
    print(f"loss {losses[0]:.3e} -> {losses[-1]:.3e}; on new fields max |error| / max |u| "
          f"= {err:.2e}")


if __name__ == "__main__":
    main()
