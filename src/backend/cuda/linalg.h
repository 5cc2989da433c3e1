// GEMMs for other CUDA kernels (attention's backward): cuBLASLt, as matmul uses it; and the
// f32 tensor-core GEMM (linalg_f32.cu) that matmul runs for large f32 products.
#pragma once

#include <cuda_runtime.h>

#include "rlx/tensor.h"

namespace rlx::cuda {

// y[i] = alpha * op(a[i]) @ op(b[i]) for contiguous row-major [batch, rows, cols] a, b and
// y; op transposes where ta / tb. a and b share a float dtype; y has it or is f32 (16-bit
// operands, f32 product). An addend (y's dtype, shape and layout) joins the product in the
// GEMM's epilogue: y = alpha a b + addend.
void batched_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& y, double alpha,
                  cudaStream_t s, const Tensor* addend = nullptr);

// How many products the tensor-core f32 GEMM has run in this process.
int64_t tc_f32_gemm_runs();

// One operand of the tensor-core f32 GEMM: rows x k with any strides, batch entry z at
// z * batch_stride (0: shared by every entry).
struct TcOperand {
  const float* data;
  int64_t rows, row_stride, k_stride, batch_stride;
};

// y[z][i][j] = act(alpha * sum_l x[z][i][l] w[z][j][l] + beta * y[z][i][j] + bias[j]).
struct TcGemm {
  enum class Act { none, relu, gelu_tanh };
  TcOperand x, w;
  int64_t m, n, k, batch;
  float* y;
  int64_t y_row, y_batch;
  float alpha = 1, beta = 0;
  const float* bias = nullptr;
  Act act = Act::none;
};

bool tc_f32_gemm_fits(int64_t m, int64_t n, int64_t k, int64_t batch);
void tc_f32_gemm(const TcGemm& g, Device dev, cudaStream_t s);

}  // namespace rlx::cuda
