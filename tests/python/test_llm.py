"""rlx.llm from Python: load a GGUF file, tokenize, logits against an independent NumPy
forward (libs/llm/tests/reference.py), greedy generation, seeded sampling. The model is a
small random-weight llama written here by a minimal GGUF writer of the test's own."""
import importlib.util
import pathlib
import struct

import numpy as np
import pytest

import rlx

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _reference():
    spec = importlib.util.spec_from_file_location("llm_reference",
                                                  ROOT / "libs" / "llm" / "tests" / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def write_llama(path, dim=32, layers=2, heads=4, kv_heads=2, ffn=64, vocab=300, seed=3):
    rng = np.random.default_rng(seed)
    kv = [("general.architecture", 8, "llama")]
    u32 = lambda k, v: kv.append((k, 4, v))
    for k, v in [("llama.embedding_length", dim), ("llama.block_count", layers),
                 ("llama.attention.head_count", heads), ("llama.attention.head_count_kv", kv_heads),
                 ("llama.feed_forward_length", ffn), ("llama.context_length", 128)]:
        u32(k, v)
    kv.append(("llama.attention.layer_norm_rms_epsilon", 6, 1e-5))
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    toks += ["\u2581" + chr(ord("a") + i % 26) * (1 + i // 26) for i in range(vocab - len(toks))]
    kv += [("tokenizer.ggml.model", 8, "llama"), ("tokenizer.ggml.tokens", 9, toks),
           ("tokenizer.ggml.scores", 90, [0.0] * 259 + [-float(i) for i in range(vocab - 259)]),
           ("tokenizer.ggml.token_type", 91, [2, 3, 3] + [6] * 256 + [1] * (vocab - 259))]
    hd = dim // heads
    W = [("token_embd.weight", rng.standard_normal((vocab, dim)))]
    for l in range(layers):
        p = f"blk.{l}."
        W += [(p + "attn_norm.weight", 1 + 0.1 * rng.standard_normal(dim)),
              (p + "attn_q.weight", rng.standard_normal((heads * hd, dim)) / np.sqrt(dim)),
              (p + "attn_k.weight", rng.standard_normal((kv_heads * hd, dim)) / np.sqrt(dim)),
              (p + "attn_v.weight", rng.standard_normal((kv_heads * hd, dim)) / np.sqrt(dim)),
              (p + "attn_output.weight", rng.standard_normal((dim, heads * hd)) / np.sqrt(dim)),
              (p + "ffn_norm.weight", 1 + 0.1 * rng.standard_normal(dim)),
              (p + "ffn_gate.weight", rng.standard_normal((ffn, dim)) / np.sqrt(dim)),
              (p + "ffn_up.weight", rng.standard_normal((ffn, dim)) / np.sqrt(dim)),
              (p + "ffn_down.weight", rng.standard_normal((dim, ffn)) / np.sqrt(ffn))]
    W += [("output_norm.weight", np.ones(dim)),
          ("output.weight", 3 * rng.standard_normal((vocab, dim)) / np.sqrt(dim))]
    out = struct.pack("<IIQQ", 0x46554747, 3, len(W), len(kv))
    for k, t, v in kv:
        out += _s(k)
        if t == 8:
            out += struct.pack("<I", 8) + _s(v)
        elif t == 9:
            out += struct.pack("<IIQ", 9, 8, len(v)) + b"".join(_s(x) for x in v)
        elif t == 90:
            out += struct.pack("<IIQ", 9, 6, len(v)) + np.asarray(v, "<f4").tobytes()
        elif t == 91:
            out += struct.pack("<IIQ", 9, 5, len(v)) + np.asarray(v, "<i4").tobytes()
        elif t == 6:
            out += struct.pack("<If", 6, v)
        else:
            out += struct.pack("<II", 4, v)
    off, data = 0, b""
    for name, a in W:
        b = np.ascontiguousarray(a, "<f4").tobytes()
        out += _s(name) + struct.pack("<I", a.ndim) + struct.pack(f"<{a.ndim}Q", *a.shape[::-1])
        out += struct.pack("<IQ", 0, off)
        data += b + b"\0" * (-len(b) % 32)
        off = len(data)
    out += b"\0" * (-len(out) % 32)
    pathlib.Path(path).write_bytes(out + data)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("llm") / "tiny.gguf"
    write_llama(p)
    return str(p)


def test_logits_match_a_numpy_forward(model_path):
    m = rlx.llm.load(model_path, kv="f32")
    assert (m.arch, m.vocab_size, m.n_layer) == ("llama", 300, 2)
    ids = [5, 77, 123, 9, 250, 31]
    got = m.logits(ids)
    want = _reference().forward(model_path, ids)
    assert got.shape == (6, 300) and got.dtype == np.float32
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-4
    np.testing.assert_allclose(m.logits(ids, all=False), got[-1], rtol=1e-5, atol=1e-5)


def test_tokenize_round_trip(model_path):
    m = rlx.llm.load(model_path)
    ids = m.tokenize("ab cd", add_special=False)
    assert all(isinstance(i, int) for i in ids)
    assert m.detokenize(ids).decode().strip() == "ab cd"


def test_greedy_generation_follows_the_argmax(model_path):
    m = rlx.llm.load(model_path, kv="f32")
    prompt = [5, 77, 123]
    it = m.generate(prompt, max_tokens=6, temperature=0)
    text = "".join(it)
    assert isinstance(text, str)
    seq = list(prompt)
    for t in it.tokens:
        assert t == int(np.argmax(m.logits(seq, all=False)))
        seq.append(t)
    assert 1 <= len(it.tokens) <= 6


def test_seeded_sampling_is_reproducible(model_path):
    m = rlx.llm.load(model_path)
    run = lambda seed: (lambda it: ("".join(it), it.tokens))(
        m.generate([5, 77], max_tokens=10, temperature=1.2, top_k=0, top_p=1.0, min_p=0.0, seed=seed))
    assert run(4) == run(4)


def test_errors(model_path, tmp_path):
    with pytest.raises(OSError):
        rlx.llm.load(str(tmp_path / "missing.gguf"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 3)
    with pytest.raises(OSError):
        rlx.llm.load(str(bad))
    m = rlx.llm.load(model_path)
    with pytest.raises(ValueError):
        m.logits([1, 100000])
