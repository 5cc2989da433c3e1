#!/usr/bin/python3
"""Where rlx and ONNX Runtime spend their time on one ONNX model, op type by op type.

Runs the model in ONNX Runtime 1.30 (npm's onnxruntime-node, ort_profile.js, its own
profiler: enableProfiling) and in rlx (`rlx run` with RLX_PROFILE=1), both on the same
inputs (a test_data_set_N folder's, or random ones), 2 intra-op threads each, and prints
one table: per op group, the kernel time per run in each engine, its share of that
engine's total, and rlx/ORT, largest gap (rlx - ORT) first.

The engines fuse differently (ORT: FusedConv, NCHWc Conv with its activation, FusedMatMul;
rlx: fused_conv, conv_blocked, fused_elementwise regions), so ops are grouped by their
main op: a fused conv counts as conv on either side, and an activation that one engine
fused into a conv and the other ran alone shows up as time in `conv` on one side and in
`elementwise` on the other. Per run is each op's fastest call times its calls (ORT: per
node; rlx: per op and input types, as RLX_PROFILE prints it): robust on a busy machine,
and a lower bound of what a run spends; the last row, each engine's median wall time per
run, includes what the kernels leave out (ORT's node binding, rlx's runtime).

usage: bench/onnx_vs_ort/profile.py MODEL.onnx [--data DIR | --random] [--runs N]
       [--warmup N] [--threads N] [--dim NAME=SIZE …] [--rlx build/tools/rlx] [--keep DIR]

Needs Debian's python3-onnx and numpy (/usr/bin/python3) and node_modules in this folder
(ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# ---- op groups ------------------------------------------------------------------------

# group: (ORT's op types: ONNX's and its fused / contrib ones; rlx's op names). An op of
# neither list is elementwise when ELEMENTWISE names it, else a row of its own.
GROUPS = {
    'conv': ('Conv FusedConv NhwcConv NhwcFusedConv ConvInteger QLinearConv',
             'conv conv_blocked fused_conv'),
    'conv_transpose': ('ConvTranspose', 'conv_transpose'),
    'matmul/gemm': ('MatMul Gemm FusedMatMul FusedGemm MatMulInteger QLinearMatMul '
                    'MatMulIntegerToFloat DynamicQuantizeMatMul MatMulNBits',
                    'matmul fused_matmul quant_matmul dot_general'),
    'lstm/gru/rnn': ('LSTM GRU RNN DynamicQuantizeLSTM', 'onnx.lstm onnx.gru onnx.rnn'),
    'layout (NCHWc reorders, transposes)': ('ReorderInput ReorderOutput Transpose',
                                            'to_blocked from_blocked transpose'),
    'pool': ('MaxPool AveragePool GlobalAveragePool GlobalMaxPool LpPool '
             'QLinearGlobalAveragePool QLinearAveragePool',
             'max_pool avg_pool global_avg_pool global_max_pool lp_pool max_pool_gather '
             'onnx.max_pool_indices'),
    'norm': ('BatchNormalization LayerNormalization InstanceNormalization GroupNorm '
             'SkipLayerNormalization SimplifiedLayerNormalization',
             'batch_norm layer_norm fused_layer_norm group_norm rms_norm instance_norm'),
    'softmax': ('Softmax LogSoftmax', 'softmax log_softmax'),
    'resize': ('Resize Upsample', 'resize onnx.resize'),
    'reduce': ('ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 '
               'ReduceLogSumExp ReduceSumSquare ArgMax ArgMin TopK',
               'sum mean prod reduce_max reduce_min logsumexp l1_norm l2_norm sum_squares '
               'argmax argmin top_k cumsum'),
    'gather/slice/concat/pad': ('Concat Split Slice Gather GatherElements GatherND Pad Tile '
                                'Expand ScatterElements ScatterND',
                                'concat split slice gather gather_elements gather_nd pad tile '
                                'broadcast_to scatter_elements scatter_nd flip'),
    'shape/reshape/cast': ('Reshape Flatten Squeeze Unsqueeze Shape Size Identity Constant '
                           'ConstantOfShape Range Cast MemcpyFromHost MemcpyToHost',
                           'reshape reshape_like expand_dims squeeze shape_of constant cast '
                           'fused_cast broadcast_like iota onnx.range dynamic_reshape'),
    'quantize/dequantize': ('QuantizeLinear DequantizeLinear DynamicQuantizeLinear',
                            'quantize dequantize'),
    'attention': ('Attention MultiHeadAttention GroupQueryAttention', 'attention'),
    'nms': ('NonMaxSuppression', 'onnx.non_max_suppression'),
}
# Elementwise ops: ORT runs each as a node (or fuses an activation into the conv before
# it); rlx fuses runs of them into fused_elementwise / region ops.
ELEMENTWISE = set("""
    Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Relu LeakyRelu Sigmoid HardSigmoid HardSwish Tanh
    Clip Erf Gelu FastGelu BiasGelu QuickGelu Elu Selu PRelu Softplus Mish Reciprocal Floor
    Ceil Round Equal Greater Less GreaterOrEqual LessOrEqual Not And Or Xor Sign Sin Cos Min
    Max Sum Mean Mod Where IsNaN IsInf BitShift QLinearAdd QLinearMul QLinearSigmoid
    fused_elementwise region add sub mul div pow sqrt rsqrt exp expm1 log log1p neg abs sign
    square reciprocal sin cos tan tanh sigmoid hard_sigmoid erf softplus silu gelu elu
    leaky_relu relu floor ceil round clamp max min mod fmod atan2 select eq ne lt le gt ge
    logical_not logical_and logical_or logical_xor isnan isinf bitwise_and bitwise_or
    bitwise_xor onnx.bit_shift""".split())
# Ops that run subgraphs: both engines also count their bodies' ops, each on its own.
CONTROL = {'If', 'Loop', 'Scan', 'cond', 'scan', 'while', 'onnx.loop', 'onnx.scan'}

LOOKUP = ({('ort', op): g for g, (ort, _) in GROUPS.items() for op in ort.split()} |
          {('rlx', op): g for g, (_, rlx) in GROUPS.items() for op in rlx.split()})


def group_of(engine, op):
    if (engine, op) in LOOKUP:
        return LOOKUP[(engine, op)]
    if op in ELEMENTWISE:
        return 'elementwise'
    if op in CONTROL:
        return 'control'
    return op  # not mapped: its own row, under its own name


# ---- inputs -----------------------------------------------------------------------------

NP_OF_ONNX = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT8: np.int8, onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.BOOL: np.bool_, onnx.TensorProto.FLOAT16: np.float16,
}
ORT_DTYPE = {np.float32: 'float32', np.float64: 'float64', np.int64: 'int64',
             np.int32: 'int32', np.int8: 'int8', np.uint8: 'uint8', np.bool_: 'bool',
             np.float16: 'float16'}


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def read_inputs(model, data_dir):
    out = {}
    for k, vi in enumerate(graph_inputs(model)):
        path = os.path.join(data_dir, f'input_{k}.pb')
        t = onnx.TensorProto()
        with open(path, 'rb') as f:
            t.ParseFromString(f.read())
        out[vi.name] = numpy_helper.to_array(t)
    return out


def random_inputs(model, dims, seed=0):
    """Floats uniform in [-1, 1), integers in [0, 4) (as `rlx run --random`); symbolic
    dims from --dim, else 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        dtype = NP_OF_ONNX.get(tt.elem_type)
        if dtype is None:
            sys.exit(f'input {vi.name}: element type {tt.elem_type} is not supported here')
        shape = [d.dim_value if d.HasField('dim_value') else dims.get(d.dim_param, 1)
                 for d in tt.shape.dim]
        if np.issubdtype(dtype, np.floating):
            out[vi.name] = rng.uniform(-1, 1, shape).astype(dtype)
        elif dtype is np.bool_:
            out[vi.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            out[vi.name] = rng.integers(0, 4, shape).astype(dtype)
    return out


# ---- ONNX Runtime -------------------------------------------------------------------------

def run_ort(model_path, inputs, args, work):
    if not os.path.isdir(os.path.join(HERE, 'node_modules', 'onnxruntime-node')):
        sys.exit(f'no onnxruntime-node: run `ONNXRUNTIME_NODE_INSTALL=skip npm install '
                 f'--no-audit --no-fund` in {HERE}')
    job = {'model': os.path.abspath(model_path), 'threads': args.threads,
           'warmup': args.warmup, 'runs': args.runs, 'inputs': []}
    for k, (name, a) in enumerate(inputs.items()):
        file = f'ort_in_{k}.bin'
        np.ascontiguousarray(a).tofile(os.path.join(work, file))
        job['inputs'].append({'name': name, 'dtype': ORT_DTYPE[a.dtype.type], 'file': file,
                              'shape': list(a.shape)})
    with open(os.path.join(work, 'job.json'), 'w') as f:
        json.dump(job, f)
    env = dict(os.environ, NODE_PATH=os.path.join(HERE, 'node_modules'))
    r = subprocess.run(['node', os.path.join(HERE, 'ort_profile.js'),
                        os.path.join(work, 'job.json')], capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f'ONNX Runtime failed:\n{r.stderr}')
    res = json.loads(r.stdout.strip().splitlines()[-1])
    with open(res['trace']) as f:
        trace = json.load(f)
    return ort_op_times(trace, args.warmup), res['times_ms']


ORT_TYPES = {'float': 'f32', 'float16': 'f16', 'double': 'f64', 'int64_t': 'i64',
             'int32_t': 'i32', 'int8_t': 'i8', 'uint8_t': 'u8', 'bool': 'bool'}


def ort_key(e):
    """'Conv f32[1,3,96,96],f32[8,3,3,3]': the op and its input types, as rlx's rows."""
    types = []
    for t in e['args'].get('input_type_shape', []):
        for dtype, shape in t.items():
            types.append(f'{ORT_TYPES.get(dtype, dtype)}[{",".join(map(str, shape))}]')
    return f'{e["args"].get("op_name", "?")} {",".join(types)}'.strip()


def ort_op_times(trace, warmup):
    """ms per run by op and input types: each node's fastest call over the timed runs
    times its calls per run, summed over the nodes of that key."""
    runs = sorted((e for e in trace if e.get('name') == 'model_run'), key=lambda e: e['ts'])
    timed = runs[warmup:]
    per_node = defaultdict(list)  # (node name, key) -> [us per call]
    for e in trace:
        if e.get('cat') != 'Node' or not e.get('name', '').endswith('_kernel_time'):
            continue
        if any(r['ts'] <= e['ts'] <= r['ts'] + r['dur'] for r in timed):
            per_node[(e['name'], ort_key(e))].append(e['dur'])
    n = max(len(timed), 1)
    out = defaultdict(float)
    for (_, key), durs in per_node.items():
        calls = len(durs) / n  # once per run, more inside loops
        out[key] += min(durs) * calls / 1e3
    return dict(out)


# ---- rlx --------------------------------------------------------------------------------

PROFILE_ROW = re.compile(
    r'^\s+([\d.]+) ms steady\s+[\d.]+%\s+([\d.]+) ms all\s+(\d+) calls  (.+)$')
MEDIAN = re.compile(r'then median ([\d.]+) (us|ms|s)')


def rlx_profile(rlx, argv, runs):
    env = dict(os.environ, RLX_PROFILE='1')
    r = subprocess.run([rlx] + argv + ['--runs', str(runs)], capture_output=True, text=True,
                       env=env)
    if r.returncode not in (0,):
        sys.exit(f'rlx failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}')
    rows = []  # (op and input types, steady ms, all ms, calls)
    for line in r.stderr.splitlines():
        if m := PROFILE_ROW.match(line):
            rows.append((m.group(4), float(m.group(1)), float(m.group(2)), int(m.group(3))))
    median = None
    if m := MEDIAN.search(r.stdout):
        median = float(m.group(1)) * {'us': 1e-3, 'ms': 1, 's': 1e3}[m.group(2)]
    return rows, median, r.stdout


def run_rlx(model_path, inputs, args, work):
    argv = ['run', model_path, '--threads', str(args.threads), '--show', '0']
    for k, (name, a) in enumerate(inputs.items()):
        file = os.path.join(work, f'rlx_in_{k}.npy')
        np.save(file, a)
        argv += ['--input', f'{name}={file}']
    # rlx runs once untimed, then --runs times; the profile covers them all. Its rows give
    # each op's fastest call times its calls (a mean would include the first run's
    # one-time costs, which vary from process to process by more than the op's time).
    # Calls short of a whole number per run are the import's and the compile's (constant
    # folds: a classifier weight transposed once), not a run's.
    rows, median, out = rlx_profile(args.rlx, argv, args.runs)
    times = defaultdict(float)
    for key, steady, _, calls in rows:
        per_run = calls // (args.runs + 1)
        if per_run:
            times[key] += steady / calls * per_run
    return dict(times), median, out


# ---- the table --------------------------------------------------------------------------

def grouped(engine, times):
    """{group: ms}, {group: its ops}: keys are 'op input-types'."""
    g = defaultdict(float)
    members = defaultdict(set)
    for key, ms in times.items():
        op = key.split(' ', 1)[0]
        g[group_of(engine, op)] += ms
        members[group_of(engine, op)].add(op)
    return g, members


def print_top(engine, times, total, n):
    rows = sorted(times.items(), key=lambda kv: kv[1], reverse=True)[:n]
    print(f'  {engine}\'s {len(rows)} slowest ops (by op and input types):')
    for key, ms in rows:
        print(f'    {ms:9.3f} ms {pct(ms, total):>6}  {key}')


def row(label, o, r, share_o='', share_r='', names=''):
    ratio = f'{r / o:8.2f}' if o > 0 else f'{"-":>8}'
    return (f'  {label[:36]:<36} {o:10.3f} {share_o:>6} {r:10.3f} {share_r:>6} {ratio} '
            f'{r - o:10.3f}  {names}').rstrip()


def print_table(model_path, ort_times, rlx_times, ort_wall, rlx_wall, args):
    og, om = grouped('ort', ort_times)
    rg, rm = grouped('rlx', rlx_times)
    # Their bodies' ops are rows of their own: left out of the table and the totals.
    octl, rctl = og.pop('control', 0.0), rg.pop('control', 0.0)
    ot, rt = sum(og.values()), sum(rg.values())
    groups = sorted(set(og) | set(rg), key=lambda k: rg.get(k, 0) - og.get(k, 0), reverse=True)
    print(f'{model_path}: kernel ms per run (each op\'s fastest of {args.runs} runs), '
          f'{args.threads} threads each')
    print('  ORT: its profiler\'s per-node kernel times (after its fusions: FusedConv, NCHWc, '
          '...); rlx: RLX_PROFILE per op (after its fusions: fused_conv, conv_blocked, '
          'fused_elementwise, ...).')
    print('  Ops grouped by their main op (a fused conv+activation counts as conv); '
          'gap = rlx - ORT; sorted by gap.')
    hdr = (f'  {"group":<36} {"ORT ms":>10} {"ORT %":>6} {"rlx ms":>10} {"rlx %":>6} '
           f'{"rlx/ORT":>8} {"gap ms":>10}  ops (ORT | rlx)')
    rule = '  ' + '-' * (len(hdr) - 2)
    print(hdr)
    print(rule)
    for k in groups:
        o, r = og.get(k, 0.0), rg.get(k, 0.0)
        names = (f'{",".join(sorted(om.get(k, ()))) or "-"} | '
                 f'{",".join(sorted(rm.get(k, ()))) or "-"}')
        print(row(k, o, r, pct(o, ot), pct(r, rt), names))
    print(rule)
    print(row('total (kernels)', ot, rt, '100%', '100%'))
    if octl or rctl:
        print(row('control ops with bodies (not in total)', octl, rctl))
    if ort_wall and rlx_wall:
        print(row('wall per run (median)', sorted(ort_wall)[len(ort_wall) // 2], rlx_wall))
    if args.top:
        print_top('ORT', ort_times, ot, args.top)
        print_top('rlx', rlx_times, rt, args.top)


def pct(part, total):
    return f'{100 * part / total:5.1f}%' if total > 0 else '-'


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('model')
    src = p.add_mutually_exclusive_group()
    src.add_argument('--data', help='a test_data_set_N folder (input_N.pb); default: the '
                     "model's test_data_set_0 when there is one, else --random")
    src.add_argument('--random', action='store_true', help='random inputs')
    p.add_argument('--runs', type=int, default=20, help='timed runs (default 20)')
    p.add_argument('--warmup', type=int, default=3, help="ORT's untimed runs (rlx: 1)")
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--dim', action='append', default=[], metavar='NAME=SIZE',
                   help='size of a symbolic dim for --random (default 1)')
    p.add_argument('--top', type=int, default=8,
                   help="then each engine's N slowest ops by input types (default 8)")
    p.add_argument('--rlx', default=os.path.join(ROOT, 'build', 'tools', 'rlx'))
    p.add_argument('--keep', help='write the inputs, the ORT trace and the rlx output here')
    args = p.parse_args()
    if args.runs < 1 or args.warmup < 0 or args.threads < 1:
        sys.exit('expected --runs >= 1, --warmup >= 0, --threads >= 1')

    model = onnx.load(args.model, load_external_data=False)
    data = args.data
    default_set = os.path.join(os.path.dirname(args.model), 'test_data_set_0')
    if not data and not args.random and os.path.isdir(default_set):
        data = default_set
    if data:
        inputs = read_inputs(model, data)
    else:
        dims = dict(d.split('=', 1) for d in args.dim)
        inputs = random_inputs(model, {k: int(v) for k, v in dims.items()})

    work = args.keep or tempfile.mkdtemp(prefix='rlx_profile_')
    os.makedirs(work, exist_ok=True)
    ort_times, ort_wall = run_ort(args.model, inputs, args, work)
    rlx_times, rlx_wall, _ = run_rlx(args.model, inputs, args, work)
    print(f'inputs: {data or "random"}')
    print_table(args.model, ort_times, rlx_times, ort_wall, rlx_wall, args)
    if not args.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
