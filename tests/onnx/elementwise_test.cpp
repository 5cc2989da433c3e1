// onnx.bit_shift: the ONNX-only elementwise op, through the public op and kernel API.
#include "frontend/onnx/ops/elementwise.h"

#include <gtest/gtest.h>

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

}  // namespace
