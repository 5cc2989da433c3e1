// Generated code for runs of fused region steps (src/backend/cpu/region_jit.h): every op
// against the interpreter's functors on special values, the streaming variant, register
// pressure, and whole regions (outputs read twice, scalars, a body output in the middle of
// a run) against the unfused graph. Hosts without AVX-512 get no code: those tests skip
// with a message.
#include "backend/cpu/region_jit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/elementwise_ops.h"
#include "rlx/rlx.h"
#include "rlx/session.h"

namespace rlx {
namespace {

namespace jit = cpu::jit;
namespace ewop = cpu::ewop;
namespace fm = cpu::fm;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b));
}

// What the interpreter computes for op on (a, b).
float reference(const std::string& op, float a, float b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "max") return ewop::Max{}(a, b);
  if (op == "min") return ewop::Min{}(a, b);
  if (op == "neg") return -a;
  if (op == "abs") return std::fabs(a);
  if (op == "square") return a * a;
  if (op == "relu") return ewop::Relu{}(a);
  if (op == "sqrt") return std::sqrt(a);
  if (op == "rsqrt") return 1.f / std::sqrt(a);
  if (op == "reciprocal") return 1.f / a;
  if (op == "exp") return fm::exp(a);
  return fm::sigmoid(a);  // sigmoid
}

bool unary(const std::string& op) {
  return op == "neg" || op == "abs" || op == "square" || op == "relu" || op == "sqrt" ||
         op == "rsqrt" || op == "reciprocal" || op == "exp" || op == "sigmoid";
}

// Every pair of these values: 14 x 14 = 196 elements, 12 full vectors and a masked one.
std::vector<float> specials() {
  return {0.f, -0.f, 1.f, -1.f, 2.5f, kInf, -kInf, kNaN, -kNaN, 1e-40f, 3.f, -7.25f, 90.f, -110.f};
}

TEST(RegionJit, OpsMatchTheInterpreter) {
  const std::vector<float> v = specials();
  const size_t k = v.size(), n = k * k;
  std::vector<float> a(n), b(n), y(n), z(n);
  for (size_t i = 0; i < k; ++i)
    for (size_t j = 0; j < k; ++j) {
      a[i * k + j] = v[i];
      b[i * k + j] = v[j];
    }
  for (std::string op : {"add", "sub", "mul", "div", "max", "min", "neg", "abs", "square", "relu",
                         "sqrt", "rsqrt", "reciprocal", "exp", "sigmoid"}) {
    ASSERT_TRUE(jit::supports(op)) << op;
    // op, then neg twice: the op's value is written (read after the run) and read on.
    jit::Run run;
    run.ops.push_back({op, 2, unary(op) ? std::vector<int>{0} : std::vector<int>{0, 1}});
    run.ops.push_back({"neg", 3, {2}});
    run.ops.push_back({"neg", 4, {3}});
    run.outputs = {2, 4};
    jit::Code code = jit::compile(run, {false, false});
    if (!code.plain) GTEST_SKIP() << "no generated code on this host (AVX-512 and BMI2 needed)";
    void* p[5] = {a.data(), b.data(), z.data(), nullptr, y.data()};
    code.plain(p, 0, int64_t(n));
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const float want = reference(op, a[i], b[i]);
      // Full vectors are the interpreter's instruction sequence; the masked last one may
      // differ from its scalar tail by an ulp (sigmoid: a reciprocal step, not a division).
      const bool ok = i < n / 16 * 16 || op != "sigmoid"
                          ? same_bits(z[i], want)
                          : std::fabs(z[i] - want) <= 2e-7f * std::fabs(want);
      bad += !ok || !same_bits(y[i], z[i]);
      if (!ok)
        ADD_FAILURE() << op << "(" << a[i] << ", " << b[i] << ") = " << z[i] << ", want " << want;
    }
    EXPECT_EQ(bad, 0) << op;
  }
}

TEST(RegionJit, StreamingStoresWriteWhatPlainStoresWrite) {
  jit::Run run;
  run.ops = {{"mul", 2, {0, 1}}, {"add", 3, {2, 0}}, {"relu", 4, {3}}};
  run.outputs = {2, 4};
  jit::Code code = jit::compile(run, {true, true});
  if (!code.plain) GTEST_SKIP() << "no generated code on this host (AVX-512 and BMI2 needed)";
  ASSERT_NE(code.stream, nullptr);
  const int64_t n = 1000;  // slices of 256, then a masked end
  alignas(64) static float x[1024], s[1024], y1[1024], y2[1024], z1[1024], z2[1024];
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = d(rng);
    s[i] = d(rng);
  }
  void* pp[5] = {x, s, y1, nullptr, y2};
  void* ps[5] = {x, s, z1, nullptr, z2};
  for (int64_t b = 0; b < n; b += 256) {
    code.plain(pp, b, std::min(n, b + 256));
    code.stream(ps, b, std::min(n, b + 256));
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same_bits(y1[i], x[i] * s[i])) << i;
    ASSERT_TRUE(same_bits(y2[i], ewop::Relu{}(x[i] * s[i] + x[i]))) << i;
    ASSERT_TRUE(same_bits(z1[i], y1[i]) && same_bits(z2[i], y2[i])) << i;
  }
}

// A run reading more slots than there are pointer registers gets no code (the
// interpreter runs it); one that fits computes what the ops say.
TEST(RegionJit, RunsBeyondTheRegistersAreLeftToTheInterpreter) {
  jit::Run wide;
  int next = 100;
  int acc = 0;
  for (int s = 1; s < 16; ++s) {
    wide.ops.push_back({"add", next, {acc, s}});
    acc = next++;
  }
  wide.outputs = {acc};
  EXPECT_EQ(jit::compile(wide, {false}).plain, nullptr);

  // Many values live at once: x^2, x^4, ... kept, then summed.
  jit::Run deep;
  std::vector<int> powers = {0};
  for (int i = 1; i < 20; ++i) {
    deep.ops.push_back({i % 2 ? "square" : "abs", i, {powers.back()}});
    powers.push_back(i);
  }
  int sum = powers[1];
  for (size_t i = 2; i < powers.size(); ++i) {
    deep.ops.push_back({"add", 100 + int(i), {sum, powers[i]}});
    sum = 100 + int(i);
  }
  deep.outputs = {sum};
  jit::Code code = jit::compile(deep, {false});
  if (!code.plain) GTEST_SKIP() << "no generated code for this run on this host";
  std::vector<float> x(40), y(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.9f + 0.005f * float(i);
  std::vector<void*> p(size_t(sum) + 1, nullptr);
  p[0] = x.data();
  p[size_t(sum)] = y.data();
  code.plain(p.data(), 0, int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    float v = x[i], want = 0;
    std::vector<float> pw = {v};
    for (int k = 1; k < 20; ++k) pw.push_back(k % 2 ? pw.back() * pw.back() : std::fabs(pw.back()));
    want = pw[1];
    for (size_t k = 2; k < pw.size(); ++k) want = want + pw[k];
    EXPECT_TRUE(same_bits(y[i], want)) << i << ": " << y[i] << " vs " << want;
  }
}

Tensor random(int64_t n, unsigned seed) {
  Tensor t = Tensor::empty(DType::f32, {n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = d(rng);
  return t;
}

// Whole regions: fused (generated code where the host has it) against opt level 0. Sizes:
// many tiles on two threads with a masked end; outputs large enough to be streamed.
class RegionJitSizes : public ::testing::TestWithParam<int64_t> {};

TEST_P(RegionJitSizes, FusedRegionsMatchTheUnfusedGraph) {
  const int64_t n = GetParam();
  Graph g("jit_regions");
  Value x = g.input("x", {DType::f32, {n}});
  Value w = g.input("w", {DType::f32, {n}});
  Value a = g.input("a", {DType::f32, {}});
  Value t = x * a + w;  // an output, also read on
  g.output(t, "t");
  g.output(op("max", {relu(t * x - a), -w}), "u");   // arithmetic only: bit for bit
  g.output(sigmoid(t) * exp(-op("abs", {x})), "v");  // exp and sigmoid
  // An optimizer-like update: square roots and reciprocals.
  Value m = op("abs", {w}) * 0.9 + t * t * 0.1;
  g.output(x - t / (op("sqrt", {m}) + 1e-3) + op("rsqrt", {m + 1.0}) * op("reciprocal", {m + 2.0}),
           "s");
  TensorMap in = {
      {"x", random(n, 1)}, {"w", random(n, 2)}, {"a", Tensor::full(DType::f32, {}, 0.75)}};
  CompileOptions fused_o, plain_o;
  fused_o.threads = plain_o.threads = 2;
  plain_o.opt_level = 0;
  TensorMap f = Session().compile(g, fused_o).run(in);
  TensorMap r = Session().compile(g, plain_o).run(in);
  // (Generated code rounds each op as the unfused kernels do; the interpreter's pairs may
  // contract a product and a sum into one fma, hence a tolerance, not bits.)
  for (const char* name : {"t", "u", "v", "s"}) {
    const float *fp = f.at(name).data_as<float>(), *rp = r.at(name).data_as<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(fp[i], rp[i], 1e-5f * (1.f + std::fabs(rp[i]))) << name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(RegionJit, RegionJitSizes, ::testing::Values(100003, 1200007));

}  // namespace
}  // namespace rlx
