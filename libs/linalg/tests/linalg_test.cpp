// linalg.* on the CPU, through the public API only: residuals and reconstructions of
// every op (f64 to 1e-10, f32 to a few ulps of the problem), gradients and tangents
// against finite differences (f64), and typed errors for bad inputs.
#include "rlx_linalg/linalg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace {

using rlx::Attrs;
using rlx::DType;
using rlx::Graph;
using rlx::IntList;
using rlx::Tensor;
using rlx::TensorType;
using rlx::Value;
using Shape64 = std::vector<int64_t>;

// ---- helpers --------------------------------------------------------------------------

// A host matrix batch in f64 for checking: data row-major, shape [..., r, c].
struct Mat {
  Shape64 shape;
  std::vector<double> v;
  int64_t r() const { return shape[shape.size() - 2]; }
  int64_t c() const { return shape[shape.size() - 1]; }
  int64_t batch() const { return int64_t(v.size()) / std::max<int64_t>(1, r() * c()); }
  double at(int64_t b, int64_t i, int64_t j) const { return v[size_t((b * r() + i) * c() + j)]; }
  double& at(int64_t b, int64_t i, int64_t j) { return v[size_t((b * r() + i) * c() + j)]; }
};

Mat mat(const Tensor& t) { return {t.shape(), t.to_doubles()}; }
Tensor tensor(DType d, const Mat& m) { return Tensor::from_doubles(d, m.shape, m.v); }

Mat random_mat(Shape64 shape, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Mat m{shape, {}};
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  m.v.resize(size_t(n));
  for (double& x : m.v) x = u(rng);
  return m;
}

Mat matmul(const Mat& a, const Mat& b, bool ta = false, bool tb = false) {
  int64_t m = ta ? a.c() : a.r(), k = ta ? a.r() : a.c(), n = tb ? b.r() : b.c();
  Shape64 s(a.shape.begin(), a.shape.end() - 2);
  s.push_back(m), s.push_back(n);
  Mat out{s, std::vector<double>(size_t(a.batch() * m * n))};
  for (int64_t bb = 0; bb < a.batch(); ++bb)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < k; ++l)
          acc += (ta ? a.at(bb, l, i) : a.at(bb, i, l)) * (tb ? b.at(bb, j, l) : b.at(bb, l, j));
        out.at(bb, i, j) = acc;
      }
  return out;
}

double max_abs_diff(const Mat& a, const Mat& b) {
  EXPECT_EQ(a.v.size(), b.v.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.v.size(), b.v.size()); ++i)
    d = std::max(d, std::abs(a.v[i] - b.v[i]));
  return d;
}

Mat identity(Shape64 batch, int64_t n) {
  batch.push_back(n), batch.push_back(n);
  Mat m{batch, {}};
  int64_t nb = 1;
  for (size_t i = 0; i + 2 < batch.size(); ++i) nb *= batch[i];
  m.v.assign(size_t(nb * n * n), 0.0);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < n; ++i) m.at(b, i, i) = 1;
  return m;
}

Shape64 with_mat(Shape64 batch, int64_t r, int64_t c) {
  batch.push_back(r), batch.push_back(c);
  return batch;
}

// A general (non-symmetric) well-conditioned matrix: random + n on the diagonal.
Mat general(Shape64 batch, int64_t n, uint64_t seed) {
  Mat m = random_mat(with_mat(batch, n, n), seed);
  for (int64_t b = 0; b < m.batch(); ++b)
    for (int64_t i = 0; i < n; ++i) m.at(b, i, i) += double(n);
  return m;
}

// A symmetric positive definite matrix: M M^T + n I.
Mat spd(Shape64 batch, int64_t n, uint64_t seed) {
  Mat m = random_mat(with_mat(batch, n, n), seed);
  Mat a = matmul(m, m, false, true);
  for (int64_t b = 0; b < a.batch(); ++b)
    for (int64_t i = 0; i < n; ++i) a.at(b, i, i) += double(n);
  return a;
}

// Builds a graph of one op over the given inputs, runs it on the CPU.
std::vector<Tensor> run_op(const std::string& name, const std::vector<Tensor>& ins,
                           Attrs attrs = {}) {
  rlx::linalg::register_ops();
  Graph g;
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i)
    vs.push_back(g.input("x" + std::to_string(i), ins[i].type()));
  auto outs = rlx::op_n(name, vs, attrs);
  for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
  rlx::Session s(rlx::Device::cpu());
  auto cg = s.compile(g);
  rlx::TensorMap in;
  for (size_t i = 0; i < ins.size(); ++i) in["x" + std::to_string(i)] = ins[i];
  auto res = cg.run(in);
  std::vector<Tensor> r;
  for (size_t i = 0; i < outs.size(); ++i) r.push_back(res.at("y" + std::to_string(i)));
  return r;
}

double tol(DType d, int64_t n) { return d == DType::f64 ? 1e-10 : 2e-4 * std::max<int64_t>(1, n); }

const std::vector<Shape64> kBatches = {{}, {2}, {2, 3}};
const std::vector<int64_t> kSizes = {1, 3, 8, 33};
const std::vector<DType> kDtypes = {DType::f64, DType::f32};

std::string label(DType d, const Shape64& batch, int64_t n) {
  std::string s = rlx::str_cat(rlx::dtype_name(d), " batch[");
  for (int64_t b : batch) s += std::to_string(b) + ",";
  return s + "] n=" + std::to_string(n);
}

// ---- residuals and reconstructions ------------------------------------------------------

TEST(LinalgForward, SolveResidualOnSpdAndGeneralSystems) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (int64_t n : kSizes)
        for (bool sym : {true, false}) {
          Mat A = sym ? spd(batch, n, 1 + uint64_t(n)) : general(batch, n, 2 + uint64_t(n));
          // Each operand rounded to d first, so the residual measures the solve alone.
          A = mat(tensor(d, A));
          Mat B = mat(tensor(d, random_mat(with_mat(batch, n, 2), 3)));
          Mat X = mat(run_op("linalg.solve", {tensor(d, A), tensor(d, B)})[0]);
          EXPECT_LE(max_abs_diff(matmul(A, X), B), tol(d, n))
              << label(d, batch, n) << (sym ? " spd" : " general");
        }
}

TEST(LinalgForward, InvTimesAIsIdentity) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (int64_t n : kSizes) {
        Mat A = mat(tensor(d, general(batch, n, 5)));
        Mat Y = mat(run_op("linalg.inv", {tensor(d, A)})[0]);
        EXPECT_LE(max_abs_diff(matmul(A, Y), identity(batch, n)), tol(d, n)) << label(d, batch, n);
      }
}

TEST(LinalgForward, CholeskyReconstructs) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (int64_t n : kSizes) {
        Mat A = mat(tensor(d, spd(batch, n, 7)));
        Mat L = mat(run_op("linalg.cholesky", {tensor(d, A)})[0]);
        double scale = d == DType::f64 ? 1 : double(n);
        EXPECT_LE(max_abs_diff(matmul(L, L, false, true), A), tol(d, n) * scale)
            << label(d, batch, n);
        for (int64_t b = 0; b < L.batch(); ++b)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = i + 1; j < n; ++j) ASSERT_EQ(L.at(b, i, j), 0.0);
      }
}

TEST(LinalgForward, QrReconstructsWithOrthonormalQ) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (auto [m, n] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 3}, {3, 5}, {8, 8}, {40, 17}}) {
        Mat A = mat(tensor(d, random_mat(with_mat(batch, m, n), 9)));
        auto out = run_op("linalg.qr", {tensor(d, A)});
        Mat Q = mat(out[0]), R = mat(out[1]);
        int64_t k = std::min(m, n);
        ASSERT_EQ(Q.shape, with_mat(batch, m, k));
        ASSERT_EQ(R.shape, with_mat(batch, k, n));
        EXPECT_LE(max_abs_diff(matmul(Q, R), A), tol(d, m)) << label(d, batch, m) << "x" << n;
        EXPECT_LE(max_abs_diff(matmul(Q, Q, true, false), identity(batch, k)), tol(d, m));
        for (int64_t b = 0; b < R.batch(); ++b)
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j < i; ++j) ASSERT_EQ(R.at(b, i, j), 0.0);
      }
}

TEST(LinalgForward, EighReconstructsWithAscendingEigenvalues) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (int64_t n : kSizes) {
        Mat M = random_mat(with_mat(batch, n, n), 11);
        Mat A = M;  // symmetric: (M + M^T) / 2
        for (int64_t b = 0; b < A.batch(); ++b)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) A.at(b, i, j) = 0.5 * (M.at(b, i, j) + M.at(b, j, i));
        A = mat(tensor(d, A));
        auto out = run_op("linalg.eigh", {tensor(d, A)});
        Mat w = mat(out[0]), V = mat(out[1]);
        Mat VD = V;
        for (int64_t b = 0; b < V.batch(); ++b)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
              VD.at(b, i, j) = V.at(b, i, j) * w.v[size_t(b * n + j)];
              if (j > 0 && i == 0) {
                ASSERT_LE(w.v[size_t(b * n + j - 1)], w.v[size_t(b * n + j)]);
              }
            }
        EXPECT_LE(max_abs_diff(matmul(VD, V, false, true), A), tol(d, n)) << label(d, batch, n);
        EXPECT_LE(max_abs_diff(matmul(V, V, true, false), identity(batch, n)), tol(d, n));
      }
}

TEST(LinalgForward, SvdReconstructs) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (auto [m, n] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {6, 4}, {4, 6}, {9, 9}, {40, 17}}) {
        Mat A = mat(tensor(d, random_mat(with_mat(batch, m, n), 13)));
        auto out = run_op("linalg.svd", {tensor(d, A)});
        Mat U = mat(out[0]), S{out[1].shape(), out[1].to_doubles()}, Vt = mat(out[2]);
        int64_t k = std::min(m, n);
        Mat US = U;
        for (int64_t b = 0; b < U.batch(); ++b)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < k; ++j) {
              US.at(b, i, j) = U.at(b, i, j) * S.v[size_t(b * k + j)];
              if (i == 0 && j > 0) {
                ASSERT_GE(S.v[size_t(b * k + j - 1)], S.v[size_t(b * k + j)]);
              }
            }
        EXPECT_LE(max_abs_diff(matmul(US, Vt), A), tol(d, m)) << label(d, batch, m) << "x" << n;
        EXPECT_LE(max_abs_diff(matmul(U, U, true, false), identity(batch, k)), tol(d, m));
        EXPECT_LE(max_abs_diff(matmul(Vt, Vt, false, true), identity(batch, k)), tol(d, m));
      }
}

TEST(LinalgForward, TriangularSolveEveryVariant) {
  for (DType d : kDtypes)
    for (int64_t n : kSizes)
      for (bool lower : {true, false})
        for (bool trans : {false, true})
          for (bool unit : {false, true}) {
            Shape64 batch{2};
            Mat A = mat(tensor(d, general(batch, n, 17)));  // both triangles full: the op reads one
            Mat B = mat(tensor(d, random_mat(with_mat(batch, n, 3), 19)));
            Mat X =
                mat(run_op("linalg.triangular_solve", {tensor(d, A), tensor(d, B)},
                           {{"lower", lower}, {"transpose", trans}, {"unit_diagonal", unit}})[0]);
            Mat T = A;  // op(tri(A))
            for (int64_t b = 0; b < A.batch(); ++b)
              for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < n; ++j) {
                  int64_t r = trans ? j : i, c = trans ? i : j;
                  bool keep = lower ? c <= r : c >= r;
                  double v = keep ? A.at(b, r, c) : 0.0;
                  if (unit && r == c) v = 1;
                  T.at(b, i, j) = v;
                }
            EXPECT_LE(max_abs_diff(matmul(T, X), B), tol(d, n))
                << label(d, batch, n) << " lower=" << lower << " transpose=" << trans
                << " unit=" << unit;
          }
}

TEST(LinalgForward, DetAndSlogdetAgreeWithCholeskyAndSign) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches)
      for (int64_t n : {1, 3, 8}) {
        Mat A = mat(tensor(d, spd(batch, n, 23)));
        Mat L = mat(run_op("linalg.cholesky", {tensor(d, A)})[0]);
        std::vector<double> expect;  // det A = prod(diag L)^2
        for (int64_t b = 0; b < A.batch(); ++b) {
          double p = 1;
          for (int64_t i = 0; i < n; ++i) p *= L.at(b, i, i);
          expect.push_back(p * p);
        }
        auto det = run_op("linalg.det", {tensor(d, A)})[0].to_doubles();
        auto sl = run_op("linalg.slogdet", {tensor(d, A)});
        auto sign = sl[0].to_doubles(), logabs = sl[1].to_doubles();
        double rt = d == DType::f64 ? 1e-10 : 1e-4;
        for (size_t b = 0; b < expect.size(); ++b) {
          EXPECT_NEAR(det[b], expect[b], rt * expect[b]) << label(d, batch, n);
          EXPECT_EQ(sign[b], 1.0);
          EXPECT_NEAR(logabs[b], std::log(expect[b]), rt * std::max(1.0, std::log(expect[b])));
        }
        // Swapping two rows flips the sign.
        if (n >= 2) {
          Mat S = A;
          for (int64_t b = 0; b < A.batch(); ++b)
            for (int64_t j = 0; j < n; ++j) std::swap(S.at(b, 0, j), S.at(b, 1, j));
          auto sl2 = run_op("linalg.slogdet", {tensor(d, S)});
          auto det2 = run_op("linalg.det", {tensor(d, S)})[0].to_doubles();
          for (size_t b = 0; b < expect.size(); ++b) {
            EXPECT_EQ(sl2[0].to_doubles()[b], -1.0);
            EXPECT_NEAR(det2[b], -expect[b], rt * expect[b]);
          }
        }
      }
}

TEST(LinalgForward, LstsqSatisfiesNormalEquationsAndMinNorm) {
  for (DType d : kDtypes)
    for (const auto& batch : kBatches) {
      // Overdetermined: A^T (A X - B) = 0.
      Mat A = mat(tensor(d, random_mat(with_mat(batch, 12, 5), 29)));
      Mat B = mat(tensor(d, random_mat(with_mat(batch, 12, 2), 31)));
      Mat X = mat(run_op("linalg.lstsq", {tensor(d, A), tensor(d, B)})[0]);
      ASSERT_EQ(X.shape, with_mat(batch, 5, 2));
      Mat R = matmul(A, X);
      for (size_t i = 0; i < R.v.size(); ++i) R.v[i] -= B.v[i];
      Mat zero = matmul(A, R, true, false);
      std::fill(zero.v.begin(), zero.v.end(), 0.0);
      EXPECT_LE(max_abs_diff(matmul(A, R, true, false), zero), tol(d, 12) * 10);
      // Underdetermined (wide, full row rank): A X = B exactly, X = A^T y (minimum norm).
      Mat W = mat(tensor(d, random_mat(with_mat(batch, 3, 7), 37)));
      Mat C = mat(tensor(d, random_mat(with_mat(batch, 3, 2), 41)));
      Mat Y = mat(run_op("linalg.lstsq", {tensor(d, W), tensor(d, C)})[0]);
      EXPECT_LE(max_abs_diff(matmul(W, Y), C), tol(d, 7) * 10);
      // Min norm: X is in the row space of W, so (I - W^+ W) X = 0; checked as X = W^T y
      // with y = (W W^T)^-1 C, i.e. X equals the pseudo-inverse solution.
      Mat G = matmul(W, W, false, true);
      Mat y = mat(run_op("linalg.solve", {tensor(DType::f64, G), tensor(DType::f64, C)})[0]);
      EXPECT_LE(max_abs_diff(matmul(W, y, true, false), Y), d == DType::f64 ? 1e-10 : 1e-3);
    }
}

template <class E>
void expect_error(std::function<void()> f, std::vector<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << fragments[0];
  } catch (const E& e) {
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
  }
}

// ---- gradients against finite differences ------------------------------------------------

// A function of the input matrices built in a graph (the op and any sign-fixing around it).
using Build = std::function<std::vector<Value>(std::vector<Value>)>;

struct GradCase {
  std::string name;
  std::vector<Mat> inputs;
  Build build;
  double tol = 1e-6;
};

// Central differences of the scalar loss = sum_k sum(c_k * out_k) (fixed random c_k)
// against grad (vjp) and against jvp along a random direction.
void check_grad(const GradCase& c) {
  rlx::linalg::register_ops();
  Graph g;
  std::vector<Value> xs;
  std::vector<std::string> names;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    xs.push_back(g.input(names.back(), TensorType(DType::f64, rlx::to_shape(c.inputs[i].shape))));
  }
  auto outs = c.build(xs);
  Value loss;
  uint64_t seed = 100;
  for (Value o : outs) {
    Shape64 s = rlx::static_sizes(o.shape());
    Mat w = random_mat(s, seed++);
    Value term = rlx::sum(o * g.constant(rlx::Literal::from_doubles(DType::f64, s, w.v)));
    loss = loss.valid() ? loss + term : term;
  }
  g.output(loss, "loss");
  rlx::Session s(rlx::Device::cpu());
  auto fwd = s.compile(g);
  auto grad_g = rlx::grad(g, {.wrt = names});
  auto bwd = s.compile(*grad_g);
  auto jvp_g = rlx::jvp(g, names);
  auto tan = s.compile(*jvp_g);

  auto inputs = [&](const std::vector<Mat>& ms) {
    rlx::TensorMap m;
    for (size_t i = 0; i < ms.size(); ++i) m[names[i]] = tensor(DType::f64, ms[i]);
    return m;
  };
  auto f = [&](const std::vector<Mat>& ms) {
    return fwd.run(inputs(ms)).at("loss").to_doubles()[0];
  };
  auto grads = bwd.run(inputs(c.inputs));
  const double eps = 1e-6;
  double scale = 1;
  std::vector<std::vector<double>> fd(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i)
    for (size_t e = 0; e < c.inputs[i].v.size(); ++e) {
      auto p = c.inputs, m = c.inputs;
      p[i].v[e] += eps, m[i].v[e] -= eps;
      fd[i].push_back((f(p) - f(m)) / (2 * eps));
      scale = std::max(scale, std::abs(fd[i].back()));
    }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    auto gv = grads.at("grad." + names[i]).to_doubles();
    ASSERT_EQ(gv.size(), fd[i].size());
    for (size_t e = 0; e < gv.size(); ++e)
      EXPECT_NEAR(gv[e], fd[i][e], c.tol * scale)
          << c.name << ": vjp of input " << i << " [" << e << "]";
  }
  // jvp along a random direction.
  rlx::TensorMap tin = inputs(c.inputs);
  double expect = 0;
  std::vector<Mat> dirs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    dirs.push_back(random_mat(c.inputs[i].shape, 500 + i));
    tin["tan." + names[i]] = tensor(DType::f64, dirs.back());
    for (size_t e = 0; e < dirs[i].v.size(); ++e) expect += fd[i][e] * dirs[i].v[e];
  }
  double got = tan.run(tin).at("tan.loss").to_doubles()[0];
  EXPECT_NEAR(got, expect, c.tol * scale * 10) << c.name << ": jvp";
}

Value sym_in_graph(Value m) {
  IntList perm;
  for (int64_t i = 0; i < m.rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return (m + rlx::transpose(m, perm)) * 0.5;
}

// M M^T + n I, built in the graph: the SPD argument of cholesky's gradient check.
Value spd_in_graph(Value m) {
  int64_t n = m.shape().back().value();
  IntList perm;
  for (int64_t i = 0; i < m.rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  std::vector<double> eye(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) eye[size_t(i * n + i)] = double(n);
  return rlx::matmul(m, rlx::transpose(m, perm)) +
         m.graph->constant(rlx::Literal::from_doubles(DType::f64, {n, n}, eye));
}

std::vector<Value> one(const char* op, std::vector<Value> in, Attrs attrs = {}) {
  return rlx::op_n(op, std::move(in), attrs);
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cs;
  for (Shape64 batch : {Shape64{}, Shape64{2}}) {
    std::string b = batch.empty() ? "" : " batched";
    cs.push_back({"solve" + b,
                  {general(batch, 4, 1), random_mat(with_mat(batch, 4, 2), 2)},
                  [](auto x) { return one("linalg.solve", x); }});
    cs.push_back({"inv" + b, {general(batch, 4, 3)}, [](auto x) { return one("linalg.inv", x); }});
    cs.push_back({"det" + b, {general(batch, 3, 4)}, [](auto x) { return one("linalg.det", x); }});
    cs.push_back({"slogdet" + b, {general(batch, 4, 5)}, [](auto x) {
                    return std::vector<Value>{one("linalg.slogdet", x)[1]};
                  }});
    cs.push_back({"cholesky" + b, {random_mat(with_mat(batch, 4, 4), 6)}, [](auto x) {
                    return one("linalg.cholesky", {spd_in_graph(x[0])});
                  }});
    cs.push_back({"qr square" + b, {random_mat(with_mat(batch, 4, 4), 7)}, [](auto x) {
                    return one("linalg.qr", x);
                  }});
    cs.push_back({"qr tall" + b, {random_mat(with_mat(batch, 6, 3), 8)}, [](auto x) {
                    return one("linalg.qr", x);
                  }});
    // Eigenvectors and singular vectors are defined up to sign: the loss sees w and V*V.
    cs.push_back({"eigh" + b, {random_mat(with_mat(batch, 4, 4), 9)}, [](auto x) {
                    auto o = one("linalg.eigh", {sym_in_graph(x[0])});
                    return std::vector<Value>{o[0], o[1] * o[1]};
                  }});
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {5, 3}, {3, 5}})
      cs.push_back({rlx::str_cat("svd ", m, "x", n, b),
                    {random_mat(with_mat(batch, m, n), 10 + uint64_t(m))},
                    [](auto x) {
                      auto o = one("linalg.svd", x);
                      return std::vector<Value>{o[0] * o[0], o[1], o[2] * o[2]};
                    }});
    for (bool lower : {true, false})
      for (bool trans : {false, true})
        for (bool unit : {false, true})
          cs.push_back({rlx::str_cat("triangular_solve lower=", lower, " transpose=", trans,
                                     " unit=", unit, b),
                        {general(batch, 4, 20), random_mat(with_mat(batch, 4, 3), 21)},
                        [=](auto x) {
                          return one(
                              "linalg.triangular_solve", x,
                              {{"lower", lower}, {"transpose", trans}, {"unit_diagonal", unit}});
                        }});
    cs.push_back({"lstsq" + b,
                  {random_mat(with_mat(batch, 6, 3), 22), random_mat(with_mat(batch, 6, 2), 23)},
                  [](auto x) { return one("linalg.lstsq", x); }});
  }
  return cs;
}

TEST(LinalgGrad, EveryOpMatchesFiniteDifferences) {
  for (const auto& c : grad_cases()) {
    SCOPED_TRACE(c.name);
    check_grad(c);
  }
}

// Second order: hvp (jvp of grad, through the rules' own linalg.* ops) against central
// differences of grad along the tangent.
void check_hvp(const GradCase& c) {
  rlx::linalg::register_ops();
  Graph g;
  std::vector<Value> xs;
  std::vector<std::string> names;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    xs.push_back(g.input(names.back(), TensorType(DType::f64, rlx::to_shape(c.inputs[i].shape))));
  }
  auto outs = c.build(xs);
  Value loss;
  uint64_t seed = 300;
  for (Value o : outs) {
    Shape64 s = rlx::static_sizes(o.shape());
    Mat w = random_mat(s, seed++);
    Value term = rlx::sum(o * o * g.constant(rlx::Literal::from_doubles(DType::f64, s, w.v)));
    loss = loss.valid() ? loss + term : term;
  }
  g.output(loss, "loss");
  rlx::Session s(rlx::Device::cpu());
  auto bwd = s.compile(*rlx::grad(g, {.wrt = names}));
  auto hv = s.compile(*rlx::hvp(g, {.wrt = names}));
  std::vector<Mat> dirs;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    dirs.push_back(random_mat(c.inputs[i].shape, 700 + i));
  auto at = [&](double t) {
    rlx::TensorMap m;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      Mat x = c.inputs[i];
      for (size_t e = 0; e < x.v.size(); ++e) x.v[e] += t * dirs[i].v[e];
      m[names[i]] = tensor(DType::f64, x);
    }
    return m;
  };
  const double eps = 1e-5;
  auto plus = bwd.run(at(eps)), minus = bwd.run(at(-eps));
  rlx::TensorMap in = at(0);
  for (size_t i = 0; i < names.size(); ++i) in["tan." + names[i]] = tensor(DType::f64, dirs[i]);
  auto got = hv.run(in);
  for (size_t i = 0; i < names.size(); ++i) {
    auto p = plus.at("grad." + names[i]).to_doubles(),
         m = minus.at("grad." + names[i]).to_doubles();
    auto h = got.at("hvp." + names[i]).to_doubles();
    double scale = 1;
    std::vector<double> fd;
    for (size_t e = 0; e < p.size(); ++e) {
      fd.push_back((p[e] - m[e]) / (2 * eps));
      scale = std::max(scale, std::abs(fd.back()));
    }
    for (size_t e = 0; e < h.size(); ++e)
      EXPECT_NEAR(h[e], fd[e], 1e-5 * scale)
          << c.name << ": hvp of input " << i << " [" << e << "]";
  }
}

TEST(LinalgGrad, HvpMatchesFiniteDifferencesOfGrad) {
  for (const auto& c : grad_cases()) {
    if (c.name.find("batched") != std::string::npos) continue;
    SCOPED_TRACE(c.name);
    check_hvp(c);
  }
}

TEST(LinalgGrad, RulesOutsideTheirDomainAreNotSupported) {
  rlx::linalg::register_ops();
  for (auto [op, shapes] : std::vector<std::pair<const char*, std::vector<const char*>>>{
           {"linalg.qr", {"f64[3,5]"}}, {"linalg.lstsq", {"f64[3,5]", "f64[3,2]"}}}) {
    Graph g;
    std::vector<Value> vs;
    for (size_t i = 0; i < shapes.size(); ++i)
      vs.push_back(g.input("x" + std::to_string(i), TensorType::parse(shapes[i])));
    g.output(rlx::sum(rlx::op_n(op, vs)[0]), "loss");
    expect_error<rlx::NotSupported>([&] { rlx::grad(g); }, {op, "m >= n"});
  }
}

// ---- vmap ----------------------------------------------------------------------------------

// The op vmapped over a batch of 3 (the first input batched at `axis`, the others not)
// against the op run on each element.
void check_vmap(const std::string& op, std::vector<Mat> ins, int axis, Attrs attrs = {}) {
  rlx::linalg::register_ops();
  Graph g;
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i)
    vs.push_back(
        g.input("x" + std::to_string(i), TensorType(DType::f64, rlx::to_shape(ins[i].shape))));
  auto outs = rlx::op_n(op, vs, attrs);
  for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
  rlx::VmapOptions vo;
  vo.in_axes["x0"] = axis;
  for (size_t i = 1; i < ins.size(); ++i) vo.in_axes["x" + std::to_string(i)] = rlx::kNotBatched;
  auto vg = rlx::vmap(g, vo);
  rlx::Session s(rlx::Device::cpu());
  auto cg = s.compile(*vg);
  // x0 with a batch of 3 inserted at `axis`: element e is x0 * (e + 1).
  Tensor x0 = tensor(DType::f64, ins[0]);
  std::vector<Tensor> slices;
  for (int e = 0; e < 3; ++e) {
    Mat m = ins[0];
    for (double& v : m.v) v *= (e + 1);
    slices.push_back(tensor(DType::f64, m));
  }
  Shape64 bshape = ins[0].shape;
  bshape.insert(bshape.begin() + axis, 3);
  Tensor batched = Tensor::empty(DType::f64, bshape);
  {
    // Fill through a permuted view: batch first, then moved to `axis`.
    Shape64 front = ins[0].shape;
    front.insert(front.begin(), 3);
    std::vector<double> v;
    for (auto& t : slices)
      for (double x : t.to_doubles()) v.push_back(x);
    Tensor f = Tensor::from_doubles(DType::f64, front, v);
    std::vector<int64_t> perm;
    for (int64_t i = 1; i <= axis; ++i) perm.push_back(i);
    perm.push_back(0);
    for (int64_t i = axis + 1; i < int64_t(front.size()); ++i) perm.push_back(i);
    batched = f.permute(perm).contiguous();
  }
  rlx::TensorMap in{{"x0", batched}};
  std::vector<Tensor> rest;
  for (size_t i = 1; i < ins.size(); ++i) {
    in["x" + std::to_string(i)] = tensor(DType::f64, ins[i]);
    rest.push_back(tensor(DType::f64, ins[i]));
  }
  auto res = cg.run(in);
  for (int e = 0; e < 3; ++e) {
    std::vector<Tensor> one_in{slices[size_t(e)]};
    one_in.insert(one_in.end(), rest.begin(), rest.end());
    auto want = run_op(op, one_in, attrs);
    for (size_t o = 0; o < want.size(); ++o) {
      Tensor got = res.at("y" + std::to_string(o)).slice(0, e, e + 1).contiguous();
      auto gv = got.to_doubles(), wv = want[o].to_doubles();
      ASSERT_EQ(gv.size(), wv.size()) << op;
      for (size_t i = 0; i < gv.size(); ++i)
        EXPECT_NEAR(gv[i], wv[i], 1e-10 * (1 + std::abs(wv[i])))
            << op << " output " << o << " element " << e;
    }
  }
}

TEST(LinalgVmap, EveryOpMatchesALoop) {
  Mat A = general({}, 4, 51), S = spd({}, 4, 52), R = random_mat({5, 3}, 53);
  Mat B = random_mat({4, 2}, 54), C = random_mat({5, 2}, 55);
  for (int axis : {0, 1}) {
    check_vmap("linalg.solve", {A, B}, axis);
    check_vmap("linalg.inv", {A}, axis);
    check_vmap("linalg.det", {A}, axis);
    check_vmap("linalg.slogdet", {A}, axis);
    check_vmap("linalg.cholesky", {S}, axis);
    check_vmap("linalg.qr", {R}, axis);
    check_vmap("linalg.eigh", {S}, axis);
    check_vmap("linalg.svd", {R}, axis);
    check_vmap("linalg.triangular_solve", {A, B}, axis, {{"lower", false}, {"transpose", true}});
    check_vmap("linalg.lstsq", {R, C}, axis);
  }
}

// ---- inference -----------------------------------------------------------------------------

TEST(LinalgInfer, OutputTypesWithSymbolicBatchDims) {
  rlx::linalg::register_ops();
  Graph g;
  Value a = g.input("a", TensorType::parse("f32[b,4,4]"));
  Value b = g.input("b", TensorType::parse("f32[b,4,2]"));
  Value t = g.input("t", TensorType::parse("f64[b,6,3]"));
  auto str = [](Value v) { return v.type().str(); };
  EXPECT_EQ(str(rlx::op("linalg.solve", {a, b})), "f32[b,4,2]");
  EXPECT_EQ(str(rlx::op("linalg.inv", {a})), "f32[b,4,4]");
  EXPECT_EQ(str(rlx::op("linalg.det", {a})), "f32[b]");
  auto sl = rlx::op_n("linalg.slogdet", {a});
  EXPECT_EQ(str(sl[0]) + str(sl[1]), "f32[b]f32[b]");
  EXPECT_EQ(str(rlx::op("linalg.cholesky", {a})), "f32[b,4,4]");
  auto qr = rlx::op_n("linalg.qr", {t});
  EXPECT_EQ(str(qr[0]) + str(qr[1]), "f64[b,6,3]f64[b,3,3]");
  auto eh = rlx::op_n("linalg.eigh", {a});
  EXPECT_EQ(str(eh[0]) + str(eh[1]), "f32[b,4]f32[b,4,4]");
  auto sv = rlx::op_n("linalg.svd", {rlx::transpose(t, {0, 2, 1})});
  EXPECT_EQ(str(sv[0]) + str(sv[1]) + str(sv[2]), "f64[b,3,3]f64[b,3]f64[b,3,6]");
  EXPECT_EQ(str(rlx::op("linalg.triangular_solve", {a, b})), "f32[b,4,2]");
  Value rhs = g.input("rhs", TensorType::parse("f64[b,6,5]"));
  EXPECT_EQ(str(rlx::op("linalg.lstsq", {t, rhs})), "f64[b,3,5]");
}

// ---- typed errors --------------------------------------------------------------------------

void build_only(const std::string& op, std::vector<TensorType> types, Attrs attrs = {}) {
  rlx::linalg::register_ops();
  Graph g;
  std::vector<Value> vs;
  for (size_t i = 0; i < types.size(); ++i)
    vs.push_back(g.input("x" + std::to_string(i), types[i]));
  rlx::op_n(op, vs, attrs);
}

TEST(LinalgErrors, NonSquareMatrices) {
  for (const char* op :
       {"linalg.inv", "linalg.det", "linalg.slogdet", "linalg.cholesky", "linalg.eigh"})
    expect_error<rlx::ValueError>([&] { build_only(op, {TensorType::parse("f64[3,4]")}); },
                                  {op, "square", "f64[3,4]"});
  expect_error<rlx::ValueError>(
      [] {
        build_only("linalg.solve", {TensorType::parse("f64[3,4]"), TensorType::parse("f64[3,1]")});
      },
      {"linalg.solve", "square"});
  expect_error<rlx::ValueError>([] { build_only("linalg.qr", {TensorType::parse("f64[4]")}); },
                                {"linalg.qr", "rank >= 2"});
}

TEST(LinalgErrors, MismatchedBatchOrRows) {
  expect_error<rlx::ValueError>(
      [] {
        build_only("linalg.solve",
                   {TensorType::parse("f64[2,3,3]"), TensorType::parse("f64[4,3,1]")});
      },
      {"linalg.solve", "batch dims", "f64[4,3,1]"});
  expect_error<rlx::ValueError>(
      [] {
        build_only("linalg.solve", {TensorType::parse("f64[3,3]"), TensorType::parse("f64[4,1]")});
      },
      {"linalg.solve", "rows", "f64[4,1]"});
  expect_error<rlx::ValueError>(
      [] {
        build_only("linalg.triangular_solve",
                   {TensorType::parse("f32[3,3]"), TensorType::parse("f32[2,1]")});
      },
      {"linalg.triangular_solve", "rows"});
  expect_error<rlx::ValueError>(
      [] {
        build_only("linalg.lstsq", {TensorType::parse("f64[5,3]"), TensorType::parse("f64[4,2]")});
      },
      {"linalg.lstsq", "rows"});
}

TEST(LinalgErrors, WrongDtypes) {
  for (const char* t : {"i32[3,3]", "f16[3,3]", "bool[3,3]"})
    expect_error<rlx::TypeError>([&] { build_only("linalg.inv", {TensorType::parse(t)}); },
                                 {"linalg.inv", "f32 or f64", t});
  expect_error<rlx::TypeError>(
      [] {
        build_only("linalg.solve", {TensorType::parse("f64[3,3]"), TensorType::parse("f32[3,1]")});
      },
      {"linalg.solve", "one dtype"});
}

TEST(LinalgErrors, SingularMatrices) {
  for (DType d : kDtypes) {
    Mat A{{3, 3}, {1, 2, 3, 2, 4, 6, 1, 0, 1}};  // row 1 = 2 * row 0
    Mat B{{3, 1}, {1, 2, 3}};
    expect_error<rlx::ValueError>(
        [&] {
          run_op("linalg.solve", {tensor(d, A), tensor(d, B)});
        },
        {"linalg.solve", "nonsingular", "singular"});
    expect_error<rlx::ValueError>([&] { run_op("linalg.inv", {tensor(d, A)}); },
                                  {"linalg.inv", "nonsingular"});
    Mat T{{3, 3}, {1, 0, 0, 2, 0, 0, 1, 1, 1}};
    expect_error<rlx::ValueError>(
        [&] {
          run_op("linalg.triangular_solve", {tensor(d, T), tensor(d, B)});
        },
        {"linalg.triangular_solve", "nonsingular"});
    // det of a singular matrix is 0 and slogdet's sign 0, log|det| -inf: no error.
    EXPECT_EQ(run_op("linalg.det", {tensor(d, A)})[0].to_doubles()[0], 0.0);
    auto sl = run_op("linalg.slogdet", {tensor(d, A)});
    EXPECT_EQ(sl[0].to_doubles()[0], 0.0);
    EXPECT_TRUE(std::isinf(sl[1].to_doubles()[0]));
  }
}

TEST(LinalgErrors, CholeskyOfANonSpdMatrix) {
  for (DType d : kDtypes) {
    Mat A{{2, 3, 3},
          {4, 0, 0, 0, 5, 0, 0, 0, 6,    // SPD
           1, 2, 0, 2, 1, 0, 0, 0, 1}};  // eigenvalues 3, -1, 1
    expect_error<rlx::ValueError>([&] { run_op("linalg.cholesky", {tensor(d, A)}); },
                                  {"linalg.cholesky", "positive definite", "matrix 1"});
  }
}

}  // namespace
