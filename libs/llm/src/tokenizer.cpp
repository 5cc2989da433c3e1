// Tokenizer: the vocabulary, special tokens, encode/decode entry points and the streaming
// detokenizer. The per-model algorithms live in tokenizer_spm.cpp / tokenizer_bpe.cpp and the
// pre-tokenizer in pretokenize.cpp. Behaviour follows llama.cpp's llama_vocab (load,
// tokenize, token_to_piece, detokenize) so that ids agree on the same GGUF file.
#include <algorithm>
#include <cstring>

#include "rlx/error.h"
#include "tokenizer_internal.h"

namespace rlx::llm {

namespace {

constexpr const char* kWhere = "llm.tokenizer";

struct PreInfo {
  const char* name;
  PreTokenizer pre;
  bool clean_spaces;
  bool llama3_flags;  // ignore_merges and add_bos by default
};

// tokenizer.ggml.pre names llama.cpp maps onto the four splits implemented here.
constexpr PreInfo kPreTypes[] = {
    {"llama3", PreTokenizer::llama3, true, true},
    {"llama-v3", PreTokenizer::llama3, true, true},
    {"llama-bpe", PreTokenizer::llama3, true, true},
    {"falcon3", PreTokenizer::llama3, true, true},
    {"falcon-h1", PreTokenizer::llama3, true, true},
    {"pixtral", PreTokenizer::llama3, true, true},
    {"midm-2.0", PreTokenizer::llama3, true, true},
    {"lfm2", PreTokenizer::llama3, true, true},
    {"jina-v5-nano", PreTokenizer::llama3, true, true},
    {"dbrx", PreTokenizer::llama3, true, false},
    {"smaug-bpe", PreTokenizer::llama3, true, false},
    {"qwen2", PreTokenizer::qwen2, false, false},
    {"deepseek-r1-qwen", PreTokenizer::qwen2, false, false},
    {"kormo", PreTokenizer::qwen2, false, false},
    {"f2llmv2", PreTokenizer::qwen2, false, false},
    {"hunyuan", PreTokenizer::qwen2, false, false},
    {"solar-open", PreTokenizer::qwen2, false, false},
    {"megrez", PreTokenizer::qwen2, true, false},
    {"stablelm2", PreTokenizer::qwen2, true, false},
    {"gpt-2", PreTokenizer::gpt2, true, false},
    {"default", PreTokenizer::bpe_default, true, false},
    {"phi-2", PreTokenizer::gpt2, true, false},
    {"mpt", PreTokenizer::gpt2, true, false},
    {"olmo", PreTokenizer::gpt2, true, false},
    {"jais", PreTokenizer::gpt2, true, false},
    {"exaone4", PreTokenizer::gpt2, true, false},
    {"gigachat", PreTokenizer::gpt2, true, false},
    {"mellum", PreTokenizer::gpt2, true, false},
    {"a.x-4.0", PreTokenizer::gpt2, true, false},
    {"trillion", PreTokenizer::gpt2, false, false},
    {"granite-docling", PreTokenizer::gpt2, false, false},
    {"starcoder", PreTokenizer::starcoder, true, false},
    {"refact", PreTokenizer::starcoder, true, false},
    {"codeshell", PreTokenizer::starcoder, true, false},
    {"exaone", PreTokenizer::starcoder, true, false},
    {"minerva-7b", PreTokenizer::starcoder, true, false},
    {"mellum2", PreTokenizer::starcoder, true, false},
    {"command-r", PreTokenizer::starcoder, false, false},
    {"smollm", PreTokenizer::starcoder, false, false},
};

// Texts llama.cpp recognises when the file does not name the token (llama-vocab.cpp load()).
const char* const kEotTexts[] = {"<|eot_id|>",
                                 "<|im_end|>",
                                 "<|end|>",
                                 "<end_of_turn>",
                                 "<|endoftext|>",
                                 "<|end_of_text|>",
                                 "<EOT>",
                                 "_<EOT>",
                                 "[EOT]",
                                 "<\xEF\xBD\x9C"
                                 "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                 "<end_of_utterance>"};
const char* const kFimTexts[] = {  // promoted to CONTROL
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<PRE>",
    "\xE2\x96\x81<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<SUF>",
    "\xE2\x96\x81<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<MID>",
    "\xE2\x96\x81<MID>",
    "<|code_middle|>",
    "<|middle|>",
    "<\xEF\xBD\x9C"
    "fim\xE2\x96\x81"
    "begin\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C"
    "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C"
    "fim\xE2\x96\x81"
    "end\xEF\xBD\x9C>"};
const char* const kFimEogTexts[] = {  // FIM pad / repo / file separator: CONTROL and EOG
    "<|fim_pad|>",   "<fim-pad>",  "<fim_pad>", "<PAD>",      "[PAD]",       "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>",    "<reponame>", "<|file_sep|>"};
const char* const kEogTexts[] = {"<|eot_id|>",
                                 "<|im_end|>",
                                 "<|end|>",
                                 "<|return|>",
                                 "<|call|>",
                                 "<|flush|>",
                                 "<|calls|>",
                                 "<end_of_turn>",
                                 "<|endoftext|>",
                                 "</s>",
                                 "<|eom_id|>",
                                 "<EOT>",
                                 "_<EOT>",
                                 "[EOT]",
                                 "[EOS]",
                                 "<|end_of_text|>",
                                 "<end_of_utterance>",
                                 "<eos>",
                                 "<turn|>",
                                 "<|tool_response>",
                                 "<\xEF\xBD\x9C"
                                 "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                 "[e~["};

uint32_t attr_of_type(int32_t t) {
  switch (t) {
    case 1:
      return kAttrNormal;
    case 2:
      return kAttrUnknown;
    case 3:
      return kAttrControl;
    case 4:
      return kAttrUserDefined;
    case 5:
      return kAttrUnused;
    case 6:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t at = 0;
  for (size_t p; (p = s.find(from, at)) != std::string::npos; at = p + from.size()) {
    out.append(s, at, p - at);
    out += to;
  }
  out.append(s, at, std::string::npos);
  s.swap(out);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// llama.cpp's clean_spaces post-pass of detokenize, three in-place passes over the bytes.
void clean_spaces_pass(std::string& t) {
  auto pass = [&](auto&& step) {
    const size_t n = t.size();
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; ++i) step(i, total, n);
    t.resize(total);
  };
  // " ?" " !" " ." " ," lose the space
  pass([&](size_t& i, size_t& total, size_t) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    t[total++] = x;
  });
  // " ' " -> "'"
  pass([&](size_t& i, size_t& total, size_t n) {
    const char x = t[i];
    if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --total;
      t[++i] = '\0';
    }
    t[total++] = x;
  });
  // " 's" " 'm" " 're" " 've" lose the space
  pass([&](size_t& i, size_t& total, size_t n) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    t[total++] = x;
  });
}

}  // namespace

// ------------------------------------------------------------------------ construction

Tokenizer::Tokenizer(VocabData d) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const size_t n = d.tokens.size();
  if (d.model == "llama") {
    m.spm = true;
    m.bos = 1, m.eos = 2, m.unk = 0;
    m.add_space_prefix = true, m.add_bos = true;
  } else if (d.model == "gpt2") {
    m.spm = false;
    m.bos = 11, m.eos = 11;
    m.clean_spaces = true;
    const std::string pre = d.pre.empty() ? "default" : d.pre;
    const PreInfo* info = nullptr;
    for (const PreInfo& p : kPreTypes) {
      if (pre == p.name) info = &p;
    }
    if (!info) {
      fail<NotSupported>(kWhere, "expected a tokenizer.ggml.pre with a GPT-2, Llama 3, Qwen2, ",
                         "StarCoder or default split (e.g. \"gpt-2\", \"llama-bpe\", \"qwen2\", ",
                         "\"smollm\", \"default\"), got \"", pre, "\"");
    }
    m.pre = info->pre;
    m.clean_spaces = info->clean_spaces;
    m.ignore_merges = m.add_bos = info->llama3_flags;
  } else {
    fail<NotSupported>(kWhere, "expected tokenizer.ggml.model \"llama\" or \"gpt2\", got \"",
                       d.model, "\"");
  }
  if (n == 0) fail<ValueError>(kWhere, "expected a non-empty tokenizer.ggml.tokens, got 0 tokens");
  if (n > size_t(INT32_MAX)) fail<ValueError>(kWhere, "expected at most 2^31-1 tokens, got ", n);
  if (!d.scores.empty() && d.scores.size() < n) {
    fail<ValueError>(kWhere, "expected ", n, " tokenizer.ggml.scores, got ", d.scores.size());
  }
  if (!d.token_types.empty() && d.token_types.size() < n) {
    fail<ValueError>(kWhere, "expected ", n, " tokenizer.ggml.token_type values, got ",
                     d.token_types.size());
  }

  m.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Impl::Token& t = m.tokens[i];
    t.text = std::move(d.tokens[i]);
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";
    t.score = d.scores.empty() ? 0.f : d.scores[i];
    t.attr = d.token_types.empty() ? kAttrNormal : attr_of_type(d.token_types[i]);
    m.to_id[t.text] = int32_t(i);
  }
  if (!m.spm) {
    m.ranks.reserve(d.merges.size());
    for (size_t i = 0; i < d.merges.size(); ++i) {
      const std::string& w = d.merges[i];
      // llama.cpp splits at the first space after the first byte; no space: ("", "").
      const bool ok = w.size() > 1 && w.find(' ', 1) != std::string::npos;
      m.ranks.emplace(ok ? w : std::string(" "), int32_t(std::min<size_t>(i, INT32_MAX)));
    }
  }

  // Special ids: defaults outside the vocabulary are dropped; a file's id outside it is
  // ignored (the default stays), as llama.cpp does.
  auto set_id = [&](int32_t& id, const std::optional<int32_t>& v) {
    if (id >= int64_t(n)) id = -1;
    if (v && *v >= 0 && *v < int64_t(n)) id = *v;
  };
  set_id(m.bos, d.bos);
  set_id(m.eos, d.eos);
  set_id(m.unk, d.unk);
  set_id(m.pad, d.pad);
  set_id(m.eot, d.eot);
  set_id(m.eom, d.eom);
  if (d.add_bos) m.add_bos = *d.add_bos;
  if (d.add_eos) m.add_eos = *d.add_eos;
  if (d.add_space_prefix) m.add_space_prefix = *d.add_space_prefix;

  // Tokens llama.cpp recognises by text: EOT/EOM when the file names none, FIM markers and
  // end-of-generation texts; all of them become CONTROL.
  auto id_of = [&](const char* s) { return m.lookup(s); };
  auto promote = [&](int32_t id) { m.tokens[id].attr |= kAttrControl; };
  if (m.eot < 0) {
    // With several candidates llama.cpp takes the first in its unordered_map's iteration
    // order; to_id is built the same way (no reserve, inserts in id order), so under
    // libstdc++ the choice is the same (e.g. Llama 3's <|end_of_text|> over <|eot_id|>).
    for (const auto& entry : m.to_id) {  // (clang 14 captures no structured binding)
      const auto& text = entry.first;
      if (std::find_if(std::begin(kEotTexts), std::end(kEotTexts),
                       [&](const char* s) { return text == s; }) != std::end(kEotTexts)) {
        m.eot = entry.second;
        break;
      }
    }
  }
  if (m.eom < 0) m.eom = id_of("<|eom_id|>");
  for (int32_t id : {m.eot, m.eom}) {
    if (id >= 0) promote(id);
  }
  for (const char* s : kFimTexts) {
    if (int32_t id = id_of(s); id >= 0) promote(id);
  }
  std::vector<int32_t> eog;
  for (const char* s : kFimEogTexts) {
    if (int32_t id = id_of(s); id >= 0) promote(id), eog.push_back(id);
  }
  for (const char* s : kEogTexts) {
    if (int32_t id = id_of(s); id >= 0) promote(id), eog.push_back(id);
  }
  for (const char* s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (int32_t id = id_of(s); id >= 0) m.tokens[id].attr = kAttrUserDefined;  // gpt-oss
  }
  for (int32_t id : {m.eos, m.eot, m.eom}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  auto has = [&](const char* s) {
    const int32_t id = id_of(s);
    return id >= 0 && std::binary_search(eog.begin(), eog.end(), id);
  };
  auto drop = [&](const char* s, uint32_t attr) {
    const int32_t id = id_of(s);
    eog.erase(std::remove(eog.begin(), eog.end(), id), eog.end());
    m.tokens[id].attr = attr;
  };
  // gpt-oss / solar-open: "<|end|>" ends a message, not the generation.
  if (has("<|end|>") && has("<|call|>") && has("<|return|>")) drop("<|end|>", kAttrUserDefined);
  if (has("<|end|>") && has("<|calls|>") && has("<|flush|>")) drop("<|end|>", kAttrUserDefined);
  if (has("</s>") && has("<|tool_response>")) drop("</s>", kAttrNormal);  // gemma 4
  m.eog = std::move(eog);

  for (size_t i = 0; i < n; ++i) {
    if (m.tokens[i].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      m.specials.push_back(int32_t(i));
    }
  }
  std::stable_sort(m.specials.begin(), m.specials.end(), [&](int32_t a, int32_t b) {
    return m.tokens[a].text.size() > m.tokens[b].text.size();
  });

  if (m.spm) {
    static const char* kHex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      int32_t id = m.lookup(name);
      if (id < 0) id = m.lookup(std::string_view(reinterpret_cast<const char*>(&b), 1));
      m.byte_ids[b] = id;
    }
  }
  m.pieces.resize(n);
  for (size_t i = 0; i < n; ++i) m.pieces[i] = m.make_piece(int32_t(i));
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::string Tokenizer::Impl::make_piece(int32_t id) const {
  const Token& t = tokens[id];
  if (t.attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t.text;
  if (t.attr & kAttrNormal) {
    std::string s = t.text;
    if (spm) {
      replace_all(s, "\xE2\x96\x81", " ");
      return s;
    }
    std::string out;
    for (uint32_t cp : detail::decode_utf8(s)) {
      const int b = detail::unicode_to_byte(cp);
      if (b >= 0) {
        out += char(b);
        continue;
      }
      // llama.cpp's marker for a code point that stands for no byte
      std::string u;
      detail::append_utf8(u, cp);
      out += "[UNK_BYTE_0x";
      for (char c : u) {
        static const char* kHex = "0123456789abcdef";
        out += kHex[uint8_t(c) >> 4];
        out += kHex[uint8_t(c) & 15];
      }
      out += s + "]";
    }
    return out;
  }
  if (t.attr & kAttrByte) {  // "<0xXX>"
    const int hi = t.text.size() > 4 ? hex_digit(t.text[3]) : -1;
    const int lo = t.text.size() > 4 ? hex_digit(t.text[4]) : -1;
    if (hi < 0) return std::string();
    return std::string(1, char(lo < 0 ? hi : hi * 16 + lo));
  }
  return std::string();  // UNDEFINED / UNUSED render as nothing
}

// ------------------------------------------------------------------------ encode / decode

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  // Split the text around special tokens, longest texts first (llama.cpp's
  // tokenizer_st_partition). A fragment is raw text [off, off+len) or a token (len == 0).
  struct Frag {
    int32_t id;  // -1: raw text
    size_t off, len;
  };
  std::vector<Frag> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Frag> next;
  for (int32_t sid : m.specials) {
    const Impl::Token& st = m.tokens[sid];
    if (!parse_special && (st.attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string& s = st.text;
    next.clear();
    bool changed = false;
    for (const Frag& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.off, f.len);
      size_t at = 0;
      for (size_t p; (p = raw.find(s, at)) != std::string_view::npos; at = p + s.size()) {
        if (p > at) next.push_back({-1, f.off + at, p - at});
        next.push_back({sid, 0, 0});
        changed = true;
      }
      if (at < raw.size()) next.push_back({-1, f.off + at, raw.size() - at});
    }
    if (changed) frags.swap(next);
  }

  std::vector<int32_t> out;
  if (add_special && m.add_bos) {
    if (m.bos < 0) fail<ValueError>(kWhere, "expected a BOS token (add_bos is set), got none");
    out.push_back(m.bos);
  }
  bool prev_special = true;  // SPM: a text fragment at the start or after a token gets " "
  std::string buf;
  for (const Frag& f : frags) {
    if (f.id >= 0) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    if (m.spm) {
      buf.assign(m.add_space_prefix && prev_special ? " " : "");
      buf.append(text.substr(f.off, f.len));
      replace_all(buf, " ", "\xE2\x96\x81");
      m.encode_spm(buf, out);
    } else {
      m.encode_bpe(text.substr(f.off, f.len), out);
    }
    prev_special = false;
  }
  if (add_special && m.add_eos) {
    if (m.eos < 0) fail<ValueError>(kWhere, "expected an EOS token (add_eos is set), got none");
    out.push_back(m.eos);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool remove_special,
                              bool render_special) const {
  const Impl& m = *impl_;
  bool strip_space = m.add_space_prefix;
  if (remove_special && m.add_bos && !ids.empty() && ids.front() == m.bos) {
    strip_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && m.add_eos && !ids.empty() && ids.back() == m.eos) {
    ids = ids.subspan(0, ids.size() - 1);
  }
  std::string out;
  for (int32_t id : ids) {
    const std::string p = piece(id, render_special);
    // Only the first token can lose a space; a BOS (decoding to nothing) uses that up.
    out.append(p, strip_space && !p.empty() && p[0] == ' ' ? 1 : 0, std::string::npos);
    strip_space = false;
  }
  if (m.clean_spaces) clean_spaces_pass(out);
  return out;
}

std::string Tokenizer::piece(int32_t id, bool render_special) const {
  const Impl& m = *impl_;
  if (id < 0 || size_t(id) >= m.tokens.size()) {
    fail<ValueError>(kWhere, "expected a token id in [0, ", m.tokens.size(), "), got ", id);
  }
  if (!render_special && (m.tokens[id].attr & (kAttrControl | kAttrUnknown))) return {};
  return m.pieces[id];
}

const std::string& Tokenizer::text(int32_t id) const {
  if (id < 0 || size_t(id) >= size()) {
    fail<ValueError>(kWhere, "expected a token id in [0, ", size(), "), got ", id);
  }
  return impl_->tokens[id].text;
}

TokenType Tokenizer::type(int32_t id) const {
  text(id);  // range check
  const uint32_t a = impl_->tokens[id].attr;
  if (a & kAttrControl) return TokenType::control;
  if (a & kAttrUserDefined) return TokenType::user_defined;
  if (a & kAttrUnknown) return TokenType::unknown;
  if (a & kAttrByte) return TokenType::byte;
  if (a & kAttrUnused) return TokenType::unused;
  if (a & kAttrNormal) return TokenType::normal;
  return TokenType::undefined;
}

float Tokenizer::score(int32_t id) const {
  text(id);  // range check
  return impl_->tokens[id].score;
}

std::optional<int32_t> Tokenizer::find(std::string_view s) const {
  const int32_t id = impl_->lookup(s);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && size_t(id) < size() && (impl_->tokens[id].attr & kAttrControl);
}
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog; }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
int32_t Tokenizer::eot() const { return impl_->eot; }
int32_t Tokenizer::unk() const { return impl_->unk; }
int32_t Tokenizer::pad() const { return impl_->pad; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }
bool Tokenizer::clean_spaces() const { return impl_->clean_spaces; }
bool Tokenizer::is_spm() const { return impl_->spm; }
PreTokenizer Tokenizer::pre_tokenizer() const { return impl_->pre; }
size_t Tokenizer::size() const { return impl_->tokens.size(); }

// ------------------------------------------------------------------------ streaming

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool render_special)
    : tok_(&tok), render_special_(render_special) {}

std::string StreamDecoder::push(int32_t id) {
  held_ += tok_->piece(id, render_special_);
  // Hold back a trailing lead byte whose continuation bytes have not all arrived yet.
  size_t cut = held_.size();
  for (size_t k = 1; k <= 3 && k <= held_.size(); ++k) {
    const uint8_t b = uint8_t(held_[held_.size() - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = b >= 0xF0 && b < 0xF8 ? 4 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (need > k) cut = held_.size() - k;
    break;
  }
  std::string out = held_.substr(0, cut);
  held_.erase(0, cut);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace rlx::llm
