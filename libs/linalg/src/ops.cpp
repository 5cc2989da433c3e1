// linalg.* op definitions: type inference and the vjp / jvp rules, written as graph ops
// (core matmul / transpose / arithmetic and other linalg.* ops). Public API only.
#include <mutex>
#include <string>

#include "rlx/rlx.h"
#include "rlx_linalg/linalg.h"

namespace rlx::linalg {

void register_cpu_kernels();  // cpu_kernels.cpp
#ifdef RLX_HAVE_CUDA
void register_cuda_kernels();  // cuda_kernels.cu
#endif

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;

// ---- inference ----------------------------------------------------------------------

void check_float(const InferContext& ctx, size_t i, const char* what) {
  DType d = ctx.dtype(i);
  if (d != DType::f32 && d != DType::f64)
    ctx.fail_type("expected ", what, " of dtype f32 or f64, got ", ctx.input(i).str());
}

void check_matrix(const InferContext& ctx, size_t i, const char* what) {
  check_float(ctx, i, what);
  if (ctx.rank(i) < 2)
    ctx.fail("expected ", what, " of rank >= 2 (a [..., m, n] matrix), got ", ctx.input(i).str());
}

void check_square(const InferContext& ctx, size_t i, const char* what) {
  check_matrix(ctx, i, what);
  const Shape& s = ctx.shape(i);
  if (!(s[s.size() - 1] == s[s.size() - 2]))
    ctx.fail("expected a square ", what, " [..., n, n], got ", ctx.input(i).str());
}

Shape batch_of(const Shape& s, size_t keep) { return Shape(s.begin(), s.end() - long(keep)); }

// A (matrix, [..., r, c]) and B (right-hand sides, [..., r, k]) of one dtype, equal batch
// dims, equal row counts.
void check_rhs(const InferContext& ctx) {
  check_matrix(ctx, 1, "B");
  if (ctx.dtype(0) != ctx.dtype(1))
    ctx.fail_type("expected A and B of one dtype, got ", ctx.input(0).str(), " and ",
                  ctx.input(1).str());
  const Shape &a = ctx.shape(0), &b = ctx.shape(1);
  if (a.size() != b.size() || batch_of(a, 2) != batch_of(b, 2))
    ctx.fail("expected B with A's batch dims ", shape_str(batch_of(a, 2)), ", got ",
             ctx.input(1).str(), " for A ", ctx.input(0).str());
  if (!(a[a.size() - 2] == b[b.size() - 2]))
    ctx.fail("expected B with as many rows as A (", a[a.size() - 2].str(), "), got ",
             ctx.input(1).str(), " for A ", ctx.input(0).str());
}

Types infer_solve(const InferContext& ctx) {
  check_square(ctx, 0, "A");
  check_rhs(ctx);
  return {ctx.input(1)};
}

Types infer_same_square(const InferContext& ctx) {
  check_square(ctx, 0, "A");
  return {ctx.input(0)};
}

Types infer_det(const InferContext& ctx) {
  check_square(ctx, 0, "A");
  return {{ctx.dtype(0), batch_of(ctx.shape(0), 2)}};
}

Types infer_slogdet(const InferContext& ctx) {
  check_square(ctx, 0, "A");
  TensorType t{ctx.dtype(0), batch_of(ctx.shape(0), 2)};
  return {t, t};
}

Dim min_dim(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return std::min(a.value(), b.value());
  if (a == b) return a;
  return Dim::unknown();
}

Types infer_qr(const InferContext& ctx) {
  check_matrix(ctx, 0, "A");
  const Shape& s = ctx.shape(0);
  Dim m = s[s.size() - 2], n = s[s.size() - 1], k = min_dim(m, n);
  Shape q = batch_of(s, 2), r = q;
  q.push_back(m), q.push_back(k);
  r.push_back(k), r.push_back(n);
  return {{ctx.dtype(0), q}, {ctx.dtype(0), r}};
}

Types infer_eigh(const InferContext& ctx) {
  check_square(ctx, 0, "A");
  Shape w = batch_of(ctx.shape(0), 1);
  return {{ctx.dtype(0), w}, ctx.input(0)};
}

Types infer_svd(const InferContext& ctx) {
  check_matrix(ctx, 0, "A");
  const Shape& s = ctx.shape(0);
  Dim m = s[s.size() - 2], n = s[s.size() - 1], k = min_dim(m, n);
  Shape u = batch_of(s, 2), sv = u, vt = u;
  u.push_back(m), u.push_back(k);
  sv.push_back(k);
  vt.push_back(k), vt.push_back(n);
  return {{ctx.dtype(0), u}, {ctx.dtype(0), sv}, {ctx.dtype(0), vt}};
}

Types infer_lstsq(const InferContext& ctx) {
  check_matrix(ctx, 0, "A");
  check_rhs(ctx);
  const Shape &a = ctx.shape(0), &b = ctx.shape(1);
  Shape x = batch_of(a, 2);
  x.push_back(a[a.size() - 1]);
  x.push_back(b[b.size() - 1]);
  return {{ctx.dtype(0), x}};
}

// ---- rule helpers -------------------------------------------------------------------

Value mT(Value x) {
  IntList perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(x, perm);
}

int64_t static_dim(Value x, int64_t from_end, const char* rule) {
  const Dim& d = x.shape()[size_t(x.rank() - from_end)];
  if (!d.is_static())
    fail<NotSupported>(rule, "expected static matrix sizes, got ", x.type().str());
  return d.value();
}

// An [n, n] constant: f(i, j).
template <class F>
Value matrix_const(Value like, int64_t n, F f) {
  std::vector<double> v(size_t(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) v[size_t(i * n + j)] = f(i, j);
  return like.graph->constant(Literal::from_doubles(like.dtype(), {n, n}, v));
}

Value eye(Value like, int64_t n) {
  return matrix_const(like, n, [](int64_t i, int64_t j) { return i == j ? 1.0 : 0.0; });
}
// Lower (j <= i) or upper triangle; strict drops the diagonal; diag scales it.
Value tri_mask(Value like, int64_t n, bool lower, double diag = 1.0) {
  return matrix_const(like, n, [&](int64_t i, int64_t j) {
    if (i == j) return diag;
    return (lower ? j < i : j > i) ? 1.0 : 0.0;
  });
}

Value tsolve(Value a, Value b, bool lower, bool trans, bool unit = false) {
  return op("linalg.triangular_solve", {a, b},
            {{"lower", lower}, {"transpose", trans}, {"unit_diagonal", unit}});
}
Value solve(Value a, Value b) { return op("linalg.solve", {a, b}); }

// [..., n] -> [..., n, n] with the vector on the diagonal.
Value diag_embed(Value w, Value eye_n) { return rules::expand_dims(w, {w.rank()}) * eye_n; }
// [..., n, n] -> [..., n].
Value diag_part(Value x, Value eye_n) { return rules::sum(x * eye_n, {x.rank() - 1}); }
// [...] -> [..., 1, 1]
Value expand2(Value x) { return rules::expand_dims(x, {x.rank(), x.rank() + 1}); }

Value sym(Value x) { return (x + mT(x)) * 0.5; }

Value zeros_or(Value t, Value like) { return t.valid() ? t : rules::zeros_like(like); }

// ---- solve --------------------------------------------------------------------------

Values solve_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value A = a.inputs[0], X = a.outputs[0];
  Value dB = solve(mT(A), ct[0]);
  return {-matmul(dB, mT(X)), dB};
}

Values solve_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value A = a.inputs[0], X = a.outputs[0];
  Value rhs = zeros_or(t[1], X);
  if (t[0].valid()) rhs = rhs - matmul(t[0], X);
  return {solve(A, rhs)};
}

// ---- inv ----------------------------------------------------------------------------

Values inv_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value Yt = mT(a.outputs[0]);
  return {-matmul(matmul(Yt, ct[0]), Yt)};
}

Values inv_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value Y = a.outputs[0];
  return {-matmul(matmul(Y, t[0]), Y)};
}

// ---- det / slogdet ------------------------------------------------------------------

Values det_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value A = a.inputs[0], d = a.outputs[0];
  return {expand2(ct[0] * d) * mT(op("linalg.inv", {A}))};
}

// trace(A^-1 dA), batched.
Value trace_inv_times(Value A, Value dA) {
  int64_t n = static_dim(A, 1, "linalg: jvp");
  Value p = solve(A, dA);
  return diag_part(p, eye(A, n));
}

Values det_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value tr = rules::sum(trace_inv_times(a.inputs[0], t[0]), {t[0].rank() - 2});
  return {a.outputs[0] * tr};
}

Values slogdet_vjp(const RuleArgs& a, std::span<const Value> ct) {
  return {expand2(ct[1]) * mT(op("linalg.inv", {a.inputs[0]}))};
}

Values slogdet_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value tr = rules::sum(trace_inv_times(a.inputs[0], t[0]), {t[0].rank() - 2});
  return {rules::zeros_like(a.outputs[0]), tr};
}

// ---- triangular_solve ---------------------------------------------------------------

struct TriAttrs {
  bool lower, trans, unit;
};
TriAttrs tri_attrs(const Attrs& at) {
  return {at.get_bool("lower"), at.get_bool("transpose"), at.get_bool("unit_diagonal")};
}

// dA restricted to the entries the op reads.
Value tri_project(Value dA, const TriAttrs& t) {
  int64_t n = static_dim(dA, 1, "linalg.triangular_solve: rule");
  return dA * tri_mask(dA, n, t.lower, t.unit ? 0.0 : 1.0);
}

Values trisolve_vjp(const RuleArgs& a, std::span<const Value> ct) {
  TriAttrs t = tri_attrs(a.attrs);
  Value A = a.inputs[0], X = a.outputs[0];
  Value dB = tsolve(A, ct[0], t.lower, !t.trans, t.unit);
  Value dopA = -matmul(dB, mT(X));  // the gradient of op(A)
  return {tri_project(t.trans ? mT(dopA) : dopA, t), dB};
}

Values trisolve_jvp(const RuleArgs& a, std::span<const Value> tg) {
  TriAttrs t = tri_attrs(a.attrs);
  Value A = a.inputs[0], X = a.outputs[0];
  Value rhs = zeros_or(tg[1], X);
  if (tg[0].valid()) {
    Value dA = tri_project(tg[0], t);
    rhs = rhs - matmul(t.trans ? mT(dA) : dA, X);
  }
  return {tsolve(A, rhs, t.lower, t.trans, t.unit)};
}

// ---- cholesky -----------------------------------------------------------------------

// Murray (2016): Abar = sym(L^-T Phi(L^T Lbar) L^-1), Phi = lower triangle, half diagonal.
Values cholesky_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value L = a.outputs[0];
  int64_t n = static_dim(L, 1, "linalg.cholesky: vjp");
  Value phi = matmul(mT(L), ct[0] * tri_mask(L, n, true)) * tri_mask(L, n, true, 0.5);
  Value s = tsolve(L, phi, true, true);        // L^-T P
  Value S = mT(tsolve(L, mT(s), true, true));  // (L^-T (L^-T P)^T)^T = L^-T P L^-1
  return {sym(S)};
}

Values cholesky_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value L = a.outputs[0];
  int64_t n = static_dim(L, 1, "linalg.cholesky: jvp");
  Value dA = sym(t[0]);
  Value c = tsolve(L, dA, true, false);         // L^-1 dA
  Value C = mT(tsolve(L, mT(c), true, false));  // L^-1 dA L^-T
  return {matmul(L, C * tri_mask(L, n, true, 0.5))};
}

// ---- qr (m >= n) --------------------------------------------------------------------

void qr_check(Value A) {
  if (static_dim(A, 2, "linalg.qr: rule") < static_dim(A, 1, "linalg.qr: rule"))
    fail<NotSupported>("linalg.qr", "expected m >= n for the qr rules, got ", A.type().str());
}

// As TensorFlow's QrGrad: Abar = Q (Rbar + tril(M) R^-T) + (Qbar - Q Q^T Qbar) R^-T with
// M = Q^T Qbar - Qbar^T Q + R Rbar^T - Rbar R^T.
Values qr_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value A = a.inputs[0], Q = a.outputs[0], R = a.outputs[1];
  qr_check(A);
  int64_t n = static_dim(A, 1, "linalg.qr: vjp");
  Value gQ = ct[0], gR = ct[1];
  Value qdq = matmul(mT(Q), gQ), rdr = matmul(R, mT(gR));
  Value M = (qdq - mT(qdq) + rdr - mT(rdr)) * tri_mask(A, n, true);
  auto times_rinvT = [&](Value x) { return mT(tsolve(R, mT(x), false, false)); };  // x R^-T
  Value ga = matmul(Q, gR + times_rinvT(M));
  Value gb = times_rinvT(gQ - matmul(Q, qdq));
  return {ga + gb};
}

// dR = (Q^T dA R^-1 with its strict lower part mirrored) R; dQ = dA R^-1 - Q dR R^-1.
Values qr_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value A = a.inputs[0], Q = a.outputs[0], R = a.outputs[1];
  qr_check(A);
  int64_t n = static_dim(A, 1, "linalg.qr: jvp");
  auto times_rinv = [&](Value x) { return mT(tsolve(R, mT(x), false, true)); };  // x R^-1
  Value dAR = times_rinv(t[0]);
  Value C = matmul(mT(Q), dAR);
  Value low = C * tri_mask(A, n, true, 0.0);
  Value omega = low - mT(low);  // skew part fixed by Q^T dQ
  Value dR = matmul(C - omega, R);
  Value dQ = dAR - matmul(Q, C - omega);
  return {dQ, dR};
}

// ---- eigh ---------------------------------------------------------------------------

// F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it.
Value eig_f(Value w, int64_t n) {
  Value diff = rules::expand_dims(w, {w.rank() - 1}) - rules::expand_dims(w, {w.rank()});
  Value e = eye(w, n);
  Value off = matrix_const(w, n, [](int64_t i, int64_t j) { return i == j ? 0.0 : 1.0; });
  return off / (diff + e);
}

Values eigh_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value w = a.outputs[0], V = a.outputs[1];
  int64_t n = static_dim(V, 1, "linalg.eigh: vjp");
  Value inner = diag_embed(ct[0], eye(V, n)) + eig_f(w, n) * matmul(mT(V), ct[1]);
  return {sym(matmul(matmul(V, inner), mT(V)))};
}

Values eigh_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value w = a.outputs[0], V = a.outputs[1];
  int64_t n = static_dim(V, 1, "linalg.eigh: jvp");
  Value P = matmul(matmul(mT(V), sym(t[0])), V);
  Value dw = diag_part(P, eye(V, n));
  Value dV = matmul(V, eig_f(w, n) * P);
  return {dw, dV};
}

// ---- svd ----------------------------------------------------------------------------

// Townsend (2016), reduced SVD A = U S Vt with k = min(m, n) distinct nonzero S.
Values svd_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value A = a.inputs[0], U = a.outputs[0], S = a.outputs[1], Vt = a.outputs[2];
  int64_t m = static_dim(A, 2, "linalg.svd: vjp"), n = static_dim(A, 1, "linalg.svd: vjp");
  int64_t k = std::min(m, n);
  Value V = mT(Vt), gU = ct[0], gS = ct[1], gV = mT(ct[2]);
  Value ek = eye(A, k);
  Value s2 = S * S;
  Value F = eig_f(s2, k);  // 1 / (s_j^2 - s_i^2)
  Value Sm = diag_embed(S, ek);
  Value Sinv = diag_embed(1.0 / S, ek);
  Value J = F * (matmul(mT(U), gU) - matmul(mT(gU), U));
  Value K = F * (matmul(mT(V), gV) - matmul(mT(gV), V));
  Value core = matmul(J, Sm) + diag_embed(gS, ek) + matmul(Sm, K);
  Value out = matmul(matmul(U, core), Vt);
  if (m > k) {
    Value proj = gU - matmul(U, matmul(mT(U), gU));  // (I - U U^T) gU
    out = out + matmul(matmul(proj, Sinv), Vt);
  }
  if (n > k) {
    Value proj = mT(gV - matmul(V, matmul(mT(V), gV)));  // gV^T (I - V V^T)
    out = out + matmul(matmul(U, Sinv), proj);
  }
  return {out};
}

Values svd_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value A = a.inputs[0], U = a.outputs[0], S = a.outputs[1], Vt = a.outputs[2];
  int64_t m = static_dim(A, 2, "linalg.svd: jvp"), n = static_dim(A, 1, "linalg.svd: jvp");
  int64_t k = std::min(m, n);
  Value V = mT(Vt), ek = eye(A, k);
  Value dP = matmul(matmul(mT(U), t[0]), V);  // [k, k]
  Value dS = diag_part(dP, ek);
  Value F = eig_f(S * S, k);
  Value Sm = diag_embed(S, ek), Sinv = diag_embed(1.0 / S, ek);
  Value dPt = mT(dP);
  Value dU = matmul(U, F * (matmul(dP, Sm) + matmul(Sm, dPt)));
  Value dV = matmul(V, F * (matmul(Sm, dP) + matmul(dPt, Sm)));
  if (m > k) dU = dU + matmul(matmul(t[0] - matmul(U, matmul(mT(U), t[0])), V), Sinv);
  if (n > k) dV = dV + matmul(matmul(mT(t[0]) - matmul(V, matmul(mT(V), mT(t[0]))), U), Sinv);
  return {dU, dS, mT(dV)};
}

// ---- lstsq (full column rank, m >= n) ------------------------------------------------

// X = (A^T A)^-1 A^T B. With Z = (A^T A)^-1 g and r = B - A X: gA = r Z^T - A Z X^T,
// gB = A Z.
void lstsq_check(Value A) {
  if (static_dim(A, 2, "linalg.lstsq: rule") < static_dim(A, 1, "linalg.lstsq: rule"))
    fail<NotSupported>("linalg.lstsq",
                       "expected m >= n (a full-column-rank A) for the lstsq rules, got ",
                       A.type().str());
}

Values lstsq_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Value A = a.inputs[0], B = a.inputs[1], X = a.outputs[0];
  lstsq_check(A);
  Value Z = solve(matmul(mT(A), A), ct[0]);
  Value r = B - matmul(A, X);
  Value AZ = matmul(A, Z);
  return {matmul(r, mT(Z)) - matmul(AZ, mT(X)), AZ};
}

Values lstsq_jvp(const RuleArgs& a, std::span<const Value> t) {
  Value A = a.inputs[0], B = a.inputs[1], X = a.outputs[0];
  lstsq_check(A);
  Value rhs = zeros_or(t[1], B);
  if (t[0].valid()) rhs = rhs - matmul(t[0], X);
  Value v = matmul(mT(A), rhs);
  if (t[0].valid()) v = v + matmul(mT(t[0]), B - matmul(A, X));
  return {solve(matmul(mT(A), A), v)};
}

// Every op batches over the leading dims of its inputs (equal between them): vmap moves
// the batch axes to the front, gives unbatched inputs the batch, and applies the op again.
VmapResult batched_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  std::vector<Value> ins = rules::all_batched_front(a, in_axes);
  std::vector<Value> outs = rules::reapply(a, ins);
  return {outs, std::vector<int>(outs.size(), 0)};
}

void add(const char* name, int arity, InferFn infer, VjpFn vjp, JvpFn jvp, const char* doc,
         std::vector<AttrSpec> attrs = {}) {
  OpDef d;
  d.name = name;
  d.arity(arity);
  d.attrs = std::move(attrs);
  d.infer = std::move(infer);
  d.vjp = std::move(vjp);
  d.jvp = std::move(jvp);
  d.vmap = batched_vmap;
  d.doc = doc;
  OpRegistry::global().add(std::move(d));
}

}  // namespace

void register_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    add("linalg.solve", 2, infer_solve, solve_vjp, solve_jvp,
        "X with A X = B, A [..., n, n], B [..., n, k] (LU with partial pivoting).");
    add("linalg.inv", 1, infer_same_square, inv_vjp, inv_jvp, "The inverse of A [..., n, n].");
    add("linalg.det", 1, infer_det, det_vjp, det_jvp, "The determinant of A [..., n, n].");
    add("linalg.slogdet", 1, infer_slogdet, slogdet_vjp, slogdet_jvp,
        "sign(det A) and log|det A| of A [..., n, n].");
    add("linalg.cholesky", 1, infer_same_square, cholesky_vjp, cholesky_jvp,
        "The lower Cholesky factor L of a symmetric positive definite A (lower triangle read).");
    add("linalg.qr", 1, infer_qr, qr_vjp, qr_jvp, "Reduced QR: Q [..., m, k], R [..., k, n].");
    add("linalg.eigh", 1, infer_eigh, eigh_vjp, eigh_jvp,
        "Eigenvalues (ascending) and eigenvectors of a symmetric A (lower triangle read).");
    add("linalg.svd", 1, infer_svd, svd_vjp, svd_jvp,
        "Reduced SVD: U [..., m, k], S [..., k] (descending), Vt [..., k, n].");
    add("linalg.triangular_solve", 2, infer_solve, trisolve_vjp, trisolve_jvp,
        "X with op(A) X = B, A read as its lower / upper triangle, op(A) = A or A^T.",
        {{"lower", AttrKind::Bool, AttrValue(true), {}},
         {"transpose", AttrKind::Bool, AttrValue(false), {}},
         {"unit_diagonal", AttrKind::Bool, AttrValue(false), {}}});
    add("linalg.lstsq", 2, infer_lstsq, lstsq_vjp, lstsq_jvp,
        "The minimum-norm least-squares X of A X = B, A [..., m, n], B [..., m, k] (SVD; "
        "singular values below rcond * max are treated as zero, rcond < 0: machine eps).",
        {{"rcond", AttrKind::Float, AttrValue(-1.0), {}}});
    register_cpu_kernels();
#ifdef RLX_HAVE_CUDA
    register_cuda_kernels();
#endif
  });
}

}  // namespace rlx::linalg
