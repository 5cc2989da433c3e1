// Forward mode: jvp (and hvp, which is jvp of grad). Each node is copied, then its jvp
// rule is emitted right after it when any input carries a tangent.
#include "rlx/error.h"
#include "rlx/rules.h"
#include "transforms/common.h"

namespace rlx::detail {

std::vector<Value> forward_tangents(const Graph& src, Graph& dst, ValueMap& map,
                                    const std::vector<Value>& arg_tangents) {
  std::vector<Value> tan(src.num_values());
  for (size_t i = 0; i < src.args().size(); ++i)
    tan[size_t(src.args()[i].value.id)] = arg_tangents[i];
  for (const Node& n : src.nodes()) {
    std::vector<Value> outs = copy_node(n, dst, map);
    if (n.op->has(Trait::nondifferentiable)) continue;
    std::vector<Value> tin(n.inputs.size());
    bool any = false;
    for (size_t j = 0; j < tin.size(); ++j) {
      if (!has_tangents(src.type(n.inputs[j]).dtype)) continue;
      tin[j] = tan[size_t(n.inputs[j].id)];
      any = any || tin[j].valid();
    }
    if (!any) continue;
    if (!n.op->jvp)
      fail<NotSupported>("jvp", "expected a jvp rule for op '", n.op_name(),
                         "' (jvp / hvp through it), got none");
    RuleCall call{mapped_all(map, n.inputs), outs};
    std::vector<Value> res = n.op->jvp(call.args(dst, n), tin);
    if (res.size() != outs.size())
      fail<ValueError>("jvp", "expected the jvp rule of '", n.op_name(), "' to give ", outs.size(),
                       " tangents, got ", res.size());
    for (size_t k = 0; k < res.size(); ++k) {
      if (!res[k].valid() || !has_tangents(outs[k].dtype())) continue;
      const TensorType& want = src.type(n.outputs[k]);
      if (res[k].dtype() != want.dtype || res[k].rank() != want.rank())
        fail<ValueError>("jvp", "expected the jvp rule of '", n.op_name(), "' to give tangent ", k,
                         " of type ", want.str(), ", got ", res[k].type().str());
      tan[size_t(n.outputs[k].id)] = res[k];
    }
  }
  return tan;
}

namespace {

// The tangent of each output (zeros where none flows), in output order.
std::vector<Value> output_tangents(const Graph& g, const ValueMap& map,
                                   const std::vector<Value>& tan) {
  std::vector<Value> out;
  for (const Output& o : g.outputs()) {
    if (!has_tangents(g.type(o.value).dtype)) continue;
    Value t = tan[size_t(o.value.id)];
    out.push_back(t.valid() ? t : rules::zeros_like(mapped(map, o.value)));
  }
  return out;
}

// Copies g's args into out and adds one tangent input per wrt arg, named by `name`.
std::vector<Value> tangent_inputs(const Graph& g, Graph& out, const std::vector<int>& wrt,
                                  const std::function<std::string(size_t)>& name) {
  std::vector<Value> arg_tan(g.args().size());
  for (size_t i = 0; i < wrt.size(); ++i) {
    const Arg& a = g.args()[size_t(wrt[i])];
    arg_tan[size_t(wrt[i])] = out.input(name(i), g.type(a.value));
  }
  return arg_tan;
}

}  // namespace

}  // namespace rlx::detail

namespace rlx {

using namespace detail;

std::unique_ptr<Graph> jvp(const Graph& g, const std::vector<std::string>& wrt_names) {
  std::vector<int> wrt = resolve_wrt(g, wrt_names, "jvp");
  auto out = derived_graph(g, "jvp");
  ValueMap map = copy_args(g, *out);
  std::vector<Value> arg_tan = tangent_inputs(
      g, *out, wrt, [&](size_t i) { return str_cat("tan.", g.args()[size_t(wrt[i])].name); });
  std::vector<Value> tan = forward_tangents(g, *out, map, arg_tan);
  std::vector<Value> touts = output_tangents(g, map, tan);
  for (const Output& o : g.outputs()) out->output(mapped(map, o.value), o.name);
  size_t k = 0;
  for (const Output& o : g.outputs())
    if (has_tangents(g.type(o.value).dtype)) out->output(touts[k++], str_cat("tan.", o.name));
  return prune(*out);
}

std::unique_ptr<Graph> transform::jvp(const Graph& g, const std::vector<int>& wrt) {
  for (int i : wrt)
    if (i < 0 || size_t(i) >= g.args().size())
      fail<ValueError>("jvp", "expected wrt positions in [0, ", g.args().size(), "), got ", i);
  auto out = derived_graph(g, "jvp");
  ValueMap map = copy_args(g, *out);
  std::vector<Value> arg_tan =
      tangent_inputs(g, *out, wrt, [](size_t i) { return str_cat("t", i); });
  std::vector<Value> tan = forward_tangents(g, *out, map, arg_tan);
  std::vector<Value> touts = output_tangents(g, map, tan);
  for (const Output& o : g.outputs()) out->output(mapped(map, o.value), o.name);
  for (Value t : touts) out->output(t);
  return prune(*out);
}

std::unique_ptr<Graph> hvp(const Graph& g, const GradOptions& options) {
  std::vector<int> wrt = resolve_wrt(g, options.wrt, "hvp");
  std::vector<std::string> names;
  for (int i : wrt) names.push_back(g.args()[size_t(i)].name);
  GradOptions go = options;
  go.wrt = names;
  std::unique_ptr<Graph> dg = grad(g, go);
  std::unique_ptr<Graph> j = jvp(*dg, names);
  // Keep only the tangents of the gradients, renamed.
  std::vector<Output> keep;
  for (const Output& o : j->outputs())
    for (const std::string& n : names)
      if (o.name == str_cat("tan.grad.", n)) keep.push_back({str_cat("hvp.", n), o.value});
  j->mutable_outputs() = keep;
  return prune(*j);
}

}  // namespace rlx
