// Reverse mode: grad, value_and_grad, vjp. The forward nodes are copied, then each
// node's vjp rule is emitted in reverse order, cotangents summed per value.
#include "rlx/error.h"
#include "rlx/rules.h"
#include "transforms/common.h"

namespace rlx::detail {

namespace {

// Values through which a gradient can reach a wrt arg: float values computed by
// differentiable nodes from an active value.
std::vector<bool> active_values(const Graph& src, const std::vector<int>& wrt) {
  std::vector<bool> active(src.num_values(), false);
  for (int i : wrt) active[size_t(src.args()[size_t(i)].value.id)] = true;
  for (const Node& n : src.nodes()) {
    if (n.op->has(Trait::nondifferentiable)) continue;
    bool any = false;
    for (Value v : n.inputs) any = any || active[size_t(v.id)];
    if (!any) continue;
    for (Value v : n.outputs) active[size_t(v.id)] = has_tangents(src.type(v).dtype);
  }
  return active;
}

// A rule's result must fit the value it is the cotangent (or tangent) of.
void check_fits(const char* transform, const Node& n, const TensorType& want, Value got,
                std::string_view what, size_t index) {
  const TensorType& t = got.type();
  bool ok = t.dtype == want.dtype && t.rank() == want.rank();
  for (size_t d = 0; ok && d < want.shape.size(); ++d)
    ok = !(want.shape[d].is_static() && t.shape[d].is_static()) || want.shape[d] == t.shape[d];
  if (!ok)
    fail<ValueError>(transform, "expected the ", transform, " rule of '", n.op_name(), "' to give ",
                     what, " ", index, " of type ", want.str(), ", got ", t.str());
}

// Segment of each node under Remat::checkpoints: a checkpoint node ends its segment.
std::vector<int> segments(const Graph& src, int* last) {
  std::vector<int> seg(src.nodes().size());
  int s = 0;
  for (size_t i = 0; i < seg.size(); ++i) {
    seg[i] = s;
    if (src.nodes()[i].op->has(Trait::checkpoint)) ++s;
  }
  *last = s;
  return seg;
}

}  // namespace

std::vector<Value> backprop(const Graph& src, Graph& dst, const ValueMap& map,
                            const std::vector<Value>& seeds, const std::vector<int>& wrt,
                            Remat remat) {
  std::vector<bool> active = active_values(src, wrt);
  std::vector<Value> ct(src.num_values());
  for (size_t k = 0; k < seeds.size(); ++k) {
    Value v = src.outputs()[k].value;
    if (seeds[k].valid() && active[size_t(v.id)])
      ct[size_t(v.id)] = rules::add_any(ct[size_t(v.id)], seeds[k]);
  }
  const auto& nodes = src.nodes();
  int last_seg = 0;
  std::vector<int> seg = segments(src, &last_seg);
  ValueMap recomputed;
  int current_seg = -1;

  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    if (n.op->has(Trait::nondifferentiable)) continue;
    bool has_ct = false, has_active_input = false;
    for (Value v : n.outputs) has_ct = has_ct || ct[size_t(v.id)].valid();
    for (Value v : n.inputs) has_active_input = has_active_input || active[size_t(v.id)];
    if (!has_ct || !has_active_input) continue;
    if (!n.op->vjp)
      fail<NotSupported>("vjp", "expected a vjp rule for op '", n.op_name(),
                         "' (grad / vjp through it), got none");

    // Under remat, a segment's activations are recomputed from the stored ones (the
    // checkpoints and earlier values) just before its backward pass; the last segment's
    // are still live, so it is not.
    const ValueMap* fwd = &map;
    if (remat == Remat::checkpoints && seg[i] != last_seg) {
      if (seg[i] != current_seg) {
        recomputed = map;
        for (size_t j = 0; j < nodes.size(); ++j)
          if (seg[j] == seg[i] && !nodes[j].op->has(Trait::checkpoint))
            copy_node(nodes[j], dst, recomputed);
        current_seg = seg[i];
      }
      fwd = &recomputed;
    }

    RuleCall call{mapped_all(*fwd, n.inputs), mapped_all(*fwd, n.outputs)};
    std::vector<Value> cts(n.outputs.size());
    for (size_t k = 0; k < cts.size(); ++k) {
      cts[k] = ct[size_t(n.outputs[k].id)];
      if (!cts[k].valid() && has_tangents(call.outputs[k].dtype()))
        cts[k] = rules::zeros_like(call.outputs[k]);
    }
    std::vector<Value> res = n.op->vjp(call.args(dst, n), cts);
    if (res.size() != n.inputs.size())
      fail<ValueError>("vjp", "expected the vjp rule of '", n.op_name(), "' to give ",
                       n.inputs.size(), " cotangents, got ", res.size());
    for (size_t j = 0; j < res.size(); ++j) {
      size_t id = size_t(n.inputs[j].id);
      if (!active[id] || !res[j].valid()) continue;
      check_fits("vjp", n, src.type(n.inputs[j]), res[j], "cotangent", j);
      ct[id] = rules::add_any(ct[id], res[j]);
    }
  }

  std::vector<Value> grads;
  for (int a : wrt) {
    Value v = src.args()[size_t(a)].value;
    Value g = ct[size_t(v.id)];
    grads.push_back(g.valid() ? g : rules::zeros_like(mapped(map, v)));
  }
  return grads;
}

namespace {

// value_and_grad / grad: the forward, then the gradient of one scalar output.
std::unique_ptr<Graph> grad_graph(const Graph& g, const GradOptions& o, bool keep_values,
                                  const char* transform) {
  std::vector<int> wrt = resolve_wrt(g, o.wrt, transform);
  size_t k = resolve_output(g, o.output, transform);
  const Output& loss = g.outputs()[k];
  const TensorType& lt = g.type(loss.value);
  if (lt.rank() != 0 || !is_float(lt.dtype))
    fail<ValueError>(transform, "expected a float scalar output to differentiate, got '", loss.name,
                     "' of type ", lt.str());
  auto out = derived_graph(g, "grad");
  ValueMap map = copy_args(g, *out);
  copy_nodes(g, *out, map);
  std::vector<Value> seeds(g.outputs().size());
  seeds[k] = out->constant(Literal::scalar(lt.dtype, 1.0));
  std::vector<Value> grads = backprop(g, *out, map, seeds, wrt, o.remat);
  if (keep_values)
    for (const Output& o2 : g.outputs()) out->output(mapped(map, o2.value), o2.name);
  for (size_t i = 0; i < wrt.size(); ++i)
    out->output(grads[i], str_cat("grad.", g.args()[size_t(wrt[i])].name));
  return prune(*out);
}

}  // namespace

}  // namespace rlx::detail

namespace rlx {

using namespace detail;

std::unique_ptr<Graph> grad(const Graph& g, const GradOptions& options) {
  return grad_graph(g, options, false, "grad");
}

std::unique_ptr<Graph> value_and_grad(const Graph& g, const GradOptions& options) {
  return grad_graph(g, options, true, "value_and_grad");
}

std::unique_ptr<Graph> vjp(const Graph& g, const VjpOptions& options) {
  std::vector<int> wrt = resolve_wrt(g, options.wrt, "vjp");
  auto out = derived_graph(g, "vjp");
  ValueMap map = copy_args(g, *out);
  std::vector<Value> seeds;
  for (const Output& o : g.outputs()) {
    const TensorType& t = g.type(o.value);
    seeds.push_back(has_tangents(t.dtype) ? out->input(str_cat("ct.", o.name), t) : Value{});
  }
  copy_nodes(g, *out, map);
  std::vector<Value> grads = backprop(g, *out, map, seeds, wrt, options.remat);
  for (const Output& o : g.outputs()) out->output(mapped(map, o.value), o.name);
  for (size_t i = 0; i < wrt.size(); ++i)
    out->output(grads[i], str_cat("grad.", g.args()[size_t(wrt[i])].name));
  return prune(*out);
}

std::unique_ptr<Graph> transform::vjp(const Graph& g, const std::vector<int>& wrt, Remat remat) {
  for (int i : wrt)
    if (i < 0 || size_t(i) >= g.args().size())
      fail<ValueError>("vjp", "expected wrt positions in [0, ", g.args().size(), "), got ", i);
  auto out = derived_graph(g, "vjp");
  ValueMap map = copy_args(g, *out);
  std::vector<Value> seeds;
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const TensorType& t = g.type(g.outputs()[k].value);
    seeds.push_back(has_tangents(t.dtype) ? out->input(str_cat("ct", k), t) : Value{});
  }
  copy_nodes(g, *out, map);
  for (Value v : backprop(g, *out, map, seeds, wrt, remat)) out->output(v);
  return prune(*out);
}

}  // namespace rlx
