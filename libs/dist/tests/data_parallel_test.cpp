// Data-parallel training of the demo's GPT under mpirun -np 2: after N steps every rank's
// params equal those of one process trained on the combined batch (which each rank also
// runs, as the reference), within f32 rounding (1e-3 of how far they moved).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "dist_test_util.h"
#include "model.h"

using namespace rlx;

namespace {

constexpr int64_t kPerRank = 2, kSeq = 8, kSteps = 6;

demo::GptConfig config() {
  demo::GptConfig c;
  c.vocab = 13;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.context = kSeq;
  return c;
}

// The combined batch of step s: the same on every rank. tokens / targets [rows, kSeq].
std::pair<Tensor, Tensor> combined_batch(int64_t rows, int64_t step) {
  std::mt19937_64 rng(1000 + uint64_t(step));
  std::vector<int64_t> tok(size_t(rows * kSeq)), tgt(tok.size());
  for (auto& t : tok) t = int64_t(rng() % uint64_t(config().vocab));
  for (auto& t : tgt) t = int64_t(rng() % uint64_t(config().vocab));
  return {Tensor::from_vector(tok, {rows, kSeq}), Tensor::from_vector(tgt, {rows, kSeq})};
}

Tensor rows_of(const Tensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> all = t.to_vector<int64_t>(), out;
  for (int64_t r : rows)
    out.insert(out.end(), all.begin() + r * kSeq, all.begin() + (r + 1) * kSeq);
  return Tensor::from_vector(out, {int64_t(rows.size()), kSeq});
}

TensorMap inputs(const Tensor& tokens, const Tensor& targets) {
  return {{"tokens", tokens}, {"targets", targets}, {"pos", demo::positions(kSeq)}};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_doubles(), y = b.to_doubles();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

void check_equivalence(std::shared_ptr<train::Optimizer> optimizer, double lr) {
  dist::ProcessGroup& pg = dist::world();
  const int64_t rows = kPerRank * pg.size();
  auto model = demo::build_gpt(config(), /*with_loss=*/true);

  train::TrainerOptions base;
  base.optimizer = optimizer;
  base.schedule = train::constant_lr(lr);
  base.clip_norm = 0.5;  // the clipping norm must be the global one
  train::TrainerOptions dp_opts = base;
  dist::DataParallelOptions dpo;
  dpo.bucket_bytes = 8 << 10;  // small: several buckets for this model
  dist::data_parallel(dp_opts, pg, dpo);

  train::Trainer ref(*model, base), dp(*model, dp_opts);
  for (auto& [n, t] : demo::init_params(*model, config().layers, 7)) ref.set_param(n, t);
  // Each rank starts from other values: broadcast_params must make them rank 0's.
  for (auto& [n, t] : demo::init_params(*model, config().layers, 7 + uint64_t(pg.rank())))
    dp.set_param(n, t);
  dist::broadcast_params(dp, pg);

  const auto& report = dp.compiled().report();
  if (pg.size() > 1) {
    int reduces = report.count("dist.all_reduce", DispatchPath::native);
    EXPECT_GE(reduces, 2) << report.str();                                   // several buckets…
    EXPECT_LT(size_t(reduces), dp.trained_params().size()) << report.str();  // …not one per param
  }

  dist::DistributedSampler sampler(rows, pg, /*shuffle=*/true, /*seed=*/5);
  for (int64_t s = 0; s < kSteps; ++s) {
    auto [tokens, targets] = combined_batch(rows, s);
    sampler.set_epoch(s);
    std::vector<int64_t> mine = sampler.indices();
    ASSERT_EQ(int64_t(mine.size()), kPerRank);
    TensorMap r = ref.step(inputs(tokens, targets));
    TensorMap d = dp.step(inputs(rows_of(tokens, mine), rows_of(targets, mine)));
    // The shards' mean loss is the combined batch's; the norm is the global one.
    double mean_loss = pg.all_reduce(d.at("loss"), dist::ReduceOp::mean).to_doubles()[0];
    EXPECT_NEAR(mean_loss, r.at("loss").to_doubles()[0], 1e-5) << "step " << s;
    const double norm = r.at("train.grad_norm").to_doubles()[0];
    EXPECT_NEAR(d.at("train.grad_norm").to_doubles()[0], norm, 1e-4 * norm) << "step " << s;
  }
  // The params must have moved, or the comparison proves nothing.
  auto init = demo::init_params(*model, config().layers, 7);
  double moved = 0;
  for (const std::string& p : ref.trained_params())
    moved = std::max(moved, max_abs_diff(ref.param(p), init.at(p)));
  EXPECT_GT(moved, 1e-2);
  // Both runs compute the same sums in another order (two shards reduced, against one
  // batch), so they part by f32 rounding, which AdamW's normalised steps amplify where a
  // gradient is near zero: a bound of 1e-3 of how far the params moved, far below what a
  // wrong reduction (a lost bucket, a shard's own clipping norm) gives; the norm check above
  // catches a sum for a mean, to which AdamW's steps are blind.
  double worst = 0;
  for (const std::string& p : ref.trained_params()) {
    double diff = max_abs_diff(dp.param(p), ref.param(p));
    EXPECT_LE(diff, 1e-3 * moved) << p;
    worst = std::max(worst, diff);
  }
  std::printf("[rank %d] %s: max |dp - single| = %.3g after %lld steps (params moved %.3g)\n",
              pg.rank(), optimizer->name().c_str(), worst, (long long)kSteps, moved);
}

}  // namespace

TEST(DataParallel, AdamWMatchesOneProcessOnTheCombinedBatch) {
  check_equivalence(std::make_shared<train::AdamW>(), 1e-2);
}

TEST(DataParallel, SgdMomentumMatchesOneProcessOnTheCombinedBatch) {
  check_equivalence(std::make_shared<train::SGD>(0.9), 0.3);
}

TEST(DataParallel, OnlyRankZeroWritesCheckpoints) {
  dist::ProcessGroup& pg = dist::world();
  auto model = demo::build_gpt(config(), true);
  train::TrainerOptions o;
  dist::data_parallel(o, pg);
  train::Trainer t(*model, o);
  for (auto& [n, v] : demo::init_params(*model, config().layers, 1)) t.set_param(n, v);
  // A per-rank file name, so that each rank can see whether it wrote.
  auto dir = std::filesystem::temp_directory_path() / ("rlx_dist_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / "ckpt.safetensors";
  t.save(path.string());
  EXPECT_EQ(std::filesystem::exists(path), pg.rank() == 0);
  std::filesystem::remove_all(dir);
}

TEST(DataParallel, BadOptionsAreTypedErrors) {
  train::TrainerOptions o;
  EXPECT_THROW(dist::data_parallel(o, dist::world(), {.op = dist::ReduceOp::max}), ValueError);
  EXPECT_THROW(dist::DistributedSampler(-1, dist::world()), ValueError);
  auto model = demo::build_gpt(config(), true);
  o.grad_transform = [](Graph&, const std::vector<std::string>&, std::vector<Value> g) {
    g.pop_back();
    return g;
  };
  EXPECT_THROW(train::Trainer(*model, o), ValueError);
}

RLX_DIST_TEST_MAIN()
