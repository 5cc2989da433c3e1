// stft / istft's framing as their attributes give it, defined once for the ops' rules
// (ops/stft.cpp) and the CPU and CUDA stft kernels: hop_length 0 means n_fft / 4, center
// pads n_fft / 2 on each side, and the window (at most n_fft values) sits in the middle.
#pragma once

#include <algorithm>
#include <cstdint>

#include "rlx/attrs.h"

namespace rlx::detail {

struct Frames {
  int64_t n_fft, hop, pad;  // pad: the center padding on each side (0 without center)
  // Where a window of `len` values starts among a frame's n_fft.
  int64_t window_left(int64_t len) const { return (n_fft - len) / 2; }
};

inline Frames frames_of(const Attrs& a) {
  int64_t n = a.get_int("n_fft"), hop = a.get_int("hop_length");
  return {n, hop > 0 ? hop : std::max<int64_t>(n / 4, 1), a.get_bool("center") ? n / 2 : 0};
}

}  // namespace rlx::detail
