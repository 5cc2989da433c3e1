// Checks for the elementwise family: every op on every dtype it accepts, with broadcasting
// both ways, rank 0, empty and size-1 dims, transposed / broadcast views, NaN / inf / -0,
// integer wrap-around and division by zero, and cast between every pair of dtypes.
// References run in double (floats) or exact int64 (integers, wrapped to the output
// width), at every element of the broadcast output.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Ints = std::vector<int64_t>;
using Shape = std::vector<int64_t>;
using FD = std::function<double(const std::vector<double>&, const Attrs&)>;
using FI = std::function<int64_t(const Ints&)>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kSignedInts[] = {DType::i8, DType::i16, DType::i32, DType::i64};

// Which dtypes an op takes, as in its type rules.
enum Kinds : unsigned { kF = 1, kS = 2, kU = 4, kB = 8, kNum = kF | kS | kU, kAny = 15 };

std::vector<DType> dtypes_of(unsigned kinds) {
  std::vector<DType> out;
  if (kinds & kF) out.insert(out.end(), std::begin(kFloats), std::end(kFloats));
  if (kinds & kS) out.insert(out.end(), std::begin(kSignedInts), std::end(kSignedInts));
  if (kinds & kU) out.push_back(DType::u8);
  if (kinds & kB) out.push_back(DType::boolean);
  return out;
}

// Float inputs that stress special cases.
const std::vector<double> kSpecials = {0.0,  -0.0,  1,    -1,    0.5,  -0.5, 2.5, -2.5,
                                       1e-3, -7.25, kInf, -kInf, kNaN, 3.75, 100};

// --- references --------------------------------------------------------------------------

// Exact integer values of a tensor (i64 beyond 2^53 too).
Ints ints(const Tensor& t) {
  if (t.dtype() == DType::i64) return t.contiguous().to_vector<int64_t>();
  Ints out;
  for (double v : values(t)) out.push_back(int64_t(v));
  return out;
}

// The range of a narrow integer dtype (i8, i16, i32, u8).
std::pair<double, double> limits(DType dt) {
  switch (dt) {
    case DType::i8:
      return {-128, 127};
    case DType::i16:
      return {-32768, 32767};
    case DType::i32:
      return {-2147483648.0, 2147483647.0};
    default:
      return {0, 255};
  }
}

Tensor from_ints(DType dt, Shape shape, const Ints& v) {
  if (dt == DType::i64) return Tensor::from_vector<int64_t>(v, std::move(shape));
  std::vector<double> d(v.begin(), v.end());
  return tensor_of(dt, std::move(shape), d);
}

Shape out_shape(const Tensors& in) {
  Shape s;
  for (const Tensor& t : in) s = broadcast_shape(s, t.shape());
  return s;
}

// f at every element of the broadcast output: in double when `fi` is empty or the data
// dtype is a float, else in int64 with the result wrapped to `out`.
Tensors map_ref(const Tensors& in, const Attrs& attrs, DType data, DType out, const FD& fd,
                const FI& fi) {
  Shape shape = out_shape(in);
  int64_t n = numel(shape);
  if (fi && !is_float(data)) {
    std::vector<Ints> vals;
    for (const Tensor& t : in) vals.push_back(ints(t));
    Ints res(static_cast<size_t>(n)), args(in.size());
    for (int64_t k = 0; k < n; ++k) {
      Ints idx = unravel(k, shape);
      for (size_t j = 0; j < in.size(); ++j)
        args[j] = vals[j][size_t(broadcast_index(idx, in[j].shape()))];
      res[size_t(k)] = wrap_int(out, fi(args));
    }
    return {from_ints(out, shape, res)};
  }
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : in) vals.push_back(values(t));
  std::vector<double> res(static_cast<size_t>(n)), args(in.size());
  for (int64_t k = 0; k < n; ++k) {
    Ints idx = unravel(k, shape);
    for (size_t j = 0; j < in.size(); ++j)
      args[j] = vals[j][size_t(broadcast_index(idx, in[j].shape()))];
    res[size_t(k)] = fd(args, attrs);
  }
  return {tensor_of(out, shape, res)};
}

// Wrapping integer arithmetic on int64 (the result is wrapped to the dtype afterwards).
int64_t uadd(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t usub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t umul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
// x * g(x) for silu / gelu, whose limit at -inf is 0 (the product itself is NaN there).
double gated(double x, double g) { return x == -kInf ? 0.0 : x * g; }

// --- unary ops ---------------------------------------------------------------------------

struct Unary {
  const char* op;
  unsigned kinds;
  double lo, hi;  // random inputs
  std::function<double(double, const Attrs&)> fd;
  std::function<int64_t(int64_t)> fi;  // integer dtypes; empty: float-only op
  bool to_bool = false;
  std::vector<Attrs> variants = {};  // non-default attributes, each checked once
};

std::vector<Unary> unary_ops() {
  using A = const Attrs&;
  auto f = [](double (*g)(double)) { return [g](double x, A) { return g(x); }; };
  return {
      {"neg", kNum, -5, 5, [](double x, A) { return -x; }, [](int64_t x) { return usub(0, x); }},
      {"abs", kNum, -5, 5, f(std::fabs), [](int64_t x) { return x < 0 ? usub(0, x) : x; }},
      {"sign", kNum, -3, 3, [](double x, A) { return x > 0   ? 1.0
                                                     : x < 0 ? -1.0
                                                             : x; },
       [](int64_t x) -> int64_t { return x > 0   ? 1
                                         : x < 0 ? -1
                                                 : 0; }},
      {"square", kNum, -5, 5, [](double x, A) { return x * x; },
       [](int64_t x) { return umul(x, x); }},
      {"relu", kF | kS, -5, 5, [](double x, A) { return x < 0 ? 0.0 : x; },
       [](int64_t x) -> int64_t { return x < 0 ? 0 : x; }},
      {"exp", kF, -4, 4, f(std::exp), {}},
      {"expm1", kF, -2, 2, f(std::expm1), {}},
      {"log", kF, 0.01, 8, f(std::log), {}},
      {"log1p", kF, -0.9, 4, f(std::log1p), {}},
      {"sqrt", kF, 0, 9, f(std::sqrt), {}},
      {"rsqrt", kF, 0.05, 9, [](double x, A) { return 1 / std::sqrt(x); }, {}},
      {"reciprocal", kF, -4, 4, [](double x, A) { return 1 / x; }, {}},
      {"sin", kF, -4, 4, f(std::sin), {}},
      {"cos", kF, -4, 4, f(std::cos), {}},
      {"tan", kF, -1.4, 1.4, f(std::tan), {}},
      {"tanh", kF, -4, 4, f(std::tanh), {}},
      {"sigmoid", kF, -8, 8, [](double x, A) { return sigmoid(x); }, {}},
      {"erf", kF, -3, 3, f(std::erf), {}},
      {"softplus",
       kF,
       -6,
       6,
       [](double x, A) { return x > 30 ? x : std::log(1 + std::exp(x)); },
       {}},
      {"softsign", kF, -6, 6, [](double x, A) { return x / (1 + std::abs(x)); }, {}},
      {"silu", kF, -6, 6, [](double x, A) { return gated(x, sigmoid(x)); }, {}},
      {"floor", kF, -4, 4, f(std::floor), {}},
      {"ceil", kF, -4, 4, f(std::ceil), {}},
      {"round", kF, -4, 4, f(std::nearbyint), {}},
      {"hard_sigmoid",
       kF,
       -4,
       4,
       [](double x, A a) {
         double v = a.get_float("alpha") * x + a.get_float("beta");
         return std::isnan(v) ? v : std::min(1.0, std::max(0.0, v));
       },
       {},
       false,
       {{{"alpha", 0.25}, {"beta", 0.6}}}},
      {"fake_quantize",
       kF,
       -4,
       4,
       [](double x, A a) {
         double s = a.get_float("scale"), z = a.get_float("zero_point");
         double q = std::nearbyint(x / s) + z;  // NaN passes through
         if (!std::isnan(q)) q = std::min(a.get_float("qmax"), std::max(a.get_float("qmin"), q));
         return (q - z) * s;
       },
       {},
       false,
       {{{"scale", 0.25}, {"zero_point", 3.0}, {"qmin", 0.0}, {"qmax", 15.0}}}},
      {"gelu",
       kF,
       -5,
       5,
       [](double x, A a) {
         if (a.get_string("approximate") == "none")
           return gated(x, 0.5 * (1 + std::erf(x / std::sqrt(2.0))));
         double u = std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x);
         return gated(x, 0.5 * (1 + std::tanh(u)));
       },
       {},
       false,
       {{{"approximate", "tanh"}}}},
      {"elu",
       kF,
       -4,
       4,
       [](double x, A a) { return x > 0 ? x : a.get_float("alpha") * std::expm1(x); },
       {},
       false,
       {{{"alpha", 0.5}}}},
      {"leaky_relu",
       kF,
       -4,
       4,
       [](double x, A a) { return x > 0 ? x : a.get_float("alpha") * x; },
       {},
       false,
       {{{"alpha", 0.2}}}},
      {"logical_not", kB, 0, 1, [](double x, A) { return x == 0 ? 1.0 : 0.0; },
       [](int64_t x) -> int64_t { return x == 0; }, true},
      {"isnan", kF, -4, 4, [](double x, A) { return std::isnan(x) ? 1.0 : 0.0; }, {}, true},
      {"isinf", kF, -4, 4, [](double x, A) { return std::isinf(x) ? 1.0 : 0.0; }, {}, true},
  };
}

void add_unary(CheckTable& t, const Unary& u) {
  FD fd = [g = u.fd](const std::vector<double>& a, const Attrs& at) { return g(a[0], at); };
  FI fi;
  if (u.fi) fi = [g = u.fi](const Ints& a) { return g(a[0]); };
  auto ref = [fd, fi, to_bool = u.to_bool](const Tensors& in, const Attrs& at) {
    DType dt = in[0].dtype();
    return map_ref(in, at, dt, to_bool ? DType::boolean : dt, fd, fi);
  };
  auto add = [&](DType dt, Tensor x, std::string note, Attrs attrs = {}) {
    t.add({u.op, dt, {std::move(x)}, std::move(attrs), ref, {}, {}, -1, -1, std::move(note)});
  };
  std::vector<DType> dts = dtypes_of(u.kinds);
  uint64_t seed = std::hash<std::string>{}(u.op);
  for (DType dt : dts) {
    add(dt, random_tensor(dt, {2, 3, 4}, seed++, u.lo, u.hi), "random");
    if (is_float(dt)) add(dt, tensor_of(dt, {3, 5}, kSpecials), "specials");
  }
  DType dt = dts.front();
  add(dt, random_tensor(dt, {}, seed++, u.lo, u.hi), "rank 0");
  add(dt, random_tensor(dt, {0, 3}, seed++, u.lo, u.hi), "empty");
  add(dt, random_tensor(dt, {1, 5, 1}, seed++, u.lo, u.hi), "size-1 dims");
  add(dt, random_tensor(dt, {4, 6}, seed++, u.lo, u.hi).permute({1, 0}), "transposed view");
  add(dt, random_tensor(dt, {1, 6}, seed++, u.lo, u.hi).broadcast_to({3, 6}), "broadcast view");
  for (const Attrs& a : u.variants)
    for (DType d : {DType::f32, DType::f16})
      add(d, tensor_of(d, {3, 5}, kSpecials), "attrs, specials", a);
}

// Integer edge cases of the wrapping unary ops, on every integer dtype.
void add_unary_wrap(CheckTable& t, const Unary& u) {
  if (!u.fi || !(u.kinds & kS)) return;
  for (DType dt : dtypes_of(u.kinds & (kS | kU))) {
    auto [lo, hi] = limits(dt);
    Tensor x = tensor_of(dt, {6}, {lo, lo + 1, -1, 0, hi - 1, hi});
    if (dt == DType::i64)
      x = Tensor::from_vector<int64_t>({INT64_MIN, INT64_MIN + 1, -1, 0, 3037000500, INT64_MAX},
                                       {6});
    FI fi = [g = u.fi](const Ints& a) { return g(a[0]); };
    t.add({u.op,
           dt,
           {x},
           {},
           [fi](const Tensors& in, const Attrs& at) {
             return map_ref(in, at, in[0].dtype(), in[0].dtype(), {}, fi);
           },
           {},
           {},
           -1,
           -1,
           "integer limits (wraps)"});
  }
}

// --- binary ops --------------------------------------------------------------------------

struct Binary {
  const char* op;
  unsigned kinds;
  double lo, hi;  // random inputs
  std::function<double(double, double)> fd;
  std::function<int64_t(int64_t, int64_t)> fi;
  bool to_bool = false;
};

// Integer division and remainders: truncating division; by zero gives 0; the C++
// INT_MIN / -1 overflow wraps (remainder 0).
int64_t idiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? usub(0, a) : a / b; }
int64_t ifmod(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
int64_t imod(int64_t a, int64_t b) {
  int64_t r = ifmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
  int64_t r = 1;
  for (; b; b >>= 1, a = umul(a, a))
    if (b & 1) r = umul(r, a);
  return r;
}
double fmax_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
}
double fmin_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
}
double floor_mod(double a, double b) {
  double r = std::fmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

std::vector<Binary> binary_ops() {
  auto cmp = [](auto op) {
    return Binary{nullptr,
                  kAny,
                  -2,
                  2,
                  [op](double a, double b) { return op(a, b) ? 1.0 : 0.0; },
                  [op](int64_t a, int64_t b) -> int64_t { return op(a, b); },
                  true};
  };
  auto named = [](const char* name, Binary b) {
    b.op = name;
    return b;
  };
  auto logical = [](const char* name, bool (*op)(bool, bool)) {
    return Binary{name,
                  kB,
                  0,
                  1,
                  [op](double a, double b) { return op(a != 0, b != 0) ? 1.0 : 0.0; },
                  [op](int64_t a, int64_t b) -> int64_t { return op(a != 0, b != 0); },
                  true};
  };
  return {
      {"add", kNum, -50, 50, [](double a, double b) { return a + b; }, uadd},
      {"sub", kNum, -50, 50, [](double a, double b) { return a - b; }, usub},
      {"mul", kNum, -20, 20, [](double a, double b) { return a * b; }, umul},
      {"div", kNum, -9, 9, [](double a, double b) { return a / b; }, idiv},
      {"pow", kNum, -3, 3, [](double a, double b) { return std::pow(a, b); }, ipow},
      {"max", kNum, -5, 5, fmax_nan, [](int64_t a, int64_t b) { return std::max(a, b); }},
      {"min", kNum, -5, 5, fmin_nan, [](int64_t a, int64_t b) { return std::min(a, b); }},
      {"mod", kNum, -9, 9, floor_mod, imod},
      {"fmod", kNum, -9, 9, [](double a, double b) { return std::fmod(a, b); }, ifmod},
      {"atan2", kF, -3, 3, [](double a, double b) { return std::atan2(a, b); }, {}},
      logical("logical_and", [](bool a, bool b) { return a && b; }),
      logical("logical_or", [](bool a, bool b) { return a || b; }),
      logical("logical_xor", [](bool a, bool b) { return a != b; }),
      {"bitwise_and", kS | kU | kB, -100, 100, {}, [](int64_t a, int64_t b) { return a & b; }},
      {"bitwise_or", kS | kU | kB, -100, 100, {}, [](int64_t a, int64_t b) { return a | b; }},
      {"bitwise_xor", kS | kU | kB, -100, 100, {}, [](int64_t a, int64_t b) { return a ^ b; }},
      named("eq", cmp([](auto a, auto b) { return a == b; })),
      named("ne", cmp([](auto a, auto b) { return a != b; })),
      named("lt", cmp([](auto a, auto b) { return a < b; })),
      named("le", cmp([](auto a, auto b) { return a <= b; })),
      named("gt", cmp([](auto a, auto b) { return a > b; })),
      named("ge", cmp([](auto a, auto b) { return a >= b; })),
  };
}

RefFn binary_ref(const Binary& b) {
  FD fd;
  if (b.fd) fd = [g = b.fd](const std::vector<double>& a, const Attrs&) { return g(a[0], a[1]); };
  FI fi;
  if (b.fi) fi = [g = b.fi](const Ints& a) { return g(a[0], a[1]); };
  return [fd, fi, to_bool = b.to_bool](const Tensors& in, const Attrs& at) {
    DType dt = in[0].dtype();
    return map_ref(in, at, dt, to_bool ? DType::boolean : dt, fd, fi);
  };
}

// Every float special against every other (a 15 x 15 outer product by broadcasting).
std::pair<Tensor, Tensor> special_pairs(DType dt) {
  Shape n{int64_t(kSpecials.size())};
  return {tensor_of(dt, {n[0], 1}, kSpecials), tensor_of(dt, n, kSpecials)};
}

void add_binary(CheckTable& t, const Binary& b) {
  RefFn ref = binary_ref(b);
  auto add = [&](DType dt, Tensor x, Tensor y, std::string note) {
    t.add({b.op, dt, {std::move(x), std::move(y)}, {}, ref, {}, {}, -1, -1, std::move(note)});
  };
  std::vector<DType> dts = dtypes_of(b.kinds);
  uint64_t seed = std::hash<std::string>{}(b.op);
  // Divisors stay away from 0 for floats (checked with the specials) and include 0 for
  // integers (which define x / 0).
  double ylo = b.lo, yhi = b.hi;
  for (DType dt : dts) {
    double lo = b.lo, hi = b.hi;
    if (std::string(b.op) == "pow" && is_float(dt)) lo = 0.25;  // real results
    add(dt, random_tensor(dt, {3, 4}, seed, lo, hi), random_tensor(dt, {3, 4}, seed + 1, ylo, yhi),
        "random");
    add(dt, random_tensor(dt, {2, 1, 4}, seed + 2, lo, hi),
        random_tensor(dt, {3, 1}, seed + 3, ylo, yhi), "broadcast both ways");
    if (is_float(dt)) {
      auto [x, y] = special_pairs(dt);
      add(dt, x, y, "specials x specials");
    }
    seed += 4;
  }
  DType dt = dts.front();
  auto r = [&](Shape s) { return random_tensor(dt, std::move(s), seed++, b.lo, b.hi); };
  add(dt, r({}), r({2, 3}), "rank 0 with [2,3]");
  add(dt, r({2, 3}), r({}), "[2,3] with rank 0");
  add(dt, r({}), r({}), "both rank 0");
  add(dt, r({0, 3}), r({3}), "empty");
  add(dt, r({1}), r({0}), "1 with 0");
  add(dt, r({1, 5, 1}), r({5, 1}), "size-1 dims");
  add(dt, r({5, 4}).permute({1, 0}), r({4, 1}), "transposed view");
  add(dt, r({1, 4}).broadcast_to({3, 4}), r({3, 4}), "broadcast view");
}

// Integer edge cases: wrap-around of add / sub / mul / pow and division by zero and
// INT_MIN / -1 on every integer dtype.
void add_binary_ints(CheckTable& t, const Binary& b) {
  static const char* const kOps[] = {"add", "sub", "mul", "div", "mod", "fmod", "pow"};
  if (std::find_if(std::begin(kOps), std::end(kOps),
                   [&](const char* s) { return std::string(s) == b.op; }) == std::end(kOps))
    return;
  for (DType dt : dtypes_of(kS | kU)) {
    bool u = dt == DType::u8;
    auto [mn, mx] = limits(dt);
    std::vector<double> xs = {mx, mn, mn, 7, -7, 100, 0, mx, 3, -1};
    std::vector<double> ys = {1, -1, -1, 0, 2, 100, 0, mx, 9, -3};
    if (u)
      for (double* v : {&xs[4], &xs[9], &ys[1], &ys[2], &ys[9]}) *v = 5;
    Tensor x = tensor_of(dt, {10}, xs), y = tensor_of(dt, {10}, ys);
    if (dt == DType::i64) {
      x = Tensor::from_vector<int64_t>(
          {INT64_MAX, INT64_MIN, INT64_MIN, 7, -7, 1ll << 40, 0, INT64_MAX, 3, -1}, {10});
      y = Tensor::from_vector<int64_t>({1, -1, -1, 0, 2, 1ll << 30, 0, INT64_MAX, 41, -3}, {10});
    }
    t.add({b.op, dt, {x, y}, {}, binary_ref(b), {}, {}, -1, -1, "integer limits, x / 0"});
  }
}

// Float cases the specials miss: signs of mod / fmod, pow of negative bases.
void add_binary_floats(CheckTable& t) {
  std::vector<double> a = {5.5, -5.5, 5.5, -5.5, 7, -8, -2, 0, 0, 1, -0.0, 2};
  std::vector<double> b = {2, 2, -2, -2, 7, 3, -3, -1, 0, kNaN, 3, -0.5};
  auto ops = binary_ops();
  for (const char* op : {"mod", "fmod", "pow", "div"})
    for (DType dt : kFloats) {
      const Binary& bo = *std::find_if(ops.begin(), ops.end(),
                                       [&](const Binary& o) { return std::string(o.op) == op; });
      t.add({op,
             dt,
             {tensor_of(dt, {12}, a), tensor_of(dt, {12}, b)},
             {},
             binary_ref(bo),
             {},
             {},
             -1,
             -1,
             "signs"});
    }
}

// Large enough for several threads and chunk boundaries inside rows.
void add_large(CheckTable& t) {
  auto ops = binary_ops();
  auto find = [&](const char* name) {
    return binary_ref(*std::find_if(ops.begin(), ops.end(),
                                    [&](const Binary& o) { return std::string(o.op) == name; }));
  };
  for (DType dt : {DType::f32, DType::f16, DType::i32}) {
    t.add({"add",
           dt,
           {random_tensor(dt, {5, 1, 7001}, 1), random_tensor(dt, {3, 1}, 2)},
           {},
           find("add"),
           {},
           {},
           -1,
           -1,
           "large broadcast"});
    t.add({"mul",
           dt,
           {random_tensor(dt, {70001}, 3), random_tensor(dt, {}, 4)},
           {},
           find("mul"),
           {},
           {},
           -1,
           -1,
           "large by scalar"});
  }
  for (const Unary& u : unary_ops()) {
    std::string op = u.op;
    if (op != "exp" && op != "gelu" && op != "log" && op != "sigmoid") continue;
    for (DType dt : {DType::f32, DType::bf16}) {
      FD fd = [g = u.fd](const std::vector<double>& a, const Attrs& at) { return g(a[0], at); };
      t.add({u.op,
             dt,
             {random_tensor(dt, {301, 233}, 5, u.lo, u.hi).permute({1, 0})},
             {},
             [fd](const Tensors& in, const Attrs& at) {
               return map_ref(in, at, in[0].dtype(), in[0].dtype(), fd, {});
             },
             {},
             {},
             -1,
             -1,
             "large transposed"});
    }
  }
}

// --- select, clamp, cast -----------------------------------------------------------------

void add_select(CheckTable& t) {
  FD fd = [](const std::vector<double>& a, const Attrs&) { return a[0] != 0 ? a[1] : a[2]; };
  FI fi = [](const Ints& a) { return a[0] != 0 ? a[1] : a[2]; };
  RefFn ref = [fd, fi](const Tensors& in, const Attrs& at) {
    return map_ref(in, at, in[1].dtype(), in[1].dtype(), fd, fi);
  };
  auto add = [&](DType dt, Tensors in, std::string note) {
    t.add({"select", dt, std::move(in), {}, ref, {}, {}, -1, -1, std::move(note)});
  };
  uint64_t seed = 11;
  auto c = [&](Shape s) { return random_tensor(DType::boolean, std::move(s), seed++); };
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::i16,
                   DType::i32, DType::i64, DType::u8, DType::boolean}) {
    auto r = [&](Shape s) { return random_tensor(dt, std::move(s), seed++, -50, 50); };
    add(dt, {c({2, 3}), r({2, 3}), r({2, 3})}, "same shapes");
    add(dt, {c({2, 1, 3}), r({4, 1}), r({})}, "broadcast all three");
    if (is_float(dt))
      add(dt, {c({15}), tensor_of(dt, {15}, kSpecials), r({15})}, "specials pass through");
  }
  DType dt = DType::f32;
  auto r = [&](Shape s) { return random_tensor(dt, std::move(s), seed++); };
  add(dt, {c({}), r({}), r({})}, "rank 0");
  add(dt, {c({}), r({0, 2}), r({1})}, "empty");
  add(dt, {c({4, 1}).permute({1, 0}), r({4, 3}).permute({1, 0}), r({4})}, "transposed views");
  add(DType::i64,
      {c({3}), Tensor::from_vector<int64_t>({INT64_MAX, INT64_MIN, 1ll << 60}, {3}),
       Tensor::from_vector<int64_t>({-1, 1, (1ll << 60) + 1}, {3})},
      "i64 bits");
}

void add_clamp(CheckTable& t) {
  FD fd = [](const std::vector<double>& a, const Attrs&) {
    return fmin_nan(fmax_nan(a[0], a[1]), a[2]);
  };
  FI fi = [](const Ints& a) { return std::min(std::max(a[0], a[1]), a[2]); };
  RefFn ref = [fd, fi](const Tensors& in, const Attrs& at) {
    return map_ref(in, at, in[0].dtype(), in[0].dtype(), fd, fi);
  };
  auto add = [&](DType dt, Tensors in, std::string note) {
    t.add({"clamp", dt, std::move(in), {}, ref, {}, {}, -1, -1, std::move(note)});
  };
  uint64_t seed = 21;
  for (DType dt : dtypes_of(kNum)) {
    auto r = [&](Shape s, double lo, double hi) {
      return random_tensor(dt, std::move(s), seed++, lo, hi);
    };
    add(dt, {r({3, 4}, -9, 9), r({}, -3, -1), r({4}, 1, 5)}, "scalar lo, row hi");
    add(dt, {r({2, 1, 3}, -9, 9), r({4, 1}, -5, 0), r({3}, 0, 5)}, "broadcast all three");
    add(dt, {r({6}, -9, 9), r({}, 4, 4), r({}, 2, 2)}, "lo > hi gives hi");
    if (is_float(dt))
      add(dt,
          {tensor_of(dt, {6}, {kNaN, 1, 1, -kInf, kInf, -0.0}),
           tensor_of(dt, {6}, {0, kNaN, 0, -1, 0, 0}), tensor_of(dt, {6}, {2, 2, kNaN, 1, 1, 1})},
          "NaN anywhere, infinities");
  }
  auto r = [&](Shape s) { return random_tensor(DType::f32, std::move(s), seed++); };
  add(DType::f32, {r({}), r({}), r({})}, "rank 0");
  add(DType::f32, {r({0, 3}), r({}), r({1})}, "empty");
}

// Values to cast from, per input dtype: fractions (truncation), out-of-range (saturation
// or wrap), NaN / inf / -0 for floats.
Tensor cast_input(DType dt) {
  if (dt == DType::boolean) return tensor_of(dt, {4}, {0, 1, 1, 0});
  if (dt == DType::i64)
    return Tensor::from_vector<int64_t>({-1, 0, 300, -300, 70000, (1ll << 40) + 5, -(1ll << 33),
                                         1234567891234ll, INT64_MIN, INT64_MAX},
                                        {10});
  if (is_integer(dt)) {
    std::vector<double> v = {-1, 0, 1, 127, -128, 255, 300, -300, 70000, 2147483647};
    return tensor_of(dt, {10}, v);  // saturated to dt on the way in
  }
  return tensor_of(dt, {18},
                   {0.0, -0.0, 2.7, -2.7, 0.99, -0.99, 127.5, -128.9, 255.9, 256, 300, -300,
                    70000.5, 3e9, -3e9, 1e19, kNaN, kInf});
}

Tensors cast_ref(const Tensors& in, const Attrs& at) {
  DType from = in[0].dtype(), to = at.get_dtype("dtype");
  const Tensor& x = in[0];
  if (to == DType::boolean) {
    std::vector<double> v;
    for (double d : values(x)) v.push_back(d != 0 ? 1 : 0);  // NaN != 0
    return {tensor_of(to, x.shape(), v)};
  }
  if (!is_float(from) && !is_float(to)) {  // integer -> integer wraps
    Ints v = ints(x);
    for (int64_t& e : v) e = wrap_int(to, e);
    return {from_ints(to, x.shape(), v)};
  }
  if (from == DType::i64 && is_float(to)) {  // exactly representable here
    std::vector<double> v;
    for (int64_t e : ints(x)) v.push_back(double(e));
    return {tensor_of(to, x.shape(), v)};
  }
  // float -> integer: tensor_of truncates toward zero and saturates, NaN gives 0.
  return {tensor_of(to, x.shape(), values(x))};
}

void add_cast(CheckTable& t) {
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes)
      t.add({"cast",
             from,
             {cast_input(from)},
             {{"dtype", to}},
             cast_ref,
             {},
             {},
             -1,
             -1,
             str_cat(dtype_name(from), " -> ", dtype_name(to))});
  uint64_t seed = 31;
  auto add = [&](Tensor x, DType to, const char* note) {
    DType from = x.dtype();
    t.add({"cast", from, {std::move(x)}, {{"dtype", to}}, cast_ref, {}, {}, -1, -1, note});
  };
  add(random_tensor(DType::f32, {}, seed++), DType::i32, "rank 0");
  add(random_tensor(DType::f16, {2, 0}, seed++), DType::f32, "empty");
  add(random_tensor(DType::f32, {50, 40}, seed++, -300, 300).permute({1, 0}), DType::f16,
      "transposed");
  add(random_tensor(DType::bf16, {1, 7}, seed++, -300, 300).broadcast_to({3, 7}), DType::i8,
      "broadcast view");
}

// Casts to and from strings against ONNX's spellings: shortest round-trip numbers, "INF",
// "-INF", "NaN"; parsing accepts a leading '+' and those words in any case.
void add_string_cast(CheckTable& t) {
  auto fixed = [](Tensor want) {
    return [want](const Tensors&, const Attrs&) { return Tensors{want}; };
  };
  const double inf = INFINITY, nan = NAN;
  auto add = [&](Tensor x, Tensor want, const char* note) {
    DType to = want.dtype(), from = x.dtype();
    t.add({"cast",
           from,
           {std::move(x)},
           {{"dtype", to}},
           fixed(std::move(want)),
           {},
           {},
           -1,
           -1,
           note});
  };
  add(tensor_of(DType::f32, {2, 4}, {0.1, -2.5, 1e-5, 123456789.0, inf, -inf, nan, 0.0}),
      Tensor::from_strings({"0.1", "-2.5", "1e-05", "123456792", "INF", "-INF", "NaN", "0"},
                           {2, 4}),
      "f32 -> string");
  add(tensor_of(DType::f64, {3}, {0.1, 1.0 / 3, -7}),
      Tensor::from_strings({"0.1", "0.3333333333333333", "-7"}, {3}), "f64 -> string");
  add(tensor_of(DType::i64, {3}, {-42, 0, 9007199254740993.0}),
      Tensor::from_strings({"-42", "0", "9007199254740992"}, {3}), "i64 -> string");
  add(tensor_of(DType::boolean, {2}, {1, 0}), Tensor::from_strings({"1", "0"}, {2}),
      "bool -> string");
  add(Tensor::from_strings({"0.47892547", "+1.5", "-INF", "inf", "NaN", "1e-05"}, {2, 3}),
      tensor_of(DType::f32, {2, 3}, {0.47892547, 1.5, -inf, inf, nan, 1e-5}), "string -> f32");
  add(Tensor::from_strings({"0.1", "-3"}, {2}), tensor_of(DType::f64, {2}, {0.1, -3}),
      "string -> f64");
  add(Tensor::from_strings({"12", "-7", "300"}, {3}), tensor_of(DType::i32, {3}, {12, -7, 300}),
      "string -> i32");
  add(Tensor::from_strings({"a", "", "b"}, {3}), Tensor::from_strings({"a", "", "b"}, {3}),
      "string -> string");
  t.add({"cast",
         DType::string,
         {Tensor::from_strings({"1.5", "one"}, {2})},
         {{"dtype", DType::f32}},
         {},
         {},
         {},
         -1,
         -1,
         "not a number",
         true,
         "expected a string that is a number"});
}

// select, eq and ne on strings (equal strings have equal handles).
void add_string_compare(CheckTable& t) {
  uint64_t seed = 71;
  for (const Binary& b : binary_ops())
    if (std::string_view(b.op) == "eq" || std::string_view(b.op) == "ne")
      t.add(ref_check(b.op, DType::string, {string_data({3, 4}, seed++), string_data({4}, seed++)},
                      {}, via_codes(binary_ref(b)), "strings"));
  FI fi = [](const Ints& a) { return a[0] != 0 ? a[1] : a[2]; };
  RefFn select = [fi](const Tensors& in, const Attrs& at) {
    return map_ref(in, at, in[1].dtype(), in[1].dtype(), {}, fi);
  };
  t.add(ref_check("select", DType::string,
                  {random_tensor(DType::boolean, {2, 3}, seed++), string_data({2, 3}, seed++),
                   string_data({3}, seed++)},
                  {}, via_codes(select), "strings"));
}

}  // namespace

CheckTable checks_elementwise() {
  CheckTable t;
  for (const Unary& u : unary_ops()) {
    add_unary(t, u);
    add_unary_wrap(t, u);
  }
  for (const Binary& b : binary_ops()) {
    add_binary(t, b);
    add_binary_ints(t, b);
  }
  add_binary_floats(t);
  add_large(t);
  add_select(t);
  add_clamp(t);
  add_cast(t);
  add_string_cast(t);
  add_string_compare(t);
  return t;
}

}  // namespace rlx::test
