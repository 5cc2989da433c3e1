// conv_fusion: conv -> add of a per-channel bias -> activation.
//
// The add is folded into conv's own bias input when its other operand holds one value per
// output channel ([1, M, 1, ...] or [M, 1, ...], M static); the activation (relu, gelu,
// silu, sigmoid, tanh) makes the conv a fused_conv, which oneDNN runs as a post-op. Each
// intermediate must have no other reader; float dtypes; a fused_conv only where the
// device runs it natively (a conv with the bias folded in needs nothing new).
#include "ops/fused.h"
#include "passes/fusion.h"

namespace rlx::passes {

namespace {

// Whether b broadcasts onto a [N, M, D...] conv output as one value per channel.
bool per_channel(Value b, const Shape& out) {
  const Shape& s = b.shape();
  size_t r = out.size();
  if (r < 3 || !out[1].is_static() || (s.size() != r && s.size() != r - 1)) return false;
  size_t c = s.size() == r ? 1 : 0;  // the channel axis of b
  for (size_t d = 0; d < s.size(); ++d)
    if (!(d == c ? s[d].is(out[1].value()) : s[d].is(1))) return false;
  return true;
}

std::unique_ptr<Graph> conv_fusion(const Graph& g, const PassContext& ctx) {
  if (!has_any_op(g, {"conv"})) return nullptr;
  UseInfo uses(g);
  FusionPlan plan(g);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op_name() != "conv" || plan.taken(int32_t(i)) || !is_float(n.outputs[0].dtype()))
      continue;
    Epilogue e = grow_epilogue(g, uses, plan, int32_t(i), [&](Value other) {
      return per_channel(other, n.outputs[0].shape());
    });
    const std::vector<int32_t>& chain = e.chain;
    const std::string& act = e.activation;
    Value cur = e.out, channel_bias = e.bias;
    if (chain.size() == 1) continue;
    Attrs attrs = n.attrs;
    std::string op = "conv";
    if (act != "none") {
      op = "fused_conv";
      attrs.set("activation", act);
      std::vector<TensorType> types{n.inputs[0].type(), n.inputs[1].type()};
      if (n.inputs.size() > 2 || channel_bias.valid())
        types.push_back({cur.dtype(), {cur.shape()[1]}});
      auto t = native_type(ctx, op, types, attrs);
      if (!t || *t != cur.type()) continue;
    }
    for (size_t k = 0; k + 1 < chain.size(); ++k) plan.claim(chain[k]);
    const Node* conv = &n;
    std::vector<Value> reads = n.inputs;
    if (channel_bias.valid()) reads.push_back(channel_bias);
    plan.root(chain.back(), reads, [conv, channel_bias, attrs, op](Rewriter& rw) {
      std::vector<Value> in = rw(conv->inputs);
      if (channel_bias.valid()) {
        int64_t m = conv->outputs[0].shape()[1].value();
        Value b = rw.dst().apply1("reshape", {rw(channel_bias)}, {{"shape", IntList{m}}});
        if (in.size() > 2) b = rw.dst().apply1("add", {in[2], b});
        if (in.size() > 2)
          in[2] = b;
        else
          in.push_back(b);
      }
      return std::vector<Value>{rw.dst().apply1(op, in, attrs)};
    });
  }
  return plan.apply(g);
}

}  // namespace

void register_conv_fusion(PassRegistry& r) {
  r.add({"conv_fusion", conv_fusion,
         "conv (+ per-channel bias add, into conv's bias) (+ activation) -> fused_conv"});
}

}  // namespace rlx::passes
