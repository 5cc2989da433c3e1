// tools/gpu/matvec_probe.cu — batch-1 bf16 matvec designs side by side on the GPU machine:
// y[n] = W[n, k] x[k] (W bf16, x and y f32, as rlx's decode reads them), on the per-layer
// shapes of the 1.1 B and 7 B llama configs, each layer its own weights (the model's size,
// so nothing stays in L2), launched programmatically dependent inside a CUDA graph as a
// decode step does. Prints each design's step time and bytes ÷ time as a fraction of the
// device-to-device copy bandwidth measured in the same run, and cuBLAS's gemv (bf16 x, as
// PyTorch runs it) as the peer.
//   nvcc -O3 -arch=sm_90 -std=c++20 -Isrc -Iinclude tools/gpu/matvec_probe.cu -lcublas -o
//   matvec_probe
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/kernels.cuh"  // pdl_wait, pdl_trigger, load_once, prefetch_l2

#define CK(x)                                                                    \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

using bf16 = __nv_bfloat16;
using namespace rlx::cuda;

__device__ __forceinline__ float dot8(uint4 v, const float* x, float acc) {
  const float4 a = reinterpret_cast<const float4*>(x)[0], b = reinterpret_cast<const float4*>(x)[1];
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  const float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]),
               w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
  acc = fmaf(w0.x, a.x, acc);
  acc = fmaf(w0.y, a.y, acc);
  acc = fmaf(w1.x, a.z, acc);
  acc = fmaf(w1.y, a.w, acc);
  acc = fmaf(w2.x, b.x, acc);
  acc = fmaf(w2.y, b.y, acc);
  acc = fmaf(w3.x, b.z, acc);
  return fmaf(w3.y, b.w, acc);
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One lane's share of row wr · x: its 8-value chunks from `first`, `stride` values apart, U
// 16-byte loads in flight before any is used.
template <int U>
__device__ __forceinline__ float row_share(const bf16* wr, int k, const float* x, int first,
                                           int stride) {
  float acc = 0;
  for (int i0 = first; i0 < k; i0 += stride * U) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i0 + stride * u < k)
        raw[u] = load_once(reinterpret_cast<const uint4*>(wr + i0 + stride * u));
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i0 + stride * u < k) acc = dot8(raw[u], x + i0 + stride * u, acc);
  }
  return acc;
}

// A: one warp per row, U 16-byte loads per lane in flight (rlx's fmatvec at U = 4), the
// row prefetched into L2 before the dependency wait.
template <int WARPS, int U, bool PF>
__global__ void __launch_bounds__(32 * WARPS)
    mv_row(const bf16* w, int n, int k, const float* x, float* y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * WARPS + warp;
  const bool live = row < n;
  const bf16* wr = w + int64_t(live ? row : 0) * k;
  if (PF && live) prefetch_l2(wr, int64_t(k) * 2, lane, 32);
  pdl_wait();
  pdl_trigger();
  const float acc = warp_sum(live ? row_share<U>(wr, k, x, 8 * lane, 256) : 0.f);
  if (live && lane == 0) y[row] = acc;
}

// A with rms_norm's weights applied as it multiplies (rlx's fused_quant_matmul): g loaded
// beside x, the squares of x summed, the scale applied at the end.
template <int WARPS, int U>
__global__ void __launch_bounds__(32 * WARPS)
    mv_norm(const bf16* w, int n, int k, const float* x, float* y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * WARPS + warp;
  const bool live = row < n;
  const bf16* wr = w + int64_t(live ? row : 0) * k;
  const float* g = x + k;  // the probe's x buffer holds 2 k values
  pdl_wait();
  pdl_trigger();
  float acc = 0, sq = 0;
  if (live)
    for (int i0 = 8 * lane; i0 < k; i0 += 256 * U) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i0 + 256 * u < k) raw[u] = load_once(reinterpret_cast<const uint4*>(wr + i0 + 256 * u));
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = i0 + 256 * u;
        if (i >= k) break;
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw[u]);
        const float4 a = reinterpret_cast<const float4*>(x + i)[0],
                     b = reinterpret_cast<const float4*>(x + i)[1];
        const float4 c = reinterpret_cast<const float4*>(g + i)[0],
                     d = reinterpret_cast<const float4*>(g + i)[1];
        const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        const float gv[8] = {c.x, c.y, c.z, c.w, d.x, d.y, d.z, d.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          acc = fmaf(f.x * gv[2 * j], xv[2 * j], acc);
          acc = fmaf(f.y * gv[2 * j + 1], xv[2 * j + 1], acc);
          sq = fmaf(xv[2 * j], xv[2 * j], sq);
          sq = fmaf(xv[2 * j + 1], xv[2 * j + 1], sq);
        }
      }
    }
  acc = warp_sum(acc);
  sq = warp_sum(sq);
  if (live && lane == 0) y[row] = acc / sqrtf(sq / k + 1e-5f);
}

// A with each row split over S warps of the block (each 1/S of k, chunks dealt round-robin),
// the S partial sums added through shared memory (rlx's split_for).
template <int WARPS, int U, int S>
__global__ void __launch_bounds__(32 * WARPS)
    mv_split(const bf16* w, int n, int k, const float* x, float* y) {
  __shared__ float part[WARPS];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * (WARPS / S) + warp / S, p = warp % S;
  const bool live = row < n;
  const bf16* wr = w + int64_t(live ? row : 0) * k;
  pdl_wait();
  pdl_trigger();
  const float acc = warp_sum(live ? row_share<U>(wr, k, x, 8 * lane + 256 * p, 256 * S) : 0.f);
  if (lane == 0) part[warp] = acc;
  __syncthreads();
  if (p == 0 && lane == 0 && live) {
    float v = 0;
    for (int j = 0; j < S; ++j) v += part[warp + j];
    y[row] = v;
  }
}

// B: persistent warps: a grid the size of what the SMs hold, each warp over rows
// gw, gw + W, ...; the next row prefetched into L2 while this one loads.
template <int WARPS, int U>
__global__ void __launch_bounds__(32 * WARPS)
    mv_persist(const bf16* w, int n, int k, const float* x, float* y) {
  const int lane = threadIdx.x % 32;
  const int gw = blockIdx.x * WARPS + threadIdx.x / 32, W = gridDim.x * WARPS;
  if (gw < n) prefetch_l2(w + int64_t(gw) * k, int64_t(k) * 2, lane, 32);
  pdl_wait();
  pdl_trigger();
  for (int row = gw; row < n; row += W) {
    const bf16* wr = w + int64_t(row) * k;
    if (row + W < n) prefetch_l2(wr + int64_t(W) * k, int64_t(k) * 2, lane, 32);
    const float acc = warp_sum(row_share<U>(wr, k, x, 8 * lane, 256));
    if (lane == 0) y[row] = acc;
  }
}

// C: R rows per warp, their loads interleaved (R U loads in flight per lane).
template <int WARPS, int U, int R>
__global__ void __launch_bounds__(32 * WARPS)
    mv_multi(const bf16* w, int n, int k, const float* x, float* y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * WARPS + warp) * R;
  prefetch_l2(w + int64_t(min(row0, n)) * k, int64_t(max(0, min(R, n - row0))) * k * 2, lane, 32);
  pdl_wait();
  pdl_trigger();
  float acc[R] = {};
  for (int i0 = 8 * lane; i0 < k; i0 += 256 * U) {
    uint4 raw[R][U];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (row0 + r < n && i0 + 256 * u < k)
          raw[r][u] =
              load_once(reinterpret_cast<const uint4*>(w + int64_t(row0 + r) * k + i0 + 256 * u));
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i0 + 256 * u >= k) break;
      const float4 a = reinterpret_cast<const float4*>(x + i0 + 256 * u)[0];
      const float4 b = reinterpret_cast<const float4*>(x + i0 + 256 * u)[1];
      const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw[r][u]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __bfloat1622float2(h[j]);
          acc[r] = fmaf(f.x, xv[2 * j], acc[r]);
          acc[r] = fmaf(f.y, xv[2 * j + 1], acc[r]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0 && row0 + r < n) y[row0 + r] = s;
  }
}

__global__ void fill(bf16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) * 1e-3f);
  }
}
__global__ void fillf(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = float(int(i * 7919 % 201) - 100) * 1e-2f;
}
__global__ void tobf(const float* x, bf16* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(x[i]);
}

struct Shape {
  int n, k;
};
using Kern = void (*)(const bf16*, int, int, const float*, float*);

template <class... A>
void launch(Kern f, dim3 g, int threads, cudaStream_t s, A... a) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = g;
  cfg.blockDim = threads;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, f, a...));
}

struct Design {
  const char* name;
  Kern f;
  int warps, rows_per_block;
  bool persistent;
};

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  // copy bandwidth: 1 GiB device to device
  size_t cb = size_t(1) << 30;
  void *ca, *cbuf;
  CK(cudaMalloc(&ca, cb));
  CK(cudaMalloc(&cbuf, cb));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(e0, s));
  for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(cbuf, ca, cb, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double copy_bw = 2.0 * cb * 10 / (ms * 1e-3) / 1e9;
  CK(cudaFree(ca));
  CK(cudaFree(cbuf));
  printf("copy bandwidth %.0f GB/s, %d SMs\n", copy_bw, sms);

  std::vector<Design> ds = {
      {"row w4 u4 pf (rlx now)", mv_row<4, 4, true>, 4, 4, false},
      {"row w4 u8 pf", mv_row<4, 8, true>, 4, 4, false},
      {"row w4 u4 no-pf", mv_row<4, 4, false>, 4, 4, false},
      {"row w4 u8 no-pf", mv_row<4, 8, false>, 4, 4, false},
      {"row w8 u4 no-pf", mv_row<8, 4, false>, 8, 8, false},
      {"row w8 u8 no-pf", mv_row<8, 8, false>, 8, 8, false},
      {"row w4 u2 no-pf", mv_row<4, 2, false>, 4, 4, false},
      {"row w2 u4 no-pf", mv_row<2, 4, false>, 2, 2, false},
      {"norm w4 u4 no-pf", mv_norm<4, 4>, 4, 4, false},
      {"split2 w4 u4 no-pf", mv_split<4, 4, 2>, 4, 2, false},
      {"split4 w4 u4 no-pf", mv_split<4, 4, 4>, 4, 1, false},
      {"row w8 u8 pf", mv_row<8, 8, true>, 8, 8, false},
      {"row w4 u16 pf", mv_row<4, 16, true>, 4, 4, false},
      {"persist w8 u8", mv_persist<8, 8>, 8, 8, true},
      {"persist w4 u4", mv_persist<4, 4>, 4, 4, true},
      {"persist w4 u16", mv_persist<4, 16>, 4, 4, true},
      {"multi w4 u4 r2", mv_multi<4, 4, 2>, 4, 8, false},
      {"multi w4 u8 r2", mv_multi<4, 8, 2>, 4, 8, false},
      {"multi w4 u4 r4", mv_multi<4, 4, 4>, 4, 16, false},
  };
  cublasHandle_t cub;
  cublasCreate(&cub);
  cublasSetStream(cub, s);

  struct Config {
    const char* name;
    int dim, layers, q, kv, ff, vocab;
  };
  for (Config c : {Config{"1b", 2048, 22, 2048, 256, 5632, 32000},
                   Config{"7b", 4096, 32, 4096, 1024, 14336, 32000}}) {
    std::vector<Shape> layer = {
        {c.q + 2 * c.kv, c.dim}, {c.dim, c.q}, {2 * c.ff, c.dim}, {c.dim, c.ff}};
    size_t per_layer = 0;
    for (Shape sh : layer) per_layer += size_t(sh.n) * sh.k;
    const size_t total = per_layer * c.layers + size_t(c.vocab) * c.dim;
    bf16* w;
    CK(cudaMalloc(&w, total * 2));
    fill<<<4096, 256, 0, s>>>(w, total, 1234);
    const int maxk = c.ff * 2;
    float *x, *y, *yref;
    bf16* xb;
    CK(cudaMalloc(&x, maxk * 4));
    CK(cudaMalloc(&xb, maxk * 2));
    CK(cudaMalloc(&y, 64 << 20));
    CK(cudaMalloc(&yref, 64 << 20));
    fillf<<<64, 256, 0, s>>>(x, maxk);
    tobf<<<(maxk + 255) / 256, 256, 0, s>>>(x, xb, maxk);
    CK(cudaStreamSynchronize(s));
    // the step: every layer's four products, then the output's; one selection `only`
    // (-1: all) of the four shapes, the output as 4
    auto step = [&](int design, int only) {
      size_t off = 0;
      size_t yo = 0;
      auto one = [&](Shape sh, bool take) {
        if (take) {
          float* yy = y + (yo % (8 << 20));
          if (design < 0) {
            const float one = 1, zero = 0;
            cublasGemmEx(cub, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, 1, sh.k, &one, w + off, CUDA_R_16BF,
                         sh.k, xb, CUDA_R_16BF, sh.k, &zero, yy, CUDA_R_32F, sh.n,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          } else {
            const Design& d = ds[design];
            int grid;
            if (d.persistent) {
              int per_sm = 0;
              CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, d.f, 32 * d.warps, 0));
              grid = std::min(per_sm * sms, (sh.n + d.warps - 1) / d.warps);
            } else {
              const int rows = d.rows_per_block;
              grid = (sh.n + rows - 1) / rows;
            }
            launch(d.f, dim3(grid), 32 * d.warps, s, (const bf16*)(w + off), sh.n, sh.k,
                   (const float*)x, yy);
          }
          yo += sh.n;
        }
        off += size_t(sh.n) * sh.k;
      };
      for (int l = 0; l < c.layers; ++l)
        for (int i = 0; i < 4; ++i) one(layer[i], only < 0 || only == i);
      one({c.vocab, c.dim}, only < 0 || only == 4);
    };
    auto bytes_of = [&](int only) {
      size_t b = 0;
      for (int i = 0; i < 4; ++i)
        if (only < 0 || only == i) b += size_t(layer[i].n) * layer[i].k * 2 * c.layers;
      if (only < 0 || only == 4) b += size_t(c.vocab) * c.dim * 2;
      return b;
    };
    auto time_graph = [&](int design, int only) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      step(design, only);
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, s));
      CK(cudaStreamSynchronize(s));
      float best = 1e30f;
      for (int rep = 0; rep < 7; ++rep) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        best = std::min(best, t);
      }
      CK(cudaGraphExecDestroy(ge));
      CK(cudaGraphDestroy(g));
      return best;
    };
    // reference outputs of design 0 for the check
    step(0, -1);
    CK(cudaMemcpyAsync(yref, y, 64 << 20, cudaMemcpyDeviceToDevice, s));
    CK(cudaStreamSynchronize(s));
    printf("\n== %s: %zu MB of bf16 weights; times per step (best of 7), %% of copy BW\n", c.name,
           total * 2 >> 20);
    printf("%-26s %10s %8s | %7s %7s %7s %7s %7s (us per product, each shape alone)\n", "design",
           "step us", "%BW", "qkv", "o", "gate_up", "down", "out");
    for (int d = -1; d < int(ds.size()); ++d) {
      const float t = time_graph(d, -1);
      if (d >= 0) {  // same outputs as design 0
        std::vector<float> a(1 << 20), b(1 << 20);
        step(d, -1);
        CK(cudaMemcpy(a.data(), y, 4 << 20, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), yref, 4 << 20, cudaMemcpyDeviceToHost));
        double md = 0;
        for (int i = 0; i < (1 << 20); ++i) md = std::max(md, double(std::fabs(a[i] - b[i])));
        if (md > 1e-2 && !strstr(ds[d].name, "norm"))
          printf("  !! %s differs by %g\n", ds[d].name, md);
      }
      printf("%-26s %10.1f %7.1f%% |", d < 0 ? "cuBLAS gemv (bf16 x)" : ds[d].name, t * 1e3,
             100.0 * bytes_of(-1) / (t * 1e-3) / 1e9 / copy_bw);
      for (int only = 0; only < 5; ++only) {
        const float ts = time_graph(d, only);
        printf(" %7.2f", ts * 1e3 / (only == 4 ? 1 : c.layers));
      }
      printf("\n");
    }
    CK(cudaFree(w));
    CK(cudaFree(x));
    CK(cudaFree(xb));
    CK(cudaFree(y));
    CK(cudaFree(yref));
  }
  return 0;
}
