// What pass tests share. A realistic graph: the train step (forward, backward, AdamW update)
// of a GPT like the demo's (examples/demo/model.cpp), at any size.
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

// "test.effect": one input of any type, no outputs, Trait::side_effect (a stand-in for a
// print or an assert); its CPU kernel does nothing. Registered on the first call.
void register_effect_op();

// Nodes of g running op `name`.
size_t count_op(const Graph& g, std::string_view name);

}  // namespace rlx::test
