// f32 GEMM options on the GPU, on GPT-2 small's shapes: SGEMM, cuBLAS's BF16x9 emulation,
// one TF32 product, 3xTF32 as three cuBLAS TF32 GEMMs, and rlx's tensor-core f32 GEMM
// (src/backend/cuda/gemm_f32.cuh, what matmul runs for large f32 products) — each one's time
// and its error against DGEMM (max and rms, relative to the rms of the result). Build here,
// run on the GPU machine:
//   nvcc -O2 -arch=sm_90 -std=c++20 -Isrc tools/gpu/f32_gemm_probe.cu -lcublas -lcublasLt \
//     -o .gpuz/f32_gemm_probe
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/gemm_f32.cuh"
#define CK(x)                                                \
  do {                                                       \
    auto e = (x);                                            \
    if (e != 0) {                                            \
      printf("ERR %s = %d line %d\n", #x, int(e), __LINE__); \
    }                                                        \
  } while (0)
__global__ void split(const float* x, float* hi, float* lo, size_t n, int round_lo) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  uint32_t h;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(h) : "f"(x[i]));
  float hf = __uint_as_float(h);
  float l = x[i] - hf;
  if (round_lo) {
    uint32_t q;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(q) : "f"(l));
    l = __uint_as_float(q);
  }
  hi[i] = hf;
  lo[i] = l;
}
__global__ void todouble(const float* x, double* y, size_t n) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i];
}
int main() {
  cublasHandle_t h;
  CK(cublasCreate(&h));
  int ver = 0;
  cublasGetVersion(h, &ver);
  printf("cuBLAS %d, cuBLASLt %zu\n", ver, cublasLtGetVersion());
  int shapes[][3] = {{3072, 8192, 768},
                     {768, 8192, 3072},
                     {2304, 8192, 768},
                     {50304, 8192, 768}};  // col-major m n k (W^T x^T)
  for (auto& s : shapes) {
    int m = s[0], n = s[1], k = s[2];
    size_t na = size_t(m) * k, nb = size_t(k) * n, nc = size_t(m) * n;
    std::vector<float> ha(na), hb(nb);
    uint64_t st = 12345;
    auto rnd = [&] {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      return float((st >> 40) / double(1 << 24) * 2 - 1);
    };
    for (auto& v : ha) v = rnd() * 0.05f;
    for (auto& v : hb) v = rnd();
    float *a, *b, *c, *ah, *al, *bh, *bl;
    double *da, *db, *dc;
    cudaMalloc(&a, na * 4);
    cudaMalloc(&b, nb * 4);
    cudaMalloc(&c, nc * 4);
    cudaMalloc(&ah, na * 4);
    cudaMalloc(&al, na * 4);
    cudaMalloc(&bh, nb * 4);
    cudaMalloc(&bl, nb * 4);
    cudaMalloc(&da, na * 8);
    cudaMalloc(&db, nb * 8);
    cudaMalloc(&dc, nc * 8);
    cudaMemcpy(a, ha.data(), na * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(b, hb.data(), nb * 4, cudaMemcpyHostToDevice);
    todouble<<<(na + 255) / 256, 256>>>(a, da, na);
    todouble<<<(nb + 255) / 256, 256>>>(b, db, nb);
    double one = 1, zero = 0;
    float f1 = 1, f0 = 0;
    CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, m, db, k, &zero, dc, m));
    std::vector<double> ref(nc);
    cudaMemcpy(ref.data(), dc, nc * 8, cudaMemcpyDeviceToHost);
    double rms = 0;
    for (auto v : ref) rms += v * v;
    rms = std::sqrt(rms / nc);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    auto run = [&](const char* name, auto f) {
      cudaMemset(c, 0, nc * 4);
      f();
      cudaError_t ce = cudaDeviceSynchronize();
      if (ce) {
        printf("  %-22s CUDA error %d\n", name, ce);
        return;
      }
      for (int i = 0; i < 3; ++i) f();
      cudaEventRecord(e0);
      for (int i = 0; i < 10; ++i) f();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      ms /= 10;
      cudaMemset(c, 0, nc * 4);
      f();
      cudaDeviceSynchronize();
      std::vector<float> out(nc);
      cudaMemcpy(out.data(), c, nc * 4, cudaMemcpyDeviceToHost);
      double mx = 0, se = 0;
      for (size_t i = 0; i < nc; ++i) {
        double d = out[i] - ref[i];
        mx = std::fmax(mx, std::fabs(d));
        se += d * d;
      }
      printf("  %-22s %8.3f ms %6.1f TFLOP/s  max err %.3e rms err %.3e (rms of C %.3e)\n", name,
             ms, 2.0 * m * n * k / ms / 1e9, mx / rms, std::sqrt(se / nc) / rms, rms);
    };
    printf("m=%d n=%d k=%d\n", m, n, k);
    auto gemm = [&](const float* A, const float* B, float beta, cublasComputeType_t ct) {
      CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &f1, A, CUDA_R_32F, m, B, CUDA_R_32F, k,
                      beta ? &f1 : &f0, c, CUDA_R_32F, m, ct, CUBLAS_GEMM_DEFAULT));
    };
    CK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    run("sgemm", [&] { gemm(a, b, 0, CUBLAS_COMPUTE_32F); });
    run("sgemm pedantic", [&] { gemm(a, b, 0, CUBLAS_COMPUTE_32F_PEDANTIC); });
    run("tf32", [&] { gemm(a, b, 0, CUBLAS_COMPUTE_32F_FAST_TF32); });
    CK(cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_EAGER));
    run("bf16x9 compute", [&] { gemm(a, b, 0, CUBLAS_COMPUTE_32F_EMULATED_16BFX9); });
    CK(cublasSetMathMode(h, CUBLAS_FP32_EMULATED_BF16X9_MATH));
    run("bf16x9 math mode", [&] { gemm(a, b, 0, CUBLAS_COMPUTE_32F); });
    CK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    CK(cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_DEFAULT));
    for (int rl = 0; rl < 2; ++rl)
      run(rl ? "3xtf32 lo rounded" : "3xtf32 cuBLAS", [&] {
        split<<<(na + 255) / 256, 256>>>(a, ah, al, na, rl);
        split<<<(nb + 255) / 256, 256>>>(b, bh, bl, nb, rl);
        gemm(al, bh, 0, CUBLAS_COMPUTE_32F_FAST_TF32);
        gemm(ah, bl, 1, CUBLAS_COMPUTE_32F_FAST_TF32);
        gemm(ah, bh, 1, CUBLAS_COMPUTE_32F_FAST_TF32);
      });
    {  // rlx's: y = x w^T with x = B^T (n x k, k contiguous) and w = A (m x k, m contiguous)
      using namespace rlx::cuda::tc;
      int64_t xp = (n + 127) / 128 * 128, wp = (m + 127) / 128 * 128, kp = (k + 31) / 32 * 32;
      float *xs, *ws;
      int* flag;
      cudaMalloc(&flag, sizeof(int));
      cudaMemset(flag, 0, sizeof(int));
      cudaMalloc(&xs, size_t(2 * xp * kp * 4));
      cudaMalloc(&ws, size_t(2 * wp * kp * 4));
      CK(cudaFuncSetAttribute(gemm_3xtf32<0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(kSmem)));
      TcParams p{xs,
                 xs + xp * kp,
                 ws,
                 ws + wp * kp,
                 0,
                 0,
                 kp,
                 int(xp / kBM),
                 int(wp / kBN),
                 c,
                 m,
                 0,
                 n,
                 m,
                 1.0f,
                 0.0f,
                 nullptr,
                 flag};
      auto gemm_tc = [&] {
        gemm_3xtf32<0><<<dim3(unsigned(p.tiles_m * p.tiles_n), 1), kGemmThreads, kSmem>>>(p);
      };
      run("3xtf32 corrected (rlx)", [&] {
        split_k_major<<<dim3(unsigned(kp / 32), unsigned(xp / 32), 1), dim3(32, 8)>>>(
            b, n, k, k, 1, 0, xs, xs + xp * kp, xp, kp, flag);
        split_k_major<<<dim3(unsigned(kp / 32), unsigned(wp / 32), 1), dim3(32, 8)>>>(
            a, m, k, 1, m, 0, ws, ws + wp * kp, wp, kp, flag);
        gemm_tc();
      });
      run("  its GEMM alone", gemm_tc);
      cudaFree(flag);
      cudaFree(xs);
      cudaFree(ws);
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(ah);
    cudaFree(al);
    cudaFree(bh);
    cudaFree(bl);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
  }
}
