// attention(q, k, v, [bias]) = softmax(q k^T * scale + bias, masked) v, fused: scores are
// never stored. One warp per query row walks the keys it can see with an online softmax
// (running max and sum, the output rescaled as the max grows); each lane holds D / 32 of
// q and of the output. Masks are aligned bottom-right as on the CPU (backend/cpu/
// attention.cpp): query i sits at key position p = i + Sk - Sq, "causal" sees j <= p,
// "sliding_window" p - window < j <= p; a row that sees no key (or only -inf scores)
// gives 0. f16 / bf16 compute in f32. Head dims up to 256.
#include <mma.h>

#include <cmath>
#include <cuda/std/limits>

#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::gpu {

namespace {

constexpr int kMaxPer = 8;  // head dim up to 32 * 8

struct Geometry {
  int64_t rows, sq, sk, d, dv;  // rows: batch entries * sq
  int64_t q_row, k_row, v_row;  // row strides
  int64_t b_row, b_col;         // bias strides over (i, j), 0 when broadcast
  Indexer<5> batch;             // out, q, k, v, bias offsets per batch entry
  double scale;
  int64_t window;  // 0: no lower limit
  bool causal;
};

template <class T, int kPer>
__global__ void attention_rows(const T* q, const T* k, const T* v, const T* bias, T* out,
                               Geometry g) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < g.rows;
       row += warps) {
    int64_t b = row / g.sq, i = row - b * g.sq;
    int64_t off[5];
    g.batch.offsets(b, off);
    const T* qr = q + off[1] + i * g.q_row;
    C qv[kPer], acc[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      int64_t c = lane + 32 * e;
      qv[e] = c < g.d ? C(load(qr[c])) * C(g.scale) : C(0);
      acc[e] = 0;
    }
    int64_t p = i + g.sk - g.sq, lo = 0, hi = g.sk;
    if (g.causal) {
      hi = p + 1 < g.sk ? (p + 1 > 0 ? p + 1 : 0) : g.sk;
      if (g.window) lo = p - g.window + 1 > 0 ? p - g.window + 1 : 0;
    }
    C m = -cuda::std::numeric_limits<C>::infinity(), l = 0;
    for (int64_t j = lo; j < hi; ++j) {
      const T* kr = k + off[2] + j * g.k_row;
      C s = 0;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        int64_t c = lane + 32 * e;
        if (c < g.d) s += qv[e] * C(load(kr[c]));
      }
      for (int w = 16; w > 0; w /= 2) s += __shfl_xor_sync(0xffffffffu, s, w);
      if (bias) s += C(load(bias[off[4] + i * g.b_row + j * g.b_col]));
      if (s == -cuda::std::numeric_limits<C>::infinity()) continue;
      C mn = s > m ? s : m;
      C corr = exp(m - mn), e_s = exp(s - mn);
      l = l * corr + e_s;
      const T* vr = v + off[3] + j * g.v_row;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        int64_t c = lane + 32 * e;
        acc[e] = acc[e] * corr + (c < g.dv ? e_s * C(load(vr[c])) : C(0));
      }
      m = mn;
    }
    T* o = out + off[0] + i * g.dv;
    C inv = l > 0 ? C(1) / l : C(0);
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      int64_t c = lane + 32 * e;
      if (c < g.dv) o[c] = store<T>(acc[e] * inv);
    }
  }
}

// ---- the tensor-core path (f16 / bf16, head dim 64 or 128, no bias) ----------------------
// FlashAttention's tiling: a block of 4 warps takes 64 query rows, walks the keys it can
// see in tiles of 64 (K and V tiles in shared memory), and keeps a running max and sum per
// row. S = Q K^T and P V are WMMA products (16x16x16, f32 accumulate); P is rounded to
// the input type for the second product, as FlashAttention does. The output accumulator
// lives in shared memory (f32) because WMMA hides which lane holds which row, and the
// per-row rescaling needs rows.

namespace wmma = nvcuda::wmma;
constexpr int kBM = 64, kBN = 64, kFlashWarps = 4;

template <int D>
constexpr size_t flash_smem(size_t elem) {
  return elem * (kBM * D + 2 * kBN * D + kBM * kBN) +
         sizeof(float) * (kBM * kBN + 2 * kBM * D + 3 * kBM);
}

template <class T, int D>
__global__ void __launch_bounds__(kFlashWarps * 32)
    flash_forward(const T* q, const T* k, const T* v, T* out, Geometry g) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + kBM * D;
  T* sV = sK + kBN * D;
  T* sP = sV + kBN * D;
  float* sS = reinterpret_cast<float*>(sP + kBM * kBN);
  float* sO = sS + kBM * kBN;
  float* sT = sO + kBM * D;
  float* sM = sT + kBM * D;  // running max, sum and this tile's rescale, per row
  float* sL = sM + kBM;
  float* sC = sL + kBM;
  const float inf = __int_as_float(0x7f800000);

  int64_t qtiles = (g.sq + kBM - 1) / kBM;
  int64_t b = blockIdx.x / qtiles, q0 = (blockIdx.x % qtiles) * kBM;
  int64_t off[5];
  g.batch.offsets(b, off);
  int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int e = tid; e < kBM * D; e += kFlashWarps * 32) {
    int64_t row = q0 + e / D;
    sQ[e] = row < g.sq ? q[off[1] + row * g.q_row + e % D] : store<T>(0.0f);
    sO[e] = 0;
  }
  for (int r = tid; r < kBM; r += kFlashWarps * 32) {
    sM[r] = -inf;
    sL[r] = 0;
  }
  // The keys some row of this block sees.
  int64_t lo = 0, hi = g.sk;
  if (g.causal) {
    int64_t last = std::min(q0 + kBM, g.sq) - 1 + g.sk - g.sq;  // the last row's position
    hi = std::max<int64_t>(0, std::min<int64_t>(g.sk, last + 1));
    if (g.window) lo = std::max<int64_t>(0, q0 + g.sk - g.sq - g.window + 1);
  }
  lo = lo / kBN * kBN;
  const float scale = float(g.scale);
  for (int64_t k0 = lo; k0 < hi; k0 += kBN) {
    __syncthreads();  // every warp is done with the last tiles
    for (int e = tid; e < kBN * D; e += kFlashWarps * 32) {
      int64_t key = k0 + e / D;
      sK[e] = key < g.sk ? k[off[2] + key * g.k_row + e % D] : store<T>(0.0f);
      sV[e] = key < g.sk ? v[off[3] + key * g.v_row + e % D] : store<T>(0.0f);
    }
    __syncthreads();
    // S (this warp's 16 rows x 64 keys) = Q K^T.
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kBN / 16];
      for (auto& a : acc) wmma::fill_fragment(a, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, sQ + warp * 16 * D + kk * 16, D);
#pragma unroll
        for (int j = 0; j < kBN / 16; ++j) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
          wmma::load_matrix_sync(fb, sK + j * 16 * D + kk * 16, D);
          wmma::mma_sync(acc[j], fa, fb, acc[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < kBN / 16; ++j)
        wmma::store_matrix_sync(sS + warp * 16 * kBN + j * 16, acc[j], kBN, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax: two lanes per row, 32 keys each.
    {
      int rl = warp * 16 + lane / 2, half = lane % 2;
      int64_t row = q0 + rl, p = row + g.sk - g.sq;
      float* srow = sS + rl * kBN;
      float m = -inf;
      for (int c = half * 32; c < half * 32 + 32; ++c) {
        int64_t key = k0 + c;
        bool seen = key < g.sk && (!g.causal || (key <= p && (!g.window || key > p - g.window)));
        float sv = seen ? srow[c] * scale : -inf;
        srow[c] = sv;
        m = fmaxf(m, sv);
      }
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      float m_old = sM[rl], m_new = fmaxf(m_old, m);
      float corr = m_new == -inf ? 1.0f : __expf(m_old - m_new);
      float sum = 0;
      for (int c = half * 32; c < half * 32 + 32; ++c) {
        float e = srow[c] == -inf ? 0.0f : __expf(srow[c] - m_new);
        T pe = store<T>(e);
        sP[rl * kBN + c] = pe;
        sum += float(load(pe));
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      __syncwarp();
      if (half == 0) {
        sM[rl] = m_new;
        sL[rl] = sL[rl] * corr + sum;
        sC[rl] = corr;
      }
    }
    __syncwarp();
    // T = P V for this warp's rows, then O = O * corr + T.
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, sP + warp * 16 * kBN + kk * 16, kBN);
        wmma::load_matrix_sync(fb, sV + kk * 16 * D + j * 16, D);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(sT + warp * 16 * D + j * 16, acc, D, wmma::mem_row_major);
    }
    __syncwarp();
    for (int e = lane; e < 16 * D; e += 32) {
      int at = warp * 16 * D + e;
      sO[at] = sO[at] * sC[warp * 16 + e / D] + sT[at];
    }
  }
  __syncwarp();
  for (int e = lane; e < 16 * D; e += 32) {
    int rl = warp * 16 + e / D;
    int64_t row = q0 + rl;
    if (row >= g.sq) continue;
    float l = sL[rl];
    out[off[0] + row * g.dv + e % D] = store<T>(l > 0 ? sO[warp * 16 * D + e] / l : 0.0f);
  }
}

template <class T, int D>
void launch_flash(const T* q, const T* k, const T* v, T* y, const Geometry& g, int64_t entries,
                  cudaStream_t s) {
  size_t smem = flash_smem<D>(sizeof(T));
  static bool raised = [&] {
    RLX_CUDA(cudaFuncSetAttribute(flash_forward<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(smem)));
    return true;
  }();
  (void)raised;
  int64_t blocks = entries * ((g.sq + kBM - 1) / kBM);
  flash_forward<T, D><<<unsigned(blocks), kFlashWarps * 32, smem, s>>>(q, k, v, y, g);
}

void attention_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& y = out[0];
  if (y.numel() == 0) return;
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  size_t r = size_t(y.rank());
  std::vector<int64_t> batch(y.shape().begin(), y.shape().end() - 2);
  Geometry g{};
  g.sq = q.shape()[q.rank() - 2];
  g.sk = k.shape()[k.rank() - 2];
  g.d = q.shape()[q.rank() - 1];
  g.dv = v.shape()[v.rank() - 1];
  int64_t entries = 1;
  for (int64_t n : batch) entries *= n;
  g.rows = entries * g.sq;
  auto with = [&](std::vector<int64_t> s, int64_t a, int64_t b) {
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  Tensor qb = q.broadcast_to(with(batch, g.sq, g.d)), kb = k.broadcast_to(with(batch, g.sk, g.d)),
         vb = v.broadcast_to(with(batch, g.sk, g.dv));
  Tensor bb = in.size() > 3 ? in[3].broadcast_to(with(batch, g.sq, g.sk)) : Tensor();
  g.q_row = qb.strides()[r - 2];
  g.k_row = kb.strides()[r - 2];
  g.v_row = vb.strides()[r - 2];
  std::vector<int64_t> zeros(r, 0);
  const std::vector<int64_t>& bs = bb.defined() ? bb.strides() : zeros;
  g.b_row = bs[r - 2];
  g.b_col = bs[r - 1];
  auto lead = [&](const std::vector<int64_t>& s) {
    return std::vector<int64_t>(s.begin(), s.end() - 2);
  };
  auto ys = lead(y.strides()), qs = lead(qb.strides()), ks = lead(kb.strides()),
       vs = lead(vb.strides()), bsl = lead(bs);
  g.batch = make_indexer<5>(batch, {&ys, &qs, &ks, &vs, &bsl});
  double scale = ctx.attrs.get_float("scale");
  g.scale = scale > 0 ? scale : 1.0 / std::sqrt(double(g.d));
  const std::string& mask = ctx.attrs.get_string("mask");
  g.causal = mask != "none";
  g.window = mask == "sliding_window" ? ctx.attrs.get_int("window") : 0;
  cudaStream_t s = stream_of(ctx);
  constexpr int kWarps = kThreads / 32;
  int grid = int(std::min<int64_t>((g.rows + kWarps - 1) / kWarps, int64_t(sm_count()) * 32));
  visit(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto p = [](const Tensor& t) {
        return t.defined() ? static_cast<const T*>(t.data()) : nullptr;
      };
      bool flash = is_half_v<T> && !bb.defined() && g.d == g.dv && (g.d == 64 || g.d == 128) &&
                   qb.strides()[r - 1] == 1 && kb.strides()[r - 1] == 1 && vb.strides()[r - 1] == 1;
      if constexpr (is_half_v<T>) {
        if (flash) {
          T* yp = static_cast<T*>(y.data());
          if (g.d == 64)
            launch_flash<T, 64>(p(qb), p(kb), p(vb), yp, g, entries, s);
          else
            launch_flash<T, 128>(p(qb), p(kb), p(vb), yp, g, entries, s);
          return;
        }
      }
      if (std::max(g.d, g.dv) <= 128)
        attention_rows<T, 4>
            <<<grid, kThreads, 0, s>>>(p(qb), p(kb), p(vb), p(bb), static_cast<T*>(y.data()), g);
      else
        attention_rows<T, kMaxPer>
            <<<grid, kThreads, 0, s>>>(p(qb), p(kb), p(vb), p(bb), static_cast<T*>(y.data()), g);
    }
  });
  RLX_CUDA_LAUNCHED("attention");
}

bool fits(const KernelQuery& q) {
  if (!is_float(q.inputs[0].dtype)) return false;
  const Shape &qs = q.inputs[0].shape, &vs = q.inputs[2].shape;
  const Dim &d = qs.back(), &dv = vs.back();
  return d.is_static() && dv.is_static() && d.value() <= 32 * kMaxPer && dv.value() <= 32 * kMaxPer;
}

}  // namespace

void register_attention(KernelRegistry& r) { add_kernel(r, "attention", attention_kernel, fits); }

}  // namespace rlx::gpu
