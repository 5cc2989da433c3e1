#include "rlx/shape.h"

#include <cctype>

#include "rlx/error.h"

namespace rlx {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

Dim::Dim(int64_t size) : size_(size) {
  if (size < 0) fail<ValueError>("Dim", "expected a size >= 0, got ", size);
}

Dim Dim::sym(std::string name) {
  if (name != "?" && !is_identifier(name))
    fail<ValueError>("Dim", "expected a symbol name (identifier or '?'), got '", name, "'");
  Dim d;
  d.symbol_ = std::move(name);
  return d;
}

int64_t Dim::value() const {
  if (is_symbolic()) fail<ValueError>("Dim", "expected a static size, got symbol '", symbol_, "'");
  return size_;
}

std::string Dim::str() const { return is_static() ? std::to_string(size_) : symbol_; }

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += s[i].str();
  }
  return out + "]";
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(v[i]);
  }
  return out + "]";
}

bool is_static(const Shape& s) {
  for (const auto& d : s)
    if (!d.is_static()) return false;
  return true;
}

std::optional<int64_t> numel(const Shape& s) {
  int64_t n = 1;
  for (const auto& d : s) {
    if (!d.is_static()) return std::nullopt;
    n *= d.value();
  }
  return n;
}

std::vector<int64_t> static_sizes(const Shape& s, std::string_view where) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const auto& d : s) {
    if (!d.is_static()) fail<ValueError>(where, "expected a static shape, got ", shape_str(s));
    out.push_back(d.value());
  }
  return out;
}

// The sizes other than 0 must multiply within int64 too: an empty [0, 2^62, 4] has no
// element, but its strides (2^64) would overflow wherever they are worked out.
int64_t checked_numel(const std::vector<int64_t>& sizes, std::string_view where) {
  int64_t n = 1;
  bool overflow = false, empty = false;
  for (int64_t d : sizes) {
    if (d < 0) fail<ValueError>(where, "expected sizes >= 0, got ", ints_str(sizes));
    empty |= d == 0;
    if (d) overflow |= __builtin_mul_overflow(n, d, &n);
  }
  if (overflow)
    fail<ValueError>(where, "expected a size that fits in int64, got ", ints_str(sizes));
  return empty ? 0 : n;
}

Shape to_shape(const std::vector<int64_t>& sizes) { return Shape(sizes.begin(), sizes.end()); }

std::string TensorType::str() const { return str_cat(dtype_name(dtype), shape_str(shape)); }

TensorType TensorType::parse(std::string_view text) {
  auto bad = [&](std::string_view why) -> void {
    fail<ValueError>("TensorType", "expected a type like f32[batch,64], got '", text, "' (", why,
                     ")");
  };
  size_t lb = text.find('[');
  if (lb == std::string_view::npos || text.empty() || text.back() != ']') bad("missing [ ]");
  auto dt = dtype_from_name(text.substr(0, lb));
  if (!dt) bad("unknown dtype");
  TensorType t;
  t.dtype = *dt;
  std::string_view body = text.substr(lb + 1, text.size() - lb - 2);
  while (!body.empty()) {
    size_t comma = body.find(',');
    std::string_view tok = body.substr(0, comma);
    if (tok.empty()) bad("empty dim");
    if (std::isdigit(static_cast<unsigned char>(tok[0]))) {
      int64_t v = 0;
      for (char c : tok) {
        if (!std::isdigit(static_cast<unsigned char>(c))) bad("bad size");
        if (v > (INT64_MAX - 9) / 10) bad("size too large");
        v = v * 10 + (c - '0');
      }
      t.shape.emplace_back(v);
    } else {
      if (tok != "?" && !is_identifier(tok)) bad("bad symbol");
      t.shape.push_back(Dim::sym(std::string(tok)));
    }
    if (comma == std::string_view::npos) break;
    body.remove_prefix(comma + 1);
    if (body.empty()) bad("trailing comma");
  }
  return t;
}

}  // namespace rlx
