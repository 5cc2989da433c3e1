// attention_stats: a train step's attention keeps its row statistics for the backward.
//
//   y = attention(q, k, v)                     y, lse = attention_lse(q, k, v)
//   dq, dk, dv = attention_grad(q, k, v, dy)   dq, dk, dv = attention_grad(q, k, v, dy, y, lse)
//
// Without them a fused backward runs the forward again for the softmax's normalisers (on
// cuda a third of attention_grad's time); with them it reads y and one float a row. Only
// where the device has kernels for both forms (attention and attention_grad with the same
// inputs and attributes, the forward first).
#include <algorithm>
#include <map>
#include <tuple>

#include "passes/fusion.h"

namespace rlx::passes {

namespace {

std::unique_ptr<Graph> attention_stats(const Graph& g, const PassContext& ctx) {
  if (!has_any_op(g, {"attention_grad"})) return nullptr;
  const auto& nodes = g.nodes();
  // (q, k, v, attributes' hash) -> the attention node
  std::map<std::tuple<int32_t, int32_t, int32_t, uint64_t>, int32_t> forward;
  std::vector<int32_t> saved_by(nodes.size(), -1);  // attention_grad -> its attention
  std::vector<uint8_t> keeps(nodes.size(), 0);      // attention that becomes attention_lse
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.inputs.size() < 3) continue;
    auto key = std::make_tuple(n.inputs[0].id, n.inputs[1].id, n.inputs[2].id, n.attrs.hash());
    if (n.op_name() == "attention" && n.inputs.size() == 3) {
      forward.emplace(key, int32_t(i));
      continue;
    }
    if (n.op_name() != "attention_grad" || n.inputs.size() != 4) continue;
    auto it = forward.find(key);
    if (it == forward.end()) continue;
    const Node& a = nodes[size_t(it->second)];
    if (!(a.attrs == n.attrs)) continue;
    std::vector<TensorType> types;
    for (Value v : a.inputs) types.push_back(v.type());
    auto lse = native_types(ctx, "attention_lse", types, a.attrs);
    if (!lse || (*lse)[0] != a.outputs[0].type()) continue;
    for (Value v : {n.inputs[3], a.outputs[0]}) types.push_back(v.type());
    types.push_back((*lse)[1]);
    if (!native_types(ctx, "attention_grad", types, n.attrs)) continue;
    saved_by[i] = it->second;
    keeps[size_t(it->second)] = 1;
  }
  if (std::find(keeps.begin(), keeps.end(), 1) == keeps.end()) return nullptr;
  std::vector<Value> lse_of(nodes.size());  // per kept attention: its lse in the new graph
  const Node* first = nodes.data();
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    size_t i = size_t(&n - first);
    if (keeps[i]) {
      std::vector<Value> out = rw.dst().apply("attention_lse", rw(n.inputs), n.attrs);
      rw.replace(n.outputs[0], out[0]);
      lse_of[i] = out[1];
      return true;
    }
    if (saved_by[i] < 0) return false;
    const Node& a = nodes[size_t(saved_by[i])];
    std::vector<Value> in = rw(n.inputs);
    in.push_back(rw(a.outputs[0]));
    in.push_back(lse_of[size_t(saved_by[i])]);
    rw.replace(n, rw.dst().apply("attention_grad", in, n.attrs));
    return true;
  });
}

}  // namespace

void register_attention_stats(PassRegistry& r) {
  r.add({"attention_stats", attention_stats,
         "attention + attention_grad -> attention_lse, whose statistics attention_grad reads, "
         "where the device has both kernels"});
}

}  // namespace rlx::passes
