// rope, kv_cache_write and swiglu on CUDA, and the family's registration (as
// backend/cpu/llm.cpp).
//
// rope: one thread per rotated pair (or passed-through dim) of a head (angles: rope.cuh); where
// the rows fill the device (prefill), a block per row, its angles computed once for every
// head. The positions stay on the device. kv_cache_write:
// writes the new rows into input 0's storage and returns it (KernelFlags::makes_outputs), so a
// decode step moves S rows per head, never the cache.
#include <algorithm>
#include <cmath>

#include "backend/cuda/elementwise_ops.cuh"
#include "backend/cuda/families.h"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/llm_kernels.h"
#include "backend/cuda/rope.cuh"
#include "rlx/axes.h"

namespace rlx::cuda {

unsigned long long* position_check(const KernelContext& ctx, int64_t s, int64_t c) {
  return deferred_check(ctx.device, [op = ctx.op.name, s, c](int64_t p, int64_t b) {
    fail<ValueError>(op, "expected 0 <= pos[b] and pos[b] + S <= C = ", c, ", got pos[", b,
                     "] = ", p, " with S = ", s);
  });
}

namespace {

using Ins = std::span<const Tensor>;
using Outs = std::span<Tensor>;

// ---- rope ----------------------------------------------------------------------------

// The lead dims of x ([..., S]) and pos's strides over them (0 where pos broadcasts).
struct Lead {
  int rank = 0;
  int64_t size[kMaxDims], pos_stride[kMaxDims];

  __device__ int64_t pos_offset(int64_t l) const {
    int64_t off = 0;
    for (int i = rank - 1; i >= 0; --i) {
      off += (l % size[i]) * pos_stride[i];
      l /= size[i];
    }
    return off;
  }
};

constexpr int kRopeThreads = 64;  // small blocks: a decode step's pairs over more SMs (f64 math)

// One thread per (row, head, pair) rotates that pair, or passes one dim of the head through:
// a decode step has one row, and a thread walking every head in turn waits on each load.
template <class T, class I, class F>
__global__ void rope_rows(const T* x, const I* pos, const F* factors, T* y, Lead lead, RopeArgs a) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t per_head = a.half + (a.d - a.n_rot);  // pairs, then the dims passed through
  pdl_wait();  // launched programmatically dependent: overlaps the product's tail
  pdl_trigger();
  RLX_GRID_STRIDE(t, a.rows * a.heads * per_head) {
    const int64_t c = t % per_head, lh = t / per_head, l = lh / a.heads;
    rope_slot(a, c, x + lh * a.d, y + lh * a.d, [&](int64_t p) {
      C cv, sv;
      rope_cos_sin(a, p, double(pos[lead.pos_offset(l)]), factors, cv, sv);
      return CosSin<C>{cv, sv};
    });
  }
}

// Prefill's rows (enough to fill the device): a block per row computes the angles of its
// pairs once into shared memory (f64 exp2 and sincos cost more than the rotations) and
// rotates them in every head.
constexpr int kRopeRowThreads = 256;
template <class T, class I, class F>
__global__ void rope_rows_shared(const T* x, const I* pos, const F* factors, T* y, Lead lead,
                                 RopeArgs a) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  extern __shared__ float4 table_raw[];
  C* cs = reinterpret_cast<C*>(table_raw);  // cos of pair c at cs[c], sin at cs[half + c]
  const int64_t per_head = a.half + (a.d - a.n_rot);
  pdl_wait();
  pdl_trigger();
  for (int64_t l = blockIdx.x; l < a.rows; l += gridDim.x) {
    const double at = double(pos[lead.pos_offset(l)]);
    __syncthreads();  // the previous row's angles are no longer read
    for (int64_t c = threadIdx.x; c < a.half; c += blockDim.x)
      rope_cos_sin(a, c, at, factors, cs[c], cs[a.half + c]);
    __syncthreads();
    const T* xr = x + l * a.heads * a.d;
    T* yr = y + l * a.heads * a.d;
    for (int64_t t = threadIdx.x; t < a.heads * per_head; t += blockDim.x) {
      const int64_t h = t / per_head;
      rope_slot(a, t % per_head, xr + h * a.d, yr + h * a.d, [&](int64_t p) {
        return CosSin<C>{cs[p], cs[a.half + p]};
      });
    }
  }
}

void rope_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &x = in[0], &pos = in[1];
  const auto& xs = x.shape();
  const size_t r = xs.size();
  RopeArgs a = rope_args(ctx.attrs, xs[r - 1], ctx.attrs.get_bool("inverse"));
  a.heads = xs[r - 2];
  Lead lead;
  std::vector<int64_t> lsize(xs.begin(), xs.end() - 2);
  if (lsize.size() > size_t(kMaxDims))
    fail<NotSupported>("rope", "expected at most ", kMaxDims + 2, " dims, got ", x.type().str());
  lead.rank = int(lsize.size());
  a.rows = 1;
  for (size_t i = 0; i < lsize.size(); ++i) {
    lead.size[i] = lsize[i];
    lead.pos_stride[i] = 0;
    a.rows *= lsize[i];
  }
  const auto& ps = pos.shape();
  for (int64_t i = int64_t(ps.size()) - 1, st = 1; i >= 0; --i) {
    lead.pos_stride[lsize.size() - ps.size() + size_t(i)] = ps[size_t(i)] == 1 ? 0 : st;
    st *= ps[size_t(i)];
  }
  const int64_t threads = a.rows * a.heads * (a.half + a.d - a.n_rot);
  if (threads == 0) return;
  cudaStream_t s = stream_of(ctx);
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      auto go = [&](auto itag, auto ftag) {
        using I = typename decltype(itag)::type;
        using F = typename decltype(ftag)::type;
        const F* ff = in.size() > 2 ? static_cast<const F*>(in[2].data()) : nullptr;
        const auto* xp = static_cast<const T*>(x.data());
        const auto* pp = static_cast<const I*>(pos.data());
        auto* yp = static_cast<T*>(out[0].data());
        if (a.rows >= sm_count() && a.heads > 1) {  // prefill: a block per row
          using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
          const int blocks = int(std::min<int64_t>(a.rows, int64_t(sm_count()) * 16));
          launch_pdl(rope_rows_shared<T, I, F>, blocks, kRopeRowThreads,
                     size_t(2 * a.half) * sizeof(C), s, xp, pp, ff, yp, lead, a);
        } else {
          const int blocks = int(std::min<int64_t>((threads + kRopeThreads - 1) / kRopeThreads,
                                                   int64_t(sm_count()) * 32));
          launch_pdl(rope_rows<T, I, F>, blocks, kRopeThreads, 0, s, xp, pp, ff, yp, lead, a);
        }
      };
      auto with_factors = [&](auto itag) {
        if (in.size() < 3) return go(itag, Tag<float>{});
        visit(in[2].dtype(), [&](auto ftag) {
          if constexpr (is_float_v<typename decltype(ftag)::type>) go(itag, ftag);
        });
      };
      if (pos.dtype() == DType::i64)
        with_factors(Tag<int64_t>{});
      else
        with_factors(Tag<int32_t>{});
    }
  });
  RLX_CUDA_LAUNCHED("rope");
}

// ---- kv_cache_write ------------------------------------------------------------------

// One thread per value of new [B, S, KVH, D]; row (b, s, h) lands in row pos[b] + s of
// head h of the cache. J: the index type of the divisions (with_index).
template <class TC, class TN, class I, class J>
__global__ void cache_rows(const TN* src, const I* pos, TC* dst, J total, J s, J kvh, int64_t c,
                           J d, unsigned long long* bad) {
  pdl_wait();
  pdl_trigger();
  for (J i = J(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += J(gridDim.x) * blockDim.x) {
    const J r = i / d, e = i - r * d, rh = r / kvh, h = r - rh * kvh, b = rh / s, si = rh - b * s;
    const int64_t p = int64_t(pos[b]);
    if (p < 0 || p + s > c) {
      report_bad(bad, p, b);
      continue;
    }
    dst[((int64_t(b) * kvh + h) * c + p + si) * d + e] = store<TC>(load(src[i]));
  }
}

void kv_cache_write_kernel(const KernelContext& ctx, Ins in, Outs out) {
  const Tensor &cache = in[0], &nw = in[1], &pos = in[2];
  const auto& cs = cache.shape();
  const int64_t kvh = cs[1], c = cs[2], d = cs[3], s = nw.shape()[1];
  out[0] = cache;  // the same storage: the caller's tensor holds the new rows
  const int64_t total = nw.numel();
  if (total == 0) return;
  cudaStream_t st = stream_of(ctx);
  unsigned long long* bad = position_check(ctx, s, c);
  visit(cache.dtype(), [&](auto ct) {
    using TC = typename decltype(ct)::type;
    visit(nw.dtype(), [&](auto nt) {
      using TN = typename decltype(nt)::type;
      if constexpr (is_float_v<TC> && is_float_v<TN>) {
        auto go = [&](auto itag) {
          using I = typename decltype(itag)::type;
          const auto* src = static_cast<const TN*>(nw.data());
          const auto* pp = static_cast<const I*>(pos.data());
          auto* dst = static_cast<TC*>(cache.data());
          with_index(total, [&](auto j) {
            using J = decltype(j);
            launch_pdl(cache_rows<TC, TN, I, J>, blocks_for(total), kThreads, 0, st, src, pp, dst,
                       J(total), J(s), J(kvh), c, J(d), bad);
          });
        };
        if (pos.dtype() == DType::i64)
          go(Tag<int64_t>{});
        else
          go(Tag<int32_t>{});
      }
    });
  });
  RLX_CUDA_LAUNCHED("kv_cache_write");
}

// ---- swiglu ---------------------------------------------------------------------------

// One thread per output element of rows of f: silu of the gate half times the up half (the
// elementwise kernels' Silu, so the fused form computes what the split one does).
// I: the index type (with_index).
template <class T, class U, class I, int kV>
__global__ void swiglu_rows(const T* x, U* y, I rows, I f) {
  pdl_wait();
  pdl_trigger();
  // kV consecutive outputs a thread (16 bytes of each half where the rows allow: a prefill's
  // widest activation, where element loads ran at half the bandwidth).
  const I total = rows * f / kV;
  for (I t = I(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += I(gridDim.x) * blockDim.x) {
    const I i = t * kV, r = i / f, j = i - r * f;
    const Vec<T, kV> a = *reinterpret_cast<const Vec<T, kV>*>(x + r * 2 * f + j);
    const Vec<T, kV> b = *reinterpret_cast<const Vec<T, kV>*>(x + r * 2 * f + f + j);
    Vec<U, kV> o;
#pragma unroll
    for (int e = 0; e < kV; ++e)
      o.v[e] = store<U>(ewop::Silu{}(float(load(a.v[e]))) * float(load(b.v[e])));
    *reinterpret_cast<Vec<U, kV>*>(y + i) = o;
  }
}

void swiglu_kernel(const KernelContext& ctx, Ins in, Outs out) {
  swiglu_into(in[0], out[0], stream_of(ctx));
}

// The halves along the last axis, f32 / f16 / bf16 (others: the decomposition).
bool swiglu_supported(const KernelQuery& q) {
  const TensorType& x = q.inputs[0];
  const DType t = x.dtype;
  return (t == DType::f32 || t == DType::f16 || t == DType::bf16) &&
         norm_axis(q.attrs.get_int("axis"), int64_t(x.shape.size())) == int64_t(x.shape.size()) - 1;
}

bool float_pair(const KernelQuery& q) {
  return q.inputs.size() >= 2 && is_float(q.inputs[0].dtype) && is_float(q.inputs[1].dtype);
}

}  // namespace

void swiglu_into(const Tensor& x, const Tensor& y, cudaStream_t s) {
  const int64_t f = x.shape().back() / 2, rows = f ? y.numel() / f : 0;
  if (rows * f == 0) return;
  if (y.dtype() != x.dtype() && y.dtype() != DType::f32)
    fail<TypeError>("swiglu", "expected an output of ", dtype_name(x.dtype()), " or f32, got ",
                    dtype_name(y.dtype()));
  visit(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T> && !std::is_same_v<T, double>) {
      auto run = [&](auto* yp) {
        using U = std::remove_pointer_t<decltype(yp)>;
        const auto* xp = static_cast<const T*>(x.data());
        constexpr int kV = 16 / sizeof(T);
        const bool vec = f % kV == 0 && aligned<kV>(xp, yp);
        with_index(rows * 2 * f, [&](auto i) {
          using I = decltype(i);
          if (vec)
            launch_pdl(swiglu_rows<T, U, I, kV>, blocks_for(rows * f / kV), kThreads, 0, s, xp, yp,
                       I(rows), I(f));
          else
            launch_pdl(swiglu_rows<T, U, I, 1>, blocks_for(rows * f), kThreads, 0, s, xp, yp,
                       I(rows), I(f));
        });
      };
      if (y.dtype() == x.dtype())
        run(static_cast<T*>(y.data()));
      else
        run(static_cast<float*>(y.data()));
    }
  });
  RLX_CUDA_LAUNCHED("swiglu");
}

void register_llm(KernelRegistry& r) {
  add_kernel(r, "rope", rope_kernel, dtype_in(kFloat));
  add_kernel(r, "kv_cache_write", kv_cache_write_kernel, float_pair, {.makes_outputs = true});
  add_kernel(r, "swiglu", swiglu_kernel, swiglu_supported);
  register_attention_cached(r);
  register_sample(r);
}

}  // namespace rlx::cuda
