// Shared helpers of the sparse tests: random matrices, host reference products, running a
// graph, and typed-error expectations.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rlx/rlx.h"
#include "rlx_sparse/sparse.h"

namespace sparse_test {

using rlx::DType;
using rlx::Graph;
using rlx::Tensor;
using rlx::TensorType;
using rlx::Value;
using rlx::sparse::SparseMatrix;

inline std::vector<double> random_vec(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

// A random rows x cols matrix with about `per_row` entries a row, in COO order with
// repeats (so from_triplets sums duplicates). Columns are drawn within `band` of the
// diagonal (band < 0: anywhere): random patterns with no band fill a factorisation in.
inline SparseMatrix random_sparse(int64_t rows, int64_t cols, int per_row, uint64_t seed,
                                  DType d = DType::f64, DType index = DType::i32,
                                  int64_t band = -1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> val(-1, 1), unit(0, 1);
  std::vector<int64_t> r, c;
  std::vector<double> v;
  for (int64_t i = 0; i < rows; ++i)
    for (int k = 0; k < per_row && cols > 0; ++k) {
      int64_t lo = band < 0 ? 0 : std::max<int64_t>(0, i - band);
      int64_t hi = band < 0 ? cols - 1 : std::min(cols - 1, i + band);
      r.push_back(i);
      c.push_back(std::min(hi, lo + int64_t(unit(rng) * double(hi - lo + 1))));
      v.push_back(val(rng));
    }
  return SparseMatrix::from_triplets(rows, cols, r, c, v, d, index);
}

// Non-symmetric, strictly diagonally dominant (so nonsingular and well conditioned),
// entries within 20 of the diagonal.
inline SparseMatrix dominant(int64_t n, uint64_t seed, DType d = DType::f64,
                             DType index = DType::i32) {
  SparseMatrix m = random_sparse(n, n, 4, seed, DType::f64, index, 20);
  std::vector<int64_t> r, c;
  std::vector<double> v, mv = m.values.to_doubles();
  auto rp = m.row_ptr.to_literal().to_ints(), ci = m.col_idx.to_literal().to_ints();
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int64_t e = rp[size_t(i)]; e < rp[size_t(i + 1)]; ++e) {
      r.push_back(i);
      c.push_back(ci[size_t(e)]);
      v.push_back(mv[size_t(e)]);
      sum += std::abs(mv[size_t(e)]);
    }
    r.push_back(i);
    c.push_back(i);
    v.push_back(sum + 1 + 0.5 * std::sin(double(i)));
  }
  return SparseMatrix::from_triplets(n, n, r, c, v, d, index);
}

// Symmetric positive definite: M + M^T + (row sums + 1) on the diagonal (M banded).
inline SparseMatrix spd(int64_t n, uint64_t seed, DType d = DType::f64, DType index = DType::i32) {
  SparseMatrix m = random_sparse(n, n, 3, seed, DType::f64, DType::i32, 20);
  SparseMatrix t = m.transpose();
  std::vector<int64_t> r, c;
  std::vector<double> v, rowsum(static_cast<size_t>(n), 0.0);
  for (const SparseMatrix* x : {&m, &t}) {
    auto rp = x->row_ptr.to_literal().to_ints(), ci = x->col_idx.to_literal().to_ints();
    auto xv = x->values.to_doubles();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t e = rp[size_t(i)]; e < rp[size_t(i + 1)]; ++e) {
        r.push_back(i);
        c.push_back(ci[size_t(e)]);
        v.push_back(xv[size_t(e)]);
        rowsum[size_t(i)] += std::abs(xv[size_t(e)]);
      }
  }
  for (int64_t i = 0; i < n; ++i) {
    r.push_back(i);
    c.push_back(i);
    v.push_back(rowsum[size_t(i)] + 1);
  }
  return SparseMatrix::from_triplets(n, n, r, c, v, d, index);
}

// y = A x (or A^T x) in double on the host; x [cols, k] row-major (k = 1: a vector).
inline std::vector<double> host_product(const SparseMatrix& a, const std::vector<double>& x,
                                        int64_t k = 1, bool transpose = false) {
  auto rp = a.row_ptr.to_literal().to_ints(), ci = a.col_idx.to_literal().to_ints();
  auto v = a.values.to_doubles();
  std::vector<double> y(static_cast<size_t>((transpose ? a.cols : a.rows) * k), 0.0);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t e = rp[size_t(i)]; e < rp[size_t(i + 1)]; ++e)
      for (int64_t j = 0; j < k; ++j) {
        int64_t c = ci[size_t(e)];
        if (transpose)
          y[size_t(c * k + j)] += v[size_t(e)] * x[size_t(i * k + j)];
        else
          y[size_t(i * k + j)] += v[size_t(e)] * x[size_t(c * k + j)];
      }
  return y;
}

inline double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// ||A x - b|| / ||b|| for b, x [n, k] row-major.
inline double rel_residual(const SparseMatrix& a, const std::vector<double>& x,
                           const std::vector<double>& b, int64_t k = 1, bool transpose = false) {
  std::vector<double> r = host_product(a, x, k, transpose);
  for (size_t i = 0; i < r.size(); ++i) r[i] -= b[i];
  return norm(r) / norm(b);
}

// Builds a graph over named inputs, runs it on the CPU, returns the outputs in order.
using Build = std::function<std::vector<Value>(Graph&, std::vector<Value>)>;
inline std::vector<Tensor> run(const std::vector<Tensor>& ins, const Build& build) {
  rlx::sparse::register_ops();
  Graph g;
  std::vector<Value> vs;
  rlx::TensorMap in;
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    vs.push_back(g.input(name, ins[i].type()));
    in[name] = ins[i];
  }
  auto outs = build(g, vs);
  for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
  rlx::Session s(rlx::Device::cpu());
  auto res = s.compile(g).run(in);
  std::vector<Tensor> r;
  for (size_t i = 0; i < outs.size(); ++i) r.push_back(res.at("y" + std::to_string(i)));
  return r;
}

template <class E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << fragments[0];
  } catch (const E& e) {
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
          << "'" << frag << "' not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
  }
}

}  // namespace sparse_test
