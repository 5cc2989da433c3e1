"""GGUF v3 for the GPU LLM benchmark: a streaming writer (make_gguf.py) and a memory-mapped
reader with vectorised torch dequantization (llm_torch.py). numpy only at import; torch is
imported by the functions that need it.

Format (ggml docs/gguf.md): u32 magic "GGUF", u32 version, u64 n_tensors, u64 n_kv; then
the key/values (string key, u32 type, value; strings are u64 length + utf-8; arrays are
u32 element type, u64 count, elements); then per tensor: name, u32 n_dims, u64 ne[n_dims]
(ne[0] innermost, the REVERSE of the numpy shape), u32 ggml type, u64 offset into the data
section; padding to general.alignment, then the data, each tensor padded to the alignment.
Little-endian throughout. Block layouts: include/rlx/quant.h; reference decoders:
src/ir/quant.cpp.
"""
import struct
from dataclasses import dataclass

import numpy as np

GGUF_MAGIC = 0x46554747
ALIGN = 32

# gguf metadata value types
U8, I8, U16, I16, U32, I32, F32V, BOOL, STR, ARR, U64, I64, F64V = range(13)
_SCALAR = {U8: '<B', I8: '<b', U16: '<H', I16: '<h', U32: '<I', I32: '<i', F32V: '<f',
           BOOL: '<?', U64: '<Q', I64: '<q', F64V: '<d'}
_NP_ARR = {U8: np.uint8, I8: np.int8, U16: np.uint16, I16: np.int16, U32: np.uint32,
           I32: np.int32, F32V: np.float32, U64: np.uint64, I64: np.int64, F64V: np.float64,
           BOOL: np.bool_}

# ggml tensor types: name -> (id, values per block, bytes per block)
TYPES = {
    'F32': (0, 1, 4), 'F16': (1, 1, 2), 'BF16': (30, 1, 2),
    'Q4_0': (2, 32, 18), 'Q4_1': (3, 32, 20), 'Q5_0': (6, 32, 22), 'Q5_1': (7, 32, 24),
    'Q8_0': (8, 32, 34), 'Q2_K': (10, 256, 84), 'Q3_K': (11, 256, 110),
    'Q4_K': (12, 256, 144), 'Q5_K': (13, 256, 176), 'Q6_K': (14, 256, 210),
}
TYPE_NAME = {v[0]: k for k, v in TYPES.items()}


def tensor_nbytes(ttype, shape):
    """Bytes of a tensor of ggml type name `ttype` and numpy shape `shape`."""
    _, bs, ts = TYPES[ttype]
    n = int(np.prod(shape))
    assert shape[-1] % bs == 0, f'row length {shape[-1]} not a multiple of block {bs}'
    return n // bs * ts


def _pad(n, align):
    return (align - n % align) % align


# --------------------------------------------------------------------------- writer
def _s(b):
    b = b.encode('utf-8') if isinstance(b, str) else b
    return struct.pack('<Q', len(b)) + b


def _kv_value(vtype, val, sub=None):
    if vtype == STR:
        return _s(val)
    if vtype == ARR:
        out = struct.pack('<IQ', sub, len(val))
        if sub == STR:
            return out + b''.join(_s(v) for v in val)
        return out + np.asarray(val, dtype=np.dtype(_NP_ARR[sub]).newbyteorder('<')).tobytes()
    return struct.pack(_SCALAR[vtype], val)


class StreamWriter:
    """Writes the header first (every tensor's size is known from its shape and type), then
    each tensor's bytes as they are produced, so no more than a chunk is ever in memory."""

    def __init__(self, path, alignment=ALIGN):
        self.path, self.align = path, alignment
        self.kv = []        # (key, vtype, val, sub)
        self.tensors = []   # (name, numpy shape, type name)
        self.f = None

    def add(self, key, vtype, val, sub=None):
        self.kv.append((key, vtype, val, sub))

    def add_tensor_info(self, name, shape, ttype):
        tensor_nbytes(ttype, shape)  # checks the row against the block size
        self.tensors.append((name, tuple(shape), ttype))

    def write_header(self):
        self.f = open(self.path, 'wb')
        f = self.f
        f.write(struct.pack('<IIQQ', GGUF_MAGIC, 3, len(self.tensors), len(self.kv)))
        for key, vtype, val, sub in self.kv:
            f.write(_s(key) + struct.pack('<I', vtype) + _kv_value(vtype, val, sub))
        off = 0
        for name, shape, ttype in self.tensors:
            ne = tuple(reversed(shape))
            f.write(_s(name) + struct.pack('<I', len(ne)) + struct.pack(f'<{len(ne)}Q', *ne)
                    + struct.pack('<IQ', TYPES[ttype][0], off))
            n = tensor_nbytes(ttype, shape)
            off += n + _pad(n, self.align)
        f.write(b'\0' * _pad(f.tell(), self.align))

    def write_tensor(self, index, chunks):
        """Tensor `index`'s data, as an iterable of bytes-like chunks in order."""
        name, shape, ttype = self.tensors[index]
        want, got = tensor_nbytes(ttype, shape), 0
        for c in chunks:
            self.f.write(c)
            got += memoryview(c).nbytes
        assert got == want, f'{name}: wrote {got} bytes, expected {want}'
        self.f.write(b'\0' * _pad(got, self.align))

    def close(self):
        self.f.close()


# --------------------------------------------------------------------------- reader
@dataclass
class TensorInfo:
    name: str
    shape: tuple      # numpy order (outer .. inner)
    ttype: str        # ggml type name
    offset: int       # absolute file offset
    nbytes: int


class GGUFFile:
    """Metadata in .kv, tensors in .tensors (name -> TensorInfo); data memory-mapped, so
    opening a 14 GB file costs nothing until a tensor is read."""

    def __init__(self, path):
        self.path = path
        self.mm = np.memmap(path, dtype=np.uint8, mode='r')
        self.buf = memoryview(self.mm)
        self.pos = 0
        magic, ver, nt, nkv = self._unpack('<IIQQ')
        assert magic == GGUF_MAGIC, f'{path}: not a GGUF file (magic {magic:#x})'
        assert ver in (2, 3), f'{path}: GGUF version {ver}'
        self.kv = {}
        for _ in range(nkv):
            key = self._str()
            (vt,) = self._unpack('<I')
            self.kv[key] = self._val(vt)
        raw = []
        for _ in range(nt):
            name = self._str()
            (nd,) = self._unpack('<I')
            ne = self._unpack(f'<{nd}Q')
            tt, off = self._unpack('<IQ')
            raw.append((name, tuple(reversed(ne)), tt, off))
        align = int(self.kv.get('general.alignment', ALIGN))
        start = self.pos + _pad(self.pos, align)
        self.tensors = {}
        for name, shape, tt, off in raw:
            if tt not in TYPE_NAME:
                raise NotImplementedError(f'{name}: ggml type {tt}')
            t = TYPE_NAME[tt]
            self.tensors[name] = TensorInfo(name, shape, t, start + off, tensor_nbytes(t, shape))

    def _unpack(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def _str(self):
        (n,) = self._unpack('<Q')
        s = bytes(self.buf[self.pos:self.pos + n]).decode('utf-8', errors='replace')
        self.pos += n
        return s

    def _val(self, vt):
        if vt == STR:
            return self._str()
        if vt == ARR:
            sub, n = self._unpack('<IQ')
            if sub == STR:
                return [self._str() for _ in range(n)]
            dt = np.dtype(_NP_ARR[sub]).newbyteorder('<')
            a = np.frombuffer(self.buf, dt, n, self.pos).copy()
            self.pos += n * dt.itemsize
            return a
        return self._unpack(_SCALAR[vt])[0]

    def raw(self, name):
        """The stored bytes of a tensor (a read-only uint8 view of the mapping)."""
        t = self.tensors[name]
        return self.mm[t.offset:t.offset + t.nbytes]

    def torch_tensor(self, name, dtype, device):
        """Tensor `name` as a torch tensor of `dtype` on `device`, in its numpy shape.
        Quantized types are decoded on `device` (fast on a GPU)."""
        import torch
        t = self.tensors[name]
        # A copy: torch wants writable memory, and the bytes then move to the device at once.
        raw = torch.from_numpy(np.array(self.raw(name))).to(device)
        return dequantize(raw, t.ttype, t.shape).to(dtype)


# ------------------------------------------------------------------- dequantization
def _f16(b):
    """uint8 [..., 2] little-endian -> float32 [..., 1]."""
    import torch
    return b.contiguous().view(torch.float16).float()


def dequantize(raw, ttype, shape):
    """raw: torch uint8 tensor of a tensor's bytes -> float tensor of numpy shape `shape`
    (float32 for the block types; the stored dtype for F32/F16/BF16)."""
    import torch
    if ttype in ('F32', 'F16', 'BF16'):
        dt = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16}[ttype]
        return raw.view(dt).reshape(shape)
    _, bs, ts = TYPES[ttype]
    blk = raw.reshape(-1, ts)
    if ttype == 'Q8_0':
        out = _dq_q8_0(blk)
    elif ttype == 'Q4_K':
        out = _dq_q4_k(blk)
    elif ttype == 'Q6_K':
        out = _dq_q6_k(blk)
    else:
        raise NotImplementedError(f'dequantization of {ttype} (have F32 F16 BF16 Q8_0 Q4_K Q6_K)')
    return out.reshape(shape)


def _dq_q8_0(blk):
    """x = d * q; block: f16 d, 32 int8."""
    import torch
    d = _f16(blk[:, 0:2])
    q = blk[:, 2:].contiguous().view(torch.int8).float()
    return q * d


def _dq_q4_k(blk):
    """8 groups of 32: x = d * sc[g] * q - dmin * m[g]. Block: f16 d, f16 dmin, 12 bytes of
    6-bit scales/mins, 128 bytes where each 32 hold two groups (low nibbles, then high)."""
    import torch
    nb = blk.shape[0]
    d, dmin = _f16(blk[:, 0:2]), _f16(blk[:, 2:4])
    s = blk[:, 4:16].reshape(nb, 3, 4)
    a, mm, md = s[:, 0], s[:, 1], s[:, 2]
    # groups 0-3: low 6 bits of bytes 0-3 / 4-7; groups 4-7: nibbles of bytes 8-11, top two
    # bits from the spare top bits of bytes 0-3 / 4-7
    sc = torch.cat([a & 63, (md & 15) | ((a >> 6) << 4)], dim=1).float()
    m = torch.cat([mm & 63, (md >> 4) | ((mm >> 6) << 4)], dim=1).float()
    qs = blk[:, 16:].reshape(nb, 4, 1, 32)
    q = torch.cat([qs & 15, qs >> 4], dim=2).reshape(nb, 8, 32).float()
    return (d * sc).unsqueeze(2) * q - (dmin * m).unsqueeze(2)


def _dq_q6_k(blk):
    """16 groups of 16: x = d * scales[g] * (q - 32). Value j (half h = j / 128, r = j % 128):
    low 4 bits in ql[64h + r % 64] (high nibble when r >= 64), high 2 bits in
    qh[32h + r % 32] at shift 2 * (r / 32)."""
    import torch
    nb = blk.shape[0]
    ql = blk[:, 0:128].reshape(nb, 2, 1, 64)
    qh = blk[:, 128:192].reshape(nb, 2, 1, 32)
    scales = blk[:, 192:208].contiguous().view(torch.int8).float()
    d = _f16(blk[:, 208:210])
    lo = torch.cat([ql & 15, ql >> 4], dim=2).reshape(nb, 2, 128)
    hi = torch.cat([(qh >> s) & 3 for s in (0, 2, 4, 6)], dim=2).reshape(nb, 2, 128)
    q = (lo | (hi << 4)).reshape(nb, 16, 16).float() - 32
    return (d * scales).unsqueeze(2) * q
