// Attrs: typed access, stable encoding, hashing.
#include <gtest/gtest.h>

#include "rlx/rlx.h"

namespace rlx {
namespace {

Attrs sample() {
  return {{"axis", 1},
          {"alpha", 0.25},
          {"mode", "reflect"},
          {"keepdims", true},
          {"perm", IntList{2, 0, 1}},
          {"scales", FloatList{1.5, 2.0}},
          {"dtype", DType::bf16},
          {"value", Literal::from<int32_t>({1, 2, 3})}};
}

TEST(Attrs, TypedGetters) {
  Attrs a = sample();
  EXPECT_EQ(a.get_int("axis"), 1);
  EXPECT_EQ(a.get_float("alpha"), 0.25);
  EXPECT_EQ(a.get_float("axis"), 1.0);  // ints read as floats
  EXPECT_EQ(a.get_string("mode"), "reflect");
  EXPECT_TRUE(a.get_bool("keepdims"));
  EXPECT_EQ(a.get_ints("perm"), (IntList{2, 0, 1}));
  EXPECT_EQ(a.get_floats("scales"), (FloatList{1.5, 2.0}));
  EXPECT_EQ(a.get_floats("perm"), (FloatList{2, 0, 1}));
  EXPECT_EQ(a.get_dtype("dtype"), DType::bf16);
  EXPECT_EQ(a.get_tensor("value").to_ints(), (IntList{1, 2, 3}));
  EXPECT_THROW(a.get_int("missing"), ValueError);
  EXPECT_THROW(a.get_int("alpha"), TypeError);
  EXPECT_THROW(a.get_string("axis"), TypeError);
  EXPECT_THROW(a.get_ints("scales"), TypeError);
}

TEST(Attrs, EncodingIsStableAndOrderIndependent) {
  Attrs a = sample();
  Attrs b;
  // Same entries, inserted in the reverse order.
  std::vector<std::pair<std::string, AttrValue>> items(a.begin(), a.end());
  for (auto it = items.rbegin(); it != items.rend(); ++it) b.set(it->first, it->second);
  EXPECT_EQ(a.encode(), b.encode());
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a, b);
  // The encoding is fixed: a known map gives known bytes (little-endian, sorted keys).
  Attrs small{{"k", 2}};
  std::vector<uint8_t> want = {1,   0, 0, 0, 0, 0, 0, 0,  // one entry
                               1,   0, 0, 0, 0, 0, 0, 0,  // key length
                               'k', 0,                    // key, kind tag Int
                               2,   0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(small.encode(), want);
}

TEST(Attrs, DifferentValuesHashDifferently) {
  Attrs base = sample();
  std::vector<Attrs> variants;
  for (auto [k, v] :
       std::vector<std::pair<std::string, AttrValue>>{{"axis", 2},
                                                      {"alpha", 0.5},
                                                      {"mode", "edge"},
                                                      {"keepdims", false},
                                                      {"perm", IntList{2, 1, 0}},
                                                      {"scales", FloatList{1.5}},
                                                      {"dtype", DType::f16},
                                                      {"value", Literal::from<int32_t>({1, 2, 4})},
                                                      {"axis", 1.0}}) {
    Attrs c = base;
    c.set(k, v);
    EXPECT_NE(c.hash(), base.hash()) << k;
    EXPECT_FALSE(c == base) << k;
  }
}

}  // namespace
}  // namespace rlx
