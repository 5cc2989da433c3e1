// Gradient checks of the reduce family: reductions, arg reductions, cumsum, matmul and
// dot_general.
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

using Shapes = std::vector<std::vector<int64_t>>;

Attrs axes(IntList ax, bool keepdims = false) { return {{"axes", ax}, {"keepdims", keepdims}}; }

Attrs dims(IntList lc, IntList rc, IntList lb = {}, IntList rb = {}) {
  return {{"lhs_contracting", lc}, {"rhs_contracting", rc}, {"lhs_batch", lb}, {"rhs_batch", rb}};
}

// Reduction cases shared by the smooth reductions: an inner axis, several axes with
// keepdims (one negative), all axes of a tensor with a size-1 dim, and a scalar.
void smooth_reduction(GradTable& t, const std::string& op, double lo, double hi) {
  t.add(grad_check(op, {{3, 4}}, axes({1}), lo, hi, "axis 1"));
  t.add(grad_check(op, {{2, 3, 4}}, axes({0, -1}, true), lo, hi, "axes 0,-1 keepdims"));
  t.add(grad_check(op, {{2, 1, 3}}, axes({}), lo, hi, "all axes"));
  t.add(grad_check(op, {{}}, axes({}), lo, hi, "rank 0"));
}

// max / min: random f64 values are tie free (gaps far above eps). Their second derivative
// is 0 where defined, which hvp checks.
void extreme_reduction(GradTable& t, const std::string& op) {
  t.add(grad_check(op, {{3, 4}}, axes({1}), -1, 1, "axis 1"));
  t.add(grad_check(op, {{2, 3, 2}}, axes({0, 2}, true), -1, 1, "axes 0,2 keepdims"));
  t.add(grad_check(op, {{5}}, axes({}), -1, 1, "all axes"));
  t.add(grad_check(op, {{}}, axes({}), -1, 1, "rank 0"));
}

}  // namespace

GradTable grads_reduce() {
  GradTable t;
  smooth_reduction(t, "sum", -1, 1);
  t.add(grad_check("sum_squares", {{3, 4}, {5}, {}}, {}, -1, 1, "three inputs"));
  smooth_reduction(t, "mean", -1, 1);
  smooth_reduction(t, "logsumexp", -1, 1);
  extreme_reduction(t, "reduce_max");
  extreme_reduction(t, "reduce_min");

  // prod: away from 0 is the smooth case; exact zeros check the zero-aware vjp. Its
  // derivative (hvp) is exact only for groups without zeros, so hvp is off there.
  t.add(with_inputs("prod", {away_from_zero({3, 4}, 1, 0.3)}, axes({1}), "axis 1"));
  t.add(with_inputs("prod", {away_from_zero({2, 3}, 2, 0.3)}, axes({}, true), "all keepdims"));
  t.add(with_inputs("prod", {away_from_zero({2, 1, 3}, 3, 0.3)}, axes({-1}), "axis -1"));
  {
    // Row 0: one zero; row 1: two zeros; row 2: none.
    Tensor x = tensor_of(DType::f64, {3, 3}, {0.5, 0, -1.5, 0, 0.7, 0, 1.2, -0.8, 0.9});
    GradCheck c = with_inputs("prod", {x}, axes({1}), "zeros in the input");
    c.hvp = false;
    t.add(c);
  }

  // l1_norm: |x| has a kink at 0 (inputs away from it); second derivative 0 (hvp checks).
  t.add(with_inputs("l1_norm", {away_from_zero({3, 4}, 4)}, axes({1}), "axis 1"));
  t.add(with_inputs("l1_norm", {away_from_zero({2, 3, 2}, 5)}, axes({0, 2}, true), "keepdims"));
  t.add(with_inputs("l1_norm", {away_from_zero({5}, 6)}, axes({}), "all axes"));
  // l2_norm: not differentiable at a zero norm (random inputs are far from it).
  t.add(grad_check("l2_norm", {{3, 4}}, axes({1}), -1, 1, "axis 1"));
  t.add(grad_check("l2_norm", {{2, 3, 2}}, axes({0, -1}, true), -1, 1, "keepdims"));
  t.add(grad_check("l2_norm", {{5}}, axes({}), -1, 1, "all axes"));

  // argmax / argmin: nondifferentiable, vmap only (ties included, with both tie rules).
  for (const char* op : {"argmax", "argmin"}) {
    auto vmap_only = [&](GradCheck c) {
      c.vjp = c.jvp = c.hvp = false;
      t.add(std::move(c));
    };
    vmap_only(grad_check(op, {{3, 4}}, {{"axis", 1}}, -1, 1, "axis 1"));
    vmap_only(
        grad_check(op, {{2, 3, 4}}, {{"axis", -1}, {"keepdims", true}}, -1, 1, "axis -1 keepdims"));
    vmap_only(with_inputs(op, {tensor_of(DType::i32, {2, 3}, {1, 3, 3, 2, 2, 0})},
                          {{"axis", 1}, {"select_last_index", true}}, "i32 ties, last"));
    vmap_only(with_inputs(op, {tensor_of(DType::i32, {2, 3}, {1, 3, 3, 2, 2, 0})}, {{"axis", 0}},
                          "i32 ties, first"));
  }

  // cumsum: every combination of exclusive / reverse.
  t.add(grad_check("cumsum", {{3, 4}}, {{"axis", 1}}, -1, 1, "axis 1"));
  t.add(grad_check("cumsum", {{2, 3}}, {{"axis", 0}, {"exclusive", true}}, -1, 1, "exclusive"));
  t.add(grad_check("cumsum", {{4}}, {{"reverse", true}}, -1, 1, "reverse"));
  t.add(grad_check("cumsum", {{2, 3, 2}}, {{"axis", -1}, {"exclusive", true}, {"reverse", true}},
                   -1, 1, "exclusive reverse axis -1"));

  // matmul: plain, weight-like rhs (batch contracted in one product), weight-like lhs,
  // broadcast batch dims on both sides, and 1-D operands.
  t.add(grad_check("matmul", {{3, 4}, {4, 2}}, {}, -1, 1, "2-D"));
  t.add(grad_check("matmul", {{2, 3, 4}, {4, 5}}, {}, -1, 1, "batched lhs, 2-D rhs"));
  t.add(grad_check("matmul", {{3, 4}, {2, 4, 5}}, {}, -1, 1, "2-D lhs, batched rhs"));
  t.add(grad_check("matmul", {{2, 1, 3, 2}, {3, 2, 2}}, {}, -1, 1, "broadcast batch"));
  t.add(grad_check("matmul", {{4}, {4}}, {}, -1, 1, "vector . vector"));
  t.add(grad_check("matmul", {{4}, {2, 4, 3}}, {}, -1, 1, "vector @ batch"));
  t.add(grad_check("matmul", {{2, 3, 4}, {4}}, {}, -1, 1, "batch @ vector"));

  // dot_general: a matrix product, a batched one, batch / contracting axes out of order
  // (the vjp's transposes), two contracting axes paired in reverse order, an outer
  // product, and negative axes.
  t.add(grad_check("dot_general", {{3, 4}, {4, 2}}, dims({1}, {0}), -1, 1, "matrix product"));
  t.add(grad_check("dot_general", {{2, 3, 4}, {2, 4, 5}}, dims({2}, {1}, {0}, {0}), -1, 1,
                   "batched"));
  t.add(grad_check("dot_general", {{3, 2, 4}, {4, 5, 2}}, dims({2}, {0}, {1}, {2}), -1, 1,
                   "axes out of order"));
  t.add(grad_check("dot_general", {{2, 3, 4}, {4, 3, 2}}, dims({1, 2}, {1, 0}), -1, 1,
                   "two contracting axes"));
  t.add(grad_check("dot_general", {{3}, {2, 2}}, dims({}, {}), -1, 1, "outer product"));
  t.add(grad_check("dot_general", {{2, 4, 3}, {3, 2}}, dims({-1}, {0}, {0}, {-1}), -1, 1,
                   "negative axes"));
  return t;
}

}  // namespace rlx::test
