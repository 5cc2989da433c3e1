// One registration function per op family; register.cpp calls them all. File names match
// backend/cpu/, so a family without GPU kernels shows in the tree.
#pragma once

#include "backend/cuda/copy.h"
#include "rlx/kernel.h"

namespace rlx::cuda {

void register_elementwise(KernelRegistry& r);  // elementwise.cu
void register_cast(KernelRegistry& r);         // cast.cu
void register_shape(KernelRegistry& r);        // shape.cpp
void register_shape_index(KernelRegistry& r);  // shape_index.cu: gathers, scatters, one_hot, iota
void register_reduce(KernelRegistry& r);       // reduce.cu
void register_nn(KernelRegistry& r);           // nn.cu: softmax, norms, embedding
void register_attention(KernelRegistry& r);    // attention.cu (called by register_nn)
void register_linalg(KernelRegistry& r);       // linalg.cpp: matmul through cuBLASLt
void register_conv(KernelRegistry& r);         // conv.cpp: conv, conv_transpose through cuDNN
void register_pool(KernelRegistry& r);         // pool.cu: pools; resize.cu: resize, resize_grad
void register_window_grad(KernelRegistry& r);  // window_grad.cu: the pools' backward ops
void register_region(KernelRegistry& r);       // region.cpp: fused_elementwise via NVRTC
void register_quant(KernelRegistry& r);        // quant.cu: dequantize, quant_matmul
void register_complex(KernelRegistry& r);      // complex.cu: complex, real, imag, conj, angle
void register_fft(KernelRegistry& r);          // fft.cu: fft, ifft, rfft, irfft through cuFFT
void register_llm(KernelRegistry& r);  // llm*.cu: rope, kv_cache_write, attention_cached, sample
// The kernel generated for a region body ("" when the generator declines it) and a layout
// of its inputs and outputs (region.cpp: 'f' flat, 's' scalar, 'x' strided per load site,
// then per output; empty: decided at run time), and its cubin for an architecture
// ("sm_90"); NVRTC needs no GPU, so tests compile every body.
std::string region_source(const Graph& body, const std::string& layout = {});
std::string region_cubin(const std::string& source, const std::string& sm);

// supports(): the dtype of input `index` (or of output 0 for ops without inputs) is in
// `set` (kFloat | kInt | kBool, kernels.cuh).
SupportsFn dtype_in(unsigned set, size_t index = 0);

}  // namespace rlx::cuda
