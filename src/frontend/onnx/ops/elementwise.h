// ONNX-only elementwise ops (no core equivalent), registered through the public op and
// kernel registries like any downstream package's ops.
#pragma once

namespace rlx::onnx_import {

// onnx.bit_shift (attr direction: "left" | "right"): x shifted by y bits, both integer
// tensors of one dtype (broadcast). Values are read as unsigned bit patterns, as ONNX's
// BitShift is defined on unsigned types only; a shift of the bit width or more gives 0.
void register_elementwise_onnx_ops();

}  // namespace rlx::onnx_import
