# PyTorch DDP's side of rlx-bench-dist: the same GPT-2 small (as bench/gpu_torch.py defines
# it: the demo's model), AdamW, bf16 autocast, one GPU per process, started by torchrun
# (python3 -m torch.distributed.run --nproc-per-node N ddp_torch.py). Rank 0 prints
#   torch world=N batch=B seq=S step_ms=… tokens_per_s=…
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--compile", action="store_true")
a = p.parse_args()


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
        x = x + self.wo(F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        .transpose(1, 2).reshape(b, t, d))
        return x + self.w2(F.gelu(self.w1(self.ln2(x))))


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


world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
if world > 1:
    dist.init_process_group("nccl")
model = GPT(context=a.seq).to(dev)
if world > 1:
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
step_model = torch.compile(model) if a.compile else model
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
g = torch.Generator(device="cpu").manual_seed(100 + rank)
tokens = torch.randint(0, 50304, (a.batch, a.seq), generator=g).to(dev)
targets = torch.randint(0, 50304, (a.batch, a.seq), generator=g).to(dev)


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = step_model(tokens)
    loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


for _ in range(a.warmup):
    step()
torch.cuda.synchronize()
times = []
for _ in range(a.steps):
    t0 = time.perf_counter()
    loss = step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
med = torch.tensor(sorted(times)[len(times) // 2], device=dev)
if world > 1:
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
if rank == 0:
    med = med.item()
    print(f"torch world={world} batch={a.batch} seq={a.seq} step_ms={med:.2f} "
          f"tokens_per_s={a.batch * a.seq * world / (med / 1e3):.0f} loss={loss.item():.4f}",
          flush=True)
if world > 1:
    dist.destroy_process_group()
