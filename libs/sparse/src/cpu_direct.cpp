// Direct solves on the CPU: lu_solve through UMFPACK, cholesky_solve through CHOLMOD, with
// a small cache of factorisations.
//
// Why a cache, and keyed how: on 2-D Poisson grids (64^2 to 512^2 unknowns, one thread)
// the symbolic analysis (fill-reducing ordering) was 12-45% of a cold solve, and a solve
// with a factorisation at hand 15-40x cheaper than a cold one. Training loops solve with
// one pattern over and over, and a vjp solves with the very matrix of its forward pass
// (A^T through the same factors). So an entry holds a copy of the pattern it analysed and
// of the values it factored; a solve compares its pattern and values with the entries'
// (O(nnz), far less than a factorisation), reuses the analysis on a pattern match and the
// numeric factorisation on a values match too. A pointer would be a cheaper key but a
// wrong one: the runtime's arena hands the same address to other tensors on other runs.
#include <cholmod.h>
#include <umfpack.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <mutex>

#include "csr.h"
#include "rlx_sparse/sparse.h"

namespace rlx::sparse {

namespace {

// ---- UMFPACK and CHOLMOD, per index type --------------------------------------------

template <class I>
struct Suite;

template <>
struct Suite<int32_t> {
  using Idx = int;
  static constexpr int itype = CHOLMOD_INT;
  static int umf_symbolic(int n, const Idx* p, const Idx* i, const double* x, void** s,
                          const double* c, double* info) {
    return umfpack_di_symbolic(n, n, p, i, x, s, c, info);
  }
  static int umf_numeric(const Idx* p, const Idx* i, const double* x, void* s, void** num,
                         const double* c, double* info) {
    return umfpack_di_numeric(p, i, x, s, num, c, info);
  }
  static int umf_solve(int sys, const Idx* p, const Idx* i, const double* a, double* x,
                       const double* b, void* num, const double* c, double* info) {
    return umfpack_di_solve(sys, p, i, a, x, b, num, c, info);
  }
  static void umf_free(void** s, void** num) {
    if (*num) umfpack_di_free_numeric(num);
    if (*s) umfpack_di_free_symbolic(s);
  }
  static void umf_defaults(double* c) { umfpack_di_defaults(c); }
  static void start(cholmod_common* c) { cholmod_start(c); }
  static void finish(cholmod_common* c) { cholmod_finish(c); }
  static cholmod_factor* analyze(cholmod_sparse* a, cholmod_common* c) {
    return cholmod_analyze(a, c);
  }
  static int factorize(cholmod_sparse* a, cholmod_factor* l, cholmod_common* c) {
    return cholmod_factorize(a, l, c);
  }
  static cholmod_dense* solve(cholmod_factor* l, cholmod_dense* b, cholmod_common* c) {
    return cholmod_solve(CHOLMOD_A, l, b, c);
  }
  static void free_dense(cholmod_dense** d, cholmod_common* c) { cholmod_free_dense(d, c); }
  static void free_factor(cholmod_factor** l, cholmod_common* c) { cholmod_free_factor(l, c); }
};

template <>
struct Suite<int64_t> {
  using Idx = SuiteSparse_long;
  static constexpr int itype = CHOLMOD_LONG;
  static int umf_symbolic(int64_t n, const Idx* p, const Idx* i, const double* x, void** s,
                          const double* c, double* info) {
    return int(umfpack_dl_symbolic(n, n, p, i, x, s, c, info));
  }
  static int umf_numeric(const Idx* p, const Idx* i, const double* x, void* s, void** num,
                         const double* c, double* info) {
    return int(umfpack_dl_numeric(p, i, x, s, num, c, info));
  }
  static int umf_solve(int sys, const Idx* p, const Idx* i, const double* a, double* x,
                       const double* b, void* num, const double* c, double* info) {
    return int(umfpack_dl_solve(sys, p, i, a, x, b, num, c, info));
  }
  static void umf_free(void** s, void** num) {
    if (*num) umfpack_dl_free_numeric(num);
    if (*s) umfpack_dl_free_symbolic(s);
  }
  static void umf_defaults(double* c) { umfpack_dl_defaults(c); }
  static void start(cholmod_common* c) { cholmod_l_start(c); }
  static void finish(cholmod_common* c) { cholmod_l_finish(c); }
  static cholmod_factor* analyze(cholmod_sparse* a, cholmod_common* c) {
    return cholmod_l_analyze(a, c);
  }
  static int factorize(cholmod_sparse* a, cholmod_factor* l, cholmod_common* c) {
    return cholmod_l_factorize(a, l, c);
  }
  static cholmod_dense* solve(cholmod_factor* l, cholmod_dense* b, cholmod_common* c) {
    return cholmod_l_solve(CHOLMOD_A, l, b, c);
  }
  static void free_dense(cholmod_dense** d, cholmod_common* c) { cholmod_l_free_dense(d, c); }
  static void free_factor(cholmod_factor** l, cholmod_common* c) { cholmod_l_free_factor(l, c); }
};

// A factorisation of one canonical pattern. The CSR arrays are handed to SuiteSparse as
// CSC, which is the transpose: LU solves A x = b as (A^T)^T x = b.
struct Factor {
  virtual ~Factor() = default;
  // Numeric factorisation of the canonical values (kept until the next call); eps: the
  // input dtype's, for the symmetry check of a Cholesky factorisation.
  virtual void factor(const std::string& op, std::vector<double> values, double eps) = 0;
  // Solves for the k columns of x (column-major, n x k) in place.
  virtual void solve(const std::string& op, double* x, int64_t k, bool transpose) = 0;
};

template <class I>
class Lu : public Factor {
  using S = Suite<I>;
  using Idx = typename S::Idx;

 public:
  Lu(const Canonical<I>& c, int64_t n) : n_(n), p_(c.row_ptr), i_(c.col) {
    S::umf_defaults(control_);
    control_[UMFPACK_PRL] = 0;
  }
  ~Lu() override { S::umf_free(&symbolic_, &numeric_); }

  void factor(const std::string& op, std::vector<double> values, double) override {
    void* none = nullptr;
    S::umf_free(&none, &numeric_);
    numeric_ = nullptr;
    x_ = std::move(values);
    // The analysis is done with the first values: seeing them, UMFPACK picks its symmetric
    // strategy for a matrix like a 2-D Laplacian (half the fill, half the time). It stays
    // valid for any values on the pattern.
    if (!symbolic_) {
      int st = S::umf_symbolic(n_, idx(p_), idx(i_), x_.data(), &symbolic_, control_, info_);
      if (st != UMFPACK_OK) fail<Error>(op, "UMFPACK symbolic analysis failed: status ", st);
    }
    int st = S::umf_numeric(idx(p_), idx(i_), x_.data(), symbolic_, &numeric_, control_, info_);
    if (st == UMFPACK_WARNING_singular_matrix) {
      S::umf_free(&none, &numeric_);
      numeric_ = nullptr;
      fail<ValueError>(op,
                       "expected a nonsingular matrix, got a singular one (UMFPACK found a zero "
                       "pivot)");
    }
    if (st != UMFPACK_OK) fail<Error>(op, "UMFPACK numeric factorisation failed: status ", st);
  }

  void solve(const std::string& op, double* x, int64_t k, bool transpose) override {
    std::vector<double> b(static_cast<size_t>(n_));
    int sys = transpose ? UMFPACK_A : UMFPACK_At;
    for (int64_t j = 0; j < k; ++j) {
      double* col = x + j * n_;
      std::copy(col, col + n_, b.begin());
      int st =
          S::umf_solve(sys, idx(p_), idx(i_), x_.data(), col, b.data(), numeric_, control_, info_);
      if (st != UMFPACK_OK) fail<Error>(op, "UMFPACK solve failed: status ", st);
    }
  }

 private:
  static const Idx* idx(const std::vector<I>& v) { return reinterpret_cast<const Idx*>(v.data()); }
  int64_t n_;
  std::vector<I> p_, i_;
  std::vector<double> x_;
  void *symbolic_ = nullptr, *numeric_ = nullptr;
  double control_[UMFPACK_CONTROL], info_[UMFPACK_INFO];
};

template <class I>
class Cholesky : public Factor {
  using S = Suite<I>;

 public:
  Cholesky(const std::string& op, const Canonical<I>& c, int64_t n)
      : n_(n), p_(c.row_ptr), i_(c.col) {
    S::start(&common_);
    common_.print = 0;  // errors are ours to report
    a_ = {};
    a_.nrow = a_.ncol = size_t(n);
    a_.nzmax = i_.size();
    a_.p = p_.data();
    a_.i = i_.data();
    a_.stype = 1;  // the upper triangle of the CSC matrix: A's lower triangle
    a_.itype = S::itype;
    a_.xtype = CHOLMOD_PATTERN;  // the analysis sees no values
    a_.dtype = CHOLMOD_DOUBLE;
    a_.sorted = 1;
    a_.packed = 1;
    l_ = S::analyze(&a_, &common_);
    if (!l_) {
      S::finish(&common_);
      fail<Error>(op, "CHOLMOD analysis failed: status ", common_.status);
    }
  }
  ~Cholesky() override {
    S::free_factor(&l_, &common_);
    S::finish(&common_);
  }

  void factor(const std::string& op, std::vector<double> values, double eps) override {
    check_symmetric(op, values, 64 * eps);
    x_ = std::move(values);
    a_.x = x_.data();
    a_.xtype = CHOLMOD_REAL;
    S::factorize(&a_, l_, &common_);
    int64_t minor = common_.status == CHOLMOD_NOT_POSDEF ? int64_t(l_->minor) : nonpositive_d();
    if (minor >= 0)
      fail<ValueError>(op,
                       "expected a symmetric positive definite matrix, got one that is not "
                       "positive definite (pivot ",
                       minor, " <= 0)");
    if (common_.status != CHOLMOD_OK)
      fail<Error>(op, "CHOLMOD factorisation failed: status ", common_.status);
  }

  void solve(const std::string& op, double* x, int64_t k, bool) override {
    cholmod_dense b{};
    b.nrow = size_t(n_);
    b.ncol = size_t(k);
    b.d = size_t(n_);
    b.nzmax = size_t(n_ * k);
    b.x = x;
    b.xtype = CHOLMOD_REAL;
    b.dtype = CHOLMOD_DOUBLE;
    cholmod_dense* r = S::solve(l_, &b, &common_);
    if (!r) fail<Error>(op, "CHOLMOD solve failed: status ", common_.status);
    std::memcpy(x, r->x, size_t(n_ * k) * sizeof(double));
    S::free_dense(&r, &common_);
  }

 private:
  // A simplicial factorisation is LDL^T, which goes through an indefinite matrix: the
  // first column with D <= 0, or -1.
  int64_t nonpositive_d() const {
    if (l_->is_super || l_->is_ll) return -1;
    const I* p = static_cast<const I*>(l_->p);
    const double* x = static_cast<const double*>(l_->x);
    for (int64_t j = 0; j < n_; ++j)
      if (!(x[p[j]] > 0)) return j;
    return -1;
  }

  // Symmetric up to rounding, or the ValueError naming an entry.
  void check_symmetric(const std::string& op, const std::vector<double>& v, double tol) const {
    for (int64_t i = 0; i < n_; ++i)
      for (int64_t e = p_[size_t(i)]; e < p_[size_t(i + 1)]; ++e) {
        int64_t j = i_[size_t(e)];
        if (j <= i) continue;
        auto b = i_.begin() + p_[size_t(j)], end = i_.begin() + p_[size_t(j + 1)];
        auto it = std::lower_bound(b, end, I(i));
        double a = v[size_t(e)], mirror = it != end && *it == I(i) ? v[size_t(it - i_.begin())] : 0;
        if (std::abs(a - mirror) > tol * std::max(std::abs(a), std::abs(mirror)))
          fail<ValueError>(op, "expected a symmetric matrix, got A[", i, ", ", j, "] = ", a,
                           " but A[", j, ", ", i, "] = ", mirror);
      }
  }

  int64_t n_;
  std::vector<I> p_, i_;
  std::vector<double> x_;
  cholmod_common common_;
  cholmod_sparse a_;
  cholmod_factor* l_ = nullptr;
};

// ---- the cache --------------------------------------------------------------------------

enum class Kind { lu, cholesky };

struct Entry {
  Kind kind;
  DType index;
  int64_t n = 0, nnz = 0;
  std::vector<uint8_t> pattern;  // row_ptr then col_idx, as given
  std::mutex mu;                 // guards what follows
  std::vector<int64_t> slot;     // input entry -> canonical entry (empty: the identity)
  int64_t canonical_nnz = 0;
  std::unique_ptr<Factor> factor;
  DType value_dtype = DType::f64;
  std::vector<uint8_t> values;  // the values factored, as given (empty: none)
};

struct Cache {
  std::mutex mu;
  std::list<std::shared_ptr<Entry>> entries;  // most recently used first
  size_t capacity = 4;
  std::atomic<int64_t> analyses{0}, factorisations{0}, reuses{0};
};
Cache& cache() {
  static Cache c;
  return c;
}

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

template <class I>
std::shared_ptr<Entry> acquire(Kind kind, const Pattern<I>& p) {
  std::vector<uint8_t> key = bytes_of(p.row_ptr, size_t(p.rows + 1) * sizeof(I));
  key.insert(key.end(), reinterpret_cast<const uint8_t*>(p.col),
             reinterpret_cast<const uint8_t*>(p.col + p.nnz));
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto it = c.entries.begin(); it != c.entries.end(); ++it) {
    const Entry& e = **it;
    if (e.kind == kind && e.index == dtype_of<I>() && e.n == p.rows && e.nnz == p.nnz &&
        e.pattern == key) {
      c.entries.splice(c.entries.begin(), c.entries, it);
      return c.entries.front();
    }
  }
  auto e = std::make_shared<Entry>();
  e->kind = kind;
  e->index = dtype_of<I>();
  e->n = p.rows;
  e->nnz = p.nnz;
  e->pattern = std::move(key);
  if (c.capacity == 0) return e;  // caching off: used once
  c.entries.push_front(e);
  while (c.entries.size() > c.capacity) c.entries.pop_back();
  return e;
}

// Factors (or finds the factorisation of) A, then solves for every column of b.
template <class T, class I>
void direct_k(Kind kind, const KernelContext& ctx, std::span<const Tensor> in,
              std::span<Tensor> out) {
  const std::string& op = ctx.op.name;
  const Tensor &V = in[0], &B = in[3];
  int64_t n = in[2].numel() - 1;
  Pattern<I> p{in[2].data_as<I>(), in[1].data_as<I>(), n, n, in[1].numel()};
  check_pattern(op, p);
  int64_t k = B.rank() >= 2 ? B.shape().back() : 1, cols = B.numel() / std::max<int64_t>(n, 1);
  T* X = out[0].data_as<T>();
  if (n == 0 || cols == 0) return;
  std::shared_ptr<Entry> e = acquire(kind, p);
  Cache& c = cache();
  std::vector<double> x(static_cast<size_t>(n * cols));
  std::lock_guard lock(e->mu);
  try {
    if (!e->factor) {
      Canonical<I> can = canonicalize(p);
      e->slot = is_canonical(p) ? std::vector<int64_t>{} : can.slot;
      e->canonical_nnz = int64_t(can.col.size());
      if (kind == Kind::lu)
        e->factor = std::make_unique<Lu<I>>(can, n);
      else
        e->factor = std::make_unique<Cholesky<I>>(op, can, n);
      e->values.clear();
      ++c.analyses;
    }
    size_t vbytes = size_t(V.numel()) * sizeof(T);
    if (e->values.empty() || e->value_dtype != V.dtype() ||
        std::memcmp(e->values.data(), V.data(), vbytes) != 0) {
      e->values.clear();
      const T* v = V.data_as<T>();
      std::vector<double> cv(static_cast<size_t>(e->canonical_nnz), 0.0);
      for (int64_t i = 0; i < p.nnz; ++i)
        cv[e->slot.empty() ? size_t(i) : size_t(e->slot[size_t(i)])] += v[i];
      e->factor->factor(op, std::move(cv), std::numeric_limits<T>::epsilon());
      e->values = bytes_of(V.data(), vbytes);
      e->value_dtype = V.dtype();
      ++c.factorisations;
    } else {
      ++c.reuses;
    }
    // b [..., n, k] -> columns of x; solve; back.
    const T* b = B.data_as<T>();
    int64_t nb = cols / k;
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j) x[size_t((bi * k + j) * n + i)] = b[(bi * n + i) * k + j];
    bool transpose = ctx.attrs.has("transpose") && ctx.attrs.get_bool("transpose");
    e->factor->solve(op, x.data(), cols, transpose);
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          X[(bi * n + i) * k + j] = T(x[size_t((bi * k + j) * n + i)]);
  } catch (...) {
    e->values.clear();  // a failed factorisation is not one: start afresh next time
    e->factor.reset();
    throw;
  }
}

template <Kind kind>
void add(const char* op) {
  KernelRegistry::global().add(
      op, DeviceKind::cpu,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        dispatch(in[0].dtype(), in[1].dtype(),
                 [&](auto t, auto i) { direct_k<decltype(t), decltype(i)>(kind, ctx, in, out); });
      });
}

}  // namespace

void register_direct_kernels() {
  add<Kind::lu>("sparse.lu_solve");
  add<Kind::cholesky>("sparse.cholesky_solve");
}

FactorCacheStats factor_cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  return {c.analyses.load(), c.factorisations.load(), c.reuses.load(), int64_t(c.entries.size())};
}

void clear_factor_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  c.entries.clear();
}

void set_factor_cache_capacity(int64_t capacity) {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  c.capacity = size_t(std::max<int64_t>(capacity, 0));
  while (c.entries.size() > c.capacity) c.entries.pop_back();
}

}  // namespace rlx::sparse
