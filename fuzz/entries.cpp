// The fuzz targets' entry functions (entries.h). Typed rlx errors are the readers'
// answer to bad bytes and are swallowed here; everything else escapes to the caller.
#include "fuzz/entries.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "frontend/onnx/proto.h"
#include "rlx/gguf.h"
#include "rlx/npy.h"
#include "rlx/onnx.h"
#include "rlx/quant.h"
#include "rlx/rlx.h"
#include "rlx/safetensors.h"
#include "rlx/text.h"
#include "rlx/verify.h"

namespace rlx::fuzz {

namespace {

// External data is looked up here: a folder that does not exist.
constexpr const char* kNoDir = "/nonexistent/rlx-fuzz";
// A compiled model runs when one run needs at most this much memory.
constexpr size_t kRunBytes = size_t{64} << 20;
constexpr int64_t kRunElements = int64_t{1} << 20;     // per input
constexpr int64_t kDecodeElements = int64_t{1} << 16;  // per GGUF tensor

std::string_view as_text(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Runs f, swallowing the typed errors that are the answer to bad input.
template <class F>
void typed(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

// Small values of the input's type: floats in [-2, 2], integers 0..3 (sizes and indices
// that data decides stay small), alternating bools, a few words.
Tensor sample(const TensorType& t, uint64_t seed) {
  std::vector<int64_t> shape = static_sizes(t.shape, "fuzz input");
  int64_t n = checked_numel(shape, "fuzz input");
  if (is_string(t.dtype)) {
    std::vector<std::string> words;
    for (int64_t i = 0; i < n; ++i) words.push_back(i % 3 ? "ab" : "");
    return Tensor::from_strings(words, shape);
  }
  std::vector<double> v(size_t(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t h = (uint64_t(i) + seed) * 0x9E3779B97F4A7C15ull;
    v[size_t(i)] = is_float(t.dtype) ? double(h >> 40) / double(1 << 22) - 2 : double(h >> 62);
  }
  return Tensor::from_doubles(t.dtype, shape, v);
}

// Compiles for the CPU; runs once on sample inputs when every size is known and small.
void compile_and_run(const Graph& g) {
  CompileOptions o;
  o.threads = 1;
  o.cache = false;
  CompiledGraph cg = Session().compile(g, o);
  MemoryStats m = cg.memory_stats();
  if (m.dynamic || m.arena_bytes + m.output_bytes + m.input_bytes + m.param_bytes > kRunBytes)
    return;
  TensorMap inputs;
  uint64_t seed = 1;
  for (const Arg& a : cg.lowered().args()) {
    std::optional<int64_t> n = a.value.type().numel();
    if (!n || *n > kRunElements || is_quantized(a.value.dtype())) return;
    Tensor t = sample(a.value.type(), seed++);
    if (a.kind == ArgKind::param)
      cg.set_param(a.name, t);
    else
      inputs.emplace(a.name, t);
  }
  cg.run(inputs);
}

// A graph the importer or the parser accepted must verify.
void must_verify(const Graph& g, std::string_view what) {
  try {
    verify(g);
  } catch (const Error& e) {
    throw std::logic_error(str_cat(what, " does not verify: ", e.what()));
  }
}

void onnx_model(std::span<const uint8_t> bytes) {
  std::optional<onnx::Model> m;
  try {
    onnx::ImportOptions opt;
    opt.default_dim = 2;
    m = onnx::load_bytes(as_text(bytes), kNoDir, opt);
  } catch (const Error&) {
    return;
  }
  must_verify(*m->graph, "the imported graph");
  typed([&] { compile_and_run(*m->graph); });
}

// Text that parses must print as text that parses to the same print.
void text_ir(std::span<const uint8_t> bytes) {
  static const bool onnx_ops = (onnx::register_ops(), true);  // text of imported models
  (void)onnx_ops;
  std::unique_ptr<Graph> g;
  try {
    g = parse_graph(as_text(bytes));
  } catch (const Error&) {
    return;
  }
  must_verify(*g, "the parsed graph");
  std::string once = print_graph(*g), twice;
  try {
    twice = print_graph(*parse_graph(once));
  } catch (const Error& e) {
    throw std::logic_error(str_cat("printed text does not parse: ", e.what(), "\n", once));
  }
  if (once != twice)
    throw std::logic_error(str_cat("print(parse(print(g))) != print(g):\n", once, "\n", twice));
}

void npy(std::span<const uint8_t> bytes) {
  typed([&] { read_npy(bytes); });
}

void safetensors(std::span<const uint8_t> bytes) {
  typed([&] { read_safetensors(bytes); });
}

void tensor_proto(std::span<const uint8_t> bytes) {
  ::onnx::TensorProto t;
  if (!t.ParseFromArray(bytes.data(), int(bytes.size()))) return;
  typed([&] { onnx_import::tensor_from_proto(t, kNoDir, "<fuzz>"); });
}

// The header, every metadata value through each accessor, every tensor, and the first
// elements of each quantized tensor decoded.
void gguf(std::span<const uint8_t> bytes) {
  std::optional<gguf::File> f;
  try {
    f = gguf::File::from_bytes({bytes.begin(), bytes.end()}, "<fuzz>");
  } catch (const Error&) {
    return;
  }
  for (const auto& kv : f->metadata()) {
    const gguf::Value& v = kv.second;
    typed([&] { v.as_int(); });
    typed([&] { v.as_float(); });
    typed([&] { v.as_string(); });
    typed([&] { v.as_ints(); });
    typed([&] { v.as_floats(); });
    typed([&] { v.as_strings(); });
    typed([&] { v.items(); });
  }
  for (const gguf::TensorInfo& info : f->tensors())
    typed([&] {
      Tensor t = f->tensor(info.name);
      if (!is_quantized(t.dtype()) || t.rank() == 0 || t.shape().back() == 0) return;
      int64_t row = t.shape().back(), n = std::min(t.numel(), kDecodeElements) / row * row;
      std::vector<float> out(static_cast<size_t>(n));
      if (n) quant::dequantize_row(t.dtype(), t.data(), out.data(), n);
    });
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"onnx", onnx_model},           {"text", text_ir}, {"npy", npy}, {"safetensors", safetensors},
      {"tensor_proto", tensor_proto}, {"gguf", gguf},
  };
  return all;
}

Entry find(std::string_view name) {
  for (const Target& t : targets())
    if (t.name == name) return t.entry;
  return nullptr;
}

}  // namespace rlx::fuzz
