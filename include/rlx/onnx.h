// ONNX import: a ModelProto (from a file or bytes) becomes an rlx Graph. ONNX ops map to
// core ops where rlx has them; the rest are `onnx.*` ops registered through the same
// OpRegistry a downstream package uses (register_ops()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::onnx {

struct ImportOptions {
  // Fixes the shape of inputs, by ONNX input name (the symbolic dims they held are bound
  // everywhere else too): what `rlx run` does with the inputs it is given, so that shape
  // arithmetic folds away at import time.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Sizes for named symbolic dims (ONNX dim_param).
  std::map<std::string, int64_t> dims;
  // When >= 0, the size of every symbolic dim not bound otherwise (benchmarks, --random).
  int64_t default_dim = -1;
  // Sequence inputs (rlx holds sequences as lists of tensors of known length): the shape
  // of each element, by ONNX input name. Each element becomes one graph input.
  std::map<std::string, std::vector<std::vector<int64_t>>> sequence_shapes;
  // Optional inputs given no value.
  std::set<std::string> absent_inputs;
};

// What an ONNX graph input or output holds.
enum class ValueKind { tensor, sequence, optional_tensor, optional_sequence };
struct ValueSlot {
  std::string name;
  ValueKind kind = ValueKind::tensor;
};
struct Signature {
  std::vector<ValueSlot> inputs;  // initializers excluded
  std::vector<ValueSlot> outputs;
};
Signature signature(const std::string& path);

// The tensors a test-data file holds for a value of `kind`: a TensorProto (one), a
// SequenceProto (its elements) or an OptionalProto (none, or its tensor / elements).
std::vector<Tensor> read_values(const std::string& path, ValueKind kind);

struct Model {
  std::unique_ptr<Graph> graph;
  // ONNX names of the graph's inputs and outputs, in the order of the rlx graph's
  // inputs and outputs (rlx names are identifiers: "input:0" becomes "input_0"; the
  // elements of a sequence read "name[i]").
  std::vector<std::string> inputs, outputs;
  int64_t ir_version = 0;
  int64_t opset = 0;  // of the default domain
  std::string producer;
};

// Reads and imports a model. External-data initializers are read relative to the
// model's folder. Throws IoError (unreadable or truncated file), ValueError (a malformed
// graph: cycles, undefined names, bad attributes), NotSupported (ops with no converter:
// one error listing all of them).
Model load(const std::string& path, const ImportOptions& options = {});
Model load_bytes(std::string_view bytes, const std::string& base_dir,
                 const ImportOptions& options = {});

// The op types of a model (with subgraphs), each with its count and how rlx handles it:
// "core" (mapped to core ops), "onnx" (an onnx.* op) or "missing".
struct OpUse {
  std::string domain, op_type;
  int64_t count = 0;
  bool supported = false;
};
std::vector<OpUse> op_histogram(const std::string& path);

// ONNX names of a model's graph inputs (initializers excluded), in order.
std::vector<std::string> graph_inputs(const std::string& path);

// A TensorProto file (the input_N.pb / output_N.pb of ONNX's test layout).
Tensor read_tensor(const std::string& path);
// The ONNX name recorded in a TensorProto file ("" when none).
std::string read_tensor_name(const std::string& path);

// Registers the onnx.* ops and their CPU kernels in the global registries (idempotent;
// load() calls it). Call it before parsing a converted model's text.
void register_ops();

}  // namespace rlx::onnx
