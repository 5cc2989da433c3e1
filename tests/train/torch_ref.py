#!/usr/bin/env python3
"""PyTorch reference for torch_equivalence_test.cpp: trains the same model from the same
initial weights on the same batches, in float64, and writes what the test compares.

usage: torch_ref.py DIR model=mlp|gpt steps=N [heads= layers= smoothing= beta1= beta2=
                    eps= weight_decay= clip=]

Reads DIR/p.<param>.npy (initial params), DIR/in.<step>.<input>.npy (each step's batch)
and DIR/lr.npy (each step's learning rate). Writes DIR/out.<step>.loss.npy,
DIR/out.<step>.grad_norm.npy, DIR/out.<step>.grad.<param>.npy (the gradients at the
step's params, before clipping) and DIR/out.final.<param>.npy.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def layer_norm(x, p, prefix):
    return F.layer_norm(x, x.shape[-1:], p[prefix + ".scale"], p[prefix + ".bias"], eps=1e-5)


def block(x, p, prefix, heads, causal=True):
    """examples/demo/model.cpp's transformer_block."""
    b, t, d = x.shape
    split = lambda v: v.reshape(b, t, heads, d // heads).transpose(1, 2)
    h = layer_norm(x, p, prefix + ".ln1")
    q, k, v = (split(h @ p[prefix + ".attn.w" + c]) for c in "qkv")
    scores = q @ k.transpose(-1, -2) / math.sqrt(d // heads)
    if causal:
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -math.inf)
    a = torch.softmax(scores, dim=-1) @ v
    x = x + a.transpose(1, 2).reshape(b, t, d) @ p[prefix + ".attn.wo"]
    h = F.gelu(layer_norm(x, p, prefix + ".ln2") @ p[prefix + ".mlp.w1"] + p[prefix + ".mlp.b1"])
    return x + (h @ p[prefix + ".mlp.w2"] + p[prefix + ".mlp.b2"])


def gpt_loss(p, batch, cfg):
    """examples/demo/model.cpp's build_gpt(with_loss = true)."""
    x = F.embedding(batch["tokens"], p["tok_emb"]) + F.embedding(batch["pos"], p["pos_emb"])
    for i in range(int(cfg["layers"])):
        x = block(x, p, f"blocks.{i}", int(cfg["heads"]))
    logits = layer_norm(x, p, "ln_f") @ p["tok_emb"].T
    return F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten())


def mlp_loss(p, batch, cfg):
    h = F.gelu(batch["x"] @ p["w1"] + p["b1"])
    logits = h @ p["w2"] + p["b2"]
    return F.cross_entropy(logits, batch["labels"], label_smoothing=float(cfg["smoothing"]))


def main():
    out_dir = sys.argv[1]
    cfg = dict(a.split("=", 1) for a in sys.argv[2:])
    loss_fn = {"mlp": mlp_loss, "gpt": gpt_loss}[cfg["model"]]
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    path = lambda name: os.path.join(out_dir, name + ".npy")
    load = lambda name: torch.from_numpy(np.load(path(name)))
    save = lambda name, t: np.save(path(name), t.detach().numpy())

    files = sorted(os.listdir(out_dir))
    names = [f[2:-4] for f in files if f.startswith("p.")]
    p = {n: load("p." + n).requires_grad_() for n in names}
    lrs = np.load(path("lr"))
    opt = torch.optim.AdamW(
        list(p.values()), lr=float(lrs[0]), betas=(float(cfg["beta1"]), float(cfg["beta2"])),
        eps=float(cfg["eps"]), weight_decay=float(cfg["weight_decay"]))
    clip = float(cfg["clip"])
    for step in range(int(cfg["steps"])):
        prefix = f"in.{step}."
        batch = {f[len(prefix):-4]: load(f[:-4]) for f in files if f.startswith(prefix)}
        opt.zero_grad()
        loss = loss_fn(p, batch, cfg)
        loss.backward()
        save(f"out.{step}.loss", loss)
        for n in names:
            save(f"out.{step}.grad.{n}", p[n].grad)
        grads = [t.grad for t in p.values()]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        if clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
        save(f"out.{step}.grad_norm", norm)
        for group in opt.param_groups:
            group["lr"] = float(lrs[step])
        opt.step()
    for n in names:
        save(f"out.final.{n}", p[n])


if __name__ == "__main__":
    main()
