// rlx-bench-dist: the GPT-2-small train step (the demo's model, AdamW, auto-bf16 mixed
// precision) data-parallel over the ranks of a launch, one GPU each; scaling.sh runs it at
// 1 and N ranks next to PyTorch DDP (ddp_torch.py). Rank 0 prints one line:
//   rlx world=N batch=B seq=S step_ms=… tokens_per_s=…
// With one rank it trains without data_parallel (the single-GPU baseline). Options:
// --batch B (per rank, 8) --seq S (1024) --steps N (10) --warmup W (3) --layers L (12)
// --d D (768) --heads H (12) --vocab V (50304) --precision auto_bf16|f32.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "model.h"
#include "rlx/cuda.h"
#include "rlx/dist.h"
#include "rlx/rlx.h"

using namespace rlx;

int main(int argc, char** argv) {
  dist::ProcessGroup& pg = dist::init();
  return dist::run_or_abort([&] {
    int64_t batch = 8, seq = 1024, steps = 10, warmup = 3;
    demo::GptConfig cfg{.vocab = 50304, .d_model = 768, .heads = 12, .layers = 12, .context = 0};
    std::string precision = "auto_bf16";
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string k = argv[i];
      const char* v = argv[i + 1];
      if (k == "--batch")
        batch = std::atoll(v);
      else if (k == "--seq")
        seq = std::atoll(v);
      else if (k == "--steps")
        steps = std::atoll(v);
      else if (k == "--warmup")
        warmup = std::atoll(v);
      else if (k == "--layers")
        cfg.layers = std::atoll(v);
      else if (k == "--d")
        cfg.d_model = std::atoll(v);
      else if (k == "--heads")
        cfg.heads = std::atoll(v);
      else if (k == "--vocab")
        cfg.vocab = std::atoll(v);
      else if (k == "--precision")
        precision = v;
      else
        throw ValueError("rlx-bench-dist: unknown option " + k);
    }
    cfg.context = seq;
    auto model = demo::build_gpt(cfg, /*with_loss=*/true);
    train::TrainerOptions opts;
    opts.device = dist::local_device();
    opts.optimizer = std::make_shared<train::AdamW>();
    opts.compile.precision = precision == "f32" ? Precision::f32 : Precision::auto_bf16;
    if (pg.size() > 1) dist::data_parallel(opts, pg);
    train::Trainer trainer(*model, opts);
    for (auto& [n, t] : demo::init_params(*model, cfg.layers, 1)) trainer.set_param(n, t);
    dist::broadcast_params(trainer, pg);

    std::mt19937_64 rng(100 + uint64_t(pg.rank()));  // each rank its own data
    std::vector<int64_t> tok(size_t(batch * seq)), tgt(tok.size());
    for (auto& v : tok) v = int64_t(rng() % uint64_t(cfg.vocab));
    for (auto& v : tgt) v = int64_t(rng() % uint64_t(cfg.vocab));
    TensorMap in{{"tokens", Tensor::from_vector(tok, {batch, seq}).to(opts.device)},
                 {"targets", Tensor::from_vector(tgt, {batch, seq}).to(opts.device)},
                 {"pos", demo::positions(seq).to(opts.device)}};
    auto sync = [&] {
      if (!opts.device.is_cpu()) cuda::synchronize(opts.device.index);
    };
    for (int64_t i = 0; i < warmup; ++i) trainer.step(in);
    sync();
    pg.barrier();
    std::vector<double> ms;
    double loss = 0;
    for (int64_t i = 0; i < steps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      TensorMap out = trainer.step(in);
      sync();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (i + 1 == steps) loss = out.at("loss").to_doubles()[0];
    }
    // The slowest rank's median sets the pace.
    std::sort(ms.begin(), ms.end());
    double med = ms[ms.size() / 2];
    med = pg.all_reduce(Tensor::full(DType::f64, {}, med), dist::ReduceOp::max).to_doubles()[0];
    if (pg.rank() == 0)
      std::printf(
          "rlx world=%d batch=%lld seq=%lld step_ms=%.2f tokens_per_s=%.0f loss=%.4f on %s\n",
          pg.size(), (long long)batch, (long long)seq, med,
          double(batch * seq * pg.size()) / (med / 1e3), loss, opts.device.str().c_str());
  });
}
