// Sliding-window geometry shared by conv, conv_transpose and the pools: the spatial dims
// of [N, C, D1..Dk] padded to three (leading dims of size 1, kernel 1, stride 1, no
// padding), with the padding resolved from `pads` / `auto_pad`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/isa.h"
#include "rlx/attrs.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

struct Window {
  int64_t k = 0;  // spatial rank
  int64_t in[3], ker[3], out[3], stride[3], dil[3];
  int64_t pad[3], pad_end[3];                       // resolved padding before and after each dim
  int64_t in_size = 1, ker_size = 1, out_size = 1;  // products over the dims

  // Offsets in row-major [D0, D1, D2] blocks.
  int64_t in_off(int64_t d, int64_t h, int64_t w) const { return (d * in[1] + h) * in[2] + w; }
  int64_t out_off(int64_t d, int64_t h, int64_t w) const { return (d * out[1] + h) * out[2] + w; }
};

// x: [N, C, D...]; y: [N, M, O...]; kernel: the k window sizes. For conv_transpose
// (`transpose`), "same" padding is what makes y exactly D * stride: the total of
// stride * (D - 1) + output_padding + dilated kernel - O, at least 0 (as ONNX Runtime).
inline Window make_window(const Attrs& a, const std::vector<int64_t>& x,
                          const std::vector<int64_t>& y, std::span<const int64_t> kernel,
                          bool transpose = false) {
  Window w;
  w.k = int64_t(x.size()) - 2;
  const IntList& strides = a.get_ints("strides");
  const IntList& dils = a.get_ints("dilations");
  const IntList& pads = a.get_ints("pads");
  const std::string& auto_pad = a.get_string("auto_pad");
  const IntList* opad = transpose ? &a.get_ints("output_padding") : nullptr;
  int64_t lead = 3 - w.k;
  for (int64_t i = 0; i < 3; ++i) {
    w.in[i] = w.ker[i] = w.out[i] = w.stride[i] = w.dil[i] = 1;
    w.pad[i] = w.pad_end[i] = 0;
  }
  for (int64_t j = 0; j < w.k; ++j) {
    int64_t i = lead + j;
    size_t s = size_t(j);
    w.in[i] = x[s + 2];
    w.out[i] = y[s + 2];
    w.ker[i] = kernel[s];
    w.stride[i] = strides.empty() ? 1 : strides[s];
    w.dil[i] = dils.empty() ? 1 : dils[s];
    int64_t eff = w.dil[i] * (w.ker[i] - 1) + 1;
    if (auto_pad == "explicit") {
      w.pad[i] = pads.empty() ? 0 : pads[s];
      w.pad_end[i] = pads.empty() ? 0 : pads[s + size_t(w.k)];
    } else if (auto_pad != "valid") {
      int64_t total = transpose ? w.stride[i] * (w.in[i] - 1) + (opad->empty() ? 0 : (*opad)[s]) +
                                      eff - w.out[i]
                                : (w.out[i] - 1) * w.stride[i] + eff - w.in[i];
      total = std::max<int64_t>(total, 0);
      w.pad[i] = auto_pad == "same_upper" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad[i];
    }
  }
  for (int64_t i = 0; i < 3; ++i) {
    w.in_size *= w.in[i];
    w.ker_size *= w.ker[i];
    w.out_size *= w.out[i];
  }
  return w;
}

// The taps t in [0, ker) of one window dim whose position start + t * dil lies in
// [lo, hi): [first, last).
struct TapRange {
  int64_t first, last;
};
inline TapRange taps_in(int64_t start, int64_t dil, int64_t ker, int64_t lo, int64_t hi) {
  int64_t first = start >= lo ? 0 : (lo - start + dil - 1) / dil;
  int64_t last = start >= hi ? 0 : std::min(ker, (hi - 1 - start) / dil + 1);
  return {first, std::max(first, last)};
}

// The outputs o in [0, n) with 0 <= o * stride + off < limit: [first, last). For a window
// tap at offset off = tap * dil - pad, the outputs whose input position is inside.
inline TapRange out_range(int64_t off, int64_t stride, int64_t limit, int64_t n) {
  int64_t lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  int64_t hi = limit - 1 - off < 0 ? 0 : std::min(n, (limit - 1 - off) / stride + 1);
  return {lo, std::max(lo, hi)};
}

// Per output index along one window dim: where its window starts, the taps inside the
// input, and the taps inside the input or its padding (count_include_pad's divisor).
struct DimTaps {
  std::vector<int64_t> start, first, last, padded;
};

inline DimTaps dim_taps(const Window& w, int i) {
  DimTaps t;
  for (int64_t o = 0; o < w.out[i]; ++o) {
    int64_t s = o * w.stride[i] - w.pad[i];
    TapRange in = taps_in(s, w.dil[i], w.ker[i], 0, w.in[i]);
    TapRange pad = taps_in(s, w.dil[i], w.ker[i], -w.pad[i], w.in[i] + w.pad_end[i]);
    t.start.push_back(s);
    t.first.push_back(in.first);
    t.last.push_back(in.last);
    t.padded.push_back(pad.last - pad.first);
  }
  return t;
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
