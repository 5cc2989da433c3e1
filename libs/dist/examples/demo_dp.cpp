// `make demo-dp`: the demo's character-level GPT trained data-parallel across processes,
// `mpirun -np 2 rlx-demo-dp [STEPS]`. Each rank trains on its shard of the text's
// windows (DistributedSampler); gradients are all-reduced inside the compiled step; rank
// 0 alone prints and writes the checkpoint. Exits 1 unless the loss fell and every rank
// ends with the same params.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "data.h"
#include "model.h"
#include "rlx/dist.h"
#include "rlx/rlx.h"

using namespace rlx;
using demo::kBatch, demo::kSeq;

namespace {

double scalar(const Tensor& t) { return t.to_doubles().at(0); }

// The largest |difference| between any two ranks' values of every trained param.
double spread(const train::Trainer& t, const dist::ProcessGroup& pg) {
  double worst = 0;
  for (const std::string& p : t.trained_params()) {
    Tensor v = t.param(p).to(Device::cpu());
    Tensor hi = pg.all_reduce(v, dist::ReduceOp::max), lo = pg.all_reduce(v, dist::ReduceOp::min);
    auto a = hi.to_doubles(), b = lo.to_doubles();
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, a[i] - b[i]);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  dist::ProcessGroup& pg = dist::init();
  return dist::run_or_abort([&] {
    const int64_t steps = argc > 1 ? std::max(std::atoll(argv[1]), 1LL) : 300;
    const bool main_rank = pg.rank() == 0;
    demo::CharData data(RLX_DEMO_DATA);
    demo::GptConfig cfg{.vocab = data.vocab_size(), .context = kSeq};
    auto model = demo::build_gpt(cfg, /*with_loss=*/true);

    train::TrainerOptions opts;
    opts.optimizer = std::make_shared<train::AdamW>(0.9, 0.95, 1e-8, 0.1);
    opts.schedule = train::warmup_cosine(3e-3, std::max<int64_t>(steps / 20, 1), steps, 3e-4);
    opts.clip_norm = 1.0;
    opts.compile.threads = 1;
    const char* dev = std::getenv("RLX_DEVICE");
    opts.device = dev && std::string_view(dev) == "cpu" ? Device::cpu() : dist::local_device();
    dist::data_parallel(opts, pg);
    train::Trainer trainer(*model, opts);
    // Each rank draws other initial values; broadcast_params makes them rank 0's.
    for (auto& [n, t] : demo::init_params(*model, cfg.layers, 1234 + uint64_t(pg.rank())))
      trainer.set_param(n, t);
    dist::broadcast_params(trainer, pg);

    // The global batch is the single-process demo's (kBatch windows), split over the ranks.
    const int64_t per_rank = std::max<int64_t>(kBatch / pg.size(), 1);
    dist::DistributedSampler sampler(data.num_windows(true, kSeq), pg, /*shuffle=*/true,
                                     /*seed=*/0, /*drop_last=*/true);
    if (main_rank)
      std::printf("rlx-demo-dp: %d ranks on %s, %lld steps of %d x %lld windows of %lld chars\n",
                  pg.size(), opts.device.str().c_str(), (long long)steps, pg.size(),
                  (long long)per_rank, (long long)kSeq);
    double first = 0, last = 0;
    std::vector<int64_t> order;
    size_t next = 0;
    for (int64_t step = 1, epoch = 0; step <= steps; ++step) {
      if (next + size_t(per_rank) > order.size()) {
        sampler.set_epoch(epoch++);
        order = sampler.indices();
        next = 0;
      }
      std::vector<int64_t> starts;
      for (int64_t i = 0; i < per_rank; ++i) starts.push_back(order[next++] * kSeq);
      demo::CharData::Batch b = data.windows(true, starts, kSeq);
      TensorMap out = trainer.step(
          {{"tokens", b.tokens}, {"targets", b.targets}, {"pos", demo::positions(kSeq)}});
      // The global batch's loss: the mean of the ranks' shard losses.
      last = scalar(pg.all_reduce(out.at("loss").to(Device::cpu()), dist::ReduceOp::mean));
      if (step == 1) first = last;
      if (main_rank && (step == 1 || step % std::max<int64_t>(steps / 10, 1) == 0))
        std::printf("  step %5lld  loss %.4f  lr %.2e\n", (long long)step, last,
                    opts.schedule(step - 1));
    }
    const double diff = spread(trainer, pg);
    const std::filesystem::path ckpt = std::filesystem::path(RLX_DEMO_OUT) / "gpt_dp.safetensors";
    std::filesystem::create_directories(ckpt.parent_path());
    trainer.save(ckpt.string());  // rank 0 only
    if (main_rank)
      std::printf("  loss %.4f -> %.4f; params across ranks differ by at most %g; checkpoint %s\n",
                  first, last, diff, ckpt.c_str());
    if (!(last < first) || diff != 0) {
      if (main_rank) std::fprintf(stderr, "rlx-demo-dp: the loss did not fall or ranks diverged\n");
      std::exit(1);  // every rank reaches this alike
    }
  });
}
