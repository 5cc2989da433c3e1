// uniform and normal: counter-based draws from Philox4x32-10 (philox.h describes the key,
// the counter and the word-to-float construction). Element i of the output maps to fixed
// words of a fixed block, so any backend can reproduce the values and the work splits over
// threads without any shared state:
//
// uniform, f32/f16/bf16: element i <- word i%4 of block i/4, u = u24(w);
//          f64:          element i <- words 2(i%2), 2(i%2)+1 of block i/2, u = u53(a, b);
//   value = fma(high - low, u, low) in double, rounded to the dtype (nearest even), then
//   clamped to the dtype's values in [low, high) (rounding can reach `high`, mostly in
//   f16/bf16). If high - low overflows, the same formula runs on halved operands and the
//   result is doubled.
// normal (Box-Muller), f32/f16/bf16: element i <- pair p = (i%4)/2 of block i/4, words
//   (w[2p], w[2p+1]); u1 = u24(w[2p]) + 2^-24 in (0, 1], u2 = u24(w[2p+1]);
//   r = sqrt(-2 log u1), t = float(2 pi) * u2, z = r cos t (i even) or r sin t (i odd),
//   all in float;
//          f64: element i <- block i/2, u1 = u53(w0, w1) + 2^-53, u2 = u53(w2, w3), the same
//   formulas in double;
//   value = fma(std, z, mean) in double, rounded to the dtype. (log/cos/sin may differ by an
//   ulp between math libraries; everything else is exact IEEE arithmetic.)
// The key input (an integer scalar) is read as a signed 64-bit integer.
#include <cmath>
#include <limits>
#include <numbers>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/nn_util.h"
#include "backend/cpu/philox.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

using philox::Stream;

philox::Stream stream_of(const KernelContext& ctx, std::span<const Tensor> in) {
  Stream s;
  s.seed = uint64_t(ctx.attrs.get_int("seed"));
  if (!in.empty())
    visit_int(in[0].dtype(), "random key", [&](auto tag) {
      using K = typename decltype(tag)::type;
      s.key_input = uint64_t(int64_t(*in[0].data_as<K>()));
    });
  return s;
}

// The next stored value toward -inf (down) or +inf (up).
template <class T>
T step(T v, bool up) {
  if constexpr (is_half_v<T>) {
    uint16_t b = v.bits;
    bool neg = b & 0x8000u;
    if ((b & 0x7fffu) == 0) return T{uint16_t(up ? 0x0001u : 0x8001u)};
    return T{uint16_t(neg == up ? b - 1 : b + 1)};
  } else {
    return std::nextafter(
        v, up ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity());
  }
}

// Draws low + (high - low) * u, kept inside [low, high) after rounding to T.
template <class T>
struct UniformMap {
  double low, high, range;
  bool halved;
  T lo_t, hi_t;
  double lo_d, hi_d;

  UniformMap(double lo, double hi) : low(lo), high(hi), range(hi - lo) {
    halved = !std::isfinite(range);
    if (halved) range = 0.5 * hi - 0.5 * lo;
    lo_t = store<T>(lo);
    if (double(load(lo_t)) < lo) lo_t = step(lo_t, true);
    hi_t = store<T>(hi);
    if (double(load(hi_t)) >= hi) hi_t = step(hi_t, false);
    lo_d = double(load(lo_t));
    hi_d = double(load(hi_t));
  }
  T operator()(double u) const {
    double v = halved ? 2.0 * std::fma(range, u, 0.5 * low) : std::fma(range, u, low);
    T t = store<T>(v);
    double d = double(load(t));
    if (d > hi_d) return hi_t;
    if (d < lo_d) return lo_t;
    return t;
  }
};

// n draws from consecutive words (pairs of words for f64); the map is copied in and the
// pointers are restrict so that the loop vectorises.
template <class T>
void uniform_chunk(const UniformMap<T> map, T* __restrict out, const uint32_t* __restrict w,
                   int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, double>)
      out[i] = map(philox::u53(w[2 * i], w[2 * i + 1]));
    else
      out[i] = map(double(philox::u24(w[i])));
  }
}

template <class T>
void fill_uniform(T* out, int64_t n, const Stream& st, double low, double high) {
  UniformMap<T> map(low, high);
  if constexpr (std::is_same_v<T, double>) {
    for_philox_blocks(st, (n + 1) / 2, [&](int64_t b, int64_t nb, const uint32_t* w) {
      uniform_chunk(map, out + 2 * b, w, std::min(2 * nb, n - 2 * b));
    });
  } else {
    for_philox_blocks(st, (n + 3) / 4, [&](int64_t b, int64_t nb, const uint32_t* w) {
      uniform_chunk(map, out + 4 * b, w, std::min(4 * nb, n - 4 * b));
    });
  }
}

template <class T>
void fill_normal(T* out, int64_t n, const Stream& st, double mean, double sd) {
  if constexpr (std::is_same_v<T, double>) {
    for_philox_blocks(st, (n + 1) / 2, [&](int64_t b, int64_t nb, const uint32_t* w) {
      int64_t i0 = 2 * b, cnt = std::min(2 * nb, n - i0);
      for (int64_t e = 0; e < cnt; e += 2) {
        const uint32_t* x = w + 2 * e;  // block e / 2
        double u1 = philox::u53(x[0], x[1]) + 0x1p-53, u2 = philox::u53(x[2], x[3]);
        double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
        out[i0 + e] = std::fma(sd, r * std::cos(t), mean);
        if (e + 1 < cnt) out[i0 + e + 1] = std::fma(sd, r * std::sin(t), mean);
      }
    });
  } else {
    constexpr float kTwoPi = float(2.0 * std::numbers::pi);
    for_philox_blocks(st, (n + 3) / 4, [&](int64_t b, int64_t nb, const uint32_t* w) {
      int64_t i0 = 4 * b, cnt = std::min(4 * nb, n - i0);
      for (int64_t e = 0; e < cnt; e += 2) {
        float u1 = philox::u24(w[e]) + 0x1p-24f, u2 = philox::u24(w[e + 1]);
        float r = std::sqrt(-2.0f * std::log(u1)), t = kTwoPi * u2;
        out[i0 + e] = store<T>(std::fma(sd, double(r * std::cos(t)), mean));
        if (e + 1 < cnt) out[i0 + e + 1] = store<T>(std::fma(sd, double(r * std::sin(t)), mean));
      }
    });
  }
}

void uniform_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  Stream st = stream_of(ctx, in);
  double low = ctx.attrs.get_float("low"), high = ctx.attrs.get_float("high");
  visit_float(out[0].dtype(), "uniform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_uniform(out[0].data_as<T>(), out[0].numel(), st, low, high);
  });
}

void normal_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  Stream st = stream_of(ctx, in);
  double mean = ctx.attrs.get_float("mean"), sd = ctx.attrs.get_float("std");
  visit_float(out[0].dtype(), "normal", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_normal(out[0].data_as<T>(), out[0].numel(), st, mean, sd);
  });
}

// The output dtype decides (input 0, when present, is the integer key).
bool float_output(const KernelQuery& q) {
  return !q.outputs.empty() && in_set(q.outputs[0].dtype, kFloat);
}

}  // namespace

void register_random(KernelRegistry& r) {
  add_kernel(r, "uniform", uniform_kernel, float_output);
  add_kernel(r, "normal", normal_kernel, float_output);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
