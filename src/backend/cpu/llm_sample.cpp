// sample(logits [..., V], rng [..., 2], [history [..., R]]) -> i32 [...] on the CPU, in
// llama.cpp's default order: repetition penalty, top-k, top-p, min-p, temperature, draw.
//
// The candidate set is defined by the values alone (ties in the top-k / top-p order go to
// the lower id), and the draw walks the candidates in increasing id order, so any backend
// that finds the same set draws the same token for the same (seed, counter): u = u53(w0,
// w1) of Philox4x32-10 block (counter, 0) under key seed, and the first candidate whose
// cumulative weight exceeds u * total wins. Without top-k, top-p sorts only as much of the
// vocabulary as the nucleus needs (nth_element over a growing prefix).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/cpu/isa.h"
#include "backend/cpu/llm_kernels.h"
#include "backend/cpu/philox.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

struct Options {
  double temperature, top_p, min_p, penalty;
  int64_t top_k;
};

struct Scratch {
  std::vector<float> logit, w;
  std::vector<int32_t> idx, seen;
};

// llama.cpp's penalty: each distinct id of the history once (negative ids are empty slots).
void apply_penalty(float* l, int64_t v, const int32_t* hist, int64_t r, double penalty,
                   Scratch& s) {
  s.seen.assign(hist, hist + r);
  std::sort(s.seen.begin(), s.seen.end());
  s.seen.erase(std::unique(s.seen.begin(), s.seen.end()), s.seen.end());
  for (int32_t id : s.seen) {
    if (id < 0) continue;
    if (id >= v)
      fail<ValueError>("sample", "expected history ids below V = ", v, " (or -1 for none), got ",
                       id);
    l[id] = l[id] > 0 ? float(l[id] / penalty) : float(l[id] * penalty);
  }
}

// The first i in [from, v) with l[i] > t (or_equal: l[i] >= t); v where there is none.
int64_t first_above(const float* l, int64_t from, int64_t v, float t, bool or_equal) {
  int64_t i = from;
#if defined(__AVX2__)
  const __m256 vt = _mm256_set1_ps(t);
  for (; i + 8 <= v; i += 8) {
    const __m256 x = _mm256_loadu_ps(l + i);
    const int m = _mm256_movemask_ps(or_equal ? _mm256_cmp_ps(x, vt, _CMP_GE_OQ)
                                              : _mm256_cmp_ps(x, vt, _CMP_GT_OQ));
    if (m) return i + __builtin_ctz(unsigned(m));
  }
#endif
  for (; i < v; ++i)
    if (or_equal ? l[i] >= t : l[i] > t) return i;
  return v;
}

// The first id of the largest logit (NaN logits were made -inf when the row was read).
int32_t argmax(const float* l, int64_t v) {
  if (v == 0) return 0;
  const int64_t i = first_above(l, 0, v, max_of(l, v), true);
  return int32_t(i < v ? i : 0);
}

int32_t sample_row(const float* l, int64_t v, const Options& o, uint64_t seed, uint64_t counter,
                   Scratch& s) {
  if (o.temperature <= 0) return argmax(l, v);
  const float top = l[argmax(l, v)];
  if (!std::isfinite(top)) return argmax(l, v);  // all -inf: nothing to draw; +inf: certain
  // Higher logit first, then the lower id: a strict order, so the sets are unique.
  auto before = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  int64_t n = v;        // candidates: idx[0, n) when `listed`, else every id
  bool listed = false;  // and, when listed, sorted by `before`
  auto list_all = [&] {
    s.idx.resize(size_t(v));
    std::iota(s.idx.begin(), s.idx.end(), 0);
    listed = true;
  };
  if (o.top_k > 0 && o.top_k < v) {
    // A heap of the k best so far with the worst on top: most ids lose one comparison
    // against it, so this is one pass over V rather than a partition of all of it.
    n = o.top_k;
    s.idx.resize(size_t(n));
    std::iota(s.idx.begin(), s.idx.end(), 0);
    // Every id in the heap is below i, so i beats the worst exactly when its logit is
    // larger (a tie goes to the lower id): a vector scan finds the next such i.
    std::make_heap(s.idx.begin(), s.idx.end(), before);
    for (int64_t i = first_above(l, n, v, l[s.idx.front()], false); i < v;
         i = first_above(l, i + 1, v, l[s.idx.front()], false)) {
      std::pop_heap(s.idx.begin(), s.idx.end(), before);
      s.idx.back() = int32_t(i);
      std::push_heap(s.idx.begin(), s.idx.end(), before);
    }
    std::sort(s.idx.begin(), s.idx.end(), before);
    listed = true;
  }
  if (o.top_p < 1) {
    // The nucleus: the fewest leading candidates whose softmax mass reaches top_p.
    double total = 0;
    if (listed) {
      for (int64_t i = 0; i < n; ++i) total += fm::exp(l[s.idx[size_t(i)]] - top);
    } else {
      s.w.assign(l, l + v);
      total = exp_shifted(s.w.data(), v, top);
      list_all();
    }
    const double want = o.top_p * total;
    double cum = 0;
    int64_t sorted = listed && n < v ? n : 0, keep = n;
    for (int64_t i = 0; i < n; ++i) {
      if (i == sorted) {  // sort the next stretch: 4x the last one (at least 32)
        int64_t upto = std::min(n, std::max<int64_t>(32, 4 * sorted));
        std::nth_element(s.idx.begin() + i, s.idx.begin() + upto - 1, s.idx.begin() + n, before);
        std::sort(s.idx.begin() + i, s.idx.begin() + upto, before);
        sorted = upto;
      }
      cum += fm::exp(l[s.idx[size_t(i)]] - top);
      if (cum >= want) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (o.min_p > 0) {
    const float cut = top + float(std::log(o.min_p));
    if (listed) {  // sorted: a prefix stays
      int64_t i = 1;
      while (i < n && l[s.idx[size_t(i)]] >= cut) ++i;
      n = i;
    } else {
      s.idx.clear();
      for (int64_t i = 0; i < v; ++i)
        if (l[i] >= cut) s.idx.push_back(int32_t(i));
      n = int64_t(s.idx.size());
      listed = true;
    }
  }
  if (listed) std::sort(s.idx.begin(), s.idx.begin() + n);  // the draw's order: by id
  // Weights exp((l - top) / T) of the candidates, then the inverse CDF at u.
  const float inv_t = float(1.0 / o.temperature);
  s.w.resize(size_t(n));
  double total = 0;
  if (listed) {
    for (int64_t i = 0; i < n; ++i)
      total += s.w[size_t(i)] = fm::exp((l[s.idx[size_t(i)]] - top) * inv_t);
  } else {
    float* w = s.w.data();
    for (int64_t i = 0; i < n; ++i) w[i] = (l[i] - top) * inv_t;
    total = exp_shifted(w, n, 0.f);
  }
  philox::Block blk = philox::Stream{seed, 0}.block(counter);
  const double target = philox::u53(blk[0], blk[1]) * total;
  double cum = 0;
  for (int64_t i = 0; i < n; ++i) {
    cum += s.w[size_t(i)];
    if (cum > target) return listed ? s.idx[size_t(i)] : int32_t(i);
  }
  return listed ? s.idx[size_t(n - 1)] : int32_t(n - 1);  // rounding at the very top
}

void sample_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& logits = in[0];
  const int64_t v = logits.shape().back();
  const int64_t rows = v > 0 ? logits.numel() / v : 0;
  const Attrs& a = ctx.attrs;
  Options o{a.get_float("temperature"), a.get_float("top_p"), a.get_float("min_p"),
            a.get_float("repeat_penalty"), a.get_int("top_k")};
  const int64_t* rng = in[1].data_as<int64_t>();
  const bool hist = in.size() > 2;
  const int64_t r = hist ? in[2].shape().back() : 0;
  const int32_t* h = hist ? in[2].data_as<int32_t>() : nullptr;
  int32_t* y = out[0].data_as<int32_t>();
  visit_float(logits.dtype(), "sample", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* lp = logits.data_as<T>();
    parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
      thread_local Scratch s;
      s.logit.resize(size_t(v));
      for (int64_t row = r0; row < r1; ++row) {
        float* l = s.logit.data();
        for (int64_t i = 0; i < v; ++i) {
          float x = float(load(lp[row * v + i]));
          l[i] = std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
        }
        if (hist && o.penalty != 1.0) apply_penalty(l, v, h + row * r, r, o.penalty, s);
        y[row] = sample_row(l, v, o, uint64_t(rng[2 * row]), uint64_t(rng[2 * row + 1]), s);
      }
    });
  });
}

}  // namespace

void register_sample(KernelRegistry& r) {
  add_kernel(r, "sample", sample_kernel, dtype_in(kFloat));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
