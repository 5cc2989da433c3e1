// Sliding-window geometry for the pool kernels: backend/cpu/window.h's Window (spatial dims
// padded to three, padding resolved) as a struct kernels take by value, and the per-output
// tap ranges the CPU kernels keep in tables (DimTaps), computed where they are needed.
#pragma once

#include "backend/cpu/window.h"
#include "backend/cuda/kernels.cuh"

namespace rlx::cuda {

struct Win {
  int64_t in[3], ker[3], out[3], stride[3], dil[3], pad[3], pad_end[3];
  int64_t in_size, out_size;
};

inline Win to_win(const cpu::Window& w) {
  Win v;
  for (int i = 0; i < 3; ++i) {
    v.in[i] = w.in[i];
    v.ker[i] = w.ker[i];
    v.out[i] = w.out[i];
    v.stride[i] = w.stride[i];
    v.dil[i] = w.dil[i];
    v.pad[i] = w.pad[i];
    v.pad_end[i] = w.pad_end[i];
  }
  v.in_size = w.in_size;
  v.out_size = w.out_size;
  return v;
}

// The window of output index o along dim i: its start, the taps [first, last) inside the
// input, and how many taps lie inside the input or its padding (count_include_pad's divisor;
// ceil mode's overhang past the end padding does not count). As window.h's taps_in.
struct Taps {
  int64_t start, first, last, padded;
};

__device__ __forceinline__ void taps_in(int64_t start, int64_t dil, int64_t ker, int64_t lo,
                                        int64_t hi, int64_t& first, int64_t& last) {
  first = start >= lo ? 0 : (lo - start + dil - 1) / dil;
  last = start >= hi ? 0 : min(ker, (hi - 1 - start) / dil + 1);
  if (last < first) last = first;
}

__device__ __forceinline__ Taps taps_of(const Win& w, int i, int64_t o) {
  Taps t;
  t.start = o * w.stride[i] - w.pad[i];
  taps_in(t.start, w.dil[i], w.ker[i], 0, w.in[i], t.first, t.last);
  int64_t pf, pl;
  taps_in(t.start, w.dil[i], w.ker[i], -w.pad[i], w.in[i] + w.pad_end[i], pf, pl);
  t.padded = pl - pf;
  return t;
}

// Output r of a plane as (od, oh, ow).
__device__ __forceinline__ void out_index(const Win& w, int64_t r, int64_t (&o)[3]) {
  o[2] = r % w.out[2];
  r /= w.out[2];
  o[1] = r % w.out[1];
  o[0] = r / w.out[1];
}

// Calls f(plane offset) for each tap of the output with these taps that lies inside the
// input, in row-major tap order (the order the CPU folds them in).
template <class F>
__device__ __forceinline__ void each_tap(const Win& w, const Taps (&t)[3], F&& f) {
  for (int64_t kd = t[0].first; kd < t[0].last; ++kd) {
    int64_t id = t[0].start + kd * w.dil[0];
    for (int64_t kh = t[1].first; kh < t[1].last; ++kh) {
      int64_t row = (id * w.in[1] + t[1].start + kh * w.dil[1]) * w.in[2];
      for (int64_t kw = t[2].first; kw < t[2].last; ++kw) f(row + t[2].start + kw * w.dil[2]);
    }
  }
}

// NaN-propagating maximum: once a NaN is seen it stays.
template <class C>
__device__ __forceinline__ C max_nan(C m, C v) {
  return v > m || v != v ? v : m;
}

}  // namespace rlx::cuda
