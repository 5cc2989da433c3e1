// NodeContext: what converters use to read a node and build its replacement, folding
// constants as they go; the converter table.
#include <onnx/onnx_pb.h>

#include <map>
#include <mutex>

#include "frontend/onnx/proto.h"
#include "frontend/onnx/scope.h"
#include "passes/rewrite.h"
#include "rlx/axes.h"
#include "runtime/evaluate.h"

namespace rlx::onnx_import {

using ::onnx::AttributeProto;

NodeContext::NodeContext(Scope& scope, const ::onnx::NodeProto& node, int64_t opset)
    : scope_(scope), node_(node), opset_(opset) {}

const std::string& NodeContext::op_type() const { return node_.op_type(); }
const std::string& NodeContext::name() const {
  return node_.name().empty() && node_.output_size() ? node_.output(0) : node_.name();
}
Graph& NodeContext::graph() const { return scope_.graph(); }

std::string NodeContext::where() const { return str_cat("onnx ", op_type(), " '", name(), "'"); }

// ---- inputs

size_t NodeContext::num_inputs() const { return size_t(node_.input_size()); }
bool NodeContext::has_input(size_t i) const {
  return i < num_inputs() && !node_.input(int(i)).empty();
}

Value NodeContext::input(size_t i) const {
  if (!has_input(i)) fail("expected input ", i, ", got none");
  return scope_.lookup(node_.input(int(i)), where());
}

const Packed* NodeContext::packed_input(size_t i) const {
  if (!has_input(i)) return nullptr;
  return scope_.find_packed(node_.input(int(i)), where());
}

void NodeContext::set_packed_output(size_t i, Packed p) {
  if (packed_out_.size() <= i) packed_out_.resize(i + 1);
  packed_out_[i] = std::move(p);
}

std::optional<Tensor> NodeContext::constant_of(Value v) const {
  if (const Literal* lit = passes::constant_of(graph(), v)) return Tensor::from_literal(*lit);
  return std::nullopt;
}

std::optional<Tensor> NodeContext::constant_input(size_t i) const {
  if (!has_input(i)) return std::nullopt;
  return constant_of(input(i));
}

Tensor NodeContext::need_constant(size_t i) const {
  Value v = input(i);
  if (auto t = constant_of(v)) return *t;
  throw NeedsConstant{i};
}

std::optional<std::vector<int64_t>> NodeContext::ints_input(size_t i) const {
  if (!has_input(i)) return std::nullopt;
  Tensor t = need_constant(i);
  if (is_float(t.dtype()) || is_bool(t.dtype()))
    fail_type("expected integer input ", i, " ('", node_.input(int(i)), "'), got ", t.type().str());
  std::vector<int64_t> out;
  for (double d : t.to_doubles()) out.push_back(int64_t(d));
  if (t.dtype() == DType::i64) out = t.to_vector<int64_t>();  // exact beyond 2^53
  return out;
}

std::optional<std::vector<double>> NodeContext::floats_input(size_t i) const {
  if (!has_input(i)) return std::nullopt;
  return need_constant(i).to_doubles();
}

size_t NodeContext::num_outputs() const { return size_t(node_.output_size()); }
bool NodeContext::has_output(size_t i) const {
  return i < num_outputs() && !node_.output(int(i)).empty();
}

// ---- attributes

const AttributeProto* NodeContext::attr(std::string_view name) const {
  for (const AttributeProto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
bool NodeContext::has_attr(std::string_view name) const { return attr(name) != nullptr; }

namespace {

void expect_attr_type(const NodeContext& ctx, const AttributeProto& a,
                      AttributeProto::AttributeType want) {
  if (a.type() != want && a.type() != AttributeProto::UNDEFINED)
    ctx.fail_type("expected attribute '", a.name(), "' of type ",
                  AttributeProto::AttributeType_Name(want), ", got ",
                  AttributeProto::AttributeType_Name(a.type()));
}

}  // namespace

int64_t NodeContext::attr_int(std::string_view name, int64_t def) const {
  const AttributeProto* a = attr(name);
  if (!a) return def;
  expect_attr_type(*this, *a, AttributeProto::INT);
  return a->i();
}

int64_t NodeContext::need_attr_int(std::string_view name) const {
  if (!attr(name)) fail("expected attribute '", name, "', got none");
  return attr_int(name, 0);
}

double NodeContext::attr_float(std::string_view name, double def) const {
  const AttributeProto* a = attr(name);
  if (!a) return def;
  if (a->type() == AttributeProto::INT) return double(a->i());
  expect_attr_type(*this, *a, AttributeProto::FLOAT);
  return a->f();
}

std::string NodeContext::attr_string(std::string_view name, std::string def) const {
  const AttributeProto* a = attr(name);
  if (!a) return def;
  expect_attr_type(*this, *a, AttributeProto::STRING);
  return a->s();
}

std::vector<int64_t> NodeContext::attr_ints(std::string_view name, std::vector<int64_t> def) const {
  const AttributeProto* a = attr(name);
  if (!a) return def;
  if (a->type() == AttributeProto::INT) return {a->i()};
  expect_attr_type(*this, *a, AttributeProto::INTS);
  return {a->ints().begin(), a->ints().end()};
}

std::vector<double> NodeContext::attr_floats(std::string_view name, std::vector<double> def) const {
  const AttributeProto* a = attr(name);
  if (!a) return def;
  if (a->type() == AttributeProto::FLOAT) return {a->f()};
  expect_attr_type(*this, *a, AttributeProto::FLOATS);
  return {a->floats().begin(), a->floats().end()};
}

std::vector<std::string> NodeContext::attr_strings(std::string_view name) const {
  const AttributeProto* a = attr(name);
  if (!a) return {};
  expect_attr_type(*this, *a, AttributeProto::STRINGS);
  return {a->strings().begin(), a->strings().end()};
}

std::optional<Tensor> NodeContext::attr_tensor(std::string_view name) const {
  const AttributeProto* a = attr(name);
  if (!a) return std::nullopt;
  expect_attr_type(*this, *a, AttributeProto::TENSOR);
  return tensor_from_proto(a->t(), scope_.state().base_dir,
                           str_cat(where(), " attribute '", name, "'"));
}

const ::onnx::GraphProto* NodeContext::attr_graph(std::string_view name) const {
  const AttributeProto* a = attr(name);
  if (!a) return nullptr;
  expect_attr_type(*this, *a, AttributeProto::GRAPH);
  return &a->g();
}

// ---- building

namespace {

constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

bool foldable(const OpDef& op) {
  return op.name != "constant" && !op.has(Trait::random) && !op.has(Trait::side_effect) &&
         !op.has(Trait::control) && !op.has(Trait::checkpoint);
}

}  // namespace

std::vector<Value> NodeContext::apply(std::string_view op, std::vector<Value> inputs, Attrs attrs,
                                      std::vector<SubgraphPtr> subgraphs) {
  Graph& g = graph();
  const OpDef& def = OpRegistry::global().get(op);
  // Shapes of values whose shape is static are constants.
  if (def.name == "shape_of" && inputs.size() == 1 && is_static(inputs[0].shape()))
    return {ints(static_sizes(inputs[0].shape()))};
  if (subgraphs.empty() && foldable(def)) {
    std::vector<Tensor> known;
    for (Value v : inputs) {
      auto t = constant_of(v);
      if (!t) break;
      known.push_back(*t);
    }
    if (known.size() == inputs.size()) {
      // Type-check through the graph first, so bad input still gets the op's own error.
      Attrs complete = validate_attrs(def, attrs);
      std::vector<TensorType> in;
      for (Value v : inputs) in.push_back(v.type());
      std::vector<TensorType> out = infer_types(def, in, complete, {});
      bool small = true;
      for (const TensorType& t : out) {
        auto n = t.numel();
        small &= n && *n <= kMaxFoldElements;
      }
      if (small)
        if (auto lits = detail::evaluate_on_cpu(def, known, complete)) {
          std::vector<Value> res;
          for (const Literal& l : *lits) res.push_back(g.constant(l));
          return res;
        }
    }
  }
  return g.apply(def, std::move(inputs), std::move(attrs), std::move(subgraphs));
}

Value NodeContext::apply1(std::string_view op, std::vector<Value> inputs, Attrs attrs,
                          std::vector<SubgraphPtr> subgraphs) {
  std::vector<Value> out = apply(op, std::move(inputs), std::move(attrs), std::move(subgraphs));
  if (out.size() != 1) fail("expected op '", op, "' to have 1 output, got ", out.size());
  return out[0];
}

Value NodeContext::constant(const Tensor& t) { return graph().constant(t.to_literal()); }
Value NodeContext::constant(const Literal& lit) { return graph().constant(lit); }
Value NodeContext::scalar(DType dtype, double v) { return constant(Literal::scalar(dtype, v)); }
Value NodeContext::ints(const std::vector<int64_t>& v) { return constant(Literal::from(v)); }

Value NodeContext::cast(Value v, DType dtype) {
  if (v.dtype() == dtype) return v;
  if (dtype == DType::f32 && scope_.state().exact_ints.count({v.graph, v.id}))
    return v.graph->producer(v)->inputs[0];
  return apply1("cast", {v}, {{"dtype", dtype}});
}

int64_t normalize_axis(const NodeContext& ctx, int64_t axis, int64_t rank) {
  int64_t a = norm_axis(axis, rank);
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    ctx.fail("expected axis in [", -rank, ", ", rank, "), got ", axis);
  return a;
}

// ---- the converter table

namespace {

struct Table {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, Converter, std::less<>> fns;
};

Table& table() {
  static Table t;
  return t;
}

std::string canonical_domain(std::string_view d) {
  return d == "ai.onnx" ? std::string() : std::string(d);
}

}  // namespace

void add_converter(std::string domain, std::string op_type, Converter fn) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  t.fns[{canonical_domain(domain), std::move(op_type)}] = std::move(fn);
}

const Converter* find_converter(std::string_view domain, std::string_view op_type) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.fns.find(std::make_pair(canonical_domain(domain), std::string(op_type)));
  return it == t.fns.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, std::string>> converter_names() {
  Table& t = table();
  std::lock_guard lock(t.mu);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : t.fns) out.push_back(k);
  return out;
}

}  // namespace rlx::onnx_import

namespace rlx::onnx_import {

namespace {

void define_initializers(Scope& scope, const ::onnx::GraphProto& body, std::string_view where) {
  for (const auto& t : body.initializer())
    scope.define(t.name(), scope.graph().constant(
                               tensor_from_proto(t, scope.state().base_dir,
                                                 str_cat(where, " initializer '", t.name(), "'"))
                                   .to_literal()));
}

}  // namespace

NodeContext::Subgraph NodeContext::import_subgraph(
    const ::onnx::GraphProto& body, const std::vector<std::optional<TensorType>>& arg_types) {
  std::string gname = sanitize(body.name().empty() ? "body" : body.name());
  auto g = std::make_shared<Graph>(gname);
  Scope inner(scope_.state(), *g, &scope_);
  define_initializers(inner, body, where());
  for (int i = 0; i < body.input_size(); ++i) {
    const auto& vi = body.input(i);
    TensorType t = size_t(i) < arg_types.size() && arg_types[size_t(i)]
                       ? *arg_types[size_t(i)]
                       : type_from_value_info(scope_.state(), vi, "subgraph input", vi.name());
    inner.define(vi.name(), g->input(inner.arg_name(vi.name()), t));
  }
  inner.convert_nodes(body);
  for (const auto& o : body.output())
    g->output(inner.lookup(o.name(), where()), sanitize(o.name()));
  return {g, inner.captures()};
}

std::vector<Value> NodeContext::inline_subgraph(
    const ::onnx::GraphProto& body, const std::vector<std::variant<Value, Packed>>& args,
    std::vector<std::optional<Packed>>* packed) {
  Scope inner(scope_.state(), graph(), &scope_, /*inline_into_parent=*/true);
  define_initializers(inner, body, where());
  if (size_t(body.input_size()) != args.size())
    fail("expected a subgraph of ", args.size(), " inputs, got ", body.input_size());
  for (int i = 0; i < body.input_size(); ++i) {
    const auto& a = args[size_t(i)];
    if (const Value* v = std::get_if<Value>(&a))
      inner.define(body.input(i).name(), *v);
    else
      inner.define_packed(body.input(i).name(), std::get<Packed>(a));
  }
  inner.convert_nodes(body);
  std::vector<Value> out;
  for (int j = 0; j < body.output_size(); ++j) {
    const std::string& name = body.output(j).name();
    const Packed* p = inner.find_packed(name, where());
    if (p && !(p->optional && !p->sequence && p->has_value)) {
      if (!packed)
        unsupported("returns a sequence or optional '", name, "' where a tensor is read");
      if (packed->size() <= size_t(j)) packed->resize(size_t(j) + 1);
      (*packed)[size_t(j)] = *p;
      out.push_back(Value{});
      continue;
    }
    out.push_back(inner.lookup(name, where()));
  }
  return out;
}

}  // namespace rlx::onnx_import
