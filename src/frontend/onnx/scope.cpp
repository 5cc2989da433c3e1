// Scopes, topological order and the conversion of one node (with late conversion when an
// input a converter needs is only known at run time).
#include "frontend/onnx/scope.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>

#include "frontend/onnx/late.h"
#include "frontend/onnx/proto.h"
#include "passes/rewrite.h"

namespace rlx::onnx_import {

std::string sanitize(std::string_view name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s.insert(s.begin(), '_');
  return s;
}

Scope::Scope(ImportState& state, Graph& g, Scope* parent, bool inline_into_parent)
    : state_(state), g_(g), parent_(parent), inline_(inline_into_parent) {}

bool Scope::defines(const std::string& name) const {
  return names_.count(name) || absent_.count(name) ||
         (parent_ && inline_ && parent_->defines(name));
}

void Scope::define(const std::string& name, Value v) {
  absent_.erase(name);
  packed_.erase(name);
  names_[name] = v;
}

void Scope::define_packed(const std::string& name, Packed p) {
  absent_.erase(name);
  names_.erase(name);
  packed_[name] = std::move(p);
}

const Packed* Scope::find_packed(const std::string& name, std::string_view user) {
  if (auto it = packed_.find(name); it != packed_.end()) return &it->second;
  if (names_.count(name) || absent_.count(name) || !parent_) return nullptr;
  const Packed* outer = parent_->find_packed(name, user);
  if (!outer || inline_) return outer;
  Packed mine = *outer;
  for (size_t i = 0; i < mine.elems.size(); ++i)
    mine.elems[i] = capture(outer->elems[i], str_cat(name, "_", i));
  packed_[name] = std::move(mine);
  return &packed_[name];
}

void Scope::define_absent(const std::string& name, std::string why) {
  absent_[name] = std::move(why);
}

std::string Scope::arg_name(const std::string& onnx_name) {
  std::string base = sanitize(onnx_name), name = base;
  for (int k = 1; !arg_names_.insert(name).second; ++k) {
    name = base;
    name += "_";
    name += std::to_string(k);
  }
  return name;
}

Value Scope::lookup(const std::string& name, std::string_view user) {
  if (auto it = names_.find(name); it != names_.end()) return it->second;
  if (auto it = absent_.find(name); it != absent_.end())
    fail<NotSupported>(user, "reads '", name, "', which ", it->second);
  if (const Packed* p = find_packed(name, user)) {
    // An optional tensor with a value reads as the tensor.
    if (p->optional && !p->sequence && p->has_value && p->elems.size() == 1) return p->elems[0];
    fail<NotSupported>(user, "reads '", name, "' as a tensor, but it is ",
                       p->sequence ? "a sequence" : "an optional without a value");
  }
  if (!parent_) fail<ValueError>(user, "reads '", name, "', which nothing in the graph defines");
  Value outer = parent_->lookup(name, user);
  if (inline_) return outer;
  Value v = capture(outer, name);
  names_[name] = v;
  return v;
}

// A subgraph is a closed graph: an outer constant is copied in, anything else becomes an
// extra arg that the node passes in.
Value Scope::capture(Value outer, const std::string& name) {
  if (const Literal* lit = passes::constant_of(parent_->graph(), outer)) return g_.constant(*lit);
  captures_.push_back(outer);
  return g_.input(arg_name("outer_" + name), outer.type());
}

// ---- free names and order

namespace {

void collect_free(const ::onnx::GraphProto& g, std::set<std::string>& out) {
  std::set<std::string> defined;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name)) out.insert(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) use(i);
    for (const auto& a : n.attribute()) {
      std::set<std::string> inner;
      if (a.has_g()) collect_free(a.g(), inner);
      for (const auto& sg : a.graphs()) collect_free(sg, inner);
      for (const auto& name : inner) use(name);
    }
  }
  for (const auto& o : g.output()) use(o.name());
}

}  // namespace

std::set<std::string> free_names(const ::onnx::GraphProto& g) {
  std::set<std::string> out;
  collect_free(g, out);
  return out;
}

// Kahn's algorithm over the names nodes produce: exporters may list nodes in any order.
std::vector<int> topological_order(const ::onnx::GraphProto& body) {
  int n = body.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& o : body.node(i).output())
      if (!o.empty()) producer[o] = i;
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  std::vector<int> pending(size_t(n), 0);
  for (int i = 0; i < n; ++i) {
    const auto& node = body.node(i);
    std::set<std::string> reads(node.input().begin(), node.input().end());
    for (const auto& a : node.attribute()) {
      // Gradient names the value it differentiates in an attribute.
      if (node.op_type() == "Gradient" && a.name() == "y") reads.insert(a.s());
      if (a.has_g()) reads.merge(free_names(a.g()));
      for (const auto& sg : a.graphs()) reads.merge(free_names(sg));
    }
    std::set<int> deps;
    for (const auto& r : reads)
      if (auto it = producer.find(r); it != producer.end()) deps.insert(it->second);
    for (int d : deps) {
      users[size_t(d)].push_back(i);
      ++pending[size_t(i)];
    }
  }
  std::vector<int> order, ready;
  for (int i = n - 1; i >= 0; --i)
    if (pending[size_t(i)] == 0) ready.push_back(i);
  while (!ready.empty()) {
    int i = ready.back();
    ready.pop_back();
    order.push_back(i);
    // Users in file order, so an already sorted graph keeps its order.
    for (auto it = users[size_t(i)].rbegin(); it != users[size_t(i)].rend(); ++it)
      if (--pending[size_t(*it)] == 0) ready.push_back(*it);
    std::sort(ready.begin(), ready.end(), std::greater<>());
  }
  if (int(order.size()) != n) {
    std::string stuck;
    int shown = 0;
    for (int i = 0; i < n && shown < 4; ++i)
      if (pending[size_t(i)] > 0) {
        stuck += (shown++ ? ", " : "") + body.node(i).op_type() + " '" +
                 (body.node(i).name().empty() ? body.node(i).output(0) : body.node(i).name()) + "'";
      }
    fail<ValueError>("onnx", "expected an acyclic graph, got a cycle through ", stuck);
  }
  return order;
}

void Scope::convert_nodes(const ::onnx::GraphProto& body) {
  for (int i : topological_order(body)) convert_node(*this, body.node(i));
}

// ---- one node

namespace {

int64_t opset_of(const ImportState& st, const std::string& domain) {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = st.opsets.find(d);
  if (it != st.opsets.end()) return it->second;
  return 1;  // a domain the model does not import: its first version
}

// Re-throws an error raised while converting `ctx`'s node with the node named first.
template <class E>
[[noreturn]] void rethrow_at(const NodeContext& ctx, const E& e) {
  std::string msg = e.what();
  if (msg.find(ctx.where()) != std::string::npos) throw e;
  throw E(str_cat("[", ctx.where(), "] ", msg));
}

}  // namespace

void convert_node(Scope& scope, const ::onnx::NodeProto& node) {
  NodeContext ctx(scope, node, opset_of(scope.state(), node.domain()));
  // Identity of a sequence or optional passes the list on.
  if (node.op_type() == "Identity" && node.input_size() == 1 && node.output_size() == 1)
    if (const Packed* p = ctx.packed_input(0)) {
      scope.define_packed(node.output(0), *p);
      return;
    }
  const Converter* fn = find_converter(node.domain(), node.op_type());
  if (!fn) ctx.unsupported("has no converter");
  std::vector<Value> outs;
  try {
    outs = (*fn)(ctx);
  } catch (const NeedsConstant& nc) {
    if (scope.state().at_run_time) throw;
    outs = convert_late(ctx, nc.input);
  } catch (const NotSupported& e) {
    rethrow_at(ctx, e);
  } catch (const TypeError& e) {
    rethrow_at(ctx, e);
  } catch (const ValueError& e) {
    rethrow_at(ctx, e);
  }
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& name = node.output(i);
    if (name.empty()) continue;
    if (size_t(i) < ctx.packed_outputs().size() && ctx.packed_outputs()[size_t(i)])
      scope.define_packed(name, *ctx.packed_outputs()[size_t(i)]);
    else if (size_t(i) < outs.size() && outs[size_t(i)].valid())
      scope.define(name, outs[size_t(i)]);
    else
      scope.define_absent(
          name, str_cat("is output ", i, " of ", ctx.where(), ", an output rlx does not produce"));
  }
}

TensorType type_from_value_info(const ImportState& state, const ::onnx::ValueInfoProto& vi,
                                std::string_view what, const std::string& anon_prefix) {
  if (!vi.has_type() || !vi.type().has_tensor_type()) {
    std::string kind = !vi.has_type()                  ? "no type"
                       : vi.type().has_sequence_type() ? "a sequence"
                       : vi.type().has_optional_type() ? "an optional"
                       : vi.type().has_map_type()      ? "a map"
                                                       : "a non-tensor type";
    fail<NotSupported>("onnx", what, " '", vi.name(), "' is ", kind,
                       "; rlx imports tensor inputs and outputs");
  }
  const auto& tt = vi.type().tensor_type();
  std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype)
    fail<NotSupported>("onnx", what, " '", vi.name(), "' has type ", onnx_type_name(tt.elem_type()),
                       "; rlx holds numeric, bool and string tensors");
  Shape shape;
  if (!tt.has_shape())
    fail<NotSupported>("onnx", what, " '", vi.name(), "' has no shape (rank unknown)");
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto& dim = tt.shape().dim(d);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(Dim(dim.dim_value()));
    } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
      auto it = state.dims.find(dim.dim_param());
      shape.push_back(it != state.dims.end()   ? Dim(it->second)
                      : state.default_dim >= 0 ? Dim(state.default_dim)
                                               : Dim::sym(sanitize(dim.dim_param())));
    } else if (state.default_dim >= 0) {
      shape.push_back(Dim(state.default_dim));
    } else {
      shape.push_back(Dim::sym(sanitize(str_cat(anon_prefix, "_", d))));
    }
  }
  return {*dtype, shape};
}

}  // namespace rlx::onnx_import
