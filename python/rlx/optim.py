"""Training: optimizers (SGD, Adam, AdamW), learning-rate schedules, initialisers, and
the Trainer, which compiles one train-step graph and runs it.

    t = rlx.optim.Trainer(g, rlx.optim.AdamW(weight_decay=0.0), lr=1e-2)
    t.set_param("w", rlx.optim.xavier_uniform((4, 1), seed=0))
    for _ in range(100):
        loss = t.step({"x": x, "y": y})["loss"]
"""
from ._rlx import optim as _optim

Optimizer = _optim.Optimizer
SGD = _optim.SGD
Adam = _optim.Adam
AdamW = _optim.AdamW
Trainer = _optim.Trainer
constant_lr = _optim.constant_lr
warmup_cosine = _optim.warmup_cosine
step_lr = _optim.step_lr
xavier_uniform = _optim.xavier_uniform
kaiming_uniform = _optim.kaiming_uniform
normal = _optim.normal
