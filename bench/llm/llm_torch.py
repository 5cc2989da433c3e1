#!/usr/bin/env python3
"""PyTorch's side of the GPU LLM benchmark: a gpt-fast-style llama over the same GGUF file
(same weights) as `rlx bench-llm`, both run side by side, one table per model.

    python3 bench/llm/llm_torch.py M.gguf [M2.gguf ...] [--rlx .gpu/bin/rlx] [--batches 1,8]
        [-p 512] [-n 128] [-r 3] [--torch-only] [--device cuda|cpu] [--dtype bf16|f16|f32]
    python3 bench/llm/llm_torch.py M.gguf --check [-n 8] [--prompt-tokens 1,2,3]
        # greedy tokens and last-position logits against `rlx generate`; on a CPU with old
        # PyTorch: --device cpu (then f32 weights, rlx --kv f32)

Make models with bench/llm/make_gguf.py (F32/F16/BF16) and `rlx quantize IN OUT Q4_K`.
rlx runs as `RLX bench-llm M --device cuda -p P -n N [-b B] -r R` (-b only for B > 1; pp
only in the batch-1 run), before torch loads anything.

Model: RMSNorm (in float32), rope on adjacent pairs (llama.cpp's llama layout), GQA, SwiGLU,
untied output unless the file has no output.weight; weights in --dtype (bf16 on the GPU;
Q8_0 / Q4_K / Q6_K dequantized on the device), fused wqkv and gate/up, a static KV cache,
the decode step (argmax included) under torch.compile(mode="reduce-overhead",
fullgraph=True) with SDPA (enable_gqa=True where supported; the math backend for decode and
inductor's coordinate-descent tuning, as gpt-fast), prefill compiled without CUDA graphs
or tuning. Without torch.compile / SDPA (old PyTorch) it runs eager and says so.

Timings, as rlx bench-llm: ppP prefills P tokens into an empty cache (batch 1); tgN decodes N
tokens greedily after one untimed token, B sequences at once (t/s = B * N / time); median
of -r runs after one warm-up run (which compiles). The copy bandwidth is a large
device-to-device copy (bytes read + written / time); %BW = bytes a step reads (weights but
the embedding table, plus the K/V cache at the middle of the decoded span; pp: one step per
prompt) x steps/s / copy bandwidth. rlx's bytes are its weights as the file stores them and
an f16 cache; torch's its --dtype weights and cache (its static cache reads every row, only
the used ones are counted).

Time (H200, torch 2.11, 1.1B F16, torch side): 2m46s with a cold inductor cache (compiles:
pp 26 s, tg b1 71 s, tg b8 55 s), 58 s warm; --no-cd-tuning saves about 60 s and costs about
20% of decode t/s (664 vs 789-840 t/s at b1, 4353 vs 5800 at b8).
"""
import argparse
import contextlib
import gc
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gguf_io as G  # noqa: E402

DTYPES = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32}


# ------------------------------------------------------------------ what torch offers
def has_compile():
    return hasattr(torch, 'compile')


def sdpa_mode():
    """'gqa': SDPA with enable_gqa; 'sdpa': SDPA on repeated K/V; 'manual': no SDPA."""
    if not hasattr(F, 'scaled_dot_product_attention'):
        return 'manual'
    q, kv = torch.zeros(1, 2, 1, 8), torch.zeros(1, 1, 1, 8)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return 'gqa'
    except (TypeError, RuntimeError):
        return 'sdpa'


def math_sdpa(device):
    """A context selecting SDPA's math backend on a GPU (gpt-fast decodes under it: inductor
    then fuses the attention into its own kernels); a no-op elsewhere."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel(SDPBackend.MATH) if device.type == 'cuda' else contextlib.nullcontext()


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------- model
@dataclass
class Config:
    dim: int
    n_layer: int
    n_head: int
    n_kv_head: int
    head_dim: int
    n_rot: int
    ffn: int
    vocab: int
    eps: float
    rope_base: float
    tied: bool

    @staticmethod
    def from_gguf(f):
        kv = f.kv
        arch = kv['general.architecture']
        if arch != 'llama':
            sys.exit(f'{f.path}: expected general.architecture llama, got {arch}')
        a = 'llama.'
        n_head = int(kv[a + 'attention.head_count'])
        dim = int(kv[a + 'embedding_length'])
        hd = int(kv.get(a + 'attention.key_length', dim // n_head))
        return Config(dim=dim, n_layer=int(kv[a + 'block_count']), n_head=n_head,
                      n_kv_head=int(kv.get(a + 'attention.head_count_kv', n_head)),
                      head_dim=hd, n_rot=int(kv.get(a + 'rope.dimension_count', hd)),
                      ffn=int(kv[a + 'feed_forward_length']),
                      vocab=f.tensors['token_embd.weight'].shape[0],
                      eps=float(kv.get(a + 'attention.layer_norm_rms_epsilon', 1e-5)),
                      rope_base=float(kv.get(a + 'rope.freq_base', 10000.0)),
                      tied='output.weight' not in f.tensors)


def param(t):
    return nn.Parameter(t, requires_grad=False)


class RMSNorm(nn.Module):
    def __init__(self, w, eps):
        super().__init__()
        self.weight, self.eps = param(w), eps

    def forward(self, x):
        xf = x.float()  # the mean of squares in float32, as gpt-fast
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


class KVCache(nn.Module):
    def __init__(self, batch, seq, n_kv, hd, dtype, device):
        super().__init__()
        shape = (batch, n_kv, seq, hd)
        self.register_buffer('k', torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer('v', torch.zeros(shape, dtype=dtype, device=device))

    def update(self, pos, k, v):
        """Writes k, v (B, n_kv, T, hd) at positions pos (T,); returns the whole cache."""
        self.k.index_copy_(2, pos, k)
        self.v.index_copy_(2, pos, v)
        return self.k, self.v


def rope(x, cs, n_rot):
    """Rotates adjacent pairs (x[2i], x[2i+1]) of the first n_rot dims, as llama.cpp's
    llama (its converter permutes q/k rows so). x (B, T, H, hd); cs (T, n_rot/2, 2)."""
    B, T, H, hd = x.shape
    xr = x[..., :n_rot].float().reshape(B, T, H, n_rot // 2, 2)
    c, s = cs[None, :, None, :, 0], cs[None, :, None, :, 1]
    x0, x1 = xr[..., 0], xr[..., 1]
    y = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(3)
    if n_rot < hd:
        y = torch.cat([y, x[..., n_rot:].float()], dim=-1)
    return y.type_as(x)


def attention(q, k, v, mask, causal, mode):
    """q (B, H, T, hd), k/v (B, KV, S, hd); mask (1, 1, T, S) bool or None."""
    rep = q.shape[1] // k.shape[1]
    if mode == 'gqa':
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                              enable_gqa=rep > 1)
    if rep > 1:
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    if mode == 'sdpa':
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    s = (q.float() @ k.float().transpose(-1, -2)) / (q.shape[-1] ** 0.5)
    if causal:
        T, S = s.shape[-2:]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
    s = s.masked_fill(~mask, float('-inf'))
    return (torch.softmax(s, dim=-1) @ v.float()).type_as(q)


class Block(nn.Module):
    def __init__(self, c, w, mode):
        super().__init__()
        self.c, self.mode = c, mode
        self.attn_norm = RMSNorm(w['attn_norm'], c.eps)
        self.ffn_norm = RMSNorm(w['ffn_norm'], c.eps)
        self.wqkv = param(torch.cat([w['attn_q'], w['attn_k'], w['attn_v']]))
        self.wo = param(w['attn_output'])
        self.w13 = param(torch.cat([w['ffn_gate'], w['ffn_up']]))
        self.w2 = param(w['ffn_down'])
        self.kv = None

    def forward(self, x, pos, cs, mask, prefill):
        c = self.c
        B, T, _ = x.shape
        nq, nkv = c.n_head * c.head_dim, c.n_kv_head * c.head_dim
        q, k, v = F.linear(self.attn_norm(x), self.wqkv).split([nq, nkv, nkv], dim=-1)
        q = rope(q.view(B, T, c.n_head, c.head_dim), cs, c.n_rot).transpose(1, 2)
        k = rope(k.view(B, T, c.n_kv_head, c.head_dim), cs, c.n_rot).transpose(1, 2)
        v = v.view(B, T, c.n_kv_head, c.head_dim).transpose(1, 2)
        kc, vc = self.kv.update(pos, k, v)
        if prefill:  # from an empty cache: the chunk attends to itself only
            y = attention(q, k, v, None, True, self.mode)
        else:
            y = attention(q, kc, vc, mask, False, self.mode)
        x = x + F.linear(y.transpose(1, 2).reshape(B, T, nq), self.wo)
        g, u = F.linear(self.ffn_norm(x), self.w13).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, self.w2)


class Llama(nn.Module):
    def __init__(self, c, weights, mode):
        super().__init__()
        self.c = c
        self.emb = param(weights['token_embd'])
        self.layers = nn.ModuleList(Block(c, w, mode) for w in weights['layers'])
        self.norm = RMSNorm(weights['output_norm'], c.eps)
        self.out = self.emb if c.tied else param(weights['output'])
        self.cs = None

    def setup_caches(self, batch, seq):
        c, p = self.c, self.emb
        for b in self.layers:
            b.kv = KVCache(batch, seq, c.n_kv_head, c.head_dim, p.dtype, p.device)
        # cos/sin of pos * base^(-2i/n_rot), in float64 then float32
        inv = c.rope_base ** (-np.arange(0, c.n_rot, 2, dtype=np.float64) / c.n_rot)
        ang = np.arange(seq, dtype=np.float64)[:, None] * inv[None, :]
        cs = np.stack([np.cos(ang), np.sin(ang)], axis=-1).astype(np.float32)
        self.cs = torch.from_numpy(cs).to(p.device)

    def forward(self, idx, pos, prefill):
        """idx (B, T) tokens at positions pos (T,); logits (B, V) at the last position."""
        S = self.cs.shape[0]
        mask = (torch.arange(S, device=pos.device)[None, :] <= pos[:, None])[None, None]
        cs = self.cs[pos]
        x = F.embedding(idx, self.emb)
        for b in self.layers:
            x = b(x, pos, cs, mask, prefill)
        return F.linear(self.norm(x[:, -1]), self.out)

    def weight_bytes(self):
        """Bytes of weights a decode step reads: all but the embedding table if untied."""
        n = sum(p.numel() * p.element_size() for p in self.parameters())  # out counted once
        if not self.c.tied:
            n -= self.emb.numel() * self.emb.element_size()
        return n


def load_model(path, dtype, device, mode):
    f = G.GGUFFile(path)
    c = Config.from_gguf(f)
    # norms stay in --dtype too (gpt-fast keeps every weight in one dtype)
    get = lambda n: f.torch_tensor(n, dtype, device)  # noqa: E731
    keys = ('attn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_norm', 'ffn_gate',
            'ffn_up', 'ffn_down')
    w = {'token_embd': get('token_embd.weight'), 'output_norm': get('output_norm.weight'),
         'layers': [{k: get(f'blk.{L}.{k}.weight') for k in keys} for L in range(c.n_layer)]}
    if not c.tied:
        w['output'] = get('output.weight')
    model = Llama(c, w, mode)
    return f, c, model


def file_weight_bytes(f, c):
    """Bytes of the file's tensors a decode step reads (as rlx bench-llm counts them)."""
    n = sum(t.nbytes for t in f.tensors.values())
    if not c.tied:
        n -= f.tensors['token_embd.weight'].nbytes
    return n


def kv_values_per_pos(c):
    """K and V values one sequence position holds over all layers."""
    return 2 * c.n_layer * c.n_kv_head * c.head_dim


# ------------------------------------------------------------------------ runner
class Runner:
    """The model's prefill and decode step, compiled where torch can."""

    def __init__(self, model, device, compile_):
        self.model, self.device = model, device
        self.compiled = compile_ and has_compile()
        pre, dec = self._prefill_step, self._decode_step
        if self.compiled:
            # prefill is matrix products: coordinate-descent tuning only costs compile time
            pre = torch.compile(pre, fullgraph=True,
                                options={'coordinate_descent_tuning': False})
            dec = torch.compile(dec, mode='reduce-overhead', fullgraph=True)
        self._pre, self._dec = pre, dec

    def _prefill_step(self, idx, pos):
        return self.model(idx, pos, True)

    def _decode_step(self, tok, pos):
        return torch.argmax(self.model(tok, pos, False), dim=-1, keepdim=True)

    def prefill(self, idx):
        """Logits (B, V) at the last of idx's positions 0 .. T-1."""
        pos = torch.arange(idx.shape[1], device=self.device)
        return self._pre(idx, pos)

    def decode(self, tok, pos, n):
        """n greedy steps from tok (B, 1) at position pos (a 1-element tensor, advanced in
        place); the (B, n) tokens produced."""
        out = []
        with math_sdpa(self.device):
            for _ in range(n):
                tok = self._dec(tok, pos).clone()  # clone: CUDA graphs reuse their outputs
                pos += 1
                out.append(tok)
        return torch.cat(out, dim=1)


def bench_tokens(V, n, offset=0):
    """rlx bench-llm's prompt: 3 + (i * 7919 + 17) % (V - 3)."""
    return [3 + ((i + offset) * 7919 + 17) % (V - 3) for i in range(n)]


def timed(fn, device, reps):
    """Median seconds of fn() over reps runs after one warm-up run (which compiles)."""
    ts = []
    for r in range(reps + 1):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        if r > 0:
            ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def torch_pp(runner, c, P, reps):
    dev = runner.device
    runner.model.setup_caches(1, P)
    idx = torch.tensor([bench_tokens(c.vocab, P)], device=dev)
    return P / timed(lambda: runner.prefill(idx), dev, reps)


def torch_tg(runner, c, N, B, reps):
    """As rlx: one untimed token from an empty cache, then N timed steps."""
    dev = runner.device
    runner.model.setup_caches(B, (N + 1 + 15) // 16 * 16)
    first = torch.tensor([[t] for t in bench_tokens(c.vocab, B)], device=dev)
    ts = []
    for r in range(reps + 1):
        pos = torch.zeros(1, dtype=torch.long, device=dev)
        tok = runner.decode(first, pos, 1)
        sync(dev)
        # RLX_PROFILE_RANGE=1: the last timed run inside cudaProfilerStart / Stop, for
        # `ncu --profile-from-start off` (the decode kernels without the compiles' own).
        profile = dev.type == 'cuda' and r == reps and os.environ.get('RLX_PROFILE_RANGE')
        if profile:
            torch.cuda.cudart().cudaProfilerStart()
        t0 = time.perf_counter()
        runner.decode(tok, pos, N)
        sync(dev)
        if profile:
            torch.cuda.cudart().cudaProfilerStop()
        if r > 0:
            ts.append(time.perf_counter() - t0)
    return B * N / sorted(ts)[len(ts) // 2]


def copy_bandwidth(device):
    """Bytes read + written per second by a large device-to-device copy (best of 5)."""
    n = (2 << 30) if device.type == 'cuda' else (256 << 20)
    a = torch.ones(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    best = 0.0
    for _ in range(5):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(4):
            b.copy_(a)
        sync(device)
        best = max(best, 4 * 2 * n / (time.perf_counter() - t0))
    del a, b
    return best


# ---------------------------------------------------------------------------- rlx
def parse_rlx(out):
    """{'pp': t/s, 'tg': t/s} from bench-llm's 'ppN X' / 'tgN X' lines (X: the last number
    printed with a decimal point, so a batch label on the line doesn't matter)."""
    res = {}
    for line in out.splitlines():
        m = re.match(r'\s*(pp|tg)\d+\b(.*)', line)
        if not m:
            continue
        nums = re.findall(r'\d+\.\d+', m.group(2)) or re.findall(r'\d+', m.group(2))
        if nums:
            res[m.group(1)] = float(nums[-1])
    return res


def run_rlx(a, model, P, N, B):
    """rlx bench-llm's {'pp', 'tg'} t/s, or {'error': text}."""
    cmd = [a.rlx, 'bench-llm', model, '--device', a.rlx_device, '-p', str(P), '-n', str(N),
           '-r', str(a.reps)]
    if B != 1:  # -b is new: leave it out where it changes nothing
        cmd += ['-b', str(B)]
    cmd += shlex.split(a.rlx_args)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, errors='replace')
    if a.verbose:
        print(f'# {" ".join(cmd)} ({time.perf_counter() - t0:.1f} s)\n{p.stdout}{p.stderr}',
              flush=True)
    if p.returncode != 0:
        err = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return {'error': err[-1] if err else f'exit {p.returncode}'}
    return parse_rlx(p.stdout)


def rlx_all(a, model):
    """Per test name ('pp', b): rlx's t/s or an error text."""
    res = {}
    for i, B in enumerate(a.batches):
        P = a.n_prompt if B == 1 else 0  # pp at batch 1 only, as torch
        r = run_rlx(a, model, P, a.n_gen, B)
        if P:
            res['pp'] = r.get('pp', r.get('error', 'no pp line'))
        res[B] = r.get('tg', r.get('error', 'no tg line'))
    if 1 not in a.batches and a.n_prompt:
        r = run_rlx(a, model, a.n_prompt, 0, 1)
        res['pp'] = r.get('pp', r.get('error', 'no pp line'))
    return res


# -------------------------------------------------------------------------- bench
def size(n):
    return f'{n / 2**30:.2f} GiB' if n >= 2**30 else f'{n / 2**20:.1f} MiB'


def fmt(x, spec):
    return format(x, spec) if isinstance(x, float) else '-'


def bench_model(a, path, device, dtype, mode, bw):
    # rlx first, while this process holds no device memory
    t0 = time.perf_counter()
    rr = {} if a.torch_only else rlx_all(a, path)
    t_rlx = time.perf_counter() - t0

    t0 = time.perf_counter()
    f, c, model = load_model(path, dtype, device, mode)
    t_load = time.perf_counter() - t0
    runner = Runner(model, device, not a.no_compile)
    P, N = a.n_prompt, a.n_gen

    tt, phase = {}, []  # phase: (name, seconds of compiling + timing)
    if P:
        t0 = time.perf_counter()
        tt['pp'] = torch_pp(runner, c, P, a.reps)
        phase.append((f'pp{P}', time.perf_counter() - t0))
    for B in a.batches:
        t0 = time.perf_counter()
        tt[B] = torch_tg(runner, c, N, B, a.reps)
        phase.append((f'b{B}', time.perf_counter() - t0))
    torch_w = model.weight_bytes()
    del runner, model
    cleanup(device)
    print_table(a, path, f, c, rr, tt, torch_w, dtype, bw)
    phases = ', '.join(f'{n} {t:.1f}' for n, t in phase)
    print(f'   seconds: torch load {t_load:.1f}, compile + timing {phases}; rlx {t_rlx:.1f}',
          flush=True)


def print_table(a, path, f, c, rr, tt, torch_w, dtype, bw):
    """rr / tt: rlx's / torch's t/s per test ('pp' or a batch size)."""
    P, N = a.n_prompt, a.n_gen
    # bytes per step and steps per token: pp reads the weights once and writes P rows of
    # K/V; tg at batch B reads them once per B tokens, plus B caches at the span's middle
    rlx_w, kvp = file_weight_bytes(f, c), kv_values_per_pos(c)
    elt = torch.tensor([], dtype=dtype).element_size()
    rows = []
    if P:
        rows.append((f'pp{P}', 'pp', lambda w, e: (w + P * kvp * e) / P))
    for B in a.batches:
        mid = 1 + N / 2
        rows.append((f'tg{N} b{B}', B,
                     lambda w, e, B=B, mid=mid: (w + B * mid * kvp * e) / B))
    # per_tok(weight bytes, cache element size): bytes read per token

    types = sorted({t.ttype for n, t in f.tensors.items() if len(t.shape) == 2})
    print(f'\n== {path}\n   llama dim {c.dim}, {c.n_layer} layers, {c.n_head}/{c.n_kv_head} heads, '
          f'ffn {c.ffn}, vocab {c.vocab}{", tied" if c.tied else ""}\n   weights read per step: '
          f'file {"/".join(types)} {size(rlx_w)}, torch {a.dtype} {size(torch_w)}; '
          f'copy BW {bw / 1e9:.0f} GB/s')
    print(f'   {"test":<12} {"rlx t/s":>10} {"torch t/s":>10} {"rlx/torch":>9} '
          f'{"rlx %BW":>8} {"torch %BW":>9}')
    for name, key, per_tok in rows:
        r, t = rr.get(key), tt.get(key)
        ratio = r / t if isinstance(r, float) and isinstance(t, float) else None
        rbw = 100 * per_tok(rlx_w, 2) * r / bw if isinstance(r, float) else None
        tbw = 100 * per_tok(torch_w, elt) * t / bw if isinstance(t, float) else None
        print(f'   {name:<12} {fmt(r, ".2f"):>10} {fmt(t, ".2f"):>10} {fmt(ratio, ".3f"):>9} '
              f'{fmt(rbw, ".1f"):>8} {fmt(tbw, ".1f"):>9}')
    for key, r in rr.items():
        if isinstance(r, str):
            print(f'   rlx {"pp" if key == "pp" else f"tg b{key}"}: {r}')


def cleanup(device):
    if has_compile():
        torch._dynamo.reset()  # drops the graphs (and their CUDA graph pools)
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.empty_cache()


# -------------------------------------------------------------------------- check
def check_model(a, path, device, dtype, mode):
    """Greedy tokens and the last prompt position's logits, torch against rlx generate."""
    prompt = [int(x) for x in a.prompt_tokens.split(',')]
    f, c, model = load_model(path, dtype, device, mode)
    runner = Runner(model, device, not a.no_compile)
    n = a.n_gen
    model.setup_caches(1, (len(prompt) + n + 15) // 16 * 16)
    logits = runner.prefill(torch.tensor([prompt], device=device))[0].float().cpu().numpy()
    first = int(np.argmax(logits))
    tok = torch.tensor([[first]], device=device)
    pos = torch.tensor([len(prompt)], device=device)
    ours = [first] + runner.decode(tok, pos, n - 1)[0].tolist()

    with tempfile.TemporaryDirectory() as tmp:
        npy = os.path.join(tmp, 'logits.npy')
        kv = 'f32' if dtype == torch.float32 else 'f16'
        cmd = [a.rlx, 'generate', path, '--device', a.rlx_device, '--prompt-tokens',
               a.prompt_tokens, '-n', str(n), '--temp', '0', '--print-tokens', '--kv', kv,
               '--dump-logits', npy]
        cmd += shlex.split(a.rlx_args)
        p = subprocess.run(cmd, capture_output=True, text=True, errors='replace')
        if p.returncode != 0:
            sys.exit(f'failed: {" ".join(cmd)}\n{p.stdout}{p.stderr}')
        theirs = [int(x) for x in p.stdout.strip().splitlines()[-1].split(',')]
        ref = np.load(npy).astype(np.float64).reshape(-1)
    d = np.abs(logits - ref)
    rel = np.linalg.norm(logits - ref) / np.linalg.norm(ref)
    m = len(theirs)  # rlx stops early at an end-of-generation token
    agree = next((i for i in range(m) if ours[i] != theirs[i]), m)
    quantized = any(t.ttype not in ('F32', 'F16', 'BF16') for t in f.tensors.values())
    print(f'{path}: torch {a.dtype} on {device.type} ({runner_desc(runner, mode)}) '
          f'vs rlx {a.rlx_device} (kv {kv})\n'
          f'  logits at the last prompt position: max|diff| {d.max():.3e} rel L2 {rel:.3e} '
          f'max|logit| {np.abs(ref).max():.3f}; argmax torch {first} rlx {int(np.argmax(ref))}\n'
          f'  greedy torch {",".join(map(str, ours[:m]))}\n'
          f'         rlx   {",".join(map(str, theirs))}\n  agree on {agree}/{m} tokens')
    if quantized and a.rlx_device == 'cpu':
        print('  (rlx\'s CPU kernels round activations to 8 bits for block-quantized weights, '
              'as ggml does: expect a few % of logit difference)')
    # exact agreement is expected only of f32 torch on unquantized weights
    return agree == m or quantized or dtype != torch.float32


ATTENTION = {'gqa': 'SDPA enable_gqa', 'sdpa': 'SDPA on repeated K/V (no enable_gqa)',
             'manual': 'manual attention (no SDPA)'}


def runner_desc(runner, mode):
    how = 'torch.compile reduce-overhead, fullgraph' if runner.compiled else 'EAGER'
    return f'{how}; {ATTENTION[mode]}'


# --------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].replace('\n', ' '))
    ap.add_argument('models', nargs='+', metavar='MODEL.gguf')
    ap.add_argument('--rlx', default=os.path.join(ROOT, '.gpu', 'bin', 'rlx'),
                    help='the rlx binary (default: REPO/.gpu/bin/rlx)')
    ap.add_argument('--rlx-args', default='', help="extra rlx arguments, e.g. '-t 16'")
    ap.add_argument('--torch-only', '--no-rlx', dest='torch_only', action='store_true')
    ap.add_argument('--device', default=None, help='cuda (default when present) or cpu')
    ap.add_argument('--rlx-device', default=None, help="rlx's device (default: --device)")
    ap.add_argument('--dtype', default=None, choices=sorted(DTYPES),
                    help='weights and compute (default bf16 on cuda, f32 on cpu)')
    ap.add_argument('--batches', default='1,8', help='decode batch sizes')
    ap.add_argument('-p', '--n-prompt', type=int, default=512, help='prefill tokens (0: no pp)')
    ap.add_argument('-n', '--n-gen', type=int, default=128, help='decoded tokens')
    ap.add_argument('-r', '--reps', type=int, default=3, help='timed runs (median)')
    ap.add_argument('--no-compile', action='store_true', help='eager torch')
    ap.add_argument('--no-cd-tuning', action='store_true',
                    help="decode without inductor's coordinate-descent tuning (gpt-fast's "
                         'setting): ~30 s less compile per batch size, ~20%% slower decode')
    ap.add_argument('--check', action='store_true',
                    help='compare greedy tokens and logits with rlx generate instead')
    ap.add_argument('--prompt-tokens', default='1,2,3', help='--check prompt')
    ap.add_argument('-v', '--verbose', action='store_true', help="print rlx's output")
    a = ap.parse_args()
    a.device = a.device or ('cuda' if torch.cuda.is_available() else 'cpu')
    device = torch.device(a.device)
    a.rlx_device = a.rlx_device or device.type
    a.dtype = a.dtype or ('bf16' if device.type == 'cuda' else 'f32')
    dtype = DTYPES[a.dtype]
    a.batches = [int(b) for b in a.batches.split(',') if b]
    if a.check and '-n' not in sys.argv and '--n-gen' not in sys.argv:
        a.n_gen = 8
    if not a.torch_only and not os.path.exists(a.rlx):
        sys.exit(f'no rlx at {a.rlx} (--rlx PATH, or --torch-only)')

    torch.set_grad_enabled(False)
    if dtype != torch.float32:
        torch.set_float32_matmul_precision('high')  # the math SDPA's float32 products
    mode = sdpa_mode()
    if has_compile():
        from torch import _dynamo
        from torch._inductor import config as ic
        _dynamo.config.cache_size_limit = 64  # a recompile per batch size and model
        ic.coordinate_descent_tuning = not a.no_cd_tuning
        if hasattr(ic, 'fx_graph_cache'):
            ic.fx_graph_cache = True
    compiled = has_compile() and not a.no_compile
    how = 'compiled (reduce-overhead, fullgraph)' if compiled else (
        'EAGER' + ('' if a.no_compile else ' (this torch has no torch.compile)'))
    gpu = f' ({torch.cuda.get_device_name(device)})' if device.type == 'cuda' else ''
    print(f'torch {torch.__version__} on {device.type}{gpu}; {a.dtype}; {how}; '
          f'{ATTENTION[mode]}', flush=True)

    if a.check:
        ok = all([check_model(a, m, device, dtype, mode) for m in a.models])
        sys.exit(0 if ok else 1)
    bw = copy_bandwidth(device)
    print(f'copy bandwidth {bw / 1e9:.1f} GB/s (read + write)', flush=True)
    for m in a.models:
        bench_model(a, m, device, dtype, mode, bw)


if __name__ == '__main__':
    main()
