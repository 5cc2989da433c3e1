"""examples/audio/logmel.py: the log-mel front end built from rlx.signal matches torchaudio's
MelSpectrogram (mel to 1e-5 of its largest value, the log to 1e-4 absolute), batched and
alone, and differentiates (the gradient of a loss of the log-mel against torch's autograd)."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import rlx

torchaudio = pytest.importorskip("torchaudio")
import torch  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "audio" / "logmel.py"


def load_example():
    spec = importlib.util.spec_from_file_location("logmel_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("shape", [(16000,), (3, 8000)])
@pytest.mark.parametrize("n_mels,n_fft", [(80, 400), (64, 512)])
def test_log_mel_matches_torchaudio(shape, n_mels, n_fft):
    ex = load_example()
    wave = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    mel, log_mel = ex.make_log_mel(16000, n_fft=n_fft, n_mels=n_mels)(wave)
    tmel, tlog = ex.torchaudio_log_mel(16000, n_fft=n_fft, n_mels=n_mels)(wave)
    assert mel.shape == tmel.shape
    assert np.max(np.abs(mel - tmel)) <= 1e-5 * np.max(np.abs(tmel))
    assert np.max(np.abs(log_mel - tlog)) <= 1e-4


def test_mel_filterbank_matches_torchaudio():
    from torchaudio.functional import melscale_fbanks
    for norm, scale in ((None, "htk"), ("slaney", "slaney"), (None, "slaney")):
        got = rlx.signal.mel_filterbank(201, 20.0, 7600.0, 40, 16000, norm=norm, mel_scale=scale,
                                        dtype=np.float64)
        want = melscale_fbanks(201, 20.0, 7600.0, 40, 16000, norm=norm, mel_scale=scale).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # torchaudio's are f32


def test_log_mel_gradient_matches_torch():
    wave = np.random.default_rng(2).standard_normal(4000)
    window = rlx.signal.hann_window(256, dtype=np.float64)
    fb = rlx.signal.mel_filterbank(129, 0.0, 8000.0, 32, 16000, dtype=np.float64)

    def loss(w):
        s = rlx.signal.stft(w, 256, hop_length=64, window=window)
        mel = rlx.ops.matmul(fb.T, rlx.ops.square(rlx.ops.abs(s)))
        return rlx.sum(rlx.log(mel + 1e-3))

    got = rlx.grad(loss)(wave)
    tw = torch.from_numpy(wave).requires_grad_()
    s = torch.stft(tw, 256, hop_length=64, window=torch.from_numpy(window), return_complex=True)
    torch.log(torch.from_numpy(fb).T @ s.abs() ** 2 + 1e-3).sum().backward()
    np.testing.assert_allclose(got, tw.grad.numpy(), rtol=1e-7, atol=1e-9)
