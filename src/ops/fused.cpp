// Fused ops, created by the fusion passes rather than written by users:
//   fused_matmul(a, b, [bias]) = act(matmul(op(a), op(b)) + bias), op() swapping the last
//     two dims where transpose_a / transpose_b say so (the kernel reads the operand
//     transposed instead of copying it);
//   fused_conv(x, w, [bias]) = act(conv(x, w, bias));
//   fused_layer_norm(x, [residual], [scale, [bias]]) = cast(layer_norm(x + residual)) and,
//     with a residual, x + residual itself (a transformer's residual stream and the norm
//     of it, read once);
//   fused_cast(x1, ..., xn) = (cast(x1), ..., cast(xn)): many small casts (the weights'
//     under a mixed precision) in one kernel.
// Each has a decomposition into the core ops, which is both the portable path for devices
// without a native kernel and the source of its vjp / jvp / vmap rules: a rule builds the
// decomposition as a closed graph, applies the positional transforms to it and inlines the
// result, so the fused ops differentiate and batch exactly as their unfused forms do.
#include "ops/fused.h"

#include <algorithm>
#include <memory>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/ops.h"
#include "rlx/rules.h"
#include "rlx/transforms.h"
#include "transforms/common.h"

namespace rlx::detail {

const std::vector<std::string>& fused_activations() {
  static const std::vector<std::string> kActs = {
      "none", "relu", "relu6", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "hard_swish"};
  return kActs;
}

bool is_hard_swish_gate(const Node& n, Value x) {
  if (n.op_name() != "hard_sigmoid" || n.inputs.size() != 1 || n.inputs[0] != x ||
      !is_float(x.dtype()) || n.attrs.get_float("beta") != 0.5)
    return false;
  // f32 and narrower compute with float(alpha): ONNX's float 1/6 and the double one agree.
  const double alpha = n.attrs.get_float("alpha");
  return x.dtype() == DType::f64 ? alpha == 1.0 / 6 : float(alpha) == float(1.0 / 6);
}

std::optional<std::string> activation_of(const Node& n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || !is_float(n.inputs[0].dtype()))
    return std::nullopt;
  const std::string& name = n.op_name();
  if (name == "gelu") return n.attrs.get_string("approximate") == "tanh" ? "gelu_tanh" : "gelu";
  for (const char* a : {"relu", "silu", "sigmoid", "tanh"})
    if (name == a) return name;
  return std::nullopt;
}

Value apply_activation(Value x, std::string_view act) {
  if (act == "none") return x;
  if (act == "relu6") return op("clamp", {x, scalar_like(x, 0), scalar_like(x, 6)});
  if (act == "hard_swish") return x * op("hard_sigmoid", {x}, {{"alpha", 1.0 / 6}, {"beta", 0.5}});
  if (act == "gelu" || act == "gelu_tanh")
    return op("gelu", {x}, {{"approximate", act == "gelu" ? "none" : "tanh"}});
  return op(act, {x});
}

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;

// ---- fused_matmul ------------------------------------------------------------------

Types infer_fused_matmul(const InferContext& ctx) {
  expect_float(ctx, 0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) expect_same_dtype(ctx, 0, i);
  Shape s[2];
  for (size_t i = 0; i < 2; ++i) {
    expect_min_rank(ctx, i, 1);
    s[i] = ctx.shape(i);
    const char* flag = i == 0 ? "transpose_a" : "transpose_b";
    if (!ctx.attrs().get_bool(flag)) continue;
    if (s[i].size() < 2)
      ctx.fail("expected ", flag, " only for an operand of rank >= 2, got ", ctx.input(i).str());
    std::swap(s[i][s[i].size() - 2], s[i][s[i].size() - 1]);
  }
  Shape out = matmul_shape(ctx, s[0], s[1]);
  if (ctx.num_inputs() == 3) {
    // The bias broadcasts onto the product without growing it.
    const Shape& bias = ctx.shape(2);
    bool ok = bias.size() <= out.size();
    for (size_t d = 0; ok && d < bias.size(); ++d) {
      const Dim& o = out[out.size() - bias.size() + d];
      ok = bias[d].is(1) ||
           (!o.is(1) && (!o.is_static() || !bias[d].is_static() || o.value() == bias[d].value()));
    }
    if (!ok)
      ctx.fail("expected a bias broadcastable to the product ", shape_str(out), ", got ",
               ctx.input(2).str());
    out = broadcast_shapes(ctx, out, bias);
  }
  return {{ctx.attrs().get_string("out_dtype") == "f32" ? DType::f32 : ctx.dtype(0), out}};
}

Value swap_last2(Value x) {
  IntList perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  return op("transpose", {x}, {{"perm", perm}});
}

Values decompose_fused_matmul(const RuleArgs& a) {
  Value x = a.inputs[0], y = a.inputs[1];
  if (a.attrs.get_bool("transpose_a")) x = swap_last2(x);
  if (a.attrs.get_bool("transpose_b")) y = swap_last2(y);
  Value out = matmul(x, y);
  if (a.inputs.size() > 2) out = op("add", {out, a.inputs[2]});
  out = apply_activation(out, a.attrs.get_string("activation"));
  if (a.attrs.get_string("out_dtype") == "f32" && out.dtype() != DType::f32)
    out = cast(out, DType::f32);
  return {out};
}

// ---- fused_conv --------------------------------------------------------------------

Attrs without_activation(const Attrs& attrs) {
  Attrs out;
  for (const auto& [k, v] : attrs)
    if (k != "activation" && k != "input_activation") out.set(k, v);
  return out;
}

Values decompose_fused_conv(const RuleArgs& a) {
  Values in(a.inputs.begin(), a.inputs.end());
  in[0] = apply_activation(in[0], a.attrs.get_string("input_activation"));
  Value y = op("conv", in, without_activation(a.attrs));
  return {apply_activation(y, a.attrs.get_string("activation"))};
}

// ---- fused_layer_norm ---------------------------------------------------------------

Types infer_fused_layer_norm(const InferContext& ctx) {
  expect_float(ctx, 0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) expect_same_dtype(ctx, 0, i);
  expect_at_least(ctx, "epsilon", ctx.attrs().get_float("epsilon"), 0.0);
  const bool residual = ctx.attrs().get_bool("residual");
  if (residual && ctx.num_inputs() < 2)
    ctx.fail("expected the residual as input 1 (residual=true), got ", ctx.num_inputs(), " input");
  const int64_t rank = ctx.rank(0), axis = normalize_axis(ctx, ctx.attrs().get_int("axis"), rank);
  Shape out = ctx.shape(0);
  if (residual) {
    expect_rank(ctx, 1, rank);
    for (size_t d = 0; d < out.size(); ++d)
      out[d] = unify_dims(ctx, out[d], ctx.shape(1)[d], "dims of x and the residual");
  }
  for (size_t i = residual ? 2 : 1; i < ctx.num_inputs(); ++i) {
    expect_rank(ctx, i, rank - axis);
    for (int64_t d = 0; d < rank - axis; ++d)
      out[size_t(axis + d)] = unify_dims(ctx, out[size_t(axis + d)], ctx.shape(i)[size_t(d)],
                                         "dims of scale / bias and x.shape[axis:]");
  }
  const std::string& od = ctx.attrs().get_string("out_dtype");
  Types t{{od == "same" ? ctx.dtype(0) : *dtype_from_name(od), out}};
  if (residual) t.push_back({ctx.dtype(0), out});
  return t;
}

Values decompose_fused_layer_norm(const RuleArgs& a) {
  const bool residual = a.attrs.get_bool("residual");
  Value x = a.inputs[0];
  if (residual) x = op("add", {x, a.inputs[1]});
  Values in{x};
  in.insert(in.end(), a.inputs.begin() + (residual ? 2 : 1), a.inputs.end());
  Value y = op("layer_norm", in,
               {{"axis", a.attrs.get_int("axis")}, {"epsilon", a.attrs.get_float("epsilon")}});
  const std::string& od = a.attrs.get_string("out_dtype");
  if (od != "same") y = cast(y, *dtype_from_name(od));
  if (residual) return {y, x};
  return {y};
}

// ---- fused_cast ---------------------------------------------------------------------

Types infer_fused_cast(const InferContext& ctx) {
  const DType to = ctx.attrs().get_dtype("dtype");
  expect_float(ctx, 0);
  if (!is_float(to)) ctx.fail("expected a float dtype to cast to, got ", dtype_name(to));
  Types t;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    expect_same_dtype(ctx, 0, i);
    t.push_back({to, ctx.shape(i)});
  }
  return t;
}

Values decompose_fused_cast(const RuleArgs& a) {
  Values out;
  for (Value x : a.inputs) out.push_back(cast(x, a.attrs.get_dtype("dtype")));
  return out;
}

// ---- rules through the decomposition -------------------------------------------------

// The decomposition as a closed graph over args of the given types.
std::unique_ptr<Graph> decomposition(const OpDef& d, const Attrs& attrs, const Types& types) {
  auto g = std::make_unique<Graph>(d.name + ".decomposed");
  Values args;
  for (size_t i = 0; i < types.size(); ++i) args.push_back(g->input(str_cat("x", i), types[i]));
  for (Value v : d.decompose(RuleArgs{*g, attrs, args, {}, {}, &d})) g->output(v);
  return g;
}

Types types_of(std::span<const Value> vs) {
  Types out;
  for (Value v : vs) out.push_back(v.type());
  return out;
}

// The op (looked up by name when the rule runs: the registry owns the definition).
const OpDef& def_of(const RuleArgs& a, const std::string& name) {
  return a.op ? *a.op : OpRegistry::global().get(name);
}

VjpFn vjp_by_decomposition(std::string name) {
  return [name](const RuleArgs& a, std::span<const Value> cts) {
    auto g = decomposition(def_of(a, name), a.attrs, types_of(a.inputs));
    std::vector<int> wrt;
    for (size_t i = 0; i < a.inputs.size(); ++i)
      if (rules::has_tangents(a.inputs[i].dtype())) wrt.push_back(int(i));
    Values out(a.inputs.size());
    if (wrt.empty()) return out;
    auto vg = transform::vjp(*g, wrt);
    Values args(a.inputs.begin(), a.inputs.end());
    args.insert(args.end(), cts.begin(), cts.end());
    Values grads = inline_graph(*vg, a.g, args);
    for (size_t k = 0; k < wrt.size(); ++k) out[size_t(wrt[k])] = grads[k];
    return out;
  };
}

JvpFn jvp_by_decomposition(std::string name) {
  return [name](const RuleArgs& a, std::span<const Value> ts) {
    auto g = decomposition(def_of(a, name), a.attrs, types_of(a.inputs));
    std::vector<int> wrt;
    Values args(a.inputs.begin(), a.inputs.end());
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].valid()) {
        wrt.push_back(int(i));
        args.push_back(ts[i]);
      }
    auto jg = transform::jvp(*g, wrt);
    Values outs = inline_graph(*jg, a.g, args);  // the primal outputs, then their tangents
    return Values(outs.begin() + std::ptrdiff_t(g->outputs().size()), outs.end());
  };
}

VmapFn vmap_by_decomposition(std::string name) {
  return [name](const RuleArgs& a, std::span<const int> in_axes) {
    Types types = types_of(a.inputs);
    Dim size;
    for (size_t i = 0; i < types.size(); ++i) {
      if (in_axes[i] < 0) continue;
      Shape& s = types[i].shape;
      size = s[size_t(in_axes[i])];
      s.erase(s.begin() + in_axes[i]);
    }
    auto g = decomposition(def_of(a, name), a.attrs, types);
    std::vector<int> chosen;
    auto vg =
        transform::vmap(*g, std::vector<int>(in_axes.begin(), in_axes.end()), {}, size, &chosen);
    Values args(a.inputs.begin(), a.inputs.end());
    return VmapResult{inline_graph(*vg, a.g, args), chosen};
  };
}

void set_rules(OpDef& d) {
  d.vjp = vjp_by_decomposition(d.name);
  d.jvp = jvp_by_decomposition(d.name);
  d.vmap = vmap_by_decomposition(d.name);
}

}  // namespace

void set_rules_by_decomposition(OpDef& d) { set_rules(d); }

void register_fused_ops(OpRegistry& r) {
  OpDef mm;
  mm.name = "fused_matmul";
  mm.amp = AmpRole::low;
  mm.arity(2, 3)
      .attr("transpose_a", AttrKind::Bool, AttrValue(false))
      .attr("transpose_b", AttrKind::Bool, AttrValue(false))
      .attr("activation", AttrKind::String, AttrValue("none"), fused_activations())
      .attr("out_dtype", AttrKind::String, AttrValue("same"), {"same", "f32"});
  mm.doc =
      "act(matmul(a, b) + bias), a / b read with their last two dims swapped where "
      "transpose_a / transpose_b; bias broadcasts onto the product; out_dtype f32 stores "
      "the f32 result of 16-bit operands (a cast folded into the GEMM).";
  mm.infer = infer_fused_matmul;
  mm.decompose = decompose_fused_matmul;
  set_rules(mm);
  r.add(std::move(mm));

  const OpDef& conv = r.get("conv");
  OpDef fc;
  fc.name = "fused_conv";
  fc.amp = AmpRole::low;
  fc.arity(conv.min_inputs, conv.max_inputs);
  fc.attrs = conv.attrs;
  fc.attr("activation", AttrKind::String, AttrValue("none"), fused_activations());
  fc.attr("input_activation", AttrKind::String, AttrValue("none"), fused_activations());
  fc.doc =
      "act(conv(input_act(x), w, bias)): conv's inputs and attributes, with activations of "
      "its input and of its output.";
  fc.infer = conv.infer;  // conv's rules ignore `activation` and name this op in errors
  fc.decompose = decompose_fused_conv;
  set_rules(fc);
  r.add(std::move(fc));

  OpDef ln;
  ln.name = "fused_layer_norm";
  ln.arity(1, 4)
      .attr("axis", AttrKind::Int, AttrValue(-1))
      .attr("epsilon", AttrKind::Float, AttrValue(1e-5))
      .attr("residual", AttrKind::Bool, AttrValue(false))
      .attr("out_dtype", AttrKind::String, AttrValue("same"), {"same", "f32", "bf16", "f16"});
  ln.doc =
      "layer_norm(x + residual, scale, bias) stored as out_dtype; with residual=true input 1 "
      "is the residual and x + residual is a second output.";
  ln.infer = infer_fused_layer_norm;
  ln.decompose = decompose_fused_layer_norm;
  set_rules(ln);
  r.add(std::move(ln));

  OpDef many;
  many.name = "fused_cast";
  many.arity(1, kVariadic).attr("dtype", AttrKind::DType);
  many.doc = "Each input (all of one float dtype) cast to the float dtype, one output each.";
  many.infer = infer_fused_cast;
  many.decompose = decompose_fused_cast;
  set_rules(many);
  r.add(std::move(many));
}

}  // namespace rlx::detail
