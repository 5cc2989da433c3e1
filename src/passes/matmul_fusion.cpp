// matmul_fusion: a matrix product followed by a bias add and / or an activation becomes
// one fused_matmul, whose kernel applies both in one pass over the GEMM's output.
//
//   matmul / fused_matmul (no bias, no activation yet) / dot_general that is a matmul
//   -> add(·, bias)      bias: any tensor that broadcasts onto the product without
//                        growing it (the add's type is the product's)
//   -> activation        relu, gelu (either form), silu, sigmoid, tanh
//   -> cast to f32       of a 16-bit product (mixed precision's; out_dtype "f32": the
//                        pass runs again after mixed_precision for these)
//
// Only when each intermediate has no other reader (else it is computed anyway) and only
// for float dtypes on a device with a native fused_matmul kernel.
//
// Likewise quant_matmul(x, w) -> add(·, c) becomes quant_matmul(x, w, c) where c does not
// grow the product and the device's kernel adds it as it stores (an LLM's residual adds),
// and rms_norm -> quant_matmul -> swiglu (-> add) becomes fused_quant_matmul where the
// device runs that as one kernel (an LLM block's norm, product and gate).
#include <algorithm>

#include "ops/fused.h"
#include "passes/fusion.h"
#include "rlx/axes.h"

namespace rlx::passes {

namespace {

// A matrix product as fused_matmul's operands and flags.
struct Product {
  Value a, b, bias;
  bool ta = false, tb = false;
};

IntList normalised(const Attrs& attrs, const char* key, int64_t rank) {
  IntList v = attrs.get_ints(key);
  for (int64_t& d : v) d = norm_axis(d, rank);
  return v;
}

IntList range(int64_t n) {
  IntList v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// A dot_general that is a NumPy matmul with transposed operands: either both operands
// have the same rank r >= 2 with batch dims [0, r-2) on both sides, or the rhs is a
// matrix without batch dims (the lhs's leading dims become the product's). One
// contracting dim per side, among the last two.
std::optional<Product> dot_as_matmul(const Node& n) {
  Value l = n.inputs[0], r = n.inputs[1];
  int64_t rl = l.rank(), rr = r.rank();
  IntList lb = normalised(n.attrs, "lhs_batch", rl), rb = normalised(n.attrs, "rhs_batch", rr);
  IntList lc = normalised(n.attrs, "lhs_contracting", rl);
  IntList rc = normalised(n.attrs, "rhs_contracting", rr);
  if (lc.size() != 1 || rc.size() != 1 || rr < 2) return std::nullopt;
  bool batched = rl == rr && lb == range(rl - 2) && rb == range(rr - 2) && rl >= 2;
  bool weight = rr == 2 && lb.empty() && rb.empty() && rl >= 1;
  if (!batched && !weight) return std::nullopt;
  Product p{l, r, {}};
  if (lc[0] == rl - 2 && rl >= 2)
    p.ta = true;
  else if (lc[0] != rl - 1)
    return std::nullopt;
  if (rc[0] == rr - 1)
    p.tb = true;
  else if (rc[0] != rr - 2)
    return std::nullopt;
  return p;
}

std::optional<Product> product_of(const Node& n) {
  const std::string& op = n.op_name();
  if (op == "matmul") return Product{n.inputs[0], n.inputs[1], {}};
  if (op == "dot_general") return dot_as_matmul(n);
  if (op == "fused_matmul" && n.attrs.get_string("activation") == "none" &&
      n.attrs.get_string("out_dtype") == "same")
    return Product{n.inputs[0], n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : Value{},
                   n.attrs.get_bool("transpose_a"), n.attrs.get_bool("transpose_b")};
  return std::nullopt;
}

// The single reader of v when it is an `op` node no other pattern took; -1 otherwise.
int32_t sole_reader(const Graph& g, const UseInfo& uses, const FusionPlan& plan, Value v,
                    std::string_view op) {
  if (!uses.single_use(v)) return -1;
  const int32_t u = uses.users[size_t(v.id)][0];
  const Node& n = g.nodes()[size_t(u)];
  return n.op_name() == op && !plan.taken(u) ? u : -1;
}

// Whether a norm / swiglu node works over its input's last axis.
bool over_last_axis(const Node& n) {
  return norm_axis(n.attrs.get_int("axis"), n.inputs[0].rank()) == n.inputs[0].rank() - 1;
}

// quant_matmul(x, w) with its neighbours folded in: the rms_norm that makes x (with a scale,
// over the last axis, read by nothing else), a swiglu over the product's last axis, then
// an add of an addend that does not grow the result. Only the add: quant_matmul with an
// addend; the norm or the swiglu too: fused_quant_matmul. Each where the device's kernel
// takes it.
void fold_quant(const Graph& g, const PassContext& ctx, const UseInfo& uses, FusionPlan& plan) {
  const auto& nodes = g.nodes();
  // The pattern rooted at quant_matmul node i, with its norm and / or swiglu where
  // `with_norm` / `with_act` and it has them; false where the device's kernel does not take
  // it (its norm then stays and its swiglu may still join).
  auto fold = [&](int32_t i, bool with_norm, bool with_act) {
    const bool neighbours = with_norm || with_act;
    const Node& n = nodes[size_t(i)];
    Attrs attrs{{"norm", std::string("none")},
                {"epsilon", 1e-6},
                {"activation", std::string("none")},
                {"layout", n.attrs.get_string("layout")}};
    std::vector<int32_t> chain;  // the nodes folded in, the root last
    std::vector<Value> in{n.inputs[0], n.inputs[1]};
    const int32_t p = with_norm ? producer_index(g, n.inputs[0]) : -1;
    if (p >= 0 && !plan.taken(p) && uses.single_use(n.inputs[0])) {
      const Node& norm = nodes[size_t(p)];
      if (norm.op_name() == "rms_norm" && norm.inputs.size() == 2 && over_last_axis(norm) &&
          norm.inputs[1].rank() == 1) {
        attrs.set("norm", std::string("rms_norm"));
        attrs.set("epsilon", norm.attrs.get_float("epsilon"));
        in = {norm.inputs[0], norm.inputs[1], n.inputs[1]};
        chain.push_back(p);
      }
    }
    chain.push_back(i);
    Value cur = n.outputs[0];
    const int32_t s = with_act ? sole_reader(g, uses, plan, cur, "swiglu") : -1;
    if (s >= 0 && over_last_axis(nodes[size_t(s)])) {
      attrs.set("activation", std::string("swiglu"));
      chain.push_back(s);
      cur = nodes[size_t(s)].outputs[0];
    }
    if (neighbours && chain.size() == 1) return false;
    const std::string op = neighbours ? "fused_quant_matmul" : "quant_matmul";
    if (!neighbours) attrs = n.attrs;
    auto native = [&](const std::vector<Value>& v) {
      std::vector<TensorType> types;
      for (Value x : v) types.push_back(x.type());
      return native_type(ctx, op, types, attrs);
    };
    const int32_t a = sole_reader(g, uses, plan, cur, "add");
    if (a >= 0 && nodes[size_t(a)].outputs[0].type() == cur.type()) {
      const Node& add = nodes[size_t(a)];
      std::vector<Value> with = in;
      with.push_back(add.inputs[0] == cur ? add.inputs[1] : add.inputs[0]);
      if (auto t = native(with); t && *t == add.outputs[0].type()) {
        in = std::move(with);
        chain.push_back(a);
        cur = add.outputs[0];
      }
    }
    if (chain.size() == 1) return false;
    if (auto t = native(in); !t || *t != cur.type()) return false;
    for (size_t k = 0; k + 1 < chain.size(); ++k) plan.claim(chain[k]);
    plan.root(chain.back(), in, [in, op, attrs](Rewriter& rw) {
      return std::vector<Value>{rw.dst().apply1(op, rw(in), attrs)};
    });
    return true;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op_name() == "quant_matmul" && n.inputs.size() == 2 && !plan.taken(int32_t(i)) &&
        !fold(int32_t(i), true, true) && !fold(int32_t(i), false, true))
      fold(int32_t(i), false, false);
  }
}

std::unique_ptr<Graph> matmul_fusion(const Graph& g, const PassContext& ctx) {
  if (!has_any_op(g, {"matmul", "dot_general", "fused_matmul", "quant_matmul"})) return nullptr;
  UseInfo uses(g);
  FusionPlan plan(g);
  fold_quant(g, ctx, uses, plan);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.outputs.size() != 1 || !is_float(n.outputs[0].dtype()) || plan.taken(int32_t(i)))
      continue;
    std::optional<Product> p = product_of(n);
    if (!p) continue;
    bool has_bias = p->bias.valid();
    // Under a mixed precision the fused op will run in 16 bits, its bias too: only a bias
    // of one value per column joins (as autocast's linear takes it), not a residual
    // stream, whose add stays in f32.
    auto bias_ok = [&](Value b) {
      if (has_bias) return false;
      if (ctx.precision == Precision::f32) return true;
      for (size_t d = 0; d + 1 < b.shape().size(); ++d)
        if (!b.shape()[d].is(1)) return false;
      return true;
    };
    Epilogue e = grow_epilogue(g, uses, plan, int32_t(i), bias_ok);
    if (e.bias.valid()) p->bias = e.bias;
    std::vector<int32_t>& chain = e.chain;
    const std::string& act = e.activation;
    Value cur = e.out;
    // Mixed precision's cast of a 16-bit product back to f32 folds in too: the GEMM
    // stores its f32 accumulators instead of rounding them first.
    std::string out_dtype = "same";
    if ((cur.dtype() == DType::bf16 || cur.dtype() == DType::f16) && uses.single_use(cur)) {
      int32_t u = uses.users[size_t(cur.id)][0];
      const Node& c = nodes[size_t(u)];
      if (!plan.taken(u) && c.op_name() == "cast" && c.attrs.get_dtype("dtype") == DType::f32) {
        chain.push_back(u);
        cur = c.outputs[0];
        out_dtype = "f32";
      }
    }
    if (chain.size() == 1) continue;
    std::vector<Value> in{p->a, p->b};
    if (p->bias.valid()) in.push_back(p->bias);
    std::vector<TensorType> types;
    for (Value v : in) types.push_back(v.type());
    Attrs attrs{{"transpose_a", p->ta},
                {"transpose_b", p->tb},
                {"activation", act},
                {"out_dtype", out_dtype}};
    auto t = native_type(ctx, "fused_matmul", types, attrs);
    if (!t || *t != cur.type()) continue;
    for (size_t k = 0; k + 1 < chain.size(); ++k) plan.claim(chain[k]);
    plan.root(chain.back(), in, [in, attrs](Rewriter& rw) {
      return std::vector<Value>{rw.dst().apply1("fused_matmul", rw(in), attrs)};
    });
  }
  return plan.apply(g);
}

}  // namespace

void register_matmul_fusion(PassRegistry& r) {
  r.add({"matmul_fusion", matmul_fusion,
         "matmul (+ bias add) (+ activation) -> fused_matmul; quant_matmul + add -> quant_matmul "
         "with an addend; rms_norm + quant_matmul + swiglu (+ add) -> fused_quant_matmul"});
}

}  // namespace rlx::passes
