// Helpers for writing vjp / jvp / vmap rules (include/rlx/rules.h).
#include "rlx/rules.h"

#include <algorithm>

#include "rlx/axes.h"
#include "rlx/error.h"
#include "transforms/common.h"

namespace rlx::rules {

namespace {

// Shapes that are certainly the same at run time ("?" matches nothing).
bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].known_equal(b[i])) return false;
  return true;
}

std::vector<SubgraphPtr> subgraphs_of(const RuleArgs& a) {
  return {a.subgraphs.begin(), a.subgraphs.end()};
}

const OpDef& op_of(const RuleArgs& a) {
  if (!a.op) fail<ValueError>("rules", "expected RuleArgs with its op set, got none");
  return *a.op;
}

// Inserts size-1 axes after axis 0 until x has rank r.
Value pad_after_batch(Value x, int64_t r) {
  if (x.rank() >= r) return x;
  IntList axes;
  for (int64_t i = 1; i <= r - x.rank(); ++i) axes.push_back(i);
  return expand_dims(x, axes);
}

}  // namespace

Value full_like(Value like, double v) { return broadcast_like(scalar_like(like, v), like); }
Value zeros_like(Value like) { return full_like(like, 0.0); }
Value ones_like(Value like) { return full_like(like, 1.0); }

Value reshape_like(Value x, Value like) {
  if (same_shape(x.shape(), like.shape())) return x;
  return op("reshape_like", {x, like});
}

Value broadcast_like(Value x, Value like) {
  if (same_shape(x.shape(), like.shape())) return x;
  return op("broadcast_like", {x, like});
}

Value unbroadcast(Value x, Value like) {
  const Shape &xs = x.shape(), &ls = like.shape();
  int64_t lead = x.rank() - like.rank();
  if (lead < 0)
    fail<ValueError>("unbroadcast", "expected a value of rank >= ", like.rank(), ", got ",
                     x.type().str());
  IntList axes;
  for (int64_t i = 0; i < lead; ++i) axes.push_back(i);
  // A static 1 stretched to another size; a symbol is taken to match (it was bound so).
  for (int64_t i = 0; i < like.rank(); ++i)
    if (ls[size_t(i)].is(1) && !xs[size_t(i + lead)].is(1)) axes.push_back(i + lead);
  if (!axes.empty()) x = rules::sum(x, axes, true);
  return reshape_like(x, like);
}

Value add_any(Value a, Value b) {
  if (!a.valid()) return b;
  if (!b.valid()) return a;
  return a + b;
}

Value mul_any(Value t, Value d) { return t.valid() ? t * d : Value{}; }

Value stop_gradient(Value x) { return op("stop_gradient", {x}); }

Value expand_dims(Value x, IntList axes) {
  if (axes.empty()) return x;
  return op("expand_dims", {x}, {{"axes", std::move(axes)}});
}

Value sum(Value x, IntList axes, bool keepdims) {
  if (axes.empty()) return x;
  return op("sum", {x}, {{"axes", std::move(axes)}, {"keepdims", keepdims}});
}

Value moveaxis(Value x, int64_t from, int64_t to) {
  int64_t r = x.rank();
  from = norm_axis(from, r);
  to = norm_axis(to, r);
  if (from == to) return x;
  IntList perm;
  for (int64_t i = 0; i < r; ++i)
    if (i != from) perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  return op("transpose", {x}, {{"perm", perm}});
}

std::vector<Value> reapply(const RuleArgs& a, std::vector<Value> inputs) {
  return a.g.apply(op_of(a), std::move(inputs), a.attrs, subgraphs_of(a));
}

std::vector<Value> linear_jvp(const RuleArgs& a, std::span<const Value> tangents) {
  std::vector<Value> ins(a.inputs.begin(), a.inputs.end());
  for (size_t i = 0; i < ins.size(); ++i)
    if (detail::has_tangents(ins[i].dtype()))
      ins[i] = tangents[i].valid() ? tangents[i] : zeros_like(ins[i]);
  std::vector<Value> outs = reapply(a, std::move(ins));
  for (auto& o : outs)
    if (!detail::has_tangents(o.dtype())) o = Value{};
  return outs;
}

std::vector<Value> batch_to_front(const RuleArgs& a, std::span<const int> in_axes) {
  std::vector<Value> out(a.inputs.begin(), a.inputs.end());
  for (size_t i = 0; i < out.size(); ++i)
    if (in_axes[i] >= 0) out[i] = moveaxis(out[i], in_axes[i], 0);
  return out;
}

Value materialize_batch(Value x, Value batched, int axis) {
  // A [B, 1, …, 1] reference of rank 1 + x.rank: one element per batch entry.
  Value ref = moveaxis(batched, axis, 0);
  IntList rest, zeros, ones;
  for (int64_t i = 1; i < ref.rank(); ++i) {
    rest.push_back(i);
    zeros.push_back(0);
    ones.push_back(1);
  }
  if (!rest.empty()) ref = op("slice", {ref}, {{"starts", zeros}, {"stops", ones}, {"axes", rest}});
  IntList spec{0};
  for (int64_t i = 0; i < x.rank(); ++i) spec.push_back(1);
  ref = op("reshape", {ref}, {{"shape", spec}});
  return op("broadcast_like", {expand_dims(x, {0}), ref});
}

std::vector<Value> all_batched_front(const RuleArgs& a, std::span<const int> in_axes) {
  size_t j = 0;
  while (j < in_axes.size() && in_axes[j] < 0) ++j;
  if (j == in_axes.size())
    fail<ValueError>(rule_op_name(a), "expected at least one batched input for vmap, got none");
  std::vector<Value> out = batch_to_front(a, in_axes);
  for (size_t i = 0; i < out.size(); ++i)
    if (in_axes[i] < 0) out[i] = materialize_batch(out[i], a.inputs[j], in_axes[j]);
  return out;
}

VmapResult vmap_elementwise(const RuleArgs& a, std::span<const int> in_axes) {
  int64_t out_rank = 0;
  for (size_t i = 0; i < a.inputs.size(); ++i)
    out_rank = std::max(out_rank, a.inputs[i].rank() - (in_axes[i] >= 0 ? 1 : 0));
  std::vector<Value> ins(a.inputs.begin(), a.inputs.end());
  for (size_t i = 0; i < ins.size(); ++i)
    if (in_axes[i] >= 0) ins[i] = pad_after_batch(moveaxis(ins[i], in_axes[i], 0), out_rank + 1);
  VmapResult r;
  r.outputs = reapply(a, std::move(ins));
  r.out_axes.assign(r.outputs.size(), 0);
  return r;
}

VmapResult vmap_shift_axes(const RuleArgs& a, std::span<const int> in_axes,
                           std::span<const char* const> axis_attrs, bool all_inputs) {
  int64_t rank0 = a.inputs[0].rank() - (in_axes[0] >= 0 ? 1 : 0);
  std::vector<Value> ins = all_inputs ? all_batched_front(a, in_axes) : batch_to_front(a, in_axes);
  Attrs attrs = a.attrs;
  for (const char* key : axis_attrs) {
    const AttrValue* v = a.attrs.find(key);
    if (!v) continue;
    if (const int64_t* i = v->get_if<int64_t>()) {
      attrs.set(key, *i >= 0 ? *i + 1 : *i);
    } else if (const IntList* l = v->get_if<IntList>()) {
      IntList shifted;
      if (l->empty())  // "every axis" of input 0, which must not now include the batch
        for (int64_t d = 0; d < rank0; ++d) shifted.push_back(d + 1);
      for (int64_t d : *l) shifted.push_back(d >= 0 ? d + 1 : d);
      attrs.set(key, shifted);
    }
  }
  VmapResult r;
  r.outputs = a.g.apply(op_of(a), std::move(ins), attrs, subgraphs_of(a));
  r.out_axes.assign(r.outputs.size(), 0);
  return r;
}

VmapResult vmap_by_scan(const RuleArgs& a, std::span<const int> in_axes) {
  // Carries: the unbatched inputs, passed through unchanged; xs: the batched ones.
  auto body = std::make_shared<Graph>("vmap_body");
  std::vector<Value> carries, xs, body_ins(a.inputs.size());
  std::vector<Value> body_carries;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (in_axes[i] >= 0) continue;
    carries.push_back(a.inputs[i]);
    body_ins[i] = body->input(str_cat("c", i), a.inputs[i].type());
    body_carries.push_back(body_ins[i]);
  }
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (in_axes[i] < 0) continue;
    Value x = moveaxis(a.inputs[i], in_axes[i], 0);
    xs.push_back(x);
    Shape elem(x.shape().begin() + 1, x.shape().end());
    body_ins[i] = body->input(str_cat("x", i), {x.dtype(), elem});
  }
  std::vector<Value> ys = body->apply(op_of(a), body_ins, a.attrs, subgraphs_of(a));
  for (Value c : body_carries) body->output(c);
  for (Value y : ys) body->output(y);
  std::vector<Value> ins = carries;
  ins.insert(ins.end(), xs.begin(), xs.end());
  std::vector<Value> outs =
      a.g.apply("scan", ins, {{"num_carry", int64_t(carries.size())}}, {std::move(body)});
  VmapResult r;
  r.outputs.assign(outs.begin() + std::ptrdiff_t(carries.size()), outs.end());
  r.out_axes.assign(r.outputs.size(), 0);
  return r;
}

const std::string& rule_op_name(const RuleArgs& a) {
  static const std::string unknown = "rule";
  return a.op ? a.op->name : unknown;
}

}  // namespace rlx::rules
