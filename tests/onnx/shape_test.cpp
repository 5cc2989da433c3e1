// The shape family's onnx.* ops. onnx.unique: sorted and first-occurrence orders, slices
// along an axis, NaN and -0 handling, value-dependent output sizes, typed errors.
// onnx.range: lengths from run-time values, empty ranges, typed errors.
// Links rlx_onnx (for rlx::onnx::register_ops).
#include <gtest/gtest.h>

#include <cmath>

#include "rlx/onnx.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

struct Unique {
  Tensor y, first, inverse, counts;
};

Unique run_unique(const Tensor& x, int64_t axis, bool sorted, const Shape& declared = {}) {
  onnx::register_ops();
  Graph g;
  Value in = g.input("x", {x.dtype(), declared.empty() ? x.type().shape : declared});
  auto outs = g.apply("onnx.unique", {in}, {{"axis", axis}, {"sorted", sorted}});
  for (Value v : outs) g.output(v);
  std::vector<Tensor> r = Session().compile(g).run(std::vector<Tensor>{x});
  return {r[0], r[1], r[2], r[3]};
}

using I = std::vector<int64_t>;

TEST(OnnxUnique, SortedFlat) {
  auto u = run_unique(Tensor::from_vector<int64_t>({2, 1, 1, 3, 4, 3}, {6}), 0, true);
  EXPECT_EQ(u.y.to_vector<int64_t>(), (I{1, 2, 3, 4}));
  EXPECT_EQ(u.first.to_vector<int64_t>(), (I{1, 0, 3, 4}));
  EXPECT_EQ(u.inverse.to_vector<int64_t>(), (I{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(u.counts.to_vector<int64_t>(), (I{2, 1, 2, 1}));
}

TEST(OnnxUnique, FirstOccurrenceOrder) {
  auto u = run_unique(Tensor::from_vector<int64_t>({2, 1, 1, 3, 4, 3}, {6}), 0, false);
  EXPECT_EQ(u.y.to_vector<int64_t>(), (I{2, 1, 3, 4}));
  EXPECT_EQ(u.first.to_vector<int64_t>(), (I{0, 1, 3, 4}));
  EXPECT_EQ(u.inverse.to_vector<int64_t>(), (I{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(u.counts.to_vector<int64_t>(), (I{1, 2, 2, 1}));
}

TEST(OnnxUnique, SlicesAlongAnAxisOfASymbolicInput) {
  // Columns of [[1, 0, 1], [2, 5, 2]]: (1,2) (0,5) (1,2) -> sorted (0,5) (1,2).
  Tensor x = Tensor::from_vector<float>({1, 0, 1, 2, 5, 2}, {2, 3});
  auto u = run_unique(x, 1, true, {Dim::sym("n"), Dim::sym("m")});
  EXPECT_EQ(u.y.shape(), (I{2, 2}));
  EXPECT_EQ(u.y.to_vector<float>(), (std::vector<float>{0, 1, 5, 2}));
  EXPECT_EQ(u.first.to_vector<int64_t>(), (I{1, 0}));
  EXPECT_EQ(u.inverse.to_vector<int64_t>(), (I{1, 0, 1}));
  EXPECT_EQ(u.counts.to_vector<int64_t>(), (I{1, 2}));
}

TEST(OnnxUnique, NanSortsLastAndNegativeZeroEqualsZero) {
  float nan = std::nanf("");
  auto u = run_unique(Tensor::from_vector<float>({nan, 0.0f, -0.0f, -1.0f, nan}, {5}), 0, true);
  std::vector<float> y = u.y.to_vector<float>();
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(u.counts.to_vector<int64_t>(), (I{1, 2, 2}));
}

TEST(OnnxUnique, EmptyInput) {
  auto u = run_unique(Tensor::zeros(DType::f32, {0}), 0, true);
  EXPECT_EQ(u.y.shape(), (I{0}));
  EXPECT_EQ(u.counts.shape(), (I{0}));
}

TEST(OnnxUnique, RejectsABadAxis) {
  onnx::register_ops();
  Graph g;
  Value x = g.input("x", {DType::f32, {2, 3}});
  EXPECT_THROW(g.apply("onnx.unique", {x}, {{"axis", 2}}), ValueError);
}

Tensor run_range(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  onnx::register_ops();
  Graph g;
  Value a = g.input("a", start.type()), b = g.input("b", limit.type()),
        c = g.input("c", delta.type());
  g.output(g.apply1("onnx.range", {a, b, c}));
  return Session().compile(g).run(std::vector<Tensor>{start, limit, delta})[0];
}

template <class T>
Tensor scalar(T v) {
  return Tensor::from_vector<T>({v}, {});
}

TEST(OnnxRange, IntegersRoundTheLengthUp) {
  EXPECT_EQ(
      run_range(scalar<int64_t>(10), scalar<int64_t>(1), scalar<int64_t>(-4)).to_vector<int64_t>(),
      (I{10, 6, 2}));
  EXPECT_EQ(
      run_range(scalar<int32_t>(0), scalar<int32_t>(5), scalar<int32_t>(2)).to_vector<int32_t>(),
      (std::vector<int32_t>{0, 2, 4}));
}

TEST(OnnxRange, FloatsAndEmptyRanges) {
  EXPECT_EQ(run_range(scalar<float>(1), scalar<float>(2), scalar<float>(0.25f)).to_vector<float>(),
            (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(run_range(scalar<double>(3), scalar<double>(1), scalar<double>(1)).shape(), (I{0}));
}

TEST(OnnxRange, RejectsAZeroDeltaAndMixedDtypes) {
  EXPECT_THROW(run_range(scalar<int64_t>(0), scalar<int64_t>(3), scalar<int64_t>(0)), ValueError);
  onnx::register_ops();
  Graph g;
  Value a = g.input("a", {DType::f32, {}}), b = g.input("b", {DType::i64, {}});
  EXPECT_THROW(g.apply1("onnx.range", {a, b, a}), TypeError);
}

}  // namespace
}  // namespace rlx
