// The clean-up passes at GPT-2-small scale: the train step of a 12-layer, d=768 model
// (about ten thousand nodes) goes through each pass, and through the clean-up part of the
// pipeline, in well under a second.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "op_tables/pass_graphs.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

TEST(CleanupScale, Gpt2SmallTrainStep) {
  auto g = test::gpt_train_graph(
      {.vocab = 50257, .d_model = 768, .heads = 12, .layers = 12, .context = 1024});
  EXPECT_GT(g->nodes().size(), 3000u);
  std::unique_ptr<Graph> cur = g->clone();
  double total = 0;
  for (const char* pass : {"dce", "constant_folding", "simplify", "cse", "dce"}) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = run_pass(pass, *cur);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-18s %6zu -> %6zu nodes  %7.2f ms\n", pass, cur->nodes().size(),
                out ? out->nodes().size() : cur->nodes().size(), ms);
    EXPECT_LT(ms, 1000) << pass;
    total += ms;
    if (out) cur = std::move(out);
  }
  std::printf("total %.2f ms\n", total);
  EXPECT_LT(total, 2000);
  EXPECT_LE(cur->nodes().size(), g->nodes().size());
}

}  // namespace
}  // namespace rlx
