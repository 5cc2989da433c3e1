"""Export the 'real-world' ONNX test models of tests/data/onnx/realworld and record ONNX
Runtime's outputs (the ONNX backend-test layout: <name>/model.onnx +
<name>/test_data_set_0/{input,output}_N.pb). Run on a machine with torch, onnx and
onnxruntime (the GPU machine):  python3 export_realworld.py OUT_DIR

What each model stands for (the exporters themselves - tf2onnx, paddle2onnx - are not
installed there, so their habits are reproduced on torch exports where noted):
  kws_lstm        keyword spotting: Conv1d front end, 2-layer LSTM, dynamic batch
  vad_gru_if      voice activity: GRU + scripted control flow (nested If) on the energy
  crnn_ocr        OCR recogniser: conv stack, bidirectional LSTM, log_softmax, dynamic width
  db_ocr_det      OCR detector (DBNet-like): conv backbone, Resize upsampling, concat, sigmoid
  mobilenet_v3    depthwise CNN with hardswish / SE blocks (torchvision mobilenet_v3_small)
  seg_fp16        segmentation net (UNet-like, ConvTranspose) with fp16 weights + Cast
  tf_nhwc         tf2onnx's habits: NHWC input named 'input:0', Transpose to NCHW, 'Identity:0'
  mlp_qdyn        onnxruntime.quantization.quantize_dynamic (DynamicQuantizeLinear, MatMulInteger)
  cnn_qdq         quantize_static, QDQ format (QuantizeLinear / DequantizeLinear around Conv)
  cnn_qop         quantize_static, QOperator format (QLinearConv, QLinearMatMul …)
paddle_det_style (paddle2onnx's habits) is written by export_paddle_style.py instead.
"""
import os, sys, json, traceback
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F
import onnx, onnxruntime as ort
from onnx import numpy_helper, helper, TensorProto

OUT = sys.argv[1]
torch.manual_seed(0)
np.random.seed(0)
report = {}


def write_case(name, path, feeds):
    d = os.path.dirname(path)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    outs = sess.run(None, {n: feeds[n] for n in names})
    for i, n in enumerate(names):
        open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb").write(
            numpy_helper.from_array(feeds[n], n).SerializeToString())
    for j, (o, meta) in enumerate(zip(outs, sess.get_outputs())):
        open(os.path.join(d, "test_data_set_0", f"output_{j}.pb"), "wb").write(
            numpy_helper.from_array(np.asarray(o), meta.name).SerializeToString())
    m = onnx.load(path)
    ops = {}
    def count(g):
        for node in g.node:
            ops[node.op_type] = ops.get(node.op_type, 0) + 1
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    count(a.g)
    count(m.graph)
    report[name] = {"bytes": os.path.getsize(path), "ops": ops,
                    "inputs": {n: list(feeds[n].shape) for n in names},
                    "outputs": [list(np.asarray(o).shape) for o in outs]}
    print(name, report[name], flush=True)


def export(name, model, inputs, input_names, output_names, dynamic_axes=None, opset=17, root=None):
    d = os.path.join(root or OUT, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, tuple(inputs), path, input_names=input_names,
                          output_names=output_names, opset_version=opset,
                          dynamic_axes=dynamic_axes, dynamo=False)
    return path


def run(name, fn):
    try:
        fn()
    except Exception:
        print(name, "FAILED", flush=True)
        traceback.print_exc()


class KWS(nn.Module):
    def __init__(s, mels=20, hidden=48, classes=12):
        super().__init__()
        s.conv = nn.Conv1d(mels, 32, 5, padding=2)
        s.lstm = nn.LSTM(32, hidden, num_layers=2, batch_first=True)
        s.fc = nn.Linear(hidden, classes)
    def forward(s, x):  # x: [B, mels, T]
        h = F.relu(s.conv(x)).transpose(1, 2)
        y, _ = s.lstm(h)
        return F.log_softmax(s.fc(y[:, -1]), -1)


def kws():
    x = torch.randn(3, 20, 40)
    p = export("kws_lstm", KWS(), [x], ["mfcc"], ["logprobs"],
               {"mfcc": {0: "batch"}, "logprobs": {0: "batch"}})
    write_case("kws_lstm", p, {"mfcc": x.numpy()})


class VadCore(nn.Module):
    def __init__(s):
        super().__init__()
        s.gru = nn.GRU(16, 24, batch_first=True)
        s.fc = nn.Linear(24, 1)
        s.gate = nn.Linear(24, 24)
    def forward(s, x, h):
        y, hn = s.gru(x, h)
        e = (x * x).mean()
        if bool(e > 0.5):
            if bool(e > 2.0):
                z = torch.sigmoid(s.fc(y)) * 0.5
            else:
                z = torch.sigmoid(s.fc(torch.tanh(s.gate(y))))
        else:
            z = torch.zeros_like(s.fc(y))
        return z, hn


def vad():
    core = VadCore().eval()
    scripted = torch.jit.script(core)
    x = torch.randn(2, 30, 16)
    h = torch.zeros(1, 2, 24)
    d = os.path.join(OUT, "vad_gru_if"); os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "model.onnx")
    torch.onnx.export(scripted, (x, h), p, input_names=["audio", "state"],
                      output_names=["speech_prob", "state_out"], opset_version=16, dynamo=False)
    write_case("vad_gru_if", p, {"audio": x.numpy(), "state": h.numpy()})


class CRNN(nn.Module):
    def __init__(s, classes=37):
        super().__init__()
        s.cnn = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d((2, 1)),
            nn.Conv2d(32, 48, 3, padding=1), nn.ReLU())
        s.rnn = nn.LSTM(48, 32, bidirectional=True, batch_first=True)
        s.fc = nn.Linear(64, classes)
    def forward(s, img):  # [B, 1, 32, W]
        f = s.cnn(img).mean(2).permute(0, 2, 1)  # height pooled away
        y, _ = s.rnn(f)
        return F.log_softmax(s.fc(y), -1)


def crnn():
    m = CRNN().eval()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.3, 0.3); mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 1, 32, 64)
    p = export("crnn_ocr", m, [x], ["image"], ["logprobs"],
               {"image": {0: "batch", 3: "width"}, "logprobs": {0: "batch", 1: "steps"}})
    write_case("crnn_ocr", p, {"image": x.numpy()})


class DBNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.s1 = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
        s.s2 = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        s.s3 = nn.Sequential(nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU())
        s.l2 = nn.Conv2d(32, 32, 1); s.l3 = nn.Conv2d(64, 32, 1)
        s.head = nn.Sequential(nn.Conv2d(64, 16, 3, padding=1), nn.ReLU(),
                               nn.ConvTranspose2d(16, 8, 2, 2), nn.ReLU(),
                               nn.ConvTranspose2d(8, 1, 2, 2))
    def forward(s, x):
        c2 = s.s2(s.s1(x)); c3 = s.s3(c2)
        p3 = s.l3(c3)
        p2 = s.l2(c2) + F.interpolate(p3, scale_factor=2, mode="nearest")
        fuse = torch.cat([p2, F.interpolate(p3, size=p2.shape[2:], mode="bilinear",
                                            align_corners=False)], 1)
        return torch.sigmoid(s.head(fuse))


def dbnet():
    m = DBNet().eval()
    x = torch.randn(1, 3, 64, 96)
    p = export("db_ocr_det", m, [x], ["image"], ["prob_map"])
    write_case("db_ocr_det", p, {"image": x.numpy()})


def mobilenet_v3():
    import torchvision
    m = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10, width_mult=0.5).eval()
    x = torch.randn(1, 3, 96, 96)
    p = export("mobilenet_v3", m, [x], ["input"], ["logits"])
    write_case("mobilenet_v3", p, {"input": x.numpy()})


class UNet(nn.Module):
    def __init__(s, c=12):
        super().__init__()
        s.e1 = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU())
        s.e2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, 2, 1), nn.ReLU())
        s.up = nn.ConvTranspose2d(2 * c, c, 2, 2)
        s.d = nn.Sequential(nn.Conv2d(2 * c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 4, 1))
    def forward(s, x):
        a = s.e1(x); b = s.e2(a)
        return s.d(torch.cat([a, s.up(b)], 1)).softmax(1)


def to_fp16_weights(path):
    """Store every float initializer as FLOAT16 and Cast it back to FLOAT where it is read
    (what fp16 weight converters emit with keep_io_types)."""
    m = onnx.load(path)
    g = m.graph
    casts, renames = [], {}
    for t in g.initializer:
        if t.data_type != TensorProto.FLOAT:
            continue
        name = t.name
        a = numpy_helper.to_array(t).astype(np.float16)
        t.CopyFrom(numpy_helper.from_array(a, name + "_fp16"))
        casts.append(helper.make_node("Cast", [name + "_fp16"], [name + "_f32"], to=TensorProto.FLOAT))
        renames[name] = name + "_f32"
    for n in g.node:
        for i, x in enumerate(n.input):
            if x in renames:
                n.input[i] = renames[x]
    for c in reversed(casts):
        g.node.insert(0, c)
    onnx.save(m, path)


def seg_fp16():
    m = UNet().eval()
    x = torch.randn(1, 3, 32, 48)
    p = export("seg_fp16", m, [x], ["image"], ["classes"])
    to_fp16_weights(p)
    write_case("seg_fp16", p, {"image": x.numpy()})


class NHWCNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 8, 3, padding=1); s.c2 = nn.Conv2d(8, 8, 3, groups=8, padding=1)
        s.fc = nn.Linear(8, 5)
    def forward(s, x):  # NHWC, as TensorFlow feeds it
        h = x.permute(0, 3, 1, 2)
        h = F.relu6(s.c2(F.relu(s.c1(h))))
        h = h.mean((2, 3))
        return F.softmax(s.fc(h), -1)


def tf_nhwc():
    x = torch.randn(2, 24, 24, 3)
    p = export("tf_nhwc", NHWCNet(), [x], ["input:0"], ["Identity:0"],
               {"input:0": {0: "unk__0"}, "Identity:0": {0: "unk__1"}}, opset=13)
    write_case("tf_nhwc", p, {"input:0": x.numpy()})


class SmallMLP(nn.Module):
    def __init__(s):
        super().__init__(); s.a = nn.Linear(32, 64); s.b = nn.Linear(64, 10)
    def forward(s, x):
        return s.b(F.relu(s.a(x)))


class SmallCNN(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 8, 3, padding=1); s.c2 = nn.Conv2d(8, 16, 3, 2, 1)
        s.fc = nn.Linear(16, 10)
    def forward(s, x):
        h = F.relu(s.c2(F.relu(s.c1(x))))
        return s.fc(h.mean((2, 3)))


def quantized():
    from onnxruntime.quantization import (quantize_dynamic, quantize_static, QuantFormat,
                                          QuantType, CalibrationDataReader)
    x = torch.randn(4, 32)
    import tempfile
    tmp = tempfile.mkdtemp()
    p = export("mlp", SmallMLP(), [x], ["x"], ["y"], opset=13, root=tmp)
    q = os.path.join(OUT, "mlp_qdyn", "model.onnx"); os.makedirs(os.path.dirname(q), exist_ok=True)
    quantize_dynamic(p, q, weight_type=QuantType.QUInt8)
    write_case("mlp_qdyn", q, {"x": x.numpy()})
    img = torch.randn(2, 3, 16, 16)
    p = export("cnn", SmallCNN(), [img], ["image"], ["logits"], opset=13, root=tmp)

    class Reader(CalibrationDataReader):
        def __init__(s):
            s.it = iter([{"image": np.random.randn(2, 3, 16, 16).astype(np.float32)} for _ in range(8)])
        def get_next(s):
            return next(s.it, None)
    for name, fmt in (("cnn_qdq", QuantFormat.QDQ), ("cnn_qop", QuantFormat.QOperator)):
        q = os.path.join(OUT, name, "model.onnx"); os.makedirs(os.path.dirname(q), exist_ok=True)
        # Conv and MatMul only: a quantized Gemm would be com.microsoft.QGemm, ORT's own op.
        quantize_static(p, q, Reader(), quant_format=fmt, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, op_types_to_quantize=["Conv", "MatMul"])
        write_case(name, q, {"image": img.numpy()})


jobs = [("kws_lstm", kws), ("vad_gru_if", vad), ("crnn_ocr", crnn), ("db_ocr_det", dbnet),
        ("mobilenet_v3", mobilenet_v3), ("seg_fp16", seg_fp16), ("tf_nhwc", tf_nhwc),
        ("quantized", quantized)]
only = sys.argv[2:]  # optional: names of the jobs to run
for name, fn in jobs:
    if not only or name in only:
        run(name, fn)
json.dump(report, open(os.path.join(OUT, "report.json"), "w"), indent=1)
