// sparse.* op definitions: type inference, the vjp / jvp / vmap rules (written as graph
// ops: other sparse.* ops and core arithmetic), registration, and the graph builders of
// sparse.h. Public API only.
#include <mutex>
#include <string>

#include "rlx/rlx.h"
#include "rlx_sparse/sparse.h"

namespace rlx::sparse {

void register_product_kernels();    // cpu_products.cpp
void register_direct_kernels();     // cpu_direct.cpp
void register_iterative_kernels();  // cpu_iterative.cpp
#ifdef RLX_HAVE_CUDA
void register_cuda_kernels();  // cuda_products.cu (and cuda_iterative.cu)
#endif

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;

// ---- inference ----------------------------------------------------------------------

bool is_index(DType d) { return d == DType::i32 || d == DType::i64; }
bool is_value(DType d) { return d == DType::f32 || d == DType::f64; }

void check_rank1(const InferContext& ctx, size_t i, const char* what) {
  if (ctx.rank(i) != 1) ctx.fail("expected ", what, " of rank 1, got ", ctx.input(i).str());
}

// col_idx and row_ptr at positions c, c + 1; returns the row count.
int64_t check_pattern_types(const InferContext& ctx, size_t c) {
  check_rank1(ctx, c, "col_idx");
  check_rank1(ctx, c + 1, "row_ptr");
  if (!is_index(ctx.dtype(c)))
    ctx.fail_type("expected col_idx of dtype i32 or i64, got ", ctx.input(c).str());
  if (ctx.dtype(c + 1) != ctx.dtype(c))
    ctx.fail_type("expected row_ptr of col_idx's dtype, got ", ctx.input(c + 1).str(),
                  " and col_idx ", ctx.input(c).str());
  const Dim& len = ctx.shape(c + 1)[0];
  if (!len.is_static() || len.value() < 1)
    ctx.fail("expected row_ptr of static length rows + 1 >= 1, got ", ctx.input(c + 1).str());
  return len.value() - 1;
}

// values, col_idx, row_ptr at 0, 1, 2; returns the row count.
int64_t check_csr(const InferContext& ctx) {
  check_rank1(ctx, 0, "values");
  if (!is_value(ctx.dtype(0)))
    ctx.fail_type("expected values of dtype f32 or f64, got ", ctx.input(0).str());
  int64_t rows = check_pattern_types(ctx, 1);
  if (!(ctx.shape(0)[0] == ctx.shape(1)[0]))
    ctx.fail("expected values and col_idx of one length (nnz), got ", ctx.input(0).str(), " and ",
             ctx.input(1).str());
  return rows;
}

void check_operand(const InferContext& ctx, size_t i, DType dtype, bool matrix, const char* what) {
  if (ctx.dtype(i) != dtype)
    ctx.fail_type("expected ", what, " of the values' dtype ", dtype_name(dtype), ", got ",
                  ctx.input(i).str());
  if (matrix && ctx.rank(i) < 2)
    ctx.fail("expected ", what, " of rank >= 2 ([..., n, k]), got ", ctx.input(i).str());
  if (!matrix && ctx.rank(i) != 1)
    ctx.fail("expected ", what, " of rank 1, got ", ctx.input(i).str());
}

// The operand's row dim ([n] or [..., n, k]) must be n.
void check_rows(const InferContext& ctx, size_t i, int64_t n, const char* what) {
  const Shape& s = ctx.shape(i);
  const Dim& d = s.size() == 1 ? s[0] : s[s.size() - 2];
  if (!(d == Dim(n))) ctx.fail("expected ", what, " with ", n, " rows, got ", ctx.input(i).str());
}

Shape with_rows(Shape s, int64_t n) {
  (s.size() == 1 ? s[0] : s[s.size() - 2]) = Dim(n);
  return s;
}

int64_t cols_attr(const InferContext& ctx) {
  int64_t c = ctx.attrs().get_int("cols");
  if (c < 0) ctx.fail("expected cols >= 0, got ", c);
  return c;
}

Types infer_product(const InferContext& ctx, bool matrix, bool transpose) {
  int64_t rows = check_csr(ctx);
  check_operand(ctx, 3, ctx.dtype(0), matrix, matrix ? "X" : "x");
  if (!transpose) {
    if (!matrix && !ctx.shape(3)[0].is_static())
      ctx.fail("expected x of static length, got ", ctx.input(3).str());
    return {{ctx.dtype(0), with_rows(ctx.shape(3), rows)}};
  }
  check_rows(ctx, 3, rows, matrix ? "X" : "x");
  return {{ctx.dtype(0), with_rows(ctx.shape(3), cols_attr(ctx))}};
}

Types infer_sddmm(const InferContext& ctx) {
  int64_t rows = check_pattern_types(ctx, 0);
  DType d = ctx.dtype(2);
  if (!is_value(d)) ctx.fail_type("expected U of dtype f32 or f64, got ", ctx.input(2).str());
  check_operand(ctx, 3, d, ctx.rank(2) >= 2, "V");
  const Shape &u = ctx.shape(2), &v = ctx.shape(3);
  if (u.size() != v.size() ||
      (u.size() >= 2 &&
       (!(u.back() == v.back()) || Shape(u.begin(), u.end() - 2) != Shape(v.begin(), v.end() - 2))))
    ctx.fail("expected U [..., rows, k] and V [..., cols, k] with equal ... and k, got ",
             ctx.input(2).str(), " and ", ctx.input(3).str());
  check_rows(ctx, 2, rows, "U");
  return {{d, {ctx.shape(0)[0]}}};
}

// A square system: b [n] or [..., n, k].
void check_system(const InferContext& ctx) {
  int64_t n = check_csr(ctx);
  check_operand(ctx, 3, ctx.dtype(0), ctx.rank(3) >= 2, "b");
  check_rows(ctx, 3, n, "b");
}

Types infer_direct(const InferContext& ctx) {
  check_system(ctx);
  return {ctx.input(3)};
}

Types infer_iterative(const InferContext& ctx) {
  check_system(ctx);
  if (ctx.attrs().get_float("tol") < 0)
    ctx.fail("expected tol >= 0, got ", ctx.attrs().get_float("tol"));
  if (ctx.attrs().has("restart") && ctx.attrs().get_int("restart") < 1)
    ctx.fail("expected restart >= 1, got ", ctx.attrs().get_int("restart"));
  const Shape& b = ctx.shape(3);
  Shape per_rhs;  // [] for b [n]; [..., k] for b [..., n, k]
  if (b.size() >= 2) {
    per_rhs.assign(b.begin(), b.end() - 2);
    per_rhs.push_back(b.back());
  }
  return {ctx.input(3), {DType::i32, per_rhs}, {ctx.dtype(0), per_rhs}};
}

// ---- rule helpers -------------------------------------------------------------------

int64_t static_rows(Value x, const RuleArgs& a) {
  const Shape& s = x.shape();
  const Dim& d = x.rank() == 1 ? s[0] : s[s.size() - 2];
  if (!d.is_static())
    fail<NotSupported>(rules::rule_op_name(a), "expected an operand with a static row count, got ",
                       x.type().str());
  return d.value();
}

Csr csr_of(const RuleArgs& a, int64_t cols) {
  return {a.inputs[0], a.inputs[1], a.inputs[2], cols};
}

// A x or A^T x for x [n] or [..., n, k].
Value product(const Csr& A, Value x, bool transpose) {
  if (x.rank() == 1) return transpose ? spmv_t(A, x) : spmv(A, x);
  return transpose ? spmm_t(A, x) : spmm(A, x);
}

// sum over ... and k of u[..., row(e), k] v[..., col(e), k].
Value sddmm(const Csr& A, Value u, Value v) {
  return op("sparse.sddmm", {A.col_idx, A.row_ptr, u, v});
}

// ---- products -----------------------------------------------------------------------

// y = A x (transpose: A^T x). dx = A^T g (A g); dvalues = sddmm(g, x) (sddmm(x, g)).
Values product_vjp(const RuleArgs& a, std::span<const Value> ct, bool transpose) {
  Value x = a.inputs[3], g = ct[0];
  int64_t cols = transpose ? a.attrs.get_int("cols") : static_rows(x, a);
  Csr A = csr_of(a, cols);
  Value dx = product(A, g, !transpose);
  Value dv = transpose ? sddmm(A, x, g) : sddmm(A, g, x);
  return {dv, {}, {}, dx};
}

Values product_jvp(const RuleArgs& a, std::span<const Value> t, bool transpose) {
  Value x = a.inputs[3];
  int64_t cols = transpose ? a.attrs.get_int("cols") : static_rows(x, a);
  Csr A = csr_of(a, cols);
  Value out;
  if (t[0].valid()) out = product(A.with_values(t[0]), x, transpose);
  if (t[3].valid()) out = rules::add_any(out, product(A, t[3], transpose));
  return {out};
}

// s = sddmm(U, V): dU = A_c V, dV = A_c^T U with A_c the pattern carrying the cotangent.
Values sddmm_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value U = a.inputs[2], V = a.inputs[3];
  Csr C{ct[0], a.inputs[0], a.inputs[1], static_rows(V, a)};
  return {{}, {}, product(C, V, false), product(C, U, true)};
}

Values sddmm_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value U = a.inputs[2], V = a.inputs[3];
  Csr A{{}, a.inputs[0], a.inputs[1], static_rows(V, a)};
  Value out;
  if (t[2].valid()) out = sddmm(A, t[2], V);
  if (t[3].valid()) out = rules::add_any(out, sddmm(A, U, t[3]));
  return {out};
}

// Batched right-hand sides: a vector operand's batch becomes the columns of one matrix
// call (`matrix_op`, or the op itself when null), a matrix operand's batch its leading
// dim. Batched matrices (values or pattern) are a scan.
VmapResult rhs_vmap(const RuleArgs& a, std::span<const int> in_axes, const char* matrix_op) {
  if (in_axes[0] >= 0 || in_axes[1] >= 0 || in_axes[2] >= 0) return rules::vmap_by_scan(a, in_axes);
  Value x = rules::moveaxis(a.inputs[3], in_axes[3], 0);
  std::vector<Value> ins(a.inputs.begin(), a.inputs.end());
  VmapResult r;
  if (x.rank() == 2) {  // [B, n] -> [n, B]
    ins[3] = rules::moveaxis(x, 0, 1);
    r.outputs = matrix_op ? a.g.apply(matrix_op, ins, a.attrs) : rules::reapply(a, ins);
    r.out_axes.assign(r.outputs.size(), 0);
    r.out_axes[0] = 1;
  } else {
    ins[3] = x;
    r.outputs = rules::reapply(a, ins);
    r.out_axes.assign(r.outputs.size(), 0);
  }
  return r;
}

// ---- solves -------------------------------------------------------------------------

bool transposed(const RuleArgs& a) {
  return a.attrs.has("transpose") && a.attrs.get_bool("transpose");
}

// The op again on another right-hand side (transpose flipped when asked); its x.
Value resolve(const RuleArgs& a, Value b, bool flip) {
  Attrs at = a.attrs;
  if (flip && at.has("transpose")) at.set("transpose", !at.get_bool("transpose"));
  std::vector<Value> ins(a.inputs.begin(), a.inputs.end());
  ins[3] = b;
  return a.g.apply(rules::rule_op_name(a), ins, at)[0];
}

// Symmetric solvers (cholesky, cg) read A as symmetric: their gradients are symmetrised.
bool symmetric(const RuleArgs& a) {
  const std::string& n = rules::rule_op_name(a);
  return n == "sparse.cholesky_solve" || n == "sparse.cg_solve";
}

// x = A^-1 b (A^-T b): lambda = A^-T g (A^-1 g); db = lambda; dvalues = -sddmm(lambda, x)
// (-sddmm(x, lambda)).
Values solve_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value x = a.outputs[0];
  Csr A = csr_of(a, static_rows(x, a));
  Value lam = resolve(a, ct[0], true);
  Value dv;
  if (symmetric(a))
    dv = (sddmm(A, lam, x) + sddmm(A, x, lam)) * -0.5;
  else
    dv = transposed(a) ? -sddmm(A, x, lam) : -sddmm(A, lam, x);
  return {dv, {}, {}, lam};
}

// dx = A^-1 (db - dA x) (A^-T (db - dA^T x)).
Values solve_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value x = a.outputs[0];
  Csr A = csr_of(a, static_rows(x, a));
  Value rhs = t[3].valid() ? t[3] : rules::zeros_like(x);
  if (t[0].valid()) {
    Csr dA = A.with_values(t[0]);
    Value dax = symmetric(a) ? (product(dA, x, false) + product(dA, x, true)) * 0.5
                             : product(dA, x, transposed(a));
    rhs = rhs - dax;
  }
  Values out(a.outputs.size());
  out[0] = resolve(a, rhs, false);
  return out;
}

void add(const char* name, InferFn infer, VjpFn vjp, JvpFn jvp, VmapFn vmap, const char* doc,
         std::vector<AttrSpec> attrs = {}) {
  OpDef d;
  d.name = name;
  d.arity(4);
  d.attrs = std::move(attrs);
  d.infer = std::move(infer);
  d.vjp = std::move(vjp);
  d.jvp = std::move(jvp);
  d.vmap = std::move(vmap);
  d.doc = doc;
  OpRegistry::global().add(std::move(d));
}

template <bool Matrix, bool Transpose>
void add_product(const char* name, const char* matrix_op, const char* doc) {
  std::vector<AttrSpec> attrs;
  if (Transpose) attrs.push_back({"cols", AttrKind::Int, std::nullopt, {}});
  add(
      name, [](const InferContext& c) { return infer_product(c, Matrix, Transpose); },
      [](const RuleArgs& a, std::span<const Value> ct) { return product_vjp(a, ct, Transpose); },
      [](const RuleArgs& a, std::span<const Value> t) { return product_jvp(a, t, Transpose); },
      [matrix_op](const RuleArgs& a, std::span<const int> ax) {
        return rhs_vmap(a, ax, matrix_op);
      },
      doc, std::move(attrs));
}

std::vector<AttrSpec> iterative_attrs(bool nonsymmetric, bool restart) {
  std::vector<AttrSpec> a = {
      {"tol", AttrKind::Float, AttrValue(1e-8), {}},
      {"max_iter", AttrKind::Int, AttrValue(int64_t(-1)), {}},
      {"preconditioner", AttrKind::String, AttrValue("jacobi"), {"jacobi", "none"}}};
  if (nonsymmetric) a.push_back({"transpose", AttrKind::Bool, AttrValue(false), {}});
  if (restart) a.push_back({"restart", AttrKind::Int, AttrValue(int64_t(30)), {}});
  return a;
}

}  // namespace

void register_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    add_product<false, false>("sparse.spmv", "sparse.spmm", "A x: CSR A, x [cols] -> [rows].");
    add_product<false, true>("sparse.spmv_t", "sparse.spmm_t", "A^T x: CSR A, x [rows] -> [cols].");
    add_product<true, false>("sparse.spmm", "sparse.spmm",
                             "A X: CSR A, X [..., cols, k] -> [..., rows, k].");
    add_product<true, true>("sparse.spmm_t", "sparse.spmm_t",
                            "A^T X: CSR A, X [..., rows, k] -> [..., cols, k].");
    add("sparse.sddmm", infer_sddmm, sddmm_vjp, sddmm_jvp, rules::vmap_by_scan,
        "s[e] = sum over ... and k of U[..., row(e), k] V[..., col(e), k] on a CSR pattern.");
    auto vmap = [](const RuleArgs& a, std::span<const int> ax) { return rhs_vmap(a, ax, nullptr); };
    add("sparse.lu_solve", infer_direct, solve_vjp, solve_jvp, vmap,
        "x with A x = b (A^T x = b), CSR A square, b [n] or [..., n, k] (UMFPACK).",
        {{"transpose", AttrKind::Bool, AttrValue(false), {}}});
    add("sparse.cholesky_solve", infer_direct, solve_vjp, solve_jvp, vmap,
        "x with A x = b, CSR A symmetric positive definite (CHOLMOD).");
    add("sparse.cg_solve", infer_iterative, solve_vjp, solve_jvp, vmap,
        "Preconditioned conjugate gradients for a symmetric positive definite CSR A: x, "
        "iterations, relative residual.",
        iterative_attrs(false, false));
    add("sparse.bicgstab_solve", infer_iterative, solve_vjp, solve_jvp, vmap,
        "Preconditioned BiCGSTAB for a square CSR A: x, iterations, relative residual.",
        iterative_attrs(true, false));
    add("sparse.gmres_solve", infer_iterative, solve_vjp, solve_jvp, vmap,
        "Restarted, preconditioned GMRES for a square CSR A: x, iterations, relative residual.",
        iterative_attrs(true, true));
    register_product_kernels();
    register_direct_kernels();
    register_iterative_kernels();
#ifdef RLX_HAVE_CUDA
    register_cuda_kernels();
#endif
  });
}

// ---- graph builders -----------------------------------------------------------------

int64_t Csr::rows() const { return row_ptr.shape()[0].value() - 1; }

Csr constant(Graph& g, const SparseMatrix& m) {
  return with_pattern(m, g.constant(m.values.to_literal()));
}

Csr with_pattern(const SparseMatrix& m, Value values) {
  Graph& g = *values.graph;
  return {values, g.constant(m.col_idx.to_literal()), g.constant(m.row_ptr.to_literal()), m.cols};
}

Csr input(Graph& g, const std::string& prefix, const SparseMatrix& m) {
  std::string p = prefix;
  return {g.input(p + ".values", m.values.type()), g.input(p + ".col_idx", m.col_idx.type()),
          g.input(p + ".row_ptr", m.row_ptr.type()), m.cols};
}

namespace {
std::vector<Value> apply(const char* name, const Csr& a, Value x, Attrs attrs = {}) {
  register_ops();
  return op_n(name, {a.values, a.col_idx, a.row_ptr, x}, std::move(attrs));
}
Attrs iterative(const IterativeOptions& o, bool nonsymmetric, bool restart) {
  Attrs at{{"tol", o.tol}, {"max_iter", o.max_iter}, {"preconditioner", o.preconditioner}};
  if (nonsymmetric) at.set("transpose", o.transpose);
  if (restart) at.set("restart", o.restart);
  return at;
}
Solution solution(std::vector<Value> v) { return {v[0], v[1], v[2]}; }
}  // namespace

Value spmv(const Csr& a, Value x) { return apply("sparse.spmv", a, x)[0]; }
Value spmv_t(const Csr& a, Value x) { return apply("sparse.spmv_t", a, x, {{"cols", a.cols}})[0]; }
Value spmm(const Csr& a, Value x) { return apply("sparse.spmm", a, x)[0]; }
Value spmm_t(const Csr& a, Value x) { return apply("sparse.spmm_t", a, x, {{"cols", a.cols}})[0]; }
Value lu_solve(const Csr& a, Value b, bool transpose) {
  return apply("sparse.lu_solve", a, b, {{"transpose", transpose}})[0];
}
Value cholesky_solve(const Csr& a, Value b) { return apply("sparse.cholesky_solve", a, b)[0]; }
Solution cg_solve(const Csr& a, Value b, const IterativeOptions& o) {
  return solution(apply("sparse.cg_solve", a, b, iterative(o, false, false)));
}
Solution bicgstab_solve(const Csr& a, Value b, const IterativeOptions& o) {
  return solution(apply("sparse.bicgstab_solve", a, b, iterative(o, true, false)));
}
Solution gmres_solve(const Csr& a, Value b, const IterativeOptions& o) {
  return solution(apply("sparse.gmres_solve", a, b, iterative(o, true, true)));
}

}  // namespace rlx::sparse
