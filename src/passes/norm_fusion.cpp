// norm_fusion: a layer_norm whose input is a residual add and / or whose output only feeds
// a cast becomes one fused_layer_norm, which reads both addends once, writes their sum (the
// residual stream) and the norm already in the cast's dtype:
//
//   x = add(a, b)              a, b of x's type (no broadcast); x may have other readers,
//                              none before the norm (they read the fused op's sum)
//   y = layer_norm(x, ...)
//   z = cast(y)                y's only reader (mixed precision's cast to 16 bits)
//
// In a pre-norm transformer every residual add feeds a norm: the add, the norm and the
// cast were three passes over the stream, now one. Only on a device with a native kernel.
#include "ops/fused.h"
#include "passes/fusion.h"

namespace rlx::passes {

namespace {

struct Match {
  std::vector<Value> in;
  Attrs attrs;
  Value y, sum;  // source values the outputs stand for (sum: invalid without a residual)
};

std::unique_ptr<Graph> norm_fusion(const Graph& g, const PassContext& ctx) {
  if (!has_any_op(g, {"layer_norm"})) return nullptr;
  UseInfo uses(g);
  const auto& nodes = g.nodes();
  std::vector<std::optional<Match>> emit(nodes.size());
  std::vector<uint8_t> taken(nodes.size(), 0);  // an absorbed add or cast (dropped)
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op_name() != "layer_norm" || n.outputs.size() != 1) continue;
    Value x = n.inputs[0], y = n.outputs[0];
    int32_t ai = producer_index(g, x), ci = -1;
    bool residual = ai >= 0 && !taken[size_t(ai)] && !emit[size_t(ai)] &&
                    nodes[size_t(ai)].op_name() == "add" && nodes[size_t(ai)].inputs.size() == 2;
    if (residual) {
      for (Value v : nodes[size_t(ai)].inputs) residual &= v.type() == x.type();
      for (int32_t u : uses.users[size_t(x.id)]) residual &= u >= int32_t(i);
    }
    if (uses.single_use(y)) {
      int32_t u = uses.users[size_t(y.id)][0];
      if (nodes[size_t(u)].op_name() == "cast" && is_float(nodes[size_t(u)].outputs[0].dtype()))
        ci = u;
    }
    if (!residual && ci < 0) continue;
    Match m;
    m.in = residual ? nodes[size_t(ai)].inputs : std::vector<Value>{x};
    m.in.insert(m.in.end(), n.inputs.begin() + 1, n.inputs.end());
    m.y = ci >= 0 ? nodes[size_t(ci)].outputs[0] : y;
    m.attrs = {{"axis", n.attrs.get_int("axis")},
               {"epsilon", n.attrs.get_float("epsilon")},
               {"residual", residual},
               {"out_dtype", ci >= 0 ? std::string(dtype_name(m.y.dtype())) : "same"}};
    std::vector<TensorType> types;
    for (Value v : m.in) types.push_back(v.type());
    auto t = native_types(ctx, "fused_layer_norm", types, m.attrs);
    if (!t || (*t)[0] != m.y.type()) continue;
    if (residual) {
      m.sum = x;
      taken[size_t(ai)] = 1;
    }
    if (ci >= 0) taken[size_t(ci)] = 1;
    emit[i] = std::move(m);
  }
  const Node* first = nodes.data();
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    size_t i = size_t(&n - first);
    if (taken[i]) return true;  // the fused op, emitted at the norm, stands for it
    if (!emit[i]) return false;
    const Match& m = *emit[i];
    std::vector<Value> out = rw.dst().apply("fused_layer_norm", rw(m.in), m.attrs);
    rw.replace(m.y, out[0]);
    if (m.sum.valid()) rw.replace(m.sum, out[1]);
    return true;
  });
}

}  // namespace

void register_norm_fusion(PassRegistry& r) {
  r.add({"norm_fusion", norm_fusion,
         "(residual add ->) layer_norm (-> cast) -> fused_layer_norm, where the device has it"});
}

}  // namespace rlx::passes
