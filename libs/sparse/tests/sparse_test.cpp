// sparse.* on the CPU, forward: products against host references, COO -> CSR, residuals of
// every solver (f64 to 1e-10) on SPD and non-symmetric systems of several sizes, the
// factorisation cache, and typed errors for bad input.
#include <gtest/gtest.h>

#include "sparse_test_util.h"

namespace {

using namespace sparse_test;
namespace sp = rlx::sparse;

const std::vector<DType> kDtypes = {DType::f64, DType::f32};
const std::vector<DType> kIndex = {DType::i32, DType::i64};

double tol(DType d) { return d == DType::f64 ? 1e-12 : 1e-5; }

void expect_close(const Tensor& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  auto g = got.to_doubles();
  ASSERT_EQ(g.size(), want.size()) << what;
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], want[i], rtol * scale) << what << " [" << i << "]";
}

// ---- SparseMatrix ---------------------------------------------------------------------

TEST(SparseMatrix, FromCooSortsColumnsAndSumsDuplicates) {
  //   [1 0 2]      entries given out of order, (0, 2) twice (0.5 + 1.5)
  //   [0 0 0]
  //   [4 5 0]
  SparseMatrix m =
      SparseMatrix::from_triplets(3, 3, {2, 0, 0, 2, 0}, {1, 2, 0, 0, 2}, {5, 0.5, 1, 4, 1.5});
  EXPECT_EQ(m.row_ptr.to_literal().to_ints(), (std::vector<int64_t>{0, 2, 2, 4}));
  EXPECT_EQ(m.col_idx.to_literal().to_ints(), (std::vector<int64_t>{0, 2, 0, 1}));
  EXPECT_EQ(m.values.to_doubles(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_TRUE(m.is_canonical());
  EXPECT_EQ(m.to_dense().to_doubles(), (std::vector<double>{1, 0, 2, 0, 0, 0, 4, 5, 0}));
  EXPECT_EQ(m.transpose().to_dense().to_doubles(),
            (std::vector<double>{1, 0, 4, 0, 0, 5, 2, 0, 0}));
  // from_coo with tensors and i64 indices; from_dense round trip.
  SparseMatrix c =
      SparseMatrix::from_coo(3, 3, Tensor::from_vector<int64_t>({2, 0, 0, 2, 0}, {5}),
                             Tensor::from_vector<int32_t>({1, 2, 0, 0, 2}, {5}),
                             Tensor::from_vector<float>({5, 0.5f, 1, 4, 1.5f}, {5}), DType::i64);
  EXPECT_EQ(c.index_dtype(), DType::i64);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.to_dense().to_doubles(), m.to_dense().to_doubles());
  EXPECT_EQ(SparseMatrix::from_dense(m.to_dense()).to_dense().to_doubles(),
            m.to_dense().to_doubles());
}

TEST(SparseMatrix, Poisson2dIsTheFivePointLaplacian) {
  SparseMatrix p = sp::poisson2d(3);
  EXPECT_EQ(p.rows, 9);
  EXPECT_EQ(p.nnz(), 9 * 5 - 4 * 3);  // 5 a row minus one per boundary side of the grid
  auto d = p.to_dense().to_doubles();
  EXPECT_EQ(d[4 * 9 + 4], 4);  // the centre: all four neighbours
  EXPECT_EQ(d[4 * 9 + 1], -1);
  EXPECT_EQ(d[4 * 9 + 3], -1);
  EXPECT_EQ(d[2 * 9 + 3], 0);  // (0, 2) and (1, 0) are not grid neighbours
  EXPECT_TRUE(p.is_canonical());
}

// ---- products ---------------------------------------------------------------------------

TEST(SparseProducts, MatchDenseReferences) {
  for (DType d : kDtypes)
    for (DType ix : kIndex) {
      SCOPED_TRACE(rlx::str_cat(d, " ", ix));
      SparseMatrix a = random_sparse(37, 23, 5, 1, d, ix);
      auto x = random_vec(23, 2), xt = random_vec(37, 3);
      auto X = random_vec(2 * 23 * 3, 4), Xt = random_vec(37 * 3, 5);
      Tensor tx = Tensor::from_doubles(d, {23}, x), txt = Tensor::from_doubles(d, {37}, xt);
      Tensor tX = Tensor::from_doubles(d, {2, 23, 3}, X),
             tXt = Tensor::from_doubles(d, {37, 3}, Xt);
      auto out = run({a.values, tx, txt, tX, tXt}, [&](Graph& g, std::vector<Value> v) {
        sp::Csr A = sp::with_pattern(a, v[0]);
        (void)g;
        return std::vector<Value>{sp::spmv(A, v[1]), sp::spmv_t(A, v[2]), sp::spmm(A, v[3]),
                                  sp::spmm_t(A, v[4])};
      });
      // The reference sees the operands rounded to d, as the op does.
      x = tx.to_doubles(), xt = txt.to_doubles(), X = tX.to_doubles(), Xt = tXt.to_doubles();
      expect_close(out[0], host_product(a, x), tol(d), "spmv");
      expect_close(out[1], host_product(a, xt, 1, true), tol(d), "spmv_t");
      std::vector<double> want;
      for (int b = 0; b < 2; ++b) {
        std::vector<double> xb(X.begin() + b * 69, X.begin() + (b + 1) * 69);
        auto yb = host_product(a, xb, 3);
        want.insert(want.end(), yb.begin(), yb.end());
      }
      EXPECT_EQ(out[2].shape(), (std::vector<int64_t>{2, 37, 3}));
      expect_close(out[2], want, tol(d), "spmm");
      expect_close(out[3], host_product(a, Xt, 3, true), tol(d), "spmm_t");
    }
}

TEST(SparseProducts, NonCanonicalCsrAndEmptyRows) {
  // Row 0 unsorted with a duplicate, row 1 empty, row 2 one entry: [[3, 2], [0, 0], [0, 4]].
  SparseMatrix a;
  a.rows = 3, a.cols = 2;
  a.values = Tensor::from_vector<double>({2, 1, 2, 4}, {4});
  a.col_idx = Tensor::from_vector<int32_t>({1, 0, 0, 1}, {4});
  a.row_ptr = Tensor::from_vector<int32_t>({0, 3, 3, 4}, {4});
  a.validate();
  EXPECT_FALSE(a.is_canonical());
  auto out =
      run({a.values, Tensor::from_vector<double>({1, 10}, {2})}, [&](Graph&, std::vector<Value> v) {
        return std::vector<Value>{sp::spmv(sp::with_pattern(a, v[0]), v[1])};
      });
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{23, 0, 40}));
}

TEST(SparseProducts, SddmmSamplesTheProductOnThePattern) {
  SparseMatrix a = random_sparse(6, 4, 3, 7);
  auto U = random_vec(2 * 6 * 3, 8), V = random_vec(2 * 4 * 3, 9);
  auto out =
      run({Tensor::from_doubles(DType::f64, {2, 6, 3}, U),
           Tensor::from_doubles(DType::f64, {2, 4, 3}, V)},
          [&](Graph& g, std::vector<Value> v) {
            sp::Csr A = sp::constant(g, a);
            return std::vector<Value>{rlx::op("sparse.sddmm", {A.col_idx, A.row_ptr, v[0], v[1]})};
          });
  auto rp = a.row_ptr.to_literal().to_ints(), ci = a.col_idx.to_literal().to_ints();
  std::vector<double> want;
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t e = rp[size_t(i)]; e < rp[size_t(i + 1)]; ++e) {
      double s = 0;
      for (int b = 0; b < 2; ++b)
        for (int j = 0; j < 3; ++j)
          s += U[size_t((b * 6 + i) * 3 + j)] * V[size_t((b * 4 + ci[size_t(e)]) * 3 + j)];
      want.push_back(s);
    }
  expect_close(out[0], want, 1e-14, "sddmm");
}

// ---- solvers ------------------------------------------------------------------------------

struct System {
  std::string name;
  SparseMatrix a;
  bool spd;
};

std::vector<System> systems(DType d, DType ix) {
  std::vector<System> s;
  for (int64_t n : {4, 16, 40})
    s.push_back({rlx::str_cat("poisson ", n, "x", n), sp::poisson2d(n, d, ix), true});
  for (int64_t n : {10, 300, 3000})
    s.push_back({rlx::str_cat("spd n=", n), spd(n, 11 + uint64_t(n), d, ix), true});
  for (int64_t n : {10, 300, 3000})
    s.push_back({rlx::str_cat("non-symmetric n=", n), dominant(n, 21 + uint64_t(n), d, ix), false});
  return s;
}

using Solver = std::function<Value(const sp::Csr&, Value)>;

// Solves with b [n], [n, 3] and [2, n, 2] and checks the relative residual of every column.
void check_solver(const char* name, const Solver& solve, bool spd_only, DType d, double max_res,
                  bool transpose = false) {
  for (DType ix : kIndex)
    for (const System& s : systems(d, ix)) {
      if (spd_only && !s.spd) continue;
      SCOPED_TRACE(rlx::str_cat(name, " ", s.name, " ", d, " ", ix));
      int64_t n = s.a.rows;
      for (std::vector<int64_t> shape : {std::vector<int64_t>{n}, {n, 3}, {2, n, 2}}) {
        Tensor b = Tensor::from_doubles(d, shape, random_vec(Tensor::empty(d, shape).numel(), 31));
        auto x = run({s.a.values, b}, [&](Graph&, std::vector<Value> v) {
          return std::vector<Value>{solve(sp::with_pattern(s.a, v[0]), v[1])};
        })[0];
        ASSERT_EQ(x.shape(), shape);
        int64_t k = shape.size() == 1 ? 1 : shape.back(), nb = shape.size() == 3 ? 2 : 1;
        auto xv = x.to_doubles(), bv = b.to_doubles();
        for (int64_t bi = 0; bi < nb; ++bi)
          for (int64_t j = 0; j < k; ++j) {
            std::vector<double> xc, bc;
            for (int64_t i = 0; i < n; ++i) {
              xc.push_back(xv[size_t((bi * n + i) * k + j)]);
              bc.push_back(bv[size_t((bi * n + i) * k + j)]);
            }
            EXPECT_LE(rel_residual(s.a, xc, bc, 1, transpose), max_res)
                << "column " << bi << "," << j;
          }
      }
    }
}

TEST(SparseSolve, LuResidual) {
  for (bool t : {false, true})
    check_solver(
        t ? "lu_solve transpose" : "lu_solve",
        [t](const sp::Csr& a, Value b) { return sp::lu_solve(a, b, t); }, false, DType::f64, 1e-10,
        t);
  check_solver(
      "lu_solve", [](const sp::Csr& a, Value b) { return sp::lu_solve(a, b); }, false, DType::f32,
      1e-6);
}

TEST(SparseSolve, CholeskyResidual) {
  check_solver(
      "cholesky_solve", [](const sp::Csr& a, Value b) { return sp::cholesky_solve(a, b); }, true,
      DType::f64, 1e-10);
  check_solver(
      "cholesky_solve", [](const sp::Csr& a, Value b) { return sp::cholesky_solve(a, b); }, true,
      DType::f32, 1e-6);
}

sp::IterativeOptions tight(bool transpose = false, const char* pc = "jacobi") {
  sp::IterativeOptions o;
  o.tol = 1e-12;
  o.transpose = transpose;
  o.preconditioner = pc;
  return o;
}

TEST(SparseSolve, IterativeResidual) {
  for (const char* pc : {"jacobi", "none"}) {
    check_solver(
        "cg_solve",
        [&](const sp::Csr& a, Value b) { return sp::cg_solve(a, b, tight(false, pc)).x; }, true,
        DType::f64, 1e-10);
    for (bool t : {false, true}) {
      check_solver(
          "bicgstab_solve",
          [&](const sp::Csr& a, Value b) { return sp::bicgstab_solve(a, b, tight(t, pc)).x; },
          false, DType::f64, 1e-10, t);
      check_solver(
          "gmres_solve",
          [&](const sp::Csr& a, Value b) { return sp::gmres_solve(a, b, tight(t, pc)).x; }, false,
          DType::f64, 1e-10, t);
    }
  }
  sp::IterativeOptions f32;
  f32.tol = 1e-6;
  check_solver(
      "cg_solve f32", [&](const sp::Csr& a, Value b) { return sp::cg_solve(a, b, f32).x; }, true,
      DType::f32, 1e-5);
  check_solver(
      "gmres_solve f32", [&](const sp::Csr& a, Value b) { return sp::gmres_solve(a, b, f32).x; },
      false, DType::f32, 1e-5);
}

TEST(SparseSolve, IterationsAndResidualOutputs) {
  SparseMatrix a = sp::poisson2d(20);
  Tensor b = Tensor::from_doubles(DType::f64, {400, 2}, random_vec(800, 3));
  for (int64_t max_iter : {-1, 5}) {
    sp::IterativeOptions o;
    o.max_iter = max_iter;
    auto out = run({a.values, b}, [&](Graph&, std::vector<Value> v) {
      sp::Solution s = sp::cg_solve(sp::with_pattern(a, v[0]), v[1], o);
      return std::vector<Value>{s.x, s.iterations, s.residual};
    });
    ASSERT_EQ(out[1].dtype(), DType::i32);
    ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{2}));
    ASSERT_EQ(out[2].shape(), (std::vector<int64_t>{2}));
    auto it = out[1].to_vector<int32_t>();
    auto res = out[2].to_doubles();
    auto x = out[0].to_doubles(), bv = b.to_doubles();
    for (int j = 0; j < 2; ++j) {
      std::vector<double> xc, bc;
      for (int i = 0; i < 400; ++i)
        xc.push_back(x[size_t(i * 2 + j)]), bc.push_back(bv[size_t(i * 2 + j)]);
      EXPECT_NEAR(res[size_t(j)], rel_residual(a, xc, bc), 1e-14);  // the true residual
      if (max_iter == 5) {
        EXPECT_EQ(it[size_t(j)], 5);  // stopped at max_iter: no error, the outputs say so
        EXPECT_GT(res[size_t(j)], 1e-3);
      } else {
        EXPECT_GT(it[size_t(j)], 5);
        EXPECT_LE(res[size_t(j)], 1e-8);
      }
    }
  }
}

TEST(SparseSolve, FactorCacheSkipsAnalysisAndFactorisation) {
  sp::clear_factor_cache();
  SparseMatrix a = sp::poisson2d(12);
  Tensor b = Tensor::from_doubles(DType::f64, {144}, random_vec(144, 1));
  auto solve = [&](const SparseMatrix& m) {
    return run({m.values, b}, [&](Graph&, std::vector<Value> v) {
      return std::vector<Value>{sp::lu_solve(sp::with_pattern(m, v[0]), v[1])};
    })[0];
  };
  auto s0 = sp::factor_cache_stats();
  Tensor x1 = solve(a);
  auto s1 = sp::factor_cache_stats();
  EXPECT_EQ(s1.analyses - s0.analyses, 1);
  EXPECT_EQ(s1.factorisations - s0.factorisations, 1);
  Tensor x2 = solve(a);  // same pattern and values: the factorisation is reused
  auto s2 = sp::factor_cache_stats();
  EXPECT_EQ(s2.analyses, s1.analyses);
  EXPECT_EQ(s2.factorisations, s1.factorisations);
  EXPECT_EQ(s2.reuses - s1.reuses, 1);
  EXPECT_EQ(x1.to_doubles(), x2.to_doubles());
  // New values: refactored on the cached analysis, and the answer changes with them.
  std::vector<double> v2 = a.values.to_doubles();
  for (double& v : v2) v *= 2;
  Tensor x3 = solve(a.with_values(Tensor::from_doubles(DType::f64, {a.nnz()}, v2)));
  auto s3 = sp::factor_cache_stats();
  EXPECT_EQ(s3.analyses, s2.analyses);
  EXPECT_EQ(s3.factorisations - s2.factorisations, 1);
  auto x1v = x1.to_doubles(), x3v = x3.to_doubles();
  for (size_t i = 0; i < x1v.size(); ++i) EXPECT_NEAR(x3v[i], x1v[i] / 2, 1e-12);
  // Capacity 0: nothing kept.
  sp::set_factor_cache_capacity(0);
  EXPECT_EQ(sp::factor_cache_stats().entries, 0);
  solve(a);
  solve(a);
  EXPECT_EQ(sp::factor_cache_stats().analyses - s3.analyses, 2);
  sp::set_factor_cache_capacity(4);
}

// ---- typed errors ---------------------------------------------------------------------------

// A 3x3 CSR with the given arrays (f64 values, i32 indices), run through op.
void run_raw(const char* op, std::vector<int32_t> col, std::vector<int32_t> rp,
             std::vector<double> vals, rlx::Attrs attrs = {}, std::vector<double> rhs = {1, 1, 1}) {
  Tensor v = Tensor::from_vector(vals, {int64_t(vals.size())});
  Tensor c = Tensor::from_vector(col, {int64_t(col.size())});
  Tensor r = Tensor::from_vector(rp, {int64_t(rp.size())});
  Tensor x = Tensor::from_vector(rhs, {int64_t(rhs.size())});
  run({v, c, r, x}, [&](Graph&, std::vector<Value> in) { return rlx::op_n(op, in, attrs); });
}

TEST(SparseErrors, BadRowPtrAndIndices) {
  for (const char* op : {"sparse.spmv", "sparse.lu_solve", "sparse.cholesky_solve",
                         "sparse.cg_solve", "sparse.gmres_solve"}) {
    SCOPED_TRACE(op);
    // row_ptr decreasing.
    expect_error<rlx::ValueError>(
        [&] {
          run_raw(op, {0, 1, 2}, {0, 2, 1, 3}, {1, 1, 1});
        },
        {op, "non-decreasing row_ptr", "row_ptr[1] = 2 > row_ptr[2] = 1"});
    // a column out of range, and a negative one.
    expect_error<rlx::ValueError>(
        [&] {
          run_raw(op, {0, 3, 2}, {0, 1, 2, 3}, {1, 1, 1});
        },
        {op, "column indices in [0, 3)", "col_idx[1] = 3"});
    expect_error<rlx::ValueError>(
        [&] {
          run_raw(op, {0, -1, 2}, {0, 1, 2, 3}, {1, 1, 1});
        },
        {op, "col_idx[1] = -1"});
    // row_ptr not starting at 0, not ending at nnz.
    expect_error<rlx::ValueError>(
        [&] {
          run_raw(op, {0, 1, 2}, {1, 1, 2, 3}, {1, 1, 1});
        },
        {op, "row_ptr[0] = 0"});
    expect_error<rlx::ValueError>(
        [&] {
          run_raw(op, {0, 1, 2}, {0, 1, 2, 2}, {1, 1, 1});
        },
        {op, "row_ptr[3] = nnz = 3, got 2"});
  }
  expect_error<rlx::ValueError>(
      [] {
        run_raw("sparse.spmv_t", {0, 5, 2}, {0, 1, 2, 3}, {1, 1, 1}, {{"cols", 3}});
      },
      {"sparse.spmv_t", "col_idx[1] = 5"});
  // SparseMatrix::validate says the same.
  SparseMatrix m = sp::poisson2d(2);
  m.col_idx = Tensor::from_vector<int32_t>({0, 1, 2, 0, 1, 7, 0, 2, 3, 1, 2, 3}, {12});
  expect_error<rlx::ValueError>([&] { m.validate(); }, {"sparse.SparseMatrix", "col_idx[5] = 7"});
  expect_error<rlx::ValueError>(
      [] {
        SparseMatrix::from_triplets(2, 2, {0, 2}, {0, 0}, {1, 1});
      },
      {"sparse.SparseMatrix", "inside the 2x2 matrix", "(2, 0)"});
}

TEST(SparseErrors, SingularAndNotPositiveDefinite) {
  // [[1, 2, 0], [2, 4, 0], [0, 0, 1]]: row 1 = 2 row 0.
  expect_error<rlx::ValueError>(
      [] {
        run_raw("sparse.lu_solve", {0, 1, 0, 1, 2}, {0, 2, 4, 5}, {1, 2, 2, 4, 1});
      },
      {"sparse.lu_solve", "nonsingular", "singular"});
  // A structurally singular one: an empty row.
  expect_error<rlx::ValueError>(
      [] {
        run_raw("sparse.lu_solve", {0, 2}, {0, 1, 1, 2}, {1, 1});
      },
      {"sparse.lu_solve", "singular"});
  // Symmetric indefinite: [[1, 2, 0], [2, 1, 0], [0, 0, 1]] (eigenvalues 3, -1, 1); CG
  // meets the negative curvature at once with b along (1, -1, 0).
  for (const char* op : {"sparse.cholesky_solve", "sparse.cg_solve"})
    expect_error<rlx::ValueError>(
        [&] {
          run_raw(op, {0, 1, 0, 1, 2}, {0, 2, 4, 5}, {1, 2, 2, 1, 1}, {}, {1, -1, 0});
        },
        {op, "symmetric positive definite"});
  // Not symmetric.
  expect_error<rlx::ValueError>(
      [] {
        run_raw("sparse.cholesky_solve", {0, 1, 0, 1, 2}, {0, 2, 4, 5}, {4, 1, 2, 4, 1});
      },
      {"sparse.cholesky_solve", "symmetric", "A[0, 1] = 1 but A[1, 0] = 2"});
  // After the errors, a good solve with the same pattern works (no stale factorisation).
  run_raw("sparse.cholesky_solve", {0, 1, 0, 1, 2}, {0, 2, 4, 5}, {4, 1, 1, 4, 1});
  run_raw("sparse.lu_solve", {0, 1, 0, 1, 2}, {0, 2, 4, 5}, {1, 2, 3, 4, 1});
}

void build_only(const char* op, std::vector<const char*> types, rlx::Attrs attrs = {}) {
  sp::register_ops();
  Graph g;
  std::vector<Value> vs;
  for (size_t i = 0; i < types.size(); ++i)
    vs.push_back(g.input("x" + std::to_string(i), TensorType::parse(types[i])));
  rlx::op_n(op, vs, attrs);
}

TEST(SparseErrors, ShapesAndDtypes) {
  using rlx::TypeError;
  using rlx::ValueError;
  expect_error<ValueError>(
      [] {
        build_only("sparse.spmv", {"f64[7]", "i32[6]", "i32[4]", "f64[3]"});
      },
      {"sparse.spmv", "values and col_idx of one length", "f64[7]", "i32[6]"});
  expect_error<ValueError>(
      [] {
        build_only("sparse.spmv_t", {"f64[7]", "i32[7]", "i32[4]", "f64[5]"}, {{"cols", 3}});
      },
      {"sparse.spmv_t", "x with 3 rows", "f64[5]"});
  expect_error<ValueError>(
      [] {
        build_only("sparse.lu_solve", {"f64[7]", "i32[7]", "i32[4]", "f64[4,2]"});
      },
      {"sparse.lu_solve", "b with 3 rows", "f64[4,2]"});
  expect_error<ValueError>(
      [] {
        build_only("sparse.spmm", {"f64[7]", "i32[7]", "i32[4]", "f64[3]"});
      },
      {"sparse.spmm", "rank >= 2"});
  expect_error<TypeError>(
      [] {
        build_only("sparse.spmv", {"f64[7]", "i32[7]", "i32[4]", "f32[3]"});
      },
      {"sparse.spmv", "values' dtype f64", "f32[3]"});
  expect_error<TypeError>(
      [] {
        build_only("sparse.spmv", {"f64[7]", "f32[7]", "i32[4]", "f64[3]"});
      },
      {"sparse.spmv", "col_idx of dtype i32 or i64"});
  expect_error<TypeError>(
      [] {
        build_only("sparse.spmv", {"f64[7]", "i32[7]", "i64[4]", "f64[3]"});
      },
      {"sparse.spmv", "row_ptr of col_idx's dtype"});
  expect_error<TypeError>(
      [] {
        build_only("sparse.cg_solve", {"i32[7]", "i32[7]", "i32[4]", "i32[3]"});
      },
      {"sparse.cg_solve", "values of dtype f32 or f64"});
  expect_error<ValueError>(
      [] {
        build_only("sparse.cg_solve", {"f64[7]", "i32[7]", "i32[4]", "f64[3]"}, {{"tol", -1.0}});
      },
      {"sparse.cg_solve", "tol >= 0"});
  expect_error<ValueError>(
      [] {
        build_only("sparse.gmres_solve", {"f64[7]", "i32[7]", "i32[4]", "f64[3]"},
                   {{"restart", 0}});
      },
      {"sparse.gmres_solve", "restart >= 1"});
  expect_error<ValueError>(
      [] {
        build_only("sparse.cg_solve", {"f64[7]", "i32[7]", "i32[4]", "f64[3]"},
                   {{"preconditioner", "ilu"}});
      },
      {"preconditioner"});
}

TEST(SparseInfer, OutputTypes) {
  sp::register_ops();
  Graph g;
  Value v = g.input("v", TensorType::parse("f32[nnz]")),
        c = g.input("c", TensorType::parse("i64[nnz]"));
  Value r = g.input("r", TensorType::parse("i64[6]"));
  auto str = [](Value x) { return x.type().str(); };
  sp::Csr A{v, c, r, 4};
  EXPECT_EQ(str(sp::spmv(A, g.input("x", TensorType::parse("f32[4]")))), "f32[5]");
  EXPECT_EQ(str(sp::spmv_t(A, g.input("y", TensorType::parse("f32[5]")))), "f32[4]");
  EXPECT_EQ(str(sp::spmm(A, g.input("X", TensorType::parse("f32[b,4,3]")))), "f32[b,5,3]");
  EXPECT_EQ(str(sp::spmm_t(A, g.input("Y", TensorType::parse("f32[5,2]")))), "f32[4,2]");
  sp::Csr S{v, c, r, 5};
  Value b = g.input("b", TensorType::parse("f32[b,5,3]"));
  EXPECT_EQ(str(sp::lu_solve(S, b)), "f32[b,5,3]");
  sp::Solution s = sp::gmres_solve(S, b);
  EXPECT_EQ(str(s.x) + str(s.iterations) + str(s.residual), "f32[b,5,3]i32[b,3]f32[b,3]");
  s = sp::cg_solve(S, g.input("b1", TensorType::parse("f32[5]")));
  EXPECT_EQ(str(s.iterations) + str(s.residual), "i32[]f32[]");
}

}  // namespace
