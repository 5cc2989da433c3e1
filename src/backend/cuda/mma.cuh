// Tensor-core building blocks shared by the mma.sync kernels (attention, the f32 GEMM):
// ldmatrix, cp.async, the f16 / bf16 product and the TF32 one with its head / tail split.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace rlx::cuda {

// Four 8x8 matrices of 16-bit elements from shared memory; lane t names row t % 8 of
// matrix t / 8. With trans each lane gets a column pair instead of a row pair.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix4(uint32_t (&r)[4], const void* p) {
  uint32_t a = uint32_t(__cvta_generic_to_shared(p));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// 16 bytes global -> shared, of which the first `bytes` (0 to 16) are read from src and
// the rest zero-filled (src 16-byte aligned).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
// 16 bytes global -> shared, zero-filled when !valid.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  cp_async16(dst, src, valid ? 16 : 0);
}
// 4 bytes global -> shared, zero-filled when !valid.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
// Every group but the latest one complete.
__device__ __forceinline__ void cp_async_wait_prior() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}
// Every group but the latest n complete.
template <int n>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

// Two floats as a pair of T (f16 or bf16), rounded to nearest: lo in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// c += a b for one 16x8x16 tile: a row-major 16x16, b column-major 16x8, c f32.
template <class T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a b for one 16x8x16 tile of int8 values, int32 sums, where a's rows 8-15 are zero:
// lane l holds a0 (row l / 4, k 4 (l % 4) .. + 3) and b0 (k 4 (l % 4) .. + 3, column l / 4);
// c0, c1 (row l / 4, columns 2 (l % 4), + 1) are the ones that can be non-zero.
__device__ __forceinline__ void mma_s8(int (&c)[4], uint32_t a0, uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(0u), "r"(b0));
}

// c += a b for one 16x8x32 tile of int8 values, int32 sums: lane l holds a (rows l / 4 and
// l / 4 + 8, k 4 (l % 4) .. + 3 and 16 + 4 (l % 4) .. + 3: a0 row l / 4, a1 row l / 4 + 8, a2
// and a3 the same rows at the second k), b0 / b1 (those k, column l / 4); c0, c1 (row l / 4,
// columns 2 (l % 4), + 1), c2, c3 (row l / 4 + 8).
__device__ __forceinline__ void mma_s8_k32(int (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                           uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x as a TF32 head (rounded to nearest) and a TF32 tail holding most of what the head
// dropped: head + tail keeps about 21 of f32's 24 bits.
__device__ __forceinline__ void tf32_split(float x, uint32_t& head, uint32_t& tail) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(head) : "f"(x));
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(tail) : "f"(x - __uint_as_float(head)));
}

// d = a b + c for one 16x8x8 tile: TF32 operands, f32 accumulators (d may be c).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1, const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}
// c += a b.
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  mma_tf32(c, a, b0, b1, c);
}

}  // namespace rlx::cuda
