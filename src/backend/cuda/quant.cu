// CUDA kernels of dequantize and quant_matmul (the CPU's are in backend/cpu/quant.cpp).
//
// A weight block is read as groups of 16 values: each group unpacks, in registers, to four
// words of signed 8-bit values with an integer scale and min (x = D * sc * v - M * mn, as
// the CPU's Unpacked), so one decoder per type serves both kernels.
//
// quant_matmul with few activation rows (decode: up to matvec_rows.h's) runs the matvec: the rows
// are first quantized to int8 blocks by ggml's rules (the CPU kernel's, so both compute one
// product: q8_0 / q8_1 per 32 values with f16 scales, q8_K per 256), then one warp per weight row
// (or 2-4 sharing it, where the product has few rows: Share) streams its blocks once, lanes taking
// 16-value groups in turn, with dp4a integer dots per group; the store adds the addend (a residual
// the fusion pass folded in). At 8 rows (a batch's decode) qmma multiplies instead: 8 weight
// rows a block staged through shared memory, on the int8 tensor cores. Float weights stream 16
// bytes per lane with f32 products; bf16 ones with 2 to 7 rows multiply on the tensor cores
// (bmatvec, exact products). The matvecs launch programmatically dependent (kernels.cuh); the
// K-quant ones prefetch their rows into L2 while the kernel before them finishes. Many rows
// (prefill) multiply on the tensor cores in bf16 (quantized weights decoded to bf16 once per call;
// linalg.h's batched_gemm, cuBLASLt), with an addend of the output's shape in the GEMM's epilogue.
//
// Weights in tensor-core tiles (layout tiles16: q8_0 and q4_k as the LLM loader holds them on
// CUDA) take quant_tiles.cu's products instead, up to 8 rows and for the GEMM's bf16 decoding;
// one row is quantized inside the product (by quant_act.cuh's quantize_row, as the quantizer
// kernels here would).
//
// fused_quant_matmul runs through the same kernels: its swiglu pairs each gate row with its
// up row in one block (one warp sees both totals, Share); its rms_norm runs in the
// activations' quantizer, or for float weights as the rms_norm kernel first (inside
// fmatvec the norm's extra loads and sums cost more than the kernel: bench/RESULTS.md,
// "bf16 matvec streaming").
#include <cuda_fp16.h>

#include <vector>

#include "backend/addend.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_ops.cuh"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/linalg.h"
#include "backend/cuda/llm_kernels.h"
#include "backend/cuda/matvec_rows.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/nn.h"
#include "backend/cuda/quant_act.cuh"
#include "backend/cuda/quant_blocks.cuh"
#include "backend/cuda/quant_tiles.h"
#include "rlx/quant.h"
#include "rlx/settings.h"

namespace rlx::cuda {

namespace {

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

constexpr int kWarps = 4;  // weight rows per thread block of the matvec

// Calls f(std::integral_constant<DType, T>) for a block-quantized dtype.
template <class F>
void visit_quant(DType t, F&& f) {
  switch (t) {
#define RLX_CASE(T) \
  case DType::T:    \
    return f(std::integral_constant<DType, DType::T>{});
    RLX_QUANT_DTYPES(RLX_CASE)
#undef RLX_CASE
    default:
      break;
  }
  fail<NotSupported>("cuda", "expected a block-quantized dtype, got ", dtype_name(t));
}

// ---- dequantize ------------------------------------------------------------------------

// The table row output row r reads (r itself without `rows`); -1, reported, where out of
// range.
template <class I>
__device__ __forceinline__ int64_t source_row(const I* rows, int64_t r, int64_t table_rows,
                                              unsigned long long* bad) {
  if (!rows) return r;
  const int64_t src = int64_t(rows[r]);
  if (src >= 0 && src < table_rows) return src;
  report_bad(bad, src, 0);
  return -1;
}

// 16 values to out: as 16-byte vectors where kVec (out 16-byte aligned), else one by one.
// A warp's scalar stores would each touch 32 sectors for 64 useful bytes (bench/RESULTS.md,
// "LLM on the GPU": a prefill decodes its quantized weights this way).
template <bool kVec, class O>
__device__ __forceinline__ void store16(O* out, const float (&v)[16]) {
  if constexpr (kVec && sizeof(O) <= 4) {
    constexpr int kPer = 16 / int(sizeof(O));  // values per 16-byte vector
    Vec<O, kPer> u;
#pragma unroll
    for (int c = 0; c < 16 / kPer; ++c) {
#pragma unroll
      for (int j = 0; j < kPer; ++j) u.v[j] = store<O>(v[c * kPer + j]);
      reinterpret_cast<uint4*>(out)[c] = *reinterpret_cast<const uint4*>(&u);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) out[j] = store<O>(v[j]);
  }
}

// One thread per 16-value group of the selected rows (rows: the table's row of each output
// row; null for all rows in order).
template <DType T, bool kVec, class O, class I>
__global__ void dequant_groups(const uint8_t* w, const I* rows, int64_t out_rows,
                               int64_t table_rows, int64_t k, O* y, unsigned long long* bad) {
  using B = Blocks<T>;
  const int64_t gpr = k / 16, total = out_rows * gpr;
  RLX_GRID_STRIDE(i, total) {
    const int64_t r = i / gpr, gi = i % gpr, src = source_row(rows, r, table_rows, bad);
    if (src < 0) continue;
    const int per = B::kValues / 16;
    const uint8_t* blk = w + (src * (k / B::kValues) + gi / per) * B::kBytes;
    float D, M;
    const Group u = B::unpack(blk, int(gi % per), D, M);
    const float a = D * float(u.sc), m = M * float(u.mn);
    float v[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = a * float(sbyte(u.v[j / 4], j % 4)) - m;
    store16<kVec>(y + r * k + gi * 16, v);
  }
}

template <class S, class O, class I>
__global__ void convert_rows(const S* w, const I* rows, int64_t out_rows, int64_t table_rows,
                             int64_t k, O* y, unsigned long long* bad) {
  RLX_GRID_STRIDE(i, out_rows * k) {
    const int64_t src = source_row(rows, i / k, table_rows, bad);
    if (src < 0) continue;
    y[i] = store<O>(load(w[src * k + i % k]));
  }
}

// w [n, k] (or the rows `idx` of it) decoded into y, any float dtype.
void dequantize_into(const Tensor& w, const Tensor* idx, const Tensor& y, const KernelContext* ctx,
                     cudaStream_t s) {
  const int64_t table = w.shape().empty() ? 1 : w.shape()[0];
  const int64_t k = w.shape().empty() ? 1 : w.shape().back();
  const int64_t rows = k ? y.numel() / k : 0;
  if (rows * k == 0) return;
  unsigned long long* bad = nullptr;
  if (idx && ctx)
    bad = deferred_check(ctx->device, [table](int64_t v, int64_t) {
      fail<ValueError>("dequantize", "expected row indices in [0, ", table, "), got ", v);
    });
  auto go = [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* ip = idx ? static_cast<const I*>(idx->data()) : nullptr;
    visit(y.dtype(), [&](auto otag) {
      using O = typename decltype(otag)::type;
      if constexpr (is_float_v<O>) {
        O* yp = static_cast<O*>(y.data());
        if (is_quantized(w.dtype())) {
          const bool vec = aligned16(yp);
          visit_quant(w.dtype(), [&](auto t) {
            constexpr DType T = decltype(t)::value;
            auto kernel = vec ? dequant_groups<T, true, O, I> : dequant_groups<T, false, O, I>;
            kernel<<<blocks_for(rows * k / 16), kThreads, 0, s>>>(
                static_cast<const uint8_t*>(w.data()), ip, rows, table, k, yp, bad);
          });
        } else {
          visit(w.dtype(), [&](auto stag) {
            using S = typename decltype(stag)::type;
            if constexpr (is_float_v<S>)
              convert_rows<S, O, I><<<blocks_for(rows * k), kThreads, 0, s>>>(
                  static_cast<const S*>(w.data()), ip, rows, table, k, yp, bad);
          });
        }
      }
    });
  };
  if (!idx)
    go(Tag<int32_t>{});
  else if (idx->dtype() == DType::i64)
    go(Tag<int64_t>{});
  else
    go(Tag<int32_t>{});
  RLX_CUDA_LAUNCHED("dequantize");
}

void dequantize_kernel(const KernelContext& ctx, Ins in, Outs out) {
  dequantize_into(in[0], in.size() > 1 ? &in[1] : nullptr, out[0], &ctx, stream_of(ctx));
}

// ---- activations -----------------------------------------------------------------------
// Rows of x (f32) quantized as the CPU's qdot::quantize_act: int8 values xq [m, k], the scale of
// each block xd [m, k / blk] (the f16-rounded value for blocks of 32), and xs [m, k / 32]: for
// q8_1 the f16-rounded d * sum of each block, for q8_K the sums of each 32 values.

// Block b of 32 values (q8_0 / q8_1 rules), lane holding value `lane`.
__device__ __forceinline__ void q8_block(float v, int lane, int64_t b, int8_t* xq, float* xd,
                                         float* xs) {
  float amax = fabsf(v);
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
  const int q = __float2int_rn(v * id);
  xq[b * 32 + lane] = int8_t(q);
  int sum = q;
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    xd[b] = round_half(d);
    xs[b] = round_half(d * float(sum));
  }
}

// One warp per block of 32.
__global__ void quantize_q8(const float* x, int64_t blocks, int8_t* xq, float* xd, float* xs) {
  pdl_wait();
  pdl_trigger();  // the matvec may start (and prefetch its weights)
  const int64_t b = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (b < blocks) q8_block(x[b * 32 + threadIdx.x % 32], int(threadIdx.x % 32), b, xq, xd, xs);
}

// One warp per block of 256.
__global__ void quantize_q8k(const float* x, int64_t blocks, int8_t* xq, float* xd, float* xs) {
  pdl_wait();
  pdl_trigger();
  const int64_t b = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (b >= blocks) return;
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = x[b * 256 + lane * 8 + j];
  q8k_block(v, lane, b, xq, xd, xs);
}

// fused_quant_matmul's rms_norm and the quantization in one kernel, a block per row of x
// [m, k] (quant_act.cuh's quantize_row).
template <int kBlk>
__global__ void __launch_bounds__(kRowThreads)
    quantize_norm(const float* x, const float* g, float eps, int64_t k, int8_t* xq, float* xd,
                  float* xs) {
  const int64_t r = blockIdx.x;
  quantize_row<kBlk>(x + r * k, g, eps, k, xq + r * k, xd + r * (k / kBlk), xs + r * (k / 32), [] {
    pdl_wait();
    pdl_trigger();
  });
}

// The quantized activations: one allocation (a graph captured over it holds one memory
// node, not three).
struct Act {
  Tensor buf;
  const int8_t* q;  // int8 values [m, k]
  const float* d;   // block scales
  const float* s;   // sums of blocks of 32 (q8_1: times d)
  int blk = 32;
};

// Rows of x [m, k] quantized, after rms_norm with scale g (when given) and eps.
Act quantize_act(const Tensor& x, DType wt, int64_t m, int64_t k, cudaStream_t s,
                 const float* g = nullptr, double eps = 0) {
  Act a;
  a.blk = dtype_block(wt) == quant::kQK_K ? 256 : 32;
  // The sums start 16-byte aligned (the tiled q4_k product loads 4 at a time).
  const int64_t blocks = m * k / a.blk, qbytes = (m * k + 15) / 16 * 16,
                dn = (std::max<int64_t>(blocks, 1) + 3) / 4 * 4;
  a.buf =
      Tensor::empty(DType::u8, {qbytes + 4 * (dn + std::max<int64_t>(m * k / 32, 1))}, x.device());
  auto* base = static_cast<uint8_t*>(a.buf.data());
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* d = reinterpret_cast<float*>(base + qbytes);
  float* sums = d + dn;
  a.q = q, a.d = d, a.s = sums;
  if (blocks == 0) return a;
  const auto* xp = static_cast<const float*>(x.data());
  const unsigned grid = unsigned((blocks * 32 + kThreads - 1) / kThreads);  // a warp a block
  // Programmatically dependent, as the products: launched while the kernel before finishes.
  if (g && a.blk == 256)
    launch_pdl(quantize_norm<256>, unsigned(m), kRowThreads, 0, s, xp, g, float(eps), k, q, d,
               sums);
  else if (g)
    launch_pdl(quantize_norm<32>, unsigned(m), kRowThreads, 0, s, xp, g, float(eps), k, q, d, sums);
  else if (a.blk == 256)
    launch_pdl(quantize_q8k, grid, kThreads, 0, s, xp, blocks, q, d, sums);
  else
    launch_pdl(quantize_q8, grid, kThreads, 0, s, xp, blocks, q, d, sums);
  RLX_CUDA_LAUNCHED("quant_matmul: activations");
  return a;
}

// ---- the matvec ------------------------------------------------------------------------

// How the matvecs' warps share the weight rows: `split` consecutive warps of a block take
// one row, each a 1/split share of its k. Decode has few rows for the memory to stay busy
// (a 2048-row product is 15 warps per SM, each with a few loads in flight), so shorter
// products split their long rows (split_for). With swiglu a block's rows come in pairs (slot
// 2 i: gate row, 2 i + 1: its up row), so that one warp sees both totals.
struct Share {
  int64_t row, col;  // the weight row read; the output column stored
  int part, split, slot;
  bool live;  // a row of the product (the last block may have fewer)
  __device__ Share(int64_t n, int split_, bool pairs) : split(split_) {
    const int warp = int(threadIdx.x / 32), slots = kWarps / split;
    slot = warp / split;
    part = warp % split;
    if (pairs) {
      col = int64_t(blockIdx.x) * (slots / 2) + slot / 2;
      row = col + (slot % 2) * (n / 2);
      live = col < n / 2;
    } else {
      col = row = int64_t(blockIdx.x) * slots + slot;
      live = row < n;
    }
  }
};

// Each warp's MR partial sums folded over its lanes, then over the row's split warps (in
// order: deterministic), paired by swiglu, and stored with the addend.
template <int MR>
__device__ __forceinline__ void finish(float (&acc)[MR], const Share& sh, int64_t r0, int64_t m,
                                       const Out& y) {
  __shared__ float share[kWarps][MR];
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
#pragma unroll
  for (int r = 0; r < MR; ++r)
    for (int o = 16; o > 0; o /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  // The total of the slot whose warps start at `first`.
  auto total = [&](int first, int r) {
    float v = share[first][r];
    for (int j = 1; j < sh.split; ++j) v += share[first + j][r];
    return v;
  };
  if (sh.split > 1 || y.swiglu) {
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < MR; ++r) share[warp][r] = acc[r];
    __syncthreads();
    if (sh.part != 0) return;
#pragma unroll
    for (int r = 0; r < MR; ++r) acc[r] = total(warp, r);
  }
  if (lane != 0 || !sh.live || (y.swiglu && sh.slot % 2)) return;
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    if (r0 + r >= m) break;
    float v = acc[r];
    if (y.swiglu) v = ewop::Silu{}(v)*total(warp + sh.split, r);
    y.put((r0 + r) * y.ld + sh.col, v);
  }
}

// Groups of a row a lane has in flight: each round of loads costs a memory latency. Blocks
// of 32 read 18-36 bytes a group, the K-quants more: 8 in flight is faster for the former,
// slower for the latter (bench/RESULTS.md, "LLM on the GPU").
template <DType T>
constexpr int kQuantDepth = Blocks<T>::kValues == 32 ? 8 : 4;

// y[r, row] for MR activation rows from r0; one warp per weight row, lanes over its
// 16-value groups. Per group: integer dots with each row's 16 values (dp4a), the group's
// share D * sc * s - M * mn * (sum of the row's values) scaled by the row's block scale;
// blocks of 32 carry their whole minimum (q8_1's s) on the first group.
template <DType T, int MR, int kDepth>
__global__ void __launch_bounds__(32 * kWarps)
    qmatvec(const uint8_t* w, int64_t n, int64_t k, const int8_t* xq, const float* xd,
            const float* xs, int64_t m, Out y, int split) {
  using B = Blocks<T>;
  const Share sh(n, split, y.swiglu);
  const int lane = threadIdx.x % 32;
  const int64_t r0 = int64_t(blockIdx.y) * MR;
  constexpr int per = B::kValues / 16;
  const int64_t nb = k / B::kValues, groups = sh.live ? nb * per : 0;
  const uint8_t* wr = w + (sh.live ? sh.row : 0) * nb * B::kBytes;
  // The K-quants, with fewer groups in flight per lane, stream faster with their row
  // prefetched into L2 first (while the kernel before finishes); the 32-value types slower
  // (bench/RESULTS.md, "bf16 matvec streaming").
  if constexpr (B::kValues == 256)
    if (sh.live) prefetch_l2(wr, nb * B::kBytes, sh.part * 32 + lane, 32 * split);
  pdl_wait();
  pdl_trigger();
  float acc[MR] = {};
  // Unrolled so that the loads of several groups are in flight at once (see fmatvec).
#pragma unroll(kDepth)
  for (int64_t gi = lane + 32 * sh.part; gi < groups; gi += 32 * split) {
    const int64_t bi = gi / per;
    const int g = int(gi % per);
    float D, M;
    const Group u = B::unpack(wr + bi * B::kBytes, g, D, M);
#pragma unroll
    for (int r = 0; r < MR; ++r) {
      if (r0 + r >= m) break;
      const int4 q = *reinterpret_cast<const int4*>(xq + (r0 + r) * k + gi * 16);
      const int xv[4] = {q.x, q.y, q.z, q.w};
      acc[r] += group_share<B>(u, D, M, xv, xd[(r0 + r) * nb + bi],
                               B::kValues == 256 ? 0.f : xs[(r0 + r) * nb + bi], g);
    }
  }
  finish(acc, sh, r0, m, y);
}

// ---- the staged tensor-core matvec -----------------------------------------------------
// qmatvec's lanes read a block's bytes 2 at a time where blocks are not 16-byte aligned
// (q8_0's 34, q6_k's 210), each load touching many lines, and with several activation rows
// each lane loads every row's 16 bytes again for each weight row. qmma stages instead: a
// thread block takes 8 weight rows (the n of m16n8k16 int8 products, the activation rows
// being its m, rows 8-15 zero) and its warps take turns over k in stages of kStageValues
// values. A warp copies a stage of the 8 weight rows (each from the 16-byte segment it starts
// in) and of the activation rows with their block scales into shared memory with cp.async,
// the next stage's copy in flight while it multiplies this one. Its lanes unpack the stage's
// 128 (row, group)s into shared memory (every group decoded once), then the warp multiplies
// them, 4 groups of both operands a ldmatrix: a block of 32 sums its two groups' products in
// the tensor core and is scaled in f32 (D d_x s, as group_share); a K-quant block sums its
// groups' products times their integer scales in int32 and scales once, as ggml's dots do.
constexpr int kTileRows = 8;
constexpr int kStageValues = 256;
// Warps of a qmma block: 8 stream more at once than 4 (more stages in flight an SM; 1.1 B
// q4_k batch-8 decode, bench/RESULTS.md "fewer kernels between the products").
constexpr int kQmmaWarps = 8;

template <DType T>
struct Stage {
  using B = Blocks<T>;
  static constexpr bool kK = B::kValues == 256;
  static constexpr int kBlocks = kStageValues / B::kValues, kGroups = kStageValues / 16;
  // 16-byte segments a row's stage can touch, starting anywhere in the first, and the
  // (lane's share of) copies of the 8 rows' segments.
  static constexpr int kSegs = (kBlocks * B::kBytes + 15) / 16 + 1;
  static constexpr int kSlots = (kTileRows * kSegs + 31) / 32;
  // Row strides in shared memory: 20 words past a multiple of 32 for the weights (the
  // unpacking lanes read 8 rows at once), 4 for what ldmatrix reads (8 rows of 16 bytes).
  static constexpr int kStride = (kSegs * 4 + (20 - kSegs * 4 % 32 + 32) % 32) * 4;
  static constexpr int kRow = kStageValues + 16;
  struct Buf {
    uint8_t w[kTileRows][kStride];
    int8_t x[kTileRows][kRow];
    float d[kTileRows][kBlocks];  // the activation blocks' scales (d_x)
    float s[kTileRows][kBlocks];  // and sums (blocks of 32 with minimums)
  };
  // A block's shared memory: each warp's buffers (two: the next stage's copy in flight; one
  // where no warp takes a second stage), its stage's groups unpacked with their scales (D, M
  // a block; K-quants: sc and mn a group as two int16), the warps' sums.
  template <int kBufs>
  struct Smem {
    Buf buf[kQmmaWarps][kBufs];
    int8_t units[kQmmaWarps][kTileRows][kRow];
    float D[kQmmaWarps][kTileRows][kBlocks], M[kQmmaWarps][kTileRows][kBlocks];
    int scm[kQmmaWarps][kTileRows][kGroups];
    float part[kQmmaWarps][32][2];
  };
};

// kBufs = 1 (launch_qmma's choice where every warp takes at most one stage) leaves room for
// more blocks an SM.
template <DType T, int kBufs>
__global__ void __launch_bounds__(32 * kQmmaWarps)
    qmma(const uint8_t* w, int64_t n, int64_t k, const int8_t* xq, const float* xd, const float* xs,
         int64_t m, Out y) {
  using B = Blocks<T>;
  using S = Stage<T>;
  constexpr bool kK = S::kK;
  constexpr int per = B::kValues / 16;  // groups a block
  extern __shared__ __align__(16) uint8_t smem[];
  auto& sm = *reinterpret_cast<typename S::template Smem<kBufs>*>(smem);
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, q = lane % 4;
  const int64_t nb = k / B::kValues, row_bytes = nb * B::kBytes;
  const int64_t stages = (nb + S::kBlocks - 1) / S::kBlocks, xblocks = k / (kK ? 256 : 32);
  const int64_t r0 = int64_t(blockIdx.y) * kTileRows;  // the first activation row
  const int rows = int(m - r0 < kTileRows ? m - r0 : kTileRows);
  const uint8_t* end = w + n * row_bytes;
  // Tile row t's weight row (null past the product's); with swiglu a column's gate and up
  // rows alternate.
  auto row_of = [&](int t) -> const uint8_t* {
    int64_t r = int64_t(blockIdx.x) * kTileRows + t;
    if (y.swiglu) {
      const int64_t col = int64_t(blockIdx.x) * (kTileRows / 2) + t / 2;
      if (col >= n / 2) return nullptr;
      r = col + (t % 2) * (n / 2);
    }
    return r < n ? w + r * row_bytes : nullptr;
  };
  // The lane's copies of the weight stages: segment j of tile row t, slot by slot.
  const uint8_t* from[S::kSlots];
  int seg_at[S::kSlots];
#pragma unroll
  for (int u = 0; u < S::kSlots; ++u) {
    const int i = lane + 32 * u, t = i / S::kSegs;
    from[u] = i < kTileRows * S::kSegs ? row_of(t) : nullptr;
    seg_at[u] = i % S::kSegs;
  }
  constexpr int64_t kStageBytes = int64_t(S::kBlocks) * B::kBytes;
  // Stage st of the 8 weight rows into buffer b: every segment it touches (past the
  // tensor's end zero-filled).
  auto issue_w = [&](int64_t st, int b) {
    const int64_t last =
        (st + 1) * S::kBlocks < nb ? kStageBytes : (nb - st * S::kBlocks) * B::kBytes;
#pragma unroll
    for (int u = 0; u < S::kSlots; ++u) {
      const int i = lane + 32 * u;
      if (i >= kTileRows * S::kSegs) break;
      const uint8_t* first = from[u] + st * kStageBytes;
      const uint8_t* seg =
          reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(first) & ~uintptr_t(15)) +
          16 * seg_at[u];
      const int bytes = from[u] && seg < first + last ? int(end - seg < 16 ? end - seg : 16) : 0;
      cp_async16(&sm.buf[warp][b].w[i / S::kSegs][16 * seg_at[u]], bytes ? seg : w, bytes);
    }
  };
  // And of the activation rows (those the product has) with their block scales.
  auto issue_x = [&](int64_t st, int b) {
    const int64_t v0 = st * kStageValues, vn = k - v0 < kStageValues ? k - v0 : kStageValues;
    constexpr int kRowSegs = kStageValues / 16;
    for (int i = lane; i < rows * kRowSegs; i += 32) {
      const int r = i / kRowSegs, j = i % kRowSegs;
      const bool in = 16 * j < vn;
      cp_async16(&sm.buf[warp][b].x[r][16 * j], xq + (r0 + r) * k + v0 + (in ? 16 * j : 0), in);
    }
    const int64_t x0 = st * S::kBlocks;
    for (int i = lane; i < rows * S::kBlocks; i += 32) {
      const int r = i / S::kBlocks, j = i % S::kBlocks;
      const bool in = x0 + j < xblocks;
      const int64_t at = (r0 + r) * xblocks + x0 + (in ? j : 0);
      cp_async4(&sm.buf[warp][b].d[r][j], xd + at, in);
      if constexpr (!kK && B::kHasMin) cp_async4(&sm.buf[warp][b].s[r][j], xs + at, in);
    }
  };
  int64_t st = warp;
  if (st < stages) issue_w(st, 0);  // weights: no kernel before writes them
  cp_async_commit();
  pdl_wait();
  pdl_trigger();
  if (st < stages) issue_x(st, 0);
  cp_async_commit();
  const bool has_x = g < rows;
  const uint8_t* wrow = row_of(g);  // the row this lane unpacks
  float acc[2] = {};
  auto& units = sm.units[warp];
  for (int b = 0; st < stages; st += kQmmaWarps, b ^= kBufs - 1) {
    if (kBufs == 2 && st + kQmmaWarps < stages) {
      issue_w(st + kQmmaWarps, b ^ 1);
      issue_x(st + kQmmaWarps, b ^ 1);
    }
    cp_async_commit();  // (maybe empty) so that the wait below is "all but the newest"
    cp_async_wait_prior();
    __syncwarp();
    const typename S::Buf& u = sm.buf[warp][b];
    const int groups =
        int(nb - st * S::kBlocks < S::kBlocks ? nb - st * S::kBlocks : S::kBlocks) * per;
    const uint8_t* row = &u.w[g][reinterpret_cast<uintptr_t>(wrow + st * kStageBytes) % 16];
#pragma unroll
    for (int i = 0; i < S::kGroups / 4; ++i) {  // lane (g, q): groups q, q + 4, ... of row g
      const int gi = q + 4 * i;
      if (gi >= groups) break;
      float D, M;
      const Group p = B::unpack(row + gi / per * B::kBytes, gi % per, D, M);
      *reinterpret_cast<int4*>(&units[g][16 * gi]) = make_int4(p.v[0], p.v[1], p.v[2], p.v[3]);
      if (gi % per == 0) sm.D[warp][g][gi / per] = D, sm.M[warp][g][gi / per] = M;
      if constexpr (kK) sm.scm[warp][g][gi] = (p.sc & 0xffff) | (p.mn << 16);
    }
    __syncwarp();
    int isum[2] = {}, msum[2] = {};  // K-quants: sc (products) and mn (activation sums)
#pragma unroll
    for (int s4 = 0; s4 < S::kGroups; s4 += 4) {
      if (s4 >= groups) break;
      uint32_t bw[4], ax[4];
      ldmatrix4<false>(bw, &units[lane % 8][16 * (s4 + lane / 8)]);
      ldmatrix4<false>(ax, &u.x[lane % 8][16 * (s4 + lane / 8)]);
#pragma unroll
      for (int i = 0; i < 4; ++i) ax[i] = has_x ? ax[i] : 0u;
      if constexpr (kK) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          int c[4] = {};
          mma_s8(c, ax[i], bw[i]);
          int sum = 0;
          if constexpr (B::kHasMin) {  // the group's activation sum, for the mins
            sum = dp4a(int(ax[i]), 0x01010101, 0);
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
          }
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int e = sm.scm[warp][2 * q + j][s4 + i];
            isum[j] += int(int16_t(e & 0xffff)) * c[j];
            if constexpr (B::kHasMin) msum[j] += (e >> 16) * sum;
          }
        }
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // two blocks of 32
          int c[4] = {};
          mma_s8(c, ax[2 * h], bw[2 * h]);
          mma_s8(c, ax[2 * h + 1], bw[2 * h + 1]);
          const int blk = s4 / 2 + h;
          if (has_x)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const float D = sm.D[warp][2 * q + j][blk];
              acc[j] += D * u.d[g][blk] * float(c[j]);
              if constexpr (B::kHasMin) acc[j] -= sm.M[warp][2 * q + j][blk] * u.s[g][blk];
            }
        }
      }
    }
    if constexpr (kK)
      if (has_x)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          acc[j] += u.d[g][0] * (sm.D[warp][2 * q + j][0] * float(isum[j]) -
                                 sm.M[warp][2 * q + j][0] * float(msum[j]));
    __syncwarp();
  }
  auto& part = sm.part;
  part[warp][lane][0] = acc[0];
  part[warp][lane][1] = acc[1];
  __syncthreads();
  if (warp != 0 || !has_x) return;
  float v[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    v[j] = 0;
    for (int w4 = 0; w4 < kQmmaWarps; ++w4) v[j] += part[w4][lane][j];
  }
  const int64_t xr = r0 + g;
  if (y.swiglu) {  // tile rows 2 q, 2 q + 1: the gate and up rows of column q
    const int64_t col = int64_t(blockIdx.x) * (kTileRows / 2) + q;
    if (col < n / 2) y.put(xr * y.ld + col, ewop::Silu{}(v[0]) * v[1]);
  } else {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t r = int64_t(blockIdx.x) * kTileRows + 2 * q + j;
      if (r < n) y.put(xr * y.ld + r, v[j]);
    }
  }
}

// Float weights: lanes take 8 values at a time (16 bytes of f16 / bf16, 32 of f32), kLoads
// of them loaded before any is used: one load in flight per lane leaves a warp waiting on
// memory latency, and decode has too few rows (warps) to hide it otherwise (8 measured no
// faster on the H100). No L2 prefetch ahead of the loads: it slowed every bf16 product
// (bench/RESULTS.md, "bf16 matvec streaming").
template <class W>
struct Vec8 {
  uint4 v[sizeof(W) == 4 ? 2 : 1];
};

template <class W>
__device__ __forceinline__ Vec8<W> load8(const W* p) {
  Vec8<W> r;
#pragma unroll
  for (int j = 0; j < int(sizeof(r.v) / 16); ++j)
    r.v[j] = load_once(reinterpret_cast<const uint4*>(p) + j);
  return r;
}

constexpr int kLoads = 4;

template <class W, int MR>
__global__ void __launch_bounds__(32 * kWarps)
    fmatvec(const W* w, int64_t n, int64_t k, const float* x, int64_t m, Out y, int split) {
  const Share sh(n, split, y.swiglu);
  const int lane = threadIdx.x % 32;
  const int64_t r0 = int64_t(blockIdx.y) * MR;
  const W* wr = w + (sh.live ? sh.row : 0) * k;
  pdl_wait();
  pdl_trigger();
  float acc[MR] = {};
  const bool vec = k % 8 == 0 && aligned16(w) && aligned16(x);
  const int64_t kk = sh.live ? k : 0, k8 = vec ? kk : 0;
  // The row's chunks of 256 values dealt round-robin to its split warps (an even share
  // even where k is only a few chunks), kLoads of a warp's chunks loaded at a time.
  const int64_t stride = 256 * int64_t(split);
  for (int64_t i0 = 8 * lane + 256 * sh.part; i0 < k8; i0 += stride * kLoads) {
    Vec8<W> raw[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (i0 + stride * u < k8) raw[u] = load8(wr + i0 + stride * u);
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t i = i0 + stride * u;
      if (i >= k8) break;
      const W* h = reinterpret_cast<const W*>(raw[u].v);
      float wv[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) wv[j] = float(load(h[j]));
#pragma unroll
      for (int r = 0; r < MR; ++r) {
        if (r0 + r >= m) break;
        const float4* xr = reinterpret_cast<const float4*>(x + (r0 + r) * k + i);
        const float4 a = xr[0], b = xr[1];
        const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[r] = fmaf(wv[j], xv[j], acc[r]);
      }
    }
  }
  for (int64_t i = k8 + lane + 32 * sh.part; i < kk; i += 32 * int64_t(split)) {
    const float wv = float(load(wr[i]));
#pragma unroll
    for (int r = 0; r < MR; ++r)
      if (r0 + r < m) acc[r] = fmaf(wv, x[(r0 + r) * k + i], acc[r]);
  }
  finish(acc, sh, r0, m, y);
}

// bf16 weights and 2 to 8 activation rows (a batch's decode) on the tensor cores: the fp32
// kernel above reads 8 rows of x per weight read, which leaves it bound by the loads of x.
// A block takes 16 weight rows, its kSplitWarps warps a share of k each, and one
// m16n8k16 product per 16 k multiplies the 16 rows by the (up to) 8 activation rows. x is
// f32: each value enters as three bf16 parts (head, middle, tail: 24 bits, all of f32's),
// so the products are exact and only the f32 accumulation rounds, as in fmatvec.
// The k order within a chunk of 32 is permuted alike in both operands (a dot product does
// not care): lane (g, t) of step s holds the elements 8 t + 4 s + {0, 1} (fragment k 2 t,
// 2 t + 1) and 8 t + 4 s + {2, 3} (k 2 t + 8, 2 t + 9), so each lane loads 16 contiguous
// bytes of weight rows g and g + 8 and 32 of activation row g per chunk.
constexpr int kSplitWarps = 8;
constexpr int kChunkLoads = 4;  // chunks of 32 a lane loads before it multiplies

__device__ __forceinline__ void split3(const float (&x)[8], uint32_t (&h)[3][4]) {
  float r[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) r[j] = x[j];
#pragma unroll
  for (int part = 0; part < 3; ++part)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      __nv_bfloat162 b = __floats2bfloat162_rn(r[2 * j], r[2 * j + 1]);
      h[part][j] = *reinterpret_cast<uint32_t*>(&b);
      r[2 * j] -= __low2float(b);
      r[2 * j + 1] -= __high2float(b);
    }
}

__global__ void __launch_bounds__(32 * kSplitWarps)
    bmatvec(const __nv_bfloat16* w, int64_t n, int64_t k, const float* x, int64_t m, Out y) {
  __shared__ float part[kSplitWarps][32][4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t chunks = k / 32;
  // Tile rows g and g + 8: weight rows n0 + g and n0 + g + 8, or with swiglu the gate row
  // j0 + g and its up row n / 2 + j0 + g (one thread then holds both products).
  const int64_t n0 = int64_t(blockIdx.x) * (y.swiglu ? 8 : 16), half = n / 2;
  const int64_t ra = n0 + g, rb = y.swiglu ? half + n0 + g : n0 + g + 8;
  const bool row_a = y.swiglu ? ra < half : ra < n, row_b = y.swiglu ? row_a : rb < n,
             has_x = g < m;
  const __nv_bfloat16* wa = w + ra * k + 8 * t;
  const __nv_bfloat16* wb = w + rb * k + 8 * t;
  const float* xr = x + g * k + 8 * t;
  pdl_wait();
  pdl_trigger();
  float c[4] = {};
  for (int64_t c0 = warp; c0 < chunks; c0 += kSplitWarps * kChunkLoads) {
    uint4 ua[kChunkLoads], ub[kChunkLoads];
    float4 xa[kChunkLoads], xb[kChunkLoads];
#pragma unroll
    for (int u = 0; u < kChunkLoads; ++u) {
      const int64_t ch = c0 + int64_t(u) * kSplitWarps;
      const bool in = ch < chunks;
      ua[u] = in && row_a ? __ldg(reinterpret_cast<const uint4*>(wa + ch * 32)) : uint4{};
      ub[u] = in && row_b ? __ldg(reinterpret_cast<const uint4*>(wb + ch * 32)) : uint4{};
      const float4* xp = reinterpret_cast<const float4*>(xr + ch * 32);
      xa[u] = in && has_x ? xp[0] : float4{};
      xb[u] = in && has_x ? xp[1] : float4{};
    }
#pragma unroll
    for (int u = 0; u < kChunkLoads; ++u) {
      const float xv[8] = {xa[u].x, xa[u].y, xa[u].z, xa[u].w, xb[u].x, xb[u].y, xb[u].z, xb[u].w};
      uint32_t h[3][4];
      split3(xv, h);
      const uint32_t a0[4] = {ua[u].x, ub[u].x, ua[u].y, ub[u].y};  // step 0
      const uint32_t a1[4] = {ua[u].z, ub[u].z, ua[u].w, ub[u].w};  // step 1
#pragma unroll
      for (int part3 = 0; part3 < 3; ++part3) {
        mma<__nv_bfloat16>(c, a0, h[part3][0], h[part3][1]);
        mma<__nv_bfloat16>(c, a1, h[part3][2], h[part3][3]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) part[warp][lane][i] = c[i];
  __syncthreads();
  if (warp != 0) return;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = 0;
#pragma unroll
    for (int w8 = 0; w8 < kSplitWarps; ++w8) v[i] += part[w8][lane][i];
  }
  // c0, c1: tile row g, activation rows 2 t, 2 t + 1; c2, c3: tile row g + 8.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t xrow = 2 * t + (i % 2);
    if (xrow >= m) continue;
    if (y.swiglu) {
      if (i < 2 && row_a) y.put(xrow * y.ld + ra, ewop::Silu{}(v[i]) * v[i + 2]);
    } else {
      const int64_t row = i >= 2 ? rb : ra;
      if (row < n) y.put(xrow * y.ld + row, v[i]);
    }
  }
}

// Launches f(std::integral_constant<int, MR>) for the row tile that fits m rows.
template <class F>
void by_rows(int64_t m, F&& f) {
  if (m <= 1) return f(std::integral_constant<int, 1>{});
  if (m <= 2) return f(std::integral_constant<int, 2>{});
  if (m <= 4) return f(std::integral_constant<int, 4>{});
  f(std::integral_constant<int, 8>{});
}

// Whether bmatvec takes these rows: 2 to 8 of them (one row streams faster through fmatvec:
// bench/RESULTS.md, "LLM on the GPU"), k in whole chunks of 32, 16-byte
// aligned operands.
bool use_mma(int64_t m, int64_t k, const void* w, const void* x) {
  return m >= 2 && m <= 8 && k % 32 == 0 && aligned16(w) && aligned16(x);
}

// Whether qmma takes a quantized product of m rows (settings().cuda_qmatvec; k in steps of 64
// values): by default from 8 rows; with fewer qmatvec is faster (its lanes keep several
// groups' loads in flight with no shared-memory round trip; bench/RESULTS.md, "qmma, the staged
// int8 tensor-core matvec").
constexpr int64_t kQmmaRows = 8;
bool use_qmma(int64_t m, int64_t k) {
  const std::string& how = settings().cuda_qmatvec;
  if (how != "auto" && how != "mma" && how != "dp4a")
    fail<ValueError>("RLX_CUDA_QMATVEC", "expected auto, mma or dp4a, got ", how);
  if (how == "dp4a" || k % 64 != 0) return false;
  return how == "mma" || m >= kQmmaRows;
}

// qmma over the tiles, with one stage buffer a warp where no warp takes two stages (k of
// at most kQmmaWarps stages: 2048 values).
template <DType T>
void launch_qmma(dim3 tiles, int64_t k, cudaStream_t s, const uint8_t* wp, int64_t n, const Act& a,
                 int64_t m, Out yp) {
  auto go = [&](auto bufs) {
    constexpr int kBufs = decltype(bufs)::value;
    constexpr size_t bytes = sizeof(typename Stage<T>::template Smem<kBufs>);
    static const bool sized = [] {  // past the 48 KiB a launch gets unasked
      RLX_CUDA(cudaFuncSetAttribute(qmma<T, kBufs>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(bytes)));
      return true;
    }();
    (void)sized;
    launch_pdl(qmma<T, kBufs>, tiles, 32 * kQmmaWarps, bytes, s, wp, n, k, a.q, a.d, a.s, m, yp);
  };
  const int64_t stages = (k + kStageValues - 1) / kStageValues;
  if (stages <= kQmmaWarps)
    go(std::integral_constant<int, 1>{});
  else
    go(std::integral_constant<int, 2>{});
}

// Warps per weight row (Share): doubled while the product's warps still fit the device in
// one round of its resident warps and each share keeps `least` or more of k (float rows:
// 2048 values; quantized ones, whose lanes take 16 values a group, 512 and at most 2 warps);
// at most half a block's warps where the rows pair up (swiglu). Measured on 1.1 B and 7 B
// decode (bench/RESULTS.md, "bf16 matvec streaming").
int split_for(int64_t n, int64_t k, bool pairs, bool quantized) {
  const int64_t fill = int64_t(sm_count()) * 64, least = quantized ? 512 : 2048;
  const int most = std::min(pairs ? kWarps / 2 : kWarps, quantized ? 2 : kWarps);
  int split = 1;
  while (split < most && n * split * 2 <= fill && k / (split * 2) >= least) split *= 2;
  return split;
}

// x's rows normalised by the rms_norm kernel: where a matvec path cannot apply
// fused_quant_matmul's norm itself.
Tensor normalized(const Tensor& x, const Tensor& g, double eps, int64_t m, int64_t k,
                  cudaStream_t s, DType out = DType::f32) {
  Tensor y = Tensor::empty(out, {m, k}, x.device());
  rms_norm_into(x.reshape({m, k}), g, eps, y, s);
  return y;
}

// x [m, k] f32 times the weights into y [m, n] f32 (plus its addend; y.swiglu: [m, n / 2]),
// after the rms_norm of x with scale g where g is defined.
void matvec(Tensor x, const Tensor& w, bool tiled, Out yp, int64_t m, int64_t n, int64_t k,
            const Tensor& g, double eps, cudaStream_t s) {
  const DType wt = w.dtype();
  const auto* wp = static_cast<const uint8_t*>(w.data());
  if (tiled) {  // q8_0 / q4_k in tiles16 (quant_tiles.cu)
    const float* gp = g.defined() ? g.data_as<float>() : nullptr;
    // One row quantizes in the product (settings().cuda_tile_fuse).
    if (m == 1 && settings().cuda_tile_fuse &&
        tiled_matvec_row(wt, wp, n, k, x.data_as<float>(), gp, eps, yp, s))
      return;
    const Act a = quantize_act(x, wt, m, k, s, gp, eps);
    tiled_matvec(wt, wp, n, k, a.q, a.d, a.s, m, yp, s);
    return;
  }
  const bool mma = wt == DType::bf16 && use_mma(m, k, wp, x.data());
  // The quantizer applies the norm before the integer dots; float weights read normalised
  // rows.
  if (g.defined() && !is_quantized(wt)) x = normalized(x, g, eps, m, k, s);
  const auto* xp = static_cast<const float*>(x.data());
  const int split = split_for(n, k, yp.swiglu, is_quantized(wt)), rows = kWarps / split;
  const int64_t outs = yp.swiglu ? n / 2 : n, per_block = yp.swiglu ? rows / 2 : rows;
  by_rows(m, [&](auto mr) {
    constexpr int MR = decltype(mr)::value;
    const dim3 grid(unsigned((outs + per_block - 1) / per_block), unsigned((m + MR - 1) / MR));
    if (is_quantized(wt)) {
      const float* gp = g.defined() ? g.data_as<float>() : nullptr;
      visit_quant(wt, [&](auto t) {
        constexpr DType T = decltype(t)::value;
        if (use_qmma(m, k)) {
          const Act a = quantize_act(x, wt, m, k, s, gp, eps);
          const int64_t per_tile = yp.swiglu ? kTileRows / 2 : kTileRows;  // outputs a block
          const dim3 tiles(unsigned((outs + per_tile - 1) / per_tile),
                           unsigned((m + kTileRows - 1) / kTileRows));
          launch_qmma<T>(tiles, k, s, wp, n, a, m, yp);
          return;
        }
        const Act a = quantize_act(x, wt, m, k, s, gp, eps);
        launch_pdl(qmatvec<T, MR, kQuantDepth<T>>, grid, 32 * kWarps, 0, s, wp, n, k, a.q, a.d, a.s,
                   m, yp, split);
      });
    } else if (wt == DType::f16) {
      launch_pdl(fmatvec<__half, MR>, grid, 32 * kWarps, 0, s, reinterpret_cast<const __half*>(wp),
                 n, k, xp, m, yp, split);
    } else if (mma) {
      launch_pdl(bmatvec, unsigned(yp.swiglu ? (outs + 7) / 8 : (n + 15) / 16), 32 * kSplitWarps, 0,
                 s, reinterpret_cast<const __nv_bfloat16*>(wp), n, k, xp, m, yp);
    } else if (wt == DType::bf16) {
      launch_pdl(fmatvec<__nv_bfloat16, MR>, grid, 32 * kWarps, 0, s,
                 reinterpret_cast<const __nv_bfloat16*>(wp), n, k, xp, m, yp, split);
    } else {
      launch_pdl(fmatvec<float, MR>, grid, 32 * kWarps, 0, s, reinterpret_cast<const float*>(wp), n,
                 k, xp, m, yp, split);
    }
  });
  RLX_CUDA_LAUNCHED("quant_matmul");
}

// Many rows (prefill): on the tensor cores in bf16 with f32 accumulation, as PyTorch runs
// bf16 models: f16 / bf16 weights as they are, quantized ones decoded to bf16 once per call
// (a 512-row product spends far longer multiplying than decoding), the activations rounded
// to the weights' 16-bit type. f32 weights keep an f32 GEMM (SGEMM's accuracy, 3xTF32).
// t as a [rows, cols] tensor of dtype dt: itself, or a cast copy (a fresh allocation, so
// aligned for the kernels' 16-byte loads).
Tensor as_dtype(const Tensor& t, DType dt, std::vector<int64_t> shape, cudaStream_t s) {
  if (t.dtype() == dt) return t.reshape(shape);
  Tensor c = Tensor::empty(dt, shape, t.device());
  cast_into(t.reshape(shape), c, s);
  return c;
}

// The dtype of the GEMM's operands for weights of dtype w.
DType operand_dtype(DType w) { return is_quantized(w) ? DType::bf16 : w; }

// x is the op's input as it came (any float dtype; rms_norm's output already in the operands'
// dtype), cast once to the operands' dtype. An addend of y's shape (f32) joins in the GEMM's
// epilogue.
void gemm_path(const Tensor& x, const Tensor& w, bool tiled, const Tensor& y, int64_t m, int64_t n,
               int64_t k, cudaStream_t s, const Tensor* addend = nullptr) {
  Tensor wh = w;
  if (is_quantized(w.dtype())) {
    wh = Tensor::empty(operand_dtype(w.dtype()), {n, k}, x.device());
    if (tiled)
      untile_bf16(w.dtype(), static_cast<const uint8_t*>(w.data()), n, k,
                  wh.data_as<__nv_bfloat16>(), s);
    else
      dequantize_into(w, nullptr, wh, nullptr, s);
  }
  const Tensor xh = as_dtype(x, wh.dtype(), {m, k}, s);
  const Tensor c = addend ? addend->reshape({1, m, n}) : Tensor();
  batched_gemm(xh.reshape({1, m, k}), false, wh.reshape({1, n, k}), true, y.reshape({1, m, n}), 1.0,
               s, addend ? &c : nullptr);
}

// y[i] += c[i % cn]: the addend after a GEMM.
__global__ void add_repeating(float* y, const float* c, int64_t total, int64_t cn) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] += c[i % cn];
}

// The operands of quant_matmul and fused_quant_matmul: x [..., k], the norm's scale
// (fused, norm rms_norm), w [n, k], the addend.
struct Operands {
  Tensor x, g, w, c;
  double eps = 0;
  bool swiglu = false;
  bool tiled = false;  // w in tiles16
};

void run_product(const Operands& op, const Tensor& out, cudaStream_t s) {
  const Tensor& w = op.w;
  const int64_t n = w.shape()[0], k = w.shape()[1], width = op.swiglu ? n / 2 : n;
  const int64_t m = k ? op.x.numel() / k : out.numel() / std::max<int64_t>(width, 1);
  if (m * width == 0) return;
  // The kernels give f32 products; the 16-byte loads of the K-quant blocks need their start
  // aligned (a fresh allocation is).
  const Tensor y = out.dtype() == DType::f32 ? out.reshape({m, width})
                                             : Tensor::empty(DType::f32, {m, width}, out.device());
  // The addend repeats every cn outputs (product_supported); it joins the f32 products
  // before their one rounding to a 16-bit output.
  const Tensor c =
      op.c.defined() ? as_dtype(op.c.contiguous(), DType::f32, {op.c.numel()}, s) : Tensor();
  const Out o{static_cast<float*>(y.data()),
              c.defined() ? static_cast<const float*>(c.data()) : nullptr,
              c.defined() ? std::max<int64_t>(c.numel(), 1) : 1, width, op.swiglu};
  const Tensor g = op.g.defined() ? as_dtype(op.g.contiguous(), DType::f32, {k}, s) : Tensor();
  const Tensor wa = aligned16(w.data()) ? w : w.clone();
  if (k > 0 && m <= matvec_rows(w.dtype())) {
    matvec(as_dtype(op.x, DType::f32, {m, k}, s), wa, op.tiled, o, m, n, k, g, op.eps, s);
  } else {  // a GEMM (or, for k = 0, zeros), then swiglu and the addend over its output
    // bf16 weights (as PyTorch runs bf16 models) leave the halves of swiglu in bf16: the
    // widest product of a prefill step, written and read once each at half the bytes.
    const DType td = op.swiglu && w.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
    const Tensor t = op.swiglu ? Tensor::empty(td, {m, n}, out.device()) : y;
    // An addend of the whole output joins in the GEMM's epilogue; others repeat (below).
    const bool epilogue = o.c && !op.swiglu && k > 0 && o.cn == m * width;
    if (k == 0)
      fill(t, 0, s);
    else
      gemm_path(g.defined() ? normalized(as_dtype(op.x, DType::f32, {m, k}, s), g, op.eps, m, k, s,
                                         operand_dtype(w.dtype()))
                            : op.x,
                wa, op.tiled, t, m, n, k, s, epilogue ? &c : nullptr);
    if (op.swiglu) swiglu_into(t, y, s);
    if (o.c && !epilogue)
      add_repeating<<<blocks_for(m * width), kThreads, 0, s>>>(o.y, o.c, m * width, o.cn);
  }
  RLX_CUDA_LAUNCHED("quant_matmul");
  if (y.data() != out.data()) cast_into(y, out.reshape({m, width}), s);
}

bool tiled(const Attrs& a) { return a.get_string("layout") == quant::kTiles16; }

void quant_matmul_kernel(const KernelContext& ctx, Ins in, Outs out) {
  Operands op{in[0], Tensor(), in[1], in.size() == 3 ? in[2] : Tensor()};
  op.tiled = tiled(ctx.attrs);
  run_product(op, out[0], stream_of(ctx));
}

void fused_quant_matmul_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const bool norm = ctx.attrs.get_string("norm") == "rms_norm";
  const size_t wi = norm ? 2 : 1;
  Operands op{in[0], norm ? in[1] : Tensor(), in[wi], in.size() > wi + 1 ? in[wi + 1] : Tensor()};
  op.eps = ctx.attrs.get_float("epsilon");
  op.swiglu = ctx.attrs.get_string("activation") == "swiglu";
  op.tiled = tiled(ctx.attrs);
  run_product(op, out[0], stream_of(ctx));
}

// Plain weights or tiles16 and f32 / f16 / bf16 activations (f64 takes the decomposition, or
// for tiles the CPU kernel); an addend that repeats over the output (backend/addend.h). wi:
// where w is among the inputs.
bool product_supported(const KernelQuery& q, size_t wi, bool swiglu = false) {
  const DType x = q.inputs[0].dtype, w = q.inputs[wi].dtype;
  if (q.inputs.size() > wi + 1 && !addend_repeats(q.inputs[wi + 1], q.outputs[0])) return false;
  // Tiles with swiglu pair a gate group of 16 rows with an up group: halves of whole groups.
  const Dim& n = q.inputs[wi].shape[0];
  if (tiled(q.attrs) && swiglu && !(n.is_static() && n.value() % 32 == 0)) return false;
  return (q.attrs.get_string("layout") == "rows" || tiled(q.attrs)) &&
         (x == DType::f32 || x == DType::f16 || x == DType::bf16) &&
         (is_quantized(w) || w == DType::f32 || w == DType::f16 || w == DType::bf16);
}

}  // namespace

void register_quant(KernelRegistry& r) {
  add_kernel(r, "dequantize", dequantize_kernel, [](const KernelQuery& q) {
    const DType w = q.inputs[0].dtype;
    return is_quantized(w) || w == DType::f32 || w == DType::f16 || w == DType::bf16;
  });
  add_kernel(r, "quant_matmul", quant_matmul_kernel,
             [](const KernelQuery& q) { return product_supported(q, 1); });
  // The norm with quantized weights runs in the activations' quantizer (quantize_norm)
  // unless settings().decode_fusions is off (then rms_norm runs first).
  add_kernel(r, "fused_quant_matmul", fused_quant_matmul_kernel, [](const KernelQuery& q) {
    const bool norm = q.attrs.get_string("norm") == "rms_norm";
    const DType w = q.inputs[norm ? 2 : 1].dtype;
    if (norm && is_quantized(w) && !settings().decode_fusions) return false;
    return product_supported(q, norm ? 2 : 1, q.attrs.get_string("activation") == "swiglu");
  });
}

}  // namespace rlx::cuda
