// Helpers shared by the shape-family converters (convert_shape.cpp, convert_index.cpp).
#pragma once

#include <optional>
#include <vector>

#include "frontend/onnx/context.h"

namespace rlx::onnx_import {

// Input i as integers, required (a missing input is a ValueError naming `what`).
inline std::vector<int64_t> need_ints(const NodeContext& ctx, size_t i, const char* what) {
  auto v = ctx.ints_input(i);
  if (!v) ctx.fail("expected input ", i, " (", what, "), got none");
  return *v;
}

// The product of dims [b, e) of s, or nullopt when one of them is symbolic.
inline std::optional<int64_t> static_product(const Shape& s, int64_t b, int64_t e) {
  int64_t p = 1;
  for (int64_t i = b; i < e; ++i) {
    if (!s[size_t(i)].is_static()) return std::nullopt;
    p *= s[size_t(i)].value();
  }
  return p;
}

// The static dims of v (NotSupported naming `what` when one is symbolic).
inline std::vector<int64_t> need_static_shape(const NodeContext& ctx, Value v, const char* what) {
  if (!v.type().is_static())
    ctx.unsupported("expected ", what, " of static shape, got ", v.type().str());
  return static_sizes(v.shape());
}

}  // namespace rlx::onnx_import
