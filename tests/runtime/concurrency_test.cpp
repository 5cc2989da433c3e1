// Threads sharing rlx: one CompiledGraph run from 8 threads at once, and compiles that
// hit and miss the process-wide compile cache from several threads. They are plain tests
// here; `make tsan` runs them under ThreadSanitizer (DEVELOPERS.md, "Sanitizers"), where a
// race fails them even when the numbers come out right.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <latch>
#include <thread>
#include <vector>

#include "rlx/compile_cache.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

constexpr int kThreads = 8;

// x [batch, 32] -> matmul, gelu, layer_norm, matmul, softmax, and a sum: BLAS, a fused
// region, row kernels and a reduction in one run. `shift` makes graphs that differ.
std::unique_ptr<Graph> model(double shift = 0) {
  auto g = std::make_unique<Graph>();
  Value x = g->input("x", {DType::f32, {Dim::sym("batch"), 32}});
  Value w1 = g->param("w1", {DType::f32, {32, 64}});
  Value w2 = g->param("w2", {DType::f32, {64, 32}});
  Value h = g->apply1("layer_norm", {gelu(matmul(x, w1)) + shift});
  Value y = softmax(matmul(h, w2));
  g->output(y, "y");
  g->output(sum(y * x), "s");
  return g;
}

Tensor wave(std::vector<int64_t> shape, double phase) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(size_t(n), 0.f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(std::sin(0.37 * double(i) + phase));
  return Tensor::from_vector(v, shape);
}

void set_params(CompiledGraph& cg) {
  cg.set_param("w1", wave({32, 64}, 1));
  cg.set_param("w2", wave({64, 32}, 2));
}

// Every thread waits at the latch, then runs with its own batch size (plans are built and
// found concurrently); each result must equal the one run alone.
TEST(Concurrency, OneCompiledGraphFromEightThreads) {
  auto g = model();
  CompiledGraph cg = Session().compile(*g);
  set_params(cg);
  std::vector<TensorMap> inputs, expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back({{"x", wave({1 + t % 4 * 5, 32}, t)}});
    expected.push_back(cg.run(inputs.back()));
  }
  std::latch start(kThreads);
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        for (int r = 0; r < 10; ++r) {
          TensorMap out = cg.run(inputs[size_t(t)]);
          for (const auto& [name, want] : expected[size_t(t)])
            if (out.at(name).to_doubles() != want.to_doubles()) ++mismatches;
        }
      } catch (const std::exception&) {
        ++errors;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// Threads compile the same few graphs (equal ones built separately, in different orders):
// each compile is a hit or a miss (two threads may both miss one graph and both build it),
// every compiled graph computes its own graph's result, and the cache ends up holding each
// distinct graph once.
TEST(Concurrency, CompileCacheFromSeveralThreads) {
  clear_compile_cache();
  constexpr int kGraphs = 4;
  Tensor x = wave({3, 32}, 0.5);
  std::vector<std::vector<double>> expected;
  for (int k = 0; k < kGraphs; ++k) {
    CompileOptions o;
    o.cache = false;
    CompiledGraph cg = Session().compile(*model(k), o);
    set_params(cg);
    expected.push_back(cg.run({{"x", x}}).at("s").to_doubles());
  }
  std::latch start(kThreads);
  std::atomic<int> hits{0}, misses{0}, wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        for (int i = 0; i < 2 * kGraphs; ++i) {
          int k = (t + i) % kGraphs;
          CompiledGraph cg = Session().compile(*model(k));
          ++(cg.from_cache() ? hits : misses);
          set_params(cg);
          if (cg.run({{"x", x}}).at("s").to_doubles() != expected[size_t(k)]) ++wrong;
        }
      } catch (const std::exception&) {
        ++errors;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(hits + misses, kThreads * 2 * kGraphs);
  EXPECT_GE(misses.load(), kGraphs);
  EXPECT_GT(hits.load(), 0);
  EXPECT_EQ(compile_cache_size(), size_t(kGraphs));
}

}  // namespace
}  // namespace rlx
