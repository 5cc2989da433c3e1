"""The corpus's quantized twins, written in the two forms ONNX Runtime's quantization tools
write (onnxruntime.quantization is not on this machine; its formats are):

- dynamic (quantize_dynamic): each Conv / MatMul / Gemm with a constant weight becomes
  DynamicQuantizeLinear of its input (uint8, a scale and zero point computed per run),
  ConvInteger / MatMulInteger against the weight quantized to uint8 with a zero point, a
  Cast of the int32 sums to float, a Mul by the input's scale times the weight's, and the
  bias added in float.
- static QDQ (quantize_static, QuantFormat.QDQ): every float activation read or written by a
  Conv, Gemm, MatMul, Add or pool goes through QuantizeLinear -> DequantizeLinear (uint8,
  asymmetric, its range calibrated on ONNX Runtime's own run of the float model); weights are
  int8, symmetric, per output channel, and biases int32 at the input's scale times the
  weight's, each read through a DequantizeLinear.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _initializers(g):
    return {t.name: t for t in g.initializer}


def _uint8_asym(lo, hi):
    """Scale and zero point of an asymmetric uint8 range holding 0 (as ORT computes them)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    return np.float32(scale), np.uint8(round(-lo / scale))


def quantize_dynamic(path):
    """Rewrites the model at path in quantize_dynamic's form (see the module's doc)."""
    m = onnx.load(path)
    g = m.graph
    inits = _initializers(g)
    nodes, new_inits = [], []
    for n in g.node:
        w_name = n.input[1] if len(n.input) > 1 else ""
        w = inits.get(w_name)
        ok = (n.op_type in ("Conv", "MatMul", "Gemm") and w is not None
              and w.data_type == TensorProto.FLOAT)
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Gemm":
            ok = ok and attrs.get("transA", 0) == 0 and attrs.get("alpha", 1.0) == 1.0 \
                and attrs.get("beta", 1.0) == 1.0
        if not ok:
            nodes.append(n)
            continue
        wa = numpy_helper.to_array(w)
        if n.op_type == "Gemm" and attrs.get("transB", 0):
            wa = wa.T
        ws, wz = _uint8_asym(wa.min(), wa.max())
        wq = np.clip(np.round(wa / ws) + wz, 0, 255).astype(np.uint8)
        p = n.name or n.output[0]
        new_inits += [numpy_helper.from_array(wq, p + "_wq"),
                      numpy_helper.from_array(np.array(ws, np.float32), p + "_ws"),
                      numpy_helper.from_array(np.array(wz, np.uint8), p + "_wz")]
        x = n.input[0]
        nodes.append(helper.make_node("DynamicQuantizeLinear", [x],
                                      [p + "_xq", p + "_xs", p + "_xz"]))
        if n.op_type == "Conv":
            conv_attrs = {k: v for k, v in attrs.items()}
            nodes.append(helper.make_node("ConvInteger", [p + "_xq", p + "_wq", p + "_xz",
                                                          p + "_wz"], [p + "_i32"],
                                          **conv_attrs))
        else:
            nodes.append(helper.make_node("MatMulInteger", [p + "_xq", p + "_wq", p + "_xz",
                                                            p + "_wz"], [p + "_i32"]))
        nodes.append(helper.make_node("Cast", [p + "_i32"], [p + "_f"], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("Mul", [p + "_xs", p + "_ws"], [p + "_s"]))
        bias = n.input[2] if len(n.input) > 2 and n.input[2] else None
        y = n.output[0]
        nodes.append(helper.make_node("Mul", [p + "_f", p + "_s"], [p + "_y" if bias else y]))
        if bias:
            b = bias
            if n.op_type == "Conv":  # [C] -> [C, 1, 1, ...] to broadcast over the pixels
                rank = len(numpy_helper.to_array(w).shape)
                ba = numpy_helper.to_array(inits[bias]).reshape([-1] + [1] * (rank - 2))
                b = p + "_b"
                new_inits.append(numpy_helper.from_array(ba.astype(np.float32), b))
            nodes.append(helper.make_node("Add", [p + "_y", b], [y]))
    _replace(g, nodes, new_inits)
    onnx.save(m, path)


def _replace(g, nodes, new_inits):
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(new_inits)
    used = {i for n in g.node for i in n.input}
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                used |= {i for sn in a.g.node for i in sn.input}
    keep = [t for t in g.initializer if t.name in used or t.name in {o.name for o in g.output}]
    del g.initializer[:]
    g.initializer.extend(keep)


QDQ_OPS = ("Conv", "Gemm", "MatMul", "Add", "MaxPool", "AveragePool", "GlobalAveragePool")


def qdq_tensors(path):
    """The float activations quantize_qdq puts through Q / DQ: inputs and outputs of QDQ_OPS
    that are not initializers (what calibration must see)."""
    g = onnx.load(path).graph
    inits = _initializers(g)
    out = []
    for n in g.node:
        if n.op_type not in QDQ_OPS:
            continue
        ins = n.input[:1] if n.op_type in ("Conv", "Gemm") else n.input
        for t in list(ins) + list(n.output[:1]):
            if t and t not in inits and t not in out:
                out.append(t)
    return out


def with_outputs(path, names, out_path):
    """The model at path with `names` added to its outputs (for calibration)."""
    m = onnx.load(path)
    have = {o.name for o in m.graph.output}
    for t in names:
        if t not in have:
            m.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    onnx.save(m, out_path)


def quantize_qdq(path, ranges):
    """Rewrites the model at path in quantize_static's QDQ form; ranges maps each of
    qdq_tensors(path) to its (min, max) on the calibration run."""
    m = onnx.load(path)
    g = m.graph
    inits = _initializers(g)
    graph_outputs = {o.name for o in g.output}
    scale = {t: _uint8_asym(*r) for t, r in ranges.items()}
    new_inits, nodes = [], []

    def qdq(t):  # Q -> DQ of activation t, returns the DQ's output
        s, z = scale[t]
        new_inits.extend([numpy_helper.from_array(np.array(s, np.float32), t + "_s"),
                          numpy_helper.from_array(np.array(z, np.uint8), t + "_z")])
        nodes.append(helper.make_node("QuantizeLinear", [t, t + "_s", t + "_z"], [t + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [t + "_q", t + "_s", t + "_z"],
                                      [t + "_dq"]))
        return t + "_dq"

    dq = {}
    for t in g.input:  # graph inputs first: their Q / DQ come before any reader
        if t.name in scale:
            dq[t.name] = qdq(t.name)
    for n in g.node:
        ins = list(n.input)
        for i, t in enumerate(ins):
            if t in dq and n.op_type in QDQ_OPS and not (n.op_type in ("Conv", "Gemm") and i):
                ins[i] = dq[t]
        if n.op_type in ("Conv", "Gemm") and len(ins) > 1 and ins[1] in inits:
            w = numpy_helper.to_array(inits[ins[1]])
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            axis = 1 if n.op_type == "Gemm" and not attrs.get("transB", 0) else 0
            wt = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
            ws = (np.abs(wt).max(axis=1) / 127.0).astype(np.float32)
            ws[ws == 0] = 1.0
            shape = [1] * w.ndim
            shape[axis] = -1
            wq = np.clip(np.round(w / ws.reshape(shape)), -127, 127).astype(np.int8)
            p = n.name or n.output[0]
            new_inits += [numpy_helper.from_array(wq, p + "_wq"),
                          numpy_helper.from_array(ws, p + "_ws"),
                          numpy_helper.from_array(np.zeros_like(wq, shape=ws.shape), p + "_wz")]
            nodes.append(helper.make_node("DequantizeLinear", [p + "_wq", p + "_ws", p + "_wz"],
                                          [p + "_w"], axis=axis))
            ins[1] = p + "_w"
            if len(ins) > 2 and ins[2] in inits and n.input[0] in scale:
                b = numpy_helper.to_array(inits[ins[2]])
                bs = (scale[n.input[0]][0] * ws).astype(np.float32)
                bq = np.round(b / bs).astype(np.int32)
                new_inits += [numpy_helper.from_array(bq, p + "_bq"),
                              numpy_helper.from_array(bs, p + "_bs")]
                nodes.append(helper.make_node("DequantizeLinear", [p + "_bq", p + "_bs"],
                                              [p + "_b"], axis=0))
                ins[2] = p + "_b"
        del n.input[:]
        n.input.extend(ins)
        nodes.append(n)
        t = n.output[0] if n.output else ""
        if t in scale and t not in dq and t not in graph_outputs:
            dq[t] = qdq(t)
    _replace(g, nodes, new_inits)
    onnx.save(m, path)
