// rlx-bench-train: the time of one train step (forward, backward, gradient clipping,
// AdamW) in rlx and in PyTorch on the CPU, side by side, for the demo's GPT and for one
// BERT-base-sized encoder layer. The PyTorch side is bench/train_torch.py, run by this
// program with the same shapes and thread count; its results are parsed from its output.
//
//   rlx-bench-train [--threads N] [--steps S] [--warmup W] [--layer-batch B] [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model.h"
#include "rlx/rlx.h"

using namespace rlx;

namespace {

struct Options {
  int threads = int(std::thread::hardware_concurrency());
  int steps = 10, warmup = 2;
  int64_t layer_batch = 8;
};

struct Model {
  std::string title, shape, spec;  // spec: train_torch.py's name for the same model
  std::unique_ptr<Graph> graph;
  TensorMap inputs;
  int steps;
};

// The demo's GPT at the demo's sizes (63 characters: the KJV excerpt's vocabulary).
Model demo_gpt(const Options& o) {
  demo::GptConfig cfg{.vocab = 63, .context = demo::kSeq};
  std::vector<int64_t> tokens(size_t(demo::kBatch * demo::kSeq));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t(i * 7 % 63);
  Tensor t = Tensor::from_vector(tokens, {demo::kBatch, demo::kSeq});
  char spec[128];
  std::snprintf(spec, sizeof spec, "gpt:%lld:%lld:%lld:%lld:%lld:%lld", (long long)demo::kBatch,
                (long long)demo::kSeq, (long long)cfg.vocab, (long long)cfg.d_model,
                (long long)cfg.heads, (long long)cfg.layers);
  return {"demo GPT (d 96, 4 heads, 2 blocks)",
          std::to_string(demo::kBatch) + " x " + std::to_string(demo::kSeq),
          spec,
          demo::build_gpt(cfg, /*with_loss=*/true),
          {{"tokens", t}, {"targets", t}, {"pos", demo::positions(demo::kSeq)}},
          o.steps * 4};
}

// One BERT-base-sized encoder layer (d 768, 12 heads, FFN 3072, bidirectional), the
// demo's pre-norm block; the loss is the mean square of its output.
Model bert_layer(const Options& o) {
  const int64_t seq = 128, d = 768, heads = 12;
  auto g = std::make_unique<Graph>("bert_layer");
  Value x = g->input("x", {DType::f32, {o.layer_batch, seq, d}});
  Value y = demo::transformer_block(x, "layer", heads, /*causal=*/false);
  g->output(mean(y * y), "loss");
  return {"BERT-base layer (d 768, 12 heads, FFN 3072)",
          std::to_string(o.layer_batch) + " x " + std::to_string(seq),
          "layer:" + std::to_string(o.layer_batch) + ":128:768:12",
          std::move(g),
          {{"x", train::normal({o.layer_batch, seq, d}, 0, 1, 5)}},
          o.steps};
}

double rlx_ms_per_step(const Model& m, const Options& o) {
  train::TrainerOptions opts;
  opts.optimizer = std::make_shared<train::AdamW>();
  opts.schedule = train::constant_lr(1e-3);
  opts.clip_norm = 1.0;
  opts.compile.threads = o.threads;
  train::Trainer trainer(*m.graph, opts);
  for (const auto& [name, t] : demo::init_params(*m.graph, 1, 0)) trainer.set_param(name, t);
  for (int i = 0; i < o.warmup; ++i) trainer.step(m.inputs);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < m.steps; ++i) trainer.step(m.inputs);
  std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  return ms.count() / m.steps;
}

// The first interpreter that imports torch ("" when none does): $RLX_PYTHON when set, else
// Debian's python3 before the one on PATH.
std::string python_with_torch() {
  std::vector<std::string> candidates = {"/usr/bin/python3", "python3"};
  if (const char* env = std::getenv("RLX_PYTHON")) candidates = {env};
  for (const std::string& py : candidates)
    if (std::system((py + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return py;
  return {};
}

struct TorchResult {
  double ms = 0;
  int threads = 0;
};

// Runs train_torch.py on every model at once; results by spec (empty when it failed).
std::map<std::string, TorchResult> torch_ms_per_step(const std::vector<Model>& models,
                                                     const Options& o) {
  std::map<std::string, TorchResult> results;
  std::string python = python_with_torch();
  if (python.empty()) return results;
  for (const Model& m : models) {
    std::string cmd = python + " " RLX_TRAIN_TORCH_PY " threads=" + std::to_string(o.threads) +
                      " warmup=" + std::to_string(o.warmup) + " steps=" + std::to_string(m.steps) +
                      " " + m.spec;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) continue;
    char line[512], spec[256];
    TorchResult r;
    while (std::fgets(line, sizeof line, p))
      if (std::sscanf(line, "RESULT %255s %lf %d", spec, &r.ms, &r.threads) == 3) results[spec] = r;
    pclose(p);
  }
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (!std::strcmp(argv[i], "--threads"))
      o.threads = next();
    else if (!std::strcmp(argv[i], "--steps"))
      o.steps = next();
    else if (!std::strcmp(argv[i], "--warmup"))
      o.warmup = next();
    else if (!std::strcmp(argv[i], "--layer-batch"))
      o.layer_batch = next();
    else if (!std::strcmp(argv[i], "--quick"))
      o.steps = 2, o.warmup = 1, o.layer_batch = 2;
    else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--steps S] [--warmup W] "
                   "[--layer-batch B] [--quick]\n",
                   argv[0]);
      return 2;
    }
  }
  o.threads = std::max(o.threads, 1);
  try {
    std::vector<Model> models;
    models.push_back(demo_gpt(o));
    models.push_back(bert_layer(o));
    std::printf("train step = forward + backward + clip_norm 1.0 + AdamW, f32, CPU\n");
    std::vector<double> rlx_ms;
    for (const Model& m : models) rlx_ms.push_back(rlx_ms_per_step(m, o));
    auto torch = torch_ms_per_step(models, o);

    std::printf("\n%-44s %-9s %12s %12s %10s %9s\n", "model", "batch", "rlx ms/step",
                "torch ms/step", "rlx/torch", "threads");
    for (size_t i = 0; i < models.size(); ++i) {
      const Model& m = models[i];
      auto it = torch.find(m.spec);
      if (it == torch.end()) {
        std::printf("%-44s %-9s %12.2f %12s %10s %6d/-\n", m.title.c_str(), m.shape.c_str(),
                    rlx_ms[i], "n/a", "n/a", o.threads);
        continue;
      }
      std::printf("%-44s %-9s %12.2f %12.2f %9.2fx %6d/%d\n", m.title.c_str(), m.shape.c_str(),
                  rlx_ms[i], it->second.ms, rlx_ms[i] / it->second.ms, o.threads,
                  it->second.threads);
    }
    if (torch.size() < models.size())
      std::printf("\n(torch: n/a where python3 with torch is missing or the script failed)\n");
    std::printf("\nthreads: rlx CompileOptions::threads / torch.set_num_threads\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-bench-train: %s\n", e.what());
    return 1;
  }
}
