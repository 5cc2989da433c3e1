"""An audio front end with rlx: waveform -> log-mel spectrogram (stft, power, mel filters,
log), beside torchaudio's MelSpectrogram on the same waveforms.

    PYTHONPATH=build/python python3 examples/audio/logmel.py [--batch 8] [--seconds 4]

Prints the largest difference from torchaudio (relative to the largest mel value) and the
time of each, median over runs. The rlx function is one jitted graph: it runs in grad and
vmap too (tests/python/test_audio_example.py checks it against torchaudio).
"""
import argparse
import time

import numpy as np

import rlx


def make_log_mel(sample_rate=16000, n_fft=400, hop_length=160, n_mels=80, f_min=0.0,
                 f_max=None, eps=1e-6):
    """A jitted function [..., samples] float32 -> (mel [..., n_mels, frames], log mel)."""
    window = rlx.signal.hann_window(n_fft)
    fb = rlx.signal.mel_filterbank(n_fft // 2 + 1, f_min, f_max or sample_rate / 2, n_mels,
                                   sample_rate)

    @rlx.jit
    def log_mel(wave):
        spec = rlx.signal.stft(wave, n_fft, hop_length=hop_length, window=window)
        power = rlx.ops.square(rlx.ops.abs(spec))             # [..., freqs, frames]
        mel = rlx.ops.matmul(fb.T, power)                 # [..., n_mels, frames]
        return mel, rlx.log(mel + eps)

    return log_mel


def torchaudio_log_mel(sample_rate=16000, n_fft=400, hop_length=160, n_mels=80, eps=1e-6):
    import torch
    import torchaudio
    mel = torchaudio.transforms.MelSpectrogram(sample_rate=sample_rate, n_fft=n_fft,
                                               hop_length=hop_length, n_mels=n_mels)

    def run(wave):
        with torch.no_grad():
            m = mel(torch.from_numpy(wave))
            return m.numpy(), torch.log(m + eps).numpy()

    return run


def median_time(f, x, reps):
    f(x)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f(x)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    rate = 16000
    rng = np.random.default_rng(0)
    t = np.arange(int(args.seconds * rate)) / rate
    wave = (np.sin(2 * np.pi * 440 * t) * 0.5 +
            0.1 * rng.standard_normal((args.batch, t.size))).astype(np.float32)
    ours, theirs = make_log_mel(rate), torchaudio_log_mel(rate)
    (mel, log_mel), (tmel, tlog) = ours(wave), theirs(wave)
    print(f"log-mel {log_mel.shape}: max |mel - torchaudio| / max mel = "
          f"{np.max(np.abs(mel - tmel)) / np.max(np.abs(tmel)):.2e}, "
          f"max |log mel - torchaudio| = {np.max(np.abs(log_mel - tlog)):.2e}")
    a, b = median_time(ours, wave, args.reps), median_time(theirs, wave, args.reps)
    print(f"rlx {a * 1e3:.2f} ms, torchaudio {b * 1e3:.2f} ms, rlx / torchaudio {a / b:.2f}")


if __name__ == "__main__":
    main()
