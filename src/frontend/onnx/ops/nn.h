// ONNX-only nn ops (onnx.resize, onnx.grid_sample, onnx.roi_align,
// onnx.max_pool_indices) and their CPU kernels.
#pragma once

namespace rlx::onnx_import {

void register_nn_onnx_ops();  // once; later calls do nothing

}  // namespace rlx::onnx_import
