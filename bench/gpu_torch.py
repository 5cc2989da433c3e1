# PyTorch's side of rlx-bench-gpu: the same cases, "name milliseconds" per line, eager and
# torch.compile. Median of --runs runs after warm-up, CUDA events.
import argparse
import sys

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--runs", type=int, default=20)
runs = p.parse_args().runs
if not torch.cuda.is_available():
    sys.exit(1)
dev = "cuda"


def median_ms(f, *args):
    for _ in range(3):
        f(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f(*args)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def both(name, f, *args):
    print(name, median_ms(f, *args), flush=True)
    try:
        print(name + "_compiled", median_ms(torch.compile(f), *args), flush=True)
    except Exception as ex:  # torch.compile needs a working Triton
        print(f"# {name}: torch.compile failed: {ex}", file=sys.stderr)


a = torch.rand(8192, 8192, device=dev, dtype=torch.bfloat16) * 2 - 1
b = torch.rand(8192, 8192, device=dev, dtype=torch.bfloat16) * 2 - 1
print("gemm_bf16", median_ms(torch.matmul, a, b), flush=True)
del a, b

x = torch.rand(64 << 20, device=dev) * 2 - 1


def chain(x):
    return torch.relu(torch.sigmoid(x * 0.5 + 0.1) * x - 0.2)


both("chain", chain, x)
del x

q, k, v = (torch.rand(8, 12, 1024, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
print("attention", median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), flush=True)
