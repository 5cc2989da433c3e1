// Threads sharing rlx: one CompiledGraph run from 8 threads at once, compiles that hit and
// miss the process-wide compile cache from several threads, and a Trainer stepping while
// another thread writes its checkpoints. They are plain tests
// here; `make tsan` runs them under ThreadSanitizer (DEVELOPERS.md, "Sanitizers"), where a
// race fails them even when the numbers come out right.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "rlx/compile_cache.h"
#include "rlx/rlx.h"
#include "rlx/train.h"

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

// A training loop with a checkpoint writer: one thread steps the Trainer while another
// saves checkpoints; each checkpoint holds the params and state of one completed step
// (loaded into a fresh Trainer, they equal what the loop recorded after that step).
TEST(Concurrency, CheckpointWriterBesideTheTrainingLoop) {
  auto g = std::make_unique<Graph>();
  Value w = g->param("w", {DType::f64, {64}});
  Value t = g->input("t", {DType::f64, {64}});
  Value d = w - t;
  g->output(sum(d * d), "loss");
  train::TrainerOptions o;
  o.optimizer = std::make_shared<train::AdamW>(0.9, 0.999, 1e-8, 0.01);
  o.schedule = train::constant_lr(0.05);
  train::Trainer tr(*g, o);
  auto f64 = [](const Tensor& v) {
    return Tensor::from_doubles(DType::f64, v.shape(), v.to_doubles());
  };
  tr.set_param("w", f64(wave({64}, 0)));
  const Tensor target = f64(wave({64}, 3));
  constexpr int kSteps = 60;
  std::vector<std::vector<double>> after(kSteps + 1);  // w after each step
  after[0] = tr.param("w").to_doubles();
  const std::string dir = ::testing::TempDir();
  std::atomic<bool> done{false};
  std::vector<std::string> files;
  std::thread writer([&] {
    for (int i = 0; !done.load() || i == 0; ++i) {
      files.push_back(dir + "/rlx_ckpt_" + std::to_string(i) + ".safetensors");
      tr.save(files.back());
    }
  });
  for (int k = 1; k <= kSteps; ++k) {
    tr.step({{"t", target}});
    after[size_t(k)] = tr.param("w").to_doubles();
  }
  done = true;
  writer.join();
  ASSERT_FALSE(files.empty());
  for (const std::string& f : files) {
    train::Trainer back(*g, o);
    back.load(f);
    const int64_t k = back.steps();
    ASSERT_GE(k, 0);
    ASSERT_LE(k, kSteps);
    EXPECT_EQ(back.param("w").to_doubles(), after[size_t(k)]) << f << " at step " << k;
    std::remove(f.c_str());
  }
}

}  // namespace
}  // namespace rlx
