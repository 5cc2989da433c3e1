// Config and VocabData from a GGUF file's metadata, with the defaults llama.cpp uses
// where a key is optional.
#include <cmath>

#include "rlx/error.h"
#include "rlx_llm/llm.h"

namespace rlx::llm {

namespace {

// The rotary layout each architecture's converter leaves in the file: llama's q/k rows are
// permuted so adjacent pairs rotate; qwen2 keeps the Hugging Face halves (NeoX).
const char* rope_mode_of(const std::string& arch) {
  if (arch == "llama") return "pairs";
  if (arch == "qwen2") return "neox";
  return nullptr;
}

}  // namespace

Config Config::from_gguf(const gguf::File& f) {
  Config c;
  c.arch = f.get_string("general.architecture");
  const char* mode = rope_mode_of(c.arch);
  if (!mode)
    fail<NotSupported>("llm", "expected general.architecture 'llama' or 'qwen2', got '", c.arch,
                       "'");
  c.rope_mode = mode;
  c.name = f.get_string("general.name", "");
  const std::string a = c.arch + ".";
  c.dim = f.get_int(a + "embedding_length");
  c.n_layer = f.get_int(a + "block_count");
  c.n_head = f.get_int(a + "attention.head_count");
  c.n_kv_head = f.get_int(a + "attention.head_count_kv", c.n_head);
  c.ffn = f.get_int(a + "feed_forward_length");
  c.ctx_train = f.get_int(a + "context_length", 2048);
  if (c.dim <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_kv_head <= 0 || c.ffn <= 0)
    fail<ValueError>("llm",
                     "expected positive embedding_length, block_count, head counts and "
                     "feed_forward_length, got ",
                     c.dim, ", ", c.n_layer, ", ", c.n_head, "/", c.n_kv_head, ", ", c.ffn);
  if (c.n_head % c.n_kv_head != 0)
    fail<ValueError>("llm", "expected attention.head_count a multiple of head_count_kv, got ",
                     c.n_head, " and ", c.n_kv_head);
  c.head_dim = f.get_int(a + "attention.key_length", c.dim / c.n_head);
  if (f.get_int(a + "attention.value_length", c.head_dim) != c.head_dim)
    fail<NotSupported>("llm", "expected attention.value_length == key_length, got ",
                       f.get_int(a + "attention.value_length"), " and ", c.head_dim);
  c.n_rot = f.get_int(a + "rope.dimension_count", c.head_dim);
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2)
    fail<ValueError>("llm", "expected an even rope.dimension_count in (0, ", c.head_dim, "], got ",
                     c.n_rot);
  c.eps = f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_base = f.get_float(a + "rope.freq_base", 10000.0);
  std::string scaling = f.get_string(a + "rope.scaling.type", "none");
  double factor = f.get_float(a + "rope.scaling.factor", 0.0);
  if (scaling == "linear" && factor > 0) {
    c.rope_freq_scale = 1.0 / factor;
  } else if (f.has(a + "rope.scale_linear")) {  // older files
    c.rope_freq_scale = 1.0 / f.get_float(a + "rope.scale_linear");
  } else if (scaling != "none" && scaling != "linear") {
    fail<NotSupported>("llm",
                       "expected rope.scaling.type none or linear (llama3's scaling "
                       "comes as rope_freqs.weight), got '",
                       scaling, "'");
  }
  c.rope_freq_factors = f.find("rope_freqs.weight") != nullptr;
  c.tied_embeddings = f.find("output.weight") == nullptr;
  c.qkv_bias = f.find("blk.0.attn_q.bias") != nullptr;
  const gguf::TensorInfo* emb = f.find("token_embd.weight");
  if (!emb) fail<ValueError>("llm", "expected a tensor token_embd.weight, got none");
  c.vocab = emb->shape.size() == 2 ? emb->shape[0] : 0;
  if (emb->shape.size() != 2 || emb->shape[1] != c.dim)
    fail<ValueError>("llm", "expected token_embd.weight of shape [vocab, ", c.dim, "], got ",
                     emb->shape.size(), " dims");
  return c;
}

VocabData vocab_from_gguf(const gguf::File& f) {
  VocabData v;
  v.model = f.get_string("tokenizer.ggml.model");
  v.pre = f.get_string("tokenizer.ggml.pre", "");
  v.tokens = f.get_strings("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.scores"))
    for (double s : f.get_floats("tokenizer.ggml.scores")) v.scores.push_back(float(s));
  if (f.has("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_ints("tokenizer.ggml.token_type")) v.token_types.push_back(int32_t(t));
  if (f.has("tokenizer.ggml.merges")) v.merges = f.get_strings("tokenizer.ggml.merges");
  // Absent keys stay empty: the Tokenizer applies llama.cpp's per-vocabulary defaults.
  auto id = [&](const char* key, std::optional<int32_t>& out) {
    if (f.has(key)) out = int32_t(f.get_int(key));
  };
  id("tokenizer.ggml.bos_token_id", v.bos);
  id("tokenizer.ggml.eos_token_id", v.eos);
  id("tokenizer.ggml.unknown_token_id", v.unk);
  id("tokenizer.ggml.padding_token_id", v.pad);
  id("tokenizer.ggml.eot_token_id", v.eot);
  id("tokenizer.ggml.eom_token_id", v.eom);
  auto flag = [&](const char* key, std::optional<bool>& out) {
    if (f.has(key)) out = f.get_bool(key);
  };
  flag("tokenizer.ggml.add_bos_token", v.add_bos);
  flag("tokenizer.ggml.add_eos_token", v.add_eos);
  flag("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  return v;
}

}  // namespace rlx::llm
