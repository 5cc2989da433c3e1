// Dead-code elimination: one backward sweep marks the nodes that an output or a side
// effect needs; the others are left out of the rebuilt graph. Args always stay (they are
// the graph's signature), and so do side-effect nodes, including control nodes whose
// bodies have one.
#include "passes/cleanup.h"
#include "passes/rewrite.h"

namespace rlx::passes {

std::unique_ptr<Graph> dce(const Graph& g, const PassContext&) {
  const auto& nodes = g.nodes();
  std::vector<uint8_t> live(g.num_values(), 0), keep(nodes.size(), 0);
  for (const Output& o : g.outputs()) live[size_t(o.value.id)] = 1;
  size_t kept = 0;
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    bool k = false;
    for (Value v : n.outputs) k = k || live[size_t(v.id)];
    if (!k && !has_trait_deep(n, Trait::side_effect)) continue;
    keep[i] = 1;
    ++kept;
    for (Value v : n.inputs) live[size_t(v.id)] = 1;
  }
  if (kept == nodes.size()) return nullptr;
  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (keep[i]) rw.copy(nodes[i]);
  rw.mark_changed();
  return rw.finish();
}

}  // namespace rlx::passes
