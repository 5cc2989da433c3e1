// linalg.* on CUDA (cuSOLVER, cuBLAS): every op is native in the dispatch report (no GPU
// needed), and its results match the CPU's (LAPACK): equal where the answer is unique,
// equal up to the signs of singular / eigen / Householder vectors otherwise, with the
// reconstructions checked. Singular and non-SPD inputs raise the CPU's ValueError, word
// for word. The GPU tests skip, saying so, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rlx/cuda.h"
#include "rlx/rlx.h"
#include "rlx_linalg/linalg.h"

namespace {

using rlx::Attrs;
using rlx::Device;
using rlx::DType;
using rlx::Graph;
using rlx::Tensor;
using rlx::TensorType;
using Shape64 = std::vector<int64_t>;

#define NEED_GPU() \
  if (!rlx::cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one"

Tensor random(DType d, Shape64 shape, uint64_t seed, double diag = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  if (diag != 0) {  // + diag I on every square matrix of the batch
    int64_t c = shape.back(), r = shape[shape.size() - 2];
    for (int64_t b = 0; b < n / (r * c); ++b)
      for (int64_t i = 0; i < std::min(r, c); ++i) v[size_t(b * r * c + i * c + i)] += diag;
  }
  return Tensor::from_doubles(d, shape, v);
}

// A A^T + n I: symmetric positive definite.
Tensor spd(DType d, Shape64 batch, int64_t n, uint64_t seed) {
  Shape64 s = batch;
  s.push_back(n), s.push_back(n);
  auto a = random(DType::f64, s, seed).to_doubles();
  std::vector<double> v(a.size(), 0.0);
  for (size_t b = 0; b < a.size() / size_t(n * n); ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = i == j ? double(n) : 0;
        for (int64_t l = 0; l < n; ++l) acc += a[b * n * n + i * n + l] * a[b * n * n + j * n + l];
        v[b * n * n + i * n + j] = acc;
      }
  return Tensor::from_doubles(d, s, v);
}

std::vector<Tensor> run(Device dev, const std::string& op, const std::vector<Tensor>& ins,
                        Attrs attrs = {}) {
  rlx::linalg::register_ops();
  rlx::register_cuda_kernels();
  Graph g;
  std::vector<rlx::Value> vs;
  rlx::TensorMap in;
  for (size_t i = 0; i < ins.size(); ++i) {
    vs.push_back(g.input("x" + std::to_string(i), ins[i].type()));
    in["x" + std::to_string(i)] = ins[i];
  }
  auto outs = rlx::op_n(op, vs, attrs);
  for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
  auto res = rlx::Session(dev).compile(g).run(in);
  std::vector<Tensor> r;
  for (size_t i = 0; i < outs.size(); ++i)
    r.push_back(res.at("y" + std::to_string(i)).to(Device::cpu()).contiguous());
  return r;
}

double tol(DType d) { return d == DType::f64 ? 1e-9 : 2e-3; }

// |got - want| <= rtol * max(1, max |want|), element by element.
void expect_close(const Tensor& got, const Tensor& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  auto g = got.to_doubles(), w = want.to_doubles();
  double scale = 1;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isinf(w[i])) {
      EXPECT_EQ(g[i], w[i]) << what << " [" << i << "]";
      continue;
    }
    ASSERT_NEAR(g[i], w[i], rtol * scale) << what << " [" << i << "]";
  }
}

// Columns of x [..., r, c] (or rows, when `rows`) multiplied by the sign of their first
// entry that is not ~0: vectors compared up to sign.
Tensor sign_fixed(const Tensor& x, bool rows) {
  auto v = x.to_doubles();
  const int64_t r = x.shape()[x.shape().size() - 2], c = x.shape().back();
  const int64_t nb = int64_t(v.size()) / std::max<int64_t>(1, r * c);
  const int64_t vecs = rows ? r : c, len = rows ? c : r;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t q = 0; q < vecs; ++q) {
      auto at = [&](int64_t i) -> double& {
        return rows ? v[size_t(b * r * c + q * c + i)] : v[size_t(b * r * c + i * c + q)];
      };
      double s = 0;
      for (int64_t i = 0; i < len && s == 0; ++i)
        if (std::abs(at(i)) > 1e-3) s = at(i) > 0 ? 1 : -1;
      for (int64_t i = 0; i < len; ++i) at(i) *= s == 0 ? 1 : s;
    }
  return Tensor::from_doubles(x.dtype(), x.shape(), v);
}

Shape64 mat(Shape64 batch, int64_t r, int64_t c) {
  batch.push_back(r), batch.push_back(c);
  return batch;
}

const std::vector<Shape64> kBatches = {{}, {2, 3}};
const std::vector<DType> kDtypes = {DType::f64, DType::f32};

// ---- dispatch ------------------------------------------------------------------------------

TEST(LinalgCudaDispatch, EveryOpIsNative) {
  rlx::linalg::register_ops();
  rlx::register_cuda_kernels();
  struct Case {
    const char* op;
    std::vector<const char*> types;
  };
  for (DType d : kDtypes)
    for (const Case& c : std::vector<Case>{{"linalg.solve", {"[3,3]", "[3,2]"}},
                                           {"linalg.inv", {"[3,3]"}},
                                           {"linalg.det", {"[2,3,3]"}},
                                           {"linalg.slogdet", {"[3,3]"}},
                                           {"linalg.cholesky", {"[3,3]"}},
                                           {"linalg.qr", {"[4,3]"}},
                                           {"linalg.eigh", {"[3,3]"}},
                                           {"linalg.svd", {"[3,4]"}},
                                           {"linalg.triangular_solve", {"[3,3]", "[3,2]"}},
                                           {"linalg.lstsq", {"[4,3]", "[4,2]"}}}) {
      Graph g;
      std::vector<rlx::Value> vs;
      for (size_t i = 0; i < c.types.size(); ++i)
        vs.push_back(g.input("x" + std::to_string(i),
                             TensorType::parse(std::string(rlx::dtype_name(d)) + c.types[i])));
      auto outs = rlx::op_n(c.op, vs, {});
      for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
      EXPECT_EQ(
          rlx::lower_for_device(g, Device::cuda()).report.count(c.op, rlx::DispatchPath::native), 1)
          << c.op << " " << rlx::dtype_name(d);
    }
}

// ---- parity ------------------------------------------------------------------------------

TEST(LinalgCuda, UniqueAnswersMatchTheCpu) {
  NEED_GPU();
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (int64_t n : {1, 8, 33}) {
        SCOPED_TRACE(std::string(rlx::dtype_name(d)) + " n=" + std::to_string(n) + " batch rank " +
                     std::to_string(batch.size()));
        auto both = [&](const std::string& op, const std::vector<Tensor>& ins, Attrs at = {}) {
          auto c = run(Device::cpu(), op, ins, at), g = run(Device::cuda(), op, ins, at);
          ASSERT_EQ(c.size(), g.size());
          for (size_t i = 0; i < c.size(); ++i) expect_close(g[i], c[i], tol(d), op);
        };
        Tensor A = random(d, mat(batch, n, n), 1, double(n)), B = random(d, mat(batch, n, 3), 2);
        both("linalg.solve", {A, B});
        both("linalg.inv", {A});
        both("linalg.det", {A});
        both("linalg.slogdet", {random(d, mat(batch, n, n), 3)});  // signs of both kinds
        both("linalg.cholesky", {spd(d, batch, n, 4)});
        for (bool lower : {true, false})
          for (bool trans : {true, false})
            for (bool unit : {true, false})
              both("linalg.triangular_solve", {A, B},
                   {{"lower", lower}, {"transpose", trans}, {"unit_diagonal", unit}});
        for (auto [m, k] : std::vector<std::pair<int64_t, int64_t>>{{n + 5, n}, {n, n}})
          both("linalg.lstsq",
               {random(d, mat(batch, m, k), 5, 2.0), random(d, mat(batch, m, 2), 6)});
      }
}

TEST(LinalgCuda, LstsqIsTheMinimumNormSolution) {
  NEED_GPU();
  // Wide and rank-deficient (two equal columns): the pseudo-inverse's answer, as gelsd's.
  for (DType d : kDtypes) {
    Tensor A = random(d, {2, 4, 7}, 7), B = random(d, {2, 4, 2}, 8);
    auto c = run(Device::cpu(), "linalg.lstsq", {A, B}),
         g = run(Device::cuda(), "linalg.lstsq", {A, B});
    expect_close(g[0], c[0], tol(d) * 10, "wide");
    auto v = random(DType::f64, {6, 3}, 9).to_doubles();
    for (int64_t i = 0; i < 6; ++i) v[size_t(i * 3 + 2)] = v[size_t(i * 3)];
    Tensor R = Tensor::from_doubles(d, {6, 3}, v), Rb = random(d, {6, 1}, 10);
    c = run(Device::cpu(), "linalg.lstsq", {R, Rb}, {{"rcond", 1e-4}});
    g = run(Device::cuda(), "linalg.lstsq", {R, Rb}, {{"rcond", 1e-4}});
    expect_close(g[0], c[0], tol(d) * 10, "rank deficient");
  }
}

// Q R, eigenvectors, singular vectors: equal to the CPU's up to sign, and reconstructing.
TEST(LinalgCuda, FactorisationsMatchTheCpuUpToSigns) {
  NEED_GPU();
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (auto [m, n] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {9, 4}, {4, 9}, {33, 33}}) {
        SCOPED_TRACE(std::string(rlx::dtype_name(d)) + " " + std::to_string(m) + "x" +
                     std::to_string(n) + " batch rank " + std::to_string(batch.size()));
        Tensor A = random(d, mat(batch, m, n), 11);
        // qr: R's rows and Q's columns carry one sign each.
        auto cq = run(Device::cpu(), "linalg.qr", {A}), gq = run(Device::cuda(), "linalg.qr", {A});
        expect_close(sign_fixed(gq[1], true), sign_fixed(cq[1], true), tol(d), "R");
        expect_close(sign_fixed(gq[0], false), sign_fixed(cq[0], false), tol(d) * 10, "Q");
        // svd: S equal; U diag(S) Vt = A.
        auto cs = run(Device::cpu(), "linalg.svd", {A}),
             gs = run(Device::cuda(), "linalg.svd", {A});
        expect_close(gs[1], cs[1], tol(d), "S");
        expect_close(sign_fixed(gs[0], false), sign_fixed(cs[0], false), tol(d) * 10, "U");
        expect_close(sign_fixed(gs[2], true), sign_fixed(cs[2], true), tol(d) * 10, "Vt");
        if (m != n) continue;
        Tensor S = spd(d, batch, n, 12);
        auto ce = run(Device::cpu(), "linalg.eigh", {S}),
             ge = run(Device::cuda(), "linalg.eigh", {S});
        expect_close(ge[0], ce[0], tol(d), "w");
        expect_close(sign_fixed(ge[1], false), sign_fixed(ce[1], false), tol(d) * 10, "V");
      }
}

// ---- errors ------------------------------------------------------------------------------

// The error the op raises on `dev`: its type must be ValueError; returns the message.
std::string value_error(Device dev, const std::string& op, const std::vector<Tensor>& ins,
                        Attrs at = {}) {
  try {
    run(dev, op, ins, at);
  } catch (const rlx::ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << op << ": wrong error type: " << e.what();
    return "";
  }
  ADD_FAILURE() << op << ": expected a ValueError";
  return "";
}

TEST(LinalgCudaErrors, SingularAndNotPositiveDefiniteAreTheCpusValueErrors) {
  NEED_GPU();
  for (DType d : kDtypes) {
    // The second matrix of the batch is singular (row 1 = 2 row 0), the first is fine.
    Tensor A = Tensor::from_doubles(d, {2, 2, 2}, {2, 1, 1, 3, 1, 2, 2, 4});
    Tensor B = Tensor::from_doubles(d, {2, 2, 1}, {1, 1, 1, 1});
    for (auto [op, ins] : std::vector<std::pair<std::string, std::vector<Tensor>>>{
             {"linalg.solve", {A, B}}, {"linalg.inv", {A}}}) {
      std::string c = value_error(Device::cpu(), op, ins), g = value_error(Device::cuda(), op, ins);
      EXPECT_NE(g.find("singular"), std::string::npos) << g;
      EXPECT_NE(g.find("matrix 1 of the batch"), std::string::npos) << g;
      EXPECT_EQ(g, c);
    }
    // det / slogdet of the singular one: 0, and sign 0 with log|det| = -inf.
    auto det = run(Device::cuda(), "linalg.det", {A})[0].to_doubles();
    EXPECT_NEAR(det[0], 5, 1e-5);
    EXPECT_EQ(det[1], 0);
    auto sl = run(Device::cuda(), "linalg.slogdet", {A});
    EXPECT_EQ(sl[0].to_doubles()[1], 0);
    EXPECT_EQ(sl[1].to_doubles()[1], -INFINITY);
    // Not positive definite: [[1, 2], [2, 1]].
    Tensor N = Tensor::from_doubles(d, {2, 2}, {1, 2, 2, 1});
    std::string c = value_error(Device::cpu(), "linalg.cholesky", {N});
    std::string g = value_error(Device::cuda(), "linalg.cholesky", {N});
    EXPECT_NE(g.find("positive definite"), std::string::npos) << g;
    EXPECT_EQ(g, c);
    // A zero on a triangular matrix's diagonal.
    Tensor T = Tensor::from_doubles(d, {3, 3}, {1, 0, 0, 2, 0, 0, 3, 4, 5});
    Tensor b3 = Tensor::from_doubles(d, {3, 1}, {1, 1, 1});
    c = value_error(Device::cpu(), "linalg.triangular_solve", {T, b3});
    g = value_error(Device::cuda(), "linalg.triangular_solve", {T, b3});
    EXPECT_NE(g.find("A[1,1] = 0"), std::string::npos) << g;
    EXPECT_EQ(g, c);
    // The device still works afterwards.
    auto x = run(
        Device::cuda(), "linalg.solve",
        {Tensor::from_doubles(d, {2, 2}, {2, 1, 1, 3}), Tensor::from_doubles(d, {2, 1}, {3, 4})});
    EXPECT_NEAR(x[0].to_doubles()[0], 1, 1e-5);
    EXPECT_NEAR(x[0].to_doubles()[1], 1, 1e-5);
  }
}

}  // namespace
