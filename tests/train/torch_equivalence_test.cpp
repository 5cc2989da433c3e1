// rlx against PyTorch: the same models (an MLP, and the demo's GPT with its pre-norm
// transformer blocks) from the same initial weights on the same batches, in f64, for ten
// AdamW steps. The loss, every gradient, the gradient norm and the final params must
// agree to 1e-5 (relative). The reference runs in tests/train/torch_ref.py; the test
// skips, visibly, when python3 with torch is not installed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "model.h"
#include "rlx/rlx.h"

namespace fs = std::filesystem;
using namespace rlx;

namespace {

constexpr int kSteps = 10;
constexpr double kTol = 1e-5;

// The first interpreter that imports torch and numpy ("" when none does): $RLX_PYTHON
// when set, else Debian's python3 before the one on PATH (pyenv, a venv), which may lack
// torch.
const std::string& python_with_torch() {
  static const std::string found = [] {
    std::vector<std::string> candidates = {"/usr/bin/python3", "python3"};
    if (const char* env = std::getenv("RLX_PYTHON")) candidates = {env};
    for (const std::string& py : candidates)
      if (std::system((py + " -c 'import torch, numpy' >/dev/null 2>&1").c_str()) == 0) return py;
    return std::string();
  }();
  return found;
}

struct Hyper {
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-8, weight_decay = 0.05, clip = 0;
  double peak_lr = 1e-2;
  int64_t warmup = 3;
};

// Worst element of |a - b| / (|b| + floor), with the floor 1e-3 of b's largest magnitude
// so that entries that are zero up to rounding do not blow the ratio up.
double rel_error(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  EXPECT_EQ(x.size(), y.size());
  double scale = 0, worst = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / (std::abs(y[i]) + 1e-3 * scale + 1e-300));
  return worst;
}

// Trains `model` in rlx and in PyTorch and compares them step by step.
void compare_with_torch(const Graph& model, const TensorMap& init,
                        const std::vector<TensorMap>& batches, const Hyper& hp,
                        const std::string& torch_args) {
  const std::string& python = python_with_torch();
  if (python.empty()) GTEST_SKIP() << "python3 with torch (Debian python3-torch) not found";
  const fs::path dir =
      fs::temp_directory_path() / ("rlx-torch-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto file = [&](const std::string& name) { return (dir / (name + ".npy")).string(); };

  train::TrainerOptions opts;
  opts.optimizer = std::make_shared<train::AdamW>(hp.beta1, hp.beta2, hp.eps, hp.weight_decay);
  opts.schedule = train::warmup_cosine(hp.peak_lr, hp.warmup, kSteps, hp.peak_lr / 10);
  opts.clip_norm = hp.clip;
  train::Trainer trainer(model, opts);
  // The raw gradients (the Trainer only outputs their norm): value_and_grad of the model,
  // run at each step's params.
  CompiledGraph vg = Session().compile(*value_and_grad(model));
  for (const auto& [name, t] : init) {
    trainer.set_param(name, t);
    save_npy(file("p." + name), t);
  }

  std::vector<double> lrs, losses, norms;
  std::vector<TensorMap> grads;
  for (int step = 0; step < kSteps; ++step) {
    for (const auto& [name, t] : batches[size_t(step)])
      save_npy(file("in." + std::to_string(step) + "." + name), t);
    for (const auto& [name, t] : init) vg.set_param(name, trainer.param(name));
    TensorMap g = vg.run(batches[size_t(step)]);
    lrs.push_back(trainer.lr());
    TensorMap out = trainer.step(batches[size_t(step)]);
    losses.push_back(out.at("loss").to_doubles()[0]);
    norms.push_back(out.at("train.grad_norm").to_doubles()[0]);
    EXPECT_NEAR(g.at("loss").to_doubles()[0], losses.back(), 1e-12 * std::abs(losses.back()))
        << "value_and_grad vs Trainer at step " << step;
    grads.push_back(std::move(g));
  }
  save_npy(file("lr"), Tensor::from_vector(lrs, {kSteps}));

  char args[512];
  std::snprintf(args, sizeof args,
                " steps=%d beta1=%.17g beta2=%.17g eps=%.17g weight_decay=%.17g clip=%.17g", kSteps,
                hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.clip);
  const std::string cmd =
      python + " " RLX_TORCH_REF " " + dir.string() + " " + torch_args + args + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  double worst_grad = 0, worst_param = 0;
  for (int step = 0; step < kSteps; ++step) {
    const std::string s = "out." + std::to_string(step) + ".";
    const double loss = load_npy(file(s + "loss")).to_doubles()[0];
    EXPECT_NEAR(losses[size_t(step)], loss, kTol * std::abs(loss)) << "loss at step " << step;
    const double norm = load_npy(file(s + "grad_norm")).to_doubles()[0];
    EXPECT_NEAR(norms[size_t(step)], norm, kTol * norm) << "grad norm at step " << step;
    for (const auto& [name, t] : init) {
      double e =
          rel_error(grads[size_t(step)].at("grad." + name), load_npy(file(s + "grad." + name)));
      EXPECT_LE(e, kTol) << "gradient of " << name << " at step " << step;
      worst_grad = std::max(worst_grad, e);
    }
  }
  for (const auto& [name, t] : init) {
    double e = rel_error(trainer.param(name), load_npy(file("out.final." + name)));
    EXPECT_LE(e, kTol) << "final value of " << name;
    worst_param = std::max(worst_param, e);
  }
  std::printf(
      "  %zu params, %d steps: loss %.6f -> %.6f; worst relative error: gradients "
      "%.2e, final params %.2e\n",
      init.size(), kSteps, losses.front(), losses.back(), worst_grad, worst_param);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// Random f64 values for every param of g: norm scales near 1, everything else N(0, 0.3)
// (biases too, so that their gradients are exercised from the first step).
TensorMap random_params(const Graph& g, uint64_t seed) {
  TensorMap params;
  for (const Arg& a : g.args()) {
    if (a.kind != ArgKind::param) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : a.value.shape()) shape.push_back(d.value());
    bool scale = a.name.size() > 6 && a.name.substr(a.name.size() - 6) == ".scale";
    params[a.name] = train::normal(shape, scale ? 1.0 : 0.0, 0.3, seed++, DType::f64);
  }
  return params;
}

Tensor random_ints(std::vector<int64_t> shape, int64_t high, std::mt19937_64& rng) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& e : v) e = int64_t(rng() % uint64_t(high));
  return Tensor::from_vector(v, std::move(shape));
}

TEST(TorchEquivalence, Mlp) {
  Graph g("mlp");
  const int64_t n = 12, in = 8, hidden = 16, classes = 5;
  Value x = g.input("x", {DType::f64, {n, in}});
  Value labels = g.input("labels", {DType::i64, {n}});
  auto param = [&](const char* name, Shape s) { return g.param(name, {DType::f64, s}); };
  Value h = gelu(matmul(x, param("w1", {in, hidden})) + param("b1", {hidden}));
  Value logits = matmul(h, param("w2", {hidden, classes})) + param("b2", {classes});
  g.output(op("cross_entropy", {logits, labels}, {{"label_smoothing", 0.1}}), "loss");

  std::mt19937_64 rng(1);
  std::vector<TensorMap> batches;
  for (int s = 0; s < kSteps; ++s)
    batches.push_back({{"x", train::normal({n, in}, 0, 1, uint64_t(100 + s), DType::f64)},
                       {"labels", random_ints({n}, classes, rng)}});
  compare_with_torch(g, random_params(g, 1), batches, Hyper{}, "model=mlp smoothing=0.1");
}

// The demo's GPT (examples/demo/model.cpp) at toy size, in f64: embeddings, two pre-norm
// blocks (causal multi-head attention, GELU MLP), the tied head; clipping on.
TEST(TorchEquivalence, TransformerBlocks) {
  demo::GptConfig cfg{
      .vocab = 11, .d_model = 8, .heads = 2, .layers = 2, .context = 6, .dtype = DType::f64};
  auto g = demo::build_gpt(cfg, /*with_loss=*/true);
  const int64_t batch = 3, seq = 6;
  std::mt19937_64 rng(2);
  std::vector<TensorMap> batches;
  for (int s = 0; s < kSteps; ++s)
    batches.push_back({{"tokens", random_ints({batch, seq}, cfg.vocab, rng)},
                       {"targets", random_ints({batch, seq}, cfg.vocab, rng)},
                       {"pos", demo::positions(seq)}});
  Hyper hp;
  hp.clip = 0.3;  // below the gradient norms: the clipping is exercised
  compare_with_torch(*g, random_params(*g, 7), batches, hp, "model=gpt heads=2 layers=2");
}

}  // namespace
