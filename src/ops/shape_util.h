// What the shape families (shape.cpp, shape_index.cpp) share: the row of their op tables
// and small helpers of their rules.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ops/rule_util.h"
#include "rlx/axes.h"
#include "rlx/op.h"

namespace rlx::detail {

// One shape op: its definition, inference and rules (none where it has no gradient).
struct ShapeOp {
  const char* name;
  Trait traits = Trait::none;
  int min_inputs = 1;
  int max_inputs = 1;
  std::vector<AttrSpec> attrs;
  InferFn infer;
  const char* doc;
  VjpFn vjp;
  JvpFn jvp;
  VmapFn vmap;
};

inline void add_shape_ops(OpRegistry& r, std::vector<ShapeOp> ops) {
  for (ShapeOp& s : ops) {
    OpDef d;
    d.name = s.name;
    d.traits = s.traits;
    d.arity(s.min_inputs, s.max_inputs);
    d.attrs = std::move(s.attrs);
    d.infer = std::move(s.infer);
    d.doc = s.doc;
    d.vjp = std::move(s.vjp);
    d.jvp = std::move(s.jvp);
    d.vmap = std::move(s.vmap);
    r.add(std::move(d));
  }
}

// ---- rule helpers ----------------------------------------------------------------------

inline Attrs with(Attrs at, const std::string& key, AttrValue v) {
  at.set(key, std::move(v));
  return at;
}

// The rule's own op applied again (to tangents, or with changed attributes).
inline Value again(const RuleArgs& a, std::vector<Value> inputs, const Attrs& attrs) {
  return op(rules::rule_op_name(a), std::move(inputs), attrs);
}

inline Value as_i64(Value v) { return v.dtype() == DType::i64 ? v : cast(v, DType::i64); }

inline Value permute(Value v, const IntList& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return op("transpose", {v}, {{"perm", perm}});
  return v;
}

inline Value move_axis(Value v, int64_t from, int64_t to) {
  return norm_axis(from, v.rank()) == norm_axis(to, v.rank()) ? v : rules::moveaxis(v, from, to);
}

inline Value slice1(Value x, int64_t axis, int64_t start, int64_t stop) {
  return op("slice", {x},
            {{"starts", IntList{start}}, {"stops", IntList{stop}}, {"axes", IntList{axis}}});
}

// 0, 1, 2, … along `axis`, as i64 in like's (run-time) shape.
inline Value positions(Value like, int64_t axis) {
  Value ones = as_i64(rules::ones_like(like));
  return op("cumsum", {ones}, {{"axis", axis}, {"exclusive", true}});
}

// Input 0 with its batch axis moved to 0.
inline Value front(const RuleArgs& a, AxisSpan in_axes) {
  return rules::batch_to_front(a, in_axes)[0];
}

inline VmapResult at0(Value v) { return {{v}, {0}}; }

// vmap of an op with an `axis` attribute: the axis shifts past the batch (moved to 0);
// the _all form batches every input.
inline VmapResult shift_axis_vmap(const RuleArgs& a, AxisSpan in_axes) {
  static constexpr const char* kAxis[] = {"axis"};
  return rules::vmap_shift_axes(a, in_axes, kAxis);
}
inline VmapResult shift_axis_all_vmap(const RuleArgs& a, AxisSpan in_axes) {
  static constexpr const char* kAxis[] = {"axis"};
  return rules::vmap_shift_axes(a, in_axes, kAxis, true);
}

}  // namespace rlx::detail
