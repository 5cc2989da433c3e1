// cast_batching: the casts of graph arguments (a mixed precision's casts of the weights:
// a GPT-2 forward has a hundred, most of them a few microseconds of launch for a few
// megabytes) become one fused_cast per pair of dtypes, a single kernel over them all,
// where the device has its kernel. Every input already exists when the graph starts, so
// the fused op takes the place of the first cast; the casts' results then live from there
// on (the weights' 16-bit copies, which a train step keeps for its backward anyway).
#include <map>

#include "passes/fusion.h"

namespace rlx::passes {

namespace {

std::unique_ptr<Graph> cast_batching(const Graph& g, const PassContext& ctx) {
  const auto& nodes = g.nodes();
  // Per (from, to): the casts of arguments, in graph order.
  std::map<std::pair<DType, DType>, std::vector<int32_t>> groups;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op_name() != "cast" || n.inputs.size() != 1 || producer_index(g, n.inputs[0]) >= 0)
      continue;
    DType from = n.inputs[0].dtype(), to = n.outputs[0].dtype();
    if (from != to && is_float(from) && is_float(to)) groups[{from, to}].push_back(int32_t(i));
  }
  std::vector<int32_t> head(nodes.size(), -1);  // the group a cast belongs to (by its first)
  std::map<int32_t, std::vector<int32_t>> batches;
  for (auto& [dtypes, members] : groups) {
    if (members.size() < 2) continue;
    std::vector<TensorType> types;
    for (int32_t m : members) types.push_back(nodes[size_t(m)].inputs[0].type());
    if (!native_types(ctx, "fused_cast", types, {{"dtype", dtypes.second}})) continue;
    for (int32_t m : members) head[size_t(m)] = members[0];
    batches[members[0]] = members;
  }
  if (batches.empty()) return nullptr;
  const Node* first = nodes.data();
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    int32_t i = int32_t(&n - first);
    if (head[size_t(i)] < 0) return false;
    if (head[size_t(i)] != i) return true;  // emitted with its group's first cast
    const std::vector<int32_t>& members = batches.at(i);
    std::vector<Value> in;
    for (int32_t m : members) in.push_back(rw(nodes[size_t(m)].inputs[0]));
    std::vector<Value> out = rw.dst().apply("fused_cast", in, {{"dtype", n.outputs[0].dtype()}});
    for (size_t k = 0; k < members.size(); ++k)
      rw.replace(nodes[size_t(members[k])].outputs[0], out[k]);
    return true;
  });
}

}  // namespace

void register_cast_batching(PassRegistry& r) {
  r.add({"cast_batching", cast_batching,
         "casts of graph arguments -> one fused_cast per dtype pair, where the device has it"});
}

}  // namespace rlx::passes
