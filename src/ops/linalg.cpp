// Linear algebra: matmul (NumPy) and dot_general (XLA DotGeneral), with their vjp / jvp
// / vmap rules.
#include <algorithm>
#include <numeric>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/axes.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;

// Both operands share one numeric dtype.
// Numbers of one dtype: real, or complex (BLAS's cgemm / zgemm where a device has them,
// else the four real products of complex_products).
void expect_numeric_pair(const InferContext& ctx) {
  expect_same_dtype(ctx, 0, 1);
  if (!is_complex(ctx.dtype(0))) expect_numeric(ctx, 0);
}

Types infer_matmul(const InferContext& ctx) {
  expect_numeric_pair(ctx);
  expect_min_rank(ctx, 0, 1);
  expect_min_rank(ctx, 1, 1);
  return {{ctx.dtype(0), matmul_shape(ctx, ctx.shape(0), ctx.shape(1))}};
}

// The normalised batch and contracting axes of one operand; none may repeat.
struct Axes {
  std::vector<int64_t> batch, contracting;
};

Axes operand_axes(const InferContext& ctx, size_t i, const char* side) {
  const auto& attrs = ctx.attrs();
  const IntList& batch = attrs.get_ints(str_cat(side, "_batch"));
  const IntList& contr = attrs.get_ints(str_cat(side, "_contracting"));
  int64_t r = ctx.rank(i);
  Axes ax;
  for (int64_t a : batch) ax.batch.push_back(normalize_axis(ctx, a, r, str_cat(side, "_batch")));
  for (int64_t a : contr)
    ax.contracting.push_back(normalize_axis(ctx, a, r, str_cat(side, "_contracting")));
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
    const IntList &l = attrs.get_ints(str_cat("lhs_", kind)),
                  &r = attrs.get_ints(str_cat("rhs_", kind));
    if (l.size() != r.size())
      ctx.fail("expected lhs_", kind, " and rhs_", kind, " of equal length, got ", list_str(l),
               " and ", list_str(r));
  }
  Axes la = operand_axes(ctx, 0, "lhs"), ra = operand_axes(ctx, 1, "rhs");
  const Shape &a = ctx.shape(0), &b = ctx.shape(1);
  Shape out;
  for (size_t i = 0; i < la.batch.size(); ++i)
    out.push_back(unify_dims(ctx, a[size_t(la.batch[i])], b[size_t(ra.batch[i])],
                             str_cat("batch dims ", la.batch[i], " and ", ra.batch[i], " of ",
                                     ctx.input(0).str(), " and ", ctx.input(1).str())));
  for (size_t i = 0; i < la.contracting.size(); ++i)
    unify_dims(ctx, a[size_t(la.contracting[i])], b[size_t(ra.contracting[i])],
               str_cat("contracting dims ", la.contracting[i], " and ", ra.contracting[i], " of ",
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

// ---- rules --------------------------------------------------------------------------

IntList range(int64_t lo, int64_t hi) {
  IntList v;
  for (int64_t i = lo; i < hi; ++i) v.push_back(i);
  return v;
}

IntList concat(IntList a, const IntList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// x with its last two axes swapped (the perm is static: ranks are).
Value swap_last2(Value x) {
  IntList perm = range(0, x.rank());
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  return op("transpose", {x}, {{"perm", perm}});
}

Value dot_general(Value lhs, Value rhs, IntList lc, IntList rc, IntList lb = {}, IntList rb = {}) {
  return op("dot_general", {lhs, rhs},
            {{"lhs_contracting", std::move(lc)},
             {"rhs_contracting", std::move(rc)},
             {"lhs_batch", std::move(lb)},
             {"rhs_batch", std::move(rb)}});
}

// dA = ct @ B^T, dB = A^T @ ct on the operands as matrices (1-D ones as a row / column),
// summed over broadcast batch dims. When one operand has no batch dims (a weight), its
// gradient contracts the other's batch dims in one product instead of summing a batch of
// per-example products afterwards.
std::vector<Value> matmul_vjp(const RuleArgs& a, std::span<const Value> cts) {
  Value x = a.inputs[0], y = a.inputs[1];
  if (!rules::has_tangents(x.dtype())) return {Value{}, Value{}};
  bool xv = x.rank() == 1, yv = y.rank() == 1;
  Value x2 = xv ? rules::expand_dims(x, {0}) : x;
  Value y2 = yv ? rules::expand_dims(y, {1}) : y;
  Value ct = cts[0];
  int64_t r = ct.rank() + int64_t(xv) + int64_t(yv);  // the rank of the matrix product
  IntList unit;                                       // the axes that 1-D operands dropped
  if (xv) unit.push_back(r - 2);
  if (yv) unit.push_back(r - 1);
  if (!unit.empty()) ct = rules::expand_dims(ct, unit);
  int64_t nx = x2.rank() - 2, ny = y2.rank() - 2, nb = r - 2;  // batch ranks
  Value dx, dy;
  if (ny == 0) {
    dx = dot_general(ct, y2, {nb + 1}, {1});
    dy = dot_general(x2, ct, range(0, nb + 1), range(0, nb + 1));
  } else if (nx == 0) {
    dx = dot_general(ct, y2, concat(range(0, nb), {nb + 1}), concat(range(0, ny), {ny + 1}));
    dy = matmul(swap_last2(x2), ct);
  } else {
    dx = rules::unbroadcast(matmul(ct, swap_last2(y2)), x2);
    dy = rules::unbroadcast(matmul(swap_last2(x2), ct), y2);
  }
  if (xv) dx = rules::reshape_like(dx, x);
  if (yv) dy = rules::reshape_like(dy, y);
  return {dx, dy};
}

std::vector<Value> matmul_jvp(const RuleArgs& a, std::span<const Value> ts) {
  Value dx = ts[0].valid() ? matmul(ts[0], a.inputs[1]) : Value{};
  Value dy = ts[1].valid() ? matmul(a.inputs[0], ts[1]) : Value{};
  return {rules::add_any(dx, dy)};
}

// Batches at axis 0; 1-D operands become a row / column (dropped again at the end), and
// a batched operand gets size-1 axes after the batch so that its batch axis lines up
// left of every batch dim of the other (unbatched operands broadcast as they are).
VmapResult matmul_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  std::vector<Value> in = rules::batch_to_front(a, in_axes);
  int64_t nb = 0;  // batch rank of the product, without the vmap axis
  bool vec[2];
  for (int i = 0; i < 2; ++i) {
    int64_t rank = in[size_t(i)].rank() - (in_axes[size_t(i)] >= 0);
    vec[i] = rank == 1;
    nb = std::max(nb, std::max<int64_t>(rank, 2) - 2);
  }
  for (int i = 0; i < 2; ++i) {
    Value& v = in[size_t(i)];
    bool batched = in_axes[size_t(i)] >= 0;
    if (vec[i]) v = rules::expand_dims(v, {i == 0 ? v.rank() - 1 : v.rank()});
    int64_t pad = nb + 3 - v.rank();
    if (batched && pad > 0) v = rules::expand_dims(v, range(1, 1 + pad));
  }
  Value out = matmul(in[0], in[1]);
  IntList unit;
  if (vec[0]) unit.push_back(nb + 1);
  if (vec[1]) unit.push_back(nb + 2);
  if (!unit.empty()) out = op("squeeze", {out}, {{"axes", unit}});
  return {{out}, {0}};
}

// One operand's normalised dot_general axes.
struct DotAxes {
  IntList batch, contracting, free;
};

DotAxes dot_axes(const RuleArgs& a, size_t i, const char* side) {
  int64_t rank = a.inputs[i].rank();
  auto norm = [&](const char* kind) {
    IntList v = a.attrs.get_ints(str_cat(side, "_", kind));
    for (int64_t& d : v) d = norm_axis(d, rank);
    return v;
  };
  DotAxes ax{norm("batch"), norm("contracting"), {}};
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(ax.batch.begin(), ax.batch.end(), d) == ax.batch.end() &&
        std::find(ax.contracting.begin(), ax.contracting.end(), d) == ax.contracting.end())
      ax.free.push_back(d);
  return ax;
}

// The cotangent of operand x (the classic XLA transpose rule): contract ct's dims of the
// other operand y's free axes with those axes, batch with batch. The product holds x's
// batch, free and contracting dims (these in the order of y's sorted contracting dims);
// ct goes first or second, whichever lays them out as x is, else it is transposed back.
// `x_first`: x's free dims come first in ct.
Value dot_general_ct(Value ct, Value y, const DotAxes& xa, const DotAxes& ya, bool x_first) {
  int64_t nb = int64_t(xa.batch.size());
  int64_t y_start = x_first ? nb + int64_t(xa.free.size()) : nb;
  IntList ct_y = range(y_start, y_start + int64_t(ya.free.size()));
  std::vector<size_t> order(ya.contracting.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t i, size_t j) { return ya.contracting[i] < ya.contracting[j]; });
  IntList contr;
  for (size_t i : order) contr.push_back(xa.contracting[i]);
  IntList ct_first = concat(concat(xa.batch, xa.free), contr);
  IntList y_first = concat(concat(xa.batch, contr), xa.free);
  auto identity = [](const IntList& v) {
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] != int64_t(i)) return false;
    return true;
  };
  if (identity(y_first) && !identity(ct_first))
    return dot_general(y, ct, ya.free, ct_y, ya.batch, range(0, nb));
  Value r = dot_general(ct, y, ct_y, ya.free, range(0, nb), ya.batch);
  if (identity(ct_first)) return r;
  IntList perm(ct_first.size());  // perm[d]: the axis of r that is x's axis d
  for (size_t p = 0; p < ct_first.size(); ++p) perm[size_t(ct_first[p])] = int64_t(p);
  return op("transpose", {r}, {{"perm", perm}});
}

std::vector<Value> dot_general_vjp(const RuleArgs& a, std::span<const Value> cts) {
  if (!rules::has_tangents(a.inputs[0].dtype())) return {Value{}, Value{}};
  DotAxes la = dot_axes(a, 0, "lhs"), ra = dot_axes(a, 1, "rhs");
  return {dot_general_ct(cts[0], a.inputs[1], la, ra, true),
          dot_general_ct(cts[0], a.inputs[0], ra, la, false)};
}

std::vector<Value> dot_general_jvp(const RuleArgs& a, std::span<const Value> ts) {
  Value dl = ts[0].valid() ? op("dot_general", {ts[0], a.inputs[1]}, a.attrs) : Value{};
  Value dr = ts[1].valid() ? op("dot_general", {a.inputs[0], ts[1]}, a.attrs) : Value{};
  return {rules::add_any(dl, dr)};
}

// Both batched: the vmap axis becomes a new leading batch dim of both (output axis 0).
// One batched: it is a free dim of that operand (no copy of the other), so it lands where
// that operand's first free dim does.
VmapResult dot_general_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  std::vector<Value> in = rules::batch_to_front(a, in_axes);
  Attrs attrs = a.attrs;
  bool both = in_axes[0] >= 0 && in_axes[1] >= 0;
  for (size_t i = 0; i < 2; ++i) {
    if (in_axes[i] < 0) continue;
    const char* side = i == 0 ? "lhs" : "rhs";
    int64_t rank = in[i].rank() - 1;  // unbatched
    for (const char* kind : {"_batch", "_contracting"}) {
      IntList v = a.attrs.get_ints(str_cat(side, kind));
      for (int64_t& d : v) d = norm_axis(d, rank) + 1;
      if (both && std::string_view(kind) == "_batch") v.insert(v.begin(), 0);
      attrs.set(str_cat(side, kind), v);
    }
  }
  Value out = op("dot_general", {in[0], in[1]}, attrs);
  if (both) return {{out}, {0}};
  int64_t nb = int64_t(a.attrs.get_ints("lhs_batch").size());
  int64_t lfree = a.inputs[0].rank() - (in_axes[0] >= 0) - nb -
                  int64_t(a.attrs.get_ints("lhs_contracting").size());
  return {{out}, {int(in_axes[0] >= 0 ? nb : nb + lfree)}};
}

// A complex product from real ones, for a device without complex GEMMs:
// (a + ib)(c + id) = (ac - bd) + i(ad + bc), each product the op itself (same attributes).
std::vector<Value> complex_products(const RuleArgs& a) {
  Value x = a.inputs[0], y = a.inputs[1];
  const std::string& name = rules::rule_op_name(a);
  if (!is_complex(x.dtype()))
    fail<NotSupported>(name, "expected complex operands to multiply by parts, got ",
                       x.type().str());
  auto mm = [&](Value p, Value q) { return op(name, {p, q}, a.attrs); };
  Value xr = op("real", {x}), xi = op("imag", {x}), yr = op("real", {y}), yi = op("imag", {y});
  return {op("complex", {mm(xr, yr) - mm(xi, yi), mm(xr, yi) + mm(xi, yr)})};
}

}  // namespace

void register_linalg_ops(OpRegistry& r) {
  OpDef mm;
  mm.name = "matmul";
  mm.amp = AmpRole::low;
  mm.arity(2);
  mm.doc = "Matrix product with NumPy matmul semantics (1-D operands, broadcast batch dims).";
  mm.infer = infer_matmul;
  mm.vjp = matmul_vjp;
  mm.jvp = matmul_jvp;
  mm.vmap = matmul_vmap;
  mm.decompose = complex_products;
  r.add(std::move(mm));

  OpDef dg;
  dg.name = "dot_general";
  dg.amp = AmpRole::low;
  dg.arity(2)
      .attr("lhs_contracting", AttrKind::Ints)
      .attr("rhs_contracting", AttrKind::Ints)
      .attr("lhs_batch", AttrKind::Ints, IntList{})
      .attr("rhs_batch", AttrKind::Ints, IntList{});
  dg.doc = "General tensor contraction (XLA DotGeneral): batch, lhs free, rhs free dims.";
  dg.infer = infer_dot_general;
  dg.vjp = dot_general_vjp;
  dg.jvp = dot_general_jvp;
  dg.vmap = dot_general_vmap;
  dg.decompose = complex_products;
  r.add(std::move(dg));
}

}  // namespace rlx::detail
