#!/usr/bin/python3
"""Where rlx's values first depart from ONNX Runtime's on one ONNX model.

Every output of the chosen ONNX op types (default: all of them) becomes a graph output; the
model then runs in ONNX Runtime 1.30 (npm's onnxruntime-node, through
tests/corpus/ort_ref.js) and in rlx (its Python module) on the same inputs, and each value
is printed in graph order with its largest difference from ORT's, as a fraction of ORT's
range, and how many elements differ at all. The first rows that differ say where to look;
a quantized model shows it plainly, as a value whose integers differ by one step.

usage: bench/onnx_vs_ort/diverge.py MODEL.onnx DATA_DIR [--ops Conv,QuantizeLinear,...]
       [--optimization all|basic|disabled] [--all]

DATA_DIR holds input_N.pb (ONNX's test layout). --optimization sets ORT's graph
optimizations (its own spread between levels is the yardstick for quantized models);
--all prints every value, not only up to the first few that differ.
Needs Debian's python3-onnx and numpy (/usr/bin/python3), rlx's Python module
(PYTHONPATH=build/python) and node_modules in this folder.
"""
import argparse
import importlib.util
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def corpus_module():
    """tests/corpus/make_corpus.py, for its ORT runner (ort_outputs)."""
    spec = importlib.util.spec_from_file_location(
        "make_corpus", os.path.join(ROOT, "tests", "corpus", "make_corpus.py"))
    mod = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, ["make_corpus"]
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.argv = argv
    return mod


# The output dtype of ops whose result is not the float their input is.
INT_OUTPUTS = {"ConvInteger": TensorProto.INT32, "MatMulInteger": TensorProto.INT32,
               "DynamicQuantizeLinear": TensorProto.UINT8}


def with_outputs(model, ops, path):
    """model with the first output of every node of `ops` (all when empty) made a graph
    output; returns their names in graph order."""
    have = {o.name for o in model.graph.output}
    types = {v.name: v.type.tensor_type.elem_type
             for v in list(model.graph.value_info) + list(model.graph.output)}
    names = []
    for n in model.graph.node:
        if (ops and n.op_type not in ops) or not n.output or not n.output[0]:
            continue
        t = n.output[0]
        if n.op_type == "QuantizeLinear":
            elem = TensorProto.UINT8
            if len(n.input) > 2:
                zp = [i for i in model.graph.initializer if i.name == n.input[2]]
                elem = zp[0].data_type if zp else elem
        else:
            elem = types.get(t) or INT_OUTPUTS.get(n.op_type, TensorProto.FLOAT)
        if t not in have:
            model.graph.output.append(helper.make_tensor_value_info(t, elem, None))
        names.append(t)
    onnx.save(model, path)
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--ops", default="", help="ONNX op types whose outputs to compare")
    ap.add_argument("--optimization", default="all", choices=["all", "basic", "disabled"])
    ap.add_argument("--all", action="store_true", help="every value, not up to the first few")
    a = ap.parse_args()
    import rlx
    import rlx.onnx

    mc = corpus_module()
    model = onnx.load(a.model)
    inputs = [i for i in model.graph.input
              if i.name not in {t.name for t in model.graph.initializer}]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        names = with_outputs(model, set(filter(None, a.ops.split(","))), path)
        feeds, job_inputs = [], []
        for i, vi in enumerate(inputs):
            x = rlx.onnx.read_tensor(os.path.join(a.data, f"input_{i}.pb"))
            raw = os.path.join(tmp, f"in_{i}.bin")
            x.astype(x.dtype.newbyteorder("<")).tofile(raw)
            feeds.append(x)
            job_inputs.append({"name": vi.name, "dtype": str(x.dtype), "shape": list(x.shape),
                               "file": raw})
        ort = mc.ort_outputs([{"name": "diverge", "model": path, "dir": tmp,
                               "inputs": job_inputs, "optimization": a.optimization}])[0]
        m = rlx.onnx.load(path)
        got = rlx.Session("cpu").compile(m.graph).run(feeds)
        ours = dict(zip(m.outputs, got.values()))
    shown = differing = 0
    print(f"{'value':60s} {'dtype':8s} {'max diff / range':>17s} {'elements off':>16s}")
    for t in names:
        want, have = ort[t].astype(np.float64), np.asarray(ours[t]).astype(np.float64)
        if want.shape != have.shape:
            print(f"{t[-60:]:60s} shapes differ: ORT {want.shape}, rlx {have.shape}")
            differing += 1
            continue
        diff = np.abs(want - have)
        rng = float(want.max() - want.min()) if want.size else 0.0
        off = int((diff > 0).sum())
        differing += off > 0
        if a.all or differing <= 5:
            rel = float(diff.max()) / rng if diff.size and rng else float(diff.max(initial=0))
            print(f"{t[-60:]:60s} {str(ort[t].dtype):8s} {rel:17.2e} {off:7d}/{diff.size:<8d}")
            shown += 1
    print(f"{len(names)} values, {differing} differ ({shown} shown)")


if __name__ == "__main__":
    main()
