// SparseMatrix: the host-side CSR helper (validation, COO -> CSR, dense and transposed
// copies), poisson2d, and the graph builders' constants.
#include <algorithm>
#include <numeric>

#include "csr.h"
#include "rlx_sparse/sparse.h"

namespace rlx::sparse {

namespace {

const char* kWhere = "sparse.SparseMatrix";

std::vector<int64_t> ints(const Tensor& t) { return t.to_literal().to_ints(); }

Tensor index_tensor(const std::vector<int64_t>& v, DType d) {
  Tensor t = Tensor::empty(d, {int64_t(v.size())});
  if (d == DType::i64)
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  else
    std::transform(v.begin(), v.end(), t.data_as<int32_t>(), [](int64_t x) { return int32_t(x); });
  return t;
}

void check_index_dtype(DType d) {
  if (d != DType::i32 && d != DType::i64)
    fail<TypeError>(kWhere, "expected an index dtype i32 or i64, got ", dtype_name(d));
}

// CSR from triplets (any order): counting sort by row, then by column, duplicates summed.
SparseMatrix build(int64_t rows, int64_t cols, const std::vector<int64_t>& r,
                   const std::vector<int64_t>& c, const std::vector<double>& v, DType dtype,
                   DType index) {
  check_index_dtype(index);
  if (dtype != DType::f32 && dtype != DType::f64)
    fail<TypeError>(kWhere, "expected values of dtype f32 or f64, got ", dtype_name(dtype));
  if (rows < 0 || cols < 0)
    fail<ValueError>(kWhere, "expected rows, cols >= 0, got ", rows, ", ", cols);
  if (r.size() != c.size() || r.size() != v.size())
    fail<ValueError>(kWhere, "expected row, col and values of one length, got ", r.size(), ", ",
                     c.size(), ", ", v.size());
  int64_t limit = index == DType::i32 ? int64_t(INT32_MAX) : INT64_MAX;
  if (int64_t(r.size()) > limit || cols > limit)
    fail<ValueError>(kWhere, "expected nnz and cols that fit ", dtype_name(index), ", got nnz ",
                     r.size(), ", cols ", cols);
  for (size_t e = 0; e < r.size(); ++e)
    if (r[e] < 0 || r[e] >= rows || c[e] < 0 || c[e] >= cols)
      fail<ValueError>(kWhere, "expected entries inside the ", rows, "x", cols, " matrix, got (",
                       r[e], ", ", c[e], ") at ", e);
  std::vector<int64_t> start(static_cast<size_t>(rows + 1), 0);
  for (int64_t x : r) ++start[size_t(x + 1)];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int64_t> order(r.size()), next(start.begin(), start.end() - 1);
  for (size_t e = 0; e < r.size(); ++e) order[size_t(next[size_t(r[e])]++)] = int64_t(e);
  std::vector<int64_t> rp(static_cast<size_t>(rows + 1), 0), ci;
  std::vector<double> vals;
  for (int64_t i = 0; i < rows; ++i) {
    auto b = order.begin() + start[size_t(i)], e = order.begin() + start[size_t(i + 1)];
    std::stable_sort(b, e, [&](int64_t x, int64_t y) { return c[size_t(x)] < c[size_t(y)]; });
    for (auto it = b; it != e; ++it) {
      if (it != b && c[size_t(*it)] == ci.back()) {
        vals.back() += v[size_t(*it)];
      } else {
        ci.push_back(c[size_t(*it)]);
        vals.push_back(v[size_t(*it)]);
      }
    }
    rp[size_t(i + 1)] = int64_t(ci.size());
  }
  SparseMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.values = Tensor::from_doubles(dtype, {int64_t(vals.size())}, vals);
  m.col_idx = index_tensor(ci, index);
  m.row_ptr = index_tensor(rp, index);
  return m;
}

// (row, col, value) of every stored entry.
void triplets(const SparseMatrix& m, std::vector<int64_t>& r, std::vector<int64_t>& c,
              std::vector<double>& v) {
  m.validate();
  std::vector<int64_t> rp = ints(m.row_ptr);
  c = ints(m.col_idx);
  v = m.values.to_doubles();
  r.resize(c.size());
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t e = rp[size_t(i)]; e < rp[size_t(i + 1)]; ++e) r[size_t(e)] = i;
}

}  // namespace

void SparseMatrix::validate() const {
  if (!values.defined() || !col_idx.defined() || !row_ptr.defined())
    fail<ValueError>(kWhere, "expected values, col_idx and row_ptr tensors, got an undefined one");
  if (values.dtype() != DType::f32 && values.dtype() != DType::f64)
    fail<TypeError>(kWhere, "expected values of dtype f32 or f64, got ", values.type().str());
  check_index_dtype(col_idx.dtype());
  if (row_ptr.dtype() != col_idx.dtype())
    fail<TypeError>(kWhere, "expected row_ptr of col_idx's dtype, got ", row_ptr.type().str(),
                    " and ", col_idx.type().str());
  if (values.rank() != 1 || col_idx.rank() != 1 || row_ptr.rank() != 1)
    fail<ValueError>(kWhere, "expected rank-1 values, col_idx and row_ptr, got ",
                     values.type().str(), ", ", col_idx.type().str(), ", ", row_ptr.type().str());
  if (rows < 0 || cols < 0)
    fail<ValueError>(kWhere, "expected rows, cols >= 0, got ", rows, ", ", cols);
  if (values.numel() != col_idx.numel())
    fail<ValueError>(kWhere, "expected values and col_idx of one length, got ", values.numel(),
                     " and ", col_idx.numel());
  if (row_ptr.numel() != rows + 1)
    fail<ValueError>(kWhere, "expected row_ptr of length rows + 1 = ", rows + 1, ", got ",
                     row_ptr.numel());
  Tensor c = col_idx.contiguous(), r = row_ptr.contiguous();
  dispatch(DType::f64, col_idx.dtype(), [&](auto, auto i) {
    using I = decltype(i);
    check_pattern<I>(kWhere, {r.data_as<I>(), c.data_as<I>(), rows, cols, c.numel()});
  });
}

bool SparseMatrix::is_canonical() const {
  validate();
  Tensor c = col_idx.contiguous(), r = row_ptr.contiguous();
  bool ok = false;
  dispatch(DType::f64, col_idx.dtype(), [&](auto, auto i) {
    using I = decltype(i);
    ok = sparse::is_canonical<I>({r.data_as<I>(), c.data_as<I>(), rows, cols, c.numel()});
  });
  return ok;
}

Tensor SparseMatrix::to_dense() const {
  std::vector<int64_t> r, c;
  std::vector<double> v;
  triplets(*this, r, c, v);
  std::vector<double> d(static_cast<size_t>(rows * cols), 0.0);
  for (size_t e = 0; e < v.size(); ++e) d[size_t(r[e] * cols + c[e])] += v[e];
  return Tensor::from_doubles(dtype(), {rows, cols}, d);
}

SparseMatrix SparseMatrix::transpose() const {
  std::vector<int64_t> r, c;
  std::vector<double> v;
  triplets(*this, r, c, v);
  return build(cols, rows, c, r, v, dtype(), index_dtype());
}

SparseMatrix SparseMatrix::with_values(Tensor new_values) const {
  SparseMatrix m = *this;
  m.values = std::move(new_values);
  m.validate();
  return m;
}

SparseMatrix SparseMatrix::from_coo(int64_t rows, int64_t cols, const Tensor& row,
                                    const Tensor& col, const Tensor& values, DType index_dtype) {
  for (const Tensor* t : {&row, &col})
    if (!is_integer(t->dtype()) || t->rank() != 1)
      fail<TypeError>(kWhere, "expected rank-1 integer row and col, got ", t->type().str());
  if (values.rank() != 1)
    fail<ValueError>(kWhere, "expected rank-1 values, got ", values.type().str());
  return build(rows, cols, ints(row), ints(col), values.to_doubles(), values.dtype(), index_dtype);
}

SparseMatrix SparseMatrix::from_triplets(int64_t rows, int64_t cols,
                                         const std::vector<int64_t>& row,
                                         const std::vector<int64_t>& col,
                                         const std::vector<double>& values, DType dtype,
                                         DType index_dtype) {
  return build(rows, cols, row, col, values, dtype, index_dtype);
}

SparseMatrix SparseMatrix::from_dense(const Tensor& dense, DType index_dtype) {
  if (dense.rank() != 2)
    fail<ValueError>(kWhere, "expected a rank-2 dense matrix, got ", dense.type().str());
  int64_t rows = dense.shape()[0], cols = dense.shape()[1];
  std::vector<double> d = dense.to_doubles(), v;
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (double x = d[size_t(i * cols + j)]; x != 0) {
        r.push_back(i);
        c.push_back(j);
        v.push_back(x);
      }
  return build(rows, cols, r, c, v, dense.dtype(), index_dtype);
}

SparseMatrix poisson2d(int64_t n, DType dtype, DType index_dtype, double scale) {
  if (n < 0) fail<ValueError>("sparse.poisson2d", "expected n >= 0, got ", n);
  int64_t N = n * n;
  std::vector<int64_t> rp(static_cast<size_t>(N + 1), 0), ci;
  std::vector<double> v;
  ci.reserve(static_cast<size_t>(5 * N));
  v.reserve(static_cast<size_t>(5 * N));
  auto put = [&](int64_t c, double x) {
    ci.push_back(c);
    v.push_back(x * scale);
  };
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t r = i * n + j;  // columns in increasing order
      if (i > 0) put(r - n, -1);
      if (j > 0) put(r - 1, -1);
      put(r, 4);
      if (j + 1 < n) put(r + 1, -1);
      if (i + 1 < n) put(r + n, -1);
      rp[size_t(r + 1)] = int64_t(ci.size());
    }
  check_index_dtype(index_dtype);
  SparseMatrix m;
  m.rows = m.cols = N;
  m.values = Tensor::from_doubles(dtype, {int64_t(v.size())}, v);
  m.col_idx = index_tensor(ci, index_dtype);
  m.row_ptr = index_tensor(rp, index_dtype);
  return m;
}

}  // namespace rlx::sparse
