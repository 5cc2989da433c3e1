#include "runtime/npy_header.h"

#include <cstdio>
#include <limits>
#include <map>
#include <memory>

#include "rlx/error.h"
#include "rlx/shape.h"

namespace rlx::detail {

namespace {

// The Python literals a header may hold: enough to read any NumPy header and reject the
// ones rlx cannot load (structured dtypes are lists) with a clear message.
struct PyValue {
  enum Kind { str, boolean, none, integer, tuple, list } kind = none;
  std::string s;
  bool b = false;
  int64_t i = 0;
  std::vector<PyValue> items;
};

// Element kinds by dtype, in the order npy.h lists them.
struct DescrInfo {
  char kind;
  size_t size;
  DType dtype;
};
constexpr DescrInfo kDescrs[] = {
    {'f', 4, DType::f32},     {'f', 8, DType::f64},  {'f', 2, DType::f16}, {'i', 1, DType::i8},
    {'i', 2, DType::i16},     {'i', 4, DType::i32},  {'i', 8, DType::i64}, {'u', 1, DType::u8},
    {'b', 1, DType::boolean}, {'V', 2, DType::bf16}, {'c', 8, DType::c64}, {'c', 16, DType::c128},
};

std::string descr_of(DType t) {
  for (const auto& d : kDescrs)
    if (d.dtype == t) return str_cat(d.size == 1 ? '|' : '<', d.kind, d.size);
  fail<ValueError>("npy", "expected a dtype .npy can hold, got ", dtype_name(t));
}

std::string supported_descrs() {
  std::string s;
  for (const auto& d : kDescrs) s += str_cat(s.empty() ? "'" : ", '", descr_of(d.dtype), "'");
  return s;
}

class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : t_(text), name_(name) {}

  std::map<std::string, PyValue> dict() {
    ws();
    expect('{', "a dict literal");
    std::map<std::string, PyValue> out;
    while (true) {
      ws();
      if (eat('}')) break;
      PyValue key = value(0);
      if (key.kind != PyValue::str) error("a string key");
      ws();
      expect(':', "':'");
      out[key.s] = value(0);
      ws();
      if (eat('}')) break;
      expect(',', "',' or '}'");
    }
    // NumPy pads with spaces and ends with '\n'.
    ws();
    if (pos_ != t_.size()) error("the end of the header after the dict");
    return out;
  }

  [[noreturn]] void error(std::string_view expected) const {
    std::string_view rest = t_.substr(pos_, 24);
    fail<IoError>("npy", name_, ": expected ", expected, " in the header at offset ", pos_,
                  ", got ", rest.empty() ? std::string("the end") : str_cat('"', escape(rest), '"'),
                  " (header: \"", escape(t_.substr(0, 80)), t_.size() > 80 ? "..." : "", "\")");
  }

 private:
  static std::string escape(std::string_view s) {
    return escape_bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }
  void ws() {
    while (pos_ < t_.size() &&
           (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    if (pos_ < t_.size() && t_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c, std::string_view what) {
    if (!eat(c)) error(what);
  }
  bool word(std::string_view w) {
    if (t_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  PyValue value(int depth) {
    if (depth > 16) error("at most 16 levels of nesting");
    ws();
    PyValue v;
    if (pos_ >= t_.size()) error("a value");
    char c = t_[pos_];
    if (c == '\'' || c == '"') {
      v.kind = PyValue::str;
      v.s = string(c);
    } else if (word("True")) {
      v.kind = PyValue::boolean;
      v.b = true;
    } else if (word("False")) {
      v.kind = PyValue::boolean;
    } else if (word("None")) {
      v.kind = PyValue::none;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::integer;
      v.i = integer();
    } else if (c == '(' || c == '[') {
      v.kind = c == '(' ? PyValue::tuple : PyValue::list;
      v.items = sequence(c == '(' ? ')' : ']', depth);
    } else {
      error("a string, True, False, an integer or a tuple");
    }
    return v;
  }

  std::string string(char quote) {
    ++pos_;
    std::string s;
    while (pos_ < t_.size() && t_[pos_] != quote) {
      if (t_[pos_] == '\\' && pos_ + 1 < t_.size()) ++pos_;
      s += t_[pos_++];
    }
    expect(quote, "the closing quote of a string");
    return s;
  }

  int64_t integer() {
    bool neg = eat('-');
    if (pos_ >= t_.size() || t_[pos_] < '0' || t_[pos_] > '9') error("a digit");
    uint64_t v = 0;
    for (; pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9'; ++pos_) {
      v = v * 10 + uint64_t(t_[pos_] - '0');
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) error("an integer that fits int64");
    }
    eat('L');  // Python 2 longs, in files written by old NumPy
    return neg ? -int64_t(v) : int64_t(v);
  }

  std::vector<PyValue> sequence(char close, int depth) {
    ++pos_;
    std::vector<PyValue> items;
    while (true) {
      ws();
      if (eat(close)) break;
      items.push_back(value(depth + 1));
      ws();
      if (eat(close)) break;
      expect(',', close == ')' ? "',' or ')'" : "',' or ']'");
    }
    return items;
  }

  std::string_view t_;
  std::string_view name_;
  size_t pos_ = 0;
};

[[noreturn]] void bad(std::string_view name, const std::string& what) {
  fail<IoError>("npy", name, ": ", what);
}

using Dict = std::map<std::string, PyValue>;

[[noreturn]] void bad_keys(const Dict& d, std::string_view name) {
  std::string keys;
  for (const auto& [key, v] : d) keys += str_cat(keys.empty() ? "'" : ", '", key, "'");
  bad(name,
      str_cat("expected the header keys 'descr', 'fortran_order', 'shape', got {", keys, "}"));
}

const PyValue& key(const Dict& d, const std::string& k, std::string_view name) {
  auto it = d.find(k);
  if (it == d.end()) bad_keys(d, name);
  return it->second;
}

void parse_descr(NpyHeader& h, const PyValue& v, std::string_view name) {
  if (v.kind != PyValue::str)
    bad(name, str_cat("expected 'descr' to be a simple dtype string (one of ", supported_descrs(),
                      "), got a ", v.kind == PyValue::list ? "structured dtype" : "non-string"));
  h.descr = v.s;
  std::string_view d = v.s;
  char order = d.empty() ? '?' : d[0];
  if (order == '<' || order == '>' || order == '|' || order == '=') d.remove_prefix(1);
  bool ok = d.size() >= 2;
  size_t size = 0;
  for (size_t i = 1; ok && i < d.size(); ++i) {
    ok = d[i] >= '0' && d[i] <= '9' && size < 1000;
    size = size * 10 + size_t(d[i] - '0');
  }
  for (const auto& info : kDescrs)
    if (ok && info.kind == d[0] && info.size == size) {
      h.dtype = info.dtype;
      h.swap = order == '>' && size > 1;
      return;
    }
  bad(name,
      str_cat("expected 'descr' to be one of ", supported_descrs(),
              " (any byte order; rlx has no u16/u32/u64, and bf16 is '<V2'), got '", v.s, "'"));
}

void parse_shape(NpyHeader& h, const PyValue& v, std::string_view name) {
  bool ok = v.kind == PyValue::tuple;
  for (const auto& item : v.items) ok = ok && item.kind == PyValue::integer && item.i >= 0;
  if (!ok)
    bad(name,
        "expected 'shape' to be a tuple of non-negative integers such as (2, 3), got "
        "something else");
  for (const auto& item : v.items) h.shape.push_back(item.i);
  try {
    h.numel = checked_numel(h.shape, "npy");
  } catch (const ValueError&) {
    bad(name,
        str_cat("expected a shape whose element count fits int64, got ", shape_repr(h.shape)));
  }
}

}  // namespace

NpyHeader parse_npy_header(std::span<const uint8_t> bytes, std::string_view name) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  HeaderParser p(text, name);
  auto d = p.dict();
  NpyHeader h;
  parse_descr(h, key(d, "descr", name), name);
  const PyValue& fo = key(d, "fortran_order", name);
  if (fo.kind != PyValue::boolean)
    bad(name, "expected 'fortran_order' to be True or False, got something else");
  h.fortran = fo.b;
  parse_shape(h, key(d, "shape", name), name);
  if (d.size() != 3) bad_keys(d, name);  // NumPy too rejects extra keys
  return h;
}

std::string format_npy_header(DType dtype, const std::vector<int64_t>& shape) {
  return str_cat("{'descr': '", descr_of(dtype),
                 "', 'fortran_order': False, 'shape': ", shape_repr(shape), ", }");
}

std::string pad_npy_header(std::string dict, size_t preamble) {
  size_t used = preamble + dict.size() + 1;
  dict.append((64 - used % 64) % 64, ' ');
  dict += '\n';
  return dict;
}

std::string shape_repr(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += str_cat(i ? ", " : "", shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string escape_bytes(std::span<const uint8_t> b) {
  std::string s;
  for (uint8_t c : b) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      s += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      s += hex;
    }
  }
  return s;
}

}  // namespace rlx::detail
