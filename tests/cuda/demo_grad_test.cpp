// The `make demo` model (examples/demo: a small GPT) on cuda: its loss and every gradient
// match the CPU's to 1e-4, and the dispatch report of the train step says which ops still
// take the host path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "model.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

Tensor random_tokens(std::vector<int64_t> shape, int64_t vocab, std::mt19937_64& rng) {
  std::vector<int64_t> v;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t i = 0; i < n; ++i) v.push_back(int64_t(rng() % uint64_t(vocab)));
  return Tensor::from_vector(v, std::move(shape));
}

double rel_error(const Tensor& got, const Tensor& want) {
  std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    diff = std::max(diff, std::abs(g[i] - w[i]));
    norm = std::max(norm, std::abs(w[i]));
  }
  return diff / std::max(norm, 1e-30);
}

TEST(CudaDemo, TrainStepGradientsMatchTheCpu) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  demo::GptConfig cfg{.vocab = 65, .d_model = 96, .heads = 4, .layers = 2, .context = 64};
  auto model = demo::build_gpt(cfg, /*with_loss=*/true);
  auto vg = value_and_grad(*model);
  CompiledGraph cpu = Session().compile(*vg);
  CompiledGraph gpu = Session(Device::cuda()).compile(*vg);
  std::fprintf(stderr, "%s", gpu.report().str().c_str());
  for (const auto& [name, t] : demo::init_params(*model, cfg.layers, 5)) {
    cpu.set_param(name, t);
    gpu.set_param(name, t.to(Device::cuda()));
  }
  std::mt19937_64 rng(3);
  TensorMap in{{"tokens", random_tokens({8, 64}, cfg.vocab, rng)},
               {"targets", random_tokens({8, 64}, cfg.vocab, rng)},
               {"pos", demo::positions(64)}};
  TensorMap want = cpu.run(in), got = gpu.run(in);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (const auto& [name, t] : want) {
    double e = rel_error(got.at(name), t);
    EXPECT_LE(e, 1e-4) << name;
    worst = std::max(worst, e);
  }
  std::fprintf(stderr, "%zu outputs, worst relative error %.2e, loss %.6f\n", want.size(), worst,
               want.at("loss").to_doubles()[0]);
}

}  // namespace
}  // namespace rlx
