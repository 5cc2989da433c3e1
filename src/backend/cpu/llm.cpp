// rope, kv_cache_write, rope_attention_cached and swiglu on the CPU, and the family's
// registration.
//
// rope: the angles of one position are computed once and applied to every head of that row;
// each thread keeps its last table, which a decode step's later layers reuse. They are
// ggml's f32 angles (pos * theta_scale^i multiplied pair by pair, cosf / sinf), which
// llama.cpp rotates by: with double ones (~1e-4 rad apart at position 4000) a random-weight
// model's greedy tokens parted from llama.cpp's where both agree otherwise. f64 data keeps
// double angles (the gradient checks').
// kv_cache_write: writes the new rows straight into input 0's storage and returns that
// storage as the output (KernelFlags::makes_outputs), so a decode step copies S rows per
// head, never the cache. A non-contiguous cache reaches the kernel as the runtime's
// contiguous copy: the write then lands there (still correct, but not in place).
// rope_attention_cached: those kernels and attention_cached's in turn on its tensors (one op
// per layer where the parts are five, the rotated q and k in scratch that is kept).
// swiglu: silu of each row's first half times its second, one pass (the decomposition is
// three ops and two intermediates: split, silu, mul).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <span>
#include <string>

#include "backend/cpu/elementwise_math.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/llm_kernels.h"
#include "rlx/axes.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

// ---- rope ----------------------------------------------------------------------------

// One rotation, x into y.
struct Rotate {
  const Tensor* x;
  Tensor* y;
};

// Every x of `xy` (the same lead dims [..., S] and head size D; heads may differ) rotated into
// its y, the angles of a row computed once for all of them (rope_attention_cached's q and k).
// inverse: the rotation back (rope's vjp), passed apart from a: rope_attention_cached's attrs
// have rope's others but not this one.
template <class T>
void rope_typed(const Attrs& a, bool inverse, std::span<const Rotate> xy, const Tensor& pos,
                const Tensor* ff) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const auto& xs = xy[0].x->shape();
  const size_t r = xs.size();
  const int64_t d = xs[r - 1];
  int64_t n = a.get_int("n_rot");
  if (n == 0) n = d;
  if (n % 2 != 0 || n > d)
    fail<ValueError>("rope", "expected an even n_rot <= D = ", d, ", got ", n);
  const int64_t half = n / 2;
  const bool neox = a.get_string("mode") == "neox";
  const double fs = a.get_float("freq_scale") * (inverse ? -1.0 : 1.0);
  const double base = a.get_float("base");

  // Lead dims [..., S]; pos broadcasts against them (right-aligned, size-1 dims repeat).
  std::vector<int64_t> lead(xs.begin(), xs.end() - 2), pst(lead.size(), 0);
  const auto& ps = pos.shape();
  for (int64_t i = int64_t(ps.size()) - 1, s = 1; i >= 0; --i) {
    pst[lead.size() - ps.size() + size_t(i)] = ps[size_t(i)] == 1 ? 0 : s;
    s *= ps[size_t(i)];
  }
  int64_t rows = 1;
  for (int64_t v : lead) rows *= v;
  std::vector<int64_t> p(size_t(pos.numel()));
  visit_int(pos.dtype(), "rope", [&](auto tag) {
    using I = typename decltype(tag)::type;
    for (size_t i = 0; i < p.size(); ++i) p[i] = int64_t(pos.data_as<I>()[i]);
  });
  // A decode step's layers all rotate one position with the same frequencies, and pow, cos
  // and sin in double cost more than the rotations: the frequencies of the last call and
  // each thread's last angle table are kept (keyed by their values, not by addresses).
  struct Freqs {
    double base = 0;
    int64_t n = 0;
    std::vector<double> factors, freq;
    uint64_t generation = 0;
  };
  thread_local Freqs fq;
  std::vector<double> factors = ff ? ff->to_doubles() : std::vector<double>{};
  if (fq.generation == 0 || fq.base != base || fq.n != n || fq.factors != factors) {
    fq.base = base, fq.n = n, fq.factors = std::move(factors);
    fq.freq.resize(size_t(half));
    for (int64_t i = 0; i < half; ++i)
      fq.freq[size_t(i)] = std::pow(base, -2.0 * double(i) / double(n)) /
                           (fq.factors.empty() ? 1.0 : fq.factors[size_t(i)]);
    static std::atomic<uint64_t> generations{0};
    fq.generation = ++generations;
  }
  // The calling thread's (fq is thread_local: the workers below see their own).
  const std::vector<double>&freq = fq.freq, &ff_values = fq.factors;
  const uint64_t generation = fq.generation;

  int64_t values = 0;  // per row of the lead dims, over every x
  for (const Rotate& t : xy) values += t.x->shape()[r - 2] * d;
  parallel_for(
      rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(values, 1)), [&](int64_t l0, int64_t l1) {
        // This thread's last table: the angles of position `pos` at scale `fs` for
        // `generation`.
        thread_local struct {
          std::vector<C> cs;
          uint64_t generation = 0;
          int64_t pos = 0;
          double fs = 0;
        } table;
        table.cs.resize(size_t(2 * half));
        C *cv = table.cs.data(), *sv = table.cs.data() + half;
        for (int64_t l = l0; l < l1; ++l) {
          int64_t off = 0;
          for (int64_t i = int64_t(lead.size()) - 1, rest = l; i >= 0; --i) {
            off += (rest % lead[size_t(i)]) * pst[size_t(i)];
            rest /= lead[size_t(i)];
          }
          const double at = double(p[size_t(off)]) * fs;
          if (table.generation != generation || table.pos != p[size_t(off)] || table.fs != fs) {
            if constexpr (std::is_same_v<C, float>) {
              // ggml's angles: theta_i = pos * theta_scale^i, multiplied pair by
              // pair in f32, then freq_scale * theta_i / factor_i, cosf and sinf.
              const float scale = std::pow(float(base), -2.0f / float(n));
              float theta = float(p[size_t(off)]);
              for (int64_t i = 0; i < half; ++i, theta *= scale) {
                const float ffi = ff_values.empty() ? 1.0f : float(ff_values[size_t(i)]);
                const float th = float(fs) * (theta / ffi);
                cv[i] = std::cos(th);
                sv[i] = std::sin(th);
              }
            } else {
              for (int64_t i = 0; i < half; ++i) {
                double th = at * freq[size_t(i)];
                cv[i] = C(std::cos(th));
                sv[i] = C(std::sin(th));
              }
            }
            table.generation = generation, table.pos = p[size_t(off)], table.fs = fs;
          }
          for (const Rotate& t : xy) {
            const int64_t h = t.x->shape()[r - 2], row = h * d;
            const T* xp = t.x->data_as<T>() + l * row;
            T* yp = t.y->data_as<T>() + l * row;
            for (int64_t hh = 0; hh < h; ++hh) {
              const T* xr = xp + hh * d;
              T* yr = yp + hh * d;
              const int64_t other = neox ? half : 1;  // the partner of dim i0
              for (int64_t i = 0; i < half; ++i) {
                const int64_t i0 = neox ? i : 2 * i;
                C x0 = C(load(xr[i0])), x1 = C(load(xr[i0 + other]));
                yr[i0] = store<T>(x0 * cv[i] - x1 * sv[i]);
                yr[i0 + other] = store<T>(x0 * sv[i] + x1 * cv[i]);
              }
              for (int64_t e = n; e < d; ++e) yr[e] = xr[e];
            }
          }
        }
      });
}

void rope_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  visit_float(in[0].dtype(), "rope", [&](auto tag) {
    const Rotate xy[] = {{&in[0], &out[0]}};
    rope_typed<typename decltype(tag)::type>(ctx.attrs, ctx.attrs.get_bool("inverse"), xy, in[1],
                                             in.size() > 2 ? &in[2] : nullptr);
  });
}

// ---- kv_cache_write ------------------------------------------------------------------

template <class TC, class TN>
inline void convert_row(const TN* src, TC* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  if constexpr (std::is_same_v<TC, f16_t> && std::is_same_v<TN, float>)
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) {
    if constexpr (std::is_same_v<TC, TN>)
      dst[i] = src[i];
    else
      dst[i] = store<TC>(load(src[i]));
  }
}

void kv_cache_write_kernel(const KernelContext&, std::span<const Tensor> in,
                           std::span<Tensor> out) {
  const Tensor &cache = in[0], &nw = in[1];
  const auto& cs = cache.shape();
  const int64_t kvh = cs[1], c = cs[2], d = cs[3], s = nw.shape()[1];
  thread_local std::vector<int64_t> pos;
  read_positions("kv_cache_write", in[2], s, c, pos);
  visit_float(cache.dtype(), "kv_cache_write", [&](auto ct) {
    using TC = typename decltype(ct)::type;
    visit_float(nw.dtype(), "kv_cache_write", [&](auto nt) {
      using TN = typename decltype(nt)::type;
      const TN* src = nw.data_as<TN>();
      TC* dst = cache.data_as<TC>();
      const int64_t* at = pos.data();  // this thread's: the workers' thread_local is empty
      // Row r of new ([B, S, KVH] flattened) goes to row pos[b] + s of head h.
      parallel_for(nw.numel() / std::max<int64_t>(d, 1),
                   std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)),
                   [&](int64_t r0, int64_t r1) {
                     for (int64_t r = r0; r < r1; ++r) {
                       int64_t b = r / (s * kvh), si = (r / kvh) % s, hh = r % kvh;
                       convert_row(src + r * d, dst + ((b * kvh + hh) * c + at[b] + si) * d, d);
                     }
                   });
    });
  });
  out[0] = cache;  // the same storage: the caller's tensor holds the new rows
}

// ---- rope_attention_cached ---------------------------------------------------------------

void rope_attention_cached_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                                  std::span<Tensor> out) {
  const Tensor &q = in[0], &k = in[1], &positions = in[5], &pos = in[6];
  const Tensor* ff = in.size() > 7 ? &in[7] : nullptr;
  // The rotated q and k, in buffers of this thread that only grow.
  thread_local std::vector<uint8_t> q_buf, k_buf;
  auto scratch = [](std::vector<uint8_t>& buf, const Tensor& like) {
    if (buf.size() < like.nbytes()) buf.resize(like.nbytes());
    return Tensor::wrap(like.dtype(), like.shape(), buf.data(), [](void*) {});
  };
  Tensor qr = scratch(q_buf, q), kr = scratch(k_buf, k);
  visit_float(q.dtype(), "rope_attention_cached", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Rotate xy[] = {{&q, &qr}, {&k, &kr}};  // one angle table for both
    rope_typed<T>(ctx.attrs, false, xy, positions, ff);
  });
  const Tensor k_in[3] = {in[3], kr, pos}, v_in[3] = {in[4], in[2], pos};
  kv_cache_write_kernel(ctx, k_in, out.subspan(1, 1));  // out[1], out[2]: the caches' storage
  kv_cache_write_kernel(ctx, v_in, out.subspan(2, 1));
  const Tensor a_in[4] = {qr, out[1], out[2], pos};
  attention_cached_kernel(ctx, a_in, out.subspan(0, 1));
}

// f32 / f16 / bf16 (f64, the gradient checks' dtype: the parts), q and k of one dtype.
bool rope_attention_cached_supported(const KernelQuery& q) {
  auto ok = [](DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; };
  const auto& in = q.inputs;
  return in.size() >= 7 && ok(in[0].dtype) && in[1].dtype == in[0].dtype && ok(in[2].dtype) &&
         ok(in[3].dtype) && in[4].dtype == in[3].dtype;
}

// ---- swiglu ----------------------------------------------------------------------------

void swiglu_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const int64_t f = in[0].shape().back() / 2, rows = f ? out[0].numel() / f : 0;
  const float* x = in[0].data_as<float>();
  float* y = out[0].data_as<float>();
  parallel_for(rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(f, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) swiglu_row(x + r * 2 * f, y + r * f, f);
               });
}

// f32 halves along the last axis (others: the decomposition).
bool swiglu_supported(const KernelQuery& q) {
  const TensorType& x = q.inputs[0];
  const int64_t rank = int64_t(x.shape.size());
  return x.dtype == DType::f32 && rank > 0 && norm_axis(q.attrs.get_int("axis"), rank) == rank - 1;
}

bool float_pair(const KernelQuery& q) {
  return q.inputs.size() >= 2 && in_set(q.inputs[0].dtype, kFloat) &&
         in_set(q.inputs[1].dtype, kFloat);
}

}  // namespace

void register_llm(KernelRegistry& r) {
  add_kernel(r, "rope", rope_kernel, dtype_in(kFloat));
  KernelFlags inplace;
  inplace.makes_outputs = true;
  add_kernel(r, "kv_cache_write", kv_cache_write_kernel, float_pair, inplace);
  add_kernel(r, "swiglu", swiglu_kernel, swiglu_supported);
  add_kernel(r, "rope_attention_cached", rope_attention_cached_kernel,
             rope_attention_cached_supported);
  register_attention_cached(r);
  register_sample(r);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
