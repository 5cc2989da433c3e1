// Registration entry points of the built-in op families (one source file each).
// They use only the public OpRegistry API, exactly as a downstream library does.
#pragma once

#include "rlx/op.h"

namespace rlx::detail {

void register_elementwise_ops(OpRegistry& r);  // unary, binary, select, clamp, cast
void register_reduce_ops(OpRegistry& r);       // sum … logsumexp, norms, cumsum, arg*
void register_linalg_ops(OpRegistry& r);       // matmul, dot_general
void register_shape_ops(OpRegistry& r);        // reshape … pad, tile, flip, constant, iota
void register_shape_index_ops(OpRegistry& r);  // gather…, scatter…, one_hot, nonzero, sort
void register_nn_ops(OpRegistry& r);           // softmax, norms, embedding, dropout, cross_entropy
void register_attention_ops(OpRegistry& r);    // attention, attention_grad, attention_lse
void register_window_ops(OpRegistry& r);       // conv, conv_transpose, pools, resize
void register_random_ops(OpRegistry& r);       // uniform, normal
void register_control_ops(OpRegistry& r);      // cond, while, scan
void register_autodiff_ops(OpRegistry& r);     // reshape_like, broadcast_like, stop_gradient…
void register_window_grad_ops(OpRegistry& r);  // backward ops of pools / resize
void register_fused_ops(OpRegistry& r);        // fused_matmul, fused_conv (made by passes)
void register_quant_ops(OpRegistry& r);        // dequantize, quant_matmul
void register_llm_ops(OpRegistry& r);          // rope, kv_cache_write, attention_cached, sample

void register_blocked_ops(OpRegistry& r);  // to_blocked, from_blocked, conv_blocked
void register_region_ops(OpRegistry& r);   // fused_elementwise
void register_complex_ops(OpRegistry& r);  // complex, real, imag, conj, angle
void register_fft_ops(OpRegistry& r);      // fft, ifft, rfft, irfft
void register_stft_ops(OpRegistry& r);     // stft, istft (decompositions)

inline void register_core_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_reduce_ops(r);
  register_linalg_ops(r);
  register_shape_ops(r);
  register_shape_index_ops(r);
  register_nn_ops(r);
  register_attention_ops(r);
  register_window_ops(r);
  register_random_ops(r);
  register_control_ops(r);
  register_autodiff_ops(r);
  register_window_grad_ops(r);  // after window: takes the pools' and resize's definitions
  register_fused_ops(r);        // after window: fused_conv takes conv's attributes
  register_quant_ops(r);
  register_llm_ops(r);
  register_blocked_ops(r);  // after window: conv_blocked takes conv's attributes

  register_region_ops(r);
  register_complex_ops(r);
  register_fft_ops(r);
  register_stft_ops(r);  // after fft: built from its ops
}

}  // namespace rlx::detail
