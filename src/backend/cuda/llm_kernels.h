// The LLM family's CUDA kernels, one file each as on the CPU: rope and kv_cache_write
// (llm.cu), attention_cached (llm_attention.cu), sample (llm_sample.cu). None waits for
// the device, allocates memory it keeps, or copies to the host: a decode step runs under a
// CUDA Graph.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_util.h"

namespace rlx::cuda {

void register_attention_cached(KernelRegistry& r);  // llm_attention.cu
void register_sample(KernelRegistry& r);            // llm_sample.cu

// y = silu(a) * b for the halves a, b of x's last dim (x and y contiguous, f32 / f16 / bf16,
// one dtype): the swiglu kernel, for fused_quant_matmul after a GEMM.
void swiglu_into(const Tensor& x, const Tensor& y, cudaStream_t s);

// A slot for bad positions (pos[b] < 0 or pos[b] + s > c, with the bad b as the slot's
// axis), reported after the run as the CPU kernels word it: a ValueError naming the op.
unsigned long long* position_check(const KernelContext& ctx, int64_t s, int64_t c);

}  // namespace rlx::cuda
