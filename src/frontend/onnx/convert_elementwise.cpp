// ONNX converters: elementwise ops (stub, filled in by its family's work).
#include "frontend/onnx/context.h"

namespace rlx::onnx_import {

void register_elementwise_converters() {}

}  // namespace rlx::onnx_import
