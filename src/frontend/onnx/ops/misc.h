// ONNX-only ops without a core equivalent: onnx.dft (DFT and STFT), onnx.non_max_suppression,
// onnx.tfidf_vectorizer.
#pragma once

namespace rlx::onnx_import {

// Registers the ops and their CPU kernels (idempotent).
void register_misc_onnx_ops();

}  // namespace rlx::onnx_import
