// ONNX converters: rnn ops (stub, filled in by its family's work).
#include "frontend/onnx/context.h"

namespace rlx::onnx_import {

void register_sequence_model_converters() {}

}  // namespace rlx::onnx_import
