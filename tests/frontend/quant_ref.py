"""Independent NumPy reference for ggml's block formats, used by quant_test.cpp.

Written from the format description (ggml's block layouts), not from rlx's C++: whole
arrays of blocks are split into fields with numpy views and decoded at once.

    quant_ref.py DIR

For every DIR/<type>.blocks (raw blocks) writes DIR/<type>.deq (f32 values), and for every
DIR/<type>.x (f32 values) writes DIR/<type>.q (blocks from the reference round-to-nearest
quantizer: q4_0 q4_1 q5_0 q5_1 q8_0).
"""
import os
import sys

import numpy as np

QK, QK_K = 32, 256
SIZES = {'q4_0': 18, 'q4_1': 20, 'q5_0': 22, 'q5_1': 24, 'q8_0': 34,
         'q2_k': 84, 'q3_k': 110, 'q4_k': 144, 'q5_k': 176, 'q6_k': 210}


def f16(b):
    """(nb, 2) uint8 -> (nb, 1) float32."""
    return np.ascontiguousarray(b).view('<f2').astype(np.float32)


def nibbles32(qs):
    """(nb, 16) bytes -> (nb, 32): low nibbles are values 0-15, high nibbles 16-31."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.int32)


def high_bits32(qh):
    """(nb, 4) bytes of a little-endian u32 -> (nb, 32) bit j of the word."""
    word = np.ascontiguousarray(qh).view('<u4').astype(np.uint64)  # (nb, 1)
    return ((word >> np.arange(32, dtype=np.uint64)) & 1).astype(np.int32)


def two_bit_256(qs):
    """(nb, 64) bytes -> (nb, 256): each 32-byte half holds 128 values as 4 shifts of 32."""
    nb = qs.shape[0]
    q = qs.reshape(nb, 2, 1, 32) >> (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)
    return (q & 3).reshape(nb, 256).astype(np.int32)


def k4_scales(s):
    """(nb, 12) packed 6-bit scales/mins of q4_k and q5_k -> two (nb, 8) arrays."""
    s = s.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    mn = np.empty_like(sc)
    sc[:, :4] = s[:, 0:4] & 63
    mn[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc.astype(np.float32), mn.astype(np.float32)


def k4_nibbles(qs):
    """(nb, 128) -> (nb, 256): each 32 bytes hold 64 values, low nibbles first."""
    nb = qs.shape[0]
    q = qs.reshape(nb, 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    return (q & 0xF).reshape(nb, 256).astype(np.int32)


def dequant(t, raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, SIZES[t])
    nb = b.shape[0]
    if t == 'q4_0':
        return (nibbles32(b[:, 2:]) - 8).astype(np.float32) * f16(b[:, :2])
    if t == 'q4_1':
        return nibbles32(b[:, 4:]).astype(np.float32) * f16(b[:, :2]) + f16(b[:, 2:4])
    if t == 'q5_0':
        q = nibbles32(b[:, 6:]) | (high_bits32(b[:, 2:6]) << 4)
        return (q - 16).astype(np.float32) * f16(b[:, :2])
    if t == 'q5_1':
        q = nibbles32(b[:, 8:]) | (high_bits32(b[:, 4:8]) << 4)
        return q.astype(np.float32) * f16(b[:, :2]) + f16(b[:, 2:4])
    if t == 'q8_0':
        return b[:, 2:].copy().view(np.int8).astype(np.float32) * f16(b[:, :2])
    if t == 'q2_k':
        sc = b[:, :16].astype(np.int32)
        q = two_bit_256(b[:, 16:80]).reshape(nb, 16, 16).astype(np.float32)
        d, dmin = f16(b[:, 80:82]), f16(b[:, 82:84])
        dl = (d * (sc & 0xF).astype(np.float32))[:, :, None]
        ml = (dmin * (sc >> 4).astype(np.float32))[:, :, None]
        return (dl * q - ml).reshape(nb, 256)
    if t == 'q3_k':
        hmask, qs, s, d = b[:, :32], b[:, 32:96], b[:, 96:108].astype(np.int32), f16(b[:, 108:110])
        g = np.arange(16)
        lo = np.where(g < 8, s[:, g % 8] & 0xF, s[:, g % 8] >> 4)
        hi = (s[:, 8 + g % 4] >> (2 * (g // 4))) & 3
        scale = ((lo | (hi << 4)) - 32).astype(np.float32)  # (nb, 16)
        j = np.arange(256)
        high = (hmask[:, j % 32].astype(np.int32) >> (j // 32)) & 1
        q = (two_bit_256(qs) - 4 * (1 - high)).astype(np.float32).reshape(nb, 16, 16)
        return ((d * scale)[:, :, None] * q).reshape(nb, 256)
    if t in ('q4_k', 'q5_k'):
        d, dmin = f16(b[:, 0:2]), f16(b[:, 2:4])
        sc, mn = k4_scales(b[:, 4:16])
        if t == 'q4_k':
            q = k4_nibbles(b[:, 16:144])
        else:
            j = np.arange(256)
            high = (b[:, 16:48][:, j % 32].astype(np.int32) >> (j // 32)) & 1
            q = k4_nibbles(b[:, 48:176]) | (high << 4)
        q = q.reshape(nb, 8, 32).astype(np.float32)
        return ((d * sc)[:, :, None] * q - (dmin * mn)[:, :, None]).reshape(nb, 256)
    if t == 'q6_k':
        ql, qh = b[:, :128], b[:, 128:192]
        sc = b[:, 192:208].copy().view(np.int8).astype(np.float32)
        d = f16(b[:, 208:210])
        # ql: per half of 128 values, bytes 0-63 hold values 0-63 (low nibbles) and 64-127
        # (high nibbles); qh: per half, 32 bytes of 4 two-bit fields.
        low = (ql.reshape(nb, 2, 1, 64) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)) & 0xF
        low = low.reshape(nb, 256).astype(np.int32)
        q = (low | (two_bit_256(qh) << 4)) - 32
        q = q.reshape(nb, 16, 16).astype(np.float32)
        return ((d * sc)[:, :, None] * q).reshape(nb, 256)
    raise ValueError(t)


def round_away(x):
    """C roundf: half away from zero (exactly: |x| - floor(|x|) is exact in float32)."""
    a = np.abs(x)
    r = np.floor(a)
    r = r + (a - r >= np.float32(0.5))
    return np.sign(x) * r


def signed_absmax(b):
    i = np.abs(b).argmax(axis=1)[:, None]  # first maximum, as the C loop keeps
    return np.take_along_axis(b, i, axis=1)


def inv(d):
    with np.errstate(divide='ignore'):
        return np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)


def pack_f16(v):
    return v.astype(np.float32).astype('<f2').view(np.uint8).reshape(-1, 2)


def pack_nibbles(q):
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def pack_high(q):
    bits = ((q >> 4) & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    return bits.sum(axis=1).astype('<u4').view(np.uint8).reshape(-1, 4)


def quant(t, x):
    b = x.reshape(-1, QK).astype(np.float32)
    if t == 'q8_0':
        d = (np.abs(b).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
        q = round_away(b * inv(d)).astype(np.int8)
        return np.concatenate([pack_f16(d), q.view(np.uint8)], axis=1)
    if t in ('q4_0', 'q5_0'):
        half = 8 if t == 'q4_0' else 16
        d = (signed_absmax(b) / np.float32(-half)).astype(np.float32)
        # C: MIN(top, (int8_t)(x * id + half + 0.5)), truncation toward zero
        q = np.minimum(np.trunc(b * inv(d) + np.float32(half + 0.5)), 2 * half - 1)
        q = np.maximum(q, 0).astype(np.int64)
        if t == 'q4_0':
            return np.concatenate([pack_f16(d), pack_nibbles(q)], axis=1)
        return np.concatenate([pack_f16(d), pack_high(q), pack_nibbles(q & 0xF)], axis=1)
    if t in ('q4_1', 'q5_1'):
        top = 15 if t == 'q4_1' else 31
        lo, hi = b.min(axis=1, keepdims=True), b.max(axis=1, keepdims=True)
        d = ((hi - lo) / np.float32(top)).astype(np.float32)
        q = np.trunc((b - lo) * inv(d) + np.float32(0.5))
        q = np.clip(q, 0, top).astype(np.int64)
        head = np.concatenate([pack_f16(d), pack_f16(lo)], axis=1)
        if t == 'q4_1':
            return np.concatenate([head, pack_nibbles(q)], axis=1)
        return np.concatenate([head, pack_high(q), pack_nibbles(q & 0xF)], axis=1)
    raise ValueError(t)


def main(d):
    for name in sorted(os.listdir(d)):
        stem, ext = os.path.splitext(name)
        path = os.path.join(d, name)
        if ext == '.blocks':
            with open(path, 'rb') as f:
                out = dequant(stem, f.read())
            out.astype('<f4').tofile(os.path.join(d, stem + '.deq'))
        elif ext == '.x':
            x = np.fromfile(path, '<f4')
            quant(stem, x).astype(np.uint8).tofile(os.path.join(d, stem + '.q'))


if __name__ == '__main__':
    main(sys.argv[1])
