// ONNX protobuf messages <-> rlx: dtypes, TensorProto contents, model bytes.
#pragma once

#include <string>
#include <string_view>

#include "rlx/tensor.h"

namespace onnx {
class ModelProto;
class TensorProto;
class TypeProto;
}  // namespace onnx

namespace rlx::onnx_import {

// The name ONNX gives an elem_type ("FLOAT16"), for errors.
std::string onnx_type_name(int32_t elem_type);

// The tensor a TensorProto holds (raw_data, typed fields or external data read from
// `base_dir`), checked: the byte count must match dims and dtype. `what` names it in errors.
Tensor tensor_from_proto(const ::onnx::TensorProto& t, const std::string& base_dir,
                         std::string_view what);

// Parses model bytes; IoError when they are not a ModelProto (truncated, corrupt).
void parse_model(std::string_view bytes, ::onnx::ModelProto& model, std::string_view what);

// Reads a whole file; IoError naming it when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace rlx::onnx_import
