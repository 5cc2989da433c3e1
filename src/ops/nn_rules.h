// vjp / jvp / vmap rules of the nn ops other than the sliding-window ones (softmax,
// log_softmax, the norms, attention, embedding, dropout, cross_entropy), wired into the
// op definitions in nn.cpp. Every vjp is built from differentiable ops, so hvp works.
#pragma once

#include <span>
#include <vector>

#include "rlx/op.h"

namespace rlx::detail {

using Values = std::vector<Value>;
using ValueSpan = std::span<const Value>;
using AxisSpan = std::span<const int>;

// The most negative finite value of a float dtype: what masked attention scores become.
double lowest_finite(DType dt);

Values softmax_vjp(const RuleArgs& a, ValueSpan ct);
Values softmax_jvp(const RuleArgs& a, ValueSpan t);
Values log_softmax_vjp(const RuleArgs& a, ValueSpan ct);
Values log_softmax_jvp(const RuleArgs& a, ValueSpan t);
VmapResult softmax_vmap(const RuleArgs& a, AxisSpan in_axes);  // both softmaxes

// layer_norm (centred) and rms_norm over [axis, rank).
Values layer_norm_vjp(const RuleArgs& a, ValueSpan ct);
Values layer_norm_grad_decomposed(const RuleArgs& a);
Values layer_norm_jvp(const RuleArgs& a, ValueSpan t);
Values rms_norm_vjp(const RuleArgs& a, ValueSpan ct);
Values rms_norm_jvp(const RuleArgs& a, ValueSpan t);
VmapResult trailing_norm_vmap(const RuleArgs& a, AxisSpan in_axes);

Values group_norm_vjp(const RuleArgs& a, ValueSpan ct);
Values group_norm_jvp(const RuleArgs& a, ValueSpan t);
VmapResult group_norm_vmap(const RuleArgs& a, AxisSpan in_axes);

Values batch_norm_vjp(const RuleArgs& a, ValueSpan ct);
Values batch_norm_jvp(const RuleArgs& a, ValueSpan t);
VmapResult batch_norm_vmap(const RuleArgs& a, AxisSpan in_axes);

Values attention_vjp(const RuleArgs& a, ValueSpan ct);
Values attention_jvp(const RuleArgs& a, ValueSpan t);
VmapResult attention_vmap(const RuleArgs& a, AxisSpan in_axes);
// attention_grad(q, k, v, dy) in core ops: the probabilities recomputed, then the products.
Values attention_grad_decomposed(const RuleArgs& a);
// attention_lse(q, k, v): attention, and the row log-sum-exp over the masked scores (f32,
// f64 for f64).
Values attention_lse_decomposed(const RuleArgs& a);

Values embedding_vjp(const RuleArgs& a, ValueSpan ct);
Values embedding_jvp(const RuleArgs& a, ValueSpan t);
VmapResult embedding_vmap(const RuleArgs& a, AxisSpan in_axes);

Values dropout_vjp(const RuleArgs& a, ValueSpan ct);
Values dropout_jvp(const RuleArgs& a, ValueSpan t);
VmapResult dropout_vmap(const RuleArgs& a, AxisSpan in_axes);

Values cross_entropy_vjp(const RuleArgs& a, ValueSpan ct);
Values cross_entropy_jvp(const RuleArgs& a, ValueSpan t);
VmapResult cross_entropy_vmap(const RuleArgs& a, AxisSpan in_axes);
// cross_entropy_grad(logits, labels, w): w (per row, or one for all) times the row loss's
// gradient, 0 on ignored rows.
Values cross_entropy_grad_decomposed(const RuleArgs& a);

}  // namespace rlx::detail
