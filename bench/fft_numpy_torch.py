#!/usr/bin/env python3
"""rlx's CPU FFTs side by side with numpy.fft (pocketfft's C version) and torch.fft (CPU),
same inputs, same process: median milliseconds of each over repeated calls, and rlx's
ratio to each (below 1: rlx faster). rlx runs each transform as a compiled graph
(rlx.jit through rlx.fft), so its times include the call into the runtime.

    PYTHONPATH=build/python python3 bench/fft_numpy_torch.py [--threads 2] [--reps 20]
"""
import argparse
import os
import statistics
import time

import numpy as np


def median_ms(fn, reps):
    fn()  # warm: plans, the jit's trace and compile
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import rlx
    import torch
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    cases = []
    for n in (1024, 4096, 3 * 1024, 1009, 4093):
        cases.append((f"fft c128 [64, {n}]", "fft",
                      rng.standard_normal((64, n)) + 1j * rng.standard_normal((64, n)), None))
        cases.append((f"rfft f64 [64, {n}]", "rfft", rng.standard_normal((64, n)), None))
    for n in (256, 1024):
        cases.append((f"fft2 c128 [{n}, {n}]", "fft2",
                      rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)), None))
    cases.append(("fft2 c128 [16, 256, 256]", "fft2",
                  rng.standard_normal((16, 256, 256)) + 1j * rng.standard_normal((16, 256, 256)), None))
    print(f"{'case':28} {'rlx ms':>9} {'numpy ms':>9} {'torch ms':>9} {'rlx/numpy':>9} {'rlx/torch':>9}")
    for label, fn, x, _ in cases:
        xt = torch.from_numpy(x)
        r = median_ms(lambda: getattr(rlx.fft, fn)(x), args.reps)
        n = median_ms(lambda: getattr(np.fft, fn)(x), args.reps)
        t = median_ms(lambda: getattr(torch.fft, fn)(xt), args.reps)
        ref = getattr(np.fft, fn)(x)
        err = float(np.max(np.abs(getattr(rlx.fft, fn)(x) - ref)) / max(1.0, np.max(np.abs(ref))))
        assert err < 1e-10, (label, err)
        print(f"{label:28} {r:9.3f} {n:9.3f} {t:9.3f} {r / n:9.2f} {r / t:9.2f}")


if __name__ == "__main__":
    main()
