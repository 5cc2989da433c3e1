# PyTorch's side of rlx-bench-gpu: the same cases, "name milliseconds" per line, eager and
# torch.compile. Median of --runs runs after warm-up, CUDA events.
import argparse
import os
import sys

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--runs", type=int, default=20)
p.add_argument("--only", default="",
               help="'attention': stop after the attention cases; 'gpt2': only the forwards")
p.add_argument("--profile", action="store_true",
               help="with --only gpt2: each forward's CUDA kernels under torch.profiler")
args = p.parse_args()
runs = args.runs
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


def profile(name, f, *args):
    from torch.profiler import ProfilerActivity, profile as prof
    f(*args)
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(4):
            f(*args)
        torch.cuda.synchronize()
    print(f"# {name}: CUDA kernels over 4 runs")
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70))


def both(name, f, *inputs):
    print(name, median_ms(f, *inputs), flush=True)
    try:
        fc = torch.compile(f)
        print(name + "_compiled", median_ms(fc, *inputs), flush=True)
        if args.profile:
            profile(name + "_compiled", fc, *inputs)
    except Exception as ex:  # torch.compile needs a working Triton
        print(f"# {name}: torch.compile failed: {ex}", file=sys.stderr)


def skip(case):
    return args.only in ("gpt2", "fft") and case != args.only


# The FFT family (cuFFT under both): rlx-bench-gpu's `fft` cases, eager (torch.compile
# leaves FFTs to cuFFT as well).
if not skip("fft"):
    def cx(*shape):
        return torch.complex(torch.rand(*shape, device=dev) * 2 - 1,
                             torch.rand(*shape, device=dev) * 2 - 1)

    x = cx(1024, 4096)
    print("fft_c64_1024x4096", median_ms(torch.fft.fft, x), flush=True)
    print("ifft_c64_1024x4096", median_ms(torch.fft.ifft, x), flush=True)
    x = torch.rand(1024, 4096, device=dev) * 2 - 1
    print("rfft_f32_1024x4096", median_ms(torch.fft.rfft, x), flush=True)
    x = cx(1024, 2049)
    print("irfft_c64_1024x2049", median_ms(lambda t: torch.fft.irfft(t, n=4096), x), flush=True)
    x = cx(4096, 1009)
    print("fft_c64_4096x1009", median_ms(torch.fft.fft, x), flush=True)
    x = cx(64, 256, 256)
    print("fft2_c64_64x256x256", median_ms(torch.fft.fft2, x), flush=True)
    x = torch.rand(16, 1024, 1024, device=dev) * 2 - 1
    print("rfft2_f32_16x1024x1024", median_ms(torch.fft.rfft2, x), flush=True)
    # 64 x 10 s of 16 kHz audio: n_fft 400, hop 160, a hann window, centred (reflect).
    x = torch.rand(64, 160000, device=dev) * 2 - 1
    w = torch.hann_window(400, device=dev)
    print("stft_64x160000",
          median_ms(lambda t: torch.stft(t, 400, 160, window=w, return_complex=True), x),
          flush=True)
    del x, w
if args.only == "fft":
    sys.exit(0)


if not skip("gemm"):
    a = torch.rand(8192, 8192, device=dev, dtype=torch.bfloat16) * 2 - 1
    b = torch.rand(8192, 8192, device=dev, dtype=torch.bfloat16) * 2 - 1
    print("gemm_bf16", median_ms(torch.matmul, a, b), flush=True)
    del a, b
    # f32 as PyTorch runs it by default (allow_tf32 off: cuBLAS SGEMM).
    a = torch.rand(8192, 768, device=dev) * 2 - 1
    b = torch.rand(768, 3072, device=dev) * 2 - 1
    print("gemm_f32", median_ms(torch.matmul, a, b), flush=True)
    del a, b


def chain(x):
    return torch.relu(torch.sigmoid(x * 0.5 + 0.1) * x - 0.2)


if not skip("chain"):
    x = torch.rand(64 << 20, device=dev) * 2 - 1
    both("chain", chain, x)
    del x

if not skip("attention"):
    for key, dt in (("attention", torch.bfloat16), ("attention_f32", torch.float32)):
        q, k, v = (torch.rand(8, 12, 1024, 64, device=dev, dtype=dt) for _ in range(3))
        print(key, median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
              flush=True)

    # The backward alone: dq, dk, dv of SDPA for a given dy (the forward is not timed).
    q, k, v = (torch.rand(8, 12, 1024, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    dy = torch.rand_like(out)
    print("attention_grad",
          median_ms(lambda: torch.autograd.grad(out, (q, k, v), dy, retain_graph=True)), flush=True)
    del q, k, v, out, dy
if args.only == "attention":
    sys.exit(0)


# GPT-2 small as examples/demo builds it: pre-norm blocks, separate q / k / v projections
# without biases, a GELU MLP with biases, the head tied to the token table. The GELU is
# GPT-2's tanh form unless RLX_BENCH_GELU=erf (as rlx-bench-gpu reads it).
GELU = "none" if os.environ.get("RLX_BENCH_GELU") == "erf" else "tanh"

class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = (w(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, d))
        return x + self.w2(F.gelu(self.w1(self.ln2(x)), approximate=GELU))


class GPT(torch.nn.Module):
    def __init__(self, vocab=50304, d=768, heads=12, layers=12, context=1024):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(context, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()


model = GPT().to(dev)
tokens = torch.randint(0, 50304, (8, 1024), device=dev)
with torch.no_grad():
    both("gpt2_f32", model, tokens)

    def bf16(t):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return model(t)

    both("gpt2_bf16", bf16, tokens)
if args.only == "gpt2":
    sys.exit(0)


# The AMP-bf16 train step with AdamW: forward and backward under autocast, the optimizer
# step outside it (torch.compile compiles the model; the optimizer runs eager either way).
def train_step_fn(m):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    targets = torch.randint(0, 50304, (8, 1024), device=dev)

    def step(t):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(t)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


print("train_bf16", median_ms(train_step_fn(model), tokens), flush=True)
try:
    print("train_bf16_compiled", median_ms(train_step_fn(torch.compile(model)), tokens), flush=True)
except Exception as ex:
    print(f"# train: torch.compile failed: {ex}", file=sys.stderr)
