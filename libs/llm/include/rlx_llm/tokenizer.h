// Tokenizer read from a GGUF file's metadata: the SentencePiece-style "llama" vocabulary
// (scores, byte fallback) and the byte-level BPE "gpt2" vocabulary (merges, the GPT-2 /
// Llama 3 / Qwen2 / StarCoder / default pre-tokenizer splits). Produces the same token ids as
// llama.cpp's tokenizer (src/llama-vocab.cpp) on the same file; tests/tokenizer_test.cpp checks
// that against ids llama.cpp wrote.
//
// The tokenizer does not read GGUF itself: the loader fills a VocabData. GGUF keys, the
// field each fills, and llama.cpp's behaviour when the key is absent:
//   tokenizer.ggml.model            -> model        required: "llama" (SPM) | "gpt2" (BPE)
//   tokenizer.ggml.pre              -> pre          BPE only; absent = "default"; an unknown
//                                                  split is NotSupported, see PreTokenizer below
//   tokenizer.ggml.tokens           -> tokens       required (string array)
//   tokenizer.ggml.scores           -> scores       f32 (or i32, converted) array; absent = 0
//   tokenizer.ggml.token_type       -> token_types  i32 array; absent = all NORMAL (1)
//   tokenizer.ggml.merges           -> merges       "left right" strings; required for gpt2
//   tokenizer.ggml.bos_token_id     -> bos          absent: llama 1, gpt2 11
//   tokenizer.ggml.eos_token_id     -> eos          absent: llama 2, gpt2 11
//   tokenizer.ggml.unknown_token_id -> unk          absent: llama 0, gpt2 none
//   tokenizer.ggml.padding_token_id -> pad          absent: none
//   tokenizer.ggml.eot_token_id     -> eot          absent: found by text (<|eot_id|>, <|im_end|>,
//   ...) tokenizer.ggml.eom_token_id     -> eom          absent: found by text (<|eom_id|>)
//   tokenizer.ggml.add_bos_token    -> add_bos      absent: llama true; gpt2 false, except
//                                                  true for the Llama 3 pre-tokenizer
//   tokenizer.ggml.add_eos_token    -> add_eos      absent: false
//   tokenizer.ggml.add_space_prefix -> add_space_prefix  absent: llama true, gpt2 false
// Ids are u32 in GGUF; an id outside the vocabulary is ignored (the default stays), as in
// llama.cpp. Leave a std::optional empty when its key is absent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::llm {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

struct VocabData {
  std::string model;  // "llama" | "gpt2"
  std::string pre;    // tokenizer.ggml.pre; empty = absent
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty or one per token
  std::vector<int32_t> token_types;  // empty or one per token
  std::vector<std::string> merges;   // gpt2 only
  std::optional<int32_t> bos, eos, unk, pad, eot, eom;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// The regex-free pre-tokenizer splits a "gpt2" vocabulary uses (tokenizer.ggml.pre names):
//   gpt2      "gpt-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", ...
//   llama3    "llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral", "lfm2", ...
//   qwen2     "qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan", "megrez", ...
//   starcoder "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"
//   bpe_default "default" (or no tokenizer.ggml.pre): llama.cpp's cascade of four splits
enum class PreTokenizer { none, gpt2, llama3, qwen2, starcoder, bpe_default };

class Tokenizer {
 public:
  // Validates the data (sizes, ids, merges); a malformed vocabulary is a ValueError, an
  // unknown model or pre-tokenizer is NotSupported.
  explicit Tokenizer(VocabData data);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // llama_tokenize: add_special adds BOS/EOS as add_bos/add_eos say; parse_special matches
  // CONTROL tokens' texts in `text` (USER_DEFINED tokens are matched always, as in
  // llama.cpp and Hugging Face tokenizers).
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = false) const;

  // llama_detokenize: pieces concatenated. With add_space_prefix the first piece loses one
  // leading space unless the ids start with BOS (llama.cpp keeps " Hello" after BOS).
  // remove_special drops a leading BOS / trailing EOS (when add_bos / add_eos);
  // render_special writes CONTROL/UNKNOWN tokens' texts (else they decode to nothing).
  // BPE vocabularies whose pre-tokenizer asks for it (gpt2, llama3) then apply llama.cpp's
  // clean-up of " ." " ," " ?" " !" " 's" ... (clean_spaces()).
  std::string decode(std::span<const int32_t> ids, bool remove_special = false,
                     bool render_special = false) const;

  // One token's bytes (llama_token_to_piece, no space stripping); may be a partial UTF-8
  // sequence (byte tokens). Out-of-range ids are a ValueError.
  std::string piece(int32_t id, bool render_special = false) const;
  const std::string& text(int32_t id) const;  // the vocabulary string
  TokenType type(int32_t id) const;
  float score(int32_t id) const;
  std::optional<int32_t> find(std::string_view text) const;  // exact vocabulary string

  bool is_eog(int32_t id) const;      // end of generation: EOS, EOT, EOM and <|im_end|>-like texts
  bool is_control(int32_t id) const;  // CONTROL (incl. texts llama.cpp promotes to CONTROL)
  const std::vector<int32_t>& eog_ids() const;

  // -1 when the vocabulary has none.
  int32_t bos() const;
  int32_t eos() const;
  int32_t eot() const;
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  bool clean_spaces() const;
  bool is_spm() const;  // "llama" vocabulary
  PreTokenizer pre_tokenizer() const;
  size_t size() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenizer for generation: push() returns only whole UTF-8 characters and
// keeps an incomplete trailing sequence (a character split over byte-fallback tokens) until
// the next push. The concatenated output equals the concatenation of piece(id) — the way
// llama.cpp prints generated tokens (no leading-space strip, no clean-up).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool render_special = false);
  std::string push(int32_t id);
  // Returns what is still held (an incomplete sequence, as raw bytes) and resets.
  std::string flush();
  size_t pending() const { return held_.size(); }

 private:
  const Tokenizer* tok_;
  bool render_special_;
  std::string held_;
};

// The pre-tokenizer's words for `text` (before byte-level encoding), as llama.cpp splits
// them; exposed for tests. Invalid UTF-8 bytes become U+FFFD first, as in llama.cpp.
std::vector<std::string> pretokenize(PreTokenizer pre, std::string_view text);

}  // namespace rlx::llm
