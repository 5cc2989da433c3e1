// The fused elementwise region (op "fused_elementwise"): what its body may hold, shared by
// the op's definition, the fusion pass that builds regions and the kernels that run them.
//
// A body is a closed graph whose args are the region's inputs. Its nodes are elementwise
// ops, scalar constants, broadcasts of the inputs (views that read an input with other
// strides), and at most one reduction per output over trailing axes of the region shape;
// a reduced value is only ever an output. Every other output has the region shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "rlx/graph.h"
#include "rlx/op.h"

namespace rlx::detail {

inline constexpr std::string_view kRegionOp = "fused_elementwise";

// Ops that may adapt a region input's shape inside a body: broadcast_to, expand_dims,
// broadcast_like. No trait says "broadcast", so this is the one named list.
bool is_region_view_op(std::string_view op);

// A reduction a body may end in: a Trait::reduction op with `axes` / `keepdims` attributes
// (sum, mean, reduce_max, …; not argmax). Returns how many trailing axes of an input of
// `rank` it reduces, or nullopt when its axes are not the trailing ones.
bool is_region_reduction(const OpDef& op);
std::optional<int64_t> trailing_reduced(const Attrs& attrs, int64_t rank);

}  // namespace rlx::detail
