// Small helpers for rules and decompositions written in core ops, shared by several op
// families (nn, attention, window, the shape families, llm; the public ones are
// rlx/rules.h). Helpers only: each family's rules live beside its definitions.
#pragma once

#include <limits>
#include <span>
#include <vector>

#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

using Values = std::vector<Value>;
using ValueSpan = std::span<const Value>;
using AxisSpan = std::span<const int>;

// lo, lo + 1, …, hi - 1.
inline IntList range(int64_t lo, int64_t hi) {
  IntList r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

inline Value sum_keep(Value x, const IntList& axes) { return rules::sum(x, axes, true); }
// The sum of every element (rank 0 stays as it is).
inline Value sum_all(Value x) { return x.rank() == 0 ? x : sum(x); }
// expand_dims that accepts an empty list.
inline Value expand(Value x, const IntList& axes) {
  return axes.empty() ? x : rules::expand_dims(x, axes);
}
inline Value to(Value x, DType dt) { return x.dtype() == dt ? x : cast(x, dt); }
inline Value select(Value cond, Value a, Value b) { return op("select", {cond, a, b}); }
// Tangent i, or invalid (zero) where there are fewer.
inline Value tangent(ValueSpan t, size_t i) { return i < t.size() ? t[i] : Value{}; }

// The most negative finite value of a float dtype: what masked attention scores become.
inline double lowest_finite(DType dt) {
  switch (dt) {
    case DType::f16:
      return -65504.0;
    case DType::bf16:
      return -3.3895313892515355e38;
    case DType::f32:
      return -double(std::numeric_limits<float>::max());
    default:
      return -std::numeric_limits<double>::max();
  }
}

}  // namespace rlx::detail
