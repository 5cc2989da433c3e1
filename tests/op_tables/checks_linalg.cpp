// matmul and dot_general against naive loops (long double sums; integers wrap in uint64
// as the dtype's arithmetic does). Some inputs are transposed views, so the "contiguous" run
// exercises the transposed-operand paths; f32 tolerances grow with the contraction length.
#include <algorithm>
#include <cmath>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

constexpr DType kNumeric[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                              DType::i16, DType::i32, DType::i64, DType::u8};
constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// Sum of products over `pairs` (flat indices into a and b), in the dtype's arithmetic.
struct Dot {
  DType dt;
  long double f = 0;
  uint64_t u = 0;
  void add(double x, double y) {
    f += (long double)x * y;
    u += uint64_t(int64_t(x)) * uint64_t(int64_t(y));
  }
  double value() const { return is_float(dt) ? double(f) : double(wrap_int(dt, u)); }
};

// NumPy matmul: 1-D operands become a row / column whose unit dim is dropped; batch dims
// broadcast.
Tensor matmul_ref(const Tensor& a, const Tensor& b) {
  auto as = a.shape(), bs = b.shape();
  bool av = as.size() == 1, bv = bs.size() == 1;
  if (av) as.insert(as.begin(), 1);
  if (bv) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  auto batch = broadcast_shape(ab, bb);
  auto full = joined(batch, {m, n});
  auto x = values(a), y = values(b);
  int64_t total = 1;
  for (int64_t d : full) total *= d;
  std::vector<double> out;
  for (int64_t f = 0; f < total; ++f) {
    auto idx = unravel(f, full);
    std::vector<int64_t> bi(idx.begin(), idx.end() - 2);
    int64_t i = idx[idx.size() - 2], j = idx.back();
    int64_t abase = broadcast_index(bi, ab) * m * k, bbase = broadcast_index(bi, bb) * k * n;
    Dot d{a.dtype()};
    for (int64_t p = 0; p < k; ++p)
      d.add(x[size_t(abase + i * k + p)], y[size_t(bbase + p * n + j)]);
    out.push_back(d.value());
  }
  std::vector<int64_t> shape = batch;
  if (!av) shape.push_back(m);
  if (!bv) shape.push_back(n);
  return tensor_of(a.dtype(), shape, out);
}

std::vector<int64_t> norm(const IntList& axes, int64_t rank) {
  std::vector<int64_t> v;
  for (int64_t a : axes) v.push_back(a < 0 ? a + rank : a);
  return v;
}

// XLA DotGeneral: out = [batch, lhs free, rhs free], summed over the contracting dims.
Tensor dot_general_ref(const Tensor& l, const Tensor& r, const Attrs& attrs) {
  auto lb = norm(attrs.get_ints("lhs_batch"), l.rank());
  auto lc = norm(attrs.get_ints("lhs_contracting"), l.rank());
  auto rb = norm(attrs.get_ints("rhs_batch"), r.rank());
  auto rc = norm(attrs.get_ints("rhs_contracting"), r.rank());
  auto free_of = [](int64_t rank, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d)
      if (std::count(b.begin(), b.end(), d) + std::count(c.begin(), c.end(), d) == 0)
        f.push_back(d);
    return f;
  };
  auto lf = free_of(l.rank(), lb, lc), rf = free_of(r.rank(), rb, rc);
  auto sizes = [](const Tensor& t, const std::vector<int64_t>& dims) {
    std::vector<int64_t> s;
    for (int64_t d : dims) s.push_back(t.shape()[size_t(d)]);
    return s;
  };
  auto bshape = sizes(l, lb), lfs = sizes(l, lf), rfs = sizes(r, rf), cshape = sizes(l, lc);
  auto oshape = joined(joined(bshape, lfs), rfs);
  int64_t total = 1, ctotal = 1;
  for (int64_t d : oshape) total *= d;
  for (int64_t d : cshape) ctotal *= d;
  auto x = values(l), y = values(r);
  std::vector<double> out;
  std::vector<int64_t> li(size_t(l.rank())), ri(size_t(r.rank()));
  for (int64_t f = 0; f < total; ++f) {
    auto idx = unravel(f, oshape);
    size_t at = 0;
    for (size_t i = 0; i < lb.size(); ++i, ++at) {
      li[size_t(lb[i])] = idx[at];
      ri[size_t(rb[i])] = idx[at];
    }
    for (int64_t d : lf) li[size_t(d)] = idx[at++];
    for (int64_t d : rf) ri[size_t(d)] = idx[at++];
    Dot dot{l.dtype()};
    for (int64_t c = 0; c < ctotal; ++c) {
      auto ci = unravel(c, cshape);
      for (size_t i = 0; i < lc.size(); ++i) {
        li[size_t(lc[i])] = ci[i];
        ri[size_t(rc[i])] = ci[i];
      }
      dot.add(x[size_t(ravel(li, l.shape()))], y[size_t(ravel(ri, r.shape()))]);
    }
    out.push_back(dot.value());
  }
  return tensor_of(l.dtype(), oshape, out);
}

// f32 sums of k products of |x| <= 2 may lose up to ~k ulps of 4 (blocked FMA sums in the
// libraries); other dtypes use their defaults (their output rounding dominates).
void set_tolerance(OpCheck& c, int64_t k) {
  if (c.dtype != DType::f32) return;
  c.rtol = 1e-5;
  c.atol = 1e-6 + double(k) * 4 * 0x1p-23;
}

// The contraction length of a matmul check.
int64_t matmul_k(const Tensor& a) { return a.rank() == 0 ? 1 : a.shape().back(); }

OpCheck matmul_check(Tensor a, Tensor b, std::string note = "") {
  DType dt = a.dtype();
  int64_t k = matmul_k(a);
  OpCheck c{
      .op = "matmul",
      .dtype = dt,
      .inputs = {std::move(a), std::move(b)},
      .ref = [](const Tensors& in, const Attrs&) -> Tensors { return {matmul_ref(in[0], in[1])}; },
      .note = std::move(note)};
  set_tolerance(c, k);
  return c;
}

OpCheck dot_check(Tensor a, Tensor b, IntList lc, IntList rc, IntList lb, IntList rb,
                  std::string note = "") {
  DType dt = a.dtype();
  int64_t k = 1;
  for (int64_t d : lc) k *= a.shape()[size_t(d < 0 ? d + a.rank() : d)];
  OpCheck c{.op = "dot_general",
            .dtype = dt,
            .inputs = {std::move(a), std::move(b)},
            .attrs = {{"lhs_contracting", lc},
                      {"rhs_contracting", rc},
                      {"lhs_batch", lb},
                      {"rhs_batch", rb}},
            .ref = [](const Tensors& in, const Attrs& attrs) -> Tensors {
              return {dot_general_ref(in[0], in[1], attrs)};
            },
            .note = std::move(note)};
  set_tolerance(c, k);
  return c;
}

// A random [rows, cols] matrix handed over as the transposed view of a [cols, rows] one.
Tensor transposed(DType dt, int64_t rows, int64_t cols, uint64_t seed) {
  return random_tensor(dt, {cols, rows}, seed).permute({1, 0});
}

void add_matmul(CheckTable& t) {
  uint64_t seed = 1300;
  auto next = [&] { return ++seed; };
  auto r = [&](DType dt, std::vector<int64_t> shape) { return random_tensor(dt, shape, next()); };
  for (DType dt : kNumeric) {
    t.add(matmul_check(r(dt, {3, 4}), r(dt, {4, 5})));
    t.add(matmul_check(r(dt, {2, 3, 4}), r(dt, {4, 5}), "batch, shared rhs"));
    t.add(matmul_check(r(dt, {2, 1, 3, 4}), r(dt, {5, 4, 2}), "broadcast batch"));
    t.add(matmul_check(r(dt, {4}), r(dt, {2, 4, 3}), "1-D lhs"));
    t.add(matmul_check(r(dt, {2, 3, 4}), r(dt, {4}), "1-D rhs"));
    t.add(matmul_check(transposed(dt, 6, 5, next()), r(dt, {5, 7}), "transposed lhs"));
    t.add(matmul_check(r(dt, {20, 70}), r(dt, {70, 300}), "blocked loops"));
  }
  for (DType dt : kFloats) {  // sizes that reach the GEMM libraries
    t.add(matmul_check(r(dt, {64, 100}), r(dt, {100, 48}), "library"));
    t.add(matmul_check(r(dt, {2, 3, 40, 50}), r(dt, {3, 50, 60}), "library, broadcast batch"));
    t.add(matmul_check(r(dt, {3, 70, 80}), r(dt, {80, 90}), "library, folded batch"));
    t.add(matmul_check(transposed(dt, 64, 96, next()), transposed(dt, 96, 40, next()),
                       "library, both transposed"));
    t.add(matmul_check(r(dt, {1, 300}), r(dt, {300, 200}), "library, one row"));
    t.add(matmul_check(r(dt, {300}), r(dt, {4, 300, 50}), "library, 1-D lhs, batch"));
    t.add(matmul_check(r(dt, {9, 64, 32}), transposed(dt, 32, 64, next()),
                       "library, transposed shared rhs"));
  }
  // Products of at least 256^3 take oneDNN's matmul primitive for f32.
  t.add(matmul_check(r(DType::f32, {256, 260}), transposed(DType::f32, 260, 272, next()),
                     "matmul primitive, transposed rhs"));
  t.add(matmul_check(r(DType::f32, {2, 256, 256}), r(DType::f32, {256, 264}),
                     "matmul primitive, folded batch"));
  DType dt = DType::f32;
  t.add(matmul_check(r(dt, {4}), r(dt, {4}), "1-D both"));
  t.add(matmul_check(r(dt, {1, 1}), r(dt, {1, 1}), "size 1"));
  t.add(matmul_check(r(dt, {1, 4}), r(dt, {4, 1}), "size-1 rows and columns"));
  t.add(matmul_check(r(dt, {5, 1}), r(dt, {1, 6}), "k = 1"));
  t.add(matmul_check(r(dt, {0, 3}), r(dt, {3, 4}), "m = 0"));
  t.add(matmul_check(r(dt, {2, 0}), r(dt, {0, 4}), "k = 0: zeros"));
  t.add(matmul_check(r(DType::bf16, {3, 0}), r(DType::bf16, {0}), "k = 0: zeros"));
  t.add(matmul_check(r(DType::i32, {0, 2, 3}), r(DType::i32, {3, 4}), "empty batch"));
  t.add(matmul_check(r(dt, {5, 600}), r(dt, {600, 3}), "long k, loops"));
  t.add(matmul_check(r(dt, {40, 1, 8, 16}), r(dt, {40, 16, 8}), "many small batches"));
  t.add(matmul_check(r(dt, {24, 48, 48}), r(dt, {24, 48, 48}), "medium batches"));
  t.add(matmul_check(random_tensor(DType::i8, {4, 40}, next(), -128, 127),
                     random_tensor(DType::i8, {40, 3}, next(), -128, 127), "wraps"));
  t.add(matmul_check(random_tensor(DType::u8, {3, 50}, next(), 0, 255),
                     random_tensor(DType::u8, {50, 2}, next(), 0, 255), "wraps"));
  t.add(matmul_check(random_tensor(DType::i64, {3, 9}, next(), -1e9, 1e9),
                     random_tensor(DType::i64, {9, 4}, next(), -1e9, 1e9), "i64 range"));
}

void add_dot_general(CheckTable& t) {
  uint64_t seed = 1700;
  auto next = [&] { return ++seed; };
  auto r = [&](DType dt, std::vector<int64_t> shape) { return random_tensor(dt, shape, next()); };
  for (DType dt : kNumeric) {
    t.add(dot_check(r(dt, {2, 3}), r(dt, {3, 4}), {1}, {0}, {}, {}));
    t.add(dot_check(r(dt, {2, 3, 4}), r(dt, {2, 4, 5}), {2}, {1}, {0}, {0}, "batch"));
    t.add(dot_check(r(dt, {2, 3, 5}), r(dt, {4, 5, 3}), {1, 2}, {2, 1}, {}, {},
                    "two contracting dims"));
    t.add(dot_check(r(dt, {3, 2, 4, 5}), r(dt, {2, 6, 5}), {-1}, {-1}, {1}, {0}, "attention"));
  }
  for (DType dt : kFloats) {
    t.add(dot_check(r(dt, {4, 40, 30}), r(dt, {4, 30, 50}), {2}, {1}, {0}, {0}, "library"));
    t.add(dot_check(r(dt, {2, 3, 64, 16}), r(dt, {2, 3, 48, 16}), {3}, {3}, {0, 1}, {0, 1},
                    "library, q·k^T"));
    t.add(dot_check(r(dt, {6, 5, 40}), r(dt, {40, 7, 8}), {2}, {0}, {}, {},
                    "library, merged free dims"));
  }
  DType dt = DType::f32;
  t.add(dot_check(r(dt, {2, 3}), r(dt, {4}), {}, {}, {}, {}, "outer product"));
  t.add(dot_check(r(dt, {5}), r(dt, {5}), {0}, {0}, {}, {}, "dot"));
  t.add(dot_check(r(dt, {2, 0}), r(dt, {2, 0, 7}), {1}, {1}, {0}, {0}, "k = 0: zeros"));
  t.add(dot_check(r(dt, {0, 3}), r(dt, {3, 4}), {1}, {0}, {}, {}, "m = 0"));
  t.add(dot_check(r(dt, {3, 1, 4}), r(dt, {4, 1, 3}), {0, 2}, {2, 0}, {}, {}, "size-1 free"));
  t.add(dot_check(r(dt, {4, 3, 2}), r(dt, {3, 2, 4}), {-2}, {0}, {-1}, {1}, "batch not leading"));
  t.add(dot_check(transposed(dt, 30, 20, next()), r(dt, {30, 10}), {0}, {0}, {}, {},
                  "transposed view, contract rows"));
  t.add(dot_check(random_tensor(DType::i8, {3, 60}, next(), -128, 127),
                  random_tensor(DType::i8, {60, 2}, next(), -128, 127), {1}, {0}, {}, {}, "wraps"));
}

}  // namespace

CheckTable checks_linalg() {
  CheckTable t;
  add_matmul(t);
  add_dot_general(t);
  return t;
}

}  // namespace rlx::test
