#!/usr/bin/env python3
"""PyTorch side of bench/train_bench.cpp: times train steps (forward, backward, gradient
clipping, AdamW) of the models the C++ side times, on the CPU in float32, with the same
shapes and thread count. The models are tests/train/torch_ref.py's.

usage: train_torch.py threads=N warmup=W steps=S MODEL_SPEC...
  MODEL_SPEC: gpt:<batch>:<seq>:<vocab>:<d_model>:<heads>:<layers>
              layer:<batch>:<seq>:<d_model>:<heads>   (one non-causal encoder layer)
Prints one line per model: RESULT <spec> <ms per step> <torch threads>.
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "train"))
from torch_ref import block, gpt_loss  # noqa: E402


def init(name, shape, gen):
    """As examples/demo/model.cpp's init_params (up to the random draws)."""
    if name.endswith(".scale"):
        return torch.ones(shape)
    if name.endswith((".bias", ".b1", ".b2")):
        return torch.zeros(shape)
    return torch.randn(shape, generator=gen) * 0.02


def params(shapes, gen):
    return {n: init(n, s, gen).requires_grad_() for n, s in shapes.items()}


def block_shapes(prefix, d):
    s = {prefix + ".ln1.scale": [d], prefix + ".ln1.bias": [d],
         prefix + ".ln2.scale": [d], prefix + ".ln2.bias": [d],
         prefix + ".mlp.w1": [d, 4 * d], prefix + ".mlp.b1": [4 * d],
         prefix + ".mlp.w2": [4 * d, d], prefix + ".mlp.b2": [d]}
    s.update({prefix + ".attn.w" + c: [d, d] for c in "qkvo"})
    return s


def make(spec, gen):
    """The params and a closure computing the loss for one model spec."""
    kind, *dims = spec.split(":")
    dims = [int(v) for v in dims]
    if kind == "gpt":
        batch, seq, vocab, d, heads, layers = dims
        shapes = {"tok_emb": [vocab, d], "pos_emb": [seq, d], "ln_f.scale": [d], "ln_f.bias": [d]}
        for i in range(layers):
            shapes.update(block_shapes(f"blocks.{i}", d))
        p = params(shapes, gen)
        data = {"tokens": torch.randint(vocab, (batch, seq), generator=gen),
                "targets": torch.randint(vocab, (batch, seq), generator=gen),
                "pos": torch.arange(seq)}
        cfg = {"heads": heads, "layers": layers}
        return p, lambda: gpt_loss(p, data, cfg)
    batch, seq, d, heads = dims
    p = params(block_shapes("layer", d), gen)
    x = torch.randn(batch, seq, d, generator=gen)
    return p, lambda: block(x, p, "layer", heads, causal=False).square().mean()


def main():
    opts = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    specs = [a for a in sys.argv[1:] if "=" not in a]
    torch.set_num_threads(int(opts["threads"]))
    gen = torch.Generator().manual_seed(0)
    for spec in specs:
        p, loss_fn = make(spec, gen)
        opt = torch.optim.AdamW(list(p.values()), lr=1e-3)

        def step():
            opt.zero_grad()
            loss_fn().backward()
            torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
            opt.step()

        for _ in range(int(opts["warmup"])):
            step()
        steps = int(opts["steps"])
        start = time.perf_counter()
        for _ in range(steps):
            step()
        ms = (time.perf_counter() - start) / steps * 1e3
        print(f"RESULT {spec} {ms:.3f} {torch.get_num_threads()}", flush=True)


if __name__ == "__main__":
    main()
