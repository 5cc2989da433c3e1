// How many activation rows CUDA's quant_matmul multiplies with its matvec kernels (exact
// products of f32 activations); more take the GEMM path, whose activations are rounded to
// bf16 on the tensor cores. A plain header: the op tables' bounds (tests/op_tables) follow it.
#pragma once

#include <cstdint>

#include "rlx/dtype.h"

namespace rlx::cuda {

// bf16 weights take cuBLASLt's GEMM from 8 rows, which streams them faster than bmatvec there
// (7 B bf16 b8 decode, bench/RESULTS.md "The GEMM from 8 rows"), rounding the activations to
// bf16 as PyTorch's bf16 decode does. Quantized weights would be decoded whole for it, and
// f16 / f32 ones keep fmatvec's f32 activations: theirs up to 8 rows.
inline int64_t matvec_rows(DType w) { return w == DType::bf16 ? 7 : 8; }

}  // namespace rlx::cuda
