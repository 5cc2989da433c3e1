// Initialisers (statistics, fans, determinism) and learning-rate schedules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "rlx/train.h"

namespace rlx::train {
namespace {

struct Stats {
  double mean, std, min, max;
};

Stats stats(const Tensor& t) {
  std::vector<double> v = t.to_doubles();
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {mean, std::sqrt(var / double(v.size())), *lo, *hi};
}

// Tolerances: 200k samples, so the sample mean is within 5 sigma / sqrt(n) of the truth.
constexpr int64_t kN = 200000;

TEST(Init, Fans) {
  EXPECT_EQ(fans({3, 5}).fan_in, 5);
  EXPECT_EQ(fans({3, 5}).fan_out, 3);
  Fans conv = fans({16, 8, 3, 3});  // out channels, in channels, kernel
  EXPECT_EQ(conv.fan_in, 8 * 9);
  EXPECT_EQ(conv.fan_out, 16 * 9);
  EXPECT_EQ(fans({4, 2, 0}).fan_in, 0);
  EXPECT_THROW(fans({7}), ValueError);
  EXPECT_THROW(fans({}), ValueError);
  EXPECT_DOUBLE_EQ(leaky_relu_gain(0), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(leaky_relu_gain(std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
}

TEST(Init, NormalStatistics) {
  Tensor t = normal({kN}, 1.5, 2.0, 7);
  EXPECT_EQ(t.dtype(), DType::f32);
  Stats s = stats(t);
  EXPECT_NEAR(s.mean, 1.5, 5 * 2.0 / std::sqrt(double(kN)));
  EXPECT_NEAR(s.std, 2.0, 0.02);
  // Odd sizes fill the last element too.
  Tensor odd = normal({3, 3}, 0, 1, 1, DType::f64);
  for (double x : odd.to_doubles()) EXPECT_TRUE(std::isfinite(x) && x != 0);
}

TEST(Init, UniformStatistics) {
  Stats s = stats(uniform({kN}, -1.0, 3.0, 11, DType::f64));
  EXPECT_GE(s.min, -1.0);
  EXPECT_LT(s.max, 3.0);
  EXPECT_NEAR(s.min, -1.0, 1e-3);
  EXPECT_NEAR(s.max, 3.0, 1e-3);
  EXPECT_NEAR(s.mean, 1.0, 5 * (4 / std::sqrt(12.0)) / std::sqrt(double(kN)));
  EXPECT_NEAR(s.std, 4 / std::sqrt(12.0), 0.01);
}

TEST(Init, XavierBoundsAndStd) {
  std::vector<int64_t> shape = {400, 500};
  double gain = 1.7;
  double bound = gain * std::sqrt(6.0 / 900);
  Stats u = stats(xavier_uniform(shape, 3, gain, DType::f64));
  EXPECT_GE(u.min, -bound);
  EXPECT_LE(u.max, bound);
  EXPECT_NEAR(u.max, bound, 1e-3 * bound);
  EXPECT_NEAR(u.std, bound / std::sqrt(3.0), 0.01 * bound);
  EXPECT_NEAR(u.mean, 0, 0.01 * bound);
  Stats n = stats(xavier_normal(shape, 3, gain, DType::f64));
  EXPECT_NEAR(n.std, gain * std::sqrt(2.0 / 900), 0.01 * gain * std::sqrt(2.0 / 900));
  EXPECT_NEAR(n.mean, 0, 0.01 * n.std);
}

TEST(Init, KaimingFanModesAndSlope) {
  std::vector<int64_t> shape = {64, 32, 3, 3};  // fan_in 288, fan_out 576
  double a = 0.2;
  double gain = std::sqrt(2.0 / (1 + a * a));
  for (FanMode mode : {FanMode::fan_in, FanMode::fan_out}) {
    double fan = mode == FanMode::fan_in ? 288 : 576;
    double std = gain / std::sqrt(fan);
    Stats n = stats(kaiming_normal(shape, 5, a, mode, DType::f64));
    EXPECT_NEAR(n.std, std, 0.02 * std);
    Stats u = stats(kaiming_uniform(shape, 5, a, mode, DType::f64));
    EXPECT_LE(u.max, std::sqrt(3.0) * std);
    EXPECT_GE(u.min, -std::sqrt(3.0) * std);
    EXPECT_NEAR(u.max, std::sqrt(3.0) * std, 0.01 * std);
    EXPECT_NEAR(u.std, std, 0.02 * std);
  }
  // The default is PyTorch's: a = 0, fan_in (relu gain sqrt(2)).
  Stats d = stats(kaiming_uniform({512, 256}, 1, 0.0, FanMode::fan_in, DType::f64));
  EXPECT_NEAR(d.max, std::sqrt(6.0 / 256), 1e-3);
}

TEST(Init, DeterministicInTheSeed) {
  auto bytes = [](const Tensor& t) { return t.to_doubles(); };
  EXPECT_EQ(bytes(normal({5, 7}, 0, 1, 42)), bytes(normal({5, 7}, 0, 1, 42)));
  EXPECT_NE(bytes(normal({5, 7}, 0, 1, 42)), bytes(normal({5, 7}, 0, 1, 43)));
  EXPECT_EQ(bytes(kaiming_uniform({8, 4}, 9)), bytes(kaiming_uniform({8, 4}, 9)));
  EXPECT_NE(bytes(kaiming_uniform({8, 4}, 9)), bytes(kaiming_uniform({8, 4}, 10)));
  // The values depend on the element index only, not on the shape.
  std::vector<double> flat = bytes(uniform({12}, 0, 1, 3, DType::f64));
  EXPECT_EQ(bytes(uniform({3, 4}, 0, 1, 3, DType::f64)), flat);
  // Fixed values: the stream must not change across versions (checkpoints and
  // experiments rely on it).
  EXPECT_EQ(uniform({3}, 0, 1, 3, DType::f64).to_doubles(),
            (std::vector<double>{0x1.9be04381a997dp-1, 0x1.07e9b6f85767p-5, 0x1.3640f8597fea8p-1}));
  // Normal goes through libm's log / cos / sin: equal up to their last-bit differences.
  std::vector<double> n = normal({3}, 0, 1, 3, DType::f64).to_doubles();
  std::vector<double> want = {0x1.c50c879171d9cp+0, 0x1.73ea7065a7a03p-2, 0x1.012aee3ffcf83p+0};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(n[i], want[i], 1e-14);
}

TEST(Init, DtypesAndShapes) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Tensor t = xavier_normal({6, 4}, 0, 1.0, dt);
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.shape(), (std::vector<int64_t>{6, 4}));
  }
  Stats h = stats(uniform({kN}, -2, 2, 1, DType::bf16));
  EXPECT_GE(h.min, -2);
  EXPECT_LE(h.max, 2);
  EXPECT_EQ(normal({}, 3, 0, 1).to_doubles(), std::vector<double>{3.0});  // 0-d
  EXPECT_EQ(uniform({0, 3}, 0, 1, 1).numel(), 0);
  EXPECT_THROW(normal({2}, 0, 1, 1, DType::i32), TypeError);
  EXPECT_THROW(uniform({2}, 1, 0, 1), ValueError);
  EXPECT_THROW(normal({2}, 0, -1, 1), ValueError);
  EXPECT_THROW(xavier_uniform({5}, 1), ValueError);
}

TEST(Schedules, Constant) {
  LrSchedule s = constant_lr(0.25);
  EXPECT_EQ(s(0), 0.25);
  EXPECT_EQ(s(1000), 0.25);
}

TEST(Schedules, WarmupCosineClosedForm) {
  double peak = 1e-3, min_lr = 1e-5;
  int64_t warm = 10, total = 110;
  LrSchedule s = warmup_cosine(peak, warm, total, min_lr);
  for (int64_t k = 0; k <= 130; ++k) {
    double want;
    if (k < warm)
      want = peak * double(k) / double(warm);
    else if (k >= total)
      want = min_lr;
    else
      want =
          min_lr + (peak - min_lr) * 0.5 *
                       (1 + std::cos(std::numbers::pi * double(k - warm) / double(total - warm)));
    EXPECT_NEAR(s(k), want, 1e-18) << "step " << k;
  }
  EXPECT_EQ(s(0), 0.0);
  EXPECT_DOUBLE_EQ(s(warm), peak);
  EXPECT_NEAR(s(60), min_lr + (peak - min_lr) * 0.5, 1e-18);  // halfway through the decay
  EXPECT_DOUBLE_EQ(s(total), min_lr);
  // No warmup: cosine from the first step.
  EXPECT_DOUBLE_EQ(warmup_cosine(2.0, 0, 4)(0), 2.0);
  EXPECT_DOUBLE_EQ(warmup_cosine(2.0, 0, 4)(2), 1.0);
  EXPECT_THROW(warmup_cosine(1, 5, 4), ValueError);
  EXPECT_THROW(warmup_cosine(1, -1, 4), ValueError);
  EXPECT_THROW(warmup_cosine(1, 0, 0), ValueError);
}

TEST(Schedules, StepLrLikeTorch) {
  LrSchedule s = step_lr(0.1, 30, 0.1);
  EXPECT_DOUBLE_EQ(s(0), 0.1);
  EXPECT_DOUBLE_EQ(s(29), 0.1);
  EXPECT_DOUBLE_EQ(s(30), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(s(89), 0.1 * 0.01);
  EXPECT_DOUBLE_EQ(s(90), 0.1 * std::pow(0.1, 3));
  EXPECT_THROW(step_lr(0.1, 0, 0.5), ValueError);
}

}  // namespace
}  // namespace rlx::train
