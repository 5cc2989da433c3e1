#include "transforms/common.h"

#include "rlx/error.h"

namespace rlx::detail {

std::vector<Value> mapped_all(const ValueMap& m, const std::vector<Value>& src) {
  std::vector<Value> out;
  out.reserve(src.size());
  for (Value v : src) out.push_back(mapped(m, v));
  return out;
}

ValueMap copy_args(const Graph& src, Graph& dst) {
  ValueMap map(src.num_values());
  for (const Arg& a : src.args()) {
    const TensorType& t = src.type(a.value);
    map[size_t(a.value.id)] =
        a.kind == ArgKind::input ? dst.input(a.name, t) : dst.param(a.name, t);
  }
  return map;
}

std::vector<Value> copy_node(const Node& n, Graph& dst, ValueMap& map) {
  std::vector<Value> outs = dst.apply(*n.op, mapped_all(map, n.inputs), n.attrs, n.subgraphs);
  for (size_t i = 0; i < outs.size(); ++i) map[size_t(n.outputs[i].id)] = outs[i];
  return outs;
}

void copy_nodes(const Graph& src, Graph& dst, ValueMap& map) {
  for (const Node& n : src.nodes()) copy_node(n, dst, map);
}

std::vector<Value> inline_graph(const Graph& src, Graph& dst, const std::vector<Value>& args) {
  if (args.size() != src.args().size())
    fail<ValueError>("inline", "expected ", src.args().size(), " args for graph '", src.name(),
                     "', got ", args.size());
  ValueMap map(src.num_values());
  for (size_t i = 0; i < args.size(); ++i) map[size_t(src.args()[i].value.id)] = args[i];
  copy_nodes(src, dst, map);
  std::vector<Value> outs;
  for (const Output& o : src.outputs()) outs.push_back(mapped(map, o.value));
  return outs;
}

std::vector<int> resolve_wrt(const Graph& g, const std::vector<std::string>& names,
                             const char* transform) {
  std::vector<int> out;
  const auto& args = g.args();
  if (names.empty()) {
    bool has_params = false;
    for (const Arg& a : args) has_params |= a.kind == ArgKind::param;
    ArgKind want = has_params ? ArgKind::param : ArgKind::input;
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == want && has_tangents(g.type(args[i].value).dtype)) out.push_back(int(i));
    return out;
  }
  for (const std::string& name : names) {
    size_t i = 0;
    while (i < args.size() && args[i].name != name) ++i;
    if (i == args.size())
      fail<ValueError>(transform, "expected an input or param of graph '", g.name(),
                       "' in wrt, got unknown '", name, "'");
    const TensorType& t = g.type(args[i].value);
    if (!has_tangents(t.dtype))
      fail<TypeError>(transform, "expected a float (or complex) arg in wrt, got '", name,
                      "' of type ", t.str());
    out.push_back(int(i));
  }
  return out;
}

size_t resolve_output(const Graph& g, const std::string& name, const char* transform) {
  const auto& outs = g.outputs();
  if (outs.empty()) fail<ValueError>(transform, "expected a graph with outputs, got none");
  if (name.empty()) return 0;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].name == name) return i;
  fail<ValueError>(transform, "expected an output of graph '", g.name(), "', got unknown '", name,
                   "'");
}

std::unique_ptr<Graph> derived_graph(const Graph& src, const char* suffix) {
  return std::make_unique<Graph>(str_cat(src.name(), "_", suffix));
}

}  // namespace rlx::detail

namespace rlx {

std::unique_ptr<Graph> prune(const Graph& g) {
  std::vector<bool> live(g.num_values(), false);
  for (const Output& o : g.outputs()) live[size_t(o.value.id)] = true;
  const auto& nodes = g.nodes();
  std::vector<bool> keep(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    bool k = n.op->has(Trait::side_effect);
    for (Value v : n.outputs) k = k || live[size_t(v.id)];
    if (!k) continue;
    keep[i] = true;
    for (Value v : n.inputs) live[size_t(v.id)] = true;
  }
  auto out = std::make_unique<Graph>(g.name());
  detail::ValueMap map = detail::copy_args(g, *out);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (keep[i]) detail::copy_node(nodes[i], *out, map);
  for (const Output& o : g.outputs()) out->output(detail::mapped(map, o.value), o.name);
  return out;
}

}  // namespace rlx

namespace rlx {

std::vector<Value> inline_call(const Graph& src, Graph& dst, const std::vector<Value>& args) {
  const auto& params = src.args();
  if (args.size() != params.size())
    fail<ValueError>("inline_call", "expected ", params.size(), " args for graph '", src.name(),
                     "', got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].graph != &dst)
      fail<ValueError>("inline_call", "expected arg '", params[i].name,
                       "' to be a value of the graph being built, got one of another graph");
    const TensorType& want = src.type(params[i].value);
    if (dst.type(args[i]) != want)
      fail<TypeError>("inline_call", "expected arg '", params[i].name, "' of type ", want.str(),
                      ", got ", dst.type(args[i]).str());
  }
  return detail::inline_graph(src, dst, args);
}

}  // namespace rlx
