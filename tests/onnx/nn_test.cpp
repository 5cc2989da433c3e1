// The nn family's onnx.* ops: onnx.resize (the modes the core resize lacks),
// onnx.grid_sample, onnx.roi_align, onnx.max_pool_indices, onnx.zero_extend.
#include <gtest/gtest.h>

#include <vector>

#include "rlx/onnx.h"
#include "rlx/session.h"

namespace rlx {
namespace {

std::vector<float> run1(const Graph& g, std::vector<Tensor> in) {
  return Session(Device::cpu()).compile(g).run(in)[0].to_vector<float>();
}

Tensor f32(std::vector<float> v, std::vector<int64_t> shape) {
  return Tensor::from_vector<float>(v, std::move(shape));
}

TEST(OnnxResize, NearestByIntegerScaleRepeats) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f32, {1, 1, 2, 2}});
  g.output(g.apply1("onnx.resize", {x},
                    {{"scales", FloatList{1, 1, 2, 2}},
                     {"coordinate_transformation_mode", "asymmetric"},
                     {"nearest_mode", "floor"}}));
  EXPECT_EQ(run1(g, {f32({1, 2, 3, 4}, {1, 1, 2, 2})}),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(OnnxResize, CropOutsideTheInputExtrapolates) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f32, {1, 3}});
  // roi [0, 1.5] along the last dim samples at 0, 1.5 and 3: the last is outside.
  g.output(g.apply1("onnx.resize", {x},
                    {{"sizes", IntList{1, 3}},
                     {"scales", FloatList{1, 1}},
                     {"roi", FloatList{0, 0, 1, 1.5}},
                     {"mode", "linear"},
                     {"coordinate_transformation_mode", "tf_crop_and_resize"},
                     {"extrapolation_value", 7.0}}));
  EXPECT_EQ(run1(g, {f32({0, 10, 20}, {1, 3})}), (std::vector<float>{0, 15, 7}));
}

TEST(OnnxResize, AntialiasedLinearAveragesAConstant) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f32, {1, 8}});
  g.output(g.apply1("onnx.resize", {x},
                    {{"scales", FloatList{1, 0.25}}, {"mode", "linear"}, {"antialias", true}}));
  EXPECT_EQ(run1(g, {f32(std::vector<float>(8, 3.0f), {1, 8})}), (std::vector<float>{3, 3}));
}

TEST(OnnxResize, RejectsScalesOfTheWrongLength) {
  onnx::register_ops();
  Graph g;
  EXPECT_THROW(
      g.apply1("onnx.resize", {g.input("x", {DType::f32, {2, 2}})}, {{"scales", FloatList{2}}}),
      ValueError);
}

TEST(OnnxGridSample, IdentityGridReproducesTheInput) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f32, {1, 1, 2, 2}});
  Value grid = g.input("grid", {DType::f32, {1, 2, 2, 2}});
  g.output(g.apply1("onnx.grid_sample", {x, grid}, {{"align_corners", true}}));
  // (x, y) per output point: the four corners.
  Tensor gr = f32({-1, -1, 1, -1, -1, 1, 1, 1}, {1, 2, 2, 2});
  EXPECT_EQ(run1(g, {f32({1, 2, 3, 4}, {1, 1, 2, 2}), gr}), (std::vector<float>{1, 2, 3, 4}));
}

TEST(OnnxRoiAlign, AveragesAConstantImage) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f32, {1, 1, 4, 4}});
  Value rois = g.input("rois", {DType::f32, {1, 4}});
  Value idx = g.input("idx", {DType::i64, {1}});
  g.output(g.apply1("onnx.roi_align", {x, rois, idx},
                    {{"output_height", int64_t(2)}, {"output_width", int64_t(2)}}));
  auto y = run1(g, {f32(std::vector<float>(16, 5.0f), {1, 1, 4, 4}), f32({0.5, 0.5, 3, 3}, {1, 4}),
                    Tensor::from_vector<int64_t>({0}, {1})});
  EXPECT_EQ(y, (std::vector<float>(4, 5.0f)));
}

TEST(OnnxMaxPoolIndices, RowAndColumnMajor) {
  onnx::register_ops();
  for (int64_t order : {0, 1}) {
    Graph g;
    Value x = g.input("x", {DType::f32, {1, 1, 2, 3}});
    g.output(g.apply1("onnx.max_pool_indices", {x},
                      {{"kernel_shape", IntList{2, 2}}, {"storage_order", order}}));
    std::vector<Tensor> in{f32({1, 9, 2, 3, 4, 10}, {1, 1, 2, 3})};
    auto y = Session(Device::cpu()).compile(g).run(in)[0].to_vector<int64_t>();
    // Maxima at (0, 1) and (1, 2): row-major 1 and 5, column-major 2 and 5.
    EXPECT_EQ(y, order == 0 ? (std::vector<int64_t>{1, 5}) : (std::vector<int64_t>{2, 5}));
  }
}

TEST(OnnxZeroExtend, PadsAtTheEndsToARunTimeShape) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f32, {2, 2}});
  Value s = g.input("s", {DType::i64, {2}});
  g.output(g.apply1("onnx.zero_extend", {x, s}));
  auto y = run1(g, {f32({1, 2, 3, 4}, {2, 2}), Tensor::from_vector<int64_t>({3, 3}, {2})});
  EXPECT_EQ(y, (std::vector<float>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace rlx
