// The Philox4x32-10 generator against the Random123 known-answer vectors, and the random
// ops (uniform, normal, dropout) against the stream documented in philox.h / random.cpp,
// value for value, so that other backends have a fixed target.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "../../src/backend/cpu/philox.h"
#include "rlx/rlx.h"
#include "rlx/session.h"

namespace rlx {
namespace {

namespace philox = cpu::philox;

// Random123 kat_vectors, philox4x32 with 10 rounds: counter, key -> output.
TEST(Philox, KnownAnswers) {
  struct Kat {
    philox::Block ctr;
    uint32_t k0, k1;
    philox::Block want;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       0xffffffffu,
       0xffffffffu,
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       0xa4093822u,
       0x299f31d0u,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) EXPECT_EQ(philox::philox4x32_10(k.ctr, k.k0, k.k1), k.want);
}

TEST(Philox, StreamLayout) {
  philox::Stream s{0x0000000500000007ull, 0x0000000900000003ull};
  EXPECT_EQ(s.block(0x0000000200000001ull), philox::philox4x32_10({1, 2, 3, 9}, 7, 5));
  EXPECT_EQ(philox::u24(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(philox::u24(0x000000ffu), 0.0f);
  EXPECT_EQ(philox::u53(0xffffffffu, 0xffffffffu), 1.0 - 0x1p-53);
}

std::vector<Tensor> run(const std::string& op, std::vector<Tensor> inputs, const Attrs& attrs) {
  Graph g("random");
  std::vector<Value> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(g.input(str_cat("x", i), inputs[i].type()));
  for (Value v : g.apply(op, ins, attrs)) g.output(v);
  return Session(Device::cpu()).compile(g).run(std::span<const Tensor>(inputs));
}

constexpr int64_t kSeed = -987654321012345;
constexpr int64_t kKey = 77;

philox::Stream stream(bool keyed) { return {uint64_t(kSeed), keyed ? uint64_t(kKey) : 0}; }

TEST(RandomOps, UniformFollowsTheStream) {
  for (bool keyed : {false, true}) {
    std::vector<Tensor> key;
    if (keyed) key.push_back(Tensor::from_vector<int64_t>({kKey}, {}));
    Attrs a{{"shape", IntList{3, 7}}, {"seed", kSeed}, {"low", -2.0}, {"high", 3.0}};
    auto f32 = run("uniform", key, a)[0].to_vector<float>();
    a.set("dtype", DType::f64);
    auto f64 = run("uniform", key, a)[0].to_vector<double>();
    philox::Stream s = stream(keyed);
    for (size_t i = 0; i < f32.size(); ++i) {
      philox::Block w = s.block(i / 4);
      EXPECT_EQ(f32[i], float(std::fma(5.0, double(philox::u24(w[i % 4])), -2.0))) << i;
      philox::Block w2 = s.block(i / 2);
      double u = philox::u53(w2[2 * (i % 2)], w2[2 * (i % 2) + 1]);
      EXPECT_EQ(f64[i], std::fma(5.0, u, -2.0)) << i;
    }
  }
}

TEST(RandomOps, NormalIsBoxMullerOnTheStream) {
  Attrs a{{"shape", IntList{11}}, {"seed", kSeed}, {"mean", 1.0}, {"std", 2.0}};
  std::vector<Tensor> key{Tensor::from_vector<int32_t>({int32_t(kKey)}, {})};
  auto f32 = run("normal", key, a)[0].to_vector<float>();
  a.set("dtype", DType::f64);
  auto f64 = run("normal", key, a)[0].to_vector<double>();
  philox::Stream s = stream(true);
  for (size_t i = 0; i < f32.size(); ++i) {
    philox::Block w = s.block(i / 4);
    size_t p = (i % 4) / 2;
    double u1 = philox::u24(w[2 * p]) + 0x1p-24, u2 = philox::u24(w[2 * p + 1]);
    double r = std::sqrt(-2 * std::log(u1)), t = 2 * std::numbers::pi * u2;
    EXPECT_NEAR(f32[i], 1 + 2 * r * (i % 2 ? std::sin(t) : std::cos(t)), 1e-4) << i;
    philox::Block w2 = s.block(i / 2);
    u1 = philox::u53(w2[0], w2[1]) + 0x1p-53, u2 = philox::u53(w2[2], w2[3]);
    r = std::sqrt(-2 * std::log(u1)), t = 2 * std::numbers::pi * u2;
    EXPECT_NEAR(f64[i], 1 + 2 * r * (i % 2 ? std::sin(t) : std::cos(t)), 1e-13) << i;
  }
}

// dropout keeps element i exactly where uniform(seed) in f32 is >= rate.
TEST(RandomOps, DropoutMaskIsTheUniformStream) {
  const double rate = 0.3;
  std::vector<int64_t> shape{4, 33};
  Tensor ones = Tensor::full(DType::f32, shape, 1.0);
  auto y = run("dropout", {ones}, {{"rate", rate}, {"training", true}, {"seed", kSeed}})[0]
               .to_vector<float>();
  auto u = run("uniform", {}, {{"shape", IntList(shape)}, {"seed", kSeed}})[0].to_vector<float>();
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_EQ(y[i], u[i] >= rate ? float(1 / (1 - rate)) : 0.0f) << i;
}

}  // namespace
}  // namespace rlx
