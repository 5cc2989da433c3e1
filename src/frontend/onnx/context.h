// What an ONNX op converter sees: one NodeProto, its inputs as rlx Values, its attributes,
// and a builder that folds constants as it goes. Converters are registered per op_type
// (and domain) in one table; each handles every opset version of its op.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rlx/graph.h"
#include "rlx/op.h"
#include "rlx/tensor.h"

namespace onnx {
class NodeProto;
class GraphProto;
class AttributeProto;
}  // namespace onnx

namespace rlx::onnx_import {

class Scope;

// ONNX sequences and optionals, which rlx tensors cannot hold, live in the importer: a
// sequence of statically known length is its list of element Values, an optional is
// absent or one value. Sequence ops then rearrange lists at import time.
struct Packed {
  bool optional = false;  // an optional (of a tensor, or of a sequence when `sequence`)
  bool has_value = true;  // for optionals
  bool sequence = false;
  std::vector<Value> elems;  // a sequence's elements; an optional tensor's one value
};

// One ONNX node being converted. Every builder call goes through apply(): when all the
// inputs of a new node are known constants (initializers, Constant nodes, shapes of
// static values), the node is evaluated on the CPU at import time and becomes a
// constant, so shape arithmetic ends as plain attributes.
class NodeContext {
 public:
  NodeContext(Scope& scope, const ::onnx::NodeProto& node, int64_t opset);

  const ::onnx::NodeProto& proto() const { return node_; }
  const std::string& op_type() const;
  const std::string& name() const;          // the node's name, or its first output's
  int64_t opset() const { return opset_; }  // of the node's domain
  Graph& graph() const;

  // ---- inputs
  size_t num_inputs() const;       // as written, counting empty ("" = absent) slots
  bool has_input(size_t i) const;  // present and not ""
  Value input(size_t i) const;     // throws ValueError when absent
  // The input's contents when known at import time (a constant), else nullopt.
  std::optional<Tensor> constant_input(size_t i) const;
  // The input's contents, required to be known at import time (throws NotSupported,
  // naming the input, when it is computed at run time).
  Tensor need_constant(size_t i) const;
  // need_constant as integers / doubles; nullopt when the input is absent.
  std::optional<std::vector<int64_t>> ints_input(size_t i) const;
  std::optional<std::vector<double>> floats_input(size_t i) const;
  // The sequence / optional an input names, or null for a tensor.
  const Packed* packed_input(size_t i) const;
  // Contents of any value of this graph when known (a constant node's literal).
  std::optional<Tensor> constant_of(Value v) const;

  // ---- outputs
  size_t num_outputs() const;       // as written, counting "" slots
  bool has_output(size_t i) const;  // present and not ""
  // Makes output i a sequence / optional (the converter returns an invalid Value there).
  void set_packed_output(size_t i, Packed p);
  const std::vector<std::optional<Packed>>& packed_outputs() const { return packed_out_; }

  // ---- attributes (ONNX's own names)
  bool has_attr(std::string_view name) const;
  const ::onnx::AttributeProto* attr(std::string_view name) const;
  int64_t attr_int(std::string_view name, int64_t def) const;
  int64_t need_attr_int(std::string_view name) const;
  double attr_float(std::string_view name, double def) const;
  std::string attr_string(std::string_view name, std::string def) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<double> attr_floats(std::string_view name, std::vector<double> def = {}) const;
  std::vector<std::string> attr_strings(std::string_view name) const;
  std::optional<Tensor> attr_tensor(std::string_view name) const;
  const ::onnx::GraphProto* attr_graph(std::string_view name) const;

  // ---- building (all of these fold constants)
  std::vector<Value> apply(std::string_view op, std::vector<Value> inputs, Attrs attrs = {},
                           std::vector<SubgraphPtr> subgraphs = {});
  Value apply1(std::string_view op, std::vector<Value> inputs, Attrs attrs = {},
               std::vector<SubgraphPtr> subgraphs = {});
  Value constant(const Tensor& t);
  Value constant(const Literal& lit);
  Value scalar(DType dtype, double v);        // a rank-0 constant
  Value ints(const std::vector<int64_t>& v);  // an i64[n] constant
  Value cast(Value v, DType dtype);           // no node when v already has the dtype

  // Imports a subgraph attribute as a closed rlx Graph. Its args are `arg_types` (one
  // per declared input of the GraphProto, in order; nullopt: take the declared type),
  // then one arg per outer value the body reads (captures, in first-use order). The
  // caller passes `captures` (outer Values, same order) as extra inputs of its node.
  struct Subgraph {
    SubgraphPtr graph;
    std::vector<Value> captures;
  };
  Subgraph import_subgraph(const ::onnx::GraphProto& body,
                           const std::vector<std::optional<TensorType>>& arg_types);
  // Converts `body` into this node's graph (no subgraph): its inputs are `args` (a
  // packed arg: a sequence / optional), its outer names resolve here. Returns its
  // outputs; a packed output comes back as an invalid Value, and its list in `packed`
  // (at the output's index) when given, else NotSupported.
  std::vector<Value> inline_subgraph(const ::onnx::GraphProto& body,
                                     const std::vector<std::variant<Value, Packed>>& args,
                                     std::vector<std::optional<Packed>>* packed = nullptr);
  Scope& scope() const { return scope_; }

  // ---- errors: "[onnx Op 'name'] parts…"
  template <class... A>
  [[noreturn]] void fail(A&&... parts) const {
    rlx::fail<ValueError>(where(), std::forward<A>(parts)...);
  }
  template <class... A>
  [[noreturn]] void fail_type(A&&... parts) const {
    rlx::fail<TypeError>(where(), std::forward<A>(parts)...);
  }
  template <class... A>
  [[noreturn]] void unsupported(A&&... parts) const {
    rlx::fail<NotSupported>(where(), std::forward<A>(parts)...);
  }
  std::string where() const;

 private:
  Scope& scope_;
  const ::onnx::NodeProto& node_;
  int64_t opset_;
  std::vector<std::optional<Packed>> packed_out_;
};

// A converter returns one Value per ONNX output slot (an invalid Value for a slot the
// node leaves empty or that nothing reads).
using Converter = std::function<std::vector<Value>(NodeContext&)>;

// Registers the converter of (domain, op_type); domain "" is ai.onnx.
void add_converter(std::string domain, std::string op_type, Converter fn);
const Converter* find_converter(std::string_view domain, std::string_view op_type);
std::vector<std::pair<std::string, std::string>> converter_names();  // (domain, op_type)

// ONNX TensorProto data types as rlx dtypes. UINT16 widens to i32 and UINT32 / UINT64 to
// i64 (rlx has no wider unsigned types); nullopt for types rlx cannot hold (STRING,
// complex, float8).
std::optional<DType> dtype_from_onnx(int32_t elem_type);
int32_t onnx_from_dtype(DType dtype);

// Helpers most converters need.
int64_t normalize_axis(const NodeContext& ctx, int64_t axis, int64_t rank);

// Registration of every family's converters (one file each, called once).
void register_elementwise_converters();
void register_shape_converters();
void register_reduce_converters();
void register_nn_converters();
void register_sequence_model_converters();  // RNN, GRU, LSTM
void register_quant_converters();
void register_control_converters();   // If, Loop, Scan
void register_misc_converters();      // signal, detection, random, training…
void register_gradient_converter();   // ai.onnx.preview.training Gradient, by rlx::grad
void register_sequence_converters();  // Sequence*, Optional* (lists held by the importer)

}  // namespace rlx::onnx_import
