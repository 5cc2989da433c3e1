// Autodiff and vmap rules of the sliding-window ops (conv, conv_transpose, the pools,
// resize) and of their backward ops (src/ops/window_grad.cpp). Wired into the OpDefs by
// the registration code in nn.cpp and window_grad.cpp.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "rlx/op.h"
#include "rlx/rules.h"

namespace rlx::detail {

// conv, conv_transpose: x [N, C, D...], w, optional bias.
std::vector<Value> conv_vjp(const RuleArgs& a, std::span<const Value> cts);
std::vector<Value> conv_transpose_vjp(const RuleArgs& a, std::span<const Value> cts);
std::vector<Value> conv_jvp(const RuleArgs& a, std::span<const Value> tangents);  // both
VmapResult conv_vmap(const RuleArgs& a, std::span<const int> in_axes);            // both

// max_pool, avg_pool, global_max_pool, global_avg_pool.
std::vector<Value> max_pool_vjp(const RuleArgs& a, std::span<const Value> cts);
std::vector<Value> max_pool_jvp(const RuleArgs& a, std::span<const Value> tangents);
std::vector<Value> avg_pool_vjp(const RuleArgs& a, std::span<const Value> cts);
std::vector<Value> global_max_pool_vjp(const RuleArgs& a, std::span<const Value> cts);
std::vector<Value> global_max_pool_jvp(const RuleArgs& a, std::span<const Value> tangents);
std::vector<Value> global_avg_pool_vjp(const RuleArgs& a, std::span<const Value> cts);
// Every input merged into N (one input for the pools, two for the backward ops).
VmapResult pool_vmap(const RuleArgs& a, std::span<const int> in_axes);

// resize and resize_grad: the batch becomes a leading dim with scale 1 (or size B).
std::vector<Value> resize_vjp(const RuleArgs& a, std::span<const Value> cts);
VmapResult resize_vmap(const RuleArgs& a, std::span<const int> in_axes);

// The backward ops f(x, v), linear in v and piecewise constant in x (max_pool_grad,
// max_pool_gather, avg_pool_grad, resize_grad). vjp: `transposed` (the adjoint in v, with
// the same attributes) applied to the cotangent — as (x, ct) when `with_x`, else to the
// cotangent alone; none for x. jvp: the op again on v's tangent.
VjpFn window_grad_vjp(std::string transposed, bool with_x);
std::vector<Value> window_grad_jvp(const RuleArgs& a, std::span<const Value> tangents);

}  // namespace rlx::detail
