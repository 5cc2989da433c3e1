// ONNX-only ops on string tensors: onnx.string_normalizer.
#pragma once

namespace rlx::onnx_import {

// Registers the ops and their CPU kernels (idempotent).
void register_text_onnx_ops();

}  // namespace rlx::onnx_import
