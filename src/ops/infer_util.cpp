#include "ops/infer_util.h"

#include <algorithm>
#include <cmath>

#include "rlx/axes.h"

namespace rlx::detail {

std::string describe_input(const InferContext& ctx, size_t i) {
  return str_cat("input ", i, " (", ctx.input(i).str(), ")");
}

Dim broadcast_dim(const InferContext& ctx, const Dim& a, const Dim& b, const Shape& sa,
                  const Shape& sb) {
  if (a.is(1)) return b;
  if (b.is(1)) return a;
  if (a.is_static() && b.is_static()) {
    if (a.value() != b.value())
      ctx.fail("expected broadcastable shapes, got ", shape_str(sa), " and ", shape_str(sb));
    return a;
  }
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  return a.known_equal(b) ? a : Dim::unknown();
}

Shape broadcast_shapes(const InferContext& ctx, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const Dim one(1);
    const Dim& da = i < n - a.size() ? one : a[i - (n - a.size())];
    const Dim& db = i < n - b.size() ? one : b[i - (n - b.size())];
    out[i] = broadcast_dim(ctx, da, db, a, b);
  }
  return out;
}

Shape broadcast_all(const InferContext& ctx) {
  Shape s;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) s = broadcast_shapes(ctx, s, ctx.shape(i));
  return s;
}

int64_t normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= rank)
    ctx.fail("expected ", what, " in [", -rank, ", ", rank, "), got ", axis);
  return norm_axis(axis, rank);
}

std::vector<int64_t> normalize_axes(const InferContext& ctx, const IntList& axes, int64_t rank,
                                    std::string_view what) {
  std::vector<int64_t> out;
  for (int64_t a : axes) out.push_back(normalize_axis(ctx, a, rank, what));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    std::string list;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (i) list += ",";
      list += std::to_string(axes[i]);
    }
    ctx.fail("expected distinct ", what, ", got [", list, "]");
  }
  return out;
}

void expect_dtype(const InferContext& ctx, size_t i, bool ok, std::string_view kind) {
  if (!ok) ctx.fail_type("expected ", kind, " for input ", i, ", got ", ctx.input(i).str());
}
void expect_float(const InferContext& ctx, size_t i) {
  expect_dtype(ctx, i, is_float(ctx.dtype(i)), "a float dtype");
}
void expect_numeric(const InferContext& ctx, size_t i) {
  expect_dtype(ctx, i, !is_bool(ctx.dtype(i)) && !is_complex(ctx.dtype(i)), "a numeric dtype");
}
void expect_integer(const InferContext& ctx, size_t i) {
  expect_dtype(ctx, i, is_integer(ctx.dtype(i)), "an integer dtype");
}
void expect_bool(const InferContext& ctx, size_t i) {
  expect_dtype(ctx, i, is_bool(ctx.dtype(i)), "bool");
}
void expect_at_least(const InferContext& ctx, std::string_view key, double v, double lo) {
  if (!(v >= lo) || !std::isfinite(v))
    ctx.fail("expected attribute '", key, "' >= ", lo, ", got ", v);
}

void expect_same_dtype(const InferContext& ctx, size_t i, size_t j) {
  if (ctx.dtype(i) != ctx.dtype(j))
    ctx.fail_type("expected inputs ", i, " and ", j, " of the same dtype, got ", ctx.input(i).str(),
                  " and ", ctx.input(j).str());
}

void expect_all_float(const InferContext& ctx, size_t n) {
  expect_float(ctx, 0);
  for (size_t i = 1; i < std::min(n, ctx.num_inputs()); ++i) expect_same_dtype(ctx, 0, i);
}

void expect_rank(const InferContext& ctx, size_t i, int64_t rank) {
  if (ctx.rank(i) != rank)
    ctx.fail("expected input ", i, " of rank ", rank, ", got ", ctx.input(i).str());
}
void expect_min_rank(const InferContext& ctx, size_t i, int64_t rank) {
  if (ctx.rank(i) < rank)
    ctx.fail("expected input ", i, " of rank >= ", rank, ", got ", ctx.input(i).str());
}

void expect_broadcastable_to(const InferContext& ctx, size_t i, const Shape& target) {
  const Shape& b = ctx.shape(i);
  bool ok = b.size() <= target.size();
  for (size_t d = 0; ok && d < b.size(); ++d) {
    const Dim& t = target[target.size() - b.size() + d];
    ok = b[d].is(1) || !b[d].is_static() || !t.is_static() || b[d].value() == t.value();
  }
  if (!ok)
    ctx.fail("expected input ", i, " broadcastable to ", shape_str(target), ", got ",
             ctx.input(i).str());
}

Dim dim_add(const Dim& a, int64_t b) {
  if (a.is_static()) return Dim(a.value() + b);
  return b == 0 ? a : Dim::unknown();
}

Dim dim_mul(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value() * b.value());
  if (a.is(1)) return b;
  if (b.is(1)) return a;
  if (a.is(0) || b.is(0)) return Dim(0);
  return Dim::unknown();
}

Dim dim_sum(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(a.value() + b.value());
  if (a.is(0)) return b;
  if (b.is(0)) return a;
  return Dim::unknown();
}

Dim unify_dims(const InferContext& ctx, const Dim& a, const Dim& b, std::string_view what) {
  if (a.is_static() && b.is_static()) {
    if (a.value() != b.value())
      ctx.fail("expected equal ", what, ", got ", a.str(), " and ", b.str());
    return a;
  }
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  if (a.is_unknown()) return b;
  if (b.is_unknown()) return a;
  if (a != b) ctx.fail("expected equal ", what, ", got ", a.str(), " and ", b.str());
  return a;
}

Shape matmul_shape(const InferContext& ctx, Shape a, Shape b) {
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), Dim(1));
  if (b_vec) b.push_back(Dim(1));
  unify_dims(ctx, a.back(), b[b.size() - 2],
             str_cat("contraction dims of ", ctx.input(0).str(), " and ", ctx.input(1).str()));
  Shape out = broadcast_shapes(ctx, Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  return out;
}

}  // namespace rlx::detail
