// The reduce family's internals: its onnx.* ops (onnx.det) and the Einsum converter
// (convert_einsum.cpp), registered by register_reduce_converters().
#pragma once

#include <vector>

#include "frontend/onnx/context.h"

namespace rlx::onnx_import {

// Registers onnx.det and its CPU kernel (once; later calls do nothing).
void register_reduce_onnx_ops();

std::vector<Value> convert_einsum(NodeContext& ctx);

}  // namespace rlx::onnx_import
