// What pass tests share. Realistic graphs: the train step (forward, backward, AdamW update) of a
// demo-sized GPT (examples/demo/model.cpp at small size) and of an MLP.
#pragma once

#include <memory>

#include "rlx/rlx.h"

namespace rlx::test {

struct TrainGraphOptions {
  int64_t vocab = 16, d_model = 32, heads = 4, layers = 2, context = 16;
  Remat remat = Remat::none;  // checkpoints: a `checkpoint` after every block
};

// Inputs tokens / targets i64 [batch, seq] (values must be < vocab), pos i64 [seq]
// (< context), train.lr, train.step; outputs loss, train.grad_norm, new.*.
std::unique_ptr<Graph> gpt_train_graph(const TrainGraphOptions& options = {});
// A 3-layer tanh MLP on x f32 [batch, 8] with an MSE loss against y f32 [batch, 4].
std::unique_ptr<Graph> mlp_train_graph();

// "test.effect": one input of any type, no outputs, Trait::side_effect (a stand-in for a
// print or an assert); its CPU kernel does nothing. Registered on the first call.
void register_effect_op();

// Nodes of g running op `name`.
size_t count_op(const Graph& g, std::string_view name);

}  // namespace rlx::test
