// The text format: print → parse → print is the identity on every graph we can build,
// parsed graphs verify, and parse errors point at the offending token.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_tables/infer_harness.h"
#include "op_tables/test_ops.h"

namespace rlx::testing {
namespace {

using Types = std::vector<TensorType>;

// Prints g, parses it, prints again; the texts must match and the parsed graph verify.
std::unique_ptr<Graph> round_trip(const Graph& g) {
  std::string text = print_graph(g);
  std::unique_ptr<Graph> back;
  try {
    back = parse_graph(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\nin:\n" << text;
    return nullptr;
  }
  EXPECT_EQ(print_graph(*back), text);
  EXPECT_NO_THROW(verify(*back)) << text;
  return back;
}

TEST(Text, RoundTripsEveryOkCase) {
  // round_trip also verifies the parsed graph; the verifier test owns the built one.
  EXPECT_GT(for_each_ok_case([](const InferCase&, Graph& g) { round_trip(g); }), 0);
}

TEST(Text, GoldenFormat) {
  register_test_ops();
  Graph g;
  auto x = g.input("x", TensorType::parse("f32[batch,4]"));
  auto w = g.param("w", TensorType::parse("f32[batch,4]"));
  auto a = g.apply1("test.add", {x, w});
  auto parts = g.apply("test.split", {a});
  auto c = g.constant(Literal::from<float>({1.5f, -std::numeric_limits<float>::infinity()}));
  g.apply("test.sink", {c});
  g.output(parts[0]);
  g.output(parts[1], "logits");
  const char* want =
      "graph main(%x: f32[batch,4], param %w: f32[batch,4]) {\n"
      "  %0 = test.add(%x, %w) : f32[batch,4]\n"
      "  %1, %2 = test.split(%0) {mode=\"a\", num=2} : f32[batch,4], f32[batch,4]\n"
      "  %3 = constant() {value=tensor<f32[2]>[1.5, -inf]} : f32[2]\n"
      "  test.sink(%3)\n"
      "  return out0=%1, logits=%2\n"
      "}\n";
  EXPECT_EQ(print_graph(g), want);
  round_trip(g);
}

TEST(Text, AllDTypesSymbolicDimsAndParams) {
  register_test_ops();
  Graph g("typed");
  std::vector<Value> vals;
  int i = 0;
  for (DType d : kAllDTypes) {
    Shape s = {Dim::sym("batch"), Dim::unknown(), Dim(0), Dim(1), Dim(7)};
    s.resize(size_t(i % 6));
    Value v = i % 2 ? g.param(str_cat("p", i), {d, s}) : g.input(str_cat("in_", i), {d, s});
    vals.push_back(v);
    ++i;
  }
  auto outs = g.apply("test.attrs", vals);
  for (auto v : outs) g.output(v);
  auto back = round_trip(g);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->args().size(), g.args().size());
  for (size_t k = 0; k < g.args().size(); ++k) {
    EXPECT_EQ(back->args()[k].kind, g.args()[k].kind);
    EXPECT_EQ(back->args()[k].name, g.args()[k].name);
    EXPECT_EQ(back->type(back->args()[k].value), g.type(g.args()[k].value));
  }
}

TEST(Text, EveryAttributeKind) {
  register_test_ops();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Attrs> cases = {
      {},  // all defaults
      {{"i", std::numeric_limits<int64_t>::min()}, {"f", -0.0}, {"s", ""}, {"b", true}},
      {{"i", std::numeric_limits<int64_t>::max()}, {"f", 0.1}, {"s", "a\"b\\c\n\t\r\x01\x7f é"}},
      {{"f", inf}, {"ints", IntList{-1, 0, 3}}, {"floats", FloatList{1.0, -2.5, 1e-300, 1e300}}},
      {{"f", -inf}, {"floats", FloatList{nan, inf, -inf, -0.0, 5e-324}}, {"mode", "b\"c"}},
      {{"f", nan}, {"floats", IntList{1, 2}}, {"t", Literal::from<int32_t>({1, 2})}},
      {{"f", 1e22}, {"i", -7}},
      {{"f", 123456789.0}},
      {{"f", 2}},  // an Int for a Float: converted by validate_attrs
  };
  for (DType d : kAllDTypes) cases.push_back({{"dt", d}});
  for (const auto& attrs : cases) {
    Graph g;
    auto x = g.input("x", TensorType::parse("f32[2]"));
    g.output(g.apply1("test.attrs", {x}, attrs));
    SCOPED_TRACE(print_graph(g));
    auto back = round_trip(g);
    ASSERT_TRUE(back);
    // Compare attributes exactly, except that NaN != NaN.
    const Attrs& a = g.nodes()[0].attrs;
    const Attrs& b = back->nodes()[0].attrs;
    EXPECT_EQ(a.encode() == b.encode() || print_graph(g).find("nan") != std::string::npos, true);
  }
}

// Literal of dtype d from doubles, with values that stress the printer.
std::vector<Literal> literals_of(DType d) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Literal> out;
  if (is_float(d)) {
    out.push_back(Literal::from_doubles(d, {2, 5},
                                        {0.0, -0.0, 1.5, -2.25, nan, inf, -inf, 0.1, 1e-7, 65504}));
    out.push_back(Literal::from_doubles(d, {3}, {1e-40, 3.0e38, 1.0 / 3.0}));
  } else if (is_bool(d)) {
    out.push_back(Literal::from_doubles(d, {2, 2}, {1, 0, 0, 1}));
  } else {
    out.push_back(Literal::from_doubles(d, {4}, {0, 1, -1, 100}));
  }
  switch (d) {
    case DType::i8:
      out.push_back(Literal::from<int8_t>({-128, 127}));
      break;
    case DType::i16:
      out.push_back(Literal::from<int16_t>({-32768, 32767}));
      break;
    case DType::i32:
      out.push_back(Literal::from<int32_t>({INT32_MIN, INT32_MAX}));
      break;
    case DType::i64:
      out.push_back(Literal::from<int64_t>({INT64_MIN, INT64_MAX}));
      break;
    case DType::u8:
      out.push_back(Literal::from<uint8_t>({0, 255}));
      break;
    case DType::f64:
      out.push_back(Literal::from<double>({5e-324, 1.7976931348623157e308}));
      break;
    case DType::f32:
      out.push_back(Literal::from<float>({1e-45f, 3.4028235e38f}));
      break;
    default:
      break;
  }
  out.push_back(Literal::full(d, {}, 1));
  out.push_back(Literal::full(d, {0, 3}, 1));
  return out;
}

TEST(Text, TensorConstantsOfEveryDType) {
  for (DType d : kAllDTypes) {
    for (const Literal& lit : literals_of(d)) {
      Graph g;
      g.output(g.constant(lit));
      SCOPED_TRACE(print_graph(g));
      auto back = round_trip(g);
      ASSERT_TRUE(back);
      const Literal& got = back->nodes()[0].attrs.get_tensor("value");
      ASSERT_EQ(got.type(), lit.type());
      for (int64_t k = 0; k < lit.numel(); ++k) {
        double a = lit.at(k), b = got.at(k);
        if (std::isnan(a)) {
          EXPECT_TRUE(std::isnan(b)) << k;
        } else {
          EXPECT_EQ(a, b) << k;
          EXPECT_EQ(std::signbit(a), std::signbit(b)) << k;
        }
      }
    }
  }
}

// Complex constants print as (re, im) pairs and parse back bit for bit (signed zeros,
// infinities and NaN included).
TEST(Text, ComplexConstantsRoundTripAsPairs) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> parts{1.5, -2, 0.1, -0.0, inf, std::nan(""), 1e-30, 3};
  for (DType d : kComplexDTypes) {
    std::vector<uint8_t> bytes(4 * dtype_size(d));
    for (size_t k = 0; k < 4; ++k)
      store_complex(d, bytes.data() + k * dtype_size(d), {parts[2 * k], parts[2 * k + 1]});
    Graph g;
    g.output(g.constant(Literal(d, {2, 2}, bytes)));
    SCOPED_TRACE(print_graph(g));
    EXPECT_NE(print_graph(g).find("(1.5, -2.0)"), std::string::npos);
    auto back = round_trip(g);
    ASSERT_TRUE(back);
    std::span<const uint8_t> got = back->nodes()[0].attrs.get_tensor("value").bytes();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin(), bytes.end()));
  }
  EXPECT_THROW(parse_graph("graph main() {\n  %0 = constant() {value=tensor<c64[1]>[1.5]} : "
                           "c64[1]\n  return y=%0\n}"),
               ValueError);  // a complex element is a pair
}

// Block-quantized constants keep their blocks: a quoted hex string of the stored bytes,
// parsed back bit for bit.
TEST(Text, QuantizedConstantsKeepTheirBlocks) {
  for (DType t : {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k}) {
    const int64_t k = 2 * dtype_block(t);
    std::vector<uint8_t> bytes(dtype_nbytes(t, 3 * k));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 37 + 11);
    Graph g;
    Value x = g.input("x", {DType::f32, {2, k}});
    g.output(op("quant_matmul", {x, g.constant(Literal(t, {3, k}, bytes))}));
    SCOPED_TRACE(dtype_name(t));
    auto back = round_trip(g);
    ASSERT_TRUE(back);
    const Literal& got = back->nodes()[0].attrs.get_tensor("value");
    EXPECT_EQ(got.type(), (TensorType{t, {3, k}}));
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), got.bytes().begin(), got.bytes().end()));
  }
}

TEST(Text, HalfPrecisionRoundTripsEveryBitPattern) {
  for (DType d : {DType::f16, DType::bf16}) {
    std::vector<uint8_t> bytes;
    for (uint32_t b = 0; b < 65536; ++b) {
      bytes.push_back(uint8_t(b));
      bytes.push_back(uint8_t(b >> 8));
    }
    Graph g;
    g.output(g.constant(Literal(d, {65536}, bytes)));
    auto back = round_trip(g);
    ASSERT_TRUE(back);
    auto got = back->nodes()[0].attrs.get_tensor("value").bytes();
    for (uint32_t b = 0; b < 65536; ++b) {
      float v = d == DType::f16 ? f16_to_f32(uint16_t(b)) : bf16_to_f32(uint16_t(b));
      if (std::isnan(v)) continue;  // NaN payloads are not kept
      ASSERT_EQ(got[2 * b] | (got[2 * b + 1] << 8), int(b)) << dtype_name(d) << " " << v;
    }
  }
}

TEST(Text, SpecialValuesPrintReadably) {
  Graph g;
  g.output(g.constant(Literal::from<double>({-0.0, 2.0, 0.1, 1e300})));
  g.output(g.constant(Literal::from<bool>({true, false})));
  std::string text = print_graph(g);
  EXPECT_NE(text.find("tensor<f64[4]>[-0.0, 2.0, 0.1, 1e+300]"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor<bool[2]>[true, false]"), std::string::npos) << text;
}

TEST(Text, MultiOutputZeroOutputAndNoOutputs) {
  register_test_ops();
  Graph g("multi");
  auto x = g.input("x", TensorType::parse("i32[n]"));
  auto three = g.apply("test.split", {x}, {{"num", 3}});
  auto none = g.apply("test.split", {x}, {{"num", 0}});
  EXPECT_TRUE(none.empty());
  g.apply("test.sink", {});
  g.apply("test.sink", {three[2], x, three[0]});
  round_trip(g);  // no outputs at all: "return" alone

  g.output(three[1], "second");
  g.output(x, "same_as_input");
  g.output(three[1], "again");
  round_trip(g);
}

// A while loop whose body holds a cond (subgraphs two deep) and a scan beside it.
std::unique_ptr<Graph> nested_graph() {
  auto ident = [](const std::string& name, const std::vector<std::string>& types) {
    auto g = std::make_shared<Graph>(name);
    for (size_t i = 0; i < types.size(); ++i)
      g->output(g->input(str_cat("a", i), TensorType::parse(types[i])));
    return g;
  };
  auto g = std::make_unique<Graph>("main");
  auto p = g->input("p", TensorType::parse("bool[]"));
  auto x = g->input("x", TensorType::parse("f32[batch,3]"));

  auto cond = std::make_shared<Graph>("cond");
  cond->output(cond->input("p", TensorType::parse("bool[]")), "keep_going");
  cond->input("x", TensorType::parse("f32[batch,3]"));

  auto body = std::make_shared<Graph>("body");
  auto bp = body->input("p", TensorType::parse("bool[]"));
  auto bx = body->input("x", TensorType::parse("f32[batch,3]"));
  auto inner = std::make_shared<Graph>("then");
  auto ix = inner->input("x", TensorType::parse("f32[batch,3]"));
  auto flag = inner->constant(Literal::from<bool>({false}, {}));
  (void)flag;
  inner->output(ix);
  auto branch = body->apply("cond", {bp, bx}, {}, {inner, ident("else", {"f32[batch,3]"})});
  auto not_p = body->constant(Literal::from<bool>({false}, {}));
  body->output(not_p, "p");
  body->output(branch[0], "x");

  auto loop = g->apply("while", {p, x}, {{"max_iter", 8}}, {cond, body});

  auto sbody = std::make_shared<Graph>("step");
  auto c = sbody->input("carry", TensorType::parse("f32[3]"));
  auto row = sbody->input("row", TensorType::parse("f32[3]"));
  sbody->output(row, "carry");
  sbody->output(c, "y");
  auto init = g->constant(Literal::from_doubles(DType::f32, {3}, {1, 2, 3}));
  auto scanned = g->apply("scan", {init, loop[1]}, {{"num_carry", 1}, {"reverse", true}}, {sbody});
  g->output(loop[1], "x");
  g->output(scanned[0], "last");
  g->output(scanned[1], "ys");
  return g;
}

TEST(Text, NestedSubgraphs) {
  auto g = nested_graph();
  ASSERT_NO_THROW(verify(*g));
  std::string text = print_graph(*g);
  // Nested graphs are indented two more spaces per level, numbering restarts inside.
  EXPECT_NE(text.find("  %0, %1 = while(%p, %x) {max_iter=8} [\n    graph cond(%p: bool[], "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n        graph then(%x: f32[batch,3]) {\n          %0 = constant()"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  ] : bool[], f32[batch,3]\n"), std::string::npos) << text;
  auto back = round_trip(*g);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->nodes()[0].subgraphs.size(), 2u);
  EXPECT_EQ(back->nodes()[0].subgraphs[1]->nodes()[0].subgraphs[0]->name(), "then");
}

TEST(Text, ParsesHandWrittenText) {
  register_test_ops();
  // Free spacing, comments, names instead of numbers for results.
  auto g = parse_graph(R"(
    // a comment
    graph f(%a: f32[2], param %b: f32[2]) {
      %sum = test.add(%a, %b) : f32[2]   // names need not be numbers
      %lo,%hi=test.split(%sum){num=2}:f32[2],f32[2]
      %k = test.attrs(%lo) {floats=[1, 2], f=3, dt=bf16} : f32[2]
      return y=%hi, z=%k
    })");
  ASSERT_TRUE(g);
  verify(*g);
  EXPECT_EQ(g->nodes().size(), 3u);
  EXPECT_EQ(g->nodes()[2].attrs.get_floats("floats"), (FloatList{1.0, 2.0}));
  EXPECT_EQ(g->nodes()[2].attrs.get_float("f"), 3.0);
  EXPECT_EQ(g->nodes()[2].attrs.get_dtype("dt"), DType::bf16);
  EXPECT_EQ(g->outputs()[1].name, "z");
  round_trip(*g);
}

// Where `needle` starts on line `line` (1-based) of text, as a 1-based column.
int col_of(const std::string& text, int line, const std::string& needle) {
  size_t start = 0;
  for (int i = 1; i < line; ++i) start = text.find('\n', start) + 1;
  size_t end = text.find('\n', start);
  size_t at = text.substr(start, end - start).find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return int(at) + 1;
}

struct ErrorCase {
  std::string text;
  int line;
  std::string at;       // the token the error points at (on `line`)
  std::string message;  // a fragment of the message
};

TEST(Text, ParseErrorsPointAtTheToken) {
  register_test_ops();
  const std::string head = "graph main(%x: f32[2], %y: f32[3]) {\n";
  std::vector<ErrorCase> cases = {
      {head + "  %0 = nope(%x) : f32[2]\n  return\n}", 2, "nope", "unknown 'nope'"},
      {head + "  %0 = test.add(%x, %z) : f32[2]\n  return\n}", 2, "%z", "unknown '%z'"},
      {head + "  return out0=%q\n}", 2, "%q", "expected a defined value"},
      {"graph main(%x: f32[2], %x: f32[2]) {\n}", 1, "%x: f32[2]) {", "duplicate '%x'"},
      {head + "  %0 = test.add(%x, %x) : f32[2]\n  %0 = test.add(%x, %x) : f32[2]\n}", 3, "%0",
       "duplicate '%0'"},
      {head + "  %x = test.add(%x, %x) : f32[2]\n}", 2, "%x", "duplicate '%x'"},
      {head + "  return a=%x, a=%y\n}", 2, "a=%y", "duplicate 'a'"},
      {head + "  %0 = test.add(%x, $x) : f32[2]\n}", 2, "$", "expected a token, got '$'"},
      {head + "  %0 = test.attrs(%x) {s=\"abc} : f32[2]\n}", 2, "\"abc", "expected a closing '\"'"},
      {head + "  %0 = test.attrs(%x) {s=\"a\\qb\"} : f32[2]\n}", 2, "\\q", "expected an escape"},
      {head + "  %0 = constant() {value=1} : f32[]\n}", 2, "1}", "of kind tensor, got int"},
      {head + "  %0 = constant() {value=tensor<q4_0[1, 32]>\"00\"} : q4_0[1, 32]\n}", 2, "\"00\"",
       "expected 36 hex digits (18 bytes) for q4_0[1,32], got 2"},
      {head + "  %0 = constant() {value=tensor<q4_0[1, 32]>[1]} : q4_0[1, 32]\n}", 2, "[1]",
       "as a quoted hex string"},
      {head + "  %0 = constant() {value=tensor<q4_0[1, 3]>\"00\"} : q4_0[1, 3]\n}", 2, "\"00\"",
       "a multiple of q4_0's block of 32"},
      {head + "  %0 = test.attrs(%x) {i=1.5} : f32[2]\n}", 2, "1.5", "of kind int, got float"},
      {head + "  %0 = test.attrs(%x) {dt=\"f32\"} : f32[2]\n}", 2, "\"f32\"",
       "of kind dtype, got string"},
      {head + "  %0 = test.attrs(%x) {bogus=1} : f32[2]\n}", 2, "bogus", "unknown 'bogus'"},
      {head + "  %0 = test.attrs(%x) {i=1, i=2} : f32[2]\n}", 2, "i=2", "duplicate 'i'"},
      {head + "  %0 = test.attrs(%x) {mode=\"z\"} : f32[2]\n}", 2, "test.attrs",
       "[test.attrs] expected attribute 'mode' to be one of"},
      {head + "  %0 = test.add(%x, %x) : f32[3]\n}", 2, "f32[3]",
       "expected f32[2] (the inferred type of result 0), got f32[3]"},
      {head + "  %0 = test.add(%x, %y) : f32[2]\n}", 2, "test.add",
       "[test.add] expected equal input types, got f32[2] and f32[3]"},
      {head + "  %0, %1 = test.add(%x, %x) : f32[2], f32[2]\n}", 2, "test.add",
       "expected 1 result names"},
      {head + "  %0 = test.add(%x, %x) : f32[2], i32[7]\n}", 2, "i32[7]",
       "expected 1 result types, got 2"},
      {head + "  %0 = test.add(%x, %x) : g32[2]\n}", 2, "g32", "expected a dtype"},
      {head + "  %0 = test.add(%x, %x) : f32[-2]\n}", 2, "-2", "expected a dim"},
      {head + "  %0 = test.add(%x, %x) : f32[2]\n", 3, "", "got end of input"},
      {head + "  return\n}\n}", 4, "}", "expected end of input, got '}'"},
      {head + "  %0 = constant() {value=tensor<f32[3]>[1.0, 2.0]} : f32[3]\n}", 2, "]}",
       "expected 3 elements for f32[3], got 2"},
      {head + "  %0 = constant() {value=tensor<i8[2]>[1, 300]} : i8[2]\n}", 2, "300",
       "expected a i8 value in [-128, 127], got 300"},
      {head + "  %0 = constant() {value=tensor<i32[1]>[1.5]} : i32[1]\n}", 2, "1.5",
       "expected an integer"},
      {head + "  %0 = constant() {value=tensor<bool[1]>[7]} : bool[1]\n}", 2, "7]",
       "expected true or false"},
      {head + "  %0 = constant() {value=tensor<f32[n]>[]} : f32[n]\n}", 2, "f32[n]>",
       "expected a static tensor type"},
      {head + "  %0 = test.attrs(%x) {i=99999999999999999999} : f32[2]\n}", 2, "999",
       "int64 range"},
      {head + "  %0 = test.attrs(%x) {ints=[1, x]} : f32[2]\n}", 2, "x]", "expected a number"},
      {head + "  %0 = test.attrs(%x) {i=12ab} : f32[2]\n}", 2, "12ab", "expected a number"},
      {head + "  %0 = cond(%x) [\n    graph then(%a: f32[2]) {\n      return r=%b\n    }\n  ]\n}",
       4, "%b", "unknown '%b'"},
      // A subgraph cannot see the values of the graph around it.
      {head + "  %0 = cond(%x) [\n    graph then() {\n      return r=%x\n    }\n  ]\n}", 4, "%x",
       "unknown '%x'"},
      {head + "  %0 = while(%x) [graph c(%a: f32[2]) {\n return o=%a\n }, graph b(%a: f32[2]) {"
              "\n return o=%a\n }] : f32[2]\n}",
       2, "while", "[while] expected subgraph 'cond' output of dtype bool, got f32[2]"},
      {"graph main(%x: f32[2]) {\n  return\n", 3, "", "got end of input"},
      {"graph main(%x: f32[2]) {\n  return out0=%x\n", 3, "", "expected '}', got end of input"},
      {"grph main() {}", 1, "grph", "expected 'graph'"},
      {"graph 1() {}", 1, "1", "expected a graph name"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    try {
      parse_graph(c.text);
      ADD_FAILURE() << "expected a ParseError";
    } catch (const ParseError& e) {
      std::string msg = e.what();
      int col = 0;
      if (c.at.empty()) {  // end of input: the column after the last line's text
        size_t nl = c.text.rfind('\n');
        col = int(c.text.size() - (nl == std::string::npos ? 0 : nl + 1)) + 1;
      } else {
        col = col_of(c.text, c.line, c.at);
      }
      EXPECT_EQ(e.line(), c.line) << msg;
      EXPECT_EQ(e.column(), col) << msg;
      EXPECT_EQ(msg.rfind(str_cat("[text:", c.line, ":", col, "] "), 0), 0u) << msg;
      EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected a ParseError, got " << e.what();
    }
  }
}

// Truncated and mutated text never crashes the parser: it parses or throws ParseError.
TEST(Text, DamagedTextGivesParseErrors) {
  register_test_ops();
  std::string text = print_graph(*nested_graph());
  auto attempt = [](const std::string& t) {
    try {
      auto g = parse_graph(t);
      verify(*g);
    } catch (const ParseError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected a ParseError, got " << e.what() << "\nin:\n" << t;
    }
  };
  for (size_t i = 0; i < text.size(); ++i) {
    attempt(text.substr(0, i));
    attempt(text.substr(0, i) + text.substr(i + 1));
    for (char c : std::string("%,:=[](){}<>\"-9x?\\\n"))
      attempt(text.substr(0, i) + c + text.substr(i + 1));
  }
}

TEST(Text, ParseErrorIsAValueError) {
  EXPECT_THROW(parse_graph(""), ValueError);
  EXPECT_THROW(parse_graph("graph"), ParseError);
}

TEST(Text, DeepNestingIsRejectedNotOverflowed) {
  register_test_ops();
  std::string text;
  for (int i = 0; i < 100; ++i) text += "graph g() {\n test.sink() [\n";
  try {
    parse_graph(text);
    ADD_FAILURE() << "expected a ParseError";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("nested at most 64 deep"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlx::testing
