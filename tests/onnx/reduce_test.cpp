// The reduce family's own pieces: the onnx.det op (LU kernel, dtypes, bad shapes) and
// Einsum's decomposition (diagonals, ellipsis broadcasting, three operands, bad input).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "rlx/onnx.h"
#include "rlx/session.h"

namespace rlx {
namespace {

std::vector<Tensor> run(const Graph& g, std::vector<Tensor> in) {
  return Session(Device::cpu()).compile(g).run(in);
}

TEST(OnnxDet, LuWithPivotingOnBatches) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f64, {2, 3, 3}});
  g.output(g.apply1("onnx.det", {x}));
  // A matrix that needs a row swap (zero pivot), and a singular one.
  std::vector<double> v = {0, 2, 1, 1, 0, 0, 0, 0, 3, 1, 2, 3, 2, 4, 6, 0, 1, 1};
  auto out = run(g, {Tensor::from_vector<double>(v, {2, 3, 3})});
  EXPECT_EQ(out[0].to_vector<double>(), (std::vector<double>{-6, 0}));
}

TEST(OnnxDet, RejectsNonSquareAndIntegerInput) {
  onnx::register_ops();
  Graph g;
  EXPECT_THROW(g.apply1("onnx.det", {g.input("a", {DType::f32, {2, 3}})}), ValueError);
  EXPECT_THROW(g.apply1("onnx.det", {g.input("b", {DType::f32, {3}})}), ValueError);
  EXPECT_THROW(g.apply1("onnx.det", {g.input("c", {DType::i32, {2, 2}})}), TypeError);
}

// An Einsum model over f32 inputs of the given shapes.
std::string einsum_model(const std::string& equation,
                         const std::vector<std::vector<int64_t>>& shapes) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(12);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type("Einsum");
  auto* a = n->add_attribute();
  a->set_name("equation");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(equation);
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto* vi = g->add_input();
    vi->set_name(std::string(1, char('a' + i)));
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : shapes[i]) tt->mutable_shape()->add_dim()->set_dim_value(d);
    n->add_input(vi->name());
  }
  n->add_output("y");
  g->add_output()->set_name("y");
  std::string s;
  m.SerializeToString(&s);
  return s;
}

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i);
  return v;
}

TEST(OnnxEinsum, TraceOfABatchAndThreeOperands) {
  // trace of each [2, 2] matrix: x[b, i, i] summed over i.
  onnx::Model m = onnx::load_bytes(einsum_model("bii->b", {{2, 2, 2}}), ".");
  auto out = run(*m.graph, {Tensor::from_vector<float>(iota(8), {2, 2, 2})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{3, 11}));

  // sum_j,k a[i, j] b[j, k] c[k]: a chain of two contractions.
  m = onnx::load_bytes(einsum_model("ij,jk,k->i", {{2, 3}, {3, 2}, {2}}), ".");
  out = run(*m.graph, {Tensor::from_vector<float>(iota(6), {2, 3}),
                       Tensor::from_vector<float>(iota(6), {3, 2}),
                       Tensor::from_vector<float>({1, -1}, {2})});
  // a b = [[10, 13], [28, 40]]; times [1, -1]: [-3, -12].
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{-3, -12}));
}

TEST(OnnxEinsum, EllipsisBroadcastsSizeOneDims) {
  onnx::Model m = onnx::load_bytes(einsum_model("...ij,...jk->...ik", {{1, 1, 2}, {3, 2, 1}}), ".");
  EXPECT_EQ(m.graph->outputs()[0].value.type().str(), "f32[3,1,1]");
  auto out = run(*m.graph, {Tensor::from_vector<float>({1, 2}, {1, 1, 2}),
                            Tensor::from_vector<float>(iota(6), {3, 2, 1})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 8, 14}));
}

TEST(OnnxEinsum, BadEquationsAreValueErrors) {
  EXPECT_THROW(onnx::load_bytes(einsum_model("ij->i", {{2, 3, 4}}), "."), ValueError);
  EXPECT_THROW(onnx::load_bytes(einsum_model("ij,jk->ik", {{2, 3}}), "."), ValueError);
  EXPECT_THROW(onnx::load_bytes(einsum_model("i1->i", {{2, 3}}), "."), ValueError);
  EXPECT_THROW(onnx::load_bytes(einsum_model("ij->iz", {{2, 3}}), "."), ValueError);
}

}  // namespace
}  // namespace rlx
