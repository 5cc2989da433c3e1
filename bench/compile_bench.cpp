// rlx-bench-compile: how long Session::compile takes on a GPT-2-small-sized model (12
// layers, d 768, 12 heads, vocab 50257, context 1024), for its forward graph and for its
// train step (forward + backward + clipping + AdamW), against the budgets (300 ms
// and 1 s). The compile cache is off, so every compile does the full work: the pass
// pipeline, dispatch resolution and runtime planning. RLX_DEBUG=passes shows per-pass times.
//
//   rlx-bench-compile [--runs N] [--layers L]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "model.h"
#include "rlx/rlx.h"

using namespace rlx;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Timing {
  double min = 0, median = 0;
};

template <class F>
Timing time_runs(int runs, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

void row(const char* what, size_t nodes, Timing t, double budget_ms) {
  std::printf("%-34s %8zu %10.1f %10.1f %10.0f %9.2fx\n", what, nodes, t.min, t.median, budget_ms,
              t.median / budget_ms);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  int64_t layers = 12;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--layers") && i + 1 < argc) {
      layers = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--runs N] [--layers L]\n", argv[0]);
      return 2;
    }
  }
  try {
    demo::GptConfig cfg{
        .vocab = 50257, .d_model = 768, .heads = 12, .layers = layers, .context = 1024};
    CompileOptions opts;
    opts.cache = false;
    Session session;

    auto t0 = Clock::now();
    auto fwd = demo::build_gpt(cfg, /*with_loss=*/false);
    double build_fwd = ms_since(t0);
    auto model = demo::build_gpt(cfg, /*with_loss=*/true);

    train::TrainerOptions topts;
    topts.optimizer = std::make_shared<train::AdamW>();
    topts.clip_norm = 1.0;
    t0 = Clock::now();
    train::Trainer trainer(*model, topts);
    double trainer_ms = ms_since(t0);
    const Graph& step = trainer.train_graph();

    std::printf("GPT-2 small: %lld layers, d 768, 12 heads, vocab 50257; cache off; %d runs\n",
                (long long)layers, runs);
    std::printf(
        "building the forward graph: %.1f ms; Trainer (train graph + 2 compiles): %.1f ms\n\n",
        build_fwd, trainer_ms);
    std::printf("%-34s %8s %10s %10s %10s %10s\n", "compile", "nodes", "min ms", "median ms",
                "budget ms", "median/budget");
    Timing f = time_runs(runs, [&] { session.compile(*fwd, opts); });
    row("forward (opt level 2)", fwd->nodes().size(), f, 300);
    Timing s = time_runs(runs, [&] { session.compile(step, opts); });
    row("train step (opt level 2)", step.nodes().size(), s, 1000);
    CompileOptions o0 = opts;
    o0.opt_level = 0;
    Timing s0 = time_runs(runs, [&] { session.compile(step, o0); });
    row("train step (no passes)", step.nodes().size(), s0, 1000);

    CompiledGraph cg = session.compile(step, opts);
    std::printf("\npasses on the train step (one compile):\n%s",
                PipelineResult{nullptr, cg.pass_stats()}.str().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-bench-compile: %s\n", e.what());
    return 1;
  }
}
