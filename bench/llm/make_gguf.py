#!/usr/bin/env python3
"""Random-weight llama GGUF files for the GPU LLM benchmark (numpy only).

    python3 bench/llm/make_gguf.py --config 7b --type F16 -o /tmp/m/7b-f16.gguf
    build/tools/rlx quantize /tmp/m/7b-f16.gguf /tmp/m/7b-q4_k.gguf Q4_K -t 16

configs: tiny, small, small-gqa, 1b (TinyLlama-1.1B's shape), 7b (Llama-2/Mistral-7B-like:
dim 4096, 32 layers, 32/8 heads, ffn 14336, vocab 32000); types: F32, F16, BF16 (norms
stay F32, as llama.cpp's converters leave them). Quantized files come from `rlx quantize`.

Streams tensor by tensor in row chunks: each chunk is drawn in float32 by its own numpy
generator (seeded by seed, tensor and chunk), scaled, cast and written, on a thread pool
(numpy releases the GIL), never holding more than a few chunks: on the 16-core H200
machine 1b F16 took 11 s and 7b F16 (13.5 GiB) 27 s, at 0.6 GiB peak RSS. Values depend only on (config, seed), not on
--type or the thread count: the F16/BF16 files of a seed encode the same F32 model. They
are not the values ../shared/tools/llm/make_gguf.py draws (other random streams), but the
scaling is the same (q/k gain 2, output gain 3, norms 1 + 0.1 N(0,1)), so activations stay
sane. The vocabulary and tokenizer metadata are that script's (what rlx's loader accepts).
"""
import argparse
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as G  # noqa: E402

CONFIGS = {
    # dim, layers, heads, kv heads, ffn, vocab, ctx
    'tiny': dict(dim=256, n_layer=4, n_head=8, n_kv_head=4, ffn=768, vocab=2048, ctx=512),
    'small': dict(dim=768, n_layer=12, n_head=12, n_kv_head=12, ffn=2048, vocab=32000, ctx=2048),
    'small-gqa': dict(dim=768, n_layer=12, n_head=12, n_kv_head=4, ffn=2048, vocab=32000,
                      ctx=2048),
    '1b': dict(dim=2048, n_layer=22, n_head=32, n_kv_head=4, ffn=5632, vocab=32000, ctx=2048),
    '7b': dict(dim=4096, n_layer=32, n_head=32, n_kv_head=8, ffn=14336, vocab=32000, ctx=4096),
}
FILE_TYPE = {'F32': 0, 'F16': 1, 'BF16': 32}  # llama_ftype
CHUNK = 1 << 22  # values per generated chunk (16 MiB of float32); fixed: values don't
                 # depend on the thread count


def make_vocab(n_vocab):
    """SentencePiece-'llama'-style vocab: <unk>, <s>, </s>, 256 byte tokens <0xXX>, then
    pieces '▁' + a base-26 word with decreasing scores."""
    assert n_vocab >= 260, 'vocab must hold the 3 specials, 256 bytes and a piece'
    toks, scores, types = ['<unk>', '<s>', '</s>'], [0.0, 0.0, 0.0], [2, 3, 3]  # UNKNOWN, CONTROL
    for b in range(256):
        toks.append(f'<0x{b:02X}>'); scores.append(0.0); types.append(6)  # BYTE
    letters = 'abcdefghijklmnopqrstuvwxyz'
    i = 0
    while len(toks) < n_vocab:
        w, k = '', i
        while True:
            w = letters[k % 26] + w
            k //= 26
            if k == 0:
                break
        toks.append('\u2581' + w); scores.append(-float(i)); types.append(1)  # NORMAL
        i += 1
    return toks, np.array(scores, np.float32), np.array(types, np.int32)


def tensor_specs(cfg, branch_gain=1.0):
    """(gguf name, numpy shape, kind, gain) in file order. kind: 'emb' N(0,1), 'mat'
    N(0,1) * gain / sqrt(fan_in), 'norm' 1 + 0.1 N(0,1). branch_gain scales what each
    block adds to the residual stream (attn_output, ffn_down)."""
    d, hd = cfg['dim'], cfg['dim'] // cfg['n_head']
    nq, nkv, ff, V = cfg['n_head'] * hd, cfg['n_kv_head'] * hd, cfg['ffn'], cfg['vocab']
    specs = [('token_embd.weight', (V, d), 'emb', 1.0)]
    for L in range(cfg['n_layer']):
        p = f'blk.{L}.'
        specs += [(p + 'attn_norm.weight', (d,), 'norm', 0),
                  (p + 'attn_q.weight', (nq, d), 'mat', 2.0),
                  (p + 'attn_k.weight', (nkv, d), 'mat', 2.0),
                  (p + 'attn_v.weight', (nkv, d), 'mat', 1.0),
                  (p + 'attn_output.weight', (d, nq), 'mat', branch_gain),
                  (p + 'ffn_norm.weight', (d,), 'norm', 0),
                  (p + 'ffn_gate.weight', (ff, d), 'mat', 1.0),
                  (p + 'ffn_up.weight', (ff, d), 'mat', 1.0),
                  (p + 'ffn_down.weight', (d, ff), 'mat', branch_gain)]
    specs += [('output_norm.weight', (d,), 'norm', 0),
              ('output.weight', (V, d), 'mat', 3.0)]
    return specs


def to_bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (no NaNs here)."""
    u = x.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)


def encode(x, ttype):
    if ttype == 'F32':
        return x
    if ttype == 'F16':
        return x.astype(np.float16)
    return to_bf16_bits(x)


def chunk_bytes(seed, ti, ci, n, kind, gain, fan_in, ttype):
    """Chunk ci (n values) of tensor ti, drawn, scaled and encoded."""
    rng = np.random.default_rng([seed, ti, ci])
    x = rng.standard_normal(n, dtype=np.float32)
    if kind == 'mat':
        x *= np.float32(gain / np.sqrt(fan_in))
    elif kind == 'norm':
        x *= np.float32(0.1)
        x += np.float32(1.0)
    return encode(x, ttype)


def tensor_chunks(pool, seed, ti, shape, kind, gain, ttype, window):
    """Yields tensor ti's encoded chunks in order, keeping at most `window` in flight."""
    total = int(np.prod(shape))
    sizes = [min(CHUNK, total - s) for s in range(0, total, CHUNK)]
    pending = []
    for ci, n in enumerate(sizes):
        pending.append(pool.submit(chunk_bytes, seed, ti, ci, n, kind, gain, shape[-1], ttype))
        if len(pending) >= window:
            yield pending.pop(0).result()
    for p in pending:
        yield p.result()


def add_metadata(w, cfg, name, ttype, rope_base, eps):
    hd = cfg['dim'] // cfg['n_head']
    w.add('general.architecture', G.STR, 'llama')
    w.add('general.name', G.STR, name)
    w.add('general.file_type', G.U32, FILE_TYPE[ttype])
    w.add('general.alignment', G.U32, G.ALIGN)
    w.add('llama.vocab_size', G.U32, cfg['vocab'])
    w.add('llama.context_length', G.U32, cfg['ctx'])
    w.add('llama.embedding_length', G.U32, cfg['dim'])
    w.add('llama.block_count', G.U32, cfg['n_layer'])
    w.add('llama.feed_forward_length', G.U32, cfg['ffn'])
    w.add('llama.attention.head_count', G.U32, cfg['n_head'])
    w.add('llama.attention.head_count_kv', G.U32, cfg['n_kv_head'])
    w.add('llama.rope.dimension_count', G.U32, hd)
    w.add('llama.rope.freq_base', G.F32V, rope_base)
    w.add('llama.attention.layer_norm_rms_epsilon', G.F32V, eps)
    toks, scores, types = make_vocab(cfg['vocab'])
    w.add('tokenizer.ggml.model', G.STR, 'llama')
    w.add('tokenizer.ggml.tokens', G.ARR, toks, G.STR)
    w.add('tokenizer.ggml.scores', G.ARR, scores, G.F32V)
    w.add('tokenizer.ggml.token_type', G.ARR, types, G.I32)
    w.add('tokenizer.ggml.bos_token_id', G.U32, 1)
    w.add('tokenizer.ggml.eos_token_id', G.U32, 2)
    w.add('tokenizer.ggml.unknown_token_id', G.U32, 0)
    w.add('tokenizer.ggml.add_bos_token', G.BOOL, False)
    w.add('tokenizer.ggml.add_eos_token', G.BOOL, False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--config', default='tiny', choices=sorted(CONFIGS))
    ap.add_argument('--type', default='F16', choices=sorted(FILE_TYPE))
    ap.add_argument('--seed', type=int, default=1234)
    ap.add_argument('-o', '--out', required=True)
    ap.add_argument('--threads', type=int, default=os.cpu_count())
    for k in ('dim', 'n_layer', 'n_head', 'n_kv_head', 'ffn', 'vocab', 'ctx'):
        ap.add_argument('--' + k.replace('_', '-'), dest=k, type=int, help='override the config')
    ap.add_argument('--rope-base', type=float, default=10000.0)
    ap.add_argument('--eps', type=float, default=1e-5)
    ap.add_argument('--branch-gain', type=float, default=1.0,
                    help='scale of what each block adds to the residual (0.1: a trained '
                         "model's calm; at 1 random layers amplify rounding differences)")
    a = ap.parse_args()

    cfg = dict(CONFIGS[a.config])
    for k in cfg:
        if getattr(a, k, None) is not None:
            cfg[k] = getattr(a, k)
    assert cfg['dim'] % cfg['n_head'] == 0 and cfg['n_head'] % cfg['n_kv_head'] == 0

    t0 = time.time()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    w = G.StreamWriter(a.out)
    add_metadata(w, cfg, f'rlx-random-{a.config}-{a.type}-seed{a.seed}', a.type, a.rope_base,
                 a.eps)
    specs = tensor_specs(cfg, a.branch_gain)
    for name, shape, kind, _ in specs:
        w.add_tensor_info(name, shape, 'F32' if kind == 'norm' else a.type)
    w.write_header()
    n_params = 0
    with ThreadPoolExecutor(max(1, a.threads)) as pool:
        for ti, (name, shape, kind, gain) in enumerate(specs):
            ttype = 'F32' if kind == 'norm' else a.type
            w.write_tensor(ti, tensor_chunks(pool, a.seed, ti, shape, kind, gain, ttype,
                                             2 * max(1, a.threads)))
            n_params += int(np.prod(shape))
    w.close()
    size = os.path.getsize(a.out)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f'wrote {a.out}: {a.config} {cfg} type={a.type} params={n_params / 1e6:.1f}M '
          f'size={size / 2**20:.1f} MiB in {time.time() - t0:.1f} s, peak RSS {rss:.0f} MiB')


if __name__ == '__main__':
    main()
