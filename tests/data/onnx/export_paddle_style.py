"""Write tests/data/onnx/realworld/paddle_det_style: a small OCR-detector-like model laid out
the way paddle2onnx writes models (paddle2onnx itself is not installable here, so its
habits are reproduced with onnx.helper), with its input and ONNX Runtime's outputs in the
backend-test layout. Habits reproduced:
  - opset 11, producer "PaddlePaddle"; tensor names as Paddle's variables
    ("conv2d_0.w_0", "batch_norm_0.tmp_2", outputs "save_infer_model/scale_0.tmp_1");
  - dynamic dims named "p2o.DynamicDimension.N";
  - BatchNormalization left unfolded; hardswish as HardSigmoid(1/6, 0.5) * x (no HardSwish
    before opset 14); relu6 as Clip with min / max inputs from Constant nodes; Paddle's
    `scale` op as Mul and Add by Constant scalars;
  - the upsampling size computed at run time: Shape -> Slice -> Mul -> Concat -> Resize
    (opset 11, empty roi / scales, nearest, asymmetric, floor); Pad with its pads input;
  - Transpose to channels-last, Reshape with a 0 in its shape, Softmax (opset-11
    semantics) over the last axis, ReduceMean; an Identity node and an unused initializer.
Usage (Debian's python3 with python3-onnx, and onnxruntime-node from bench/onnx_vs_ort):
  /usr/bin/python3 export_paddle_style.py OUT_DIR
writes OUT_DIR/paddle_det_style/{model.onnx, test_data_set_{0,1}/input_0.pb} and a job for
ONNX Runtime; then
  NODE_PATH=bench/onnx_vs_ort/node_modules node tests/data/onnx/ort_outputs.js OUT_DIR/job.json
  /usr/bin/python3 export_paddle_style.py OUT_DIR --outputs
write ONNX Runtime's outputs as test_data_set_0/output_N.pb.
"""
import json, os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(sys.argv[1], "paddle_det_style")
# Two data sets of other batch and image sizes: the dynamic dims at work.
SHAPES = [(2, 3, 20, 28), (1, 3, 32, 24)]
if sys.argv[2:] == ["--outputs"]:  # ONNX Runtime's outputs (ort_outputs.js) as output_N.pb
    names = [o.name for o in onnx.load(os.path.join(OUT, "model.onnx")).graph.output]
    for k in range(len(SHAPES)):
        for i, name in enumerate(names):
            stem = os.path.join(sys.argv[1], f"set{k}_out_{i}")
            dims = json.load(open(stem + ".json"))["dims"]
            y = np.fromfile(stem + ".bin", np.float32).reshape(dims)
            open(os.path.join(OUT, f"test_data_set_{k}", f"output_{i}.pb"), "wb").write(
                numpy_helper.from_array(y, name).SerializeToString())
    sys.exit(0)
rng = np.random.default_rng(7)


def init(name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def const(out, value):
    arr = np.array(value)
    return helper.make_node("Constant", [], [out], value=numpy_helper.from_array(arr, out + "_v"))


inits = [
    init("conv2d_0.w_0", [8, 3, 3, 3]),
    init("batch_norm_0.w_0", [8], 0.1), init("batch_norm_0.b_0", [8], 0.1),
    init("batch_norm_0.w_1", [8], 0.1),
    numpy_helper.from_array((rng.random(8) + 0.5).astype(np.float32), "batch_norm_0.w_2"),
    init("depthwise_conv2d_0.w_0", [8, 1, 3, 3]),
    init("conv2d_1.w_0", [4, 8, 1, 1]), init("conv2d_1.b_0", [4], 0.1),
    init("unused_param.w_0", [2, 2]),
]
# batch_norm scale near 1
inits[1] = numpy_helper.from_array((1 + rng.standard_normal(8) * 0.1).astype(np.float32),
                                   "batch_norm_0.w_0")

nodes = [
    helper.make_node("Conv", ["x", "conv2d_0.w_0"], ["conv2d_0.tmp_0"], pads=[1, 1, 1, 1],
                     strides=[2, 2], dilations=[1, 1], group=1, kernel_shape=[3, 3]),
    helper.make_node("BatchNormalization",
                     ["conv2d_0.tmp_0", "batch_norm_0.w_0", "batch_norm_0.b_0",
                      "batch_norm_0.w_1", "batch_norm_0.w_2"], ["batch_norm_0.tmp_2"],
                     epsilon=1e-5, momentum=0.9),
    helper.make_node("HardSigmoid", ["batch_norm_0.tmp_2"], ["hardswish_0.tmp_s"],
                     alpha=1.0 / 6, beta=0.5),
    helper.make_node("Mul", ["batch_norm_0.tmp_2", "hardswish_0.tmp_s"], ["hardswish_0.tmp_0"]),
    helper.make_node("Conv", ["hardswish_0.tmp_0", "depthwise_conv2d_0.w_0"],
                     ["depthwise_conv2d_0.tmp_0"], pads=[1, 1, 1, 1], strides=[1, 1],
                     group=8, kernel_shape=[3, 3]),
    const("scale_0.s", np.array(0.5, np.float32)), const("scale_0.b", np.array(0.1, np.float32)),
    helper.make_node("Mul", ["depthwise_conv2d_0.tmp_0", "scale_0.s"], ["scale_0.tmp_m"]),
    helper.make_node("Add", ["scale_0.tmp_m", "scale_0.b"], ["scale_0.tmp_0"]),
    const("relu6_0.min", np.array(0.0, np.float32)), const("relu6_0.max", np.array(6.0, np.float32)),
    helper.make_node("Clip", ["scale_0.tmp_0", "relu6_0.min", "relu6_0.max"], ["relu6_0.tmp_0"]),
    helper.make_node("Identity", ["relu6_0.tmp_0"], ["relu6_0.tmp_1"]),
    # Upsampling to twice the map's size, the size from the map's own shape.
    helper.make_node("Shape", ["relu6_0.tmp_1"], ["shape_0.tmp_0"]),
    const("slice_0.s", np.array([2], np.int64)), const("slice_0.e", np.array([4], np.int64)),
    const("slice_0.a", np.array([0], np.int64)),
    helper.make_node("Slice", ["shape_0.tmp_0", "slice_0.s", "slice_0.e", "slice_0.a"],
                     ["slice_0.tmp_0"]),
    const("scale_1.s", np.array([2], np.int64)),
    helper.make_node("Mul", ["slice_0.tmp_0", "scale_1.s"], ["scale_1.tmp_0"]),
    helper.make_node("Slice", ["shape_0.tmp_0", "slice_0.a", "slice_0.s", "slice_0.a"],
                     ["slice_1.tmp_0"]),
    helper.make_node("Concat", ["slice_1.tmp_0", "scale_1.tmp_0"], ["concat_0.tmp_0"], axis=0),
    const("resize_0.roi", np.array([], np.float32)), const("resize_0.scales", np.array([], np.float32)),
    helper.make_node("Resize", ["relu6_0.tmp_1", "resize_0.roi", "resize_0.scales", "concat_0.tmp_0"],
                     ["nearest_interp_v2_0.tmp_0"], mode="nearest",
                     coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    const("pad_0.pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
    const("pad_0.value", np.array(0.0, np.float32)),
    helper.make_node("Pad", ["nearest_interp_v2_0.tmp_0", "pad_0.pads", "pad_0.value"],
                     ["pad2d_0.tmp_0"], mode="constant"),
    helper.make_node("Conv", ["pad2d_0.tmp_0", "conv2d_1.w_0", "conv2d_1.b_0"], ["conv2d_1.tmp_1"],
                     pads=[0, 0, 0, 0], strides=[1, 1], group=1, kernel_shape=[1, 1]),
    helper.make_node("Sigmoid", ["conv2d_1.tmp_1"], ["save_infer_model/scale_1.tmp_1"]),
    # A per-position class distribution, averaged: channels last, softmax, mean.
    helper.make_node("Transpose", ["relu6_0.tmp_1"], ["transpose_0.tmp_0"], perm=[0, 2, 3, 1]),
    const("reshape2_0.shape", np.array([0, -1, 8], np.int64)),
    helper.make_node("Reshape", ["transpose_0.tmp_0", "reshape2_0.shape"], ["reshape2_0.tmp_0"]),
    helper.make_node("Softmax", ["reshape2_0.tmp_0"], ["softmax_0.tmp_0"], axis=2),
    helper.make_node("ReduceMean", ["softmax_0.tmp_0"], ["save_infer_model/scale_0.tmp_1"],
                     axes=[1], keepdims=0),
]
dyn = [f"p2o.DynamicDimension.{i}" for i in range(3)]
graph = helper.make_graph(
    nodes, "paddle-infer",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dyn[0], 3, dyn[1], dyn[2]])],
    [helper.make_tensor_value_info("save_infer_model/scale_0.tmp_1", TensorProto.FLOAT, [dyn[0], 8]),
     helper.make_tensor_value_info("save_infer_model/scale_1.tmp_1", TensorProto.FLOAT,
                                   [dyn[0], 4, "p2o.DynamicDimension.3", "p2o.DynamicDimension.4"])],
    inits)
model = helper.make_model(graph, producer_name="PaddlePaddle", producer_version="2.5",
                          opset_imports=[helper.make_opsetid("", 11)])
model.ir_version = 6
os.makedirs(OUT, exist_ok=True)
onnx.save(model, os.path.join(OUT, "model.onnx"))

jobs = []
for k, shape in enumerate(SHAPES):
    os.makedirs(os.path.join(OUT, f"test_data_set_{k}"), exist_ok=True)
    x = rng.standard_normal(shape).astype(np.float32)
    open(os.path.join(OUT, f"test_data_set_{k}", "input_0.pb"), "wb").write(
        numpy_helper.from_array(x, "x").SerializeToString())
    x.tofile(os.path.join(sys.argv[1], f"set{k}_x.bin"))
    jobs.append({"input": os.path.join(sys.argv[1], f"set{k}_x.bin"), "shape": list(shape),
                 "out": os.path.join(sys.argv[1], f"set{k}_out")})
json.dump({"model": os.path.join(OUT, "model.onnx"), "sets": jobs},
          open(os.path.join(sys.argv[1], "job.json"), "w"))
