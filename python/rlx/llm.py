"""rlx.llm: decoder-only LLMs from GGUF files (llama, qwen2).

    m = rlx.llm.load("model.gguf", device="cpu")
    ids = m.tokenize("Once upon a time")
    logits = m.logits(ids)                      # ndarray [len(ids), vocab]
    for piece in m.generate("Once upon a time", max_tokens=64, temperature=0.8, top_p=0.95,
                            seed=0):
        print(piece, end="")
"""
from ._rlx import llm as _llm

Model = _llm.Model
Generation = _llm.Generation
load = _llm.load
