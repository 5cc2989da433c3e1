"""Extra ONNX conformance cases for the shape family (opsets and paths the ONNX 1.12 test
data lacks: Split-18 uneven, Pad-18 axes / Pad-19 wrap, scatter reductions, symbolic
dims, run-time shape inputs, Unique with an axis, …), written in ONNX's test layout with
NumPy references. Usage (Debian's python3-onnx):

    /usr/bin/python3 tests/onnx/shape_cases.py /tmp/shape_cases
    build/tools/rlx onnx-test /tmp/shape_cases/*
"""
import os, shutil, sys
import numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP

ROOT = sys.argv[1] if len(sys.argv) > 1 else '/tmp/shape_cases'
shutil.rmtree(ROOT, ignore_errors=True)

def elem(a):
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]

def case(name, op, inputs, outputs, opset, attrs=None, init=None, in_dims=None):
    """inputs: list of (name, array); init: dict name->array for initializers (constants)."""
    init = init or {}
    node = h.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], **(attrs or {}))
    gin = []
    for i, (n, a) in enumerate(inputs):
        if n == '' or n in init: continue
        dims = (in_dims or {}).get(n, list(a.shape))
        gin.append(h.make_tensor_value_info(n, elem(a), dims))
    gout = [h.make_tensor_value_info(n, elem(a), None) for n, a in outputs]
    inits = [nh.from_array(a, n) for n, a in init.items()]
    g = h.make_graph([node], name, gin, gout, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    d = os.path.join(ROOT, 'test_' + name)
    os.makedirs(d + '/test_data_set_0')
    onnx.save(m, d + '/model.onnx')
    k = 0
    for n, a in inputs:
        if n == '' or n in init: continue
        t = nh.from_array(a, n); open(f'{d}/test_data_set_0/input_{k}.pb', 'wb').write(t.SerializeToString()); k += 1
    for j, (n, a) in enumerate(outputs):
        t = nh.from_array(a, n); open(f'{d}/test_data_set_0/output_{j}.pb', 'wb').write(t.SerializeToString())

r = np.random.RandomState(0)
x = r.randn(2, 3, 4).astype(np.float32)
i64 = lambda *v: np.array(v, dtype=np.int64)

# Split 18 uneven, attr form (opset 11), input form const
x7 = np.arange(7, dtype=np.float32)
case('split18_uneven', 'Split', [('x', x7)], [('a', x7[:3]), ('b', x7[3:6]), ('c', x7[6:])], 18, {'num_outputs': 3})
case('split11_attr', 'Split', [('x', x)], [('a', x[:, :1]), ('b', x[:, 1:])], 11, {'axis': 1, 'split': [1, 2]})
case('split13_const', 'Split', [('x', x), ('s', i64(3, 1))], [('a', x[:, :, :3]), ('b', x[:, :, 3:])], 13, {'axis': -1}, init={'s': i64(3, 1)})
# Slice opset 1 attrs, opset 13 negative steps/overflow
case('slice1_attrs', 'Slice', [('x', x)], [('y', x[:, 1:100, -3:-1])], 1, {'starts': [1, -3], 'ends': [100, -1], 'axes': [1, 2]})
case('slice13_negstep', 'Slice', [('x', x), ('s', i64(-1, 100)), ('e', i64(-9223372036854775807, 0)), ('a', i64(2, 1)), ('st', i64(-2, -1))],
     [('y', x[:, 100:0:-1, -1::-2])], 13, init={'s': i64(-1, 100), 'e': i64(-9223372036854775807, 0), 'a': i64(2, 1), 'st': i64(-2, -1)})
case('slice13_runtime', 'Slice', [('x', x), ('s', i64(0, 1)), ('e', i64(2, 3))], [('y', x[0:2, 1:3])], 13)
# Squeeze/Unsqueeze attr forms
xs = r.randn(1, 3, 1, 2).astype(np.float32)
case('squeeze1_noaxes', 'Squeeze', [('x', xs)], [('y', xs.reshape(3, 2))], 1)
case('squeeze13_input', 'Squeeze', [('x', xs), ('a', i64(-2))], [('y', xs.reshape(1, 3, 2))], 13)
case('unsqueeze1_attr', 'Unsqueeze', [('x', x)], [('y', x.reshape(2, 1, 3, 4, 1))], 1, {'axes': [1, -1]})
# Flatten with symbolic dims
case('flatten_sym', 'Flatten', [('x', x)], [('y', x.reshape(6, 4))], 13, {'axis': 2}, in_dims={'x': ['a', 'b', 4]})
case('flatten_sym2', 'Flatten', [('x', x)], [('y', x.reshape(2, 12))], 13, {'axis': 1}, in_dims={'x': ['a', 'b', 'c']})
# Reshape with symbolic
case('reshape_sym', 'Reshape', [('x', x), ('s', i64(0, -1))], [('y', x.reshape(2, 12))], 13, init={'s': i64(0, -1)}, in_dims={'x': ['n', 3, 4]})
# Expand symbolic
xe = r.randn(2, 1).astype(np.float32)
case('expand_sym', 'Expand', [('x', xe), ('s', i64(3, 1, 5))], [('y', np.broadcast_to(xe, (3, 2, 5)).copy())], 13, init={'s': i64(3, 1, 5)}, in_dims={'x': ['n', 1]})
# Pad modes
xp = r.randn(2, 3).astype(np.float32)
case('pad_wrap', 'Pad', [('x', xp), ('p', i64(1, 3, 0, 2))], [('y', np.pad(xp, ((1, 0), (3, 2)), mode='wrap'))], 19, {'mode': 'wrap'}, init={'p': i64(1, 3, 0, 2)})
case('pad_wrap_neg', 'Pad', [('x', xp), ('p', i64(0, -1, 1, 1))], [('y', np.pad(xp[:, 1:], ((0, 1), (0, 1)), mode='wrap'))], 19, {'mode': 'wrap'}, init={'p': i64(0, -1, 1, 1)})
case('pad18_axes', 'Pad', [('x', xp), ('p', i64(2, 1)), ('v', np.array(7.0, np.float32)), ('a', i64(-1))], [('y', np.pad(xp, ((0, 0), (2, 1)), constant_values=7))], 18, init={'p': i64(2, 1), 'v': np.array(7.0, np.float32), 'a': i64(-1)})
case('pad2_attr', 'Pad', [('x', xp)], [('y', np.pad(xp, ((1, 0), (0, 2)), mode='edge'))], 2, {'mode': 'edge', 'pads': [1, 0, 0, 2]})
case('pad11_reflect_int', 'Pad', [('x', np.arange(12, dtype=np.int32).reshape(3, 4)), ('p', i64(1, 2, 1, 1))], [('y', np.pad(np.arange(12, dtype=np.int32).reshape(3, 4), ((1, 1), (2, 1)), mode='reflect'))], 11, {'mode': 'reflect'}, init={'p': i64(1, 2, 1, 1)})
# Scatter reductions
data = r.randn(3, 4).astype(np.float32)
idx = np.array([[0, 1, 0, 2], [2, 1, 0, 0]], np.int64)
upd = r.randn(2, 4).astype(np.float32)
for red in ['add', 'mul', 'max', 'min']:
    out = data.copy()
    for i in range(2):
        for j in range(4):
            a = out[idx[i, j], j]; u = upd[i, j]
            out[idx[i, j], j] = {'add': a + u, 'mul': a * u, 'max': max(a, u), 'min': min(a, u)}[red]
    case('scatter_elements_' + red, 'ScatterElements', [('d', data), ('i', idx), ('u', upd)], [('y', out)], 18, {'axis': 0, 'reduction': red})
out = data.copy(); out[[0, 2]] += 0
ind = np.array([[0], [2], [0]], np.int64); un = r.randn(3, 4).astype(np.float32)
o = data.copy()
for k in range(3): o[ind[k, 0]] = np.maximum(o[ind[k, 0]], un[k])
case('scatternd_max', 'ScatterND', [('d', data), ('i', ind), ('u', un)], [('y', o)], 18, {'reduction': 'max'})
# GatherND batch_dims 1
gd = r.randn(2, 3, 4).astype(np.float32); gi = np.array([[[1, 2], [0, 0]], [[2, 3], [1, 1]]], np.int64)
go = np.stack([np.stack([gd[b][tuple(gi[b, k])] for k in range(2)]) for b in range(2)])
case('gathernd_batch1', 'GatherND', [('d', gd), ('i', gi)], [('y', go)], 13, {'batch_dims': 1})
# Gather int32 negative indices axis 1
gi2 = np.array([[-1, 0], [1, -2]], np.int32)
case('gather_i32_axis1', 'Gather', [('d', gd), ('i', gi2)], [('y', np.take(gd, gi2, axis=1))], 13, {'axis': 1})
# TopK opset 1 (attr), opset 11 smallest unsorted? and ties
tk = np.array([[3, 1, 3, 2], [0, 0, 5, 5]], np.float32)
case('topk1_attr', 'TopK', [('x', tk)], [('v', np.array([[3, 3], [5, 5]], np.float32)), ('i', np.array([[0, 2], [2, 3]], np.int64))], 1, {'k': 2})
case('topk11_smallest_axis0', 'TopK', [('x', tk), ('k', i64(1))], [('v', np.array([[0, 0, 3, 2]], np.float32)), ('i', np.array([[1, 1, 0, 0]], np.int64))], 11, {'largest': 0, 'axis': 0}, init={'k': i64(1)})
# Unique cases
ux = np.array([2, 1, 1, 3, 4, 3], np.int64)
case('unique_unsorted_i64', 'Unique', [('x', ux)], [('y', np.array([2, 1, 3, 4])), ('ind', i64(0, 1, 3, 4)), ('inv', i64(0, 1, 1, 2, 3, 2)), ('c', i64(1, 2, 2, 1))], 11, {'sorted': 0})
u3 = np.array([[[1, 1], [0, 1]], [[1, 1], [0, 1]], [[0, 0], [0, 1]]], np.float32)
yy, ii, vv, cc = np.unique(u3, axis=2, return_index=True, return_inverse=True, return_counts=True)
case('unique_axis2', 'Unique', [('x', u3)], [('y', yy), ('ind', ii.astype(np.int64)), ('inv', vv.reshape(-1).astype(np.int64)), ('c', cc.astype(np.int64))], 11, {'axis': 2})
# Compress without axis, runtime cond
cx = np.arange(6, dtype=np.float32).reshape(2, 3); cnd = np.array([1, 0, 1, 1], bool)
case('compress_flat', 'Compress', [('x', cx), ('c', cnd)], [('y', np.array([0, 2, 3], np.float32))], 11)
# DepthToSpace with symbolic batch
dx = r.randn(2, 8, 2, 3).astype(np.float32)
b = 2; n, c, hh, ww = dx.shape
dcr = dx.reshape(n, b, b, c // 4, hh, ww).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // 4, hh * b, ww * b)
case('depthtospace_sym', 'DepthToSpace', [('x', dx)], [('y', dcr)], 13, {'blocksize': 2}, in_dims={'x': ['n', 8, 2, 3]})
# Trilu with runtime k and static shape, bool input, EyeLike k
tx = r.randn(2, 3, 4).astype(np.float32)
case('triu_k_runtime', 'Trilu', [('x', tx), ('k', np.array(-1, np.int64))], [('y', np.triu(tx, -1))], 14)
tb = r.rand(3, 3) > 0.3
case('tril_bool', 'Trilu', [('x', tb)], [('y', np.tril(tb))], 14, {'upper': 0})
case('eyelike_k', 'EyeLike', [('x', np.zeros((3, 5), np.int32))], [('y', np.eye(3, 5, k=2, dtype=np.int32))], 9, {'k': 2})
# ReverseSequence batch axis 0, 3-d
rx = r.randn(3, 4, 2).astype(np.float32); lens = i64(4, 1, 3)
ro = rx.copy()
for bi in range(3): ro[bi, :lens[bi]] = rx[bi, :lens[bi]][::-1]
case('reversesequence_3d', 'ReverseSequence', [('x', rx), ('l', lens)], [('y', ro)], 10, {'batch_axis': 0, 'time_axis': 1})
# OneHot int indices and int values
case('onehot_int', 'OneHot', [('i', np.array([0, 2, -1, 5], np.int32)), ('d', np.array(3, np.int64)), ('v', np.array([0, 7], np.int64))],
     [('y', np.array([[7, 0, 0], [0, 0, 7], [0, 0, 7], [0, 0, 0]], np.int64))], 11)
# Shape/Size symbolic, ConstantOfShape runtime, Range runtime float
case('shape_sym', 'Shape', [('x', x)], [('y', i64(3, 4))], 15, {'start': -2}, in_dims={'x': ['n', 3, 4]})
case('size_sym', 'Size', [('x', x)], [('y', np.array(24, np.int64))], 13, in_dims={'x': ['n', 'm', 4]})
case('constantofshape_i32', 'ConstantOfShape', [('s', i64(2, 3))], [('y', np.full((2, 3), 5, np.int32))], 9, {'value': nh.from_array(np.array([5], np.int32))})
case('range_runtime_i64', 'Range', [('a', np.array(10, np.int64)), ('b', np.array(1, np.int64)), ('c', np.array(-3, np.int64))], [('y', np.arange(10, 1, -3).astype(np.int64))], 11)
case('tile_runtime', 'Tile', [('x', xp), ('r', i64(2, 1))], [('y', np.tile(xp, (2, 1)))], 13)
case('concat_i64', 'Concat', [('a', i64(1, 2)), ('b', i64(3))], [('y', i64(1, 2, 3))], 13, {'axis': 0})
case('transpose_perm', 'Transpose', [('x', x)], [('y', x.transpose(1, 2, 0))], 13, {'perm': [1, 2, 0]})
so = data.copy()
for i in range(2):
    for j in range(4): so[idx[i, j], j] = upd[i, j]
case('scatter9', 'Scatter', [('d', data), ('i', idx), ('u', upd)], [('y', so)], 9, {'axis': 0})
# symbolic variants
case('triu_sym', 'Trilu', [('x', tx), ('k', np.array(1, np.int64))], [('y', np.triu(tx, 1))], 14, init={'k': np.array(1, np.int64)}, in_dims={'x': ['a', 'b', 'c']})
case('tril_sym_nok', 'Trilu', [('x', tx)], [('y', np.tril(tx))], 14, {'upper': 0}, in_dims={'x': [2, 'b', 4]})
case('eyelike_sym', 'EyeLike', [('x', np.zeros((3, 5), np.float32))], [('y', np.eye(3, 5, k=-1, dtype=np.float32))], 9, {'k': -1}, in_dims={'x': ['n', 'm']})
rx2 = r.randn(4, 3, 2).astype(np.float32); lens2 = i64(4, 1, 3)
ro2 = rx2.copy()
for bi in range(3): ro2[:lens2[bi], bi] = rx2[:lens2[bi], bi][::-1]
case('reversesequence_sym', 'ReverseSequence', [('x', rx2), ('l', lens2)], [('y', ro2)], 10, {}, in_dims={'x': ['t', 'b', 2], 'l': ['b']})
case('reversesequence_static', 'ReverseSequence', [('x', rx2), ('l', lens2)], [('y', ro2)], 10, {})
crd = dx.reshape(n, c // 4, b, b, hh, ww).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // 4, hh * b, ww * b)
case('depthtospace_crd_symhw', 'DepthToSpace', [('x', dx)], [('y', crd)], 13, {'blocksize': 2, 'mode': 'CRD'}, in_dims={'x': ['n', 'c', 'h', 'w']})
case('depthtospace_dcr_symhw', 'DepthToSpace', [('x', dx)], [('y', dcr)], 13, {'blocksize': 2}, in_dims={'x': [2, 8, 'h', 'w']})
sx = r.randn(2, 3, 4, 6).astype(np.float32)
s2d = sx.reshape(2, 3, 2, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(2, 12, 2, 3)
case('spacetodepth_sym', 'SpaceToDepth', [('x', sx)], [('y', s2d)], 13, {'blocksize': 2}, in_dims={'x': ['n', 3, 'h', 'w']})
case('spacetodepth_static', 'SpaceToDepth', [('x', sx)], [('y', s2d)], 13, {'blocksize': 2})
case('range_f64', 'Range', [('a', np.array(1.5)), ('b', np.array(-2.0)), ('c', np.array(-0.5))], [('y', np.arange(1.5, -2.0, -0.5))], 11)
case('range_const_i32', 'Range', [('a', np.array(1, np.int32)), ('b', np.array(10, np.int32)), ('c', np.array(4, np.int32))], [('y', np.arange(1, 10, 4).astype(np.int32))], 11, init={'a': np.array(1, np.int32), 'b': np.array(10, np.int32), 'c': np.array(4, np.int32)})
case('range_empty', 'Range', [('a', np.array(5, np.int64)), ('b', np.array(1, np.int64)), ('c', np.array(1, np.int64))], [('y', np.zeros(0, np.int64))], 11)
case('reshape_runtime_sym', 'Reshape', [('x', x), ('s', i64(0, -1))], [('y', x.reshape(2, 12))], 13, in_dims={'x': ['n', 3, 4]})
case('unique_y_only', 'Unique', [('x', ux)], [('y', np.array([1, 2, 3, 4]))], 11)
case('topk_values_only', 'TopK', [('x', tk), ('k', i64(2))], [('v', np.array([[3, 3], [5, 5]], np.float32))], 11, init={'k': i64(2)})
print('wrote', len(os.listdir(ROOT)), 'cases to', ROOT)
