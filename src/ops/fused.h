// The fused ops the fusion passes create (fused_matmul, fused_conv) and the activations
// they apply, shared by the op definitions (fused.cpp) and the passes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/graph.h"

namespace rlx::detail {

// The values of the `activation` attribute: none relu relu6 gelu gelu_tanh silu sigmoid tanh
// hard_swish (x * hard_sigmoid(x) with alpha 1/6, beta 1/2: MobileNetV3's).
const std::vector<std::string>& fused_activations();
// Whether n is hard_swish's gate of x: hard_sigmoid(x) with alpha 1/6 (as x's dtype holds
// it) and beta 1/2, so that x * n's output is the fused activation hard_swish.
bool is_hard_swish_gate(const Node& n, Value x);
// The activation a node computes when it is one of the core activation ops on a float
// input ("gelu_tanh" for gelu with approximate="tanh"); nullopt for anything else.
std::optional<std::string> activation_of(const Node& n);
// x through the activation, as core ops (x itself for "none").
Value apply_activation(Value x, std::string_view activation);
// d's vjp / jvp / vmap rules as those of its decomposition (d.decompose must be set).
void set_rules_by_decomposition(OpDef& d);

}  // namespace rlx::detail
