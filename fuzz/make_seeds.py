#!/usr/bin/python3
"""Writes the small committed seeds under fuzz/corpus/<target>/ (Debian's python3 with
numpy and onnx). Larger seeds (ONNX's node tests, tests/data models) are gathered at run
time by fuzz/run.sh. Rerun after changing this file: the outputs are deterministic."""
import io
import json
import os
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_seeds():
    arrays = {
        "f32_2x3": np.arange(6, dtype="<f4").reshape(2, 3),
        "f64_scalar": np.array(2.5),
        "i64_empty": np.zeros((0, 4), dtype="<i8"),
        "bool_3": np.array([True, False, True]),
        "f32_big_endian": np.arange(4, dtype=">f4"),
        "i32_fortran": np.asfortranarray(np.arange(6, dtype="<i4").reshape(2, 3)),
        "f16_4": np.arange(4, dtype="<f2"),
        "u8_5": np.arange(5, dtype="u1"),
        "i8_i16": np.arange(3, dtype="<i2"),
        "bf16_void": np.array([0x3F80, 0x4000], dtype="<u2").view("V2"),
    }
    for name, a in arrays.items():
        for version in ((1, 0), (2, 0), (3, 0)) if name == "f32_2x3" else ((1, 0),):
            b = io.BytesIO()
            np.lib.format.write_array(b, a, version=version, allow_pickle=False)
            put("npy", f"{name}_v{version[0]}.npy", b.getvalue())


def safetensors_bytes(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    f32 = np.arange(6, dtype="<f4").tobytes()
    put("safetensors", "two.safetensors", safetensors_bytes(
        {"w": ("F32", [2, 3], f32), "b": ("I64", [2], np.arange(2, dtype="<i8").tobytes())},
        {"step": "100"}))
    put("safetensors", "dtypes.safetensors", safetensors_bytes({
        "h": ("F16", [2], np.ones(2, "<f2").tobytes()),
        "bf": ("BF16", [1], b"\x80\x3f"),
        "flag": ("BOOL", [3], b"\x01\x00\x01"),
        "empty": ("I32", [0, 5], b""),
        "scalar": ("F64", [], np.array(1.5, "<f8").tobytes()),
    }))
    put("safetensors", "empty.safetensors", safetensors_bytes({}))


def tensor_proto_seeds():
    protos = {
        "f32_raw": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "x"),
        "i64_raw": numpy_helper.from_array(np.arange(3, dtype=np.int64), "i"),
        "f16_raw": numpy_helper.from_array(np.ones(4, dtype=np.float16)),
        "bool_raw": numpy_helper.from_array(np.array([True, False])),
        "f32_fields": helper.make_tensor("y", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]),
        "i32_fields": helper.make_tensor("z", TensorProto.INT32, [2], [7, -1]),
        "u64_fields": helper.make_tensor("u", TensorProto.UINT64, [2], [1, 2]),
        "f64_fields": helper.make_tensor("d", TensorProto.DOUBLE, [1], [0.5]),
        "strings": helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b""]),
        "bf16_fields": helper.make_tensor("b", TensorProto.BFLOAT16, [2], [1.0, -2.0]),
    }
    ext = helper.make_tensor("e", TensorProto.FLOAT, [2], [0.0, 0.0])
    ext.ClearField("float_data")
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "8")):
        ext.external_data.add(key=k, value=v)
    protos["external"] = ext
    for name, t in protos.items():
        put("tensor_proto", name + ".pb", t.SerializeToString())


def onnx_seeds():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]),
                           helper.make_node("Relu", ["m"], ["y"])], "mlp", [x], [y], [w])
    put("onnx", "matmul_relu.onnx",
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())

    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])
    o = helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])
    then_g = helper.make_graph([helper.make_node("Neg", ["a"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Abs", ["a"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["o"], then_branch=then_g,
                                            else_branch=else_g)], "if", [c, a], [o])
    put("onnx", "if.onnx",
        helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


TEXT = {
    "mlp.rlx": """graph main(%x: f32[batch,4], param %w: f32[4,3]) {
  %0 = matmul(%x, %w) : f32[batch,3]
  %1 = relu(%0) : f32[batch,3]
  %2 = softmax(%1) {axis=-1} : f32[batch,3]
  return y=%2
}
""",
    "cond.rlx": """graph if(%c: bool[], %a: f32[2]) {
  %0 = cond(%c, %a, %a) [
    graph then(%outer_a: f32[2], %unused_else_0: f32[2]) {
      %0 = neg(%outer_a) : f32[2]
      return t=%0
    },
    graph else(%unused_0: f32[2], %outer_a: f32[2]) {
      %0 = abs(%outer_a) : f32[2]
      return e=%0
    }
  ] : f32[2]
  return o=%0
}
""",
    "onnx_loop.rlx": """graph test_loop11(%trip_count: i64[], %cond: bool[], %y: f32[1]) {
  %0, %1 = onnx.loop(%trip_count, %cond, %y) {num_carried=1} [
    graph loop_body(%iter_count: i64[], %cond_in: bool[], %y_in: f32[?]) {
      %0 = constant() {value=tensor<f32[5]>[1.0, 2.0, 3.0, 4.0, 5.0]} : f32[5]
      %1 = constant() {value=tensor<i64[]>[1]} : i64[]
      %2 = add(%iter_count, %1) : i64[]
      %3 = expand_dims(%iter_count) {axes=[0]} : i64[1]
      %4 = expand_dims(%2) {axes=[0]} : i64[1]
      %5 = onnx.late(%0, %3, %4) {dtypes=[0], node="0a01780a0b736c6963655f73746172740a09736c6963655f656e641209736c6963655f6f75742205536c696365", opset=11, ranks=[1], slots=[0, 1, 2]} : f32[?]
      %6 = add(%y_in, %5) : f32[?]
      return cond_out=%cond_in, y_out=%6, scan_out=%6
    }
  ] : f32[?], f32[?,?]
  return res_y=%0, res_scan=%1
}
""",
    "constants.rlx": """graph main(%x: f32[2]) {
  %0 = constant() {value=tensor<f32[2]>[1.5, -inf]} : f32[2]
  %1 = add(%x, %0) : f32[2]
  %2 = cast(%1) {dtype=f16} : f16[2]
  %3 = reshape(%2) {shape=[1, 2]} : f16[1,2]
  return out0=%3 // a comment
}
""",
}


def text_seeds():
    for name, text in TEXT.items():
        put("text", name, text.encode())


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_seed():
    kv = [
        ("general.architecture", 8, gguf_string("llama")),
        ("general.alignment", 4, struct.pack("<I", 32)),
        ("llama.block_count", 5, struct.pack("<i", 2)),
        ("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
        ("a.bool", 7, b"\x01"),
        ("a.u64", 10, struct.pack("<Q", 7)),
        ("a.f64", 12, struct.pack("<d", 0.25)),
        ("a.ints", 9, struct.pack("<IQ", 5, 3) + struct.pack("<3i", 1, 2, 3)),
        ("a.strings", 9, struct.pack("<IQ", 8, 2) + gguf_string("x") + gguf_string("yz")),
        ("a.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 0, 2) + b"\x01\x02"),
    ]
    rng = np.random.default_rng(0)
    tensors = [  # name, ggml type, ne (innermost first), bytes
        ("f32", 0, [3, 2], np.arange(6, dtype="<f4").tobytes()),
        ("f16", 1, [4], np.ones(4, "<f2").tobytes()),
        ("q8_0", 8, [32], struct.pack("<e", 0.5) + rng.integers(-8, 8, 32, np.int8).tobytes()),
        ("q4_0", 2, [32], struct.pack("<e", 0.25) + rng.integers(0, 256, 16, np.uint8).tobytes()),
        ("q4_k", 12, [256], rng.integers(0, 256, 144, np.uint8).tobytes()),
    ]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, t, v in kv:
        out += gguf_string(key) + struct.pack("<I", t) + v
    data, offsets = b"", []
    for _, _, _, raw in tensors:
        data += b"\0" * (-len(data) % 32)
        offsets.append(len(data))
        data += raw
    for (name, t, ne, _), off in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", t, off)
    out += b"\0" * (-len(out) % 32)
    put("gguf", "small.gguf", out + data)
    put("gguf", "empty.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))


if __name__ == "__main__":
    npy_seeds()
    safetensors_seeds()
    tensor_proto_seeds()
    onnx_seeds()
    text_seeds()
    gguf_seed()
