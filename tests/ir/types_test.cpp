// DType, Dim, TensorType and Literal.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "rlx/rlx.h"

namespace rlx {
namespace {

TEST(DType, SizesAndNamesRoundTrip) {
  for (DType t : kAllDTypes) {
    auto back = dtype_from_name(dtype_name(t));
    ASSERT_TRUE(back.has_value()) << dtype_name(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
  EXPECT_FALSE(dtype_from_name("float32").has_value());
}

TEST(DType, Categories) {
  EXPECT_TRUE(is_float(DType::bf16));
  EXPECT_FALSE(is_float(DType::i32));
  EXPECT_TRUE(is_integer(DType::u8));
  EXPECT_FALSE(is_signed(DType::u8));
  EXPECT_TRUE(is_signed(DType::i8));
  EXPECT_TRUE(is_bool(DType::boolean));
  EXPECT_FALSE(is_integer(DType::boolean));
}

TEST(DType, PromotionTable) {
  struct Row {
    DType a, b, want;
  };
  const Row rows[] = {
      {DType::f32, DType::f32, DType::f32},
      {DType::boolean, DType::i8, DType::i8},
      {DType::i32, DType::f16, DType::f16},
      {DType::f16, DType::bf16, DType::f32},
      {DType::f16, DType::f64, DType::f64},
      {DType::u8, DType::i8, DType::i16},
      {DType::u8, DType::i32, DType::i32},
      {DType::i16, DType::i64, DType::i64},
      {DType::boolean, DType::boolean, DType::boolean},
      {DType::bf16, DType::f32, DType::f32},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(promote_types(r.a, r.b), r.want) << r.a << " " << r.b;
    EXPECT_EQ(promote_types(r.b, r.a), r.want) << "symmetric: " << r.b << " " << r.a;
  }
}

TEST(DType, HalfConversions) {
  // Every finite f16 bit pattern survives f16 -> f32 -> f16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                      // rounds to +inf
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);         // tie -> even (zero)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    float f = bf16_to_f32(uint16_t(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Dim, StaticAndSymbolic) {
  Dim a = 3, b = Dim::sym("batch");
  EXPECT_TRUE(a.is_static());
  EXPECT_EQ(a.value(), 3);
  EXPECT_TRUE(b.is_symbolic());
  EXPECT_EQ(b.str(), "batch");
  EXPECT_THROW(b.value(), ValueError);
  EXPECT_THROW(Dim(-1), ValueError);
  EXPECT_THROW(Dim::sym("1x"), ValueError);
  EXPECT_TRUE(Dim::unknown().is_unknown());
  EXPECT_FALSE(Dim::unknown().known_equal(Dim::unknown()));
  EXPECT_TRUE(b.known_equal(Dim::sym("batch")));
}

TEST(TensorType, PrintAndParse) {
  for (const char* s : {"f32[]", "f32[2,3]", "bf16[batch,64]", "bool[?,1,0]", "i64[seq_len.2]"}) {
    EXPECT_EQ(TensorType::parse(s).str(), s);
  }
  TensorType t = TensorType::parse("f16[batch,8]");
  EXPECT_EQ(t.dtype, DType::f16);
  EXPECT_EQ(t.rank(), 2);
  EXPECT_FALSE(t.is_static());
  EXPECT_FALSE(t.numel().has_value());
  EXPECT_EQ(TensorType::parse("f32[2,3]").numel(), 6);
  for (const char* s : {"f32", "f33[2]", "f32[2,]", "f32[,2]", "f32[2", "f32[-1]", "f32[1x]", "",
                        "[2]", "f32[99999999999999999999]"}) {
    EXPECT_THROW(TensorType::parse(s), ValueError) << s;
  }
}

TEST(Literal, ConstructAndRead) {
  Literal a = Literal::from<float>({1.5f, -2.0f, 3.0f, 4.0f}, {2, 2});
  EXPECT_EQ(a.type().str(), "f32[2,2]");
  EXPECT_EQ(a.at(1), -2.0);
  Literal b = Literal::from_doubles(DType::f16, {3}, {1.0, 0.5, 65504.0});
  EXPECT_EQ(b.to_doubles(), (std::vector<double>{1.0, 0.5, 65504.0}));
  Literal c = Literal::full(DType::i64, {2}, 7);
  EXPECT_EQ(c.to_ints(), (std::vector<int64_t>{7, 7}));
  Literal d = Literal::from<bool>({true, false});
  EXPECT_EQ(d.type().str(), "bool[2]");
  EXPECT_EQ(d.at_int(0), 1);
  EXPECT_EQ(Literal::scalar(DType::bf16, 1.0).type().str(), "bf16[]");
  EXPECT_EQ(a, Literal::from<float>({1.5f, -2.0f, 3.0f, 4.0f}, {2, 2}));
  EXPECT_FALSE(a == Literal::from<float>({1.5f, -2.0f, 3.0f, 4.0f}, {4}));
  EXPECT_THROW(Literal(DType::f32, {3}, std::vector<uint8_t>(8)), ValueError);
  EXPECT_THROW(Literal::full(DType::f32, {-1}, 0), ValueError);
  EXPECT_THROW(a.at(4), ValueError);
  EXPECT_THROW(Literal::from_doubles(DType::f32, {2}, {1.0}), ValueError);
}

}  // namespace
}  // namespace rlx
