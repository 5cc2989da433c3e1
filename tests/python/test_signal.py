"""rlx.signal (stft, istft, windows) against torch.stft / torch.istft, gradients through the
stft against torch's autograd, complex elementwise ops, reductions and products against
NumPy with their gradients against finite differences (JAX's convention), and ONNX's DFT
and STFT imported through the FFT ops."""
import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
rng = np.random.default_rng(11)


def crandn(*shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def close(got, want, tol=1e-10):
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=tol * scale)


WINDOWS = [("hann_window", {}), ("hamming_window", {}), ("blackman_window", {})]


@pytest.mark.parametrize("name,kw", WINDOWS)
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, kw, periodic):
    for n in (0, 1, 2, 7, 400):
        got = getattr(rlx.signal, name)(n, periodic=periodic, dtype=np.float64)
        want = getattr(torch, name)(n, periodic=periodic, dtype=torch.float64).numpy()
        close(got, want, 1e-12)


STFT_CASES = [
    dict(n_fft=400, hop_length=160, window="hann"),
    dict(n_fft=64, center=False),
    dict(n_fft=64, hop_length=20, win_length=40, window="hamming"),
    dict(n_fft=50, hop_length=7, win_length=33),
    dict(n_fft=32, pad_mode="constant", normalized=True, window="blackman"),
    dict(n_fft=32, pad_mode="replicate", onesided=False),
]


def _windows(case, dtype):
    """The case's window for rlx and for torch (None when it has none)."""
    case = dict(case)
    kind = case.pop("window", None)
    if kind is None:
        return case, None, None
    n = case.get("win_length", case["n_fft"])
    w = getattr(rlx.signal, f"{kind}_window")(n, dtype=dtype)
    return case, w, torch.from_numpy(w)


@pytest.mark.parametrize("case", STFT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stft_matches_torch(case, dtype):
    kw, w, tw = _windows(case, dtype)
    x = rng.standard_normal((2, 1000)).astype(dtype)
    got = rlx.signal.stft(x, window=w, **kw)
    want = torch.stft(torch.from_numpy(x), window=tw, return_complex=True, **kw).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    close(got, want, 2e-5 if dtype == np.float32 else 1e-10)


def test_stft_of_complex_signals_and_real_pairs():
    x = crandn(3, 300)
    got = rlx.signal.stft(x, 64, hop_length=16, window=rlx.signal.hann_window(64, dtype=np.float64))
    want = torch.stft(torch.from_numpy(x), 64, hop_length=16, return_complex=True,
                      window=torch.hann_window(64, dtype=torch.float64)).numpy()
    close(got, want)
    r = rng.standard_normal(500)
    pairs = rlx.signal.stft(r, 128, return_complex=False)
    want = torch.view_as_real(torch.stft(torch.from_numpy(r), 128, return_complex=True)).numpy()
    close(pairs, want)


@pytest.mark.parametrize("case", [dict(n_fft=400, hop_length=160, window="hann"),
                                  dict(n_fft=64, hop_length=16, window="hamming", center=False),
                                  dict(n_fft=32, hop_length=8, window="hamming", normalized=True),
                                  dict(n_fft=64, hop_length=16, window="hann", onesided=False)])
def test_istft_matches_torch_and_inverts_stft(case):
    kw, w, tw = _windows(case, np.float64)
    x = rng.standard_normal((2, 1600))
    spec = torch.stft(torch.from_numpy(x), window=tw, return_complex=True, **kw)
    for length in (None, 1500, 1700):
        got = rlx.signal.istft(spec.numpy(), window=w, length=length, **kw)
        want = torch.istft(spec, window=tw, length=length, **kw).numpy()
        assert got.shape == want.shape
        close(got, want)
    if kw.get("center", True):
        y = rlx.signal.istft(rlx.signal.stft(x, window=w, **kw), window=w, length=1600, **kw)
        close(y, x, 1e-9)


def test_stft_gradient_matches_torch_autograd():
    x = rng.standard_normal((2, 256))
    w = rlx.signal.hann_window(64, dtype=np.float64)
    m = rng.uniform(0.5, 1.5, (2, 33, 17))

    def loss(x):
        s = rlx.signal.stft(x, 64, hop_length=16, window=w)
        return rlx.sum(rlx.ops.abs(s) ** 2 * m)

    got = rlx.grad(loss)(x)
    tx = torch.from_numpy(x).requires_grad_()
    s = torch.stft(tx, 64, hop_length=16, window=torch.from_numpy(w), return_complex=True)
    (s.abs() ** 2 * torch.from_numpy(m)).sum().backward()
    close(got, tx.grad.numpy(), 1e-9)


# ---- complex elementwise ops, reductions, products ------------------------------------

UNARY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
         "tan": np.tan, "tanh": np.tanh, "reciprocal": np.reciprocal, "square": np.square,
         "abs": np.abs, "angle": np.angle}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_complex_unary_ops_match_numpy(name):
    z = crandn(4, 5)
    f = rlx.jit(lambda z: getattr(rlx.ops, name)(z))
    close(f(z), UNARY[name](z))
    z32 = z.astype(np.complex64)
    got = f(z32)
    assert got.dtype == UNARY[name](z32).dtype
    close(got, UNARY[name](z32), 1e-5)


def test_complex_reductions_products_and_casts():
    a, b = crandn(3, 40, 30), crandn(30, 20)
    close(rlx.jit(lambda a, b: a @ b)(a, b), a @ b)
    close(rlx.jit(lambda a: rlx.ops.sum(a, axes=[1]))(a), a.sum(axis=1))
    close(rlx.jit(lambda a: rlx.ops.mean(a))(a), a.mean())
    r = rng.standard_normal(5)
    close(rlx.jit(lambda r: rlx.ops.cast(r, dtype=rlx.c128))(r), r.astype(np.complex128))
    with pytest.raises(TypeError, match="real\\(\\) or abs\\(\\)"):
        rlx.jit(lambda z: rlx.ops.cast(z, dtype=rlx.f64))(a)


def _fd_grad(f, z, eps=1e-6):
    """dL/dre - i dL/dim of a real-valued f by central differences (JAX's convention)."""
    g = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        for part, unit in ((1, 1.0), (-1j, 1j)):
            d = np.zeros_like(z)
            d[i] = unit * eps
            g[i] += part * (f(z + d) - f(z - d)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "abs", "angle", "square"])
def test_complex_gradients_follow_jax(name):
    z = crandn(2, 3) + 2.0  # off the branch cuts and 0
    w = crandn(2, 3)

    def loss(z):
        y = getattr(rlx.ops, name)(z)
        if y.dtype in (rlx.c64, rlx.c128):
            y = rlx.ops.real(y * w)
        return rlx.sum(y)

    def ref(z):
        y = UNARY[name](z)
        return float(np.sum(np.real(y * w)) if np.iscomplexobj(y) else np.sum(y))

    close(rlx.grad(loss)(z), _fd_grad(ref, z), 1e-6)


def test_complex_matmul_gradient_follows_jax():
    a, b, w = crandn(3, 4), crandn(4, 2), crandn(3, 2)

    def loss(a):
        return rlx.sum(rlx.ops.real((a @ b) * w))

    close(rlx.grad(loss)(a), _fd_grad(lambda a: float(np.sum(np.real((a @ b) * w))), a), 1e-6)


# ---- ONNX DFT and STFT ------------------------------------------------------------------

onnx = pytest.importorskip("onnx")
from onnx import helper, TensorProto, numpy_helper  # noqa: E402


def _model(node, inputs, inits=(), opset=17):
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _run(tmp_path, model_bytes, *xs):
    path = tmp_path / "model.onnx"
    path.write_bytes(model_bytes)
    m = rlx.onnx.load(str(path))
    g = m.graph
    out = rlx.Session("cpu").compile(g).run(dict(zip(g.input_names, xs)))
    return out[g.output_names[0]]


DFT_CASES = [(inverse, onesided, length, pairs)
             for inverse, onesided, length in [(0, 0, None), (1, 0, None), (0, 1, None),
                                               (0, 0, 12), (0, 1, 6), (1, 0, 5)]
             for pairs in (1, 2) if not (onesided and pairs == 2)]  # onesided: real signals


@pytest.mark.parametrize("inverse,onesided,length,pairs", DFT_CASES)
def test_onnx_dft_runs_through_the_fft_ops(tmp_path, inverse, onesided, length, pairs):
    x = rng.standard_normal((2, 9, pairs)).astype(np.float32)
    names, inits = ["x"], []
    if length is not None:
        inits.append(numpy_helper.from_array(np.array([length], np.int64), "n"))
        names.append("n")
    node = helper.make_node("DFT", names, ["y"], axis=1, inverse=inverse, onesided=onesided)
    got = _run(tmp_path, _model(node, [("x", TensorProto.FLOAT, [2, 9, pairs])], inits), x)
    z = x[..., 0] + (1j * x[..., 1] if pairs == 2 else 0)
    want = (np.fft.ifft if inverse else np.fft.fft)(z, n=length, axis=1)
    if onesided:
        want = want[:, :(length or 9) // 2 + 1]
    close(got, np.stack([want.real, want.imag], -1), 1e-5)


@pytest.mark.parametrize("window", [False, True])
def test_onnx_stft_with_constant_frames_runs_the_stft_op(tmp_path, window):
    x = rng.standard_normal((2, 100, 1)).astype(np.float32)
    w = np.hanning(16).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(4, np.int64), "step")]
    names = ["x", "step"]
    if window:
        inits.append(numpy_helper.from_array(w, "w"))
        names.append("w")
    else:
        inits.append(numpy_helper.from_array(np.array(16, np.int64), "len"))
        names += ["", "len"]
    node = helper.make_node("STFT", names, ["y"])
    got = _run(tmp_path, _model(node, [("x", TensorProto.FLOAT, [2, 100, 1])], inits), x)
    frames = np.stack([x[:, i * 4:i * 4 + 16, 0] for i in range(22)], 1)
    want = np.fft.rfft(frames * (w if window else 1), axis=-1)
    close(got, np.stack([want.real, want.imag], -1), 1e-5)


def test_onnx_complex_tensors_import(tmp_path):
    z64 = crandn(2, 3, dtype=np.complex64)
    z128 = crandn(4)
    pairs = helper.make_tensor("a", TensorProto.COMPLEX64, [2, 3], z64.ravel().tolist())
    assert len(pairs.float_data) == 12  # (re, im) pairs
    raw = numpy_helper.from_array(z128, "b")  # raw_data
    nodes = [helper.make_node("Identity", ["a"], ["y"]), helper.make_node("Identity", ["b"], ["z"])]
    g = helper.make_graph(nodes, "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2, 3]),
                           helper.make_tensor_value_info("z", TensorProto.COMPLEX128, [4])],
                          initializer=[pairs, raw])
    path = tmp_path / "complex.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    m = rlx.onnx.load(str(path))
    out = rlx.Session("cpu").compile(m.graph).run({})
    y, z = out[m.graph.output_names[0]], out[m.graph.output_names[1]]
    assert y.dtype == np.complex64 and z.dtype == np.complex128
    np.testing.assert_array_equal(y, z64)
    np.testing.assert_array_equal(z, z128)
    tensor_file = tmp_path / "t.pb"
    tensor_file.write_bytes(pairs.SerializeToString())
    np.testing.assert_array_equal(rlx.onnx.read_tensor(str(tensor_file)), z64)
