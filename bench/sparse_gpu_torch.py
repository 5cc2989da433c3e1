# PyTorch's side of rlx-bench-sparse-gpu: Jacobi-preconditioned CG on the 2-D 5-point
# Poisson matrix (grid n x n, f32, a torch.sparse_csr_tensor on the GPU), exactly `iters`
# iterations of a hand-written CG loop; prints "RESULT torch_cg <ms per iteration>" (the
# median of --runs runs, CUDA events), "RESULT torch_spmv <ms>" (one A @ x, the median of
# 4 x --runs, each timed alone as rlx's is) and the versions.
import argparse
import sys

import torch

p = argparse.ArgumentParser()
p.add_argument("--grid", type=int, default=1024)
p.add_argument("--iters", type=int, default=100)
p.add_argument("--runs", type=int, default=5)
a = p.parse_args()
if not torch.cuda.is_available():
    sys.exit(1)
dev = "cuda"
n = a.grid
N = n * n

# Rows in order, columns sorted: (i, j) -> i * n + j; -1 above / below / left / right, 4 on
# the diagonal (the same matrix as rlx::sparse::poisson2d).
idx = torch.arange(N, device=dev)
i, j = idx // n, idx % n
rows, cols = [idx], [idx]
vals = [torch.full((N,), 4.0, device=dev)]
for di, dj in ((-1, 0), (0, -1), (0, 1), (1, 0)):
    ok = (i + di >= 0) & (i + di < n) & (j + dj >= 0) & (j + dj < n)
    rows.append(idx[ok])
    cols.append(((i + di) * n + (j + dj))[ok])
    vals.append(torch.full((int(ok.sum()),), -1.0, device=dev))
r, c, v = torch.cat(rows), torch.cat(cols), torch.cat(vals)
A = torch.sparse_coo_tensor(torch.stack([r, c]), v, (N, N)).coalesce().to_sparse_csr()
dinv = 1.0 / torch.full((N,), 4.0, device=dev)
b = torch.ones(N, device=dev)


def cg(iters):
    x = torch.zeros_like(b)
    r = b.clone()
    z = dinv * r
    p = z.clone()
    rz = torch.dot(r, z)
    for _ in range(iters):
        q = A @ p
        alpha = rz / torch.dot(p, q)
        x += alpha * p
        r -= alpha * q
        z = dinv * r
        rz_new = torch.dot(r, z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x


with torch.no_grad():
    cg(5)
    torch.cuda.synchronize()
    times = []
    for _ in range(a.runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        cg(a.iters)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / a.iters)
    times.sort()
    spmv = []
    for _ in range(4 * a.runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        y = A @ b
        e.record()
        torch.cuda.synchronize()
        spmv.append(s.elapsed_time(e))
    spmv.sort()
print("VERSION torch", torch.__version__, torch.version.cuda, flush=True)
print("RESULT torch_spmv", spmv[len(spmv) // 2], spmv[0], flush=True)
print("RESULT torch_cg", times[len(times) // 2], times[0], flush=True)
