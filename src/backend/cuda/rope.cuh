// rope's angles, shared by the rope kernel (llm.cu) and the decode attention that rotates
// its own q and k rows (llm_attention.cu, rope_attention_cached): both rotate by the same
// f32 cos / sin. The angle is computed in double, as on the CPU (at position 4000 an f32
// angle is already ~2e-4 rad off).
#pragma once

#include <cmath>

#include "backend/cuda/kernels.cuh"
#include "rlx/attrs.h"
#include "rlx/error.h"

namespace rlx::cuda {

struct RopeArgs {
  int64_t rows, heads, d, half, n_rot;
  double log2_base, fs;
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
  return a;
}

// cos and sin (in C: f32, or f64 for f64 data) of pair c at position pos.
template <class C, class F>
__device__ __forceinline__ void rope_cos_sin(const RopeArgs& a, int64_t c, double pos,
                                             const F* factors, C& cv, C& sv) {
  // base^(-2c / n_rot) as exp2 of a product with log2(base) (the host's): a relative
  // error of ~1e-16 in the frequency, far below the f32 rounding of cos and sin.
  double freq = exp2(-2.0 * double(c) / double(a.n_rot) * a.log2_base);
  if (factors) freq /= double(load(factors[c]));
  double sd, cd;
  sincos(pos * a.fs * freq, &sd, &cd);
  cv = C(cd), sv = C(sd);
}

// Where pair c of a head sits: dims i0 and i1.
__device__ __forceinline__ void rope_pair(const RopeArgs& a, int64_t c, int64_t& i0, int64_t& i1) {
  i0 = a.neox ? c : 2 * c;
  i1 = i0 + (a.neox ? a.half : 1);
}

}  // namespace rlx::cuda
