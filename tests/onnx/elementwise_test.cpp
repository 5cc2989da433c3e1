// Elementwise ONNX converters: onnx.bit_shift through the public op and kernel API, and
// one-node models for the conversions that are more than a rename (legacy broadcasting,
// Clip's two forms, mixed-dtype Pow) and for their typed errors.
#include "frontend/onnx/ops/elementwise.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "rlx/onnx.h"
#include "rlx/rlx.h"

namespace {

using rlx::DType;
using rlx::Tensor;
using rlx::TensorType;

std::vector<int64_t> shift(DType t, const char* dir, std::vector<double> x, std::vector<int64_t> xs,
                           std::vector<double> y, std::vector<int64_t> ys) {
  rlx::onnx_import::register_elementwise_onnx_ops();
  rlx::Graph g;
  auto a = g.input("x", {t, rlx::to_shape(xs)});
  auto b = g.input("y", {t, rlx::to_shape(ys)});
  g.output(g.apply1("onnx.bit_shift", {a, b}, {{"direction", dir}}), "z");
  rlx::CompiledGraph cg = rlx::Session(rlx::Device::cpu()).compile(g);
  auto out = cg.run({{"x", Tensor::from_doubles(t, xs, x)}, {"y", Tensor::from_doubles(t, ys, y)}});
  std::vector<int64_t> r;
  for (double v : out.at("z").to_doubles()) r.push_back(int64_t(v));
  return r;
}

TEST(OnnxBitShift, ShiftsLogicallyWithBroadcasting) {
  EXPECT_EQ(shift(DType::u8, "left", {16, 4, 1}, {3}, {1, 2, 3}, {3}),
            (std::vector<int64_t>{32, 16, 8}));
  EXPECT_EQ(shift(DType::u8, "left", {200, 1}, {2}, {1}, {1}), (std::vector<int64_t>{144, 2}));
  EXPECT_EQ(shift(DType::u8, "right", {16, 4, 1}, {3}, {1, 2, 8}, {3}),
            (std::vector<int64_t>{8, 1, 0}));
  // Signed storage is read as unsigned bits (ONNX UINT64 arrives as i64).
  EXPECT_EQ(shift(DType::i8, "right", {-128, 64}, {2, 1}, {7, 1}, {1, 2}),
            (std::vector<int64_t>{1, 64, 0, 32}));
  EXPECT_EQ(shift(DType::i64, "left", {1}, {1}, {63, 64}, {2}),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 0}));
}

TEST(OnnxBitShift, RejectsFloatsAndMixedDtypes) {
  rlx::onnx_import::register_elementwise_onnx_ops();
  rlx::Graph g;
  auto f = g.input("f", TensorType::parse("f32[3]"));
  auto i = g.input("i", TensorType::parse("i32[3]"));
  auto j = g.input("j", TensorType::parse("i64[3]"));
  auto k = g.input("k", TensorType::parse("i32[4]"));
  EXPECT_THROW(g.apply("onnx.bit_shift", {f, f}, {{"direction", "left"}}), rlx::TypeError);
  EXPECT_THROW(g.apply("onnx.bit_shift", {i, j}, {{"direction", "left"}}), rlx::TypeError);
  EXPECT_THROW(g.apply("onnx.bit_shift", {i, k}, {{"direction", "left"}}), rlx::ValueError);
  EXPECT_THROW(g.apply("onnx.bit_shift", {i, i}, {{"direction", "up"}}), rlx::ValueError);
  EXPECT_EQ(g.apply1("onnx.bit_shift", {i, i}, {{"direction", "right"}}).type().str(), "i32[3]");
}

// A model of one node `op` over inputs x0, x1… (elem types and shapes given) with output y.
struct OneNode {
  ::onnx::ModelProto m;
  ::onnx::NodeProto* node;

  OneNode(const std::string& op, int64_t opset,
          std::vector<std::pair<int, std::vector<int64_t>>> in, int out_elem) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    auto* g = m.mutable_graph();
    g->set_name("g");
    node = g->add_node();
    node->set_op_type(op);
    for (size_t i = 0; i < in.size(); ++i) {
      std::string name = "x" + std::to_string(i);
      node->add_input(name);
      auto* vi = g->add_input();
      vi->set_name(name);
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(in[i].first);
      auto* shape = tt->mutable_shape();  // present even when empty: a scalar
      for (int64_t d : in[i].second) shape->add_dim()->set_dim_value(d);
    }
    node->add_output("y");
    auto* vo = g->add_output();
    vo->set_name("y");
    vo->mutable_type()->mutable_tensor_type()->set_elem_type(out_elem);
  }
  OneNode& attr(const std::string& name, int64_t v) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  OneNode& attr(const std::string& name, float v) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
    return *this;
  }
  OneNode& attr(const std::string& name, const std::string& v) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
    return *this;
  }
  rlx::onnx::Model import() const {
    std::string bytes;
    m.SerializeToString(&bytes);
    return rlx::onnx::load_bytes(bytes, ".");
  }
  std::vector<double> run(std::vector<Tensor> in) const {
    rlx::onnx::Model model = import();
    return rlx::Session(rlx::Device::cpu()).compile(*model.graph).run(in)[0].to_doubles();
  }
};

constexpr int kF32 = ::onnx::TensorProto::FLOAT;
constexpr int kI32 = ::onnx::TensorProto::INT32;
constexpr int kU8 = ::onnx::TensorProto::UINT8;

TEST(OnnxElementwise, LegacyBroadcastAlignsBFromAxis) {
  // Opset 6: B of shape [3] lines up with A's axis 1 (NumPy would align it with axis 2).
  OneNode n("Add", 6, {{kF32, {2, 3, 2}}, {kF32, {3}}}, kF32);
  n.attr("broadcast", int64_t{1}).attr("axis", int64_t{1});
  auto y = n.run(
      {Tensor::full(DType::f32, {2, 3, 2}, 1), Tensor::from_vector<float>({10, 20, 30}, {3})});
  EXPECT_EQ(y, (std::vector<double>{11, 11, 21, 21, 31, 31, 11, 11, 21, 21, 31, 31}));
}

TEST(OnnxElementwise, ClipBoundsAsAttributesOrOptionalInputs) {
  auto x = Tensor::from_vector<float>({-2, 0.25f, 3}, {3});
  OneNode old("Clip", 6, {{kF32, {3}}}, kF32);
  old.attr("max", 1.0f);  // no min: open below
  EXPECT_EQ(old.run({x}), (std::vector<double>{-2, 0.25, 1}));
  OneNode lo_only("Clip", 13, {{kF32, {3}}, {kF32, {}}}, kF32);
  EXPECT_EQ(lo_only.run({x, Tensor::from_vector<float>({0}, {})}),
            (std::vector<double>{0, 0.25, 3}));
}

TEST(OnnxElementwise, PowWithAFloatExponentOfAnIntegerBaseTruncates) {
  OneNode n("Pow", 15, {{kI32, {3}}, {kF32, {3}}}, kI32);
  auto y = n.run({Tensor::from_vector<int32_t>({2, 3, 4}, {3}),
                  Tensor::from_vector<float>({0.5f, 2, 1.5f}, {3})});
  EXPECT_EQ(y, (std::vector<double>{1, 9, 8}));
}

TEST(OnnxElementwise, BitShiftAndModByAttribute) {
  OneNode shl("BitShift", 11, {{kU8, {3}}, {kU8, {3}}}, kU8);
  shl.attr("direction", std::string("LEFT"));
  EXPECT_EQ(shl.run({Tensor::from_vector<uint8_t>({1, 3, 255}, {3}),
                     Tensor::from_vector<uint8_t>({1, 2, 1}, {3})}),
            (std::vector<double>{2, 12, 254}));
  auto a = Tensor::from_vector<int32_t>({-7, 7}, {2}),
       b = Tensor::from_vector<int32_t>({3, -3}, {2});
  OneNode mod("Mod", 13, {{kI32, {2}}, {kI32, {2}}}, kI32);
  EXPECT_EQ(mod.run({a, b}), (std::vector<double>{2, -2}));
  OneNode fmod("Mod", 13, {{kI32, {2}}, {kI32, {2}}}, kI32);
  fmod.attr("fmod", int64_t{1});
  EXPECT_EQ(fmod.run({a, b}), (std::vector<double>{-1, 1}));
}

TEST(OnnxElementwise, CastOneNamesItsTargetType) {
  OneNode n("Cast", 1, {{kF32, {3}}}, kI32);
  n.attr("to", std::string("INT32"));
  EXPECT_EQ(n.run({Tensor::from_vector<float>({-1.5f, 0.5f, 2.5f}, {3})}),
            (std::vector<double>{-1, 0, 2}));
  OneNode bad("Cast", 1, {{kF32, {3}}}, kI32);
  bad.attr("to", std::string("INTEGER"));
  EXPECT_THROW(bad.import(), rlx::ValueError);
}

TEST(OnnxElementwise, BadAttributesAreTypedErrors) {
  OneNode shift("BitShift", 11, {{kU8, {3}}, {kU8, {3}}}, kU8);
  shift.attr("direction", std::string("UP"));
  EXPECT_THROW(shift.import(), rlx::ValueError);
  OneNode cast("Cast", 13, {{kF32, {3}}}, kF32);
  cast.attr("to", int64_t{::onnx::TensorProto::UNDEFINED});
  EXPECT_THROW(cast.import(), rlx::NotSupported);
  OneNode celu("Celu", 12, {{kF32, {3}}}, kF32);
  celu.attr("alpha", 0.0f);
  EXPECT_THROW(celu.import(), rlx::ValueError);
  OneNode axis("Mul", 6, {{kF32, {2, 3}}, {kF32, {2, 3}}}, kF32);
  axis.attr("broadcast", int64_t{1}).attr("axis", int64_t{1});
  EXPECT_THROW(axis.import(), rlx::ValueError);  // B does not fit from axis 1
}

}  // namespace
