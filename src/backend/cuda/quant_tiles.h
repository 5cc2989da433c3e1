// The quantized products over weights in tensor-core tiles (quant_matmul's layout tiles16,
// rlx/quant.h): the decode matvec and the decoding to bf16 for prefill's GEMM. quant.cu
// quantizes the activations and picks these where the weights come tiled.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "rlx/dtype.h"

namespace rlx::cuda {

// Where the matvecs store: output (r, j) at y[r * ld + j], the product plus quant_matmul's
// addend c, which repeats every cn outputs (backend/addend.h; none where c is null): a
// residual add in the store. With swiglu the weight rows j and n / 2 + j give output j,
// silu of the first times the second (fused_quant_matmul's activation), ld = n / 2.
struct Out {
  float* y;
  const float* c;
  int64_t cn;
  int64_t ld;
  bool swiglu = false;
#ifdef __CUDACC__
  __device__ __forceinline__ void put(int64_t i, float v) const { y[i] = c ? v + c[i % cn] : v; }
#endif
};

// Weights w [n, k] in tiles16 (q8_0, q4_k) times m rows of activations quantized by the
// type's rules (xq int8 [m, k], xd their block scales; for q4_k's q8_K blocks also xs, the sums
// of each 32 values [m, k / 32]) into y.
void tiled_matvec(DType t, const uint8_t* w, int64_t n, int64_t k, const int8_t* xq,
                  const float* xd, const float* xs, int64_t m, const Out& y, cudaStream_t s);

// The same product of one f32 row x [k], quantized in the product (no quantizer kernel
// first), after rms_norm with scale g and eps where g is not null; false (nothing launched)
// where the row does not fit the product's shared memory.
bool tiled_matvec_row(DType t, const uint8_t* w, int64_t n, int64_t k, const float* x,
                      const float* g, double eps, const Out& y, cudaStream_t s);

// Weights [n, k] in tiles16 decoded to bf16 [n, k] in the plain row order.
void untile_bf16(DType t, const uint8_t* w, int64_t n, int64_t k, __nv_bfloat16* out,
                 cudaStream_t s);

}  // namespace rlx::cuda
