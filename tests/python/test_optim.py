"""rlx.optim: the Trainer's steps against NumPy implementations of SGD (momentum) and
AdamW (torch's formulas), schedules, save / load, errors."""
import numpy as np
import pytest

import rlx


def regression(n=16, dtype=rlx.f64):
    g = rlx.Graph()
    x, y = g.input("x", (None, 3), dtype), g.input("y", (None, 1), dtype)
    w, b = g.param("w", (3, 1), dtype), g.param("b", (1,), dtype)
    g.output(rlx.mean((x @ w + b - y) ** 2), "loss")
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((n, 3))
    yv = xv @ np.array([[1.0], [-2.0], [0.5]]) + 0.3 + 0.01 * rng.standard_normal((n, 1))
    return g, xv, yv


def grads(w, b, x, y):
    r = x @ w + b - y
    return 2 * x.T @ r / len(x), 2 * r.sum(0) / len(x), float(np.mean(r**2))


def sgd_reference(w, b, x, y, lr, momentum, weight_decay, steps):
    bufs = [None, None]
    losses = []
    params = [w.copy(), b.copy()]
    for _ in range(steps):
        gw, gb, loss = grads(*params, x, y)
        losses.append(loss)
        for i, gr in enumerate((gw, gb)):
            gr = gr + weight_decay * params[i]
            bufs[i] = gr if bufs[i] is None else momentum * bufs[i] + gr
            params[i] = params[i] - lr * bufs[i]
    return params, losses


def adamw_reference(w, b, x, y, lrs, beta1, beta2, eps, weight_decay, steps):
    params = [w.copy(), b.copy()]
    m = [np.zeros_like(w), np.zeros_like(b)]
    v = [np.zeros_like(w), np.zeros_like(b)]
    losses = []
    for t in range(1, steps + 1):
        lr = lrs(t - 1)
        gw, gb, loss = grads(*params, x, y)
        losses.append(loss)
        for i, gr in enumerate((gw, gb)):
            params[i] = params[i] * (1 - lr * weight_decay)
            m[i] = beta1 * m[i] + (1 - beta1) * gr
            v[i] = beta2 * v[i] + (1 - beta2) * gr * gr
            mhat, vhat = m[i] / (1 - beta1**t), v[i] / (1 - beta2**t)
            params[i] = params[i] - lr * mhat / (np.sqrt(vhat) + eps)
    return params, losses


@pytest.mark.parametrize("momentum,weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.5, 0.01)])
def test_sgd_matches_numpy(momentum, weight_decay):
    g, xv, yv = regression()
    w0, b0 = np.full((3, 1), 0.1), np.zeros(1)
    t = rlx.optim.Trainer(g, rlx.optim.SGD(momentum=momentum, weight_decay=weight_decay), lr=0.05)
    t.set_param("w", w0)
    t.set_param("b", b0)
    losses = [float(t.step({"x": xv, "y": yv})["loss"]) for _ in range(8)]
    (w, b), want = sgd_reference(w0, b0, xv, yv, 0.05, momentum, weight_decay, 8)
    np.testing.assert_allclose(losses, want, rtol=1e-10)
    np.testing.assert_allclose(t.param("w"), w, rtol=1e-10)
    np.testing.assert_allclose(t.param("b"), b, rtol=1e-10)
    assert t.steps == 8


@pytest.mark.parametrize("schedule", ["constant", "warmup_cosine", "callable"])
def test_adamw_matches_numpy(schedule):
    g, xv, yv = regression()
    lr = {"constant": 0.05, "warmup_cosine": rlx.optim.warmup_cosine(0.1, 3, 10),
          "callable": lambda step: 0.05 / (1 + step)}[schedule]
    lrs = {"constant": lambda s: 0.05, "callable": lambda s: 0.05 / (1 + s),
           "warmup_cosine": rlx.optim.warmup_cosine(0.1, 3, 10)}[schedule]
    w0, b0 = np.full((3, 1), -0.2), np.ones(1)
    t = rlx.optim.Trainer(g, rlx.optim.AdamW(weight_decay=0.1), lr=lr)
    assert t.trained_params == ["w", "b"]
    assert sorted(t.state_names) == ["adamw.m.b", "adamw.m.w", "adamw.v.b", "adamw.v.w"]
    t.set_param("w", w0)
    t.set_param("b", b0)
    losses = []
    for step in range(6):
        assert t.lr == pytest.approx(lrs(step))
        losses.append(float(t.step({"x": xv, "y": yv})["loss"]))
    (w, b), want = adamw_reference(w0, b0, xv, yv, lrs, 0.9, 0.999, 1e-8, 0.1, 6)
    np.testing.assert_allclose(losses, want, rtol=1e-9)
    np.testing.assert_allclose(t.param("w"), w, rtol=1e-9)


def test_training_converges_in_f32():
    g, xv, yv = regression(64, rlx.f32)
    xv, yv = xv.astype(np.float32), yv.astype(np.float32)
    t = rlx.optim.Trainer(g, rlx.optim.Adam(), lr=0.05)
    t.set_param("w", rlx.optim.xavier_uniform((3, 1), seed=0))
    t.set_param("b", np.zeros(1, np.float32))
    first = t.step({"x": xv, "y": yv})["loss"]
    for _ in range(300):
        out = t.step({"x": xv, "y": yv})
    assert out["loss"] < 1e-3 < first
    np.testing.assert_allclose(t.param("w").ravel(), [1.0, -2.0, 0.5], atol=0.02)
    assert "train.grad_norm" in out
    ev = t.evaluate({"x": xv, "y": yv})
    assert ev["loss"] == pytest.approx(float(np.mean((xv @ t.param("w") + t.param("b") - yv) ** 2)),
                                       rel=1e-4)


def test_save_and_load(tmp_path):
    g, xv, yv = regression()
    t = rlx.optim.Trainer(g, rlx.optim.AdamW(), lr=0.01)
    t.set_param("w", np.ones((3, 1)))
    t.set_param("b", np.zeros(1))
    t.step({"x": xv, "y": yv})
    t.save(str(tmp_path / "ckpt.safetensors"))
    u = rlx.optim.Trainer(g, rlx.optim.AdamW(), lr=0.01)
    u.load(str(tmp_path / "ckpt.safetensors"))
    assert u.steps == 1
    np.testing.assert_array_equal(u.param("w"), t.param("w"))
    np.testing.assert_array_equal(u.step({"x": xv, "y": yv})["loss"],
                                  t.step({"x": xv, "y": yv})["loss"])
    with pytest.raises(OSError):
        u.load(str(tmp_path / "missing.safetensors"))


def test_initialisers():
    a = rlx.optim.xavier_uniform((64, 32), seed=1)
    bound = np.sqrt(6 / (64 + 32))
    assert a.shape == (64, 32) and a.dtype == np.float32 and np.abs(a).max() <= bound
    np.testing.assert_array_equal(a, rlx.optim.xavier_uniform((64, 32), seed=1))
    assert not np.array_equal(a, rlx.optim.xavier_uniform((64, 32), seed=2))
    n = rlx.optim.normal((10000,), mean=1.0, std=2.0, seed=0, dtype=rlx.f64)
    assert n.dtype == np.float64 and abs(n.mean() - 1) < 0.1 and abs(n.std() - 2) < 0.1
    with pytest.raises(ValueError):
        rlx.optim.xavier_uniform((5,), seed=0)  # rank < 2 has no fans


def test_trainer_errors():
    g, _, _ = regression()
    with pytest.raises(ValueError, match="nope"):
        rlx.optim.Trainer(g, loss="nope")
    with pytest.raises(ValueError):
        rlx.optim.Trainer(g, params=["nope"])
    with pytest.raises(TypeError, match="lr"):
        rlx.optim.Trainer(g, lr="fast")
    with pytest.raises(TypeError):
        rlx.optim.Trainer(None)
    t = rlx.optim.Trainer(g)
    with pytest.raises(TypeError):
        t.set_param("w", np.ones((3, 1), np.float32))  # the model's w is f64
