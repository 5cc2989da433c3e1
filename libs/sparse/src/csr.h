// Internal pieces shared by the sparse kernels: dtype dispatch, pattern checks with rlx's
// error messages, canonical (sorted, duplicate-free) CSR, and the multithreaded products
// the iterative solvers are written with.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::sparse {

// Calls f(T{}, I{}) with T = float / double (values) and I = int32_t / int64_t (indices).
template <class F>
void dispatch(DType value, DType index, F&& f) {
  bool wide = index == DType::i64;
  if (value == DType::f64)
    wide ? f(double{}, int64_t{}) : f(double{}, int32_t{});
  else
    wide ? f(float{}, int64_t{}) : f(float{}, int32_t{});
}

// A CSR pattern (and optionally values) in host memory.
template <class I>
struct Pattern {
  const I* row_ptr;
  const I* col;
  int64_t rows, cols, nnz;
};

template <class T, class I>
struct CsrRef {
  Pattern<I> p;
  const T* v;
};

// Throws the ValueError that says what is wrong with the pattern (row_ptr not starting at
// 0, decreasing, not ending at nnz; a column out of range), or returns when it is sound.
template <class I>
void check_pattern(const std::string& op, const Pattern<I>& p) {
  if (p.row_ptr[0] != 0)
    fail<ValueError>(op, "expected row_ptr[0] = 0, got ", int64_t(p.row_ptr[0]));
  for (int64_t i = 0; i < p.rows; ++i)
    if (p.row_ptr[i + 1] < p.row_ptr[i])
      fail<ValueError>(op, "expected a non-decreasing row_ptr, got row_ptr[", i,
                       "] = ", int64_t(p.row_ptr[i]), " > row_ptr[", i + 1,
                       "] = ", int64_t(p.row_ptr[i + 1]));
  if (p.row_ptr[p.rows] != p.nnz)
    fail<ValueError>(op, "expected row_ptr[", p.rows, "] = nnz = ", p.nnz, ", got ",
                     int64_t(p.row_ptr[p.rows]));
  for (int64_t i = 0; i < p.rows; ++i)
    for (int64_t e = p.row_ptr[i]; e < p.row_ptr[i + 1]; ++e)
      if (p.col[e] < 0 || p.col[e] >= p.cols)
        fail<ValueError>(op, "expected column indices in [0, ", p.cols, "), got col_idx[", e,
                         "] = ", int64_t(p.col[e]), " in row ", i);
}

// Whether columns are strictly increasing within each row (the pattern is sound).
template <class I>
bool is_canonical(const Pattern<I>& p) {
  for (int64_t i = 0; i < p.rows; ++i)
    for (int64_t e = p.row_ptr[i] + 1; e < p.row_ptr[i + 1]; ++e)
      if (p.col[e] <= p.col[e - 1]) return false;
  return true;
}

// A canonical copy of a sound pattern: rows sorted by column, duplicates merged. `slot[e]`
// is where entry e of the input lands (its value is added there).
template <class I>
struct Canonical {
  std::vector<I> row_ptr, col;
  std::vector<int64_t> slot;
};

template <class I>
Canonical<I> canonicalize(const Pattern<I>& p) {
  Canonical<I> c;
  c.row_ptr.assign(static_cast<size_t>(p.rows + 1), 0);
  c.slot.assign(static_cast<size_t>(p.nnz), 0);
  c.col.reserve(static_cast<size_t>(p.nnz));
  std::vector<int64_t> order;
  for (int64_t i = 0; i < p.rows; ++i) {
    order.resize(static_cast<size_t>(p.row_ptr[i + 1] - p.row_ptr[i]));
    std::iota(order.begin(), order.end(), int64_t(p.row_ptr[i]));
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return p.col[a] < p.col[b]; });
    for (size_t k = 0; k < order.size(); ++k) {
      int64_t e = order[k];
      if (k == 0 || p.col[e] != c.col.back()) c.col.push_back(p.col[e]);
      c.slot[size_t(e)] = int64_t(c.col.size()) - 1;
    }
    c.row_ptr[size_t(i + 1)] = I(c.col.size());
  }
  return c;
}

// ---- multithreaded kernels ------------------------------------------------------------

// Loops over fewer elements than this run on the calling thread, outside OpenMP: a
// parallel region costs microseconds even with if(false), which small solves (thousands of
// short loops) feel, and a fork / join costs far more on a machine whose cores are busy.
inline constexpr int64_t kGrain = 1 << 15;

// f(i) for i in [0, n).
template <class F>
void parallel_for(int64_t n, F f) {
  if (n < kGrain) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// The sum of f(i) (a double) over [0, n). `simd` lets the compiler reorder the sum into
// vector lanes, which it may not do for floating point on its own.
template <class F>
double parallel_sum(int64_t n, F f) {
  double s = 0;
  if (n < kGrain) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += f(i);
    return s;
  }
#pragma omp parallel for simd schedule(static) reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += f(i);
  return s;
}

// The sums of both halves of f(i) (a pair of doubles) over [0, n).
template <class F>
std::pair<double, double> parallel_sum2(int64_t n, F f) {
  double a = 0, b = 0;
  if (n < kGrain) {
#pragma omp simd reduction(+ : a, b)
    for (int64_t i = 0; i < n; ++i) {
      auto [x, y] = f(i);
      a += x, b += y;
    }
    return {a, b};
  }
#pragma omp parallel for simd schedule(static) reduction(+ : a, b)
  for (int64_t i = 0; i < n; ++i) {
    auto [x, y] = f(i);
    a += x, b += y;
  }
  return {a, b};
}

// Prefetches bytes [from, to) of a stream (clipped to its `size` bytes) into L1: the
// spmv asks for its values and indices a fixed distance ahead of the block it works on.
// With the hardware prefetcher alone it ran at 67% of a parallel copy's bandwidth
// (rlx-bench-sparse: 2 threads, Poisson 1024^2 from memory); 1 KB ahead, at 77-89%, as
// fast as a vectorised read stream (512 B to 4 KB ahead measured alike). Also asking
// for x[col] or for y ahead was slower or no faster.
inline void prefetch_bytes(const void* base, int64_t from, int64_t to, int64_t size) {
  const char* p = static_cast<const char*>(base);
  for (int64_t o = from; o < std::min(to, size); o += 64) __builtin_prefetch(p + o, 0, 3);
}

// y = A x, returning w . y in *dot when w is given. Checked, it also tests the pattern,
// block by block of 64 rows: the row pointers in order and inside [0, nnz], then the
// largest column index (a vectorised max over indices that the products then read from
// L1). That cost ~9% where a test per entry cost ~30% (2 threads, Poisson 1024^2); it
// returns false, leaving y partly written, when the pattern is unsound. Unchecked is for
// a pattern already checked.
template <bool Checked = true, class T, class I>
bool spmv_rows(const CsrRef<T, I>& a, const T* x, T* y, const T* w = nullptr,
               double* dot = nullptr) {
  using U = std::make_unsigned_t<I>;
  constexpr int64_t kBlock = 64;
  const I* rp = a.p.row_ptr;
  const I* col = a.p.col;
  const T* v = a.v;
  const int64_t rows = a.p.rows, nnz = a.p.nnz, blocks = (rows + kBlock - 1) / kBlock;
  const uint64_t cols = uint64_t(a.p.cols);
  // One block of rows: false when its part of the pattern is unsound; adds w . y to s.
  auto block = [&](int64_t blk, double& s) {
    const int64_t r0 = blk * kBlock, r1 = std::min(rows, r0 + kBlock);
    if constexpr (Checked) {
      const int64_t b = rp[r0], e = rp[r1];
      int unsound = !(0 <= b && b <= e && e <= nnz);  // counts: a bool && does not vectorise
      for (int64_t i = r0; i < r1; ++i) unsound += rp[i] > rp[i + 1];
      if (unsound) return false;
      U m = 0;
      for (int64_t k = b; k < e; ++k) m = std::max(m, U(col[k]));
      if (b < e && uint64_t(m) >= cols) return false;
    }
    {  // the pattern is sound here (checked above, or before a solve)
      constexpr int64_t kAhead = 1024;  // bytes, in each stream
      const int64_t b = rp[r0], e = rp[r1];
      prefetch_bytes(v, b * int64_t(sizeof(T)) + kAhead, e * int64_t(sizeof(T)) + kAhead,
                     nnz * int64_t(sizeof(T)));
      prefetch_bytes(col, b * int64_t(sizeof(I)) + kAhead, e * int64_t(sizeof(I)) + kAhead,
                     nnz * int64_t(sizeof(I)));
    }
    // Rows in pairs, their loops interleaved (more independent work in flight: ~8%
    // faster); each row still sums its entries in order.
    auto row_sum = [&](int64_t from, int64_t to, T acc) {
      for (int64_t k = from; k < to; ++k) acc += v[k] * x[col[k]];
      return acc;
    };
    int64_t i = r0;
    for (; i + 1 < r1; i += 2) {
      const int64_t b0 = rp[i], b1 = rp[i + 1], e1 = rp[i + 2], l = std::min(b1 - b0, e1 - b1);
      T a0 = 0, a1 = 0;
      for (int64_t k = 0; k < l; ++k) {
        a0 += v[b0 + k] * x[col[b0 + k]];
        a1 += v[b1 + k] * x[col[b1 + k]];
      }
      y[i] = row_sum(b0 + l, b1, a0);
      y[i + 1] = row_sum(b1 + l, e1, a1);
    }
    if (i < r1) y[i] = row_sum(rp[i], rp[i + 1], T(0));
    if (w)
      for (int64_t r = r0; r < r1; ++r) s += double(w[r]) * double(y[r]);
    return true;
  };
  bool bad = Checked && (rp[0] != 0 || rp[rows] != nnz);
  double s = 0;
  if (rows + nnz < kGrain) {
    for (int64_t blk = 0; blk < blocks && !bad; ++blk) bad = !block(blk, s);
  } else {
#pragma omp parallel for schedule(static) reduction(|| : bad) reduction(+ : s)
    for (int64_t blk = 0; blk < blocks; ++blk) bad = !block(blk, s) || bad;
  }
  if (dot) *dot = s;
  return !bad;
}

// The checked spmv, throwing the pattern's ValueError.
template <class T, class I>
void spmv(const std::string& op, const CsrRef<T, I>& a, const T* x, T* y) {
  if (!spmv_rows(a, x, y)) check_pattern(op, a.p);
}

template <class T>
double dot(const T* a, const T* b, int64_t n) {
  return parallel_sum(n, [&](int64_t i) { return double(a[i]) * double(b[i]); });
}

template <class T>
double norm2(const T* a, int64_t n) {
  return std::sqrt(dot(a, a, n));
}

// The transpose of a sound pattern with values: (A^T) as CSR, by a counting sort.
template <class T, class I>
struct Transposed {
  std::vector<I> row_ptr, col;
  std::vector<T> v;
  CsrRef<T, I> ref(int64_t rows, int64_t cols) const {
    return {{row_ptr.data(), col.data(), rows, cols, int64_t(col.size())}, v.data()};
  }
};

template <class T, class I>
Transposed<T, I> transpose(const CsrRef<T, I>& a) {
  Transposed<T, I> t;
  t.row_ptr.assign(static_cast<size_t>(a.p.cols + 1), 0);
  t.col.resize(static_cast<size_t>(a.p.nnz));
  t.v.resize(static_cast<size_t>(a.p.nnz));
  for (int64_t e = 0; e < a.p.nnz; ++e) ++t.row_ptr[size_t(a.p.col[e]) + 1];
  for (int64_t j = 0; j < a.p.cols; ++j) t.row_ptr[size_t(j + 1)] += t.row_ptr[size_t(j)];
  std::vector<int64_t> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  for (int64_t i = 0; i < a.p.rows; ++i)
    for (int64_t e = a.p.row_ptr[i]; e < a.p.row_ptr[i + 1]; ++e) {
      int64_t d = next[size_t(a.p.col[e])]++;
      t.col[size_t(d)] = I(i);
      t.v[size_t(d)] = a.v[e];
    }
  return t;
}

}  // namespace rlx::sparse
