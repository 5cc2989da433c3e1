// Linear algebra: matmul (NumPy) and dot_general (XLA DotGeneral).
#include <algorithm>

#include "ops/families.h"
#include "ops/infer_util.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;

// Both operands share one numeric dtype.
void expect_numeric_pair(const InferContext& ctx) {
  expect_same_dtype(ctx, 0, 1);
  expect_numeric(ctx, 0);
}

Types infer_matmul(const InferContext& ctx) {
  expect_numeric_pair(ctx);
  expect_min_rank(ctx, 0, 1);
  expect_min_rank(ctx, 1, 1);
  Shape a = ctx.shape(0), b = ctx.shape(1);
  // 1-D operands act as a row (a) or column (b) whose unit dim is dropped afterwards.
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), Dim(1));
  if (b_vec) b.push_back(Dim(1));
  unify_dims(ctx, a.back(), b[b.size() - 2],
             cat("contraction dims of ", ctx.input(0).str(), " and ", ctx.input(1).str()));
  Shape out = broadcast_shapes(ctx, Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  return {{ctx.dtype(0), out}};
}

// The normalised batch and contracting axes of one operand; none may repeat.
struct Axes {
  std::vector<int64_t> batch, contracting;
};

Axes operand_axes(const InferContext& ctx, size_t i, const char* side) {
  const auto& attrs = ctx.attrs();
  const IntList& batch = attrs.get_ints(cat(side, "_batch"));
  const IntList& contr = attrs.get_ints(cat(side, "_contracting"));
  int64_t r = ctx.rank(i);
  Axes ax;
  for (int64_t a : batch) ax.batch.push_back(normalize_axis(ctx, a, r, cat(side, "_batch")));
  for (int64_t a : contr)
    ax.contracting.push_back(normalize_axis(ctx, a, r, cat(side, "_contracting")));
  std::vector<int64_t> all = ax.batch;
  all.insert(all.end(), ax.contracting.begin(), ax.contracting.end());
  std::sort(all.begin(), all.end());
  if (std::adjacent_find(all.begin(), all.end()) != all.end())
    ctx.fail("expected distinct axes across ", side, "_batch and ", side, "_contracting, got ",
             list_str(batch), " and ", list_str(contr), " for ", ctx.input(i).str());
  return ax;
}

Types infer_dot_general(const InferContext& ctx) {
  expect_numeric_pair(ctx);
  const auto& attrs = ctx.attrs();
  for (const char* kind : {"batch", "contracting"}) {
    const IntList &l = attrs.get_ints(cat("lhs_", kind)), &r = attrs.get_ints(cat("rhs_", kind));
    if (l.size() != r.size())
      ctx.fail("expected lhs_", kind, " and rhs_", kind, " of equal length, got ", list_str(l),
               " and ", list_str(r));
  }
  Axes la = operand_axes(ctx, 0, "lhs"), ra = operand_axes(ctx, 1, "rhs");
  const Shape &a = ctx.shape(0), &b = ctx.shape(1);
  Shape out;
  for (size_t i = 0; i < la.batch.size(); ++i)
    out.push_back(unify_dims(ctx, a[size_t(la.batch[i])], b[size_t(ra.batch[i])],
                             cat("batch dims ", la.batch[i], " and ", ra.batch[i], " of ",
                                 ctx.input(0).str(), " and ", ctx.input(1).str())));
  for (size_t i = 0; i < la.contracting.size(); ++i)
    unify_dims(ctx, a[size_t(la.contracting[i])], b[size_t(ra.contracting[i])],
               cat("contracting dims ", la.contracting[i], " and ", ra.contracting[i], " of ",
                   ctx.input(0).str(), " and ", ctx.input(1).str()));
  // Free dims: every axis that is neither batch nor contracting, in order.
  auto append_free = [&](const Shape& s, const Axes& ax) {
    for (int64_t d = 0; d < int64_t(s.size()); ++d) {
      auto used = [&](const std::vector<int64_t>& v) {
        return std::find(v.begin(), v.end(), d) != v.end();
      };
      if (!used(ax.batch) && !used(ax.contracting)) out.push_back(s[size_t(d)]);
    }
  };
  append_free(a, la);
  append_free(b, ra);
  return {{ctx.dtype(0), out}};
}

}  // namespace

void register_linalg_ops(OpRegistry& r) {
  OpDef mm;
  mm.name = "matmul";
  mm.arity(2);
  mm.doc = "Matrix product with NumPy matmul semantics (1-D operands, broadcast batch dims).";
  mm.infer = infer_matmul;
  r.add(std::move(mm));

  OpDef dg;
  dg.name = "dot_general";
  dg.arity(2)
      .attr("lhs_contracting", AttrKind::Ints)
      .attr("rhs_contracting", AttrKind::Ints)
      .attr("lhs_batch", AttrKind::Ints, IntList{})
      .attr("rhs_batch", AttrKind::Ints, IntList{});
  dg.doc = "General tensor contraction (XLA DotGeneral): batch, lhs free, rhs free dims.";
  dg.infer = infer_dot_general;
  r.add(std::move(dg));
}

}  // namespace rlx::detail
