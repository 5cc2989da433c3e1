// ONNX-only text ops on string tensors (rlx/strings.h): onnx.string_normalizer.
#include "frontend/onnx/ops/text.h"

#include <locale.h>
#include <wctype.h>

#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "rlx/kernel.h"
#include "rlx/op.h"
#include "rlx/strings.h"

namespace rlx::onnx_import {

namespace {

// ---- case mapping -----------------------------------------------------------------------
// UTF-8 text is decoded, each code point mapped by the C library's Unicode tables (the
// C.UTF-8 locale, so the process's own locale does not matter), and encoded again. Bytes
// that are not valid UTF-8 pass through unchanged.

locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
  return loc;  // (locale_t)0 where the C library lacks it: ASCII mapping only
}

// The code point at s[i] and its length in bytes; length 0 for an invalid sequence.
std::pair<char32_t, size_t> decode(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  if (c < 0x80) return {c, 1};
  size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return {0, 0};
  char32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return {0, 0};
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  return {cp, n};
}

void encode(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

std::string change_case(std::string_view s, bool upper) {
  locale_t loc = utf8_locale();
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto [cp, n] = decode(s, i);
    if (n == 0) {  // not UTF-8: the byte as it is
      out += s[i++];
      continue;
    }
    char32_t m = cp;
    if (loc)
      m = char32_t(upper ? towupper_l(wint_t(cp), loc) : towlower_l(wint_t(cp), loc));
    else if (cp < 0x80)
      m = char32_t(upper ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp)
                         : (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    encode(m, out);
    i += n;
  }
  return out;
}

// ---- onnx.string_normalizer ---------------------------------------------------------------
// X string [C] or [1, C] -> Y: X without the stopwords (compared case-sensitively or not),
// then upper- or lower-cased (or not). When every element is a stopword Y is one empty
// string, [1] or [1, 1], as the ONNX spec has it.

std::vector<TensorType> infer_string_normalizer(const InferContext& ctx) {
  if (ctx.dtype(0) != DType::string)
    ctx.fail_type("expected a string tensor, got ", ctx.input(0).str());
  const Shape& x = ctx.shape(0);
  if (x.size() != 1 && !(x.size() == 2 && x[0].is(1)))
    ctx.fail("expected X of shape [C] or [1, C], got ", ctx.input(0).str());
  const Literal& stop = ctx.attrs().get_tensor("stopwords");
  if (stop.dtype() != DType::string || stop.shape().size() != 1)
    ctx.fail_type("expected stopwords as a 1-D string tensor, got ", stop.type().str());
  if (stop.numel() == 0) return {{DType::string, x}};
  Shape y = x;
  y.back() = Dim::unknown();  // how many remain depends on the data
  return {{DType::string, y}};
}

void string_normalizer_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                              std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  const std::string& action = a.get_string("case_change_action");
  bool sensitive = a.get_int("is_case_sensitive") != 0;
  const Literal& stop = a.get_tensor("stopwords");
  std::unordered_set<std::string> stopwords;
  for (int64_t i = 0; i < stop.numel(); ++i) {
    std::string_view w = stop.string_at(i);
    stopwords.insert(sensitive ? std::string(w) : change_case(w, false));
  }
  std::vector<std::string> kept;
  for (const std::string& s : in[0].to_strings()) {
    if (!stopwords.empty() && stopwords.count(sensitive ? s : change_case(s, false))) continue;
    kept.push_back(action == "UPPER"   ? change_case(s, true)
                   : action == "LOWER" ? change_case(s, false)
                                       : s);
  }
  if (kept.empty()) kept.emplace_back();
  std::vector<int64_t> shape{int64_t(kept.size())};
  if (in[0].rank() == 2) shape.insert(shape.begin(), 1);
  out[0] = Tensor::from_strings(kept, shape);
}

void register_string_normalizer() {
  OpDef d;
  d.name = "onnx.string_normalizer";
  d.traits = Trait::nondifferentiable;
  d.arity(1)
      .attr("case_change_action", AttrKind::String, std::string("NONE"), {"NONE", "LOWER", "UPPER"})
      .attr("is_case_sensitive", AttrKind::Int, AttrValue(0))
      .attr("stopwords", AttrKind::Tensor, Literal::from_strings({}, {0}))
      .attr("locale", AttrKind::String, std::string(""));
  d.doc =
      "ONNX StringNormalizer: strings [C] or [1, C] without the stopwords, upper- or "
      "lower-cased (Unicode case mapping of UTF-8 text).";
  d.infer = infer_string_normalizer;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.string_normalizer", DeviceKind::cpu, string_normalizer_kernel,
                               {}, KernelFlags{.makes_outputs = true});
}

}  // namespace

void register_text_onnx_ops() {
  static std::once_flag once;
  std::call_once(once, [] { register_string_normalizer(); });
}

}  // namespace rlx::onnx_import
