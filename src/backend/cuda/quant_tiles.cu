// Quantized products over weights in tensor-core tiles (tiles16, rlx/quant.h: q8_0's and
// q4_k's 16-row groups, a block's scales, then a 16-byte run a lane for each 32 (q8_0) or 64
// (q4_k) values of the 16 rows).
//
// The decode matvec (tmma) has no shared-memory staging: lane l's run of a block is its
// operand of one m16n8k32 int8 product, loaded as it is (16 aligned bytes, a warp reading 512
// contiguous ones), the activations' 8 rows the other operand (lane (g, q): row g's values
// 8 q .. 8 q + 7 of the 32, the k order the tiles permute). A thread block takes one group of
// 16 rows (with swiglu the gate's and the up rows' groups), its warps a share of the blocks
// each; a block's int32 sums are scaled in f32 as the CPU's dots scale them (TileQ8, TileQ4K)
// and the warps' totals added in order. The weights of a warp's first round load before the
// dependency wait (no kernel writes them), overlapping the kernel before. On a 1.1 B batch-8
// decode (H100) q8_0 ran 27 % and q4_k 47 % faster this way than through qmma on the file's
// layout (bench/RESULTS.md, "tensor-core tiles").
#include <cuda_fp16.h>

#include "backend/cuda/cuda_util.h"
#include "backend/cuda/elementwise_ops.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/quant_tiles.h"
#include "rlx/quant.h"
#include "rlx/settings.h"

namespace rlx::cuda {

namespace {

constexpr int kTileWarps = 8;

// A lane's bytes of a byte-wise vector, as unsigned.
__device__ __forceinline__ int byte_of(uint32_t w, int i) { return int((w >> (8 * i)) & 255); }

// What tmma needs of a weight type: the values and bytes of a block of 16 rows (tiles16), what
// a lane loads of one (W: its runs and the scales of its two rows) and of the activations (X:
// its row's values, the scales and sums of the rows of its results), and the block's sums.
//
// q8_0: one run a lane; the 8 activation values of row g from 8 q; sums d_w d_x c.
struct TileQ8 {
  static constexpr int kValues = 32, kBytes = 544, kFew = 4, kMany = 8;
  static constexpr bool kManyAlone = true, kManySwiglu = false;
  struct W {
    uint4 v;
    uint32_t s;  // the f16 scales of rows g, g + 8
  };
  struct X {
    uint2 x;
    float d0, d1;
  };
  __device__ static W load_w(const uint8_t* blk, int lane) {
    return {__ldg(reinterpret_cast<const uint4*>(blk + 32 + 16 * lane)),
            __ldg(reinterpret_cast<const uint32_t*>(blk + 4 * (lane / 4)))};
  }
  __device__ static X load_x(const int8_t* xp, const float* d0, const float* d1, const float*,
                             const float*, int64_t b) {
    return {*reinterpret_cast<const uint2*>(xp + b * 32), d0[b], d1[b]};
  }
  __device__ static void sum(float (&a)[4], const W& w, const X& x) {
    int c[4] = {0, 0, 0, 0};
    const uint32_t av[4] = {w.v.x, w.v.z, w.v.y, w.v.w};
    mma_s8_k32(c, av, x.x.x, x.x.y);
    const float2 s = __half22float2(*reinterpret_cast<const __half2*>(&w.s));
    a[0] += float(c[0]) * (s.x * x.d0);
    a[1] += float(c[1]) * (s.x * x.d1);
    a[2] += float(c[2]) * (s.y * x.d0);
    a[3] += float(c[3]) * (s.y * x.d1);
  }
};

// q4_k: four runs a lane (a 64-value chunk each: low nibbles sub-block 2 c, high 2 c + 1); the
// activations are q8_K's, with the sums of each 32 values (xs) for the minimums. Each
// sub-block's int32 product times its 6-bit scale sums in int32 over the block, the minimums'
// share in f32, then d_x (d_w isum - dmin_w msum), as ggml's q4_K dots.
struct TileQ4K {
  static constexpr int kValues = 256, kBytes = 2304, kFew = 1, kMany = 2;
  static constexpr bool kManyAlone = false, kManySwiglu = false;
  struct W {
    uint4 v[4];
    uint2 dm;     // d, dmin of row g; of row g + 8
    uint2 sc[3];  // the 12 packed scale bytes of row g, then of row g + 8
  };
  struct X {
    uint2 x[8];  // sub-block s's values 8 q .. 8 q + 7 of row g
    float d0, d1;
    float4 s0[2], s1[2];  // the sub-blocks' sums of rows 2 q, 2 q + 1
  };
  __device__ static W load_w(const uint8_t* blk, int lane) {
    W w;
    const int g = lane / 4;
#pragma unroll
    for (int c = 0; c < 4; ++c)
      w.v[c] = __ldg(reinterpret_cast<const uint4*>(blk + 256 + 512 * c + 16 * lane));
    w.dm = __ldg(reinterpret_cast<const uint2*>(blk + 8 * g));
#pragma unroll
    for (int i = 0; i < 3; ++i)
      w.sc[i] = __ldg(reinterpret_cast<const uint2*>(blk + 64 + 24 * g + 8 * i));
    return w;
  }
  __device__ static X load_x(const int8_t* xp, const float* d0, const float* d1, const float* s0,
                             const float* s1, int64_t b) {
    X x;
#pragma unroll
    for (int s = 0; s < 8; ++s)
      x.x[s] = *reinterpret_cast<const uint2*>(xp + b * 256 + 64 * (s / 2) + 32 * (s % 2));
    x.d0 = d0[b], x.d1 = d1[b];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      x.s0[i] = reinterpret_cast<const float4*>(s0 + b * 8)[i];
      x.s1[i] = reinterpret_cast<const float4*>(s1 + b * 8)[i];
    }
    return x;
  }
  // The 8 scales and 8 minimums of a row's packed bytes (k4_scale_min), 4 to a word.
  __device__ static void scales(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t (&sc)[2],
                                uint32_t (&mn)[2]) {
    sc[0] = w0 & 0x3f3f3f3fu;
    mn[0] = w1 & 0x3f3f3f3fu;
    sc[1] = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
    mn[1] = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
  }
  __device__ static void sum(float (&a)[4], const W& w, const X& x) {
    uint32_t sa[2], ma[2], sb[2], mb[2];  // rows g, g + 8
    scales(w.sc[0].x, w.sc[0].y, w.sc[1].x, sa, ma);
    scales(w.sc[1].y, w.sc[2].x, w.sc[2].y, sb, mb);
    int is[4] = {0, 0, 0, 0};
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * c + h;
        const uint4 v = w.v[c];
        auto nib = [&](uint32_t u) { return (h ? u >> 4 : u) & 0x0f0f0f0fu; };
        const uint32_t av[4] = {nib(v.x), nib(v.z), nib(v.y), nib(v.w)};
        int p[4] = {0, 0, 0, 0};
        mma_s8_k32(p, av, x.x[s].x, x.x[s].y);
        const int ka = byte_of(sa[s / 4], s % 4), kb = byte_of(sb[s / 4], s % 4);
        is[0] += ka * p[0];
        is[1] += ka * p[1];
        is[2] += kb * p[2];
        is[3] += kb * p[3];
      }
    const float s0[8] = {x.s0[0].x, x.s0[0].y, x.s0[0].z, x.s0[0].w,
                         x.s0[1].x, x.s0[1].y, x.s0[1].z, x.s0[1].w};
    const float s1[8] = {x.s1[0].x, x.s1[0].y, x.s1[0].z, x.s1[0].w,
                         x.s1[1].x, x.s1[1].y, x.s1[1].z, x.s1[1].w};
    float ms[4] = {0, 0, 0, 0};
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const float ma_s = float(byte_of(ma[s / 4], s % 4)), mb_s = float(byte_of(mb[s / 4], s % 4));
      ms[0] += ma_s * s0[s];
      ms[1] += ma_s * s1[s];
      ms[2] += mb_s * s0[s];
      ms[3] += mb_s * s1[s];
    }
    const float2 da = __half22float2(*reinterpret_cast<const __half2*>(&w.dm.x));
    const float2 db = __half22float2(*reinterpret_cast<const __half2*>(&w.dm.y));
    a[0] += x.d0 * (da.x * float(is[0]) - da.y * ms[0]);
    a[1] += x.d1 * (da.x * float(is[1]) - da.y * ms[1]);
    a[2] += x.d0 * (db.x * float(is[2]) - db.y * ms[2]);
    a[3] += x.d1 * (db.x * float(is[3]) - db.y * ms[3]);
  }
};

template <class Tile, int kLoads, bool kSwiglu>
__global__ void __launch_bounds__(32 * kTileWarps)
    tmma(const uint8_t* w, int64_t n, int64_t k, const int8_t* xq, const float* xd, const float* xs,
         int64_t m, Out y) {
  __shared__ float part[kTileWarps][32][kSwiglu ? 8 : 4];
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, q = lane % 4;
  const int64_t nb = k / Tile::kValues, gbytes = nb * Tile::kBytes;
  const uint8_t* ta = w + int64_t(blockIdx.x) * gbytes;
  const uint8_t* tb = ta + (n / 32) * gbytes;  // with swiglu: the up rows' group (n / 2 later)
  // Activation rows past m read row m - 1: their sums are never stored.
  const int64_t r0 = int64_t(blockIdx.y) * 8, last = m - 1;
  const int64_t xa = r0 + 2 * q < m ? r0 + 2 * q : last, xb = r0 + 2 * q + 1 < m ? xa + 1 : last;
  const int8_t* xp = xq + (r0 + g < m ? r0 + g : last) * k + 8 * q;
  const float *d0 = xd + xa * nb, *d1 = xd + xb * nb;
  const float *s0 = xs + xa * (k / 32), *s1 = xs + xb * (k / 32);
  const int64_t step = int64_t(kTileWarps) * kLoads;
  typename Tile::W wa[kLoads], wb[kLoads];
  auto load_w = [&](int64_t b0) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int64_t b = b0 + int64_t(i) * kTileWarps;
      if (b >= nb) continue;
      wa[i] = Tile::load_w(ta + b * Tile::kBytes, lane);
      if constexpr (kSwiglu) wb[i] = Tile::load_w(tb + b * Tile::kBytes, lane);
    }
  };
  float acc[4] = {}, accb[4] = {};
  load_w(warp);
  pdl_wait();
  pdl_trigger();
  for (int64_t b0 = warp; b0 < nb; b0 += step) {
    if (b0 != warp) load_w(b0);
    typename Tile::X xv[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int64_t b = b0 + int64_t(i) * kTileWarps;
      if (b < nb) xv[i] = Tile::load_x(xp, d0, d1, s0, s1, b);
    }
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      if (b0 + int64_t(i) * kTileWarps >= nb) continue;
      Tile::sum(acc, wa[i], xv[i]);
      if constexpr (kSwiglu) Tile::sum(accb, wb[i], xv[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    part[warp][lane][i] = acc[i];
    if constexpr (kSwiglu) part[warp][lane][4 + i] = accb[i];
  }
  __syncthreads();
  if (warp != 0) return;
    // c0, c1: tile row g, activation rows 2 q, 2 q + 1; c2, c3: tile row g + 8.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t xrow = r0 + 2 * q + (i % 2);
    if (xrow >= m) continue;
    float v = 0, vb = 0;
#pragma unroll
    for (int w8 = 0; w8 < kTileWarps; ++w8) {
      v += part[w8][lane][i];
      if constexpr (kSwiglu) vb += part[w8][lane][4 + i];
    }
    const int64_t col = int64_t(blockIdx.x) * 16 + g + 8 * (i / 2);
    y.put(xrow * y.ld + col, kSwiglu ? ewop::Silu{}(v)*vb : v);
  }
}

// 8 values d * v - dm * mn (bytes of lo / hi words, nibble `nib` of each where nib >= 0) as
// bf16 at out.
__device__ __forceinline__ void store8(__nv_bfloat16* out, uint32_t lo, uint32_t hi, int nib,
                                       float d, float dm) {
  const uint32_t words[2] = {lo, hi};
  uint32_t o[4];
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    float v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int at = 2 * p + e, byte = byte_of(words[at / 4], at % 4);
      v[e] = nib < 0 ? d * float(int8_t(byte)) - dm : d * float(nib ? byte >> 4 : byte & 15) - dm;
    }
    __nv_bfloat162 h = __floats2bfloat162_rn(v[0], v[1]);
    o[p] = *reinterpret_cast<uint32_t*>(&h);
  }
  *reinterpret_cast<uint4*>(out) = uint4{o[0], o[1], o[2], o[3]};
}

// One thread a lane's run of a block: q8_0 values 8 j .. 8 j + 7 of rows i and i + 8; q4_k
// those of chunk c's two sub-blocks. blockIdx.y: the group of 16 rows (no 64-bit divisions).
template <DType T>
__global__ void untile_kernel(const uint8_t* w, int64_t k, __nv_bfloat16* out) {
  constexpr bool kK = T == DType::q4_k;
  constexpr int kValues = kK ? 256 : 32, kBytes = kK ? 2304 : 544, kRuns = kK ? 128 : 32;
  const int nb = int(k / kValues), idx = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (idx >= nb * kRuns) return;
  {
    const int run = idx % kRuns, lane = run % 32, c = run / 32, pair = lane / 4, j = lane % 4;
    const int b = idx / kRuns;
    const int64_t tile = blockIdx.y;
    const uint8_t* base = w + (tile * nb + b) * kBytes;
    const int64_t row = tile * 16 + pair;
    __nv_bfloat16* oa = out + row * k + int64_t(b) * kValues;
    __nv_bfloat16* ob = oa + 8 * k;
    if constexpr (!kK) {
      const float2 s = __half22float2(*reinterpret_cast<const __half2*>(base + 4 * pair));
      const uint4 v = *reinterpret_cast<const uint4*>(base + 32 + 16 * lane);
      store8(oa + 8 * j, v.x, v.y, -1, s.x, 0);
      store8(ob + 8 * j, v.z, v.w, -1, s.y, 0);
    } else {
      const uint4 v = *reinterpret_cast<const uint4*>(base + 256 + 512 * c + 16 * lane);
      const uint8_t* sc = base + 64 + 24 * pair;
      for (int half = 0; half < 2; ++half) {
        const float2 dm =
            __half22float2(*reinterpret_cast<const __half2*>(base + 8 * pair + 4 * half));
        __nv_bfloat16* o = half ? ob : oa;
        const uint32_t lo = half ? v.z : v.x, hi = half ? v.w : v.y;
        for (int h = 0; h < 2; ++h) {
          int s, mn;
          quant::k4_scale_min(sc + 12 * half, 2 * c + h, s, mn);
          store8(o + 64 * c + 32 * h + 8 * j, lo, hi, h, dm.x * float(s), dm.y * float(mn));
        }
      }
    }
  }
}

}  // namespace

void tiled_matvec(DType t, const uint8_t* w, int64_t n, int64_t k, const int8_t* xq,
                  const float* xd, const float* xs, int64_t m, const Out& y, cudaStream_t s) {
  const dim3 grid(unsigned(y.swiglu ? n / 32 : n / 16), unsigned((m + 7) / 8));
  // Blocks a lane loads before it multiplies (Tile::kFew / kMany, settings().cuda_tile_loads):
  // the faster of the two on a 1.1 B decode, per type and with / without swiglu's two tiles.
  const int64_t loads = settings().cuda_tile_loads;
  auto go = [&](auto tile) {
    using Tile = decltype(tile);
    const bool many = loads > 0  ? loads >= Tile::kMany
                      : y.swiglu ? Tile::kManySwiglu
                                 : Tile::kManyAlone;
    auto launch = [&](auto kernel) {
      launch_pdl(kernel, grid, 32 * kTileWarps, 0, s, w, n, k, xq, xd, xs, m, y);
    };
    if (y.swiglu)
      many ? launch(tmma<Tile, Tile::kMany, true>) : launch(tmma<Tile, Tile::kFew, true>);
    else
      many ? launch(tmma<Tile, Tile::kMany, false>) : launch(tmma<Tile, Tile::kFew, false>);
  };
  if (t == DType::q4_k)
    go(TileQ4K{});
  else
    go(TileQ8{});
  RLX_CUDA_LAUNCHED("quant_matmul: tiles");
}

void untile_bf16(DType t, const uint8_t* w, int64_t n, int64_t k, __nv_bfloat16* out,
                 cudaStream_t s) {
  if (n == 0 || k == 0) return;
  const int64_t runs = t == DType::q4_k ? k / 2 : k;  // of a group of 16 rows
  const dim3 grid(unsigned((runs + kThreads - 1) / kThreads), unsigned(n / 16));
  if (t == DType::q4_k)
    untile_kernel<DType::q4_k><<<grid, kThreads, 0, s>>>(w, k, out);
  else
    untile_kernel<DType::q8_0><<<grid, kThreads, 0, s>>>(w, k, out);
  RLX_CUDA_LAUNCHED("dequantize: tiles");
}

}  // namespace rlx::cuda
