// OpRegistry::global(): the process-wide registry, holding the core ops from its first use.
// It lives in the ops layer, which defines those ops (ir/ declares the registry and keeps it
// free of the op families: tools/check_layers.py). So does parse_graph without a registry.
// (Graph's by-name builders, ir/graph.cpp, still call it: the transforms below this layer
// build by name; tools/check_links.py keeps that as its one debt.)
#include "ops/families.h"
#include "rlx/op.h"
#include "rlx/text.h"

namespace rlx {

OpRegistry& OpRegistry::global() {
  static OpRegistry* reg = [] {
    auto* r = new OpRegistry();  // never destroyed: ops may be used during static teardown
    detail::register_core_ops(*r);
    return r;
  }();
  return *reg;
}

std::unique_ptr<Graph> parse_graph(std::string_view text) {
  return parse_graph(text, OpRegistry::global());
}

}  // namespace rlx
