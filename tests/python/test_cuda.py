"""rlx.cuda: the device's presence and memory, events, and the f32 matmul mode (checked
without a GPU too: the mode's names are validated either way)."""
import numpy as np
import pytest

import rlx


def test_presence_and_memory():
    assert isinstance(rlx.cuda.available(), bool)
    assert rlx.cuda.device_count() >= (1 if rlx.cuda.available() else 0)
    if rlx.cuda.available():
        info = rlx.cuda.memory_info()
        assert set(info) == {"reserved", "used"} and info["used"] <= info["reserved"]
        assert rlx.cuda.empty_cache() >= 0
        return
    try:  # a build without the backend reports an empty pool; one without a device says so
        info = rlx.cuda.memory_info()
    except (RuntimeError, NotImplementedError) as e:
        assert "cuda" in str(e).lower()
    else:
        assert info == {"reserved": 0, "used": 0}


def test_f32_matmul_mode():
    with pytest.raises(ValueError, match="expected auto, sgemm or tc"):
        rlx.cuda.set_f32_matmul("fast")
    g = rlx.Graph()
    x = g.input("x", (64, 300))
    w = g.input("w", (300, 40))
    g.output(x @ w, "y")
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 300)).astype(np.float32)
    ws = rng.standard_normal((300, 40)).astype(np.float32)
    want = xs.astype(np.float64) @ ws.astype(np.float64)
    device = "cuda" if rlx.cuda.available() else "cpu"
    try:
        for mode in ("sgemm", "tc", "auto"):
            rlx.cuda.set_f32_matmul(mode)
            y = rlx.Session(device).compile(g).run({"x": xs, "w": ws})["y"]
            assert np.abs(y - want).max() <= 1e-4 * np.abs(want).max()
    finally:
        rlx.cuda.set_f32_matmul("auto")


def test_events():
    if not rlx.cuda.available():
        with pytest.raises((RuntimeError, NotImplementedError), match="(?i)cuda"):
            rlx.cuda.Event()
        return
    g = rlx.Graph()
    x = g.input("x", (1024, 1024))
    g.output(x @ x, "y")
    f = rlx.Session("cuda").compile(g)
    xs = np.ones((1024, 1024), np.float32)
    f.run({"x": xs})
    start, end = rlx.cuda.Event(), rlx.cuda.Event()
    assert not start.done()
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_ms(end)
    start.record()
    f.run({"x": xs})
    end.record()
    assert start.elapsed_ms(end) > 0 and end.done() and start.device == 0
