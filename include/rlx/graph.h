// The graph IR: SSA values with inferred types, nodes with one or more outputs,
// named inputs and params, constants, outputs, and subgraphs for control flow.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/literal.h"
#include "rlx/shape.h"

namespace rlx {

class Graph;
struct OpDef;

// A handle to an SSA value: the graph it lives in and its index there.
struct Value {
  Graph* graph = nullptr;
  int32_t id = -1;

  bool valid() const { return graph != nullptr && id >= 0; }
  const TensorType& type() const;
  DType dtype() const { return type().dtype; }
  const Shape& shape() const { return type().shape; }
  int64_t rank() const { return type().rank(); }
  bool operator==(const Value& o) const { return graph == o.graph && id == o.id; }
};

using SubgraphPtr = std::shared_ptr<const Graph>;

struct Node {
  const OpDef* op = nullptr;
  std::vector<Value> inputs;
  std::vector<Value> outputs;
  Attrs attrs;  // complete: the op's defaults are filled in when the node is added
  std::vector<SubgraphPtr> subgraphs;

  const std::string& op_name() const;
};

enum class ArgKind : uint8_t { input, param };

// A graph argument: a runtime input, or a param (a weight set once, kept by the session).
struct Arg {
  std::string name;
  ArgKind kind;
  Value value;
};

struct Output {
  std::string name;
  Value value;
};

struct ValueInfo {
  TensorType type;
  int32_t node = -1;  // producing node, or -1 for an argument
  int32_t index = 0;  // output index in the producing node, or the argument index
};

// A graph is built in SSA order: each node's inputs exist before it, so the node list is
// a topological order. Types are inferred as nodes are added; the user never passes an
// output type. Values hold a pointer to their graph, so a Graph is neither copied nor
// moved: create subgraphs with std::make_shared<Graph>(…), copy with clone().
class Graph {
 public:
  explicit Graph(std::string name = "main");
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }

  // Builder API (throws ValueError / TypeError naming the op on bad input).
  Value input(std::string name, TensorType type);
  Value param(std::string name, TensorType type);
  Value constant(const Literal& value);
  std::vector<Value> apply(std::string_view op, std::vector<Value> inputs, Attrs attrs = {},
                           std::vector<SubgraphPtr> subgraphs = {});
  std::vector<Value> apply(const OpDef& op, std::vector<Value> inputs, Attrs attrs = {},
                           std::vector<SubgraphPtr> subgraphs = {});
  // apply() for an op with exactly one output.
  Value apply1(std::string_view op, std::vector<Value> inputs, Attrs attrs = {},
               std::vector<SubgraphPtr> subgraphs = {});
  // Marks v as an output; the name defaults to "out<N>".
  void output(Value v, std::string name = {});

  // Queries.
  const TensorType& type(Value v) const;
  const ValueInfo& info(Value v) const;
  size_t num_values() const { return values_.size(); }
  Value value(int32_t id);  // the handle for a value index (throws when out of range)
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Arg>& args() const { return args_; }
  const std::vector<Output>& outputs() const { return outputs_; }
  std::vector<Value> inputs() const;  // args of kind input, in order
  std::vector<Value> params() const;  // args of kind param, in order
  const Arg* find_arg(std::string_view name) const;
  // The node that produces v, or nullptr for an argument.
  const Node* producer(Value v) const;

  std::unique_ptr<Graph> clone() const;

  // Low-level mutation for passes and for tests that build malformed graphs on purpose.
  // Nothing is checked here: run verify() afterwards.
  Value add_value(TensorType type, int32_t node = -1, int32_t index = 0);
  std::vector<Node>& mutable_nodes() { return nodes_; }
  std::vector<Output>& mutable_outputs() { return outputs_; }
  void set_type(Value v, TensorType type);

 private:
  std::vector<Value> add_node(const OpDef& op, std::vector<Value> inputs, const Attrs& attrs,
                              std::vector<SubgraphPtr> subgraphs, bool expect_one);
  void check_own(Value v, std::string_view where, size_t index) const;
  Value add_arg(std::string name, ArgKind kind, TensorType type);

  std::string name_;
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  std::vector<Arg> args_;
  std::vector<Output> outputs_;
};

}  // namespace rlx
