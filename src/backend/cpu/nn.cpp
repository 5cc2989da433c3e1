// nn kernels: softmax, log_softmax, layer_norm, rms_norm, group_norm, batch_norm,
// embedding, dropout, cross_entropy (attention is in attention.cpp). Float ops compute in
// f32 for f32/f16/bf16 and in f64 for f64; rows run in parallel.
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/nn_util.h"
#include "backend/cpu/philox.h"
#include "rlx/axes.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

constexpr int64_t kGrain = 32768;  // elements per parallel chunk for cheap per-element work

// Rows of `n` elements get about kGrain elements per chunk.
int64_t row_grain(int64_t n) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)); }

// A per-channel (or per-position) parameter widened to the compute type; empty when absent.
template <class T>
std::vector<compute_t<T>> param(std::span<const Tensor> in, size_t i) {
  std::vector<compute_t<T>> v;
  if (i >= in.size()) return v;
  const T* p = in[i].data_as<T>();
  v.resize(size_t(in[i].numel()));
  for (size_t j = 0; j < v.size(); ++j) v[j] = load(p[j]);
  return v;
}

// Runs f(Tag<T>) for the float dtype of t.
template <class F>
void float_visit(const KernelContext& ctx, const Tensor& t, F&& f) {
  visit_float(t.dtype(), ctx.op.name.c_str(), std::forward<F>(f));
}

// ---- softmax, log_softmax ----------------------------------------------------------

// As defined (x - max, then exp / sum): a row of all -inf, or with NaN or +inf, gives NaN
// (attention instead gives 0 for rows that see no key). The max and the sum are separate
// vectorised passes over a row that is in cache.

// One contiguous row: y = softmax(x) or log_softmax(x); y may alias x.
template <class C, class T>
void softmax_row(const C* x, T* y, int64_t n, bool log) {
  C m = row_max(x, n);
  if (log) {
    C ls = std::log(row_sum_exp(x, n, m));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = store<T>((x[i] - m) - ls);
    return;
  }
  if constexpr (std::is_same_v<C, T>) {
    C s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) {
      C e = exp_nonpos(x[i] - m);
      y[i] = e;
      s += e;
    }
    C inv = C(1) / s;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  } else {
    C inv = C(1) / row_sum_exp(x, n, m);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = store<T>(exp_nonpos(x[i] - m) * inv);
  }
}

// Softmax along a middle axis of [outer, n, inner]: columns of a chunk of `inner` run
// side by side so that the loops vectorise over the contiguous inner dim.
template <class T>
void softmax_columns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  using C = compute_t<T>;
  constexpr int64_t kChunk = 256;
  int64_t chunks = (inner + kChunk - 1) / kChunk;
  parallel_for(outer * chunks, row_grain(n * kChunk), [&](int64_t t0, int64_t t1) {
    C m[kChunk], s[kChunk];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t o = t / chunks, j0 = (t % chunks) * kChunk, w = std::min(kChunk, inner - j0);
      const T* xb = x + o * n * inner + j0;
      T* yb = y + o * n * inner + j0;
      for (int64_t j = 0; j < w; ++j) m[j] = -std::numeric_limits<C>::infinity(), s[j] = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j) {
          C v = load(xb[i * inner + j]);
          m[j] = v > m[j] ? v : m[j];
        }
      for (int64_t i = 0; i < n; ++i)
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) s[j] += exp_nonpos(load(xb[i * inner + j]) - m[j]);
      for (int64_t j = 0; j < w; ++j) s[j] = log ? std::log(s[j]) : C(1) / s[j];
      for (int64_t i = 0; i < n; ++i)
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          C d = load(xb[i * inner + j]) - m[j];
          yb[i * inner + j] = store<T>(log ? d - s[j] : exp_nonpos(d) * s[j]);
        }
    }
  });
}

template <bool log>
void softmax_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const auto& shape = in[0].shape();
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), in[0].rank()));
  int64_t outer = dims_product(shape, 0, axis), n = shape[axis];
  int64_t inner = dims_product(shape, axis + 1, shape.size());
  float_visit(ctx, in[0], [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in[0].data_as<T>();
    T* y = out[0].data_as<T>();
    if (inner != 1) return softmax_columns(x, y, outer, n, inner, log);
    parallel_for(outer, row_grain(n), [&](int64_t r0, int64_t r1) {
      std::vector<float> buf;
      for (int64_t r = r0; r < r1; ++r)
        softmax_row(as_compute(x + r * n, n, buf), y + r * n, n, log);
    });
  });
}

// ---- layer_norm, rms_norm ----------------------------------------------------------

// Normalises contiguous rows of n.
template <class T>
void trailing_norm(const KernelContext& ctx, std::span<const Tensor> in, Tensor& out, bool rms) {
  using C = compute_t<T>;
  const auto& shape = in[0].shape();
  size_t axis = size_t(norm_axis(ctx.attrs.get_int("axis"), in[0].rank()));
  int64_t rows = dims_product(shape, 0, axis), n = dims_product(shape, axis, shape.size());
  C eps = C(ctx.attrs.get_float("epsilon"));
  auto scale = param<T>(in, 1), bias = param<T>(in, 2);
  const C* sc = scale.empty() ? nullptr : scale.data();
  const C* bi = bias.empty() ? nullptr : bias.data();
  const T* x0 = in[0].data_as<T>();
  T* y0 = out.data_as<T>();
  parallel_for(rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf;
    for (int64_t r = r0; r < r1; ++r) {
      const C* x = as_compute(x0 + r * n, n, buf);
      T* y = y0 + r * n;
      C mean, inv;  // not a structured binding: clang 14 cannot capture one in `omp simd`
      std::tie(mean, inv) = moments(x, n, eps, !rms);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        C v = (x[i] - mean) * inv;
        if (sc) v *= sc[i];
        if (bi) v += bi[i];
        y[i] = store<T>(v);
      }
    }
  });
}

template <bool rms>
void layer_norm_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                       std::span<Tensor> out) {
  float_visit(ctx, in[0],
              [&](auto tag) { trailing_norm<typename decltype(tag)::type>(ctx, in, out[0], rms); });
}

// ---- group_norm, batch_norm --------------------------------------------------------

// x [N, C, S...]: each (n, group) block of C/G channels x S positions is contiguous.
template <class T>
void group_norm(const KernelContext& ctx, std::span<const Tensor> in, Tensor& out) {
  using C = compute_t<T>;
  const auto& shape = in[0].shape();
  int64_t batch = shape[0], ch = shape[1], s = dims_product(shape, 2, shape.size());
  int64_t groups = ctx.attrs.get_int("num_groups"), cpg = ch / groups, m = cpg * s;
  C eps = C(ctx.attrs.get_float("epsilon"));
  auto scale = param<T>(in, 1), bias = param<T>(in, 2);
  const T* x0 = in[0].data_as<T>();
  T* y0 = out.data_as<T>();
  parallel_for(batch * groups, row_grain(m), [&](int64_t b0, int64_t b1) {
    std::vector<float> buf;
    for (int64_t b = b0; b < b1; ++b) {
      const C* x = as_compute(x0 + b * m, m, buf);
      T* y = y0 + b * m;
      C mean, inv;
      std::tie(mean, inv) = moments(x, m, eps, true);
      for (int64_t c = 0; c < cpg; ++c) {
        int64_t cc = (b % groups) * cpg + c;
        C a = inv * scale[size_t(cc)], off = bias[size_t(cc)];
#pragma omp simd
        for (int64_t i = c * s; i < (c + 1) * s; ++i) y[i] = store<T>((x[i] - mean) * a + off);
      }
    }
  });
}

// Inference form: per channel y = (x - mean) * (scale / sqrt(var + eps)) + bias.
template <class T>
void batch_norm(const KernelContext& ctx, std::span<const Tensor> in, Tensor& out) {
  using C = compute_t<T>;
  const auto& shape = in[0].shape();
  int64_t ch = shape[1], s = dims_product(shape, 2, shape.size());
  C eps = C(ctx.attrs.get_float("epsilon"));
  auto a = param<T>(in, 1), bias = param<T>(in, 2), mean = param<T>(in, 3), var = param<T>(in, 4);
  for (size_t c = 0; c < a.size(); ++c) a[c] /= std::sqrt(var[c] + eps);
  const T* x0 = in[0].data_as<T>();
  T* y0 = out.data_as<T>();
  parallel_for(shape[0] * ch, row_grain(s), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      size_t c = size_t(p % ch);
      C ac = a[c], mc = mean[c], bc = bias[c];
      const T* x = x0 + p * s;
      T* y = y0 + p * s;
#pragma omp simd
      for (int64_t i = 0; i < s; ++i) y[i] = store<T>((load(x[i]) - mc) * ac + bc);
    }
  });
}

template <bool group>
void channel_norm_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                         std::span<Tensor> out) {
  float_visit(ctx, in[0], [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (group)
      group_norm<T>(ctx, in, out[0]);
    else
      batch_norm<T>(ctx, in, out[0]);
  });
}

// ---- embedding ---------------------------------------------------------------------

// Rows are copied as bytes, so every table dtype takes the same path. Indices must lie in
// [0, V) (no wrap-around of negative indices, as in PyTorch).
void embedding_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& table = in[0];
  int64_t vocab = table.shape()[0];
  size_t row = size_t(table.shape()[1]) * dtype_size(table.dtype());
  const char* src = static_cast<const char*>(table.data());
  char* dst = static_cast<char*>(out[0].data());
  visit_int(in[1].dtype(), "embedding", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* idx = in[1].data_as<I>();
    parallel_for(in[1].numel(), row_grain(int64_t(row)), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        int64_t j = int64_t(idx[i]);
        if (j < 0 || j >= vocab)
          fail<ValueError>("embedding", "expected indices in [0, ", vocab, "), got ", j);
        if (row) std::memcpy(dst + size_t(i) * row, src + size_t(j) * row, row);
      }
    });
  });
}

// ---- dropout -----------------------------------------------------------------------

// y = x * scale where the 24-bit draw (w >> 8) reaches the threshold, else 0; pointers
// not captured by reference, so that the loop vectorises.
template <class T>
void dropout_chunk(const T* __restrict x, T* __restrict y, const uint32_t* __restrict w, int64_t n,
                   uint32_t threshold, compute_t<T> scale) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = store<T>((w[i] >> 8) >= threshold ? load(x[i]) * scale : compute_t<T>(0));
}

// The mask is the same for every dtype: element i is kept iff u24(word i%4 of Philox
// block i/4) >= rate, with key = seed and no key input (philox.h), i.e. exactly where
// uniform(seed) in f32 over [0, 1) is >= rate. Kept elements are scaled by 1/(1 - rate).
void dropout_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  double rate = ctx.attrs.get_float("rate");
  int64_t n = in[0].numel();
  if (!ctx.attrs.get_bool("training") || rate == 0.0) {
    if (n) std::memcpy(out[0].data(), in[0].data(), in[0].nbytes());
    return;
  }
  philox::Stream st{uint64_t(ctx.attrs.get_int("seed")), 0};
  // u24(w) >= rate  <=>  (w >> 8) >= ceil(rate * 2^24), exactly (rate * 2^24 is exact).
  uint32_t threshold = uint32_t(std::ceil(rate * 0x1p24));
  float_visit(ctx, in[0], [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    C scale = C(1.0 / (1.0 - rate));
    const T* x = in[0].data_as<T>();
    T* y = out[0].data_as<T>();
    for_philox_blocks(st, (n + 3) / 4, [&](int64_t b, int64_t nb, const uint32_t* w) {
      int64_t i0 = 4 * b;
      dropout_chunk(x + i0, y + i0, w, std::min(4 * nb, n - i0), threshold, scale);
    });
  });
}

// ---- cross_entropy -----------------------------------------------------------------

// Per row of logits x [C]: lse = logsumexp(x);
//   class label y: (1 - eps) (lse - x[y]) + eps (lse - mean(x)); rows whose label is
//     ignore_index give 0 and do not count toward the mean; other labels outside [0, C)
//     are errors;
//   probabilities p: -sum_c ((1 - eps) p[c] + eps / C) (x[c] - lse).
// The mean of no rows is NaN (0 / 0, as in PyTorch).
template <class T>
void cross_entropy(const KernelContext& ctx, std::span<const Tensor> in, Tensor& out) {
  using C = compute_t<T>;
  int64_t classes = in[0].shape().back();
  int64_t rows =
      classes ? in[0].numel() / classes : dims_product(in[0].shape(), 0, in[0].shape().size() - 1);
  C eps = C(ctx.attrs.get_float("label_smoothing"));
  int64_t ignore = ctx.attrs.get_int("ignore_index");
  bool probs = is_float(in[1].dtype());
  std::vector<int64_t> labels;
  if (!probs)
    visit_int(in[1].dtype(), "cross_entropy", [&](auto tag) {
      using I = typename decltype(tag)::type;
      const I* p = in[1].data_as<I>();
      labels.assign(p, p + rows);
    });
  std::vector<double> loss(static_cast<size_t>(rows));
  std::vector<uint8_t> counted(static_cast<size_t>(rows), 1);
  const T* x0 = in[0].data_as<T>();
  const T* p0 = probs ? in[1].data_as<T>() : nullptr;
  parallel_for(rows, row_grain(classes), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf, pbuf;
    for (int64_t r = r0; r < r1; ++r) {
      const C* x = as_compute(x0 + r * classes, classes, buf);
      C m = row_max(x, classes);
      C lse = m + std::log(row_sum_exp(x, classes, m));
      C l = 0;
      if (probs) {
        const C* p = as_compute(p0 + r * classes, classes, pbuf);
        C u = classes ? eps / C(classes) : C(0), acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t c = 0; c < classes; ++c) acc += ((C(1) - eps) * p[c] + u) * (x[c] - lse);
        l = -acc;
      } else if (labels[size_t(r)] == ignore) {
        counted[size_t(r)] = 0;
      } else {
        int64_t y = labels[size_t(r)];
        if (y < 0 || y >= classes)
          fail<ValueError>("cross_entropy", "expected class labels in [0, ", classes,
                           ") or ignore_index ", ignore, ", got ", y);
        l = (C(1) - eps) * (lse - x[y]);
        if (eps > 0) {
          C sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < classes; ++c) sum += x[c];
          l += eps * (lse - sum / C(classes));
        }
      }
      loss[size_t(r)] = double(l);
    }
  });
  // The loss in T, or in f32 (f32_loss on 16-bit logits).
  auto put = [&, f32 = out.dtype() != in[0].dtype()](int64_t i, double v) {
    if (f32)
      out.data_as<float>()[i] = float(v);
    else
      out.data_as<T>()[i] = store<T>(C(v));
  };
  const std::string& reduction = ctx.attrs.get_string("reduction");
  if (reduction == "none") {
    for (int64_t r = 0; r < rows; ++r) put(r, loss[size_t(r)]);
    return;
  }
  double total = 0, count = 0;
  for (int64_t r = 0; r < rows; ++r) total += loss[size_t(r)], count += counted[size_t(r)];
  put(0, reduction == "sum" ? total : total / count);
}

void cross_entropy_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                          std::span<Tensor> out) {
  float_visit(ctx, in[0],
              [&](auto tag) { cross_entropy<typename decltype(tag)::type>(ctx, in, out[0]); });
}

}  // namespace

void register_nn(KernelRegistry& r) {
  struct Entry {
    const char* op;
    KernelFn fn;
  };
  const Entry floats[] = {
      {"softmax", softmax_kernel<false>},
      {"log_softmax", softmax_kernel<true>},
      {"layer_norm", layer_norm_kernel<false>},
      {"rms_norm", layer_norm_kernel<true>},
      {"group_norm", channel_norm_kernel<true>},
      {"batch_norm", channel_norm_kernel<false>},
      {"dropout", dropout_kernel},
      {"cross_entropy", cross_entropy_kernel},
  };
  for (const Entry& e : floats) add_kernel(r, e.op, e.fn, dtype_in(kFloat));
  add_kernel(r, "embedding", embedding_kernel);
  register_attention(r);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
