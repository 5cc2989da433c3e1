#!/usr/bin/env python3
"""SciPy side of bench/sparse_bench.cpp: preconditioned CG on the 2-D 5-point Poisson matrix
of an n x n grid (zero Dirichlet boundaries, 4 on the diagonal, -1 to each neighbour), in
float32, b = ones, exactly `iters` iterations (tol so small that it never stops earlier).

usage: sparse_scipy.py n=1024 iters=100 runs=3
Prints: RESULT cg <precond> <best ms> <median ms> <iterations>, for precond jacobi and none.
"""
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as spla


def poisson2d(n):
    t = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(n, n), dtype=np.float32)
    s = sp.diags([-1.0, -1.0], [-1, 1], shape=(n, n), dtype=np.float32)
    i = sp.identity(n, dtype=np.float32)
    a = (sp.kron(i, t) + sp.kron(s, i)).tocsr().astype(np.float32)
    a.sort_indices()
    return a


def main():
    args = dict(a.split("=") for a in sys.argv[1:])
    n, iters, runs = int(args.get("n", 1024)), int(args.get("iters", 100)), int(args.get("runs", 3))
    a = poisson2d(n)
    b = np.ones(a.shape[0], dtype=np.float32)
    jacobi = sp.diags(1.0 / a.diagonal()).tocsr().astype(np.float32)
    for name, m in (("jacobi", jacobi), ("none", None)):
        times, count = [], [0]

        def cb(_):
            count[0] += 1

        for r in range(runs + 1):  # the first run warms up
            count[0] = 0
            t0 = time.perf_counter()
            spla.cg(a, b, tol=1e-30, atol=0.0, maxiter=iters, M=m, callback=cb)
            if r > 0:
                times.append(time.perf_counter() - t0)
        print(f"RESULT cg {name} {1e3 * min(times):.3f} {1e3 * float(np.median(times)):.3f} {count[0]}",
              flush=True)
    print(f"VERSION scipy {scipy.__version__} numpy {np.__version__}", flush=True)


if __name__ == "__main__":
    main()
