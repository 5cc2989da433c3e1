"""Extra ONNX conformance cases for RNN / GRU / LSTM (what the ONNX 1.12 test data lacks:
reverse and bidirectional layers, per-row sequence_lens, initial states, peepholes, clip,
input_forget, linear_before_reset 0 and 1, layout 1, non-default activations with alpha /
beta, batches that take the register-blocked recurrent product), written in ONNX's test
layout with a NumPy reference that runs each batch row on its own. The layout-0 cases were
checked against onnxruntime 1.x (which refuses layout 1). Usage (Debian's python3-onnx):

    /usr/bin/python3 tests/onnx/rnn_cases.py /tmp/rnn_cases
    build/tools/rlx onnx-test /tmp/rnn_cases/*
"""
import numpy as np, onnx, os, shutil, sys
from onnx import helper, numpy_helper, TensorProto
ROOT = sys.argv[1] if len(sys.argv) > 1 else '/tmp/rnn_cases'
shutil.rmtree(ROOT, ignore_errors=True)
rng = np.random.default_rng(0)
def act(name, x, a, b):
    n = name.lower()
    if n == 'sigmoid': return 1/(1+np.exp(-x))
    if n == 'tanh': return np.tanh(x)
    if n == 'relu': return np.maximum(x, 0)
    if n == 'leakyrelu': return np.where(x >= 0, x, a*x)
    if n == 'hardsigmoid': return np.clip(a*x+b, 0, 1)
    if n == 'softsign': return x/(1+np.abs(x))
    if n == 'scaledtanh': return a*np.tanh(b*x)
    if n == 'affine': return a*x+b
    if n == 'elu': return np.where(x>=0, x, a*(np.exp(x)-1))
    if n == 'softplus': return np.log1p(np.exp(x))
    raise Exception(n)
ALPHA = {'leakyrelu':0.01,'hardsigmoid':0.2,'scaledtanh':1.0,'affine':1.0,'elu':1.0,'thresholdedrelu':1.0}
BETA = {'hardsigmoid':0.5,'scaledtanh':1.0,'affine':0.0}
def expand(acts, alpha, beta):
    out=[]; ia=ib=0
    for n in acts:
        l=n.lower(); a=ALPHA.get(l,0); b=BETA.get(l,0)
        if l in ALPHA and ia < len(alpha): a=alpha[ia]; ia+=1
        if l in BETA and ib < len(beta): b=beta[ib]; ib+=1
        out.append((n,a,b))
    return out
def ref(kind, X, W, R, B, lens, h0, c0, P, H, direction, acts, clip, lbr, ifg):
    S, Bt, I = X.shape; D = 2 if direction=='bidirectional' else 1
    G = {'RNN':1,'GRU':3,'LSTM':4}[kind]; GH=G*H; per={'RNN':1,'GRU':2,'LSTM':3}[kind]
    Y = np.zeros((S,D,Bt,H)); Yh=np.zeros((D,Bt,H)); Yc=np.zeros((D,Bt,H))
    cl = (lambda v: np.clip(v,-clip,clip)) if clip else (lambda v: v)
    for d in range(D):
        rev = direction=='reverse' or d==1
        A = acts[d*per:(d+1)*per]
        F = [lambda v,a=a: act(a[0], v, a[1], a[2]) for a in A]
        Wd, Rd = W[d], R[d]; Wb, Rb = B[d][:GH], B[d][GH:]
        for b in range(Bt):
            h = h0[d,b].copy(); c = c0[d,b].copy(); L = lens[b]
            for t in (range(L-1,-1,-1) if rev else range(L)):
                x = X[t,b]
                if kind=='RNN':
                    h = F[0](cl(x@Wd.T + h@Rd.T + Wb + Rb))
                elif kind=='GRU':
                    xw = x@Wd.T + Wb
                    z = F[0](cl(xw[:H] + h@Rd[:H].T + Rb[:H]))
                    r = F[0](cl(xw[H:2*H] + h@Rd[H:2*H].T + Rb[H:2*H]))
                    if lbr: hh = F[1](cl(xw[2*H:] + r*(h@Rd[2*H:].T + Rb[2*H:])))
                    else: hh = F[1](cl(xw[2*H:] + (r*h)@Rd[2*H:].T + Rb[2*H:]))
                    h = (1-z)*hh + z*h
                else:
                    g = x@Wd.T + h@Rd.T + Wb + Rb
                    Pi, Po, Pf = P[d][:H], P[d][H:2*H], P[d][2*H:]
                    i = F[0](cl(g[:H] + Pi*c))
                    f = 1-i if ifg else F[0](cl(g[2*H:3*H] + Pf*c))
                    cc = F[1](cl(g[3*H:]))
                    c = f*c + i*cc
                    o = F[0](cl(g[H:2*H] + Po*c))
                    h = o*F[2](c)
                Y[t,d,b] = h
            Yh[d,b] = h; Yc[d,b] = c
    return Y, Yh, Yc
def case(name, kind, S, Bt, I, H, direction='forward', layout=0, use_lens=False, use_init=False, use_P=False,
         acts=None, alpha=None, beta=None, clip=None, lbr=0, ifg=0):
    D = 2 if direction=='bidirectional' else 1; G = {'RNN':1,'GRU':3,'LSTM':4}[kind]
    X = rng.standard_normal((S,Bt,I)).astype(np.float32)
    W = (rng.standard_normal((D,G*H,I))*0.5).astype(np.float32)
    R = (rng.standard_normal((D,G*H,H))*0.5).astype(np.float32)
    B = (rng.standard_normal((D,2*G*H))*0.5).astype(np.float32)
    lens = rng.integers(1, S+1, Bt).astype(np.int32) if use_lens else np.full(Bt, S, np.int32)
    h0 = rng.standard_normal((D,Bt,H)).astype(np.float32) if use_init else np.zeros((D,Bt,H),np.float32)
    c0 = rng.standard_normal((D,Bt,H)).astype(np.float32) if use_init else np.zeros((D,Bt,H),np.float32)
    P = (rng.standard_normal((D,3*H))*0.5).astype(np.float32) if use_P else np.zeros((D,3*H),np.float32)
    per={'RNN':1,'GRU':2,'LSTM':3}[kind]
    default={'RNN':['Tanh'],'GRU':['Sigmoid','Tanh'],'LSTM':['Sigmoid','Tanh','Tanh']}[kind]
    al = acts if acts else default*D
    if len(al)==per: al = al*D
    ex = expand(al, alpha or [], beta or [])
    Y, Yh, Yc = ref(kind, X.astype(np.float64), W, R, B, lens, h0, c0, P, H, direction, ex, clip, lbr, ifg)
    ins = {'X': X, 'W': W, 'R': R, 'B': B}
    names = ['X','W','R','B']
    names.append('sequence_lens' if use_lens else ''); 
    if use_lens: ins['sequence_lens']=lens
    if use_init or use_P: 
        names.append('initial_h'); ins['initial_h']=h0
        if kind=='LSTM': names.append('initial_c'); ins['initial_c']=c0
    if use_P: names.append('P'); ins['P']=P
    if layout:
        ins['X'] = X.transpose(1,0,2).copy()
        for k in ('initial_h','initial_c'):
            if k in ins: ins[k]=ins[k].transpose(1,0,2).copy()
        Y = Y.transpose(2,0,1,3); Yh = Yh.transpose(1,0,2); Yc = Yc.transpose(1,0,2)
    outs = {'Y':Y, 'Y_h':Yh}
    if kind=='LSTM': outs['Y_c']=Yc
    attrs = dict(hidden_size=H, direction=direction)
    if layout: attrs['layout']=1
    if acts: attrs['activations']=acts
    if alpha: attrs['activation_alpha']=alpha
    if beta: attrs['activation_beta']=beta
    if clip: attrs['clip']=clip
    if kind=='GRU': attrs['linear_before_reset']=lbr
    if kind=='LSTM' and ifg: attrs['input_forget']=ifg
    node = helper.make_node(kind, names, list(outs), **attrs)
    gin = [helper.make_tensor_value_info(n, TensorProto.INT32 if n=='sequence_lens' else TensorProto.FLOAT, ins[n].shape) for n in names if n]
    gout = [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n,v in outs.items()]
    m = helper.make_model(helper.make_graph([node], name, gin, gout), opset_imports=[helper.make_opsetid('',14)])
    d = f'{ROOT}/{name}'; shutil.rmtree(d, ignore_errors=True); os.makedirs(d+'/test_data_set_0')
    onnx.save(m, d+'/model.onnx')
    for i,n in enumerate([n for n in names if n]):
        open(f'{d}/test_data_set_0/input_{i}.pb','wb').write(numpy_helper.from_array(ins[n], n).SerializeToString())
    for i,(n,v) in enumerate(outs.items()):
        open(f'{d}/test_data_set_0/output_{i}.pb','wb').write(numpy_helper.from_array(v.astype(np.float32), n).SerializeToString())
case('lstm_bidi_lens_init_peep', 'LSTM', 5, 3, 4, 6, 'bidirectional', use_lens=True, use_init=True, use_P=True)
case('lstm_reverse_layout1_ifg_clip', 'LSTM', 4, 2, 3, 5, 'reverse', layout=1, use_init=True, clip=0.5, ifg=1)
case('lstm_acts', 'LSTM', 3, 2, 3, 4, 'forward', acts=['HardSigmoid','Tanh','Softsign'], alpha=[0.3], beta=[0.4])
case('gru_bidi_lens_lbr0', 'GRU', 6, 3, 4, 5, 'bidirectional', use_lens=True, use_init=True)
case('gru_reverse_layout1_lbr1', 'GRU', 4, 2, 3, 5, 'reverse', layout=1, use_init=True, lbr=1)
case('gru_bidi_lbr1_clip', 'GRU', 4, 1, 3, 16, 'bidirectional', lbr=1, clip=1.0)
case('rnn_bidi_acts_lens', 'RNN', 5, 3, 2, 4, 'bidirectional', use_lens=True, use_init=True, acts=['LeakyRelu','Tanh'], alpha=[0.1])
case('rnn_reverse_layout1', 'RNN', 4, 2, 3, 4, 'reverse', layout=1)
case('lstm_reverse_ifg_clip_l0', 'LSTM', 4, 2, 3, 5, 'reverse', use_init=True, use_P=True, clip=0.5, ifg=1)
case('gru_b6_lbr0', 'GRU', 5, 6, 3, 37, 'bidirectional', use_lens=True, use_init=True)
case('lstm_b9', 'LSTM', 4, 9, 5, 33, 'forward', use_init=True, use_P=True)
case('lstm_b1_big', 'LSTM', 20, 1, 16, 32, 'forward', use_init=True)
