// A small character-level GPT in the rlx IR: token + position embeddings, pre-norm
// transformer blocks (causal multi-head attention, GELU MLP), a final layer norm and a
// head tied to the token table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rlx/graph.h"
#include "rlx/session.h"

namespace demo {

struct GptConfig {
  int64_t vocab = 0;
  int64_t d_model = 96;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t context = 64;  // rows of the position table: the longest sequence
  rlx::DType dtype = rlx::DType::f32;
  bool gelu_tanh = false;  // the MLP's GELU in its tanh form (GPT-2's own), else erf
};

// The demo trains on batches of kBatch windows of kSeq characters.
inline constexpr int64_t kBatch = 16, kSeq = 64;

// One pre-norm block on x [batch, seq, d]: x + attn(ln1(x)), then + mlp(ln2(x)), the MLP
// 4d wide. Adds its params to x's graph as "<prefix>.ln1.scale", "<prefix>.attn.wq",
// "<prefix>.mlp.w1"… Attention is causal (a decoder) unless `causal` is false.
rlx::Value transformer_block(rlx::Value x, const std::string& prefix, int64_t heads,
                             bool causal = true, bool gelu_tanh = false);

// Inputs "tokens" i64 [batch, seq] and "pos" i64 [seq] (0..seq-1), batch and seq symbolic.
// Training (with_loss): input "targets" i64 [batch, seq], output "loss" (mean cross
// entropy, nats). Evaluation: output "logits" [batch, seq, vocab].
std::unique_ptr<rlx::Graph> build_gpt(const GptConfig& cfg, bool with_loss);

// GPT-2 style initial values for every param of g: norms at scale 1 / bias 0, biases 0,
// weights N(0, 0.02), the projections back into the residual stream scaled down by
// sqrt(2 * layers) so that the stream's variance does not grow with depth.
rlx::TensorMap init_params(const rlx::Graph& g, int64_t layers, uint64_t seed);

// 0, 1, …, seq-1 as i64 [seq]: the "pos" input.
rlx::Tensor positions(int64_t seq);

}  // namespace demo
