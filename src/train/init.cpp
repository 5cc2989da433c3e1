// Initialisers: a counter-based generator (splitmix64 of seed and index), so a tensor's
// values depend only on the seed and are the same on every machine and library version.
#include <cmath>
#include <numbers>

#include "rlx/train.h"

namespace rlx::train {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The i-th uniform double in [0, 1) of the stream `seed` (53 random bits).
double unit(uint64_t seed, uint64_t i) {
  uint64_t bits = splitmix64(splitmix64(seed) ^ splitmix64(i + 0x632be59bd9b4e019ull));
  return double(bits >> 11) * 0x1.0p-53;
}

int64_t count(const std::vector<int64_t>& shape, const char* where) {
  return checked_numel(shape, where);
}

void check_float(DType dt, const char* where) {
  if (!is_float(dt)) fail<TypeError>(where, "expected a float dtype, got ", dtype_name(dt));
}

double fan_for(const std::vector<int64_t>& shape, FanMode mode) {
  Fans f = fans(shape);
  return double(mode == FanMode::fan_in ? f.fan_in : f.fan_out);
}

}  // namespace

Fans fans(const std::vector<int64_t>& shape) {
  if (shape.size() < 2)
    fail<ValueError>("train.fans", "expected a shape of rank >= 2, got ", ints_str(shape));
  int64_t receptive = 1;
  for (size_t i = 2; i < shape.size(); ++i) receptive *= shape[i];
  return {shape[1] * receptive, shape[0] * receptive};
}

double leaky_relu_gain(double a) { return std::sqrt(2.0 / (1.0 + a * a)); }

Tensor normal(std::vector<int64_t> shape, double mean, double std, uint64_t seed, DType dt) {
  check_float(dt, "train.normal");
  if (!(std >= 0)) fail<ValueError>("train.normal", "expected std >= 0, got ", std);
  std::vector<double> v(size_t(count(shape, "train.normal")));
  // Box-Muller on pairs of uniforms: element 2k and 2k+1 share the k-th pair.
  for (size_t k = 0; 2 * k < v.size(); ++k) {
    double r = std::sqrt(-2.0 * std::log(1.0 - unit(seed, 2 * k)));  // 1 - u is in (0, 1]
    double theta = 2.0 * std::numbers::pi * unit(seed, 2 * k + 1);
    v[2 * k] = mean + std * r * std::cos(theta);
    if (2 * k + 1 < v.size()) v[2 * k + 1] = mean + std * r * std::sin(theta);
  }
  return Tensor::from_doubles(dt, std::move(shape), v);
}

Tensor uniform(std::vector<int64_t> shape, double low, double high, uint64_t seed, DType dt) {
  check_float(dt, "train.uniform");
  if (!(low <= high))
    fail<ValueError>("train.uniform", "expected low <= high, got low ", low, ", high ", high);
  std::vector<double> v(size_t(count(shape, "train.uniform")));
  for (size_t i = 0; i < v.size(); ++i) v[i] = low + (high - low) * unit(seed, i);
  return Tensor::from_doubles(dt, std::move(shape), v);
}

Tensor xavier_uniform(std::vector<int64_t> shape, uint64_t seed, double gain, DType dt) {
  Fans f = fans(shape);
  double bound = gain * std::sqrt(6.0 / double(f.fan_in + f.fan_out));
  return uniform(std::move(shape), -bound, bound, seed, dt);
}

Tensor xavier_normal(std::vector<int64_t> shape, uint64_t seed, double gain, DType dt) {
  Fans f = fans(shape);
  double std = gain * std::sqrt(2.0 / double(f.fan_in + f.fan_out));
  return normal(std::move(shape), 0.0, std, seed, dt);
}

Tensor kaiming_uniform(std::vector<int64_t> shape, uint64_t seed, double a, FanMode mode,
                       DType dt) {
  double bound = std::sqrt(3.0) * leaky_relu_gain(a) / std::sqrt(fan_for(shape, mode));
  return uniform(std::move(shape), -bound, bound, seed, dt);
}

Tensor kaiming_normal(std::vector<int64_t> shape, uint64_t seed, double a, FanMode mode, DType dt) {
  double std = leaky_relu_gain(a) / std::sqrt(fan_for(shape, mode));
  return normal(std::move(shape), 0.0, std, seed, dt);
}

}  // namespace rlx::train
