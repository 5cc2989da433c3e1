// Helpers shared by the nn converters (convert_nn.cpp, convert_pool.cpp).
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/context.h"

namespace rlx::onnx_import {

// ONNX auto_pad as the core window ops spell it (NOTSET: "explicit").
std::string core_auto_pad(const NodeContext& ctx);
// strides, dilations, pads and auto_pad of a Conv / pool node, as core attributes.
Attrs window_attrs(const NodeContext& ctx);
// x is [N, C, D1..Dk] with 1 <= k <= max_k, else NotSupported.
void expect_spatial(const NodeContext& ctx, Value x, int64_t max_k);
Value nn_reshape(NodeContext& ctx, Value x, const std::vector<int64_t>& shape);
// v [C] as [C, 1, ..., 1] against [N, C, D...] of rank `rank`.
Value per_channel(NodeContext& ctx, Value v, int64_t rank);
IntList nn_range(int64_t lo, int64_t hi);

}  // namespace rlx::onnx_import
