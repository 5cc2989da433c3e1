#include "rlx/graph.h"

#include "rlx/error.h"
#include "rlx/op.h"

namespace rlx {

const TensorType& Value::type() const {
  if (!valid()) fail<ValueError>("Value", "expected a valid value, got an empty handle");
  return graph->type(*this);
}

const std::string& Node::op_name() const { return op->name; }

Graph::Graph(std::string name) : name_(std::move(name)) {
  if (!is_identifier(name_))
    fail<ValueError>("Graph", "expected an identifier as the graph name, got '", name_, "'");
}

Value Graph::add_value(TensorType type, int32_t node, int32_t index) {
  values_.push_back({std::move(type), node, index});
  return Value{this, int32_t(values_.size() - 1)};
}

Value Graph::add_arg(std::string name, ArgKind kind, TensorType type) {
  const char* what = kind == ArgKind::input ? "input" : "param";
  if (!is_identifier(name))
    fail<ValueError>(what, "expected an identifier as the name, got '", name, "'");
  if (find_arg(name)) fail<ValueError>(what, "expected a new name, got duplicate '", name, "'");
  if (is_quantized(type.dtype)) {  // rows of whole blocks (rlx/quant.h)
    int64_t b = dtype_block(type.dtype);
    if (type.rank() == 0 || (type.shape.back().is_static() && type.shape.back().value() % b != 0))
      fail<ValueError>(what, "expected '", name, "' of ", dtype_name(type.dtype),
                       " with a last dim that is a multiple of ", b, ", got ", type.str());
  }
  Value v = add_value(std::move(type), -1, int32_t(args_.size()));
  args_.push_back({std::move(name), kind, v});
  return v;
}

Value Graph::input(std::string name, TensorType type) {
  return add_arg(std::move(name), ArgKind::input, std::move(type));
}

Value Graph::param(std::string name, TensorType type) {
  return add_arg(std::move(name), ArgKind::param, std::move(type));
}

Value Graph::constant(const Literal& value) { return apply1("constant", {}, {{"value", value}}); }

void Graph::check_own(Value v, std::string_view where, size_t index) const {
  if (!v.valid())
    fail<ValueError>(where, "expected a valid value as input ", index, ", got an empty handle");
  if (v.graph != this)
    fail<ValueError>(where, "expected input ", index, " from graph '", name_,
                     "', got a value of graph '", v.graph->name_, "'");
  if (size_t(v.id) >= values_.size())
    fail<ValueError>(where, "expected input ", index, " to be a value of this graph, got id ",
                     v.id);
}

std::vector<Value> Graph::apply(std::string_view op, std::vector<Value> inputs, Attrs attrs,
                                std::vector<SubgraphPtr> subgraphs) {
  return apply(OpRegistry::global().get(op), std::move(inputs), std::move(attrs),
               std::move(subgraphs));
}

std::vector<Value> Graph::apply(const OpDef& op, std::vector<Value> inputs, Attrs attrs,
                                std::vector<SubgraphPtr> subgraphs) {
  return add_node(op, std::move(inputs), std::move(attrs), std::move(subgraphs), false);
}

std::vector<Value> Graph::add_node(const OpDef& op, std::vector<Value> inputs, const Attrs& attrs,
                                   std::vector<SubgraphPtr> subgraphs, bool expect_one) {
  std::vector<TensorType> in_types;
  in_types.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_own(inputs[i], op.name, i);
    in_types.push_back(type(inputs[i]));
  }
  Attrs complete = validate_attrs(op, attrs);
  std::vector<TensorType> out_types = infer_types(op, in_types, complete, subgraphs);
  if (expect_one && out_types.size() != 1)
    fail<ValueError>(op.name, "expected an op with one output for apply1, got ", out_types.size(),
                     " outputs");

  Node n;
  n.op = &op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(complete);
  n.subgraphs = std::move(subgraphs);
  int32_t node_index = int32_t(nodes_.size());
  for (size_t i = 0; i < out_types.size(); ++i)
    n.outputs.push_back(add_value(std::move(out_types[i]), node_index, int32_t(i)));
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

Value Graph::apply1(std::string_view op, std::vector<Value> inputs, Attrs attrs,
                    std::vector<SubgraphPtr> subgraphs) {
  return add_node(OpRegistry::global().get(op), std::move(inputs), attrs, std::move(subgraphs),
                  true)[0];
}

void Graph::output(Value v, std::string name) {
  check_own(v, "output", outputs_.size());
  if (name.empty()) name = str_cat("out", outputs_.size());
  if (!is_identifier(name))
    fail<ValueError>("output", "expected an identifier as the name, got '", name, "'");
  for (const auto& o : outputs_)
    if (o.name == name)
      fail<ValueError>("output", "expected a new name, got duplicate '", name, "'");
  outputs_.push_back({std::move(name), v});
}

const ValueInfo& Graph::info(Value v) const {
  if (v.graph != this || v.id < 0 || size_t(v.id) >= values_.size())
    fail<ValueError>("Graph", "expected a value of graph '", name_, "', got id ", v.id);
  return values_[size_t(v.id)];
}

const TensorType& Graph::type(Value v) const { return info(v).type; }

Value Graph::value(int32_t id) {
  if (id < 0 || size_t(id) >= values_.size())
    fail<ValueError>("Graph", "expected a value id < ", values_.size(), ", got ", id);
  return Value{this, id};
}

std::vector<Value> Graph::inputs() const {
  std::vector<Value> out;
  for (const auto& a : args_)
    if (a.kind == ArgKind::input) out.push_back(a.value);
  return out;
}

std::vector<Value> Graph::params() const {
  std::vector<Value> out;
  for (const auto& a : args_)
    if (a.kind == ArgKind::param) out.push_back(a.value);
  return out;
}

const Arg* Graph::find_arg(std::string_view name) const {
  for (const auto& a : args_)
    if (a.name == name) return &a;
  return nullptr;
}

const Node* Graph::producer(Value v) const {
  const ValueInfo& i = info(v);
  return i.node < 0 ? nullptr : &nodes_[size_t(i.node)];
}

void Graph::set_type(Value v, TensorType type) {
  info(v);  // bounds check
  values_[size_t(v.id)].type = std::move(type);
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  g->values_ = values_;
  g->args_ = args_;
  g->nodes_ = nodes_;
  g->outputs_ = outputs_;
  auto rebase = [&](Value& v) {
    if (v.graph == this) v.graph = g.get();
  };
  for (auto& a : g->args_) rebase(a.value);
  for (auto& o : g->outputs_) rebase(o.value);
  for (auto& n : g->nodes_) {
    for (auto& v : n.inputs) rebase(v);
    for (auto& v : n.outputs) rebase(v);
  }
  return g;
}

}  // namespace rlx
