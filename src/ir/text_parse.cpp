// The text parser: reads what print_graph writes (grammar in include/rlx/text.h) and
// rebuilds the graph through the public builder API, so types are re-inferred and then
// checked against the written ones.
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "rlx/op.h"
#include "rlx/strings.h"
#include "rlx/text.h"

namespace rlx {

namespace {

constexpr int kMaxDepth = 64;  // subgraph nesting; deeper text is rejected, not recursed

enum class Tok { ident, number, value, string, punct, end };

struct Token {
  Tok kind = Tok::end;
  std::string text;  // ident/number/punct: as written; value: the name after '%';
                     // string: the decoded contents
  std::string src;   // the source text, for messages
  int line = 1, col = 1;

  bool is(char c) const { return kind == Tok::punct && text.size() == 1 && text[0] == c; }
  bool is_ident(std::string_view s) const { return kind == Tok::ident && text == s; }
};

[[noreturn]] void error_at(int line, int col, const std::string& msg) {
  throw ParseError(line, col, str_cat("[text:", line, ":", col, "] ", msg));
}
[[noreturn]] void error_at(const Token& t, const std::string& msg) { error_at(t.line, t.col, msg); }

std::string describe(const Token& t) {
  if (t.kind == Tok::end) return "end of input";
  std::string s = t.src.size() > 40 ? t.src.substr(0, 40) + "…" : t.src;
  return "'" + s + "'";
}

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
bool digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col_;
      size_t start = i_;
      if (i_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      char c = s_[i_];
      if (ident_start(c)) {
        t.kind = Tok::ident;
        while (i_ < s_.size() && ident_char(s_[i_])) advance();
        t.text = std::string(s_.substr(start, i_ - start));
      } else if (digit(c) || (c == '-' && (digit(peek(1)) || ident_start(peek(1))))) {
        t.kind = Tok::number;
        number(t);
        t.text = std::string(s_.substr(start, i_ - start));
      } else if (c == '%') {
        t.kind = Tok::value;
        advance();
        while (i_ < s_.size() && ident_char(s_[i_])) advance();
        t.text = std::string(s_.substr(start + 1, i_ - start - 1));
        if (t.text.empty())
          error_at(t, str_cat("expected a value name after '%', got ", next_char()));
      } else if (c == '"') {
        t.kind = Tok::string;
        string(t);
      } else if (std::strchr("(){}[]<>,:=?", c)) {
        t.kind = Tok::punct;
        t.text = std::string(1, c);
        advance();
      } else {
        error_at(t, str_cat("expected a token, got ", next_char()));
      }
      t.src = std::string(s_.substr(start, i_ - start));
      out.push_back(std::move(t));
    }
  }

 private:
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }
  std::string next_char() const {
    if (i_ >= s_.size()) return "end of input";
    auto u = static_cast<unsigned char>(s_[i_]);
    if (u < 0x20 || u >= 0x7f) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "byte 0x%02x", u);
      return hex;
    }
    return str_cat("'", s_[i_], "'");
  }
  void skip_space() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && peek(1) == '/') {  // comment to the end of the line
        while (i_ < s_.size() && s_[i_] != '\n') advance();
      } else {
        return;
      }
    }
  }
  // [-] digits [. digits] [e [+-] digits], or [-]inf / [-]nan.
  void number(const Token& t) {
    size_t start = i_;
    if (peek() == '-') advance();
    if (ident_start(peek())) {
      size_t w = i_;
      while (i_ < s_.size() && ident_char(s_[i_])) advance();
      std::string_view word = s_.substr(w, i_ - w);
      if (word != "inf" && word != "nan")
        error_at(t, str_cat("expected a number, got '", s_.substr(start, i_ - start), "'"));
      return;
    }
    while (digit(peek())) advance();
    if (peek() == '.') {
      advance();
      while (digit(peek())) advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (!digit(peek()))
        error_at(t, str_cat("expected a number, got '", s_.substr(start, i_ - start), "'"));
      while (digit(peek())) advance();
    }
    if (ident_char(peek())) {
      while (i_ < s_.size() && ident_char(s_[i_])) advance();
      error_at(t, str_cat("expected a number, got '", s_.substr(start, i_ - start), "'"));
    }
  }
  void string(Token& t) {
    advance();  // the opening quote
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n')
        error_at(t, str_cat("expected a closing '\"' of the string, got ",
                            i_ >= s_.size() ? "end of input" : "end of line"));
      char c = s_[i_];
      if (c == '"') {
        advance();
        return;
      }
      if (c != '\\') {
        t.text += c;
        advance();
        continue;
      }
      int el = line_, ec = col_;
      advance();
      char e = peek();
      auto hex = [](char h) {
        return digit(h)                 ? h - '0'
               : (h >= 'a' && h <= 'f') ? h - 'a' + 10
               : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                        : -1;
      };
      switch (e) {
        case 'n':
          t.text += '\n';
          break;
        case 't':
          t.text += '\t';
          break;
        case 'r':
          t.text += '\r';
          break;
        case '"':
          t.text += '"';
          break;
        case '\\':
          t.text += '\\';
          break;
        case 'x':
          if (hex(peek(1)) >= 0 && hex(peek(2)) >= 0) {
            t.text += char(hex(peek(1)) * 16 + hex(peek(2)));
            advance();
            advance();
            break;
          }
          [[fallthrough]];
        default:
          error_at(el, ec,
                   str_cat("expected an escape (\\n \\t \\r \\\" \\\\ \\xHH), got '\\",
                           i_ < s_.size() ? std::string(1, e) : "", "'"));
      }
      advance();
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
};

bool float_text(std::string_view s) {
  return s.find_first_of(".eE") != std::string_view::npos || s.find("inf") != s.npos ||
         s.find("nan") != s.npos;
}

// A number token (or the words inf / nan) as a floating-point value of type F.
template <class F>
F parse_float(const Token& t) {
  std::string_view s = t.text;
  bool neg = !s.empty() && s[0] == '-';
  std::string_view mag = neg ? s.substr(1) : s;
  constexpr F inf = std::numeric_limits<F>::infinity();
  if (mag == "inf") return neg ? -inf : inf;
  if (mag == "nan") return std::numeric_limits<F>::quiet_NaN();
  F v{};
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    error_at(t, str_cat("expected a number in range, got ", describe(t)));
  return v;
}

int64_t parse_int(const Token& t) {
  if (t.kind != Tok::number || float_text(t.text))
    error_at(t, str_cat("expected an integer, got ", describe(t)));
  int64_t v = 0;
  auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
    error_at(t, str_cat("expected an integer in the int64 range, got ", describe(t)));
  return v;
}

bool is_number_token(const Token& t) {
  return t.kind == Tok::number || t.is_ident("inf") || t.is_ident("nan");
}

template <class T>
void append(std::vector<uint8_t>& bytes, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  bytes.insert(bytes.end(), b, b + sizeof(T));
}

struct IntRange {
  DType type;
  int64_t lo, hi;
};
constexpr IntRange kIntRanges[] = {
    {DType::i8, INT8_MIN, INT8_MAX},    {DType::i16, INT16_MIN, INT16_MAX},
    {DType::i32, INT32_MIN, INT32_MAX}, {DType::i64, INT64_MIN, INT64_MAX},
    {DType::u8, 0, UINT8_MAX},
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const OpRegistry& ops) : toks_(std::move(toks)), ops_(ops) {}

  std::unique_ptr<Graph> top() {
    auto g = std::make_unique<Graph>(graph_name());
    graph_rest(*g, 0);
    if (peek().kind != Tok::end)
      error_at(peek(), str_cat("expected end of input, got ", describe(peek())));
    return g;
  }

 private:
  using Scope = std::map<std::string, Value, std::less<>>;

  const Token& peek(size_t k = 0) const {
    return toks_[std::min(pos_ + k, toks_.size() - 1)];  // the last token is the end
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(char c) {
    if (!peek().is(c)) return false;
    next();
    return true;
  }
  const Token& expect(char c) {
    if (!peek().is(c)) error_at(peek(), str_cat("expected '", c, "', got ", describe(peek())));
    return next();
  }
  const Token& expect(Tok kind, std::string_view what) {
    if (peek().kind != kind)
      error_at(peek(), str_cat("expected ", what, ", got ", describe(peek())));
    return next();
  }

  std::string graph_name() {
    if (!peek().is_ident("graph"))
      error_at(peek(), str_cat("expected 'graph', got ", describe(peek())));
    next();
    return expect(Tok::ident, "a graph name").text;
  }

  void graph_rest(Graph& g, int depth) {
    Scope scope;
    expect('(');
    if (!peek().is(')')) {
      do {
        bool is_param = peek().is_ident("param");
        if (is_param) next();
        const Token& name = expect(Tok::value, "an argument like %x");
        expect(':');
        TensorType type = parse_type();
        if (scope.count(name.text))
          error_at(name, str_cat("expected a new argument name, got duplicate '%", name.text, "'"));
        try {
          scope[name.text] = is_param ? g.param(name.text, type) : g.input(name.text, type);
        } catch (const Error& e) {
          error_at(name, e.what());
        }
      } while (accept(','));
    }
    expect(')');
    expect('{');
    for (;;) {
      const Token& t = peek();
      if (t.is('}')) break;
      if (t.is_ident("return") && !peek(1).is('(')) {
        parse_return(g, scope);
        break;
      }
      statement(g, scope, depth);
    }
    expect('}');
  }

  void parse_return(Graph& g, const Scope& scope) {
    next();  // 'return'
    if (peek().is('}')) return;
    std::set<std::string, std::less<>> names;
    do {
      const Token& name = expect(Tok::ident, "an output name");
      expect('=');
      Value v = lookup(scope);
      if (!names.insert(name.text).second)
        error_at(name, str_cat("expected a new output name, got duplicate '", name.text, "'"));
      try {
        g.output(v, name.text);
      } catch (const Error& e) {
        error_at(name, e.what());
      }
    } while (accept(','));
  }

  Value lookup(const Scope& scope) {
    const Token& t = expect(Tok::value, "a value like %0");
    auto it = scope.find(t.text);
    if (it == scope.end())
      error_at(t, str_cat("expected a defined value, got unknown '%", t.text, "'"));
    return it->second;
  }

  struct ParsedAttr {
    const Token* key;
    const Token* value;
    AttrValue v;
  };

  void statement(Graph& g, Scope& scope, int depth) {
    std::vector<const Token*> results;
    if (peek().kind == Tok::value) {
      do {
        const Token& r = next();
        if (r.kind != Tok::value)
          error_at(r, str_cat("expected a result like %0, got ", describe(r)));
        bool dup = scope.count(r.text) != 0;
        for (const Token* o : results) dup = dup || o->text == r.text;
        if (dup) error_at(r, str_cat("expected a new value name, got duplicate '%", r.text, "'"));
        results.push_back(&r);
      } while (accept(','));
      expect('=');
    }
    const Token& op_tok = peek();
    if (op_tok.kind != Tok::ident)
      error_at(op_tok, str_cat("expected ", results.empty() ? "a statement" : "an op name",
                               ", got ", describe(op_tok)));
    next();
    const OpDef* op = ops_.find(op_tok.text);
    if (!op) error_at(op_tok, str_cat("expected a registered op, got unknown '", op_tok.text, "'"));

    std::vector<Value> inputs;
    expect('(');
    if (!peek().is(')')) {
      do inputs.push_back(lookup(scope));
      while (accept(','));
    }
    expect(')');

    Attrs attrs;
    if (accept('{')) {
      if (!peek().is('}')) {
        do {
          ParsedAttr a = parse_attr();
          check_attr(*op, attrs, a);
          attrs.set(a.key->text, std::move(a.v));
        } while (accept(','));
      }
      expect('}');
    }

    std::vector<SubgraphPtr> subgraphs;
    if (peek().is('[')) {
      const Token& open = next();
      if (depth + 1 > kMaxDepth)
        error_at(open,
                 str_cat("expected subgraphs nested at most ", kMaxDepth, " deep, got deeper"));
      do {
        auto sg = std::make_shared<Graph>(graph_name());
        graph_rest(*sg, depth + 1);
        subgraphs.push_back(std::move(sg));
      } while (accept(','));
      expect(']');
    }

    std::vector<std::pair<const Token*, TensorType>> types;
    if (!results.empty()) {
      expect(':');
      do {
        const Token* at = &peek();
        types.emplace_back(at, parse_type());
      } while (accept(','));
    }

    std::vector<Value> outs;
    try {
      outs = g.apply(*op, std::move(inputs), std::move(attrs), std::move(subgraphs));
    } catch (const ParseError&) {
      throw;
    } catch (const Error& e) {
      error_at(op_tok, e.what());
    }
    if (outs.size() != results.size())
      error_at(op_tok, str_cat("expected ", outs.size(), " result names for '", op->name,
                               "' (its outputs), got ", results.size()));
    if (types.size() != outs.size())
      error_at(*types[std::min(outs.size(), types.size() - 1)].first,  // the first extra one
               str_cat("expected ", outs.size(), " result types, got ", types.size()));
    for (size_t i = 0; i < outs.size(); ++i) {
      const TensorType& inferred = g.type(outs[i]);
      if (types[i].second != inferred)
        error_at(*types[i].first,
                 str_cat("expected ", inferred.str(), " (the inferred type of result ", i,
                         "), got ", types[i].second.str()));
      scope[results[i]->text] = outs[i];
    }
  }

  // Rejects unknown keys and wrong kinds here, to point at the attribute itself.
  void check_attr(const OpDef& op, const Attrs& seen, const ParsedAttr& a) {
    const std::string& key = a.key->text;
    if (seen.has(key))
      error_at(*a.key, str_cat("expected a new attribute, got duplicate '", key, "'"));
    const AttrSpec* spec = op.find_attr(key);
    if (!spec) {
      std::string known;
      for (const auto& s : op.attrs) known += (known.empty() ? "" : ", ") + s.name;
      error_at(*a.key, str_cat("expected attributes of '", op.name, "' among {", known,
                               "}, got unknown '", key, "'"));
    }
    AttrKind k = a.v.kind();
    bool ok = k == spec->kind || (spec->kind == AttrKind::Float && k == AttrKind::Int) ||
              (spec->kind == AttrKind::Floats && k == AttrKind::Ints);
    if (!ok)
      error_at(*a.value, str_cat("expected attribute '", key, "' of kind ",
                                 attr_kind_name(spec->kind), ", got ", attr_kind_name(k)));
  }

  ParsedAttr parse_attr() {
    const Token& key = expect(Tok::ident, "an attribute name");
    expect('=');
    const Token& t = peek();
    return {&key, &t, attr_value()};
  }

  AttrValue attr_value() {
    const Token& t = peek();
    if (t.kind == Tok::number) {
      next();
      if (float_text(t.text)) return parse_float<double>(t);
      return parse_int(t);
    }
    if (t.kind == Tok::string) {
      next();
      return t.text;
    }
    if (t.is('[')) return list();
    if (t.kind == Tok::ident) {
      if (t.text == "true" || t.text == "false") {
        next();
        return t.text == "true";
      }
      if (t.text == "inf" || t.text == "nan") {
        next();
        return parse_float<double>(t);
      }
      if (t.text == "tensor") return tensor();
      if (auto d = dtype_from_name(t.text)) {
        next();
        return *d;
      }
    }
    error_at(t,
             str_cat("expected an attribute value (number, string, bool, dtype, list or tensor), "
                     "got ",
                     describe(t)));
  }

  // [numbers]: Ints unless an element is written as a float; [] is Ints.
  AttrValue list() {
    expect('[');
    std::vector<const Token*> elems;
    bool any_float = false;
    if (!peek().is(']')) {
      do {
        const Token& e = peek();
        if (!is_number_token(e)) error_at(e, str_cat("expected a number, got ", describe(e)));
        next();
        any_float = any_float || float_text(e.text);
        elems.push_back(&e);
      } while (accept(','));
    }
    expect(']');
    if (any_float) {
      FloatList out;
      for (const Token* e : elems) out.push_back(parse_float<double>(*e));
      return out;
    }
    IntList out;
    for (const Token* e : elems) out.push_back(parse_int(*e));
    return out;
  }

  // A block-quantized tensor's bytes as stored: a quoted string of 2 hex digits per byte.
  static Literal quantized(const TensorType& type, const Token& e) {
    if (e.kind != Tok::string)
      error_at(e, str_cat("expected the blocks of ", type.str(), " as a quoted hex string, got ",
                          describe(e)));
    std::vector<int64_t> sizes;
    for (const Dim& d : type.shape) sizes.push_back(d.value());
    const int64_t blk = dtype_block(type.dtype);
    if (sizes.empty() || sizes.back() % blk != 0)
      error_at(e, str_cat("expected a last dim that is a multiple of ", dtype_name(type.dtype),
                          "'s block of ", blk, ", got ", type.str()));
    int64_t n = 1;
    for (int64_t v : sizes) n *= v;
    const size_t want = dtype_nbytes(type.dtype, n);
    if (e.text.size() != 2 * want)
      error_at(e, str_cat("expected ", 2 * want, " hex digits (", want, " bytes) for ", type.str(),
                          ", got ", e.text.size()));
    auto nibble = [&](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      error_at(e, str_cat("expected hex digits, got '", std::string(1, c), "'"));
    };
    std::vector<uint8_t> bytes(want);
    for (size_t i = 0; i < want; ++i)
      bytes[i] = uint8_t(nibble(e.text[2 * i]) << 4 | nibble(e.text[2 * i + 1]));
    return Literal(type.dtype, std::move(sizes), bytes);
  }

  // tensor<TYPE>[elements…], row-major; a complex element is (re, im); a block-quantized
  // TYPE takes "hex bytes".
  AttrValue tensor() {
    next();  // 'tensor'
    expect('<');
    const Token& type_tok = peek();
    TensorType type = parse_type();
    if (!type.is_static())
      error_at(type_tok, str_cat("expected a static tensor type, got ", type.str()));
    expect('>');
    if (is_quantized(type.dtype)) return quantized(type, next());
    int64_t n = 1;
    for (const Dim& d : type.shape) {
      int64_t v = d.value();
      if (v != 0 && n > std::numeric_limits<int64_t>::max() / v)
        error_at(type_tok, str_cat("expected a tensor type of fewer elements, got ", type.str()));
      n *= v;
    }
    std::vector<uint8_t> bytes;
    int64_t count = 0;
    expect('[');
    if (!peek().is(']')) {
      do {
        if (count++ >= n)
          error_at(peek(), str_cat("expected ", n, " elements for ", type.str(), ", got more"));
        if (is_complex(type.dtype)) {  // (re, im)
          expect('(');
          element(real_of(type.dtype), next(), bytes);
          expect(',');
          element(real_of(type.dtype), next(), bytes);
          expect(')');
        } else {
          element(type.dtype, next(), bytes);
        }
      } while (accept(','));
    }
    const Token& close = expect(']');
    if (count != n)
      error_at(close, str_cat("expected ", n, " elements for ", type.str(), ", got ", count));
    std::vector<int64_t> sizes;
    for (const Dim& d : type.shape) sizes.push_back(d.value());
    return Literal(type.dtype, std::move(sizes), bytes);
  }

  static void element(DType dt, const Token& e, std::vector<uint8_t>& bytes) {
    if (is_string(dt)) {
      if (e.kind != Tok::string)
        error_at(e, str_cat("expected a quoted string, got ", describe(e)));
      return append(bytes, intern(e.text));
    }
    if (is_bool(dt)) {
      if (!e.is_ident("true") && !e.is_ident("false"))
        error_at(e, str_cat("expected true or false, got ", describe(e)));
      bytes.push_back(e.text == "true" ? 1 : 0);
      return;
    }
    if (!is_number_token(e)) error_at(e, str_cat("expected a number, got ", describe(e)));
    switch (dt) {
      case DType::f64:
        return append(bytes, parse_float<double>(e));
      case DType::f32:
        return append(bytes, parse_float<float>(e));
      case DType::f16:
        return append(bytes, f32_to_f16(parse_float<float>(e)));
      case DType::bf16:
        return append(bytes, f32_to_bf16(parse_float<float>(e)));
      default:
        break;
    }
    int64_t v = parse_int(e);
    for (const auto& r : kIntRanges) {
      if (r.type != dt) continue;
      if (v < r.lo || v > r.hi)
        error_at(e, str_cat("expected a ", dtype_name(dt), " value in [", r.lo, ", ", r.hi,
                            "], got ", v));
      switch (dt) {
        case DType::i8:
          return append(bytes, int8_t(v));
        case DType::i16:
          return append(bytes, int16_t(v));
        case DType::i32:
          return append(bytes, int32_t(v));
        case DType::u8:
          return append(bytes, uint8_t(v));
        default:
          return append(bytes, v);
      }
    }
  }

  // DTYPE[dim, …] with dims: sizes, symbols or ?.
  TensorType parse_type() {
    const Token& dt = peek();
    if (dt.kind != Tok::ident)
      error_at(dt, str_cat("expected a type like f32[2,3], got ", describe(dt)));
    next();
    auto d = dtype_from_name(dt.text);
    if (!d) error_at(dt, str_cat("expected a dtype (f32, i64, bool, …), got ", describe(dt)));
    TensorType t;
    t.dtype = *d;
    expect('[');
    if (!peek().is(']')) {
      do {
        const Token& e = next();
        if (e.kind == Tok::number && !float_text(e.text) && e.text[0] != '-') {
          t.shape.emplace_back(parse_int(e));
        } else if (e.kind == Tok::ident) {
          t.shape.push_back(Dim::sym(e.text));
        } else if (e.is('?')) {
          t.shape.push_back(Dim::unknown());
        } else {
          error_at(e, str_cat("expected a dim (a size >= 0, a symbol or ?), got ", describe(e)));
        }
      } while (accept(','));
    }
    expect(']');
    return t;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  const OpRegistry& ops_;
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text, const OpRegistry& ops) {
  return Parser(Lexer(text).run(), ops).top();
}

}  // namespace rlx
