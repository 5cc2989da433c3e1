// Helpers for writing an op's vjp / jvp / vmap rules (OpDef in rlx/op.h). The core ops
// use exactly these; a downstream op package uses them the same way.
//
// Shapes in rules may be symbolic, so anything that must match an existing value's shape
// at run time goes through reshape_like / broadcast_like rather than static attributes.
#pragma once

#include <span>
#include <vector>

#include "rlx/graph.h"
#include "rlx/op.h"
#include "rlx/ops.h"

namespace rlx::rules {

// Whether values of dtype t carry tangents and cotangents: floats, and complex numbers
// (JAX's convention: ops/complex.cpp). Rules return no gradient for the others.
inline bool has_tangents(DType t) { return is_float(t) || is_complex(t); }

// ---- values ------------------------------------------------------------------------
Value zeros_like(Value like);  // like's dtype and (run-time) shape
Value ones_like(Value like);
Value full_like(Value like, double v);
Value reshape_like(Value x, Value like);    // x with like's shape (equal element counts)
Value broadcast_like(Value x, Value like);  // x broadcast (NumPy rules) to like's shape
// Sums x over the axes that broadcasting added or stretched so that the result has
// like's shape: the vjp of an implicit broadcast. Returns x itself when nothing was.
Value unbroadcast(Value x, Value like);
// a + b where either may be invalid (no contribution); invalid when both are.
Value add_any(Value a, Value b);
// t * d where t may be invalid (no tangent): invalid then.
Value mul_any(Value t, Value d);
Value stop_gradient(Value x);
// x with size-1 axes inserted at `axes` (the output positions, sorted), e.g. to undo a
// reduction without keepdims before broadcasting back.
Value expand_dims(Value x, IntList axes);
// Sum over axes; unlike the op, an empty list sums nothing (x itself is returned).
Value sum(Value x, IntList axes, bool keepdims = false);
// Moves axis `from` of x to position `to` (both may be negative).
Value moveaxis(Value x, int64_t from, int64_t to);

// ---- rule bodies for common cases ---------------------------------------------------
// The op applied again to the tangents, for ops linear in all their differentiable
// inputs (reshape, transpose, slice, concat, sum…): invalid tangents become zeros.
std::vector<Value> linear_jvp(const RuleArgs& a, std::span<const Value> tangents);
// The op applied again with its float inputs swapped for the tangents; other inputs
// (indices) kept. For single-differentiable-input linear ops such as gather.
std::vector<Value> reapply(const RuleArgs& a, std::vector<Value> inputs);

// ---- vmap helpers -------------------------------------------------------------------
// Under vmap, RuleArgs::outputs is empty (no unbatched outputs exist): a rule that needs
// an output's type infers it, or reads it from the op's subgraphs.
// in_axes[i] is input i's batch axis or -1. These move every batched input's batch axis
// to 0 (the convention most rules use) and return the moved inputs.
std::vector<Value> batch_to_front(const RuleArgs& a, std::span<const int> in_axes);
// x (unbatched) broadcast to carry a leading batch axis of the size of `batched`'s axis
// `axis`.
Value materialize_batch(Value x, Value batched, int axis);
// Every input batched at axis 0 (unbatched ones materialised).
std::vector<Value> all_batched_front(const RuleArgs& a, std::span<const int> in_axes);
// For elementwise ops with broadcasting: batched inputs get the batch at axis 0 and are
// padded with size-1 axes to the output rank + 1; unbatched ones are left as they are.
// Applies the op and returns outputs batched at 0.
VmapResult vmap_elementwise(const RuleArgs& a, std::span<const int> in_axes);
// Moves batch axes to 0 (materialising unbatched inputs when `all_inputs`), shifts the
// listed Int / Ints axis attributes by one (negative axes stay as they are; an empty Ints
// list is read as "every axis of input 0"), and applies the op: for ops whose semantics
// are per-axis (reductions, softmax, concat, sort…). Outputs are batched at 0.
VmapResult vmap_shift_axes(const RuleArgs& a, std::span<const int> in_axes,
                           std::span<const char* const> axis_attrs, bool all_inputs = false);
// The generic fallback: a `scan` over the batch that applies the op to one element at a
// time (unbatched inputs ride along as carries). Correct for any op, but a loop.
VmapResult vmap_by_scan(const RuleArgs& a, std::span<const int> in_axes);

// The op's name, for NotSupported messages from rules.
const std::string& rule_op_name(const RuleArgs& a);

}  // namespace rlx::rules
