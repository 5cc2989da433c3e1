// What passes share: who uses each value, reading constants, and rebuilding a graph node
// by node with some nodes replaced.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "rlx/graph.h"
#include "rlx/literal.h"
#include "rlx/op.h"
#include "transforms/common.h"

namespace rlx::passes {

using detail::ValueMap;

// Consumers of every value of a graph.
struct UseInfo {
  explicit UseInfo(const Graph& g);
  // Per value id: the indices of the nodes that read it (once per input slot).
  std::vector<std::vector<int32_t>> users;
  std::vector<uint8_t> is_output;  // per value id: a graph output

  size_t count(Value v) const { return users[size_t(v.id)].size() + is_output[size_t(v.id)]; }
  // Read by exactly one input slot of one node and not a graph output.
  bool single_use(Value v) const { return count(v) == 1 && !is_output[size_t(v.id)]; }
};

// The node that makes v, when it is the op `name`.
const Node* producer_is(const Graph& g, Value v, std::string_view name);
// The literal of a `constant` node's output; null for anything else.
const Literal* constant_of(const Graph& g, Value v);
// The one value every element of a constant holds (a scalar, or a splat of any shape).
std::optional<double> splat_value(const Graph& g, Value v);

// Whether n has trait t, or some node in its subgraphs (at any depth) does: a loop whose
// body has a side effect has one too.
bool has_trait_deep(const Node& n, Trait t);

// Rebuilds a graph node by node. For each source node, a pass either copies it (copy)
// or emits something else and maps the node's outputs to it (replace).
class Rewriter {
 public:
  explicit Rewriter(const Graph& src);

  const Graph& src() const { return src_; }
  Graph& dst() { return *dst_; }
  // The value in dst that stands for a source value.
  Value operator()(Value src_value) const { return map_[size_t(src_value.id)]; }
  std::vector<Value> operator()(const std::vector<Value>& src_values) const;

  std::vector<Value> copy(const Node& n);
  void replace(Value src_value, Value with) {
    map_[size_t(src_value.id)] = with;
    changed_ = true;
  }
  void replace(const Node& n, const std::vector<Value>& with);
  // Records that the result differs from the source even though no node was replaced.
  void mark_changed() { changed_ = true; }
  bool changed() const { return changed_; }

  // Adds src's outputs (same names) and returns the new graph.
  std::unique_ptr<Graph> finish();

 private:
  const Graph& src_;
  std::unique_ptr<Graph> dst_;
  ValueMap map_;
  bool changed_ = false;
};

// A node-local rewrite over the whole graph: `fn` replaces the node (returning true) or
// leaves it to be copied (false). Returns null when fn replaced nothing.
using NodeRewrite = std::function<bool(const Node&, Rewriter&)>;
std::unique_ptr<Graph> rewrite_nodes(const Graph& src, const NodeRewrite& fn);

}  // namespace rlx::passes
