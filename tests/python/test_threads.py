"""Python threads sharing rlx objects: one compiled graph run from 8 threads at once (run()
releases the GIL, so the runs overlap in C++), compiles of one graph from several threads
(the compile cache), each result equal to a single-threaded run."""
import threading

import numpy as np

import rlx


def mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", ("batch", 64))
    w1 = g.input("w1", (64, 128))
    w2 = g.input("w2", (128, 16))
    g.output(rlx.softmax(rlx.gelu(x @ w1) @ w2, axis=-1), "y")
    return g


def run_threads(n, fn):
    errors, results = [], [None] * n

    def body(i):
        try:
            results[i] = fn(i)
        except Exception as e:  # surfaces in the main thread's assert
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_one_compiled_graph_from_eight_threads(rng):
    cg = rlx.Session("cpu").compile(mlp())
    w1 = rng.standard_normal((64, 128)).astype(np.float32)
    w2 = rng.standard_normal((128, 16)).astype(np.float32)
    xs = [rng.standard_normal((5 + i, 64)).astype(np.float32) for i in range(8)]
    want = [cg.run({"x": x, "w1": w1, "w2": w2})["y"] for x in xs]

    def work(i):
        return [cg.run({"x": xs[i], "w1": w1, "w2": w2})["y"] for _ in range(20)]

    for i, runs in enumerate(run_threads(8, work)):
        for got in runs:
            np.testing.assert_array_equal(got, want[i])


def test_compiles_from_several_threads(rng):
    x = rng.standard_normal((3, 64)).astype(np.float32)
    w1 = rng.standard_normal((64, 128)).astype(np.float32)
    w2 = rng.standard_normal((128, 16)).astype(np.float32)
    want = rlx.Session("cpu").compile(mlp()).run([x, w1, w2])["y"]

    def work(i):
        cg = rlx.Session("cpu").compile(mlp(), cache=i % 2 == 0)
        return cg.run([x, w1, w2])["y"]

    for got in run_threads(6, work):
        np.testing.assert_array_equal(got, want)
