// One registration function per op family; register.cpp calls them all.
#pragma once

#include "backend/cpu/isa.h"
#include "rlx/kernel.h"

namespace rlx::cpu {

// fft.cpp (pocketfft; built once, not per instruction-set level): fft, ifft, rfft, irfft.
void register_fft(KernelRegistry& r);

inline namespace RLX_ISA_NS {

void register_elementwise(KernelRegistry& r);  // elementwise.cpp
void register_reduce(KernelRegistry& r);       // reduce.cpp
void register_linalg(KernelRegistry& r);       // linalg.cpp
void register_shape(KernelRegistry& r);        // shape.cpp
void register_conv(KernelRegistry& r);         // conv.cpp: conv, conv_transpose
void register_pool(KernelRegistry& r);         // pool.cpp: pools, resize
void register_nn(KernelRegistry& r);           // nn.cpp: norms, softmax, attention, losses
void register_random(KernelRegistry& r);       // random.cpp
void register_control(KernelRegistry& r);      // control.cpp: cond, while, scan
void register_autodiff(KernelRegistry& r);     // autodiff.cpp: reshape_like, broadcast_like…
void register_window_grad(KernelRegistry& r);  // window_grad.cpp: pool / resize backward
void register_fused(KernelRegistry& r);        // fused.cpp: fused_matmul, fused_conv
void register_quant(KernelRegistry& r);        // quant.cpp: dequantize, quant_matmul
void register_llm(KernelRegistry& r);  // llm.cpp: rope, kv_cache_write, attention_cached, sample

void register_blocked(KernelRegistry& r);  // blocked.cpp: to_blocked, from_blocked
bool f32_in(const KernelQuery& q);         // blocked.cpp: input 0 is f32
void register_region(KernelRegistry& r);   // region.cpp: fused_elementwise
void register_complex(KernelRegistry& r);  // complex.cpp: complex, real, imag, conj

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
