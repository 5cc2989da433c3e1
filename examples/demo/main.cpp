// The main job of `make demo`: a small character-level GPT, built in the rlx IR, trained
// on the CPU on an excerpt of the King James Version (AdamW, warmup + cosine schedule,
// gradient clipping), checkpointed to safetensors and sampled from.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>

#include "data.h"
#include "model.h"
#include "plot.h"
#include "progress.h"
#include "rlx/rlx.h"
#include "sample.h"

using namespace rlx;

namespace {

using demo::kBatch, demo::kSeq;
constexpr int64_t kSteps = 1500;

double scalar(const Tensor& t) { return t.to_doubles().at(0); }

// Mean loss over a few random batches of one split: less noisy than a single batch.
double estimate_loss(const train::Trainer& trainer, const demo::CharData& data, bool train,
                     int batches, std::mt19937_64& rng) {
  double total = 0;
  for (int i = 0; i < batches; ++i) {
    auto b = data.sample(train, kBatch, kSeq, rng);
    total += scalar(
        trainer
            .evaluate(
                {{"tokens", b.tokens}, {"targets", b.targets}, {"pos", demo::positions(kSeq)}})
            .at("loss"));
  }
  return total / batches;
}

// One thread unless RLX_DEMO_THREADS says otherwise: the kernels of a model this small
// gain little from a second core, and on a busy machine the threads' barriers cost more.
int threads() {
  const char* env = std::getenv("RLX_DEMO_THREADS");
  return env ? std::max(std::atoi(env), 0) : 1;
}

int64_t count_params(const TensorMap& params) {
  int64_t n = 0;
  for (const auto& [name, t] : params) n += t.numel();
  return n;
}

}  // namespace

int main() {
  try {
    const std::filesystem::path out_dir = RLX_DEMO_OUT;
    std::filesystem::create_directories(out_dir);
    demo::CharData data(RLX_DEMO_DATA);
    const double entropy = data.unigram_entropy();
    demo::GptConfig cfg{.vocab = data.vocab_size(), .context = kSeq};

    auto model = demo::build_gpt(cfg, /*with_loss=*/true);
    verify(*model);
    TensorMap init = demo::init_params(*model, cfg.layers, /*seed=*/1234);
    std::printf("rlx %s — a character-level GPT on the King James Version\n", kVersion);
    std::printf("  data   %zu train / %zu val characters, vocabulary %lld\n", data.train_size(),
                data.val_size(), (long long)cfg.vocab);
    std::printf(
        "  model  d_model %lld, %lld heads, %lld blocks, context %lld: %lld params, %zu ops\n",
        (long long)cfg.d_model, (long long)cfg.heads, (long long)cfg.layers, (long long)cfg.context,
        (long long)count_params(init), model->nodes().size());

    // AdamW with GPT-style betas, linear warmup then cosine decay, global-norm clipping.
    train::TrainerOptions opts;
    opts.optimizer = std::make_shared<train::AdamW>(0.9, 0.95, 1e-8, 0.1);
    opts.schedule = train::warmup_cosine(3e-3, kSteps / 20, kSteps, 3e-4);
    opts.clip_norm = 1.0;
    opts.compile.threads = threads();
    train::Trainer trainer(*model, opts);
    for (const auto& [name, t] : init) trainer.set_param(name, t);
    std::printf("  train  batch %lld x seq %lld, %lld steps, %d thread(s); train graph %zu ops\n\n",
                (long long)kBatch, (long long)kSeq, (long long)kSteps, opts.compile.threads,
                trainer.train_graph().nodes().size());

    std::mt19937_64 rng(7), eval_rng(8);
    std::vector<demo::LossPoint> curve;
    const Tensor pos = demo::positions(kSeq);
    demo::Progress progress(kSteps);
    for (int64_t step = 1; step <= kSteps; ++step) {
      auto b = data.sample(/*train=*/true, kBatch, kSeq, rng);
      const double lr = trainer.lr();
      TensorMap out = trainer.step({{"tokens", b.tokens}, {"targets", b.targets}, {"pos", pos}});
      demo::LossPoint p{step, scalar(out.at("loss")), std::numeric_limits<double>::quiet_NaN(), lr};
      if (step % (kSteps / 10) == 0) p.val_loss = estimate_loss(trainer, data, false, 4, eval_rng);
      curve.push_back(p);
      progress.update(step, p.train_loss, kBatch * kSeq);
    }
    progress.finish();

    const double train_loss = estimate_loss(trainer, data, true, 16, eval_rng);
    const double val_loss = estimate_loss(trainer, data, false, 16, eval_rng);
    std::printf("\n  trained in %.1f s: loss %.3f train / %.3f val nats vs unigram entropy %.3f",
                progress.seconds(), train_loss, val_loss, entropy);
    std::printf(" (%.0f%% of it)\n", 100 * val_loss / entropy);

    const std::string csv = (out_dir / "loss.csv").string(), png = (out_dir / "loss.png").string();
    demo::write_csv(csv, curve);
    if (demo::plot_png(csv, png, entropy))
      std::printf("  loss curve: %s, %s\n", csv.c_str(), png.c_str());
    else
      std::printf("  loss curve: %s (no PNG: gnuplot is not installed)\n", csv.c_str());

    // Checkpoint round trip: save, read the file back, run the model from its tensors.
    const std::string ckpt = (out_dir / "gpt.safetensors").string();
    trainer.save(ckpt);
    SafetensorsFile file = load_safetensors(ckpt);
    Session session(Device::cpu());
    CompiledGraph reloaded = session.compile(*model, opts.compile);
    auto sampler_graph = demo::build_gpt(cfg, /*with_loss=*/false);
    // One sequence at a time is too little work to split across threads.
    CompiledGraph sampler = session.compile(*sampler_graph, {.threads = 1});
    for (const std::string& name : reloaded.param_names()) {
      reloaded.set_param(name, file.tensors.at(name));
      sampler.set_param(name, file.tensors.at(name));
    }
    auto b = data.sample(/*train=*/false, kBatch, kSeq, eval_rng);
    TensorMap batch{{"tokens", b.tokens}, {"targets", b.targets}, {"pos", pos}};
    const double before = scalar(trainer.evaluate(batch).at("loss"));
    const double after = scalar(reloaded.run(batch).at("loss"));
    std::printf(
        "  checkpoint: %s (%zu tensors, %.0f KB, step %s) reloaded: val loss %.6f %s %.6f\n",
        ckpt.c_str(), file.tensors.size(), double(std::filesystem::file_size(ckpt)) / 1024,
        file.metadata.count("train.step") ? file.metadata.at("train.step").c_str() : "?", after,
        after == before ? "==" : "!=", before);

    demo::SampleOptions so{.context = kSeq, .seed = 3};
    const std::string prompt = "And God said";
    std::string text = demo::sample(sampler, data, prompt, so);
    std::printf("\n  sample (temperature %.1f, top-%lld):\n\n%s%s\n", so.temperature,
                (long long)so.top_k, prompt.c_str(), text.c_str());
    return val_loss < entropy && after == before ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-demo: %s\n", e.what());
    return 1;
  }
}
