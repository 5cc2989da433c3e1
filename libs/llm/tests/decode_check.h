// Shared by the CPU and CUDA tests: Generator::decode (each step's inputs worked out by
// the step before, where it ran) against step() after step() (inputs from the host).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "rlx_llm/llm.h"
#include "test_models.h"

namespace rlx::llm::test {

// Every sequence of m's batch starts from its own prompt; decode() then draws the tokens
// step() draws (the sampler's counter and the repeat penalty's history advance on the
// device too), also when it stops early and goes on in a second call.
inline void expect_decode_equals_steps(Model& m, const SamplerOptions& s) {
  const int64_t batch = m.options().batch, vocab = m.config().vocab;
  auto start = [&](Generator& g) {
    std::vector<int32_t> last;
    for (int64_t b = 0; b < batch; ++b)
      last.push_back(g.prefill(some_ids(3 + b, vocab, int32_t(b)), b));
    return last;
  };
  std::vector<std::vector<int32_t>> want, got;
  Generator a(m, s);
  std::vector<int32_t> last = start(a);
  for (int i = 0; i < 8; ++i) want.push_back(last = a.step(last));

  Generator b(m, s);
  last = start(b);
  auto keep = [&](std::span<const int32_t> t) {
    got.emplace_back(t.begin(), t.end());
    return got.size() < 3;
  };
  EXPECT_EQ(b.decode(last, 6, keep), 3);
  EXPECT_EQ(b.position(0), 3 + 3);
  last = got.back();
  EXPECT_EQ(b.decode(last, 5,
                     [&](std::span<const int32_t> t) {
                       got.emplace_back(t.begin(), t.end());
                       return true;
                     }),
            5);
  EXPECT_EQ(got, want);
  EXPECT_EQ(b.position(batch - 1), a.position(batch - 1));
  EXPECT_EQ(b.stats().generated_tokens, a.stats().generated_tokens);
}

}  // namespace rlx::llm::test
