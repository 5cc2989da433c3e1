#!/usr/bin/env python3
"""An independent float64 NumPy forward of a llama / qwen2 GGUF file, for the tests.

    /usr/bin/python3 reference.py MODEL.gguf IDS OUT.npy      # IDS: 1,2,3

Writes the logits of every position ([len(IDS), vocab], float64 computed, saved as f64).
Its own GGUF reader (F32, F16, Q8_0, Q4_0) and its own forward, written from the
architectures' definitions (llama.cpp's LLM_ARCH_LLAMA / LLM_ARCH_QWEN2):
  x = token_embd[ids]; per layer: h = rmsnorm(x) * attn_norm
  q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv); rope on q, k
    llama: adjacent pairs (2i, 2i+1); qwen2: halves (i, i + n_rot/2); first n_rot dims only
    theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factors[i]
  causal softmax(q k^T * scale) v with kv head h // (H / KVH); x += o Wo^T
  h = rmsnorm(x) * ffn_norm; x += Wdown (silu(Wgate h) * Wup h)
  logits = (rmsnorm(x) * output_norm) Wout^T   (Wout = token_embd when output.weight is absent)
"""
import struct
import sys

import numpy as np

VALUE_FMT = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?', 10: '<Q',
             11: '<q', 12: '<d'}


class Reader:
    def __init__(self, path):
        self.b = open(path, 'rb').read()
        self.p = 0
        magic, ver, nt, nkv = self.take('<IIQQ')
        assert magic == 0x46554747 and ver in (2, 3)
        self.kv = {}
        for _ in range(nkv):
            k = self.str()
            (t,) = self.take('<I')
            self.kv[k] = self.value(t)
        self.info = {}
        for _ in range(nt):
            name = self.str()
            (nd,) = self.take('<I')
            ne = self.take(f'<{nd}Q')
            t, off = self.take('<IQ')
            self.info[name] = (ne, t, off)
        align = self.kv.get('general.alignment', 32)
        self.data = (self.p + align - 1) // align * align

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)
        self.p += struct.calcsize(fmt)
        return v

    def str(self):
        (n,) = self.take('<Q')
        s = self.b[self.p:self.p + n].decode('utf-8', 'replace')
        self.p += n
        return s

    def value(self, t):
        if t == 8:
            return self.str()
        if t == 9:
            sub, n = self.take('<IQ')
            return [self.value(sub) for _ in range(n)]
        return self.take(VALUE_FMT[t])[0]

    def tensor(self, name):
        ne, t, off = self.info[name]
        n = int(np.prod(ne))
        raw = memoryview(self.b)[self.data + off:]
        if t == 0:
            x = np.frombuffer(raw, '<f4', n).astype(np.float64)
        elif t == 1:
            x = np.frombuffer(raw, '<f2', n).astype(np.float64)
        elif t in (8, 2):  # Q8_0: f16 d + 32 int8; Q4_0: f16 d + 16 bytes of nibbles
            size = 34 if t == 8 else 18
            blk = np.frombuffer(raw, np.uint8, n // 32 * size).reshape(-1, size)
            d = blk[:, :2].copy().view('<f2').astype(np.float64)
            if t == 8:
                q = blk[:, 2:].copy().view(np.int8).astype(np.float64)
            else:
                q = np.concatenate([blk[:, 2:] & 15, blk[:, 2:] >> 4], 1).astype(np.float64) - 8
            x = (q * d).reshape(-1)
        else:
            raise SystemExit(f'reference.py: tensor {name}: ggml type {t} not handled')
        return x.reshape(tuple(reversed(ne)))


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w


def forward(path, ids):
    r = Reader(path)
    arch = r.kv['general.architecture']
    a = arch + '.'
    dim, L = r.kv[a + 'embedding_length'], r.kv[a + 'block_count']
    H = r.kv[a + 'attention.head_count']
    KVH = r.kv.get(a + 'attention.head_count_kv', H)
    D = r.kv.get(a + 'attention.key_length', dim // H)
    n_rot = r.kv.get(a + 'rope.dimension_count', D)
    base = r.kv.get(a + 'rope.freq_base', 10000.0)
    eps = r.kv[a + 'attention.layer_norm_rms_epsilon']
    scale = 1.0
    if r.kv.get(a + 'rope.scaling.type') == 'linear':
        scale = 1.0 / r.kv[a + 'rope.scaling.factor']
    factors = r.tensor('rope_freqs.weight') if 'rope_freqs.weight' in r.info else np.ones(n_rot // 2)
    T = lambda n: r.tensor(n)
    opt = lambda n: r.tensor(n) if n in r.info else 0.0
    emb = T('token_embd.weight')
    n = len(ids)
    pos = np.arange(n, dtype=np.float64)
    inv = base ** (-np.arange(n_rot // 2) * 2.0 / n_rot) / factors
    ang = (pos * scale)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):
        y = x.copy()
        if arch == 'qwen2':
            i0, i1 = np.arange(n_rot // 2), np.arange(n_rot // 2) + n_rot // 2
        else:
            i0, i1 = np.arange(0, n_rot, 2), np.arange(1, n_rot, 2)
        x0, x1 = x[..., i0], x[..., i1]
        y[..., i0] = x0 * c - x1 * s
        y[..., i1] = x0 * s + x1 * c
        return y

    x = emb[np.asarray(ids)]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for l in range(L):
        p = f'blk.{l}.'
        h = rmsnorm(x, T(p + 'attn_norm.weight'), eps)
        q = (h @ T(p + 'attn_q.weight').T + opt(p + 'attn_q.bias')).reshape(n, H, D)
        k = (h @ T(p + 'attn_k.weight').T + opt(p + 'attn_k.bias')).reshape(n, KVH, D)
        v = (h @ T(p + 'attn_v.weight').T + opt(p + 'attn_v.bias')).reshape(n, KVH, D)
        q, k = rope(q), rope(k)
        k, v = np.repeat(k, H // KVH, 1), np.repeat(v, H // KVH, 1)
        att = np.einsum('qhd,khd->hqk', q, k) / np.sqrt(D) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum('hqk,khd->qhd', att, v).reshape(n, H * D)
        x = x + o @ T(p + 'attn_output.weight').T
        h = rmsnorm(x, T(p + 'ffn_norm.weight'), eps)
        g = h @ T(p + 'ffn_gate.weight').T
        x = x + ((g / (1 + np.exp(-g))) * (h @ T(p + 'ffn_up.weight').T)) @ T(p + 'ffn_down.weight').T
    out = T('output.weight') if 'output.weight' in r.info else emb
    return rmsnorm(x, T('output_norm.weight'), eps) @ out.T


if __name__ == '__main__':
    model, ids, out = sys.argv[1], [int(t) for t in sys.argv[2].split(',')], sys.argv[3]
    np.save(out, forward(model, ids))
