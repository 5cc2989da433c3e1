// The regex-free pre-tokenizer splits of byte-level BPE vocabularies, as state machines over
// code points. They reproduce llama.cpp's hand-written splits (unicode.cpp), which is what
// "same ids as llama.cpp" needs; those differ from the original regexes in corners (e.g. a
// lone space at the end of a text, number runs split 3+3+..., a letter run after any
// non-\r\n non-number character), and the state machines follow llama.cpp there.
//
// Character classes: \p{L} and \p{N} are Unicode general categories L* and N* (tables in
// tokenizer_unicode.cpp, Unicode 15.1 from Python's unicodedata); \s is the White_Space
// property; everything else (punctuation, symbols, marks, controls, unassigned) is "other".
// Combining marks are therefore not letters: "é" written e + U+0301 splits after the "e",
// exactly as llama.cpp does. The contractions' case-insensitivity uses ASCII lower-casing,
// which is all that can turn a code point into s/t/m/d/r/e/v/l.
#include <algorithm>
#include <string_view>

#include "tokenizer_internal.h"

namespace rlx::llm {
namespace detail {

namespace {

enum Cls : uint8_t { kNone = 0, kLetter, kNumber, kSpace, kOther };

Cls classify(uint32_t cp) {
  if (is_whitespace(cp)) return kSpace;
  if (is_letter(cp)) return kLetter;
  if (is_number(cp)) return kNumber;
  return kOther;
}

uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// One segment [b, e) of the text; positions outside it read as "nothing" (kNone / 0).
struct Seg {
  const std::vector<uint32_t>& cp;
  const std::vector<uint8_t>& cls;
  size_t b, e;
  size_t prev;
  std::vector<size_t>& out;

  Cls at(size_t i) const { return i < e ? Cls(cls[i]) : kNone; }
  uint32_t code(size_t i) const { return i < e ? cp[i] : 0xFFFFFFFFu; }
  void emit(size_t end) {
    if (end > prev) out.push_back(end - prev);
    prev = end;
  }
  // 's 't 'm 'd 're 've 'll at pos: the match length or 0.
  size_t contraction(size_t pos, bool fold) const {
    if (cp[pos] != '\'' || pos + 1 >= e) return 0;
    auto low = [&](uint32_t c) { return fold ? ascii_lower(c) : c; };
    uint32_t n1 = low(cp[pos + 1]);
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
    if (pos + 2 >= e) return 0;
    uint32_t n2 = low(cp[pos + 2]);
    if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
    return 0;
  }
  // Whitespace run at pos: \s+(?!\S) leaves the last space to the next word unless the
  // run ends the segment; a single space is its own word.
  size_t spaces(size_t pos) const {
    size_t n = 0;
    while (at(pos + n) == kSpace) ++n;
    if (n > 1 && pos + n < e) return pos + n - 1;
    return pos + std::max<size_t>(n, 1);
  }
};

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(Seg& s) {
  for (size_t pos = s.b; pos < s.e;) {
    if (size_t n = s.contraction(pos, false)) {
      s.emit(pos += n);
      continue;
    }
    const bool sp = s.cp[pos] == ' ';
    const Cls c2 = sp ? s.at(pos + 1) : s.at(pos);
    if (c2 == kLetter || c2 == kNumber || c2 == kOther) {
      pos += sp;
      while (s.at(pos) == c2) ++pos;
      s.emit(pos);
      continue;
    }
    s.emit(pos = s.spaces(pos));
  }
}

// Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen2: the same with \p{N} (single digits).
void split_llama3(Seg& s, size_t max_digits) {
  for (size_t pos = s.b; pos < s.e;) {
    if (size_t n = s.contraction(pos, true)) {
      s.emit(pos += n);
      continue;
    }
    const uint32_t c = s.cp[pos];
    const Cls cl = s.at(pos);
    if (c != '\r' && c != '\n' && cl != kNumber && (cl == kLetter || s.at(pos + 1) == kLetter)) {
      ++pos;
      while (s.at(pos) == kLetter) ++pos;
      s.emit(pos);
      continue;
    }
    if (cl == kNumber) {
      size_t start = pos;
      while (s.at(pos) == kNumber) {
        if (++pos - start >= max_digits) {
          s.emit(pos);
          start = pos;
        }
      }
      s.emit(pos);
      continue;
    }
    const Cls c2 = c == ' ' ? s.at(pos + 1) : cl;
    if (c2 == kOther) {
      pos += c == ' ';
      while (s.at(pos) == kOther) ++pos;
      while (s.code(pos) == '\r' || s.code(pos) == '\n') ++pos;
      s.emit(pos);
      continue;
    }
    size_t n = 0, last_nl = 0;
    for (; s.at(pos + n) == kSpace; ++n) {
      if (s.cp[pos + n] == '\r' || s.cp[pos + n] == '\n') last_nl = pos + n + 1;
    }
    s.emit(pos = last_nl ? last_nl : s.spaces(pos));
  }
}

// Splits every piece of `in` (lengths) where `pick` finds matches [b, e) within it: the
// matches and the text between them become pieces, as llama.cpp's regex splits do.
template <class Pick>
std::vector<size_t> resplit(const std::vector<size_t>& in, Pick&& pick) {
  std::vector<size_t> out;
  size_t at = 0;
  for (size_t len : in) {
    const size_t end = at + len;
    size_t from = at;
    for (size_t b = at, e; b < end; b = std::max(e, b + 1)) {
      e = pick(b, end);  // the end of a match at b, or b for none
      if (e == b) continue;
      if (b > from) out.push_back(b - from);
      out.push_back(e - b);
      from = e;
    }
    if (end > from) out.push_back(end - from);
    at = end;
  }
  return out;
}

// llama.cpp's default BPE split, four regexes in turn, each over the pieces of the one
// before: [\p{P}$+<=>^~|]+, GPT-2's, \p{N}+, then [0-9]{3} (ASCII digits in threes from
// the left of each run).
std::vector<size_t> split_default(const std::vector<uint32_t>& cps,
                                  const std::vector<uint8_t>& cls) {
  auto run_of = [&](auto in_class) {
    return [&, in_class](size_t b, size_t end) {
      while (b < end && in_class(cps[b])) ++b;
      return b;
    };
  };
  auto symbol = [](uint32_t c) {
    return is_punctuation(c) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
           c == '^' || c == '~' || c == '|';
  };
  std::vector<size_t> pieces;
  if (!cps.empty()) pieces.push_back(cps.size());
  pieces = resplit(pieces, run_of(symbol));
  std::vector<size_t> words;
  size_t at = 0;
  for (size_t len : pieces) {
    Seg s{cps, cls, at, at + len, at, words};
    split_gpt2(s);
    at += len;
  }
  words = resplit(words, run_of([](uint32_t c) { return is_number(c); }));
  auto digit = [](uint32_t c) { return c >= '0' && c <= '9'; };
  return resplit(words, [&](size_t b, size_t end) {
    return b + 3 <= end && digit(cps[b]) && digit(cps[b + 1]) && digit(cps[b + 2]) ? b + 3 : b;
  });
}

}  // namespace

bool is_whitespace(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static uint8_t range_class(uint32_t cp) {
  if (cp < 0x80) {  // fast path; ASCII punctuation: !"#%&'()*,-./:;?@[\]_{}
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return 1;
    if (cp >= '0' && cp <= '9') return 2;
    static constexpr std::string_view kPunct = "!\"#%&'()*,-./:;?@[\\]_{}";
    return kPunct.find(char(cp)) != std::string_view::npos ? 3 : 0;
  }
  const UnicodeRange* end = kUnicodeRanges + kUnicodeRangeCount;
  const UnicodeRange* it = std::upper_bound(
      kUnicodeRanges, end, cp, [](uint32_t v, const UnicodeRange& r) { return v < r.first; });
  if (it == kUnicodeRanges) return 0;
  --it;
  return cp <= it->last ? it->cls : 0;
}

bool is_letter(uint32_t cp) { return range_class(cp) == 1; }
bool is_number(uint32_t cp) { return range_class(cp) == 2; }
bool is_punctuation(uint32_t cp) { return range_class(cp) == 3; }

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const uint8_t b = p[i];
    const size_t len = b < 0x80 ? 1 : b < 0xC0 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF8 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xC0) == 0x80;
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
    out.push_back(cp <= 0x10FFFF ? cp : 0xFFFD);  // llama.cpp throws there; we replace
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

static bool printable_byte(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t next = 256;  // non-printable bytes take 256, 257, ... in byte order
    for (int b = 0; b < 256; ++b) append_utf8(t[b], printable_byte(b) ? uint32_t(b) : next++);
    return t;
  }();
  return table;
}

int unicode_to_byte(uint32_t cp) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) t[printable_byte(b) ? b : next++] = int16_t(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

std::vector<size_t> split_lengths(PreTokenizer pre, const std::vector<uint32_t>& cps) {
  std::vector<uint8_t> cls(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = classify(cps[i]);
  std::vector<size_t> out;
  auto run = [&](size_t b, size_t e) {
    Seg s{cps, cls, b, e, b, out};
    if (pre == PreTokenizer::llama3) {
      split_llama3(s, 3);
    } else if (pre == PreTokenizer::qwen2) {
      split_llama3(s, 1);
    } else {
      split_gpt2(s);
    }
  };
  if (pre == PreTokenizer::bpe_default) return split_default(cps, cls);
  if (pre == PreTokenizer::starcoder) {
    // A first split isolates every \p{N} code point; GPT-2's runs inside what is between.
    size_t b = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      if (cls[i] != kNumber) continue;
      if (i > b) run(b, i);
      out.push_back(1);
      b = i + 1;
    }
    if (b < cps.size()) run(b, cps.size());
  } else if (!cps.empty()) {
    run(0, cps.size());
  }
  return out;
}

}  // namespace detail

std::vector<std::string> pretokenize(PreTokenizer pre, std::string_view text) {
  const std::vector<uint32_t> cps = detail::decode_utf8(text);
  std::vector<std::string> words;
  size_t at = 0;
  for (size_t len : detail::split_lengths(pre, cps)) {
    std::string& w = words.emplace_back();
    for (size_t i = at; i < at + len; ++i) detail::append_utf8(w, cps[i]);
    at += len;
  }
  return words;
}

}  // namespace rlx::llm
