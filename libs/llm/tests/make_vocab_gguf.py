#!/usr/bin/env python3
"""Make the tokenizer test data under libs/llm/tests/data (pure Python, no numpy needed).

  /usr/bin/python3 libs/llm/tests/make_vocab_gguf.py [--kjv ../shared/data/kjv-excerpt.txt]
  cd ~/.cache/rlx-llm && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
      node /work/main/libs/llm/tests/llama_tokenize_ref.mjs /work/main/libs/llm/tests/data

Writes (all small):
  data/kjv-excerpt-5k.txt      a few KB of the KJV excerpt (Genesis 1, Psalm 23, Proverbs 3)
  data/tokenizer_texts.txt     the test texts, one per line, escaped (see escape())
  data/spm-tiny.gguf           the SentencePiece-style vocab that ../shared/tools/llm/make_gguf.py
                               writes for --config tiny (<unk> <s> </s>, 256 <0xXX>, '▁'+a..z words)
  data/spm-kjv.gguf            "llama" vocab learned from the KJV text (BPE-style merges; score =
                               -merge index), + control/user-defined tokens
  data/bpe-llama3.gguf         "gpt2" byte-level BPE vocab + merges learned from the KJV text,
                               tokenizer.ggml.pre = "llama-bpe" (Llama 3 specials)
  data/bpe-qwen2.gguf          the same vocab/merges, pre = "qwen2" (Qwen2 specials)
  data/bpe-gpt2.gguf           the same vocab/merges, pre = "gpt-2"
  data/bpe-default.gguf        the same vocab/merges, pre = "default" (llama.cpp's cascade)
Each GGUF is a vocab-only llama-architecture file (hparams, no tensors): llama.cpp loads it
with vocab_only (node-llama-cpp's `vocabOnly: true`). llama_tokenize_ref.mjs then writes
data/<name>.ref.txt with llama.cpp's token ids and detokenized text for every test text.
"""
import argparse
import collections
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, 'data')

# --------------------------------------------------------------- GGUF (metadata only)
U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9


def _s(v):
    b = v.encode('utf-8')
    return struct.pack('<Q', len(b)) + b


def _val(vt, v, sub=None):
    if vt == STR:
        return _s(v)
    if vt == ARR:
        out = struct.pack('<IQ', sub, len(v))
        if sub == STR:
            return out + b''.join(_s(x) for x in v)
        fmt = {U32: '<I', I32: '<i', F32: '<f'}[sub]
        return out + b''.join(struct.pack(fmt, x) for x in v)
    return struct.pack({U32: '<I', I32: '<i', F32: '<f', BOOL: '<?'}[vt], v)


def write_gguf(path, kv):
    """kv: list of (key, vtype, value[, subtype]). GGUF v3, no tensors."""
    with open(path, 'wb') as f:
        f.write(struct.pack('<IIQQ', 0x46554747, 3, 0, len(kv)))
        for e in kv:
            key, vt, v = e[:3]
            f.write(_s(key) + struct.pack('<I', vt) + _val(vt, v, e[3] if len(e) > 3 else None))


def llama_header(name, n_vocab):
    # Tiny but consistent llama hparams: llama.cpp reads them even for a vocab-only load.
    return [('general.architecture', STR, 'llama'), ('general.name', STR, name),
            ('general.alignment', U32, 32),
            ('llama.vocab_size', U32, n_vocab), ('llama.context_length', U32, 256),
            ('llama.embedding_length', U32, 64), ('llama.block_count', U32, 1),
            ('llama.feed_forward_length', U32, 128), ('llama.attention.head_count', U32, 4),
            ('llama.attention.head_count_kv', U32, 4), ('llama.rope.dimension_count', U32, 16),
            ('llama.attention.layer_norm_rms_epsilon', F32, 1e-5)]


def vocab_kv(model, tokens, types, scores=None, merges=None, pre=None, extra=()):
    kv = [('tokenizer.ggml.model', STR, model)]
    if pre is not None:
        kv.append(('tokenizer.ggml.pre', STR, pre))
    kv.append(('tokenizer.ggml.tokens', ARR, tokens, STR))
    if scores is not None:
        kv.append(('tokenizer.ggml.scores', ARR, scores, F32))
    kv.append(('tokenizer.ggml.token_type', ARR, types, I32))
    if merges is not None:
        kv.append(('tokenizer.ggml.merges', ARR, merges, STR))
    return kv + list(extra)


# --------------------------------------------------------------- BPE training
def train_merges(word_freq, n_merges):
    """Classic BPE over words given as tuples of symbols. Ties: highest count, then the
    lexicographically smallest pair, so the output is deterministic."""
    words = [list(w) for w in word_freq]
    freqs = list(word_freq.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[a, b] += freqs[i]
            where[a, b].add(i)
    merges = []
    while len(merges) < n_merges and pairs:
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if pairs[best] < 2:
            break
        merges.append(best)
        a, b = best
        for i in list(where[best]):
            w, f = words[i], freqs[i]
            for x, y in zip(w, w[1:]):
                pairs[x, y] -= f
                if pairs[x, y] <= 0:
                    del pairs[x, y]
            j, out = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):
                pairs[x, y] += f
                where[x, y].add(i)
        where.pop(best, None)
    return merges


def bytes_to_unicode():
    """GPT-2's byte -> printable code point table, in GPT-2's vocabulary order."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs))), bs


# --------------------------------------------------------------- vocabularies
def spm_tiny():
    sys.path.insert(0, os.path.join(HERE, '../../../../shared/tools/llm'))
    sys.path.insert(0, '/work/shared/tools/llm')
    try:
        import make_gguf as M  # the generator's own vocabulary, so ids match its models
        toks, scores, types = M.make_vocab(2048)
        scores, types = [float(x) for x in scores], [int(x) for x in types]
    except ImportError:  # same construction, without numpy
        toks, scores, types = ['<unk>', '<s>', '</s>'], [0.0] * 3, [2, 3, 3]
        toks += [f'<0x{b:02X}>' for b in range(256)]
        scores += [0.0] * 256
        types += [6] * 256
        i = 0
        while len(toks) < 2048:
            w, k = '', i
            while True:
                w = 'abcdefghijklmnopqrstuvwxyz'[k % 26] + w
                k //= 26
                if k == 0:
                    break
            toks.append('\u2581' + w)
            scores.append(-float(i))
            types.append(1)
            i += 1
    kv = llama_header('rlx-spm-tiny', len(toks)) + vocab_kv('llama', toks, types, scores, extra=[
        ('tokenizer.ggml.bos_token_id', U32, 1), ('tokenizer.ggml.eos_token_id', U32, 2),
        ('tokenizer.ggml.unknown_token_id', U32, 0),
        ('tokenizer.ggml.add_bos_token', BOOL, False), ('tokenizer.ggml.add_eos_token', BOOL, False)])
    write_gguf(os.path.join(DATA, 'spm-tiny.gguf'), kv)


def spm_kjv(text, n_merges):
    words = collections.Counter('\u2581' + w for w in text.split())
    chars = collections.Counter()
    for w, f in words.items():
        for c in w:
            chars[c] += f
    merges = train_merges({tuple(w): f for w, f in words.items()}, n_merges)
    toks, scores, types = ['<unk>', '<s>', '</s>'], [0.0] * 3, [2, 3, 3]
    toks += [f'<0x{b:02X}>' for b in range(256)]
    scores += [0.0] * 256
    types += [6] * 256
    seen = set(toks)
    for i, (a, b) in enumerate(merges):  # merged pieces: higher score = earlier merge
        if a + b not in seen:  # groups of 8 share a score, to exercise the leftmost-first ties
            seen.add(a + b)
            toks.append(a + b)
            scores.append(-float(i // 8))
            types.append(1)
    for j, (c, _) in enumerate(sorted(chars.items(), key=lambda kv: (-kv[1], kv[0]))):
        if c not in seen:
            seen.add(c)
            toks.append(c)
            scores.append(-float(len(merges) + j))
            types.append(1)
    # control tokens (matched only with parse_special), a user-defined one (always matched)
    for t, ty in (('<|im_start|>', 3), ('<|im_end|>', 3), ('[INST]', 4)):
        toks.append(t)
        scores.append(0.0)
        types.append(ty)
    kv = llama_header('rlx-spm-kjv', len(toks)) + vocab_kv('llama', toks, types, scores, extra=[
        ('tokenizer.ggml.bos_token_id', U32, 1), ('tokenizer.ggml.eos_token_id', U32, 2),
        ('tokenizer.ggml.unknown_token_id', U32, 0), ('tokenizer.ggml.add_bos_token', BOOL, True)])
    write_gguf(os.path.join(DATA, 'spm-kjv.gguf'), kv)


def bpe_kjv(text, n_merges):
    b2u, order = bytes_to_unicode()
    # The KJV text has no digits: add verse-style numbers so digit merges exist and the
    # Llama 3 (groups of 3) and Qwen2 (single digits) splits give different ids.
    text += ''.join(f' {i}:{(i * 7) % 176} {i * 37 % 10000}' for i in range(1, 3000))
    enc = lambda s: ''.join(b2u[b] for b in s.encode('utf-8'))
    text += " WE'LL DON'T I'M YOU'RE THEY'VE HE'D IT'S" * 40 + 'x.\r\n\n  \n \n\t\n    y' * 40
    # An approximation of the Llama 3 split is enough for training (merges such as ".\n"
    # and "'LL" make the splits' differences visible in the ids).
    pieces = re.findall(r"'(?i:s|t|re|ve|m|ll|d)|[^\r\n\sA-Za-z0-9]?[A-Za-z]+| ?[0-9]{1,3}|"
                        r" ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+", text)
    words = collections.Counter(enc(p) for p in pieces)
    merges = train_merges({tuple(w): f for w, f in words.items()}, n_merges)
    toks = [b2u[b] for b in order]
    seen = set(toks)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            toks.append(a + b)
    # whole words with no merge path: only llama3's ignore_merges finds them
    for w in (' xylophone', ' zebra'):
        if enc(w) not in seen:
            seen.add(enc(w))
            toks.append(enc(w))
    types = [1] * len(toks)
    merge_strs = [a + ' ' + b for a, b in merges]

    def write(name, pre, specials, user, bos, eos, add_bos):
        t, ty = toks + [s for s in specials] + user, types + [3] * len(specials) + [4] * len(user)
        ids = {s: i for i, s in enumerate(t)}
        extra = [('tokenizer.ggml.bos_token_id', U32, ids[bos]),
                 ('tokenizer.ggml.eos_token_id', U32, ids[eos]),
                 ('tokenizer.ggml.add_bos_token', BOOL, add_bos)]
        kv = llama_header('rlx-' + name, len(t)) + vocab_kv('gpt2', t, ty, None, merge_strs, pre,
                                                           extra)
        write_gguf(os.path.join(DATA, name + '.gguf'), kv)

    write('bpe-llama3', 'llama-bpe',
          ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>', '<|end_header_id|>',
           '<|eot_id|>'], ['<|user_tag|>'], '<|begin_of_text|>', '<|end_of_text|>', True)
    write('bpe-qwen2', 'qwen2', ['<|endoftext|>', '<|im_start|>', '<|im_end|>'], ['<tool_call>'],
          '<|endoftext|>', '<|im_end|>', False)
    write('bpe-gpt2', 'gpt-2', ['<|endoftext|>'], [], '<|endoftext|>', '<|endoftext|>', False)
    write('bpe-default', 'default', ['<|endoftext|>'], [], '<|endoftext|>', '<|endoftext|>', False)


# --------------------------------------------------------------- texts
def escape(s):
    """One line per text: backslash, \\n, \\r, \\t and other bytes < 0x20 / 0x7F escaped
    (\\xHH); UTF-8 above ASCII is kept as is."""
    out = []
    for c in s:
        o = ord(c)
        if c == '\\':
            out.append('\\\\')
        elif c == '\n':
            out.append('\\n')
        elif c == '\r':
            out.append('\\r')
        elif c == '\t':
            out.append('\\t')
        elif o < 0x20 or o == 0x7F:
            out.append('\\x%02X' % o)
        else:
            out.append(c)
    return ''.join(out)


TRICKY = [
    'Hello world', 'hello', ' ', '  ', '\n', '\t', 'a', 'A', ' a', 'a ', '   leading', 'trailing   ',
    'multiple     spaces\tand\ttabs  \t x', 'line one\r\nline two\n\n\nthree\r\n\r\n', '  \n  x \n',
    "I'm sure you've seen what they'll do; it's John's, isn't it? I'd say WE'LL SEE, DON'T YOU'RE",
    "rock 'n' roll 'tis 'quoted' it' '", 'Digits: 0 12 345 6789 1234567890 3.14159 1,000,000 007',
    'x2 2x a1b22c333d4444', 'Emoji: \U0001F600\U0001F44D\U0001F3FD \U0001F1FA\U0001F1F8 \u2764\uFE0F '
    'and family \U0001F468\u200D\U0001F469\u200D\U0001F467', 'CJK: 中文字符 日本語のテキスト 한국어 텍스트',
    'Combining: e\u0301 n\u0303 a\u0308\u0301 Z\u0335\u0321 \u0301start', 'Accents: café naïve Ångström Straße',
    'Greek Ωμέγα and Cyrillic Привет мир', 'Arabic: مرحبا بالعالم', 'Hindi: नमस्ते दुनिया',
    'Symbols: $100 + 20% = <x> | {y} ~ ^ ` @ # & * ( ) [ ] \\ / _', 'Punctuation!!! What?! ... --- \'\'\' """',
    'Math letters \U0001D518\U0001D52B\U0001D526 \U0001D401\U0001D428 and numbers \u0663\u0664 \u216B \u00BD \u00B2',
    'Unicode spaces a\u00A0b\u2003c\u3000d\u2028e\u0085f\u202Fg', 'zero\u200Dwidth\u200Bjoin', 'ctl\x01\x02\x7F\x1B[0m',
    'Supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis',
    "The year 2024's numbers: 1st, 2nd, 3rd!", 'a\u2581b \u2581\u2581 x', '\u0120Hello \u010A byte-looking chars',
    'Hello , world . Is it ? Yes ! don \'t say \' hi \' ok', 'a xylophone and a zebra, xylophone zebra',
    '<s>Hello</s> <unk> <|im_start|>user\nhi<|im_end|> [INST] q [/INST]',
    '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|user_tag|>x',
    '<|endoftext|><|im_start|>system\nYou are<|im_end|>\n<tool_call>{}</tool_call>', '<|im_end|>',
    'trailing special<|endoftext|>', 'half <|im_start special <s', 'tab\tthen\vvertical\fform',
    '\u00FF\u00FE\u0100 latin-1 edge \u00AD soft hyphen',
]


def random_texts(n, seed=1234):
    """Seeded random mixes of the characters the pre-tokenizer splits care about."""
    import random
    rng = random.Random(seed)
    pool = (list('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789') +
            [' '] * 12 + ['\n', '\r', '\t', "'", "'", '.', ',', '!', '?', ';', ':', '-', '(', '"',
                          '$', '\u00e9', '\u00df', '\u03a9', '\u0436', '\u4e2d', '\u65e5',
                          '\U0001F600', '\u0301', '\u00a0', '\u3000', '\u0663', '\u216b',
                          '\u00bd', '\u200d', '\u2581', '\x01'] +
            ["'s", "'LL", "'re", '  ', ' the', ' The', 'LORD', ' and', '123', '\r\n'])
    return [''.join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--kjv', default=os.path.join(HERE, '../../../../shared/data/kjv-excerpt.txt'))
    ap.add_argument('--merges', type=int, default=1200)
    a = ap.parse_args()
    if not os.path.exists(a.kjv):
        a.kjv = '/work/shared/data/kjv-excerpt.txt'
    text = open(a.kjv, encoding='utf-8').read()
    lines = text.split('\n')
    os.makedirs(DATA, exist_ok=True)

    # Genesis 1 and the first lines of 2, Psalm 23, Proverbs 3:1-12.
    ps = next(i for i, l in enumerate(lines) if l.startswith('The LORD is my shepherd'))
    pr = next(i for i, l in enumerate(lines) if l.startswith('My son, forget not my law'))
    excerpt = '\n'.join(lines[:34] + lines[ps:ps + 6] + lines[pr:pr + 12]) + '\n'
    with open(os.path.join(DATA, 'kjv-excerpt-5k.txt'), 'w', encoding='utf-8') as f:
        f.write(excerpt)

    texts = [excerpt] + [l for l in excerpt.split('\n') if l] + TRICKY + random_texts(200)
    with open(os.path.join(DATA, 'tokenizer_texts.txt'), 'w', encoding='utf-8') as f:
        for t in texts:
            f.write(escape(t) + '\n')

    spm_tiny()
    spm_kjv(text, a.merges)
    bpe_kjv(text, a.merges)
    for n in sorted(os.listdir(DATA)):
        print(f'{n:28s} {os.path.getsize(os.path.join(DATA, n)):8d} bytes')


if __name__ == '__main__':
    main()
