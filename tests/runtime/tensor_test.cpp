// Tensor: construction, export, views, dtype conversions.
#include "rlx/tensor.h"

#include <gtest/gtest.h>

namespace rlx {
namespace {

TEST(Tensor, FromAndToVector) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(t.to_vector<double>(), TypeError);
  EXPECT_THROW(Tensor::from_vector<float>({1, 2}, {3}), ValueError);
  EXPECT_THROW(Tensor::empty(DType::f32, {-2}), ValueError);
  Tensor b = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(Tensor::empty(DType::i64, {0, 5}).numel(), 0);
  EXPECT_FALSE(Tensor().defined());
  EXPECT_THROW(Tensor().data(), ValueError);
}

TEST(Tensor, HalfTypesStoredAsSuch) {
  Tensor h = Tensor::from_doubles(DType::f16, {3}, {1.0, -0.5, 65504.0});
  EXPECT_EQ(h.nbytes(), 6u);
  EXPECT_EQ(h.data_as<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(h.to_doubles(), (std::vector<double>{1.0, -0.5, 65504.0}));
  Tensor b = Tensor::full(DType::bf16, {2}, 1.0);
  EXPECT_EQ(b.data_as<uint16_t>()[1], 0x3f80);
  Tensor i = Tensor::from_doubles(DType::i8, {3}, {300, -300, 1.9});
  EXPECT_EQ(i.to_vector<int8_t>(), (std::vector<int8_t>{127, -128, 1}));  // saturates
}

TEST(Tensor, WrapDoesNotCopyAndReleases) {
  std::vector<int32_t> mem = {1, 2, 3};
  bool released = false;
  {
    Tensor t = Tensor::wrap(DType::i32, {3}, mem.data(), [&](void*) { released = true; });
    EXPECT_EQ(t.data(), mem.data());
    mem[1] = 42;
    EXPECT_EQ(t.to_vector<int32_t>()[1], 42);
  }
  EXPECT_TRUE(released);
}

TEST(Tensor, ViewsShareTheBuffer) {
  Tensor t = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor tt = t.permute({1, 0});
  EXPECT_EQ(tt.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.buffer(), t.buffer());
  EXPECT_EQ(tt.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  Tensor s = t.slice(1, 1, 3);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 4, 5}));
  Tensor s2 = t.slice(1, 0, 3, 2);
  EXPECT_EQ(s2.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 3, 5}));
  Tensor r = t.reshape({3, -1});
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r.buffer(), t.buffer());  // contiguous: a view
  Tensor rt = tt.reshape({6});        // non-contiguous: copied
  EXPECT_NE(rt.buffer(), t.buffer());
  EXPECT_EQ(rt.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  Tensor bc = Tensor::from_vector<float>({1, 2}, {2, 1}).broadcast_to({3, 2, 4});
  EXPECT_EQ(bc.strides(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(bc.to_doubles()[4], 2.0);
  EXPECT_THROW(t.reshape({4, 2}), ValueError);
  EXPECT_THROW(t.reshape({-1, -1}), ValueError);
  EXPECT_THROW(t.permute({0, 0}), ValueError);
  EXPECT_THROW(t.slice(2, 0, 1), ValueError);
  EXPECT_THROW(t.broadcast_to({4, 3}), ValueError);
}

TEST(Tensor, LiteralRoundTrip) {
  Tensor t = Tensor::from_vector<double>({1.5, -2}, {2, 1});
  Literal l = t.permute({1, 0}).to_literal();
  EXPECT_EQ(l.type().str(), "f64[1,2]");
  EXPECT_EQ(Tensor::from_literal(l).to_vector<double>(), (std::vector<double>{1.5, -2}));
}

}  // namespace
}  // namespace rlx
