// Batching: vmap. Nodes whose inputs are all unbatched are copied as they are; the others
// go through their op's vmap rule, which says where each output's batch axis ended up.
#include "rlx/axes.h"
#include "rlx/error.h"
#include "rlx/rules.h"
#include "transforms/common.h"

namespace rlx::detail {

void batch_nodes(const Graph& src, Graph& dst, ValueMap& map, std::vector<int>& axes) {
  for (const Node& n : src.nodes()) {
    std::vector<int> in_axes;
    bool any = false;
    for (Value v : n.inputs) {
      in_axes.push_back(axes[size_t(v.id)]);
      any = any || in_axes.back() >= 0;
    }
    if (!any) {
      copy_node(n, dst, map);
      for (Value v : n.outputs) axes[size_t(v.id)] = -1;
      continue;
    }
    if (!n.op->vmap)
      fail<NotSupported>("vmap", "expected a vmap rule for op '", n.op_name(), "', got none");
    RuleCall call{mapped_all(map, n.inputs), {}};
    VmapResult r = n.op->vmap(call.args(dst, n), in_axes);
    if (r.outputs.size() != n.outputs.size() || r.out_axes.size() != n.outputs.size())
      fail<ValueError>("vmap", "expected the vmap rule of '", n.op_name(), "' to give ",
                       n.outputs.size(), " outputs and axes, got ", r.outputs.size(), " and ",
                       r.out_axes.size());
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      int ax = r.out_axes[k];
      int64_t want = src.type(n.outputs[k]).rank() + (ax >= 0 ? 1 : 0);
      if (ax < -1 || ax >= want || r.outputs[k].rank() != want)
        fail<ValueError>("vmap", "expected the vmap rule of '", n.op_name(), "' to give output ", k,
                         " of rank ", want, " batched at an axis in [-1, ", want, "), got ",
                         r.outputs[k].type().str(), " at axis ", ax);
      map[size_t(n.outputs[k].id)] = r.outputs[k];
      axes[size_t(n.outputs[k].id)] = ax;
    }
  }
}

namespace {

struct Batched {
  std::unique_ptr<Graph> g;
  ValueMap map;
  std::vector<int> axes;
  Value ref;  // a batched arg (to materialise unbatched outputs), or invalid
  int ref_axis = -1;
};

// Copies g's args into a new graph, batching arg i at axis in_axes[i] (-1: not batched;
// already normalised to [0, rank]) with a dim of `size`, then batches every node.
Batched batch_graph(const Graph& g, const std::vector<int>& in_axes, const Dim& size) {
  Batched b{derived_graph(g, "vmap"), ValueMap(g.num_values()),
            std::vector<int>(g.num_values(), -1)};
  for (size_t i = 0; i < g.args().size(); ++i) {
    const Arg& a = g.args()[i];
    TensorType t = g.type(a.value);
    if (in_axes[i] >= 0) t.shape.insert(t.shape.begin() + in_axes[i], size);
    Value v = a.kind == ArgKind::input ? b.g->input(a.name, t) : b.g->param(a.name, t);
    b.map[size_t(a.value.id)] = v;
    b.axes[size_t(a.value.id)] = in_axes[i];
    if (in_axes[i] >= 0 && !b.ref.valid()) {
      b.ref = v;
      b.ref_axis = in_axes[i];
    }
  }
  if (!b.ref.valid())
    fail<ValueError>("vmap", "expected at least one batched arg of graph '", g.name(),
                     "', got none");
  batch_nodes(g, *b.g, b.map, b.axes);
  return b;
}

// Output value v (batched at `axis` or -1) with its batch moved to `want`.
Value place_batch(const Batched& b, Value v, int axis, int want) {
  if (axis < 0) {
    v = rules::materialize_batch(v, b.ref, b.ref_axis);
    axis = 0;
  }
  return rules::moveaxis(v, axis, want);
}

int normalize(int axis, int64_t rank, const char* what, const std::string& name) {
  int a = int(norm_axis(axis, int64_t(rank)));
  if (a < 0 || a >= rank)
    fail<ValueError>("vmap", "expected the ", what, " axis of '", name, "' in [", -rank, ", ", rank,
                     "), got ", axis);
  return a;
}

}  // namespace

}  // namespace rlx::detail

namespace rlx {

using namespace detail;

std::unique_ptr<Graph> vmap(const Graph& g, const VmapOptions& o) {
  for (const auto& [name, axis] : o.in_axes)
    if (!g.find_arg(name))
      fail<ValueError>("vmap", "expected an arg of graph '", g.name(), "' in in_axes, got '", name,
                       "'");
  std::vector<int> in_axes;
  for (const Arg& a : g.args()) {
    auto it = o.in_axes.find(a.name);
    int ax = it != o.in_axes.end()      ? it->second
             : a.kind == ArgKind::input ? o.default_in_axis
                                        : kNotBatched;
    in_axes.push_back(ax == kNotBatched ? -1
                                        : normalize(ax, g.type(a.value).rank() + 1, "in", a.name));
  }
  Batched b = batch_graph(g, in_axes, o.size);
  for (const Output& out : g.outputs()) {
    auto it = o.out_axes.find(out.name);
    int want = normalize(it != o.out_axes.end() ? it->second : 0, g.type(out.value).rank() + 1,
                         "out", out.name);
    b.g->output(place_batch(b, mapped(b.map, out.value), b.axes[size_t(out.value.id)], want),
                out.name);
  }
  return prune(*b.g);
}

std::unique_ptr<Graph> transform::vmap(const Graph& g, const std::vector<int>& in_axes,
                                       const std::vector<int>& out_axes, const Dim& size,
                                       std::vector<int>* chosen) {
  if (in_axes.size() != g.args().size())
    fail<ValueError>("vmap", "expected ", g.args().size(), " in_axes for graph '", g.name(),
                     "', got ", in_axes.size());
  if (!out_axes.empty() && out_axes.size() != g.outputs().size())
    fail<ValueError>("vmap", "expected ", g.outputs().size(), " out_axes for graph '", g.name(),
                     "', got ", out_axes.size());
  Batched b = batch_graph(g, in_axes, size);
  if (chosen) chosen->clear();
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Output& out = g.outputs()[k];
    Value v = mapped(b.map, out.value);
    int ax = b.axes[size_t(out.value.id)];
    if (!out_axes.empty()) v = place_batch(b, v, ax, out_axes[k]);
    if (chosen) chosen->push_back(out_axes.empty() ? ax : out_axes[k]);
    b.g->output(v, out.name);
  }
  return prune(*b.g);
}

}  // namespace rlx
