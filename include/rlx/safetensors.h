// Reading and writing safetensors files (the Hugging Face checkpoint format).
//
//   rlx::save_safetensors("model.safetensors", {{"w", w}, {"b", b}}, {{"step", "100"}});
//   rlx::SafetensorsFile f = rlx::load_safetensors("model.safetensors");
//   rlx::Tensor w = f.tensors.at("w");
//
// Layout: an 8-byte little-endian header size N, N bytes of JSON, then the raw data.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data start), plus an optional "__metadata__" object of
// string -> string. dtypes: F32 F64 F16 BF16 I8 I16 I32 I64 U8 BOOL (others, such as
// U16 or F8_E4M3, are rejected: rlx has no such dtype).
//
// Writing: the layout Python's safetensors writes, byte for byte (tensors by dtype, the
// wider first, then by name, so each starts aligned to its item size; the header padded
// with spaces to a multiple of 8 bytes; "__metadata__" first). Reading follows the format's rules:
// the offsets must tile the data exactly (no overlap, no hole, nothing past the end) and each
// extent must be numel * item size. Every malformed input is an IoError naming the file (or
// "<memory>") and what was expected vs found; nothing reads past the end.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/session.h"
#include "rlx/tensor.h"

namespace rlx {

struct SafetensorsFile {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;
};

// Throws ValueError for an undefined or non-host tensor, or a tensor named "__metadata__";
// IoError when the file cannot be written.
void save_safetensors(const std::string& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);

// In-memory forms. `name` is what errors call the input.
std::vector<uint8_t> write_safetensors_bytes(
    const TensorMap& tensors, const std::map<std::string, std::string>& metadata = {});
SafetensorsFile read_safetensors(std::span<const uint8_t> bytes,
                                 std::string_view name = "<memory>");

// The format's dtype names ("F32", "BF16", "BOOL", …).
std::string_view safetensors_dtype_name(DType dt);

}  // namespace rlx
