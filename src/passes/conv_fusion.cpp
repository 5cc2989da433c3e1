// conv_fusion: conv -> add of a per-channel bias -> activation.
//
// The add is folded into conv's own bias input when its other operand holds one value per
// output channel ([1, M, 1, ...] or [M, 1, ...], M static); the activation (relu, gelu,
// silu, sigmoid, tanh) makes the conv a fused_conv, which oneDNN runs as a post-op. Each
// intermediate must have no other reader; float dtypes; a fused_conv only where the
// device runs it natively (a conv with the bias folded in needs nothing new).
#include <algorithm>

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

// A depthwise conv reads each input plane once into its own buffer (on the CPU), so the
// activation of a producing conv is cheaper applied there than as a pass of its own:
//   fused_conv{activation=a}(...) -> depthwise fused_conv  becomes
//   fused_conv{activation=none}(...) -> depthwise fused_conv{input_activation=a}
// where the depthwise conv is the producer's only reader.
bool is_depthwise(const Node& n) {
  if ((n.op_name() != "conv" && n.op_name() != "fused_conv") || n.inputs[0].rank() != 4)
    return false;
  const Shape& x = n.inputs[0].shape();
  return x[1].is_static() && n.attrs.get_int("groups") == x[1].value() &&
         n.outputs[0].shape()[1] == x[1] && n.inputs[0].dtype() == DType::f32;
}

std::unique_ptr<Graph> conv_prologue(const Graph& g, const PassContext& ctx) {
  if (!has_any_op(g, {"fused_conv"}) || !ctx.device.is_cpu()) return nullptr;
  UseInfo uses(g);
  const auto& nodes = g.nodes();
  std::vector<std::string> moved(nodes.size());  // per producer: the activation it hands on
  std::vector<int32_t> into(nodes.size(), -1);   // per depthwise conv: its producer
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (!is_depthwise(n) ||
        (n.op_name() == "fused_conv" && n.attrs.get_string("input_activation") != "none"))
      continue;
    Value x = n.inputs[0];
    const Node* p = producer_is(g, x, "fused_conv");
    if (!p || !uses.single_use(x)) continue;
    int32_t pi = int32_t(p - nodes.data());
    moved[size_t(pi)] = p->attrs.get_string("activation");
    if (moved[size_t(pi)] == "none") continue;
    into[i] = pi;
  }
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    size_t i = size_t(&n - nodes.data());
    bool gives = !moved[i].empty() && moved[i] != "none" &&
                 std::find(into.begin(), into.end(), int32_t(i)) != into.end();
    if (gives) {
      Attrs a = n.attrs;
      a.set("activation", std::string("none"));
      rw.replace(n, {rw.dst().apply1("fused_conv", rw(n.inputs), a)});
      return true;
    }
    if (into[i] < 0) return false;
    Attrs a = n.attrs;
    a.set("input_activation", moved[size_t(into[i])]);
    rw.replace(n, {rw.dst().apply1("fused_conv", rw(n.inputs), a)});
    return true;
  });
}

}  // namespace

void register_conv_fusion(PassRegistry& r) {
  r.add({"conv_prologue", conv_prologue,
         "a conv's activation moved into the depthwise conv that alone reads it (CPU)"});
  r.add({"conv_fusion", conv_fusion,
         "conv (+ per-channel bias add, into conv's bias) (+ activation) -> fused_conv"});
}

}  // namespace rlx::passes
