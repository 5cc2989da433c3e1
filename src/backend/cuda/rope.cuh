// rope's angles, shared by the rope kernel (llm.cu) and the decode attention that rotates
// its own q and k rows (llm_attention.cu, rope_attention_cached): both rotate by the same
// f32 cos / sin, of ggml's f32 angles as on the CPU (f64 data: angles in double).
#pragma once

#include <cmath>

#include "backend/cuda/kernels.cuh"
#include "rlx/attrs.h"
#include "rlx/error.h"

namespace rlx::cuda {

struct RopeArgs {
  int64_t rows, heads, d, half, n_rot;
  double log2_base, fs;
  float theta_scale;  // base^(-2 / n_rot) in f32 (ggml's, the CPU's)
  bool neox;
};

// The rotation of heads of dim d that rope's attributes ask for (rows and heads unset).
inline RopeArgs rope_args(const Attrs& attrs, int64_t d, bool inverse) {
  RopeArgs a{};
  a.d = d;
  a.n_rot = attrs.get_int("n_rot");
  if (a.n_rot == 0) a.n_rot = a.d;
  if (a.n_rot % 2 != 0 || a.n_rot > a.d)
    fail<ValueError>("rope", "expected an even n_rot <= D = ", a.d, ", got ", a.n_rot);
  a.half = a.n_rot / 2;
  a.neox = attrs.get_string("mode") == "neox";
  a.fs = attrs.get_float("freq_scale") * (inverse ? -1.0 : 1.0);
  a.log2_base = std::log2(attrs.get_float("base"));
  a.theta_scale = std::pow(float(attrs.get_float("base")), -2.0f / float(a.n_rot));
  return a;
}

// cos and sin (in C: f32, or f64 for f64 data) of pair c at position pos.
template <class C, class F>
__device__ __forceinline__ void rope_cos_sin(const RopeArgs& a, int64_t c, double pos,
                                             const F* factors, C& cv, C& sv) {
  if constexpr (std::is_same_v<C, float>) {
    // The CPU's (ggml's) f32 angles: pos * theta_scale^c multiplied pair by pair, then
    // freq_scale * theta / factor; what llama.cpp rotates by, so greedy tokens follow it.
    float theta = float(pos);
    for (int64_t j = 0; j < c; ++j) theta *= a.theta_scale;
    const float ff = factors ? float(load(factors[c])) : 1.0f;
    sincosf(float(a.fs) * (theta / ff), &sv, &cv);
  } else {
    // f64 data: base^(-2c / n_rot) as exp2 of a product with log2(base) (the host's).
    double freq = exp2(-2.0 * double(c) / double(a.n_rot) * a.log2_base);
    if (factors) freq /= double(load(factors[c]));
    double sd, cd;
    sincos(pos * a.fs * freq, &sd, &cd);
    cv = C(cd), sv = C(sd);
  }
}

// Where pair c of a head sits: dims i0 and i1.
__device__ __forceinline__ void rope_pair(const RopeArgs& a, int64_t c, int64_t& i0, int64_t& i1) {
  i0 = a.neox ? c : 2 * c;
  i1 = i0 + (a.neox ? a.half : 1);
}

// Pair c of head x rotated by (cv, sv) into head y.
template <class T, class C>
__device__ __forceinline__ void rope_rotate(const RopeArgs& a, int64_t c, C cv, C sv, const T* x,
                                            T* y) {
  int64_t i0, i1;
  rope_pair(a, c, i0, i1);
  const C x0 = C(load(x[i0])), x1 = C(load(x[i1]));
  y[i0] = store<T>(x0 * cv - x1 * sv);
  y[i1] = store<T>(x0 * sv + x1 * cv);
}

template <class C>
struct CosSin {
  C cv, sv;
};

// Slot c of a head's work in the rope kernels: pairs c < half rotate (rope_rotate, by the
// CosSin that angle(c) gives), the rest copy dim n_rot + (c - half) through.
template <class T, class Angle>
__device__ __forceinline__ void rope_slot(const RopeArgs& a, int64_t c, const T* x, T* y,
                                          Angle&& angle) {
  if (c >= a.half) {
    const int64_t e = a.n_rot + (c - a.half);
    y[e] = x[e];
    return;
  }
  const auto r = angle(c);
  rope_rotate(a, c, r.cv, r.sv, x, y);
}

}  // namespace rlx::cuda
