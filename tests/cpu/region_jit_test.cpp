// Generated code for runs of fused region steps (src/backend/cpu/region_jit.h): every op
// against the level's own kernels (the interpreter's functors: the same bits on full vectors,
// the last partial vector within the kernels' scalar-tail bounds) on special and random
// values, tails of every length, the streaming variant, register pressure (constants read
// from memory), and whole regions against the unfused graph and against the interpreter.
// The code is AVX-512 or AVX2, the level in use (RLX_CPU_ISA); at the baseline level there
// is none and those tests skip, saying so.
#include "backend/cpu/region_jit.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "backend/cpu/elementwise_ops.h"
#include "rlx/cpu_isa.h"
#include "rlx/rlx.h"
#include "rlx/session.h"
#include "rlx/settings.h"

namespace rlx {
namespace {

namespace jit = cpu::jit;
namespace ewop = cpu::ewop;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b));
}

// Lanes of the level's vectors: the interpreter's full vectors are these.
int64_t lanes() { return cpu_isa_avx512() ? 16 : 8; }

// Whether the level in use must get code (the avx2 and avx512 levels do); a run that gets
// none elsewhere skips.
bool code_expected() {
  return settings().region_jit && (cpu_isa() == CpuIsa::avx2 || cpu_isa() == CpuIsa::avx512);
}
#define RLX_NEED_CODE(code)                                                                      \
  do {                                                                                           \
    if (!(code).plain) {                                                                         \
      ASSERT_FALSE(code_expected()) << "no generated code at level " << cpu_isa_name(cpu_isa()); \
      GTEST_SKIP() << "no generated code at level " << cpu_isa_name(cpu_isa());                  \
    }                                                                                            \
  } while (0)

bool unary(const std::string& op) {
  return op == "neg" || op == "abs" || op == "square" || op == "relu" || op == "sqrt" ||
         op == "rsqrt" || op == "reciprocal" || op == "exp" || op == "sigmoid" || op == "erf" ||
         op == "hard_sigmoid";
}

// "s3", say (a literal + std::to_string trips g++ 12's -Wrestrict).
std::string label(char c, int slot) {
  std::string r(1, c);
  r += std::to_string(slot);
  return r;
}

// The run's ops as a graph of separate kernels (opt level 0, one thread): the level's
// functors over whole tensors. Returns each written slot's values.
std::map<int, std::vector<float>> unfused(const jit::Run& run,
                                          const std::map<int, std::vector<float>>& in) {
  const int64_t n = int64_t(in.begin()->second.size());
  Graph g("unfused");
  std::map<int, Value> v;
  TensorMap feed;
  for (const auto& [s, data] : in) {
    v[s] = g.input(label('s', s), {DType::f32, {n}});
    Tensor t = Tensor::empty(DType::f32, {n});
    std::memcpy(t.data_as<float>(), data.data(), size_t(n) * 4);
    feed[label('s', s)] = t;
  }
  for (const jit::Op& o : run.ops) {
    std::vector<Value> args;
    for (int s : o.in) args.push_back(v.at(s));
    Attrs attrs;
    std::vector<std::string_view> names = jit::attributes(o.name);
    for (size_t k = 0; k < names.size(); ++k)
      attrs.set(std::string(names[k]), double(o.params.at(k)));
    v[o.out] = op(o.name, args, attrs);
  }
  for (int s : run.outputs) g.output(v.at(s), label('o', s));
  CompileOptions opts;
  opts.threads = 1;
  opts.opt_level = 0;
  TensorMap r = Session().compile(g, opts).run(feed);
  std::map<int, std::vector<float>> out;
  for (int s : run.outputs) {
    const Tensor& t = r.at(label('o', s));
    out[s].assign(t.data_as<float>(), t.data_as<float>() + n);
  }
  return out;
}

// Runs the code over [0, n) of the inputs; returns each written slot's values.
std::map<int, std::vector<float>> generated(const jit::Run& run, const jit::Code& code,
                                            std::map<int, std::vector<float>> in) {
  const size_t n = in.begin()->second.size();
  std::map<int, std::vector<float>> out;
  int top = 0;
  for (const jit::Op& o : run.ops) top = std::max(top, o.out);
  for (const auto& [s, d] : in) top = std::max(top, s);
  std::vector<void*> p(size_t(top) + 1, nullptr);
  for (auto& [s, d] : in) p[size_t(s)] = d.data();
  for (int s : run.outputs) {
    out[s].assign(n, -12345.f);
    p[size_t(s)] = out[s].data();
  }
  code.plain(p.data(), 0, int64_t(n));
  return out;
}

// Full vectors: the kernels' bits; the last partial vector: bits, or (`tail_ulps`, for the
// ops whose scalar tail is another instruction sequence) within a relative bound.
void expect_matches(const std::string& what, const std::vector<float>& got,
                    const std::vector<float>& want, const std::vector<float>& a,
                    const std::vector<float>& b, bool tail_loose) {
  const size_t n = got.size(), full = n / size_t(lanes()) * size_t(lanes());
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool ok = i < full || !tail_loose
                        ? same_bits(got[i], want[i])
                        : std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]);
    if (!ok && ++bad <= 10)
      ADD_FAILURE() << what << "(" << a[i] << ", " << b[i] << ") [" << i << "] = " << got[i]
                    << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

// Every pair of the special values (14 x 14), then random values over several scales
// (exp's clamp at 89 and -104 included), ending in a partial vector.
std::pair<std::vector<float>, std::vector<float>> operands() {
  const std::vector<float> v = {0.f,  -0.f,  1.f,    -1.f, 2.5f,   kInf, -kInf,
                                kNaN, -kNaN, 1e-40f, 3.f,  -7.25f, 90.f, -110.f};
  std::vector<float> a, b;
  for (float x : v)
    for (float y : v) {
      a.push_back(x);
      b.push_back(y);
    }
  std::mt19937 rng(7);
  for (float scale : {0.01f, 1.f, 4.f, 30.f, 120.f}) {
    std::normal_distribution<float> d(0.f, scale);
    for (int i = 0; i < 200; ++i) {
      a.push_back(d(rng));
      b.push_back(d(rng));
    }
  }
  for (float x : {-3.f, 3.f, 88.72f, -103.97f, 0.5f}) {  // hard_sigmoid's and exp's edges
    a.push_back(x);
    b.push_back(-x);
  }
  return {a, b};
}

TEST(RegionJit, OpsMatchTheInterpreter) {
  const auto [a, b] = operands();
  struct Case {
    std::string op;
    std::vector<float> params;
  };
  std::vector<Case> cases;
  for (std::string op : {"add", "sub", "mul", "div", "max", "min", "neg", "abs", "square", "relu",
                         "sqrt", "rsqrt", "reciprocal", "exp", "sigmoid", "erf"})
    cases.push_back({op, {}});
  for (std::vector<float> ab : {std::vector<float>{1.f / 6, 0.5f}, {0.2f, 0.5f}, {-0.75f, 0.25f}})
    cases.push_back({"hard_sigmoid", ab});
  for (const Case& c : cases) {
    ASSERT_TRUE(jit::supports(c.op)) << c.op;
    ASSERT_EQ(jit::attributes(c.op).size(), c.params.size()) << c.op;
    // op, then neg twice: the op's value is written (read after the run) and read on.
    jit::Run run;
    run.ops.push_back(
        {c.op, 2, unary(c.op) ? std::vector<int>{0} : std::vector<int>{0, 1}, c.params});
    run.ops.push_back({"neg", 3, {2}});
    run.ops.push_back({"neg", 4, {3}});
    run.outputs = {2, 4};
    jit::Code code = jit::compile(run, {false, false});
    RLX_NEED_CODE(code);
    std::map<int, std::vector<float>> in = {{0, a}};
    if (!unary(c.op)) in[1] = b;
    auto got = generated(run, code, in);
    auto want = unfused(run, in);
    const bool loose = c.op == "exp" || c.op == "sigmoid";
    expect_matches(c.op, got[2], want[2], a, b, loose);
    expect_matches(c.op + " then neg neg", got[4], got[2], a, b, false);
  }
}

// Every length of a last partial vector, from several starts: the masked loads and stores
// read and write [begin, end) only, and each element gets what a full vector gives it.
TEST(RegionJit, TailsWriteTheirLanesOnly) {
  jit::Run run;
  run.ops = {{"hard_sigmoid", 2, {0}, {1.f / 6, 0.5f}},
             {"mul", 3, {0, 2}},
             {"sigmoid", 4, {1}},
             {"max", 5, {3, 4}}};
  run.outputs = {3, 5};
  jit::Code code = jit::compile(run, {false, false});
  RLX_NEED_CODE(code);
  const int64_t n = 4 * lanes();
  const size_t m = size_t(n);
  std::vector<float> x(m), w(m), y(m), z(m);
  for (int64_t i = 0; i < n; ++i) {
    x[size_t(i)] = float(i) * 0.37f - 5.f;
    w[size_t(i)] = 2.f - float(i) * 0.21f;
  }
  std::vector<float> full3(m), full5(m);
  void* pf[6] = {x.data(), w.data(), nullptr, full3.data(), nullptr, full5.data()};
  code.plain(pf, 0, n);
  for (int64_t begin : {int64_t(0), int64_t(3), lanes()})
    for (int64_t end = begin + 1; end <= begin + 2 * lanes() + 1 && end <= n; ++end) {
      std::fill(y.begin(), y.end(), -7.f);
      std::fill(z.begin(), z.end(), -7.f);
      void* p[6] = {x.data(), w.data(), nullptr, y.data(), nullptr, z.data()};
      code.plain(p, begin, end);
      for (int64_t i = 0; i < n; ++i) {
        const bool in = i >= begin && i < end;
        ASSERT_TRUE(same_bits(y[size_t(i)], in ? full3[size_t(i)] : -7.f))
            << "[" << begin << ", " << end << ") at " << i;
        ASSERT_TRUE(same_bits(z[size_t(i)], in ? full5[size_t(i)] : -7.f))
            << "[" << begin << ", " << end << ") at " << i;
      }
    }
}

TEST(RegionJit, StreamingStoresWriteWhatPlainStoresWrite) {
  jit::Run run;
  run.ops = {{"mul", 2, {0, 1}}, {"add", 3, {2, 0}}, {"relu", 4, {3}}};
  run.outputs = {2, 4};
  jit::Code code = jit::compile(run, {true, true});
  RLX_NEED_CODE(code);
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
  if (!code.plain) GTEST_SKIP() << "no generated code for this run at this level";
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

// Constants that do not fit beside the values are read from memory: exp's and sigmoid's
// (more than AVX2's 16 registers on their own), with erf's more than AVX-512's 32, and a
// few values live across them.
TEST(RegionJit, ConstantsInMemoryComputeTheSame) {
  jit::Run run;
  run.ops = {
      {"sigmoid", 10, {0}},     {"exp", 11, {1}},      {"hard_sigmoid", 12, {2}, {0.2f, 0.5f}},
      {"mul", 13, {10, 11}},    {"max", 14, {13, 12}}, {"rsqrt", 15, {11}},
      {"reciprocal", 16, {10}}, {"sub", 17, {15, 16}}, {"add", 18, {17, 14}},
      {"sigmoid", 19, {18}},    {"erf", 20, {17}},     {"min", 21, {19, 20}},
      {"max", 22, {21, 12}}};
  run.outputs = {13, 22};
  jit::Code code = jit::compile(run, {false, false});
  RLX_NEED_CODE(code);
  const auto [a, b] = operands();
  std::vector<float> c(a.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = a[i] * 0.5f - b[i];
  std::map<int, std::vector<float>> in = {{0, a}, {1, b}, {2, c}};
  auto got = generated(run, code, in);
  auto want = unfused(run, in);
  expect_matches("exp * sigmoid", got[13], want[13], a, b, true);
  expect_matches("the chain", got[22], want[22], a, b, true);
}

Tensor random(int64_t n, unsigned seed) {
  Tensor t = Tensor::empty(DType::f32, {n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = d(rng);
  return t;
}

Value hard_sigmoid(Value x, double alpha, double beta) {
  return op("hard_sigmoid", {x}, {{"alpha", alpha}, {"beta", beta}});
}

// Whole regions: fused (generated code where the level has it) against opt level 0. Sizes:
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
  g.output(w * hard_sigmoid(w * a, 1.0 / 6, 0.5), "h");  // hard_swish after a scale
  TensorMap in = {
      {"x", random(n, 1)}, {"w", random(n, 2)}, {"a", Tensor::full(DType::f32, {}, 0.75)}};
  CompileOptions fused_o, plain_o;
  fused_o.threads = plain_o.threads = 2;
  plain_o.opt_level = 0;
  TensorMap f = Session().compile(g, fused_o).run(in);
  TensorMap r = Session().compile(g, plain_o).run(in);
  // (Generated code rounds each op as the unfused kernels do; the interpreter's pairs may
  // contract a product and a sum into one fma, hence a tolerance, not bits.)
  for (const char* name : {"t", "u", "v", "s", "h"}) {
    const float *fp = f.at(name).data_as<float>(), *rp = r.at(name).data_as<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(fp[i], rp[i], 1e-5f * (1.f + std::fabs(rp[i]))) << name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(RegionJit, RegionJitSizes, ::testing::Values(100003, 1200007));

// The regions of the model corpus (mobilenet_v3's hard_swish, resnet's and regnet's
// residual add + relu, wav2vec2's erf gelu), generated and interpreted (RLX_REGION_JIT=0):
// the same bits, at sizes of one partial tile to many tiles with a partial last vector.
TEST(RegionJit, CorpusRegionsMatchTheInterpreterBitForBit) {
  for (int64_t n : {int64_t(5), int64_t(1000), int64_t(28224), int64_t(200711)}) {
    Graph g("corpus_regions");
    Value x = g.input("x", {DType::f32, {n}});
    Value w = g.input("w", {DType::f32, {n}});
    g.output(x * hard_sigmoid(x, 1.0 / 6, 0.5), "hswish");
    g.output(relu(x + w), "add_relu");
    g.output(x * (op("erf", {x * 0.70710677}) + 1.0) * 0.5, "gelu");
    TensorMap in = {{"x", random(n, 5)}, {"w", random(n, 6)}};
    for (int64_t i = 0; i < std::min<int64_t>(n, 8); ++i)  // NaN, -0 and the clamps' edges
      in.at("x").data_as<float>()[i] = std::array{kNaN, -0.f, -3.f, 3.f, -kInf, kInf, 0.f, 1.f}[i];
    CompileOptions o;
    o.threads = 2;
    o.cache = false;  // the second compile must not reuse the first's code
    TensorMap gen = Session().compile(g, o).run(in);
    const bool was = settings().region_jit;
    settings().region_jit = false;
    TensorMap interp = Session().compile(g, o).run(in);
    settings().region_jit = was;
    for (const char* name : {"hswish", "add_relu", "gelu"}) {
      const float *gp = gen.at(name).data_as<float>(), *ip = interp.at(name).data_as<float>();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(same_bits(gp[i], ip[i]))
            << name << "[" << i << "] of " << n << ": " << gp[i] << " vs " << ip[i];
    }
  }
}

}  // namespace
}  // namespace rlx
