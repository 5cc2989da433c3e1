"""rlx.Tensor <-> NumPy for every dtype; zero-copy views; bf16 helpers."""
import numpy as np
import pytest

import rlx

# rlx dtype, the NumPy dtype that holds it
DTYPES = [
    (rlx.f32, np.float32),
    (rlx.f64, np.float64),
    (rlx.f16, np.float16),
    (rlx.bf16, np.uint16),
    (rlx.i8, np.int8),
    (rlx.i16, np.int16),
    (rlx.i32, np.int32),
    (rlx.i64, np.int64),
    (rlx.u8, np.uint8),
    (rlx.bool_, np.bool_),
]
SHAPES = [(), (5,), (2, 3), (2, 0, 4), (3, 1, 2, 2)]


def sample(np_dtype, shape, rng):
    if np_dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, dtype=np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)


@pytest.mark.parametrize("dt,np_dt", DTYPES, ids=[str(d) for d, _ in DTYPES])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_roundtrip(dt, np_dt, shape, rng):
    a = sample(np_dt, shape, rng)
    t = rlx.Tensor(a, dtype=dt)
    assert t.dtype == dt
    assert t.shape == shape
    assert t.ndim == len(shape)
    assert t.size == a.size
    assert t.nbytes == a.size * dt.itemsize
    b = np.asarray(t)
    assert b.dtype == np.dtype(np_dt)
    assert b.shape == shape
    np.testing.assert_array_equal(b, a)
    assert dt.numpy == np.dtype(np_dt)


@pytest.mark.parametrize("dt,np_dt", DTYPES, ids=[str(d) for d, _ in DTYPES])
def test_dtype_inferred_from_numpy(dt, np_dt, rng):
    a = sample(np_dt, (3, 2), rng)
    if dt == rlx.bf16:
        with pytest.raises(TypeError, match="uint16"):
            rlx.Tensor(a)  # uint16 is bf16 only when asked for
    else:
        assert rlx.Tensor(a).dtype == dt
        assert rlx.dtype(np_dt) == dt
    assert rlx.dtype(str(dt)) == dt


def test_tensor_copies_numpy_input():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = rlx.Tensor(a)
    a[0, 0] = 100
    assert np.asarray(t)[0, 0] == 0


def test_numpy_views_share_memory():
    t = rlx.Tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    a, b = np.asarray(t), t.numpy()
    assert np.shares_memory(a, b)
    assert not a.flags.owndata
    a[1, 2] = -7
    assert t.numpy()[1, 2] == -7
    mv = memoryview(t)
    assert mv.format == "i" and mv.shape == (3, 4) and mv.strides == (16, 4)
    # The view keeps the buffer alive after the tensor is gone.
    del t
    assert b[1, 2] == -7


def test_run_outputs_are_views_of_rlx_buffers():
    g = rlx.Graph()
    x = g.input("x", (4,))
    g.output(x * 2.0, "y")
    out = rlx.Session().compile(g).run({"x": np.arange(4, dtype=np.float32)})["y"]
    assert not out.flags.owndata and out.base is not None
    np.testing.assert_array_equal(out, [0, 2, 4, 6])


@pytest.mark.parametrize("bad", [np.uint32, np.uint64, np.complex256, np.int16, np.complex64],
                         ids=str)
def test_unsupported_numpy_dtypes(bad):
    a = np.zeros(3, dtype=bad)
    if bad in (np.int16, np.complex64):
        assert rlx.Tensor(a).dtype == {np.int16: rlx.i16, np.complex64: rlx.c64}[bad]
        return
    with pytest.raises(TypeError, match="expected a NumPy dtype rlx holds"):
        rlx.Tensor(a)


def test_dtype_mismatch_is_type_error():
    with pytest.raises(TypeError, match="expected an array of f32, got f64"):
        rlx.Tensor(np.zeros(3), dtype=rlx.f32)


def test_bf16_helpers():
    # Values with 8 significant bits are exact in bf16.
    exact = np.array([0.0, 1.0, -2.5, 0.15625, 1.5 * 2.0**127, -1.5 * 2.0**-126, np.inf, -np.inf],
                     np.float32)
    bits = rlx.f32_to_bf16(exact)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(rlx.bf16_to_f32(bits), exact)
    # The bit patterns are the high halves of the f32 patterns.
    np.testing.assert_array_equal(bits, (exact.view(np.uint32) >> 16).astype(np.uint16))
    # Round to nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even);
    # 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6 (even).
    half = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-16], np.float32)
    np.testing.assert_array_equal(rlx.bf16_to_f32(rlx.f32_to_bf16(half)), [1, 1 + 2**-6, 1 + 2**-7])
    assert np.isnan(rlx.bf16_to_f32(rlx.f32_to_bf16(np.array([np.nan], np.float32))))[0]
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    np.testing.assert_allclose(rlx.bf16_to_f32(rlx.f32_to_bf16(x)), x, rtol=2**-8)
    with pytest.raises(TypeError, match="uint16"):
        rlx.bf16_to_f32(x)


def test_bf16_tensor_from_floats():
    t = rlx.Tensor([1.0, 2.5, -3.0], dtype=rlx.bf16)
    assert t.dtype == rlx.bf16
    np.testing.assert_array_equal(rlx.bf16_to_f32(np.asarray(t)), [1.0, 2.5, -3.0])


def test_dtype_objects():
    assert repr(rlx.f32) == "rlx.f32" and str(rlx.bool_) == "bool"
    assert rlx.boolean == rlx.bool_
    assert [d.itemsize for d, _ in DTYPES] == [4, 8, 2, 2, 1, 2, 4, 8, 1, 1]
    assert rlx.bf16.is_float and not rlx.i32.is_float
    with pytest.raises(TypeError, match="dtype name"):
        rlx.dtype("float128x")


def test_non_contiguous_numpy_inputs(rng):
    g = rlx.Graph()
    x = g.input("x", (3, 4))
    g.output(x + 1.0, "y")
    base = rng.standard_normal((4, 6)).astype(np.float32)
    for view in (base.T[:3], base[::-1, ::2].T[:3], np.broadcast_to(base[0, :4], (3, 4))):
        assert not view.flags.c_contiguous
        out = rlx.Session().compile(g).run([view])["y"]
        np.testing.assert_array_equal(out, view + 1)


def test_dlpack_to_numpy_shares_memory():
    t = rlx.Tensor(np.arange(12, dtype=np.float64).reshape(3, 4))
    a = np.from_dlpack(t)
    assert a.dtype == np.float64 and a.shape == (3, 4)
    assert np.shares_memory(a, np.asarray(t))
    del t
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4))  # a keeps the buffer
    assert rlx.Tensor(np.zeros(2, np.int8)).__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("dt,np_dt", DTYPES, ids=[str(d) for d, _ in DTYPES])
def test_dlpack_to_torch(dt, np_dt, rng):
    torch = pytest.importorskip("torch")
    a = sample(np_dt, (2, 3), rng)
    t = rlx.Tensor(a, dtype=dt)
    try:
        tt = torch.from_dlpack(t)
    except RuntimeError as e:  # kDLBool (DLPack 0.8) is newer than some consumers
        if dt == rlx.bool_ and "code 6" in str(e):
            pytest.skip(f"this torch ({torch.__version__}) does not read DLPack bool")
        raise
    assert tt.data_ptr() == np.asarray(t).ctypes.data  # no copy
    if dt == rlx.bf16:
        assert tt.dtype == torch.bfloat16
        np.testing.assert_array_equal(tt.float().numpy(), rlx.bf16_to_f32(a))
    else:
        np.testing.assert_array_equal(tt.numpy(), a)


def test_string_tensors():
    words = np.array([["monday", ""], ["naïve", "日本"]])
    t = rlx.Tensor(words)
    assert t.dtype == rlx.string and t.shape == (2, 2)
    g = rlx.Graph()
    x = g.input("x", (2, 2), rlx.string)
    g.output(rlx.ops.transpose(x), "y")
    y = rlx.Session().compile(g).run({"x": words})["y"]
    assert y.dtype == object and y.shape == (2, 2)
    assert y.tolist() == [["monday", "naïve"], ["", "日本"]]
    with pytest.raises(TypeError, match="str elements"):
        rlx.Tensor(np.array(["a", 1], dtype=object), dtype=rlx.string)
