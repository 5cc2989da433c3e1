// onnx.* ops of the shape family: ops with no core equivalent.
#pragma once

namespace rlx::onnx_import {

// onnx.unique, onnx.range and their CPU kernels (idempotent).
void register_shape_onnx_ops();

}  // namespace rlx::onnx_import
