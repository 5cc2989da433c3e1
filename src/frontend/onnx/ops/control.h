// onnx.if, onnx.loop and onnx.scan: ONNX's If whose branches give outputs of different
// dims, and Loop and Scan, whose per-iteration outputs are stacked and whose trip count is
// only known when the loop runs (core `cond` wants equal branch types; core `while` /
// `scan` carry a fixed state and stack along axis 0 only).
#pragma once

namespace rlx::onnx_import {

void register_control_onnx_ops();

}  // namespace rlx::onnx_import
