// Late conversion: a node whose converter needs the contents of an input that is only
// known at run time (a shape computed from a symbolic dim, a graph input holding axes)
// becomes one `onnx.late` node. At run time its kernel converts the node again with the
// concrete inputs as constants and evaluates it.
#pragma once

#include "frontend/onnx/context.h"

namespace rlx::onnx_import {

// Emits the onnx.late node for ctx's node (NotSupported when rlx cannot tell the rank
// of its outputs without the input's contents).
std::vector<Value> convert_late(NodeContext& ctx, size_t needed_input);

void register_late_op();

}  // namespace rlx::onnx_import
