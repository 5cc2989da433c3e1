// Block-quantized dtypes in the type system: names, sizes, the kinds they are not, graph
// args and the verifier asking for whole blocks, the text format, and Tensors of blocks
// (sizes, row views, copies).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "rlx/graph.h"
#include "rlx/quant.h"
#include "rlx/tensor.h"
#include "rlx/text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

TEST(QuantTypes, NamesSizesAndKinds) {
  struct Row {
    DType t;
    const char* name;
    int64_t block;
    size_t bytes;
  };
  for (Row r : {Row{DType::q4_0, "q4_0", 32, 18}, Row{DType::q4_1, "q4_1", 32, 20},
                Row{DType::q5_0, "q5_0", 32, 22}, Row{DType::q5_1, "q5_1", 32, 24},
                Row{DType::q8_0, "q8_0", 32, 34}, Row{DType::q2_k, "q2_k", 256, 84},
                Row{DType::q3_k, "q3_k", 256, 110}, Row{DType::q4_k, "q4_k", 256, 144},
                Row{DType::q5_k, "q5_k", 256, 176}, Row{DType::q6_k, "q6_k", 256, 210}}) {
    EXPECT_EQ(dtype_name(r.t), r.name);
    EXPECT_EQ(dtype_from_name(r.name), r.t);
    EXPECT_EQ(dtype_block(r.t), r.block);
    EXPECT_EQ(dtype_size(r.t), r.bytes);
    EXPECT_EQ(dtype_nbytes(r.t, 4 * r.block), 4 * r.bytes);
    EXPECT_TRUE(is_quantized(r.t));
    EXPECT_FALSE(is_float(r.t) || is_integer(r.t) || is_bool(r.t) || is_string(r.t)) << r.name;
    EXPECT_THROW(promote_types(r.t, DType::f32), TypeError);
  }
  for (DType t : kAllDTypes) {
    EXPECT_FALSE(is_quantized(t));
    EXPECT_EQ(dtype_block(t), 1);
    EXPECT_EQ(dtype_nbytes(t, 3), 3 * dtype_size(t));
  }
  EXPECT_EQ(std::size(kQuantDTypes), 10u);
}

TEST(QuantTypes, ArgsAndTheVerifierWantWholeBlocks) {
  Graph g;
  g.param("w", {DType::q4_k, {Dim(16), Dim(512)}});
  EXPECT_THROW(g.param("v", {DType::q4_k, {Dim(16), Dim(100)}}), ValueError);
  EXPECT_NO_THROW(g.input("x", {DType::q8_0, {Dim(4), Dim::sym("n")}}));  // checked when bound
  EXPECT_THROW(g.input("s", {DType::q8_0, {}}), ValueError);
  EXPECT_NO_THROW(verify(g));
  // A graph built around the check (as a malformed file would be) fails verification.
  Graph bad;
  bad.input("ok", {DType::f32, {Dim(2)}});
  bad.set_type(bad.value(0), {DType::q6_k, {Dim(3), Dim(64)}});
  try {
    verify(bad);
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 256"), std::string::npos) << e.what();
  }
}

TEST(QuantTypes, TextFormatRoundTrip) {
  Graph g("q");
  Value w = g.param("w", {DType::q5_k, {Dim(8), Dim(256)}});
  g.output(w, "y");
  std::string text = print_graph(g);
  EXPECT_NE(text.find("q5_k[8,256]"), std::string::npos) << text;
  auto back = parse_graph(text);
  EXPECT_EQ(back->type(back->args()[0].value), (TensorType{DType::q5_k, {Dim(8), Dim(256)}}));
}

TEST(QuantTypes, TensorsOfBlocks) {
  Tensor t = Tensor::empty(DType::q8_0, {3, 64});
  EXPECT_EQ(t.nbytes(), 3u * 2 * 34);
  auto* p = static_cast<uint8_t*>(t.data());
  std::iota(p, p + t.nbytes(), uint8_t(0));
  Tensor row = t.slice(0, 1, 2);
  EXPECT_EQ(static_cast<uint8_t*>(row.data()), p + 68);  // whole blocks, not elements
  Tensor c = t.slice(0, 1, 3).clone();
  EXPECT_EQ(c.nbytes(), 2u * 68);
  EXPECT_EQ(std::memcmp(c.data(), p + 68, 136), 0);
  Tensor every_other = t.slice(0, 0, 3, 2).clone();  // rows 0 and 2, copied row by row
  EXPECT_EQ(std::memcmp(every_other.data(), p, 68), 0);
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(every_other.data()) + 68, p + 136, 68), 0);
  EXPECT_THROW(t.to_doubles(), TypeError);
}

}  // namespace
}  // namespace rlx
