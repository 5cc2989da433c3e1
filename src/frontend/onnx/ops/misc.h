// ONNX-only ops without a core equivalent: onnx.stft (run-time frame sizes), onnx.cosine_window,
// onnx.mel_weight_matrix, onnx.non_max_suppression, onnx.tfidf_vectorizer.
#pragma once

#include <cstdint>
#include <vector>

namespace rlx::onnx_import {

// a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), n < size; N = size (periodic) or size - 1.
std::vector<double> cosine_window(int64_t size, bool periodic, double a0, double a1, double a2);
// ONNX MelWeightMatrix, [dft / 2 + 1, bins] row-major (ValueError on bad sizes).
std::vector<double> mel_weight_matrix(int64_t bins, int64_t dft, int64_t rate, double lo_hz,
                                      double hi_hz);

// Registers the ops and their CPU kernels (idempotent).
void register_misc_onnx_ops();

}  // namespace rlx::onnx_import
