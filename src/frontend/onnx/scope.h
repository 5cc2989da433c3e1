// The importer's state while it converts one ONNX graph (the model's, or a subgraph's):
// the names in scope, the graph being built, the enclosing scope for outer names.
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/onnx/context.h"

namespace onnx {
class GraphProto;
class NodeProto;
class ValueInfoProto;
}  // namespace onnx

namespace rlx::onnx_import {

struct ImportState {
  std::map<std::string, int64_t> opsets;  // domain ("" for ai.onnx) -> version
  std::string base_dir;                   // for external data
  std::map<std::string, int64_t> dims;    // sizes bound to symbolic dims
  int64_t default_dim = -1;               // >= 0: the size of every other symbolic dim
  bool at_run_time = false;               // converting inside onnx.late: never late again
  // i32 values cast from an f32 that holds integers of magnitude <= 2^24 (an exact integer
  // product, convert_quant.cpp): cast back to f32 they are that f32 (NodeContext::cast).
  std::set<std::pair<const Graph*, int32_t>> exact_ints;
  // QuantizeLinear outputs of one f32 value at one constant scale and zero point: a
  // DequantizeLinear of one of them at the same scale is fake_quantize of that value.
  struct Quantized {
    Value x;
    double scale, zero_point, qmin, qmax;
  };
  std::map<std::pair<const Graph*, int32_t>, Quantized> quantized;
};

class Scope {
 public:
  // A scope that builds `g`. With `inline_into_parent`, g is the parent's graph (an If
  // branch inlined when its condition is known): outer names are used as they are.
  Scope(ImportState& state, Graph& g, Scope* parent, bool inline_into_parent = false);

  ImportState& state() { return state_; }
  Graph& graph() { return g_; }

  // The Value of an ONNX name: a local one, else the parent's (captured as an arg of this
  // graph: a constant is copied in instead). ValueError when nothing defines it.
  Value lookup(const std::string& name, std::string_view user);
  bool defines(const std::string& name) const;
  void define(const std::string& name, Value v);
  // Sequences and optionals (held as lists of Values of this graph).
  void define_packed(const std::string& name, Packed p);
  const Packed* find_packed(const std::string& name, std::string_view user);
  // A name a node declares but whose converter did not produce (an optional output).
  void define_absent(const std::string& name, std::string why);

  // Converts the nodes of `body` (after the caller defined its inputs and initializers),
  // sorting them topologically first.
  void convert_nodes(const ::onnx::GraphProto& body);

  // Outer values this (subgraph) scope captured, in the order of its extra args.
  const std::vector<Value>& captures() const { return captures_; }
  // A unique identifier for an arg of this graph made from an ONNX name.
  std::string arg_name(const std::string& onnx_name);

 private:
  ImportState& state_;
  Graph& g_;
  Scope* parent_;
  bool inline_;
  // This graph's view of an outer value: an arg (captured) or a copied constant.
  Value capture(Value outer, const std::string& name);

  std::unordered_map<std::string, Value> names_;
  std::unordered_map<std::string, Packed> packed_;
  std::unordered_map<std::string, std::string> absent_;
  std::vector<Value> captures_;
  std::set<std::string> arg_names_;
};

// Names a graph (and its subgraphs, at any depth) reads but does not define.
std::set<std::string> free_names(const ::onnx::GraphProto& g);

// Converts one node; its outputs are defined in `scope`.
void convert_node(Scope& scope, const ::onnx::NodeProto& node);

// The rlx type of an ONNX ValueInfo's tensor type; symbolic dims come from dim_param
// (bound through state.dims when given), anonymous ones get `anon_prefix`_<axis>.
TensorType type_from_value_info(const ImportState& state, const ::onnx::ValueInfoProto& vi,
                                std::string_view what, const std::string& anon_prefix);

// Identifier form of an ONNX name ("input:0" -> "input_0").
std::string sanitize(std::string_view name);

// Thrown by NodeContext::need_constant for an input only known at run time: the node is
// then converted late (onnx.late), at run time, with the concrete values.
struct NeedsConstant {
  size_t input;
};

}  // namespace rlx::onnx_import
