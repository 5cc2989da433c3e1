"""The model corpus (issue 32): real architectures exported by torch's ONNX exporter with
random weights, ONNX Runtime's outputs as the references.

    /usr/bin/python3 make_corpus.py OUT_DIR [NAME ...]   # every model, or the named ones
    /usr/bin/python3 make_corpus.py --list               # the names, one a line

Each model lands in the ONNX backend-test layout: OUT/<name>/model.onnx and
OUT/<name>/test_data_set_0/{input,output}_N.pb. The outputs are ONNX Runtime's (npm's
onnxruntime-node, installed in bench/onnx_vs_ort; ort_ref.js beside this script), never
PyTorch's. A model already there whose stamp (a hash of this script, ort_ref.js and the
torch / torchvision / torchaudio versions) is unchanged is kept, so reruns are quick.

Needs Debian's python3-torch (1.13), python3-torchvision (0.14), python3-torchaudio (0.13),
python3-onnx, and node with onnxruntime-node; exits 77 (a skip) when any is missing.

The weights are random (seeded) but not raw: BatchNorm statistics are re-estimated on
random inputs in train mode, as a trained net's would be, so that activations keep a sane
scale through 50+ layers instead of vanishing or blowing up (which would make every
comparison a near-zero or an overflow question).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_DIR = os.environ.get("RLX_ORT_NODE_DIR",
                         os.path.join(HERE, "..", "..", "bench", "onnx_vs_ort"))
SKIP = 77

# name -> builder; the builders are defined below, after the imports they need.
MODELS = [
    "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "resnet18", "resnet50",
    "efficientnet_b0", "shufflenet_v2", "squeezenet", "regnet_y_400mf", "densenet121",
    "lraspp_mobilenet_v3", "deeplabv3_mobilenet_v3", "ssdlite320", "wav2vec2_small",
    "convtasnet_small", "mobilenet_v2_fp16", "resnet18_fp16", "efficientnet_b0_fp16",
    "crnn_bilstm", "dbnet_resnet18", "nhwc_convnet", "vad_lstm_if", "resnet18_qdq",
    "mobilenet_v2_qdq", "resnet18_qdyn", "wav2vec2_small_qdyn",
]


def skip(why):
    print("SKIP:", why, flush=True)
    sys.exit(SKIP)


if __name__ == "__main__" and sys.argv[1:2] == ["--list"]:
    print("\n".join(MODELS))
    sys.exit(0)

try:
    import numpy as np
    import onnx
    import torch
    import torch.nn as nn
    import torchaudio
    import torchvision
    from onnx import TensorProto, helper, numpy_helper

    sys.path.insert(0, HERE)
    import quantize
except ImportError as e:
    skip(f"{e} (apt-get install python3-torchvision python3-torchaudio python3-onnx)")


# ---- the models ----------------------------------------------------------------------

def image(size=224, batch=1):
    return torch.randn(batch, 3, size, size)


def calibrate_bn(module, batch):
    """BatchNorm running stats from a train-mode pass over `batch` (cumulative average),
    then eval mode everywhere."""
    bns = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    module.train()
    with torch.no_grad():
        module(batch)
    module.eval()


def classifier(ctor, size=224, **kw):
    def build():
        m = ctor(weights=None, **kw)
        calibrate_bn(m, image(size, batch=4))
        return m.eval(), (image(size),), ["input"], ["logits"]
    return build


class SegOut(nn.Module):
    """torchvision's segmentation models return a dict; the exporter wants tensors."""
    def __init__(s, m):
        super().__init__()
        s.m = m

    def forward(s, x):
        return s.m(x)["out"]


def segmentation(ctor):
    def build():
        m = ctor(weights=None, weights_backbone=None, num_classes=21)
        if hasattr(m, "aux_classifier"):
            m.aux_classifier = None
        m = SegOut(m)
        calibrate_bn(m, image(224, batch=2))
        return m.eval(), (image(224),), ["input"], ["out"]
    return build


def ssdlite():
    # torchvision's SSDlite with its own pre- (resize to 320, normalise) and post-processing
    # (per-class score threshold, batched NMS, top-k): the exporter writes TopK,
    # NonMaxSuppression, Gather / NonZero chains with run-time shapes. Every score is
    # kept (score_thresh 0) and the top 100 returned, so the output shapes do not hang on
    # a threshold that random weights put anywhere.
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large
    m = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=5,
                                      score_thresh=0.0, detections_per_img=100)
    calibrate_bn(m.backbone, image(320, batch=2))
    m.eval()

    class Det(nn.Module):
        def __init__(s, m):
            super().__init__()
            s.m = m

        def forward(s, x):
            d = s.m([x[0]])[0]
            return d["boxes"], d["scores"], d["labels"]

    return Det(m).eval(), (image(320),), ["image"], ["boxes", "scores", "labels"]


def wav2vec2_small():
    # wav2vec2 at a small config: a 7-layer conv feature extractor (group norm), a grouped
    # positional conv (weight norm), 4 post-norm transformer layers, a CTC head.
    from torchaudio.models import wav2vec2_model
    conv = [(128, 10, 5)] + [(128, 3, 2)] * 4 + [(128, 2, 2)] * 2
    m = wav2vec2_model(
        extractor_mode="group_norm", extractor_conv_layer_config=conv, extractor_conv_bias=False,
        encoder_embed_dim=192, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=64,
        encoder_pos_conv_groups=16, encoder_num_layers=4, encoder_num_heads=4,
        encoder_attention_dropout=0.0, encoder_ff_interm_features=768,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False,
        encoder_layer_drop=0.0, aux_num_out=32).eval()

    class Logits(nn.Module):
        def __init__(s, m):
            super().__init__()
            s.m = m

        def forward(s, wav):
            return s.m(wav)[0]

    return Logits(m).eval(), (torch.randn(1, 16000),), ["waveform"], ["logits"]


def convtasnet_small():
    # Conv-TasNet speech separation at a small config: a strided Conv1d encoder, stacks of
    # dilated depthwise Conv1d blocks with PReLU and global layer norm (GroupNorm(1, C)),
    # a sigmoid mask and a ConvTranspose1d decoder.
    from torchaudio.models import ConvTasNet
    m = ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=128, msk_kernel_size=3,
                   msk_num_feats=64, msk_num_hidden_feats=128, msk_num_layers=4,
                   msk_num_stacks=2).eval()
    return m, (torch.randn(1, 1, 8000),), ["mixture"], ["sources"]


def crnn_bilstm():
    # A CRNN text recognizer (the shape PaddleOCR's and the CRNN paper's have): a VGG-style
    # conv stack that pools the height away, the width as the sequence, two bidirectional
    # LSTM layers, a per-step classifier and log-softmax (CTC's input).
    def block(cin, cout, pool):
        layers = [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
        return layers + ([nn.MaxPool2d(pool)] if pool else [])

    class CRNN(nn.Module):
        def __init__(s, classes=37):
            super().__init__()
            s.cnn = nn.Sequential(*block(3, 32, (2, 2)), *block(32, 64, (2, 2)),
                                  *block(64, 128, None), *block(128, 128, (2, 1)),
                                  *block(128, 192, (2, 1)), *block(192, 192, (2, 1)))
            s.rnn = nn.LSTM(192, 96, num_layers=2, bidirectional=True)
            s.fc = nn.Linear(192, classes)

        def forward(s, x):
            f = s.cnn(x).squeeze(2).permute(2, 0, 1)  # [W, B, C]: height 32 pooled to 1
            y, _ = s.rnn(f)
            return s.fc(y).log_softmax(-1)

    m = CRNN()
    calibrate_bn(m, torch.randn(4, 3, 32, 128))
    return m.eval(), (torch.randn(1, 3, 32, 128),), ["image"], ["log_probs"]


def dbnet_resnet18():
    # A DBNet-style text detector: a ResNet-18 trunk's four stages, an FPN (1x1 laterals,
    # nearest upsampling added top-down, 3x3 smoothing), the levels upsampled to 1/4 and
    # concatenated, and the probability head (3x3 conv, BN, ReLU, two stride-2 transposed
    # convs, sigmoid).
    F = nn.functional
    r = torchvision.models.resnet18(weights=None)

    class DB(nn.Module):
        def __init__(s):
            super().__init__()
            s.stem = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool)
            s.stages = nn.ModuleList([r.layer1, r.layer2, r.layer3, r.layer4])
            s.lat = nn.ModuleList([nn.Conv2d(c, 64, 1) for c in (64, 128, 256, 512)])
            s.smooth = nn.ModuleList([nn.Conv2d(64, 16, 3, padding=1) for _ in range(4)])
            s.head = nn.Sequential(
                nn.Conv2d(64, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                nn.ConvTranspose2d(16, 16, 2, 2), nn.BatchNorm2d(16), nn.ReLU(),
                nn.ConvTranspose2d(16, 1, 2, 2), nn.Sigmoid())

        def forward(s, x):
            x = s.stem(x)
            feats = []
            for stage in s.stages:
                x = stage(x)
                feats.append(x)
            p = [lat(f) for lat, f in zip(s.lat, feats)]
            for i in (2, 1, 0):
                p[i] = p[i] + F.interpolate(p[i + 1], scale_factor=2.0, mode="nearest")
            outs = [sm(q) for sm, q in zip(s.smooth, p)]
            outs = [F.interpolate(o, scale_factor=2.0 ** i, mode="nearest") if i else o
                    for i, o in enumerate(outs)]
            return s.head(torch.cat(outs, 1))

    m = DB()
    calibrate_bn(m, image(256, batch=2))
    return m.eval(), (image(256),), ["image"], ["prob"]


def nhwc_convnet():
    # An NHWC graph as tf2onnx writes a Keras CNN: the input NHWC, a Transpose to NCHW before
    # each conv and back after it, the activations (ReLU6 as Clip) and the residual adds in
    # NHWC, a global mean over H and W, a dense head with softmax.
    class Block(nn.Module):
        def __init__(s, c, expand):
            super().__init__()
            s.pw = nn.Conv2d(c, c * expand, 1)
            s.dw = nn.Conv2d(c * expand, c * expand, 3, padding=1, groups=c * expand)
            s.proj = nn.Conv2d(c * expand, c, 1)

        def forward(s, x):
            def conv(m, t):
                return m(t.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
            y = conv(s.pw, x).clamp(0, 6)
            y = conv(s.dw, y).clamp(0, 6)
            return x + conv(s.proj, y)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.stem = nn.Conv2d(3, 24, 3, stride=2, padding=1)
            s.blocks = nn.Sequential(Block(24, 4), Block(24, 4), Block(24, 6))
            s.dense = nn.Linear(24, 10)

        def forward(s, x):
            x = s.stem(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1).clamp(0, 6)
            x = s.blocks(x)
            return s.dense(x.mean((1, 2))).softmax(-1)

    return Net().eval(), (torch.randn(1, 96, 96, 3),), ["input_nhwc"], ["probs"]


def vad_lstm_if():
    # A streaming voice-activity model exported through TorchScript scripting, as Silero-
    # style VADs are: the LSTM's state comes in as inputs, and an `if` on it (a zero state:
    # the first chunk) picks one of two branches that each run the LSTM, so the LSTM sits
    # inside ONNX If branches. The state given is not zero (the else branch runs).
    class VAD(nn.Module):
        def __init__(s):
            super().__init__()
            s.enc = nn.Sequential(nn.Conv1d(1, 32, 16, stride=8), nn.ReLU(),
                                  nn.Conv1d(32, 64, 3, stride=2), nn.ReLU())
            s.lstm = nn.LSTM(64, 64)
            s.out = nn.Linear(64, 1)

        def forward(s, x, h, c):
            f = s.enc(x).permute(2, 0, 1)
            if bool(h.abs().sum() == 0):
                y, (h2, c2) = s.lstm(f)
            else:
                y, (h2, c2) = s.lstm(f, (h, c))
            return torch.sigmoid(s.out(y[-1])), h2, c2

    m = torch.jit.script(VAD().eval())
    args = (torch.randn(1, 1, 512), torch.randn(1, 1, 64) * 0.5, torch.randn(1, 1, 64) * 0.5)
    return m, args, ["audio", "h", "c"], ["speech", "h_out", "c_out"]


def fp16(build):
    """Float initializers stored as FLOAT16 and Cast back to FLOAT where read (what fp16
    weight converters write with keep_io_types), as export_realworld.py's seg_fp16."""
    def b():
        return build() + (lambda path, job: to_fp16_weights(path),)
    return b


def qdyn(build):
    """The model as onnxruntime.quantization.quantize_dynamic writes it (quantize.py)."""
    def post(path, job):
        quantize.quantize_dynamic(path)
        job["quantized"] = True

    def b():
        return build() + (post,)
    return b


def qdq(build):
    """The model as quantize_static writes it in the QDQ format (quantize.py), its
    activations' ranges from ONNX Runtime's run of the float model on the test inputs."""
    def post(path, job):
        names = quantize.qdq_tensors(path)
        calib = os.path.join(job["dir"], ".calibrate.onnx")
        quantize.with_outputs(path, names, calib)
        got = ort_outputs([dict(job, model=calib)])[0]
        os.remove(calib)
        quantize.quantize_qdq(path, {t: (float(got[t].min()), float(got[t].max()))
                                     for t in names})
        job["quantized"] = True

    def b():
        return build() + (post,)
    return b


def to_fp16_weights(path):
    m = onnx.load(path)
    g = m.graph
    casts, renames = [], {}
    for t in g.initializer:
        if t.data_type != TensorProto.FLOAT:
            continue
        name = t.name
        a = numpy_helper.to_array(t).astype(np.float16)
        t.CopyFrom(numpy_helper.from_array(a, name + "_fp16"))
        casts.append(helper.make_node("Cast", [name + "_fp16"], [name + "_f32"],
                                      to=TensorProto.FLOAT))
        renames[name] = name + "_f32"
    for n in g.node:
        for i, x in enumerate(n.input):
            if x in renames:
                n.input[i] = renames[x]
    for c in reversed(casts):
        g.node.insert(0, c)
    onnx.save(m, path)


tv = torchvision.models
BUILDERS = {
    "mobilenet_v2": classifier(tv.mobilenet_v2),
    "mobilenet_v3_small": classifier(tv.mobilenet_v3_small),
    "mobilenet_v3_large": classifier(tv.mobilenet_v3_large),
    "resnet18": classifier(tv.resnet18),
    "resnet50": classifier(tv.resnet50),
    "efficientnet_b0": classifier(tv.efficientnet_b0),
    "shufflenet_v2": classifier(tv.shufflenet_v2_x1_0),
    "squeezenet": classifier(tv.squeezenet1_1),
    "regnet_y_400mf": classifier(tv.regnet_y_400mf),
    "densenet121": classifier(tv.densenet121),
    "lraspp_mobilenet_v3": segmentation(tv.segmentation.lraspp_mobilenet_v3_large),
    "deeplabv3_mobilenet_v3": segmentation(tv.segmentation.deeplabv3_mobilenet_v3_large),
    "ssdlite320": ssdlite,
    "wav2vec2_small": wav2vec2_small,
    "convtasnet_small": convtasnet_small,
    "mobilenet_v2_fp16": fp16(classifier(tv.mobilenet_v2)),
    "resnet18_fp16": fp16(classifier(tv.resnet18)),
    "efficientnet_b0_fp16": fp16(classifier(tv.efficientnet_b0)),
    "crnn_bilstm": crnn_bilstm,
    "dbnet_resnet18": dbnet_resnet18,
    "nhwc_convnet": nhwc_convnet,
    "vad_lstm_if": vad_lstm_if,
    "resnet18_qdq": qdq(classifier(tv.resnet18)),
    "mobilenet_v2_qdq": qdq(classifier(tv.mobilenet_v2)),
    "resnet18_qdyn": qdyn(classifier(tv.resnet18)),
    "wav2vec2_small_qdyn": qdyn(wav2vec2_small),
}
assert list(BUILDERS) == MODELS


# ---- export, references --------------------------------------------------------------

def stamp():
    h = hashlib.sha256()
    for f in ("make_corpus.py", "ort_ref.js", "quantize.py"):
        h.update(open(os.path.join(HERE, f), "rb").read())
    h.update(f"{torch.__version__} {torchvision.__version__} {torchaudio.__version__}".encode())
    return h.hexdigest()[:16]


def export(name, out, st):
    """Exports `name` into out/name (inputs written as input_N.pb); returns its ORT job."""
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    # Each model from the same seed: a model's weights and inputs do not hang on which
    # others were generated before it.
    torch.manual_seed(0)
    built = BUILDERS[name]()
    model, args, in_names, out_names = built[:4]
    post = built[4] if len(built) > 4 else None
    path = os.path.join(d, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=in_names, output_names=out_names,
                          opset_version=17)
    inputs = []
    for i, (n, t) in enumerate(zip(in_names, args)):
        a = t.numpy()
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
        raw = os.path.join(d, f".in_{i}.bin")
        a.astype(a.dtype.newbyteorder("<")).tofile(raw)
        inputs.append({"name": n, "dtype": str(a.dtype), "shape": list(a.shape), "file": raw})
    job = {"name": name, "model": path, "inputs": inputs, "dir": d, "stamp": st}
    if post:
        post(path, job)
    onnx.checker.check_model(path)
    return job


ORT_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64,
              "int64": np.int64, "int32": np.int32, "int8": np.int8, "uint8": np.uint8,
              "bool": np.bool_}


def ort_outputs(jobs):
    """ONNX Runtime runs every job (one node process): per job, its outputs by name, in
    the model's order."""
    job_file = os.path.join(jobs[0]["dir"], ".ort_jobs.json")
    with open(job_file, "w") as f:
        json.dump({"ort_dir": os.path.abspath(ORT_DIR), "threads": 2, "jobs": jobs}, f)
    subprocess.run(["node", os.path.join(HERE, "ort_ref.js"), job_file], check=True)
    os.remove(job_file)
    results = []
    for job in jobs:
        d = job["dir"]
        with open(os.path.join(d, ".ort_out.json")) as f:
            outs = json.load(f)
        got = {}
        for o in outs:
            a = np.fromfile(os.path.join(d, o["file"]), dtype=ORT_DTYPES[o["dtype"]])
            got[o["name"]] = a.reshape(o["shape"])
            os.remove(os.path.join(d, o["file"]))
        os.remove(os.path.join(d, ".ort_out.json"))
        results.append(got)
    return results


# A quantized model's outputs move by whole quantization steps wherever an activation lands
# on the other side of a rounding boundary, and any float op computed in another order moves
# some (ONNX Runtime's own outputs differ between its optimization levels: fused integer
# QLinearConv against DequantizeLinear -> float Conv -> QuantizeLinear). Such a model's
# tolerance is SPREAD_FACTOR times that spread, as a fraction of each output's range (the
# file range_tol, read by run_model.sh).
SPREAD_FACTOR = 3


def references(jobs):
    """ONNX Runtime's outputs of every job become its output_N.pb; for a quantized model also
    range_tol, from ONNX Runtime's spread against itself with its graph optimizations off."""
    quantized = [dict(j, optimization="disabled") for j in jobs if j.get("quantized")]
    plain = {j["name"]: got for j, got in zip(quantized, ort_outputs(quantized))} \
        if quantized else {}
    for job, got in zip(jobs, ort_outputs(jobs)):
        d = job["dir"]
        for j, (name, a) in enumerate(got.items()):
            with open(os.path.join(d, "test_data_set_0", f"output_{j}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, name).SerializeToString())
        if job["name"] in plain:
            spread = max(float(np.abs(a.astype(np.float64) - plain[job["name"]][n]).max() /
                               max(float(a.max()) - float(a.min()), 1e-30))
                         for n, a in got.items())
            with open(os.path.join(d, "range_tol"), "w") as f:
                f.write(f"{max(1e-5, SPREAD_FACTOR * spread):.3g}\n")
        for i in job["inputs"]:
            os.remove(i["file"])
        with open(os.path.join(d, "stamp"), "w") as f:  # written last: the model is complete
            f.write(job["stamp"] + "\n")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = os.path.abspath(sys.argv[1])
    names = sys.argv[2:] or MODELS
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        sys.exit(f"unknown models: {' '.join(unknown)} (--list names them)")
    if shutil.which("node") is None:
        skip("no node (the references are ONNX Runtime's, through onnxruntime-node)")
    if not os.path.isdir(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")):
        skip(f"no onnxruntime-node in {ORT_DIR} (cd bench/onnx_vs_ort && "
             "ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund)")
    os.makedirs(out, exist_ok=True)
    st = stamp()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    t_all = time.time()
    jobs, failed = [], []
    for name in names:
        sf = os.path.join(out, name, "stamp")
        if os.path.exists(sf) and open(sf).read().strip() == st:
            continue
        t0 = time.time()
        try:
            jobs.append(export(name, out, st))
            print(f"{name}: exported in {time.time() - t0:.1f} s", flush=True)
        except Exception as e:  # the others are still worth having; the exit says it failed
            print(f"{name}: export FAILED: {type(e).__name__}: {e}", flush=True)
            failed.append(name)
    if jobs:
        t0 = time.time()
        references(jobs)
        print(f"ONNX Runtime references for {len(jobs)} models in {time.time() - t0:.1f} s")
    print(f"corpus in {out}: {len(names) - len(jobs) - len(failed)} up to date, "
          f"{len(jobs)} generated, {len(failed)} failed ({time.time() - t_all:.1f} s)")
    if failed:
        sys.exit(f"failed: {' '.join(failed)}")


if __name__ == "__main__":
    main()
