// Shared helpers for infer functions: broadcasting, axis normalisation, dtype checks.
// Every failure names the op through the InferContext.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "rlx/op.h"

namespace rlx::detail {

// An infer function's single output.
inline std::vector<TensorType> one(TensorType t) { return {std::move(t)}; }

// NumPy broadcasting of two dims / shapes. A symbol broadcasts with 1 and with itself;
// against a static size n > 1 it gives n (checked when the symbol is bound); two
// different symbols give the anonymous dim "?".
Dim broadcast_dim(const InferContext& ctx, const Dim& a, const Dim& b, const Shape& sa,
                  const Shape& sb);
Shape broadcast_shapes(const InferContext& ctx, const Shape& a, const Shape& b);
Shape broadcast_all(const InferContext& ctx);  // all inputs' shapes

// Maps axis in [-rank, rank) to [0, rank); fails naming `what` otherwise.
int64_t normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank,
                       std::string_view what = "axis");
// Normalises, checks for duplicates, and sorts.
std::vector<int64_t> normalize_axes(const InferContext& ctx, const IntList& axes, int64_t rank,
                                    std::string_view what = "axes");

// Dtype checks on input i. `kind` names the expectation in the message ("a float").
void expect_float(const InferContext& ctx, size_t i);
void expect_numeric(const InferContext& ctx, size_t i);  // anything but bool
void expect_integer(const InferContext& ctx, size_t i);  // signed or unsigned integer
void expect_bool(const InferContext& ctx, size_t i);
void expect_dtype(const InferContext& ctx, size_t i, bool ok, std::string_view kind);
void expect_same_dtype(const InferContext& ctx, size_t i, size_t j);
// The first `n` inputs (all by default) must be floats of input 0's dtype.
void expect_all_float(const InferContext& ctx, size_t n = SIZE_MAX);
// Attribute `key` = v must be a finite number >= lo (NaN fails too).
void expect_at_least(const InferContext& ctx, std::string_view key, double v, double lo);
// Rank checks on input i.
void expect_rank(const InferContext& ctx, size_t i, int64_t rank);
void expect_min_rank(const InferContext& ctx, size_t i, int64_t rank);
// Input i must broadcast to `target` without changing it.
void expect_broadcastable_to(const InferContext& ctx, size_t i, const Shape& target);

// Dim arithmetic that stays static when it can and becomes "?" when it cannot.
Dim dim_add(const Dim& a, int64_t b);
Dim dim_mul(const Dim& a, const Dim& b);
Dim dim_sum(const Dim& a, const Dim& b);
// Two dims that must agree (e.g. matmul's contraction): fails when both are static and
// differ, or when they are different named symbols; returns the more specific one.
Dim unify_dims(const InferContext& ctx, const Dim& a, const Dim& b, std::string_view what);

// NumPy matmul's result shape for operand shapes a, b (1-D operands act as a row / column
// whose unit dim is dropped; batch dims broadcast); the contraction dims must agree.
Shape matmul_shape(const InferContext& ctx, Shape a, Shape b);

// "[1,2,3]" for messages (Ints or Floats attributes).
template <class T>
std::string list_str(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += str_cat(i ? "," : "", v[i]);
  return s + "]";
}

// The input names for messages: "input 0 (f32[2,3])".
std::string describe_input(const InferContext& ctx, size_t i);

}  // namespace rlx::detail
