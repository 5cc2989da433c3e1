// The sampling maps of resize (ONNX coordinate transformations and nearest modes), shared
// by the forward kernel (resize.cpp) and its transpose (window_grad.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/isa.h"
#include "rlx/attrs.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

// Where output index o of a dim resized from `in` to `out` samples the input.
inline double source_coord(const std::string& transform, int64_t o, int64_t in, int64_t out,
                           double scale) {
  if (transform == "align_corners")
    return out == 1 ? 0.0 : double(o) * double(in - 1) / double(out - 1);
  if (transform == "asymmetric") return double(o) / scale;
  return (double(o) + 0.5) / scale - 0.5;  // half_pixel
}

inline int64_t round_nearest(double x, const std::string& mode) {
  if (mode == "floor") return int64_t(std::floor(x));
  if (mode == "ceil") return int64_t(std::ceil(x));
  double f = std::floor(x);
  if (x - f == 0.5) return int64_t(mode == "round_prefer_ceil" ? f + 1 : f);
  return int64_t(std::round(x));
}

// The samples of one dim: output j reads (1 - w[j]) * in[i0[j]] + w[j] * in[i1[j]] (nearest: i0
// alone).
struct AxisMap {
  std::vector<int64_t> i0, i1;
  std::vector<double> w;
  bool identity = true;
};

inline AxisMap axis_map(const Attrs& a, size_t d, int64_t in, int64_t out, bool linear) {
  const FloatList scales = a.get_floats("scales");
  double scale = scales.empty() ? double(out) / double(in) : scales[d];
  const std::string& transform = a.get_string("coordinate_transformation");
  const std::string& nearest_mode = a.get_string("nearest_mode");
  AxisMap m;
  m.i0.resize(size_t(out));
  m.i1.resize(size_t(out));
  m.w.resize(size_t(out));
  m.identity = in == out;
  for (int64_t j = 0; j < out; ++j) {
    double x = source_coord(transform, j, in, out, scale);
    size_t s = size_t(j);
    if (linear) {
      x = std::clamp(x, 0.0, double(in - 1));
      m.i0[s] = int64_t(std::floor(x));
      m.i1[s] = std::min(m.i0[s] + 1, in - 1);
      m.w[s] = x - double(m.i0[s]);
    } else {
      m.i0[s] = std::clamp<int64_t>(round_nearest(x, nearest_mode), 0, in - 1);
      m.i1[s] = m.i0[s];
    }
    m.identity &= m.i0[s] == j && m.w[s] == 0.0;
  }
  return m;
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
