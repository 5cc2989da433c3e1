// Private parts of the tokenizer shared by tokenizer*.cpp and pretokenize.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rlx_llm/tokenizer.h"

namespace rlx::llm {

namespace detail {

// ---- Unicode (pretokenize.cpp, tokenizer_unicode.cpp)
struct UnicodeRange {
  uint32_t first, last;
  uint8_t cls;  // 1 = letter (L*), 2 = number (N*), 3 = punctuation (P*)
};
extern const UnicodeRange kUnicodeRanges[];
extern const size_t kUnicodeRangeCount;

bool is_letter(uint32_t cp);
bool is_number(uint32_t cp);
bool is_punctuation(uint32_t cp);
bool is_whitespace(uint32_t cp);  // the White_Space property, as llama.cpp's \s

// Byte length of the UTF-8 sequence a lead byte starts (1 for continuation/invalid bytes),
// as llama.cpp's unicode_len_utf8.
inline size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}
// Lenient decoding like llama.cpp's unicode_cpts_from_utf8: a malformed sequence becomes
// U+FFFD and decoding resumes at the next byte.
std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);

// Word boundaries (code point counts) of llama.cpp's split for `pre`.
std::vector<size_t> split_lengths(PreTokenizer pre, const std::vector<uint32_t>& cps);

// GPT-2's bytes_to_unicode: byte -> UTF-8 of its printable stand-in, and back.
const std::array<std::string, 256>& byte_to_unicode();
int unicode_to_byte(uint32_t cp);  // -1 when cp stands for no byte

}  // namespace detail

// Token attribute bits (llama.cpp's llama_token_attr).
enum Attr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

// Hash/equality that let unordered_map<std::string, …> look up a string_view without a copy.
struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StrMap = std::unordered_map<std::string, V, StrHash, std::equal_to<>>;

struct Tokenizer::Impl {
  struct Token {
    std::string text;
    float score = 0.f;
    uint32_t attr = kAttrNormal;
  };
  bool spm = true;
  PreTokenizer pre = PreTokenizer::none;
  bool ignore_merges = false;  // a whole pre-token that is in the vocabulary wins (Llama 3)
  bool clean_spaces = false;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1;

  std::vector<Token> tokens;
  StrMap<int32_t> to_id;                // later duplicates win, as in llama.cpp
  StrMap<int32_t> ranks;                // "left right" -> merge rank (first wins)
  std::vector<int32_t> specials;        // CONTROL/USER_DEFINED/UNKNOWN ids, longest text first
  std::vector<int32_t> eog;             // sorted
  std::vector<std::string> pieces;      // piece with render_special = true
  std::array<int32_t, 256> byte_ids{};  // SPM byte fallback token per byte (-1: none)

  int32_t lookup(std::string_view s) const {
    auto it = to_id.find(s);
    return it == to_id.end() ? -1 : it->second;
  }
  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;  // tokenizer_spm.cpp
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;  // tokenizer_bpe.cpp
  std::string make_piece(int32_t id) const;
};

}  // namespace rlx::llm
