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
// dependency wait (no kernel writes them), overlapping the kernel before. On a batch-8 decode
// this runs faster than qmma on the file's layout; one activation row (a sequence's decode) is
// quantized by each thread block into its shared memory (Row), after the fused rms_norm, so
// that no quantizer kernel runs between a layer's products (bench/RESULTS.md, "tensor-core
// tiles", "one row quantized in the product"). untile_kernel decodes the tiles to bf16 rows
// for prefill's GEMM, each store 512 contiguous bytes of one row.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_util.h"
#include "backend/cuda/elementwise_ops.cuh"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/quant_act.cuh"
#include "backend/cuda/quant_tiles.h"
#include "rlx/quant.h"
#include "rlx/settings.h"

namespace rlx::cuda {

namespace {

constexpr int kTileWarps = 8;
static_assert(32 * kTileWarps == kRowThreads, "quantize_row takes a whole block");

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

// Where tmma's activations come from, per lane (g, q: row g's values 8 q .. of a block).
// Quantized: the rows the quantizer kernel wrote (xq int8 [m, k], xd, xs); rows past m read
// row m - 1, whose results are never stored.
struct Quantized {
  const int8_t* xq;
  const float *xd, *xs;
  static size_t smem_bytes(int64_t, int) { return 0; }
  template <class Tile>
  struct Reader {
    const int8_t* xp;
    const float *d0, *d1, *s0, *s1;
    __device__ Reader() {}
    template <class Wait>
    __device__ Reader(const Quantized& a, int64_t k, int64_t nb, int64_t m, int64_t r0, int lane,
                      Wait wait) {
      wait();
      const int g = lane / 4, q = lane % 4;
      const int64_t last = m - 1;
      const int64_t xa = r0 + 2 * q < m ? r0 + 2 * q : last,
                    xb = r0 + 2 * q + 1 < m ? xa + 1 : last;
      xp = a.xq + (r0 + g < m ? r0 + g : last) * k + 8 * q;
      d0 = a.xd + xa * nb, d1 = a.xd + xb * nb;
      s0 = a.xs + xa * (k / 32), s1 = a.xs + xb * (k / 32);
    }
    __device__ typename Tile::X load(int64_t b) const {
      return Tile::load_x(xp, d0, d1, s0, s1, b);
    }
  };
};

// One f32 row (m = 1), quantized (after fused_quant_matmul's rms_norm where g, its scale, is
// given) by each thread block into its shared memory first, as the quantizer kernel would
// (quantize_row): a decode step's product without the kernel before it. Every lane's row
// is that one, so both of its results take its scales.
struct Row {
  const float *x, *g;
  float eps;
  // The row's int8 values, block scales (padded to 16 bytes) and sums of 32.
  static size_t smem_bytes(int64_t k, int values) {
    return size_t(k + 4 * ((k / values + 3) / 4 * 4) + 4 * (k / 32));
  }
  template <class Tile>
  struct Reader : Quantized::Reader<Tile> {
    template <class Wait>
    __device__ Reader(const Row& a, int64_t k, int64_t nb, int64_t, int64_t, int lane, Wait wait) {
      extern __shared__ __align__(16) uint8_t smem[];
      auto* q = reinterpret_cast<int8_t*>(smem);
      auto* d = reinterpret_cast<float*>(smem + k);
      float* s = d + (nb + 3) / 4 * 4;
      quantize_row<Tile::kValues>(a.x, a.g, a.eps, k, q, d, s, wait);
      __syncthreads();
      this->xp = q + 8 * (lane % 4);
      this->d0 = this->d1 = d;
      this->s0 = this->s1 = s;
    }
  };
};

template <class Tile, int kLoads, bool kSwiglu, class Src>
__global__ void __launch_bounds__(32 * kTileWarps)
    tmma(const uint8_t* w, int64_t n, int64_t k, Src src, int64_t m, Out y) {
  __shared__ float part[kTileWarps][32][kSwiglu ? 8 : 4];
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, q = lane % 4;
  const int64_t nb = k / Tile::kValues, gbytes = nb * Tile::kBytes;
  const uint8_t* ta = w + int64_t(blockIdx.x) * gbytes;
  const uint8_t* tb = ta + (n / 32) * gbytes;  // with swiglu: the up rows' group (n / 2 later)
  const int64_t r0 = int64_t(blockIdx.y) * 8;
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
  const typename Src::template Reader<Tile> xr(src, k, nb, m, r0, lane, [] {
    pdl_wait();
    pdl_trigger();
  });
  for (int64_t b0 = warp; b0 < nb; b0 += step) {
    if (b0 != warp) load_w(b0);
    typename Tile::X xv[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int64_t b = b0 + int64_t(i) * kTileWarps;
      if (b < nb) xv[i] = xr.load(b);
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

// A warp per row pair (i, i + 8) of a group of 16 (blockIdx.y), its lanes writing 512
// contiguous bytes of each row a store: q8_0 lane (b, j) reads run 4 i + j of block b (of 8,
// blockIdx.x a span of 8 blocks), values 8 j .. 8 j + 7; q4_k lane (c, h, j) that of chunk c,
// sub-block 2 c + h (blockIdx.x the block). Each lane writes values 8 lane .. 8 lane + 7 of
// the span in both rows.
template <DType T>
__global__ void __launch_bounds__(256)
    untile_kernel(const uint8_t* w, int64_t k, __nv_bfloat16* out) {
  constexpr bool kK = T == DType::q4_k;
  constexpr int kValues = kK ? 256 : 32, kBytes = kK ? 2304 : 544;
  const int lane = int(threadIdx.x % 32), i = int(threadIdx.x / 32), j = lane % 4;
  const int64_t nb = k / kValues, tile = blockIdx.y, row = tile * 16 + i;
  const int64_t b = kK ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * 8 + lane / 4;
  if (b >= nb) return;
  const uint8_t* base = w + (tile * nb + b) * kBytes;
  __nv_bfloat16* oa = out + row * k + (kK ? b * 256 : int64_t(blockIdx.x) * 256) + 8 * lane;
  __nv_bfloat16* ob = oa + 8 * k;
  if constexpr (!kK) {
    const float2 s = __half22float2(*reinterpret_cast<const __half2*>(base + 4 * i));
    const uint4 v = *reinterpret_cast<const uint4*>(base + 32 + 16 * (4 * i + j));
    store8(oa, v.x, v.y, -1, s.x, 0);
    store8(ob, v.z, v.w, -1, s.y, 0);
  } else {
    const int c = lane / 8, h = (lane / 4) % 2;
    const uint4 v = *reinterpret_cast<const uint4*>(base + 256 + 512 * c + 16 * (4 * i + j));
    const uint8_t* sc = base + 64 + 24 * i;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float2 dm = __half22float2(*reinterpret_cast<const __half2*>(base + 8 * i + 4 * half));
      int s, mn;
      quant::k4_scale_min(sc + 12 * half, 2 * c + h, s, mn);
      store8(half ? ob : oa, half ? v.z : v.x, half ? v.w : v.y, h, dm.x * float(s),
             dm.y * float(mn));
    }
  }
}

// tmma over the activations `src` (Quantized or Row).
template <class Src>
void launch_tiles(DType t, const uint8_t* w, int64_t n, int64_t k, const Src& src, int64_t m,
                  const Out& y, cudaStream_t s) {
  const dim3 grid(unsigned(y.swiglu ? n / 32 : n / 16), unsigned((m + 7) / 8));
  // Blocks a lane loads before it multiplies (Tile::kFew / kMany, settings().cuda_tile_loads):
  // the faster of the two on a 1.1 B decode, per type, with / without swiglu's two tiles, and
  // kFew for one row (bench/RESULTS.md, "one row quantized in the product").
  const int64_t loads = settings().cuda_tile_loads;
  auto go = [&](auto tile) {
    using Tile = decltype(tile);
    const bool many = loads > 0 ? loads >= Tile::kMany
                      : m == 1  ? false
                                : (y.swiglu ? Tile::kManySwiglu : Tile::kManyAlone);
    auto launch = [&](auto kernel) {
      launch_pdl(kernel, grid, 32 * kTileWarps, Src::smem_bytes(k, Tile::kValues), s, w, n, k, src,
                 m, y);
    };
    if (y.swiglu)
      many ? launch(tmma<Tile, Tile::kMany, true, Src>) : launch(tmma<Tile, Tile::kFew, true, Src>);
    else
      many ? launch(tmma<Tile, Tile::kMany, false, Src>)
           : launch(tmma<Tile, Tile::kFew, false, Src>);
  };
  if (t == DType::q4_k)
    go(TileQ4K{});
  else
    go(TileQ8{});
  RLX_CUDA_LAUNCHED("quant_matmul: tiles");
}

}  // namespace

void tiled_matvec(DType t, const uint8_t* w, int64_t n, int64_t k, const int8_t* xq,
                  const float* xd, const float* xs, int64_t m, const Out& y, cudaStream_t s) {
  launch_tiles(t, w, n, k, Quantized{xq, xd, xs}, m, y, s);
}

bool tiled_matvec_row(DType t, const uint8_t* w, int64_t n, int64_t k, const float* x,
                      const float* g, double eps, const Out& y, cudaStream_t s) {
  // Within the 48 KiB a launch gets unasked (k up to ~38k values).
  if (Row::smem_bytes(k, t == DType::q4_k ? 256 : 32) > 48 * 1024) return false;
  launch_tiles(t, w, n, k, Row{x, g, float(eps)}, 1, y, s);
  return true;
}

void untile_bf16(DType t, const uint8_t* w, int64_t n, int64_t k, __nv_bfloat16* out,
                 cudaStream_t s) {
  if (n == 0 || k == 0) return;
  const bool q4k = t == DType::q4_k;
  const int64_t blocks = k / (q4k ? 256 : 32);
  const dim3 grid(unsigned(q4k ? blocks : (blocks + 7) / 8), unsigned(n / 16));
  if (q4k)
    untile_kernel<DType::q4_k><<<grid, 256, 0, s>>>(w, k, out);
  else
    untile_kernel<DType::q8_0><<<grid, 256, 0, s>>>(w, k, out);
  RLX_CUDA_LAUNCHED("dequantize: tiles");
}

}  // namespace rlx::cuda
