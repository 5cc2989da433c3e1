// Shared machinery of the transforms: copying graphs node by node through a value map,
// resolving `wrt` names, calling rules, inlining one graph into another.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/op.h"
#include "rlx/rules.h"
#include "rlx/transforms.h"

namespace rlx::detail {

using rules::has_tangents;

// Source value id -> value in the graph being built.
using ValueMap = std::vector<Value>;

inline Value mapped(const ValueMap& m, Value src) { return m[size_t(src.id)]; }
std::vector<Value> mapped_all(const ValueMap& m, const std::vector<Value>& src);

// Copies src's args into dst (same names, kinds, types); returns the map seeded with them.
ValueMap copy_args(const Graph& src, Graph& dst);
// Emits a copy of n into dst, its inputs looked up in (and outputs recorded to) map.
std::vector<Value> copy_node(const Node& n, Graph& dst, ValueMap& map);
// Copies every node of src (args already in map).
void copy_nodes(const Graph& src, Graph& dst, ValueMap& map);
// Emits src's nodes into dst with src's args bound to `args`; returns src's outputs.
std::vector<Value> inline_graph(const Graph& src, Graph& dst, const std::vector<Value>& args);

// The arg indices for a list of names (empty: every float param, else every float
// input). Throws naming the transform for an unknown or non-float arg.
std::vector<int> resolve_wrt(const Graph& g, const std::vector<std::string>& names,
                             const char* transform);
// The output index for a name (empty: 0).
size_t resolve_output(const Graph& g, const std::string& name, const char* transform);

// RuleArgs for node n whose inputs / outputs are already emitted in g.
struct RuleCall {
  std::vector<Value> inputs, outputs;
  RuleArgs args(Graph& g, const Node& n) const {
    return RuleArgs{g, n.attrs, inputs, outputs, n.subgraphs, n.op};
  }
};

// A new graph named after src with a suffix ("f.grad").
std::unique_ptr<Graph> derived_graph(const Graph& src, const char* suffix);

// ---- the engines (vjp.cpp, jvp.cpp, vmap.cpp) ----------------------------------------

// Reverse mode over src's nodes, whose forward values are in `map` (in dst). `seeds`
// holds one cotangent per src output (invalid: none). Returns the gradient of each
// `wrt` arg (zeros where nothing flows).
std::vector<Value> backprop(const Graph& src, Graph& dst, const ValueMap& map,
                            const std::vector<Value>& seeds, const std::vector<int>& wrt,
                            Remat remat);

// Forward mode: copies src's nodes into dst (args already in map) and returns the
// tangent of every src value (invalid: zero), given tangents of the args.
std::vector<Value> forward_tangents(const Graph& src, Graph& dst, ValueMap& map,
                                    const std::vector<Value>& arg_tangents);

// Batching: copies src's nodes into dst (args in map, batched at axes[arg value id]);
// fills axes for every src value (-1: unbatched).
void batch_nodes(const Graph& src, Graph& dst, ValueMap& map, std::vector<int>& axes);

}  // namespace rlx::detail
