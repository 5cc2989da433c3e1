// fused_elementwise: a region of elementwise ops run as one kernel (ops/region.h says what
// a body may hold). Its types come from re-inferring the body with the actual input types,
// so symbolic dims resolve per run; its rules differentiate and batch the body with the
// positional transforms and inline the result, and `decompose` inlines the body itself, so
// every device runs a region, natively or op by op.
#include "ops/region.h"

#include <algorithm>

#include "ops/families.h"
#include "rlx/axes.h"
#include "rlx/rules.h"
#include "rlx/transforms.h"
#include "transforms/common.h"

namespace rlx::detail {

bool is_region_view_op(std::string_view op) {
  return op == "broadcast_to" || op == "expand_dims" || op == "broadcast_like";
}

bool is_region_reduction(const OpDef& op) {
  return op.has(Trait::reduction) && !op.has(Trait::random) && !op.has(Trait::side_effect) &&
         op.subgraphs.empty() && op.find_attr("axes") && op.find_attr("keepdims") &&
         op.min_inputs == 1 && op.max_inputs == 1;
}

std::optional<int64_t> trailing_reduced(const Attrs& attrs, int64_t rank) {
  const IntList& axes = attrs.get_ints("axes");
  if (axes.empty()) return rank;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t a : axes) {
    int64_t n = norm_axis(a, rank);
    if (n < 0 || n >= rank || seen[size_t(n)]) return std::nullopt;
    seen[size_t(n)] = true;
  }
  int64_t k = int64_t(axes.size());
  for (int64_t d = rank - k; d < rank; ++d)
    if (!seen[size_t(d)]) return std::nullopt;
  return k;
}

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;

// What a body value is; reduced values may only be outputs.
enum class Kind : uint8_t { arg, view, constant, elementwise, reduced };

bool compatible(const Shape& declared, const Shape& actual) {
  if (declared.size() != actual.size()) return false;
  for (size_t d = 0; d < declared.size(); ++d)
    if (declared[d].is_static() && actual[d].is_static() && declared[d] != actual[d]) return false;
  return true;
}

// The body's output types for these input types, checking the body is a region.
Types infer_region(const InferContext& ctx) {
  const Graph& body = ctx.subgraph(0);
  if (body.args().size() != ctx.num_inputs())
    ctx.fail("expected a body with one arg per input (", ctx.num_inputs(), "), got ",
             body.args().size());
  Types types(body.num_values());
  std::vector<Kind> kind(body.num_values(), Kind::arg);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Arg& a = body.args()[i];
    const TensorType& want = body.type(a.value);
    if (a.kind == ArgKind::param) ctx.fail("expected a body without params, got '", a.name, "'");
    if (want.dtype != ctx.dtype(i))
      ctx.fail_type("expected input ", i, " of dtype ", dtype_name(want.dtype), " (body arg '",
                    a.name, "'), got ", ctx.input(i).str());
    if (!compatible(want.shape, ctx.shape(i)))
      ctx.fail("expected input ", i, " of type ", want.str(), " (body arg '", a.name, "'), got ",
               ctx.input(i).str());
    types[size_t(a.value.id)] = ctx.input(i);
  }
  std::optional<Shape> region;  // the shape every elementwise output and reduced input has
  auto expect_region_shape = [&](const TensorType& t, std::string_view what, size_t node) {
    if (!region) region = t.shape;
    if (*region != t.shape)
      ctx.fail("expected every ", what, " to have the region shape ", shape_str(*region), ", got ",
               t.str(), " at body node ", node);
  };
  const auto& nodes = body.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const OpDef& op = *n.op;
    Types in;
    for (Value v : n.inputs) {
      if (kind[size_t(v.id)] == Kind::reduced)
        ctx.fail("expected reduced values to be body outputs only, got one read by body node ", i,
                 " (", op.name, ")");
      in.push_back(types[size_t(v.id)]);
    }
    if (op.has(Trait::random) || op.has(Trait::side_effect) || !n.subgraphs.empty())
      ctx.fail("expected a body of pure ops without subgraphs, got '", op.name, "' at node ", i);
    Types out = infer_types(op, in, n.attrs, n.subgraphs);
    Kind k;
    if (op.name == "constant") {
      if (out[0].numel() != 1)
        ctx.fail("expected body constants of one element, got ", out[0].str(), " at node ", i);
      k = Kind::constant;
    } else if (op.has(Trait::elementwise) && out.size() == 1) {
      k = Kind::elementwise;
    } else if (is_region_view_op(op.name)) {
      Kind src = kind[size_t(n.inputs[0].id)];
      if (src != Kind::arg && src != Kind::view)
        ctx.fail("expected '", op.name,
                 "' in a body to read an input, got a computed value at node ", i);
      k = Kind::view;
    } else if (is_region_reduction(op)) {
      if (!trailing_reduced(n.attrs, in[0].rank()))
        ctx.fail("expected a body reduction over trailing axes, got axes ",
                 ints_str(n.attrs.get_ints("axes")), " of ", in[0].str(), " at node ", i);
      expect_region_shape(in[0], "reduced input", i);
      k = Kind::reduced;
    } else {
      ctx.fail(
          "expected elementwise ops, broadcasts of inputs, scalar constants or trailing "
          "reductions in the body, got '",
          op.name, "' at node ", i);
    }
    for (size_t j = 0; j < out.size(); ++j) {
      types[size_t(n.outputs[j].id)] = out[j];
      kind[size_t(n.outputs[j].id)] = k;
    }
  }
  Types result;
  for (const Output& o : body.outputs()) {
    Kind k = kind[size_t(o.value.id)];
    const TensorType& t = types[size_t(o.value.id)];
    if (k == Kind::arg || k == Kind::constant)
      ctx.fail("expected body outputs computed in the body, got ",
               k == Kind::arg ? "arg" : "constant", " output '", o.name, "'");
    if (k != Kind::reduced) expect_region_shape(t, "output", body.nodes().size());
    result.push_back(t);
  }
  if (result.empty()) ctx.fail("expected a body with outputs, got none");
  return result;
}

std::vector<Value> decompose_region(const RuleArgs& a) {
  return inline_graph(*a.subgraphs[0], a.g, Values(a.inputs.begin(), a.inputs.end()));
}

std::vector<int> float_positions(std::span<const Value> vs) {
  std::vector<int> out;
  for (size_t i = 0; i < vs.size(); ++i)
    if (is_float(vs[i].dtype())) out.push_back(int(i));
  return out;
}

// The body's vjp, inlined: it recomputes what the backward needs from the inputs (the
// fusion pass fuses that recomputation into the backward regions).
std::vector<Value> vjp_region(const RuleArgs& a, std::span<const Value> cts) {
  Values grads(a.inputs.size());
  std::vector<int> wrt = float_positions(a.inputs);
  if (wrt.empty()) return grads;
  std::unique_ptr<Graph> vg = transform::vjp(*a.subgraphs[0], wrt);
  Values args(a.inputs.begin(), a.inputs.end());
  for (int k : float_positions(a.outputs))
    args.push_back(cts[size_t(k)].valid() ? cts[size_t(k)]
                                          : rules::zeros_like(a.outputs[size_t(k)]));
  Values res = inline_graph(*vg, a.g, args);
  for (size_t k = 0; k < wrt.size(); ++k) grads[size_t(wrt[k])] = res[k];
  return grads;
}

std::vector<Value> jvp_region(const RuleArgs& a, std::span<const Value> tangents) {
  Values out(a.outputs.size());
  std::vector<int> wrt;
  Values args(a.inputs.begin(), a.inputs.end());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (!is_float(a.inputs[i].dtype()) || !tangents[i].valid()) continue;
    wrt.push_back(int(i));
    args.push_back(tangents[i]);
  }
  if (wrt.empty()) return out;
  std::unique_ptr<Graph> jg = transform::jvp(*a.subgraphs[0], wrt);
  Values res = inline_graph(*jg, a.g, args);
  size_t t = a.outputs.size();  // tangents follow the primal outputs
  for (int k : float_positions(a.outputs)) out[size_t(k)] = res[t++];
  return out;
}

VmapResult vmap_region(const RuleArgs& a, std::span<const int> in_axes) {
  std::optional<Dim> size;
  for (size_t i = 0; i < in_axes.size() && !size; ++i)
    if (in_axes[i] >= 0) size = a.inputs[i].shape()[size_t(in_axes[i])];
  if (!size) fail<ValueError>(kRegionOp, "vmap: expected a batched input, got none");
  std::vector<int> chosen;
  std::unique_ptr<Graph> vg = transform::vmap(
      *a.subgraphs[0], std::vector<int>(in_axes.begin(), in_axes.end()), {}, *size, &chosen);
  return {inline_graph(*vg, a.g, Values(a.inputs.begin(), a.inputs.end())), chosen};
}

}  // namespace

void register_region_ops(OpRegistry& r) {
  OpDef d;
  d.name = std::string(kRegionOp);
  d.arity(0, kVariadic);
  d.subgraphs = {"body"};
  d.doc =
      "A fused region: runs `body` (elementwise ops over the inputs, optionally ending in "
      "trailing-axis reductions) as one kernel.";
  d.infer = infer_region;
  d.decompose = decompose_region;
  d.vjp = vjp_region;
  d.jvp = jvp_region;
  d.vmap = vmap_region;
  r.add(std::move(d));
}

}  // namespace rlx::detail
