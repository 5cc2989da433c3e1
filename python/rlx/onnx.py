"""ONNX models as rlx graphs.

    m = rlx.onnx.load("model.onnx")      # m.graph, m.inputs, m.outputs (ONNX names)
    cg = rlx.Session("cpu").compile(m.graph)
    y = cg.run([np.load(...)])

read_tensor reads the TensorProto files (input_N.pb / output_N.pb) of ONNX's test
layout as NumPy arrays.
"""
from ._rlx import onnx as _onnx

Model = _onnx.Model
load = _onnx.load
read_tensor = _onnx.read_tensor
read_tensor_name = _onnx.read_tensor_name
register_ops = _onnx.register_ops
