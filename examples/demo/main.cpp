// The main job of `make demo`: a small character-level GPT, built in the rlx IR, trained
// on the CPU on an excerpt of the King James Version (AdamW, warmup + cosine schedule,
// gradient clipping), checkpointed to safetensors and sampled from.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "data.h"
#include "model.h"
#include "plot.h"
#include "progress.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"
#include "sample.h"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

using demo::kBatch, demo::kSeq;
constexpr int64_t kSteps = 1500;

double scalar(const Tensor& t) { return t.to_doubles().at(0); }

TensorMap inputs(const demo::CharData::Batch& b) {
  return {{"tokens", b.tokens}, {"targets", b.targets}, {"pos", demo::positions(kSeq)}};
}

// Mean loss over a few random batches of one split: less noisy than a single batch.
double estimate_loss(const train::Trainer& trainer, const demo::CharData& data, bool train,
                     int batches, std::mt19937_64& rng) {
  double total = 0;
  for (int i = 0; i < batches; ++i)
    total += scalar(trainer.evaluate(inputs(data.sample(train, kBatch, kSeq, rng))).at("loss"));
  return total / batches;
}

// One thread unless RLX_DEMO_THREADS says otherwise: the kernels of a model this small
// gain little from a second core, and on a busy machine the threads' barriers cost more.
int threads() {
  const char* env = std::getenv("RLX_DEMO_THREADS");
  return env ? std::max(std::atoi(env), 0) : 1;
}

// The training loop, with a progress bar and a validation estimate every tenth of it.
std::vector<demo::LossPoint> train_loop(train::Trainer& trainer, const demo::CharData& data,
                                        std::mt19937_64& eval_rng) {
  std::mt19937_64 rng(7);
  std::vector<demo::LossPoint> curve;
  demo::Progress progress(kSteps);
  for (int64_t step = 1; step <= kSteps; ++step) {
    const double lr = trainer.lr();
    TensorMap out = trainer.step(inputs(data.sample(/*train=*/true, kBatch, kSeq, rng)));
    demo::LossPoint p{step, scalar(out.at("loss")), std::numeric_limits<double>::quiet_NaN(), lr};
    if (step % (kSteps / 10) == 0) p.val_loss = estimate_loss(trainer, data, false, 4, eval_rng);
    curve.push_back(p);
    progress.update(step, p.train_loss, kBatch * kSeq);
  }
  progress.finish();
  std::printf("  trained in %.1f s\n", progress.seconds());
  return curve;
}

// Saves a checkpoint, reads it back and binds its params to `targets`; checks that the
// reloaded model computes the trainer's loss on a batch. Returns whether it does.
bool checkpoint_round_trip(const train::Trainer& trainer, const fs::path& path,
                           const demo::CharData::Batch& batch,
                           std::vector<CompiledGraph*> targets) {
  trainer.save(path.string());
  SafetensorsFile file = load_safetensors(path.string());
  for (CompiledGraph* cg : targets)
    for (const std::string& name : cg->param_names()) cg->set_param(name, file.tensors.at(name));
  const double before = scalar(trainer.evaluate(inputs(batch)).at("loss"));
  const double after = scalar(targets[0]->run(inputs(batch)).at("loss"));
  // The reloaded model runs on the CPU: bit for bit the trainer's on the CPU, within
  // rounding of the GPU's kernels otherwise.
  const bool gpu = !trainer.compiled().device().is_cpu();
  const bool same = gpu ? std::abs(after - before) <= 1e-4 * std::abs(before) : after == before;
  std::printf(
      "  checkpoint %s (%zu tensors: params + AdamW state, %.0f KB, step %s) saved and "
      "reloaded: val loss %.6f %s %.6f before saving\n",
      path.c_str(), file.tensors.size(), double(fs::file_size(path)) / 1024,
      file.metadata.count("train.step") ? file.metadata.at("train.step").c_str() : "?", after,
      same ? (gpu ? "~=" : "==") : "!=", before);
  return same;
}

}  // namespace

int main() {
  try {
    const fs::path out_dir = RLX_DEMO_OUT;
    fs::create_directories(out_dir);
    demo::CharData data(RLX_DEMO_DATA);
    const double entropy = data.unigram_entropy();
    demo::GptConfig cfg{.vocab = data.vocab_size(), .context = kSeq};
    auto model = demo::build_gpt(cfg, /*with_loss=*/true);
    verify(*model);
    TensorMap init = demo::init_params(*model, cfg.layers, /*seed=*/1234);
    int64_t n_params = 0;
    for (const auto& [name, t] : init) n_params += t.numel();

    // AdamW with GPT-style betas, linear warmup then cosine decay, global-norm clipping.
    train::TrainerOptions opts;
    opts.optimizer = std::make_shared<train::AdamW>(0.9, 0.95, 1e-8, 0.1);
    opts.schedule = train::warmup_cosine(3e-3, kSteps / 20, kSteps, 3e-4);
    opts.clip_norm = 1.0;
    opts.compile.threads = threads();
    // The GPU when there is one (RLX_DEVICE=cpu keeps the CPU).
    const char* dev_env = std::getenv("RLX_DEVICE");
    const bool cpu_only = dev_env && std::string_view(dev_env) == "cpu";
    opts.device = cuda::available() && !cpu_only ? Device::cuda() : Device::cpu();
    train::Trainer trainer(*model, opts);
    for (const auto& [name, t] : init) trainer.set_param(name, t);

    std::printf("rlx %s — a character-level GPT on the King James Version\n", kVersion);
    std::printf("  data   %zu train / %zu val characters, vocabulary %lld\n", data.train_size(),
                data.val_size(), (long long)cfg.vocab);
    std::printf("  model  d_model %lld, %lld heads, %lld blocks, context %lld: %lld params\n",
                (long long)cfg.d_model, (long long)cfg.heads, (long long)cfg.layers,
                (long long)cfg.context, (long long)n_params);
    std::printf(
        "  train  %lld steps of %lld x %lld characters on %s, %d thread(s); %zu ops in the "
        "model, %zu in the train step, %zu after the compiler's passes\n",
        (long long)kSteps, (long long)kBatch, (long long)kSeq, opts.device.str().c_str(),
        opts.compile.threads, model->nodes().size(), trainer.train_graph().nodes().size(),
        trainer.compiled().lowered().nodes().size());
    // The train step as text, for `RLX_DEBUG=passes rlx report` and friends.
    const fs::path step_file = out_dir / "train_step.rlx";
    std::ofstream(step_file) << print_graph(trainer.train_graph());
    const MemoryStats mem = trainer.compiled().memory_stats({{"batch", kBatch}, {"seq", kSeq}});
    std::printf("         %s; arena %.1f MiB for %.1f MiB of intermediates\n\n", step_file.c_str(),
                double(mem.arena_bytes) / (1 << 20), double(mem.intermediate_bytes) / (1 << 20));
    std::fflush(stdout);  // before the progress bar on stderr

    std::mt19937_64 eval_rng(8);
    std::vector<demo::LossPoint> curve = train_loop(trainer, data, eval_rng);
    const double train_loss = estimate_loss(trainer, data, true, 16, eval_rng);
    const double val_loss = estimate_loss(trainer, data, false, 16, eval_rng);
    std::printf("  final loss %.3f train / %.3f val nats vs the unigram entropy %.3f nats\n",
                train_loss, val_loss, entropy);

    const std::string csv = (out_dir / "loss.csv").string(), png = (out_dir / "loss.png").string();
    demo::write_csv(csv, curve);
    if (demo::plot_png(csv, png, entropy))
      std::printf("  loss curve %s, %s\n", csv.c_str(), png.c_str());
    else
      std::printf("  loss curve %s (no PNG: gnuplot is not installed)\n", csv.c_str());

    // The sampler runs the model without the loss, for any sequence length up to the
    // context; one sequence at a time is too little work to split across threads.
    Session session(Device::cpu());
    CompiledGraph reloaded = session.compile(*model, opts.compile);
    auto eval_model = demo::build_gpt(cfg, /*with_loss=*/false);
    CompiledGraph sampler = session.compile(*eval_model, {.threads = 1});
    bool same =
        checkpoint_round_trip(trainer, out_dir / "gpt.safetensors",
                              data.sample(false, kBatch, kSeq, eval_rng), {&reloaded, &sampler});

    demo::SampleOptions so{.context = kSeq, .seed = 3};
    const std::string prompt = "And God said";
    std::string text = demo::sample(sampler, data, prompt, so);
    std::printf("\n  sample (temperature %.1f, top-%lld, from the reloaded checkpoint):\n\n%s%s\n",
                so.temperature, (long long)so.top_k, prompt.c_str(), text.c_str());
    return val_loss < entropy && same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-demo: %s\n", e.what());
    return 1;
  }
}
