// rlx-bench-memory: the memory plan of the demo's GPT train step (forward, backward,
// gradient clipping, AdamW): the arena's peak against the sum of every intermediate, for
// both packing strategies, and the step time with the arena on and off (RLX_ARENA=0).
//
//   rlx-bench-memory [--threads N] [--steps S] [--layers L]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model.h"
#include "rlx/rlx.h"
#include "rlx/settings.h"

using namespace rlx;

namespace {

struct Options {
  int threads = int(std::thread::hardware_concurrency());
  int steps = 20;
  int64_t layers = 2;
};

double mib(size_t bytes) { return double(bytes) / (1 << 20); }

// A trainer for the demo GPT, compiled under the environment as it is when called (the
// arena switch and the packing are read when a graph is compiled).
std::unique_ptr<train::Trainer> make_trainer(const Graph& model, const Options& o) {
  train::TrainerOptions opts;
  opts.optimizer = std::make_shared<train::AdamW>();
  opts.schedule = train::constant_lr(1e-3);
  opts.clip_norm = 1.0;
  opts.compile.threads = o.threads;
  auto t = std::make_unique<train::Trainer>(model, opts);
  for (const auto& [name, v] : demo::init_params(model, o.layers, 0)) t->set_param(name, v);
  return t;
}

double ms_per_step(train::Trainer& t, const TensorMap& in, int steps) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) t.step(in);
  std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
  return ms.count() / steps;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (!std::strcmp(argv[i], "--threads")) {
      o.threads = next();
    } else if (!std::strcmp(argv[i], "--steps")) {
      o.steps = next();
    } else if (!std::strcmp(argv[i], "--layers")) {
      o.layers = next();
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--steps S] [--layers L]\n", argv[0]);
      return 2;
    }
  }
  o.threads = std::max(o.threads, 1);
  o.steps = std::max(o.steps, 1);
  try {
    demo::GptConfig cfg{.vocab = 63, .layers = o.layers, .context = demo::kSeq};
    std::unique_ptr<Graph> model = demo::build_gpt(cfg, /*with_loss=*/true);
    std::vector<int64_t> tokens(size_t(demo::kBatch * demo::kSeq));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t(i * 7 % 63);
    Tensor tok = Tensor::from_vector(tokens, {demo::kBatch, demo::kSeq});
    TensorMap in{{"tokens", tok}, {"targets", tok}, {"pos", demo::positions(demo::kSeq)}};
    std::map<std::string, int64_t> dims{{"batch", demo::kBatch}, {"seq", demo::kSeq}};

    std::printf(
        "demo GPT train step (d %lld, %lld heads, %lld blocks), batch %lld x %lld, "
        "%d threads\n",
        (long long)cfg.d_model, (long long)cfg.heads, (long long)cfg.layers,
        (long long)demo::kBatch, (long long)demo::kSeq, o.threads);
    std::unique_ptr<train::Trainer> on;
    for (const char* packing : {"time", "size"}) {  // "size" (the default) last: kept
      settings().arena_packing = packing;
      auto t0 = std::chrono::steady_clock::now();
      auto t = make_trainer(*model, o);
      MemoryStats m = t->compiled().memory_stats(dims);
      std::chrono::duration<double, std::milli> compile_ms = std::chrono::steady_clock::now() - t0;
      // A binding not seen yet: the time of a new plan (shapes and memory).
      auto t1 = std::chrono::steady_clock::now();
      t->compiled().memory_stats({{"batch", demo::kBatch / 2}, {"seq", demo::kSeq}});
      std::chrono::duration<double, std::milli> plan_ms = std::chrono::steady_clock::now() - t1;
      std::printf(
          "  packing by %-4s  arena peak %7.2f MiB   intermediates %7.2f MiB summed   "
          "peak / sum %.3f   (compile %.0f ms, a new plan %.1f ms)\n",
          packing, mib(m.arena_bytes), mib(m.intermediate_bytes),
          double(m.arena_bytes) / double(std::max<size_t>(m.intermediate_bytes, 1)),
          compile_ms.count(), plan_ms.count());
      if (!std::strcmp(packing, "size")) {
        std::printf("  the largest live set: %.2f MiB (no packing needs less)\n",
                    mib(m.live_bytes));
        std::printf(
            "  %lld nodes; %lld intermediates in the arena, %lld in place, %lld views; "
            "outputs %.2f MiB, inputs %.3f MiB, params %.2f MiB\n",
            (long long)t->compiled().lowered().nodes().size(), (long long)m.intermediates,
            (long long)m.inplace, (long long)m.views, mib(m.output_bytes), mib(m.input_bytes),
            mib(m.param_bytes));
        on = std::move(t);
      }
    }
    settings().arena_packing = "size";
    settings().arena = false;
    std::unique_ptr<train::Trainer> off = make_trainer(*model, o);
    settings().arena = true;

    // Alternating rounds, so drift in the machine's load hits both alike.
    for (int i = 0; i < 3; ++i) on->step(in), off->step(in);
    double best_on = 1e30, best_off = 1e30;
    for (int round = 0; round < 3; ++round) {
      best_off = std::min(best_off, ms_per_step(*off, in, o.steps));
      best_on = std::min(best_on, ms_per_step(*on, in, o.steps));
    }
    std::printf("  step time: arena on %.2f ms, off (RLX_ARENA=0) %.2f ms (best of 3 x %d)\n",
                best_on, best_off, o.steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-bench-memory: %s\n", e.what());
    return 1;
  }
  return 0;
}
