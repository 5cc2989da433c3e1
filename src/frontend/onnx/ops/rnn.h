// onnx.rnn, onnx.gru, onnx.lstm: ONNX's recurrent layers as ops with CPU kernels.
#pragma once

namespace rlx::onnx_import {

// Registers the ops and their CPU kernels (idempotent).
void register_rnn_onnx_ops();

}  // namespace rlx::onnx_import
