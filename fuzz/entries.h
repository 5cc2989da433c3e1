// The fuzz targets' entry functions (fuzz/README.md): one per reader of outside bytes.
// Each takes any bytes and returns normally when they are read or rejected with a typed
// rlx::Error; anything else is a bug: a crash, a sanitizer report, another exception
// (std::bad_alloc, std::out_of_range, …) or a broken property, thrown as
// std::logic_error. The libFuzzer binaries (fuzz/CMakeLists.txt) and the regression test
// (tests/fuzz) call the same functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rlx::fuzz {

using Entry = void (*)(std::span<const uint8_t> bytes);

struct Target {
  std::string_view name;  // the binary is fuzz_<name>, its inputs tests/data/fuzz/<name>/
  Entry entry;
};

// onnx (model bytes -> import -> verify -> compile for the CPU -> a run when small),
// text (parse -> verify -> print -> parse -> print, equal), npy, safetensors,
// tensor_proto (an ONNX TensorProto), gguf (header, every tensor, metadata, decoding).
const std::vector<Target>& targets();
Entry find(std::string_view name);  // nullptr when there is none

}  // namespace rlx::fuzz
