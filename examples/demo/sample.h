// Text generation from the trained model, one character at a time.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "data.h"
#include "rlx/session.h"

namespace demo {

struct SampleOptions {
  int64_t length = 300;      // characters to generate
  int64_t context = 64;      // the model's longest sequence: older text is cropped
  double temperature = 0.8;  // < 1 sharpens the distribution
  int64_t top_k = 10;        // sample among the k likeliest characters (0: all)
  uint64_t seed = 0;
};

// Continues `prompt`: runs `model` (the evaluation graph: tokens [1, seq] -> logits
// [1, seq, vocab], seq symbolic) on the last `context` characters and samples the next
// one from the logits of the last position, on the host. Returns the generated text.
std::string sample(const rlx::CompiledGraph& model, const CharData& data, const std::string& prompt,
                   const SampleOptions& options);

}  // namespace demo
