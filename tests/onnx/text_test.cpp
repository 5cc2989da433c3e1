// onnx.string_normalizer against its definition (the ONNX conformance cases run it too):
// stopwords dropped case-sensitively or not, Unicode case mapping of UTF-8 text, the
// all-dropped [1] / [1, 1] result, and typed errors for a numeric input or a bad shape.
#include "frontend/onnx/ops/text.h"

#include <gtest/gtest.h>

#include "rlx/graph.h"
#include "rlx/session.h"

namespace rlx {
namespace {

Tensor normalize(const Tensor& x, Attrs a) {
  onnx_import::register_text_onnx_ops();
  Graph g;
  Value in = g.input("x", x.type());
  g.output(g.apply1("onnx.string_normalizer", {in}, std::move(a)));
  return Session(Device::cpu()).compile(g).run(std::vector<Tensor>{x})[0];
}

Literal words(std::vector<std::string> w) {
  int64_t n = int64_t(w.size());
  return Literal::from_strings(w, {n});
}

TEST(OnnxTextOps, StopwordsAreDroppedThenTheCaseChanges) {
  Tensor x = Tensor::from_strings({"Monday", "tuesday", "monday", "Wednesday"}, {4});
  Tensor y = normalize(x, {{"stopwords", words({"monday"})}, {"case_change_action", "UPPER"}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(y.to_strings(), (std::vector<std::string>{"TUESDAY", "WEDNESDAY"}));
  y = normalize(x, {{"stopwords", words({"monday"})}, {"is_case_sensitive", 1}});
  EXPECT_EQ(y.to_strings(), (std::vector<std::string>{"Monday", "tuesday", "Wednesday"}));
}

TEST(OnnxTextOps, CaseMappingCoversUnicode) {
  Tensor x = Tensor::from_strings({"Straße", "ÉCOLE", "naïve", "日本"}, {1, 4});
  Tensor lo = normalize(x, {{"case_change_action", "LOWER"}});
  EXPECT_EQ(lo.shape(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(lo.to_strings(), (std::vector<std::string>{"straße", "école", "naïve", "日本"}));
  Tensor up = normalize(x, {{"case_change_action", "UPPER"}});
  // ß has no one-letter capital: per-code-point mapping keeps it (as ONNX Runtime does).
  EXPECT_EQ(up.to_strings(), (std::vector<std::string>{"STRAßE", "ÉCOLE", "NAÏVE", "日本"}));
}

TEST(OnnxTextOps, AllDroppedGivesOneEmptyString) {
  Tensor x = Tensor::from_strings({"a", "A"}, {1, 2});
  Tensor y = normalize(x, {{"stopwords", words({"a"})}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(y.to_strings(), (std::vector<std::string>{""}));
}

TEST(OnnxTextOps, BadInputIsATypedError) {
  onnx_import::register_text_onnx_ops();
  Graph g;
  Value f = g.input("f", {DType::f32, {3}});
  EXPECT_THROW(g.apply1("onnx.string_normalizer", {f}, {}), TypeError);
  Value s = g.input("s", {DType::string, {2, 3}});
  EXPECT_THROW(g.apply1("onnx.string_normalizer", {s}, {}), ValueError);
}

}  // namespace
}  // namespace rlx
