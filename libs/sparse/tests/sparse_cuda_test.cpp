// sparse.* on CUDA: the dispatch report (native for the products, cg and bicgstab; host
// for the direct solves and gmres), CPU vs CUDA parity for every op (a tolerance for the
// native kernels, bit for bit for the host-delegated solves), residuals, and the CPU's
// typed errors for bad input. The dispatch checks need no GPU; the rest skip, saying so,
// without one.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "rlx/cuda.h"
#include "sparse_test_util.h"

namespace {

using namespace sparse_test;
namespace sp = rlx::sparse;
using rlx::Device;
using rlx::DispatchPath;

#define NEED_GPU() \
  if (!rlx::cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one"

// One op over A (values, col_idx, row_ptr) and an operand, run on `device`; the outputs
// on the host.
std::vector<Tensor> run_on(Device device, const std::string& op, const SparseMatrix& a,
                           const Tensor& x, rlx::Attrs attrs = {}) {
  sp::register_ops();
  rlx::register_cuda_kernels();
  Graph g;
  sp::Csr A = sp::input(g, "A", a);
  Value xv = g.input("x", x.type());
  auto outs = rlx::op_n(op, {A.values, A.col_idx, A.row_ptr, xv}, std::move(attrs));
  for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
  rlx::TensorMap in{
      {"A.values", a.values}, {"A.col_idx", a.col_idx}, {"A.row_ptr", a.row_ptr}, {"x", x}};
  auto res = rlx::Session(device).compile(g).run(in);
  std::vector<Tensor> r;
  for (size_t i = 0; i < outs.size(); ++i)
    r.push_back(res.at("y" + std::to_string(i)).to(Device::cpu()).contiguous());
  return r;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return {p, p + t.nbytes()};
}

Tensor dense(DType d, std::vector<int64_t> shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return Tensor::from_doubles(d, shape, random_vec(n, seed));
}

void expect_near(const Tensor& got, const Tensor& want, double rtol, const std::string& what) {
  auto g = got.to_doubles(), w = want.to_doubles();
  ASSERT_EQ(g.size(), w.size()) << what;
  double scale = 1;
  for (double v : w) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], rtol * scale) << what << " [" << i << "]";
}

// ---- dispatch (no GPU needed) ----------------------------------------------------------

rlx::DispatchReport report_for(const std::string& op, rlx::Attrs attrs, DType index = DType::i32,
                               const char* b = "f64[6]") {
  sp::register_ops();
  rlx::register_cuda_kernels();
  Graph g;
  sp::Csr A = sp::input(g, "A", spd(6, 1, DType::f64, index));
  auto outs = rlx::op_n(op, {A.values, A.col_idx, A.row_ptr, g.input("b", TensorType::parse(b))},
                        std::move(attrs));
  for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
  return rlx::lower_for_device(g, Device::cuda()).report;
}

TEST(SparseCudaDispatch, ProductsAndKrylovSolvesAreNativeDirectSolvesGoToTheHost) {
  for (DType index : {DType::i32, DType::i64}) {
    for (const char* op : {"sparse.spmv", "sparse.cg_solve", "sparse.bicgstab_solve"})
      EXPECT_EQ(report_for(op, {}, index).count(op, DispatchPath::native), 1) << op;
    EXPECT_EQ(report_for("sparse.spmv_t", {{"cols", int64_t(6)}}, index)
                  .count("sparse.spmv_t", DispatchPath::native),
              1);
    EXPECT_EQ(report_for("sparse.spmm", {}, index, "f64[2,6,3]")
                  .count("sparse.spmm", DispatchPath::native),
              1);
    EXPECT_EQ(report_for("sparse.spmm_t", {{"cols", int64_t(6)}}, index, "f64[6,3]")
                  .count("sparse.spmm_t", DispatchPath::native),
              1);
    for (const char* op : {"sparse.lu_solve", "sparse.cholesky_solve", "sparse.gmres_solve"})
      EXPECT_EQ(report_for(op, {}, index).count(op, DispatchPath::host), 1) << op;
  }
  // A^T for BiCGSTAB is made by cuSPARSE with 32-bit indices; i64 goes to the host.
  EXPECT_EQ(report_for("sparse.bicgstab_solve", {{"transpose", true}}, DType::i32)
                .count("sparse.bicgstab_solve", DispatchPath::native),
            1);
  EXPECT_EQ(report_for("sparse.bicgstab_solve", {{"transpose", true}}, DType::i64)
                .count("sparse.bicgstab_solve", DispatchPath::host),
            1);
}

// ---- products ----------------------------------------------------------------------------

TEST(SparseCudaProducts, MatchTheCpu) {
  NEED_GPU();
  for (DType d : {DType::f64, DType::f32})
    for (DType index : {DType::i32, DType::i64}) {
      SCOPED_TRACE(std::string(rlx::dtype_name(d)) + " " + std::string(rlx::dtype_name(index)));
      const double rtol = d == DType::f64 ? 1e-12 : 1e-5;
      SparseMatrix a = random_sparse(300, 200, 7, 3, d, index);
      rlx::Attrs t{{"cols", int64_t(200)}};
      auto check = [&](const char* op, const Tensor& x, rlx::Attrs at) {
        auto cpu = run_on(Device::cpu(), op, a, x, at);
        auto gpu = run_on(Device::cuda(), op, a, x, at);
        expect_near(gpu[0], cpu[0], rtol, op);
      };
      check("sparse.spmv", dense(d, {200}, 1), {});
      // Rows of ~40 entries: spmv gives a row 8 lanes (the rows above: one lane).
      SparseMatrix wide = random_sparse(300, 200, 40, 4, d, index);
      expect_near(run_on(Device::cuda(), "sparse.spmv", wide, dense(d, {200}, 7))[0],
                  run_on(Device::cpu(), "sparse.spmv", wide, dense(d, {200}, 7))[0], rtol,
                  "spmv, 8 lanes a row");
      check("sparse.spmv_t", dense(d, {300}, 2), t);
      check("sparse.spmm", dense(d, {200, 5}, 3), {});
      check("sparse.spmm", dense(d, {2, 3, 200, 4}, 4), {});  // batched
      check("sparse.spmm_t", dense(d, {300, 3}, 5), t);
      check("sparse.spmm_t", dense(d, {2, 300, 1}, 6), t);
    }
  // Batch elements 20 and 28 bytes apart: not 16-byte aligned.
  for (bool t : {false, true}) {
    SparseMatrix small = random_sparse(7, 5, 3, 9, DType::f32);
    const char* op = t ? "sparse.spmm_t" : "sparse.spmm";
    Tensor x = dense(DType::f32, {3, t ? 7 : 5, 1}, 10);
    rlx::Attrs at = t ? rlx::Attrs{{"cols", int64_t(5)}} : rlx::Attrs{};
    expect_near(run_on(Device::cuda(), op, small, x, at)[0],
                run_on(Device::cpu(), op, small, x, at)[0], 1e-5, std::string(op) + " unaligned");
  }
  // Not canonical: columns out of order and repeated within a row, an empty row.
  SparseMatrix nc;
  nc.rows = 3, nc.cols = 4;
  nc.col_idx = Tensor::from_vector<int32_t>({3, 0, 0, 2, 1, 1}, {6});
  nc.row_ptr = Tensor::from_vector<int32_t>({0, 3, 3, 6}, {4});
  nc.values = Tensor::from_doubles(DType::f64, {6}, {1, 2, 3, 4, 5, 6});
  for (auto [op, x, at] : std::vector<std::tuple<const char*, Tensor, rlx::Attrs>>{
           {"sparse.spmv", dense(DType::f64, {4}, 1), {}},
           {"sparse.spmv_t", dense(DType::f64, {3}, 2), {{"cols", int64_t(4)}}},
           {"sparse.spmm", dense(DType::f64, {4, 2}, 3), {}},
           {"sparse.spmm_t", dense(DType::f64, {3, 2}, 4), {{"cols", int64_t(4)}}}})
    expect_near(run_on(Device::cuda(), op, nc, x, at)[0], run_on(Device::cpu(), op, nc, x, at)[0],
                1e-12, std::string(op) + " (not canonical)");
  // Empty rows, no entries at all.
  SparseMatrix e = SparseMatrix::from_triplets(4, 3, {}, {}, {});
  EXPECT_EQ(run_on(Device::cuda(), "sparse.spmv", e, dense(DType::f64, {3}, 1))[0].to_doubles(),
            std::vector<double>(4, 0.0));
}

// ---- solves --------------------------------------------------------------------------

TEST(SparseCudaSolve, KrylovResidualsAndParity) {
  NEED_GPU();
  for (int64_t n : {1, 50, 700, 5000}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    struct Case {
      const char* op;
      SparseMatrix a;
      rlx::Attrs attrs;
    };
    const rlx::Attrs tight{{"tol", 1e-12}};
    std::vector<Case> cases = {
        {"sparse.cg_solve", spd(n, 7), tight},
        {"sparse.cg_solve",
         spd(n, 8, DType::f64, DType::i64),
         {{"tol", 1e-12}, {"preconditioner", std::string("none")}}},
        {"sparse.bicgstab_solve", dominant(n, 9), tight},
        {"sparse.bicgstab_solve", dominant(n, 10), {{"tol", 1e-12}, {"transpose", true}}},
        {"sparse.bicgstab_solve",
         dominant(n, 11, DType::f64, DType::i64),
         {{"tol", 1e-12}, {"preconditioner", std::string("none")}}},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.op);
      const bool transpose = c.attrs.has("transpose");
      Tensor b = dense(DType::f64, {n}, uint64_t(n));
      auto cpu = run_on(Device::cpu(), c.op, c.a, b, c.attrs);
      auto gpu = run_on(Device::cuda(), c.op, c.a, b, c.attrs);
      double r = rel_residual(c.a, gpu[0].to_doubles(), b.to_doubles(), 1, transpose);
      EXPECT_LE(r, 1e-10);
      EXPECT_LE(gpu[2].to_doubles()[0], 1e-10);  // the reported residual
      EXPECT_NEAR(gpu[2].to_doubles()[0], r, 1e-12);
      // The same recurrences: the same iteration count (give or take rounding's last one).
      int gi = gpu[1].to_vector<int32_t>()[0], ci = cpu[1].to_vector<int32_t>()[0];
      EXPECT_NEAR(gi, ci, 1 + ci / 20);
      expect_near(gpu[0], cpu[0], 1e-8, "x");
    }
  }
}

TEST(SparseCudaSolve, ManyRightHandSidesF32AndMaxIter) {
  NEED_GPU();
  SparseMatrix a = spd(400, 3, DType::f32);
  Tensor B = dense(DType::f32, {2, 400, 3}, 4);
  for (const char* op : {"sparse.cg_solve", "sparse.bicgstab_solve"}) {
    SCOPED_TRACE(op);
    auto gpu = run_on(Device::cuda(), op, a, B, {{"tol", 1e-5}});
    auto cpu = run_on(Device::cpu(), op, a, B, {{"tol", 1e-5}});
    ASSERT_EQ(gpu[0].shape(), (std::vector<int64_t>{2, 400, 3}));
    ASSERT_EQ(gpu[1].shape(), (std::vector<int64_t>{2, 3}));
    auto res = gpu[2].to_doubles();
    auto xs = gpu[0].to_doubles(), bs = B.to_doubles();
    for (int64_t c = 0; c < 6; ++c) {
      int64_t bi = c / 3, j = c % 3;
      std::vector<double> x(400), b(400);
      for (int64_t i = 0; i < 400; ++i) {
        x[size_t(i)] = xs[size_t((bi * 400 + i) * 3 + j)];
        b[size_t(i)] = bs[size_t((bi * 400 + i) * 3 + j)];
      }
      EXPECT_LE(rel_residual(a, x, b), 3e-5) << "column " << c;
      EXPECT_LE(res[size_t(c)], 3e-5) << "column " << c;
    }
    expect_near(gpu[0], cpu[0], 1e-3, "x");
    // max_iter stops it, and says so in the iteration count.
    auto few = run_on(Device::cuda(), op, a, B, {{"tol", 1e-30}, {"max_iter", int64_t(3)}});
    for (int32_t it : few[1].to_vector<int32_t>()) EXPECT_EQ(it, 3);
  }
  // b = 0: no iteration, x = 0.
  auto zero = run_on(Device::cuda(), "sparse.cg_solve", a, Tensor::zeros(DType::f32, {400}));
  EXPECT_EQ(zero[1].to_vector<int32_t>()[0], 0);
  EXPECT_EQ(zero[0].to_doubles(), std::vector<double>(400, 0.0));
}

TEST(SparseCudaSolve, RunsRepeatBitForBit) {
  NEED_GPU();
  SparseMatrix a = sp::poisson2d(64, DType::f32);
  Tensor b = dense(DType::f32, {64 * 64}, 2);
  auto one = run_on(Device::cuda(), "sparse.cg_solve", a, b, {{"tol", 1e-6}});
  auto two = run_on(Device::cuda(), "sparse.cg_solve", a, b, {{"tol", 1e-6}});
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(bytes_of(one[i]), bytes_of(two[i])) << i;
  EXPECT_LE(one[2].to_doubles()[0], 1e-5);
}

// lu_solve / cholesky_solve (and gmres) take the host delegate: the CPU's results, bit for bit.
TEST(SparseCudaSolve, HostDelegatedSolvesAreBitIdentical) {
  NEED_GPU();
  for (DType d : {DType::f64, DType::f32}) {
    SparseMatrix s = spd(300, 5, d), n = dominant(300, 6, d);
    Tensor b = dense(d, {300, 2}, 7);
    struct Case {
      const char* op;
      const SparseMatrix& a;
      rlx::Attrs attrs;
    };
    for (const Case& c :
         {Case{"sparse.lu_solve", n, {}}, Case{"sparse.lu_solve", n, {{"transpose", true}}},
          Case{"sparse.cholesky_solve", s, {}}, Case{"sparse.gmres_solve", n, {{"tol", 1e-10}}}}) {
      SCOPED_TRACE(c.op);
      auto cpu = run_on(Device::cpu(), c.op, c.a, b, c.attrs);
      auto gpu = run_on(Device::cuda(), c.op, c.a, b, c.attrs);
      ASSERT_EQ(cpu.size(), gpu.size());
      for (size_t i = 0; i < cpu.size(); ++i) EXPECT_EQ(bytes_of(gpu[i]), bytes_of(cpu[i])) << i;
      EXPECT_LE(rel_residual(c.a, gpu[0].to_doubles(), b.to_doubles(), 2, c.attrs.has("transpose")),
                d == DType::f64 ? 1e-10 : 1e-4);
    }
  }
}

// ---- errors ------------------------------------------------------------------------------

SparseMatrix raw(std::vector<int32_t> col, std::vector<int32_t> rp, std::vector<double> v) {
  SparseMatrix m;
  m.rows = int64_t(rp.size()) - 1;
  m.cols = 3;
  m.col_idx = Tensor::from_vector<int32_t>(col, {int64_t(col.size())});
  m.row_ptr = Tensor::from_vector<int32_t>(rp, {int64_t(rp.size())});
  m.values = Tensor::from_doubles(DType::f64, {int64_t(v.size())}, v);
  return m;
}

// spmv checks the pattern in its own pass over it and reports at the end of the run, not
// with a wait for the device: a CUDA Graph captures it, its replays give the eager result
// bit for bit, and a bad pattern still throws the CPU's ValueError, from a replay too.
TEST(SparseCudaProducts, SpmvIsCapturedInACudaGraphAndStillChecks) {
  NEED_GPU();
  sp::register_ops();
  rlx::register_cuda_kernels();
  for (int per_row : {5, 40}) {  // one lane a row, and 8
    SCOPED_TRACE(per_row);
    SparseMatrix a = random_sparse(500, 400, per_row, 11, DType::f32);
    Graph g;
    sp::Csr A = sp::input(g, "A", a);
    g.output(sp::spmv(A, g.input("x", {DType::f32, {400}})), "y");
    rlx::CompileOptions o;
    o.cuda_graphs = true;
    o.cache = false;
    rlx::CompiledGraph on = rlx::Session(Device::cuda()).compile(g, o);
    auto cu = [](const Tensor& t) { return t.to(Device::cuda()); };
    Tensor x = dense(DType::f32, {400}, 12);
    rlx::TensorMap in{{"A.values", cu(a.values)},
                      {"A.col_idx", cu(a.col_idx)},
                      {"A.row_ptr", cu(a.row_ptr)},
                      {"x", cu(x)}};
    Tensor want = run_on(Device::cpu(), "sparse.spmv", a, x)[0];
    std::vector<uint8_t> first;
    for (int run = 0; run < 5; ++run) {
      Tensor y = on.run(in).at("y").to(Device::cpu());
      expect_near(y, want, 1e-5, "run " + std::to_string(run));
      if (run == 0) first = bytes_of(y);
      EXPECT_EQ(bytes_of(y), first) << "run " << run;
    }
    EXPECT_GE(on.graph_captures(), 1u);
    EXPECT_GE(on.graph_launches(), 2u);
    // A column out of range in the last row, same shapes: the runs stay on the graph path.
    Tensor col = a.col_idx.contiguous();
    col = Tensor::from_doubles(DType::i32, {col.numel()}, col.to_doubles());
    col.data_as<int32_t>()[col.numel() - 1] = 400;
    rlx::TensorMap bad = in;
    bad["A.col_idx"] = cu(col);
    const std::string at = "col_idx[" + std::to_string(col.numel() - 1) + "] = 400";
    for (int run = 0; run < 3; ++run)
      expect_error<rlx::ValueError>([&] { on.run(bad); }, {"sparse.spmv", at});
    // And the device still works afterwards.
    expect_near(on.run(in).at("y").to(Device::cpu()), want, 1e-5, "after the errors");
  }
}

TEST(SparseCudaErrors, BadPatternsAreTheCpusValueErrors) {
  NEED_GPU();
  Tensor b = Tensor::from_doubles(DType::f64, {3}, {1, 2, 3});
  for (const char* op :
       {"sparse.spmv", "sparse.spmm", "sparse.cg_solve", "sparse.bicgstab_solve"}) {
    SCOPED_TRACE(op);
    Tensor x = std::strcmp(op, "sparse.spmm") == 0 ? b.reshape({3, 1}) : b;
    auto bad = [&](SparseMatrix m, std::vector<std::string> frags) {
      expect_error<rlx::ValueError>([&] { run_on(Device::cuda(), op, m, x); }, frags);
    };
    bad(raw({0, 1, 2}, {0, 2, 1, 3}, {1, 1, 1}), {op, "row_ptr[1] = 2 > row_ptr[2] = 1"});
    bad(raw({0, 3, 2}, {0, 1, 2, 3}, {1, 1, 1}),
        {op, "column indices in [0, 3)", "col_idx[1] = 3"});
    bad(raw({0, -1, 2}, {0, 1, 2, 3}, {1, 1, 1}), {op, "col_idx[1] = -1"});
    bad(raw({0, 1, 2}, {1, 1, 2, 3}, {1, 1, 1}), {op, "row_ptr[0] = 0"});
    bad(raw({0, 1, 2}, {0, 1, 2, 2}, {1, 1, 1}), {op, "row_ptr[3] = nnz = 3, got 2"});
  }
  // spmv_t reads columns against its `cols` attribute.
  expect_error<rlx::ValueError>(
      [&] {
        run_on(Device::cuda(), "sparse.spmv_t", raw({0, 5, 2}, {0, 1, 2, 3}, {1, 1, 1}), b,
               {{"cols", int64_t(3)}});
      },
      {"sparse.spmv_t", "col_idx[1] = 5"});
  // Symmetric indefinite for CG, as on the CPU; the device still works afterwards.
  expect_error<rlx::ValueError>(
      [&] {
        run_on(Device::cuda(), "sparse.cg_solve",
               raw({0, 1, 0, 1, 2}, {0, 2, 4, 5}, {1, 2, 2, 1, 1}),
               Tensor::from_doubles(DType::f64, {3}, {1, -1, 0}));
      },
      {"sparse.cg_solve", "symmetric positive definite"});
  SparseMatrix ok = spd(20, 1);
  auto r =
      run_on(Device::cuda(), "sparse.cg_solve", ok, dense(DType::f64, {20}, 1), {{"tol", 1e-12}});
  EXPECT_LE(r[2].to_doubles()[0], 1e-10);
}

}  // namespace
