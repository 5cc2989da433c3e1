// The fusion passes' registration and shared pieces; each pass lives in its own file.
#include "passes/fusion.h"

#include "ops/fused.h"
#include "passes/families.h"
#include "rlx/kernel.h"
#include "rlx/session.h"

namespace rlx::passes {

std::optional<std::vector<TensorType>> native_types(const PassContext& ctx, std::string_view op,
                                                    const std::vector<TensorType>& inputs,
                                                    const Attrs& attrs) {
  const OpDef* d = OpRegistry::global().find(op);
  if (!d) return std::nullopt;
  Attrs full;
  std::vector<TensorType> outs;
  try {
    full = validate_attrs(*d, attrs);
    outs = infer_types(*d, inputs, full, {});
  } catch (const Error&) {
    return std::nullopt;
  }
  const KernelRegistry& reg = ctx.kernels ? *ctx.kernels : KernelRegistry::global();
  if (!reg.find(KernelQuery{*d, full, inputs, outs}, ctx.device.kind)) return std::nullopt;
  return outs;
}

std::optional<TensorType> native_type(const PassContext& ctx, std::string_view op,
                                      const std::vector<TensorType>& inputs, const Attrs& attrs) {
  auto outs = native_types(ctx, op, inputs, attrs);
  if (!outs || outs->size() != 1) return std::nullopt;
  return (*outs)[0];
}

bool has_any_op(const Graph& g, std::initializer_list<std::string_view> ops) {
  for (const Node& n : g.nodes())
    for (std::string_view op : ops)
      if (n.op_name() == op) return true;
  return false;
}

std::unique_ptr<Graph> FusionPlan::apply(const Graph& g) const {
  if (empty()) return nullptr;
  const auto& nodes = g.nodes();
  // Values the source graph reads, and (backwards) those the rewritten graph still reads.
  std::vector<uint8_t> read_before(g.num_values(), 0), needed(g.num_values(), 0),
      keep(nodes.size(), 1);
  for (const Node& n : nodes)
    for (Value v : n.inputs) read_before[size_t(v.id)] = 1;
  for (const Output& o : g.outputs())
    read_before[size_t(o.value.id)] = needed[size_t(o.value.id)] = 1;
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    if (roots_[i].emit) {
      for (Value v : roots_[i].reads) needed[size_t(v.id)] = 1;
      continue;
    }
    bool read = false, had_readers = false;
    for (Value v : n.outputs) {
      read |= needed[size_t(v.id)] != 0;
      had_readers |= read_before[size_t(v.id)] != 0;
    }
    keep[i] = read || !had_readers || n.op->has(Trait::side_effect);
    if (keep[i])
      for (Value v : n.inputs) needed[size_t(v.id)] = 1;
  }
  const Node* first = nodes.data();
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    size_t i = size_t(&n - first);
    if (roots_[i].emit) {
      rw.replace(n, roots_[i].emit(rw));
      return true;
    }
    return !keep[i];  // true: dropped
  });
}

void register_fusion_passes(PassRegistry& r) {
  register_bn_folding(r);
  register_attention_fusion(r);
  register_matmul_fusion(r);
  register_conv_fusion(r);
  register_nchwc_layout(r);
  register_norm_fusion(r);
  register_cast_batching(r);
  register_attention_stats(r);
}

namespace {

// clamp(x, 0, 6) with constant scalar bounds (what exporters write for ReLU6).
bool is_relu6(const Graph& g, const Node& n, Value x) {
  if (n.op_name() != "clamp" || n.inputs.size() != 3 || n.inputs[0] != x || !is_float(x.dtype()) ||
      n.outputs[0].type() != x.type())
    return false;
  auto lo = splat_value(g, n.inputs[1]), hi = splat_value(g, n.inputs[2]);
  return lo && hi && *lo == 0 && *hi == 6;
}

// x * hard_sigmoid(x) (hard_swish, detail::is_hard_swish_gate): x read by the gate and the mul
// alone, the gate by the mul alone; {gate, mul}, or nulls.
std::pair<const Node*, const Node*> hard_swish_of(const Graph& g, const UseInfo& uses,
                                                  const FusionPlan& plan, Value x) {
  const auto& nodes = g.nodes();
  const std::vector<int32_t>& readers = uses.users[size_t(x.id)];
  if (readers.size() != 2 || uses.is_output[size_t(x.id)]) return {};
  for (int k = 0; k < 2; ++k) {
    const Node& gate = nodes[size_t(readers[size_t(k)])];
    const Node& mul = nodes[size_t(readers[size_t(1 - k)])];
    if (plan.taken(readers[0]) || plan.taken(readers[1]) || !detail::is_hard_swish_gate(gate, x) ||
        !uses.single_use(gate.outputs[0]) || mul.op_name() != "mul" ||
        mul.outputs[0].type() != x.type())
      continue;
    const Value h = gate.outputs[0];
    if ((mul.inputs[0] == x && mul.inputs[1] == h) || (mul.inputs[0] == h && mul.inputs[1] == x))
      return {&gate, &mul};
  }
  return {};
}

}  // namespace

Epilogue grow_epilogue(const Graph& g, const UseInfo& uses, const FusionPlan& plan, int32_t root,
                       const std::function<bool(Value)>& bias_ok) {
  const auto& nodes = g.nodes();
  auto only_user = [&](Value v) -> const Node* {
    if (!uses.single_use(v)) return nullptr;
    int32_t u = uses.users[size_t(v.id)][0];
    return plan.taken(u) ? nullptr : &nodes[size_t(u)];
  };
  Epilogue e;
  e.chain.push_back(root);
  e.out = nodes[size_t(root)].outputs[0];
  const Node* u = only_user(e.out);
  if (u && u->op_name() == "add" && u->outputs[0].type() == e.out.type()) {
    Value other = u->inputs[0] == e.out ? u->inputs[1] : u->inputs[0];
    if (bias_ok(other)) {
      e.bias = other;
      e.out = u->outputs[0];
      e.chain.push_back(int32_t(u - nodes.data()));
      u = only_user(e.out);
    }
  }
  if (u) {
    std::optional<std::string> a = detail::activation_of(*u);
    if (!a && is_relu6(g, *u, e.out)) a = "relu6";
    if (a) {
      e.activation = *a;
      e.out = u->outputs[0];
      e.chain.push_back(int32_t(u - nodes.data()));
    }
  } else if (const auto [gate, mul] = hard_swish_of(g, uses, plan, e.out); gate) {
    e.activation = "hard_swish";
    e.out = mul->outputs[0];
    e.chain.push_back(int32_t(gate - nodes.data()));
    e.chain.push_back(int32_t(mul - nodes.data()));
  }
  return e;
}

}  // namespace rlx::passes
