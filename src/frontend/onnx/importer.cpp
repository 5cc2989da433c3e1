// rlx::onnx: model loading and the import of the main graph.
#include <onnx/onnx_pb.h>
// after onnx_pb.h, which defines ONNX_API
#include <onnx/onnx-data_pb.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "frontend/onnx/late.h"
#include "frontend/onnx/proto.h"
#include "frontend/onnx/scope.h"
#include "rlx/onnx.h"

namespace rlx::onnx {

namespace imp = rlx::onnx_import;

namespace {

// Constant: the one attribute that holds the value becomes a constant node.
std::vector<Value> convert_constant(imp::NodeContext& ctx) {
  if (auto t = ctx.attr_tensor("value")) return {ctx.constant(*t)};
  if (ctx.has_attr("value_float"))
    return {ctx.scalar(DType::f32, ctx.attr_float("value_float", 0))};
  if (ctx.has_attr("value_int"))
    return {ctx.scalar(DType::i64, double(ctx.attr_int("value_int", 0)))};
  if (ctx.has_attr("value_floats")) {
    std::vector<double> v = ctx.attr_floats("value_floats");
    return {ctx.constant(Literal::from_doubles(DType::f32, {int64_t(v.size())}, v))};
  }
  if (ctx.has_attr("value_ints")) return {ctx.ints(ctx.attr_ints("value_ints"))};
  if (ctx.has_attr("sparse_value")) ctx.unsupported("sparse constants are not supported");
  if (ctx.has_attr("value_string"))
    return {ctx.constant(Literal::from_strings({ctx.attr_string("value_string", "")}, {}))};
  if (ctx.has_attr("value_strings")) {
    std::vector<std::string> v = ctx.attr_strings("value_strings");
    return {ctx.constant(Literal::from_strings(v, {int64_t(v.size())}))};
  }
  ctx.fail("expected one of the attributes value, value_float(s), value_int(s), got none");
}

void register_everything() {
  static std::once_flag once;
  std::call_once(once, [] {
    imp::add_converter("", "Constant", convert_constant);
    imp::register_late_op();
    imp::register_elementwise_converters();
    imp::register_shape_converters();
    imp::register_reduce_converters();
    imp::register_nn_converters();
    imp::register_sequence_model_converters();
    imp::register_quant_converters();
    imp::register_control_converters();
    imp::register_misc_converters();
    imp::register_sequence_converters();
    imp::register_gradient_converter();
  });
}

// Every (domain, op_type) of g and its subgraphs, counted.
void count_ops(const ::onnx::GraphProto& g,
               std::map<std::pair<std::string, std::string>, int64_t>& out) {
  for (const auto& n : g.node()) {
    ++out[{n.domain() == "ai.onnx" ? "" : n.domain(), n.op_type()}];
    for (const auto& a : n.attribute()) {
      if (a.has_g()) count_ops(a.g(), out);
      for (const auto& sg : a.graphs()) count_ops(sg, out);
    }
  }
}

std::string op_label(const std::pair<std::string, std::string>& k) {
  return k.first.empty() ? k.second : k.first + "." + k.second;
}

ValueKind kind_of(const ::onnx::TypeProto& t) {
  if (t.has_sequence_type()) return ValueKind::sequence;
  if (t.has_optional_type())
    return t.optional_type().elem_type().has_sequence_type() ? ValueKind::optional_sequence
                                                             : ValueKind::optional_tensor;
  return ValueKind::tensor;
}

// A graph input: a tensor arg, or (sequences, optionals) a list of them held by the scope.
void define_input(imp::Scope& scope, Model& m, const ::onnx::ValueInfoProto& vi,
                  const ImportOptions& options) {
  Graph& g = scope.graph();
  ValueKind kind = kind_of(vi.type());
  if (kind == ValueKind::tensor) {
    TensorType t = imp::type_from_value_info(scope.state(), vi, "graph input", vi.name());
    auto it = options.input_shapes.find(vi.name());
    if (it != options.input_shapes.end()) t.shape = to_shape(it->second);
    scope.define(vi.name(), g.input(scope.arg_name(vi.name()), t));
    m.inputs.push_back(vi.name());
    return;
  }
  imp::Packed p;
  p.optional = kind == ValueKind::optional_tensor || kind == ValueKind::optional_sequence;
  p.sequence = kind == ValueKind::sequence || kind == ValueKind::optional_sequence;
  if (options.absent_inputs.count(vi.name())) {
    if (!p.optional)
      fail<ValueError>("onnx", "input '", vi.name(), "' is not optional: it needs a value");
    p.has_value = false;
    scope.define_packed(vi.name(), p);
    return;
  }
  // The element type: through the optional, then through the sequence.
  ::onnx::ValueInfoProto elem = vi;
  if (p.optional) *elem.mutable_type() = vi.type().optional_type().elem_type();
  if (p.sequence) {
    ::onnx::TypeProto inner = elem.type().sequence_type().elem_type();
    *elem.mutable_type() = inner;
  }
  // Element types often carry no shape: the given shapes say the rank.
  auto with_shape = [&](const std::vector<int64_t>* shape) {
    ::onnx::ValueInfoProto e = elem;
    auto* tt = e.mutable_type()->mutable_tensor_type();
    if (shape && !tt->has_shape())
      for (int64_t d : *shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
    return imp::type_from_value_info(scope.state(), e, "graph input", vi.name());
  };
  if (!p.sequence) {
    auto given = options.input_shapes.find(vi.name());
    TensorType t = with_shape(given != options.input_shapes.end() ? &given->second : nullptr);
    auto it = options.input_shapes.find(vi.name());
    if (it != options.input_shapes.end()) t.shape = to_shape(it->second);
    p.elems = {g.input(scope.arg_name(vi.name()), t)};
    m.inputs.push_back(vi.name());
  } else {
    auto it = options.sequence_shapes.find(vi.name());
    if (it == options.sequence_shapes.end())
      fail<NotSupported>("onnx", "input '", vi.name(),
                         "' is a sequence: rlx needs the shapes "
                         "of its elements (ImportOptions::sequence_shapes)");
    for (size_t k = 0; k < it->second.size(); ++k) {
      TensorType t = with_shape(&it->second[k]);
      if (t.rank() != int64_t(it->second[k].size()))
        fail<ValueError>("onnx", "expected element ", k, " of input '", vi.name(), "' of rank ",
                         t.rank(), ", got shape ", ints_str(it->second[k]));
      t.shape = to_shape(it->second[k]);
      p.elems.push_back(g.input(scope.arg_name(str_cat(vi.name(), "_", k)), t));
      m.inputs.push_back(str_cat(vi.name(), "[", k, "]"));
    }
  }
  scope.define_packed(vi.name(), p);
}

Model import_model(const ::onnx::ModelProto& proto, const std::string& base_dir,
                   const ImportOptions& options) {
  register_everything();
  imp::ImportState state;
  state.base_dir = base_dir;
  state.dims = options.dims;
  state.default_dim = options.default_dim;
  for (const auto& o : proto.opset_import())
    state.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  // Models from before opset imports (IR < 3) use the first opset.
  if (!state.opsets.count("")) state.opsets[""] = 1;
  const ::onnx::GraphProto& gp = proto.graph();

  // Every op without a converter, in one error.
  std::map<std::pair<std::string, std::string>, int64_t> ops;
  count_ops(gp, ops);
  std::string missing;
  for (const auto& [k, n] : ops)
    if (!imp::find_converter(k.first, k.second))
      missing += (missing.empty() ? "" : ", ") + op_label(k);
  if (!missing.empty())
    fail<NotSupported>("onnx", "the model uses ops rlx cannot import: ", missing);

  Model m;
  m.ir_version = proto.ir_version();
  m.opset = state.opsets[""];
  m.producer = proto.producer_name();
  m.graph = std::make_unique<Graph>(
      gp.name().empty() || !is_identifier(gp.name()) ? std::string("main") : gp.name());
  Graph& g = *m.graph;
  imp::Scope scope(state, g, nullptr);

  // Input shapes given by the caller bind the symbolic dims they fill.
  std::set<std::string> inits;
  for (const auto& t : gp.initializer()) inits.insert(t.name());
  for (const auto& vi : gp.input()) {
    auto it = options.input_shapes.find(vi.name());
    if (it == options.input_shapes.end() || inits.count(vi.name())) continue;
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
    const auto& shape = vi.type().tensor_type().shape();
    if (shape.dim_size() != int(it->second.size()))
      fail<ValueError>("onnx", "expected input '", vi.name(), "' of rank ", shape.dim_size(),
                       ", got shape ", ints_str(it->second));
    for (int d = 0; d < shape.dim_size(); ++d) {
      const auto& dim = shape.dim(d);
      if (dim.has_dim_value() && dim.dim_value() != it->second[size_t(d)])
        fail<ValueError>("onnx", "expected input '", vi.name(), "' dim ", d, " to be ",
                         dim.dim_value(), ", got shape ", ints_str(it->second));
      if (dim.has_dim_param() && !dim.dim_param().empty())
        state.dims.emplace(dim.dim_param(), it->second[size_t(d)]);
    }
  }
  for (const auto& [name, shape] : options.input_shapes) {
    bool found = false;
    for (const auto& vi : gp.input()) found |= vi.name() == name && !inits.count(name);
    if (!found) fail<ValueError>("onnx", "no graph input named '", name, "'");
  }

  for (const auto& t : gp.initializer())
    scope.define(t.name(), g.constant(imp::tensor_from_proto(
                                          t, base_dir, str_cat("initializer '", t.name(), "'"))
                                          .to_literal()));
  if (gp.sparse_initializer_size() > 0)
    fail<NotSupported>("onnx", "sparse initializers are not supported");
  for (const auto& vi : gp.input()) {
    if (inits.count(vi.name())) continue;  // an initializer listed as an input: a constant
    define_input(scope, m, vi, options);
  }
  scope.convert_nodes(gp);
  std::set<std::string> out_names;
  auto add_output = [&](Value v, const std::string& onnx_name, const std::string& base) {
    std::string name = imp::sanitize(base);
    for (int k = 1; !out_names.insert(name).second; ++k)
      name = imp::sanitize(base) + "_" + std::to_string(k);
    g.output(v, name);
    m.outputs.push_back(onnx_name);
  };
  for (const auto& o : gp.output()) {
    if (const imp::Packed* p = scope.find_packed(o.name(), "onnx graph output")) {
      if (!p->sequence) {
        if (p->has_value) add_output(p->elems.at(0), o.name(), o.name());
        continue;
      }
      for (size_t k = 0; k < p->elems.size(); ++k)
        add_output(p->elems[k], str_cat(o.name(), "[", k, "]"), str_cat(o.name(), "_", k));
      continue;
    }
    add_output(scope.lookup(o.name(), "onnx graph output"), o.name(), o.name());
  }
  return m;
}

}  // namespace

void register_ops() { register_everything(); }

Model load_bytes(std::string_view bytes, const std::string& base_dir,
                 const ImportOptions& options) {
  ::onnx::ModelProto proto;
  imp::parse_model(bytes, proto, "<memory>");
  return import_model(proto, base_dir, options);
}

Model load(const std::string& path, const ImportOptions& options) {
  std::string bytes = imp::read_file(path);
  ::onnx::ModelProto proto;
  imp::parse_model(bytes, proto, path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  return import_model(proto, dir.empty() ? "." : dir, options);
}

std::vector<std::string> graph_inputs(const std::string& path) {
  std::string bytes = imp::read_file(path);
  ::onnx::ModelProto proto;
  imp::parse_model(bytes, proto, path);
  std::set<std::string> inits;
  for (const auto& t : proto.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> out;
  for (const auto& vi : proto.graph().input())
    if (!inits.count(vi.name())) out.push_back(vi.name());
  return out;
}

Signature signature(const std::string& path) {
  std::string bytes = imp::read_file(path);
  ::onnx::ModelProto proto;
  imp::parse_model(bytes, proto, path);
  std::set<std::string> inits;
  for (const auto& t : proto.graph().initializer()) inits.insert(t.name());
  Signature s;
  for (const auto& vi : proto.graph().input())
    if (!inits.count(vi.name())) s.inputs.push_back({vi.name(), kind_of(vi.type())});
  for (const auto& vi : proto.graph().output())
    s.outputs.push_back({vi.name(), kind_of(vi.type())});
  return s;
}

std::vector<Tensor> read_values(const std::string& path, ValueKind kind) {
  std::string bytes = imp::read_file(path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  auto tensors_of = [&](const ::onnx::SequenceProto& seq) {
    if (seq.elem_type() != ::onnx::SequenceProto::TENSOR && seq.tensor_values_size() == 0 &&
        seq.elem_type() != ::onnx::SequenceProto::UNDEFINED)
      fail<NotSupported>("onnx", path, ": sequences of non-tensors are not supported");
    std::vector<Tensor> out;
    for (const auto& t : seq.tensor_values()) out.push_back(imp::tensor_from_proto(t, dir, path));
    return out;
  };
  switch (kind) {
    case ValueKind::tensor: {
      ::onnx::TensorProto t;
      if (!t.ParseFromString(bytes)) fail<IoError>("onnx", path, ": not a TensorProto");
      return {imp::tensor_from_proto(t, dir, path)};
    }
    case ValueKind::sequence: {
      ::onnx::SequenceProto seq;
      if (!seq.ParseFromString(bytes)) fail<IoError>("onnx", path, ": not a SequenceProto");
      return tensors_of(seq);
    }
    default: {
      ::onnx::OptionalProto opt;
      if (!opt.ParseFromString(bytes)) fail<IoError>("onnx", path, ": not an OptionalProto");
      if (opt.has_tensor_value()) return {imp::tensor_from_proto(opt.tensor_value(), dir, path)};
      if (opt.has_sequence_value()) return tensors_of(opt.sequence_value());
      return {};
    }
  }
}

std::vector<OpUse> op_histogram(const std::string& path) {
  register_everything();
  std::string bytes = imp::read_file(path);
  ::onnx::ModelProto proto;
  imp::parse_model(bytes, proto, path);
  std::map<std::pair<std::string, std::string>, int64_t> ops;
  count_ops(proto.graph(), ops);
  std::vector<OpUse> out;
  for (const auto& [k, n] : ops)
    out.push_back({k.first, k.second, n, imp::find_converter(k.first, k.second) != nullptr});
  return out;
}

Tensor read_tensor(const std::string& path) {
  std::string bytes = imp::read_file(path);
  ::onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) fail<IoError>("onnx", path, ": not a TensorProto");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return imp::tensor_from_proto(t, dir.empty() ? "." : dir, path);
}

std::string read_tensor_name(const std::string& path) {
  std::string bytes = imp::read_file(path);
  ::onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) fail<IoError>("onnx", path, ": not a TensorProto");
  return t.name();
}

}  // namespace rlx::onnx
