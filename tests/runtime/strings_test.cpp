// String tensors: interned handles (equal strings, equal handles; "" is null), tensors and
// literals of strings, their text form in the IR, a graph that moves and compares them,
// and typed errors where a number is expected.
#include <gtest/gtest.h>

#include "rlx/rlx.h"

namespace rlx {
namespace {

TEST(Strings, EqualTextHasOneHandle) {
  std::string a = "naïve", b = "naï";
  b += "ve";
  EXPECT_EQ(intern(a), intern(b));
  EXPECT_NE(intern("x"), intern("y"));
  EXPECT_EQ(intern(""), nullptr);
  EXPECT_EQ(string_of(intern(a)), "naïve");
  EXPECT_EQ(string_of(nullptr), "");
}

TEST(Strings, TensorsAndLiteralsKeepTheirText) {
  std::vector<std::string> w{"a", "", "日本", "x\ny"};
  Tensor t = Tensor::from_strings(w, {2, 2});
  EXPECT_EQ(t.dtype(), DType::string);
  EXPECT_EQ(t.to_strings(), w);
  EXPECT_EQ(t.permute({1, 0}).to_strings(), (std::vector<std::string>{"a", "日本", "", "x\ny"}));
  EXPECT_EQ(Tensor::zeros(DType::string, {2}).to_strings(), (std::vector<std::string>{"", ""}));
  Literal l = t.to_literal();
  EXPECT_EQ(l.string_at(2), "日本");
  EXPECT_EQ(Tensor::from_literal(l).to_strings(), w);
  EXPECT_THROW(t.to_doubles(), TypeError);
  EXPECT_THROW(Tensor::full(DType::string, {1}, 1.0), TypeError);
  EXPECT_THROW(Tensor::from_vector<float>({1.f}, {1}).to_strings(), TypeError);
  EXPECT_THROW(Tensor::from_strings({"a"}, {2}), ValueError);
}

TEST(Strings, LiteralsRoundTripThroughTheText) {
  Graph g;
  Value x = g.input("x", {DType::string, {3}});
  Value k = g.constant(Literal::from_strings({"b", "", "q\"uote"}, {3}));
  g.output(g.apply1("eq", {x, k}), "same");
  std::string text = print_graph(g);
  EXPECT_NE(text.find("\"q\\\"uote\""), std::string::npos) << text;
  auto back = parse_graph(text);
  EXPECT_EQ(print_graph(*back), text);
  Tensor in = Tensor::from_strings({"b", "x", "q\"uote"}, {3});
  Tensor y = Session().compile(*back).run(std::vector<Tensor>{in})[0];
  EXPECT_EQ(y.to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

// Strings through reshape, transpose, concat, gather and select in one compiled graph (all
// passes on), and cast to and from numbers at its ends.
TEST(Strings, AGraphMovesAndConvertsThem) {
  Graph g;
  Value x = g.input("x", {DType::f32, {2, 3}});
  Value s = g.apply1("cast", {x}, {{"dtype", DType::string}});
  Value t = g.apply1("transpose", {s}, {{"perm", IntList{1, 0}}});
  Value c = g.apply1("concat", {t, t}, {{"axis", 0}});
  Value idx = g.constant(Literal::from<int64_t>({5, 0}));
  Value r = g.apply1("gather", {c, idx}, {{"axis", 0}});
  Value none = g.constant(Literal::from_strings({"none"}, {}));
  Value keep = g.apply1("ne", {r, g.constant(Literal::from_strings({"7"}, {}))});
  Value picked = g.apply1("select", {keep, r, none});
  g.output(picked, "words");
  g.output(g.apply1("cast", {r}, {{"dtype", DType::f64}}), "back");
  Tensor in = Tensor::from_vector<float>({1.5f, 2.f, -0.25f, 1e-5f, 3.f, 7.f}, {2, 3});
  for (int level : {0, 2}) {
    CompileOptions o;
    o.opt_level = level;
    TensorMap out = Session().compile(g, o).run({{"x", in}});
    // c = [[1.5, 1e-05], [2, 3], [-0.25, 7]] twice; rows 5 and 0.
    EXPECT_EQ(out.at("words").to_strings(),
              (std::vector<std::string>{"-0.25", "none", "1.5", "1e-05"}));
    EXPECT_EQ(out.at("back").to_vector<double>(), (std::vector<double>{-0.25, 7, 1.5, 1e-05}));
  }
}

TEST(Strings, ArithmeticOnStringsIsATypedError) {
  Graph g;
  Value a = g.input("a", {DType::string, {2}});
  EXPECT_THROW(
      {
        Graph h;
        Value b = h.input("b", {DType::string, {2}});
        h.output(h.apply1("add", {b, b}));
        Session().compile(h);
      },
      Error);
  Value f = g.input("f", {DType::f32, {2}});
  EXPECT_THROW(g.apply1("add", {a, f}), TypeError);
  EXPECT_THROW(promote_types(DType::string, DType::f32), TypeError);
}

}  // namespace
}  // namespace rlx
