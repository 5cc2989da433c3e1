// CUDA Graphs (CompileOptions::cuda_graphs): runs with static shapes are captured once and
// replayed; the results are the eager runs', bit for bit, whether the caller keeps
// earlier outputs or not, and runs that cannot be captured still run (eagerly).
#include <gtest/gtest.h>

#include <random>

#include "model.h"
#include "op_tables/consistency.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"
#include "rlx/train.h"

namespace rlx::test {
namespace {

#define NEED_GPU() \
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one"

std::unique_ptr<Graph> mlp() {
  auto g = std::make_unique<Graph>("mlp");
  Value x = g->input("x", TensorType::parse("f32[64,32]"));
  Value w = g->param("w", TensorType::parse("f32[32,48]"));
  Value h = g->apply("gelu", {g->apply("matmul", {x, w})[0]})[0];
  Value y = g->apply("softmax", {g->apply("mul", {h, h})[0]}, {{"axis", -1}})[0];
  g->output(y, "y");
  g->output(g->apply("sum", {h}, {{"axes", std::vector<int64_t>{0}}})[0], "s");
  return g;
}

CompiledGraph compile(const Graph& g, bool graphs) {
  CompileOptions o;
  o.cuda_graphs = graphs;
  o.cache = false;
  return Session(Device::cuda()).compile(g, o);
}

TEST(CudaGraphs, ReplaysGiveTheEagerResults) {
  NEED_GPU();
  auto g = mlp();
  CompiledGraph on = compile(*g, true), off = compile(*g, false);
  Tensor w = random_tensor(DType::f32, {32, 48}, 1).to(Device::cuda());
  on.set_param("w", w);
  off.set_param("w", w);
  Tensor x = random_tensor(DType::f32, {64, 32}, 2).to(Device::cuda());
  std::vector<TensorMap> kept;  // held: each run's outputs must stay as they were
  for (int run = 0; run < 6; ++run) {
    TensorMap a = on.run({{"x", x}}), b = off.run({{"x", x}});
    for (const char* name : {"y", "s"}) EXPECT_EQ(bytes_of(a.at(name)), bytes_of(b.at(name)));
    if (run < 2) kept.push_back(a);
  }
  // Run 1 is eager, run 2 captures; the rest replay while the arenas last.
  EXPECT_EQ(off.graph_launches(), 0u);
  EXPECT_GE(on.graph_captures(), 1u);
  EXPECT_GE(on.graph_launches(), 4u);
  TensorMap want = off.run({{"x", x}});
  for (const TensorMap& k : kept) EXPECT_EQ(bytes_of(k.at("y")), bytes_of(want.at("y")));
}

TEST(CudaGraphs, NewArgumentStorageIsCapturedAgain) {
  NEED_GPU();
  auto g = mlp();
  CompiledGraph on = compile(*g, true), off = compile(*g, false);
  Tensor w = random_tensor(DType::f32, {32, 48}, 3).to(Device::cuda());
  on.set_param("w", w);
  off.set_param("w", w);
  for (int run = 0; run < 5; ++run) {
    // A new tensor every run: a replay must not read the last one's storage.
    Tensor x = random_tensor(DType::f32, {64, 32}, uint64_t(10 + run)).to(Device::cuda());
    EXPECT_EQ(bytes_of(on.run({{"x", x}}).at("y")), bytes_of(off.run({{"x", x}}).at("y")))
        << "run " << run;
  }
}

// A gather checks its indices on the host after the kernel (a wait for the device), which
// a capture cannot record: the runs stay eager and right, and a bad index is still found.
TEST(CudaGraphs, UncapturableRunsStayEager) {
  NEED_GPU();
  Graph g("gather");
  Value t = g.input("t", TensorType::parse("f32[10,4]"));
  Value i = g.input("i", TensorType::parse("i64[6]"));
  g.output(g.apply("gather", {t, i}, {{"axis", 0}})[0]);
  CompiledGraph on = compile(g, true);
  Tensor tab = random_tensor(DType::f32, {10, 4}, 5).to(Device::cuda());
  Tensor idx = Tensor::from_vector(std::vector<int64_t>{0, 9, 3, 3, 1, 2}, {6}).to(Device::cuda());
  std::vector<double> want = values(Session().compile(g).run(
      std::vector<Tensor>{tab.to(Device::cpu()), idx.to(Device::cpu())})[0]);
  for (int run = 0; run < 4; ++run)
    EXPECT_EQ(values(on.run(std::vector<Tensor>{tab, idx})[0]), want) << "run " << run;
  Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, 10, 0, 0, 0, 0}, {6}).to(Device::cuda());
  EXPECT_THROW(on.run(std::vector<Tensor>{tab, bad}), ValueError);
}

// The demo model's AMP-free training loop: each step reads the params the last one wrote,
// so two captures alternate. The params after the steps are the eager run's, bit for bit.
TEST(CudaGraphs, TrainingStepsReplayAndMatchEagerSteps) {
  NEED_GPU();
  demo::GptConfig cfg{.vocab = 65, .d_model = 64, .heads = 4, .layers = 2, .context = 32};
  auto model = demo::build_gpt(cfg, /*with_loss=*/true);
  TensorMap init = demo::init_params(*model, cfg.layers, 9);
  std::vector<std::unique_ptr<train::Trainer>> trainers;
  for (bool graphs : {true, false}) {
    train::TrainerOptions o;
    o.device = Device::cuda();
    o.compile.cuda_graphs = graphs;
    o.compile.cache = false;
    trainers.push_back(std::make_unique<train::Trainer>(*model, o));
    for (const auto& [name, t] : init) trainers.back()->set_param(name, t);
  }
  std::mt19937_64 rng(5);
  std::vector<int64_t> tok(4 * 32), tgt(4 * 32);
  for (auto& v : tok) v = int64_t(rng() % 65);
  for (auto& v : tgt) v = int64_t(rng() % 65);
  TensorMap in{{"tokens", Tensor::from_vector(tok, {4, 32}).to(Device::cuda())},
               {"targets", Tensor::from_vector(tgt, {4, 32}).to(Device::cuda())},
               {"pos", demo::positions(32).to(Device::cuda())}};
  for (int step = 0; step < 8; ++step) {
    double a = trainers[0]->step(in).at("loss").to_doubles()[0];
    double b = trainers[1]->step(in).at("loss").to_doubles()[0];
    EXPECT_EQ(a, b) << "step " << step;
  }
  for (const auto& [name, t] : init)
    EXPECT_EQ(bytes_of(trainers[0]->param(name)), bytes_of(trainers[1]->param(name))) << name;
  EXPECT_GE(trainers[0]->compiled().graph_launches(), 5u);
  EXPECT_EQ(trainers[1]->compiled().graph_launches(), 0u);
}

}  // namespace
}  // namespace rlx::test
