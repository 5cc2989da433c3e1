// The text printer. The grammar is described in include/rlx/text.h; parse_graph in
// text_parse.cpp reads back exactly what this writes.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "rlx/op.h"
#include "rlx/text.h"

namespace rlx {

namespace {

// Shortest text that reads back to the same value; always marked as a float (".0" is
// appended to integral values) so that the parser does not take it for an Int.
template <class F>
std::string format_float(F v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // "n": inf
  return s;
}

// f16 / bf16: the fewest digits that read back (as a float, then rounded) to the same bits.
std::string format_half(DType dt, uint16_t bits) {
  auto to_bits = [dt](float f) { return dt == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f); };
  float v = dt == DType::f16 ? f16_to_f32(bits) : bf16_to_f32(bits);
  if (std::isnan(v) || std::isinf(v)) return format_float(v);
  char buf[64];
  for (int digits = 1; digits <= 9; ++digits) {
    int n = std::snprintf(buf, sizeof buf, "%.*g", digits, double(v));
    float back = 0;
    std::from_chars(buf, buf + n, back);
    if (to_bits(back) == bits) {
      std::string s(buf, size_t(n));
      if (s.find_first_of(".e") == std::string::npos) s += ".0";
      return s;
    }
  }
  return format_float(v);  // not reached: 9 digits identify any float
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", u);
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string tensor_element(const Literal& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f64:
      return format_float(t.at(i));
    case DType::f32:
      return format_float(float(t.at(i)));  // exact: f32 fits in a double
    case DType::f16:
    case DType::bf16: {
      uint16_t bits;
      std::memcpy(&bits, t.bytes().data() + size_t(i) * 2, 2);
      return format_half(t.dtype(), bits);
    }
    case DType::boolean:
      return t.at(i) != 0 ? "true" : "false";
    case DType::string:
      return quote(t.string_at(i));
    case DType::c64:
    case DType::c128: {  // (re, im), each exact as its part's dtype prints
      ComplexValue z =
          load_complex(t.dtype(), t.bytes().data() + size_t(i) * dtype_size(t.dtype()));
      return t.dtype() == DType::c64
                 ? str_cat("(", format_float(float(z.re)), ", ", format_float(float(z.im)), ")")
                 : str_cat("(", format_float(z.re), ", ", format_float(z.im), ")");
    }
    default:
      return std::to_string(t.at_int(i));
  }
}

class Printer {
 public:
  explicit Printer(std::string& out) : out_(out) {}

  void graph(const Graph& g, int indent) {
    // Names: args by their name, every other value numbered in definition order.
    names_.assign(g.num_values(), "");
    for (const auto& a : g.args())
      if (owned(g, a.value)) names_[size_t(a.value.id)] = "%" + a.name;
    int next = 0;
    for (const auto& n : g.nodes())
      for (const auto& v : n.outputs)
        if (owned(g, v) && names_[size_t(v.id)].empty())
          names_[size_t(v.id)] = str_cat("%", next++);

    std::string pad(size_t(indent), ' ');
    out_ += "graph " + g.name() + "(";
    for (size_t i = 0; i < g.args().size(); ++i) {
      const Arg& a = g.args()[i];
      out_ += i ? ", " : "";
      out_ += a.kind == ArgKind::param ? "param %" : "%";
      out_ += a.name + ": " + type_of(g, a.value);
    }
    out_ += ") {\n";
    for (const auto& n : g.nodes()) node(g, n, indent + 2);
    out_ += pad + "  return";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const Output& o = g.outputs()[i];
      out_ += (i ? ", " : " ") + o.name + "=" + ref(g, o.value);
    }
    out_ += "\n" + pad + "}";
  }

 private:
  static bool owned(const Graph& g, Value v) {
    return v.graph == &g && v.id >= 0 && size_t(v.id) < g.num_values();
  }
  // Printing must not crash on malformed graphs (verify() reports them); bad handles are
  // written in a form the parser rejects.
  std::string ref(const Graph& g, Value v) const {
    if (!owned(g, v)) return str_cat("%<invalid ", v.id, ">");
    const std::string& s = names_[size_t(v.id)];
    return s.empty() ? str_cat("%<undefined ", v.id, ">") : s;
  }
  static std::string type_of(const Graph& g, Value v) {
    return owned(g, v) ? g.type(v).str() : "<invalid>";
  }

  void node(const Graph& g, const Node& n, int indent) {
    std::string pad(size_t(indent), ' ');
    out_ += pad;
    for (size_t i = 0; i < n.outputs.size(); ++i) out_ += (i ? ", " : "") + ref(g, n.outputs[i]);
    if (!n.outputs.empty()) out_ += " = ";
    out_ += n.op ? n.op->name : "<null>";
    out_ += "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) out_ += (i ? ", " : "") + ref(g, n.inputs[i]);
    out_ += ")";
    if (!n.attrs.empty()) {
      out_ += " {";
      bool first = true;
      for (const auto& [k, v] : n.attrs) {
        out_ += (first ? "" : ", ") + k + "=" + attr_str(v);
        first = false;
      }
      out_ += "}";
    }
    if (!n.subgraphs.empty()) {
      out_ += " [\n";
      for (size_t i = 0; i < n.subgraphs.size(); ++i) {
        out_ += pad + "  ";
        if (n.subgraphs[i]) {
          Printer sub(out_);
          sub.graph(*n.subgraphs[i], indent + 2);
        } else {
          out_ += "<null>";
        }
        out_ += i + 1 < n.subgraphs.size() ? ",\n" : "\n";
      }
      out_ += pad + "]";
    }
    if (!n.outputs.empty()) {
      out_ += " : ";
      for (size_t i = 0; i < n.outputs.size(); ++i)
        out_ += (i ? ", " : "") + type_of(g, n.outputs[i]);
    }
    out_ += "\n";
  }

  std::string& out_;
  std::vector<std::string> names_;
};

}  // namespace

std::string attr_str(const AttrValue& a) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          return format_float(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, IntList> || std::is_same_v<T, FloatList>) {
          std::string s = "[";
          for (size_t i = 0; i < x.size(); ++i) {
            s += i ? ", " : "";
            if constexpr (std::is_same_v<T, IntList>)
              s += std::to_string(x[i]);
            else
              s += format_float(x[i]);
          }
          return s + "]";
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string(dtype_name(x));
        } else if (is_quantized(x.dtype())) {  // the blocks as stored, in hex
          static constexpr char kHex[] = "0123456789abcdef";
          std::string s = "tensor<" + x.type().str() + ">\"";
          for (uint8_t b : x.bytes()) {
            s += kHex[b >> 4];
            s += kHex[b & 15];
          }
          return s + "\"";
        } else {  // Literal
          std::string s = "tensor<" + x.type().str() + ">[";
          for (int64_t i = 0, n = x.numel(); i < n; ++i)
            s += (i ? ", " : "") + tensor_element(x, i);
          return s + "]";
        }
      },
      a.variant());
}

std::string print_graph(const Graph& g) {
  std::string out;
  Printer(out).graph(g, 0);
  return out + "\n";
}

}  // namespace rlx
