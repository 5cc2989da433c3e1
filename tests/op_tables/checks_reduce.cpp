// Reductions over axes, argmax / argmin and cumsum against naive loops (long double sums;
// integer sums and products wrap in uint64, as the dtype's arithmetic does).
#include <cmath>
#include <limits>
#include <span>
#include <string_view>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

enum class Fold { sum, prod, max, min, mean, lse, l1, l2 };

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kNumeric[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                              DType::i16, DType::i32, DType::i64, DType::u8};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double fold_float(Fold f, const std::vector<double>& v) {
  auto extreme = [&](bool max) {
    double m = max ? -kInf : kInf;
    for (double x : v) {
      if (std::isnan(x)) return kNaN;
      m = max ? std::max(m, x) : std::min(m, x);
    }
    return m;
  };
  long double s = 0;
  switch (f) {
    case Fold::sum:
    case Fold::mean:
      for (double x : v) s += x;
      return f == Fold::sum ? double(s) : double(s / (long double)v.size());
    case Fold::prod: {
      double p = 1;
      for (double x : v) p *= x;
      return p;
    }
    case Fold::max:
      return extreme(true);
    case Fold::min:
      return extreme(false);
    case Fold::lse: {
      double m = extreme(true);
      if (!std::isfinite(m)) return m;
      for (double x : v) s += std::exp((long double)(x - m));
      return m + double(std::log(s));
    }
    case Fold::l1:
      for (double x : v) s += std::fabs(x);
      return double(s);
    case Fold::l2:
      for (double x : v) s += (long double)x * x;
      return double(std::sqrt(s));
  }
  return kNaN;
}

double fold_int(Fold f, DType dt, const std::vector<double>& v) {
  if (f == Fold::max || f == Fold::min) return fold_float(f, v);
  uint64_t acc = f == Fold::prod ? 1 : 0;
  for (double x : v) {
    auto u = uint64_t(int64_t(x));
    acc = f == Fold::prod ? acc * u : acc + u;
  }
  return double(wrap_int(dt, acc));
}

// Groups x's elements by output position (reduced axes dropped) and folds each group.
Tensor reduce_ref(const Tensor& x, IntList axes, bool keepdims, Fold f) {
  const auto& shape = x.shape();
  std::vector<bool> red(shape.size(), axes.empty());
  for (int64_t a : axes) red[size_t(a < 0 ? a + x.rank() : a)] = true;
  std::vector<int64_t> kept, out_shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!red[d]) kept.push_back(shape[d]);
    if (!red[d] || keepdims) out_shape.push_back(red[d] ? 1 : shape[d]);
  }
  int64_t n_out = 1;
  for (int64_t k : kept) n_out *= k;
  std::vector<std::vector<double>> groups(static_cast<size_t>(n_out));
  auto xv = values(x);
  for (size_t i = 0; i < xv.size(); ++i) {
    auto idx = unravel(int64_t(i), shape);
    std::vector<int64_t> k;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!red[d]) k.push_back(idx[d]);
    groups[size_t(ravel(k, kept))].push_back(xv[i]);
  }
  std::vector<double> out;
  for (const auto& g : groups)
    out.push_back(is_float(x.dtype()) ? fold_float(f, g) : fold_int(f, x.dtype(), g));
  return tensor_of(x.dtype(), out_shape, out);
}

// NumPy argmax / argmin: NaN is the extreme and the first one wins (the last one, and the
// last of equal extremes, under select_last_index).
Tensor arg_ref(const Tensor& x, int64_t axis, bool keepdims, bool last, bool max) {
  auto shape = x.shape();
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, n = shape[size_t(axis)], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= shape[size_t(d)];
  auto xv = values(x);
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = -1;
      for (int64_t r = 0; r < n; ++r) {
        double v = xv[size_t((o * n + r) * inner + i)];
        if (best < 0) {
          best = r;
          continue;
        }
        double b = xv[size_t((o * n + best) * inner + i)];
        bool take;
        if (std::isnan(b) || std::isnan(v))
          take = std::isnan(v) && (!std::isnan(b) || last);
        else
          take = (max ? v > b : v < b) || (last && v == b);
        if (take) best = r;
      }
      out.push_back(double(best));
    }
  if (keepdims)
    shape[size_t(axis)] = 1;
  else
    shape.erase(shape.begin() + axis);
  return tensor_of(DType::i64, shape, out);
}

Tensor cumsum_ref(const Tensor& x, int64_t axis, bool exclusive, bool reverse) {
  const auto& shape = x.shape();
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, n = shape[size_t(axis)], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= shape[size_t(d)];
  auto xv = values(x);
  std::vector<double> out(xv.size());
  bool fl = is_float(x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      long double s = 0;
      uint64_t u = 0;
      for (int64_t k = 0; k < n; ++k) {
        int64_t r = reverse ? n - 1 - k : k;
        size_t at = size_t((o * n + r) * inner + i);
        if (!exclusive) {
          s += xv[at];
          u += uint64_t(int64_t(xv[at]));
        }
        out[at] = fl ? double(s) : double(wrap_int(x.dtype(), u));
        if (exclusive) {
          s += xv[at];
          u += uint64_t(int64_t(xv[at]));
        }
      }
    }
  return tensor_of(x.dtype(), shape, out);
}

struct ReduceOp {
  const char* name;
  Fold fold;
  bool float_only, needs_nonempty;
};

constexpr ReduceOp kReduceOps[] = {
    {"sum", Fold::sum, false, false},       {"prod", Fold::prod, false, false},
    {"reduce_max", Fold::max, false, true}, {"reduce_min", Fold::min, false, true},
    {"mean", Fold::mean, true, false},      {"logsumexp", Fold::lse, true, false},
    {"l1_norm", Fold::l1, true, false},     {"l2_norm", Fold::l2, true, false},
};

OpCheck reduce_check(const ReduceOp& op, Tensor x, IntList axes, bool keepdims,
                     std::string note = "") {
  DType dt = x.dtype();
  Fold f = op.fold;
  return {.op = op.name,
          .dtype = dt,
          .inputs = {std::move(x)},
          .attrs = {{"axes", axes}, {"keepdims", keepdims}},
          .ref = [f](const Tensors& in, const Attrs& a) -> Tensors {
            return {reduce_ref(in[0], a.get_ints("axes"), a.get_bool("keepdims"), f)};
          },
          .note = std::move(note)};
}

void add_reductions(CheckTable& t) {
  uint64_t seed = 100;
  for (const ReduceOp& op : kReduceOps) {
    bool prod = op.fold == Fold::prod;
    // Products of many factors stay finite and non-zero near 1.
    double lo = prod ? 0.5 : -2, hi = prod ? 1.5 : 2;
    auto rnd = [&](DType dt, std::vector<int64_t> shape) {
      if (prod && !is_float(dt)) return random_tensor(dt, shape, ++seed, -2, 2);
      return random_tensor(dt, shape, ++seed, lo, hi);
    };
    auto types = op.float_only ? std::span<const DType>(kFloats) : std::span<const DType>(kNumeric);
    for (DType dt : types) {
      t.add(reduce_check(op, rnd(dt, {3, 4, 5}), {1}, false));
      t.add(reduce_check(op, rnd(dt, {3, 4, 5}), {0, 2}, true, "non-adjacent axes"));
      t.add(reduce_check(op, rnd(dt, {2, 3, 4}), {}, false, "all axes"));
      t.add(reduce_check(op, rnd(dt, {3, 700}), {-1}, false, "long rows"));
      t.add(reduce_check(op, rnd(dt, {2, 300, 260}), {1}, false, "long columns, 2 chunks"));
    }
    DType dt = DType::f32;
    t.add(reduce_check(op, rnd(dt, {}), {}, true, "rank 0"));
    t.add(reduce_check(op, rnd(dt, {4, 1, 3}), {1}, false, "size-1 axis"));
    t.add(reduce_check(op, rnd(dt, {2, 1, 3, 1}), {0, 2}, false, "size-1 dims between axes"));
    t.add(reduce_check(op, rnd(dt, {2, 3, 4, 5}), {-1, 1}, true, "negative axes"));
    t.add(reduce_check(op, rnd(dt, {0, 3}), {1}, false, "empty kept axis"));
    t.add(reduce_check(op, rnd(dt, {5, 2, 9000}), {0, 2}, false, "non-adjacent axes, long rows"));
    t.add(reduce_check(op, rnd(dt, {140000}), {}, false, "split row"));
    t.add(reduce_check(op, rnd(DType::f64, {50000, 3}), {0}, false, "split columns"));
    t.add(reduce_check(op, rnd(DType::bf16, {3, 70000}), {}, true, "split row"));
    if (!op.needs_nonempty) {
      t.add(reduce_check(op, rnd(dt, {0, 3}), {0}, false, "empty reduced axis"));
      t.add(reduce_check(op, rnd(DType::f16, {2, 0}), {}, true, "empty"));
    }
    // NaN and infinities: one row with NaN, one with +inf, one with -inf, one all -inf.
    t.add(reduce_check(
        op, tensor_of(dt, {4, 3}, {1, kNaN, 2, 1, kInf, -3, -kInf, 2, 0.5, -kInf, -kInf, -kInf}),
        {1}, false, "nan/inf"));
    if (!op.float_only) {
      t.add(reduce_check(op, rnd(DType::i32, {2, 3, 4}), {0, 2}, false));
      t.add(
          reduce_check(op, random_tensor(DType::u8, {3, 9}, ++seed, 0, 255), {1}, false, "wraps"));
      t.add(reduce_check(op, random_tensor(DType::i8, {9, 3}, ++seed, -128, 127), {0}, false,
                         "wraps"));
      t.add(reduce_check(op, random_tensor(DType::i64, {2, 5000}, ++seed, -1e6, 1e6), {1}, false,
                         "long rows"));
    }
  }
}

void add_arg_reductions(CheckTable& t) {
  uint64_t seed = 500;
  for (const char* op : {"argmax", "argmin"}) {
    bool max = std::string_view(op) == "argmax";
    auto add = [&](Tensor x, int64_t axis, bool keepdims, bool last, std::string note = "") {
      DType dt = x.dtype();
      t.add({.op = op,
             .dtype = dt,
             .inputs = {std::move(x)},
             .attrs = {{"axis", axis}, {"keepdims", keepdims}, {"select_last_index", last}},
             .ref = [max](const Tensors& in, const Attrs& a) -> Tensors {
               return {arg_ref(in[0], a.get_int("axis"), a.get_bool("keepdims"),
                               a.get_bool("select_last_index"), max)};
             },
             .note = std::move(note)});
    };
    for (DType dt : kNumeric) {
      add(random_tensor(dt, {3, 4}, ++seed), 1, false, false);
      // Few distinct values: many ties, first or last index.
      for (bool last : {false, true}) {
        add(random_tensor(dt, {4, 5, 3}, ++seed, 0, 2), 1, false, last, "ties");
        add(random_tensor(dt, {3, 100}, ++seed, 0, 3), -1, true, last, "ties, lanes");
        add(random_tensor(dt, {2, 40, 300}, ++seed, 0, 3), 1, false, last, "ties, 2 chunks");
      }
    }
    DType dt = DType::f32;
    add(random_tensor(dt, {5}, ++seed), 0, false, false, "rank 1");
    add(random_tensor(dt, {5}, ++seed), 0, true, true, "rank 1");
    add(random_tensor(dt, {3, 4}, ++seed), -2, true, false, "negative axis");
    add(random_tensor(dt, {0, 3}, ++seed), 1, false, false, "empty kept axis");
    add(random_tensor(dt, {2, 1, 3}, ++seed), 1, false, false, "size-1 axis");
    for (bool last : {false, true}) {
      // NaN anywhere wins; -inf / +inf order as usual.
      Tensor x = tensor_of(
          dt, {4, 4},
          {1, kNaN, 3, kNaN, kInf, 2, kInf, -kInf, -kInf, -kInf, 0, -kInf, kNaN, kNaN, 1, 2});
      add(x, 1, false, last, "nan/inf rows");
      add(x, 0, false, last, "nan/inf columns");
      std::vector<double> v(200, 1.0);
      v[37] = kNaN;
      v[150] = kNaN;
      v[60] = 5;
      v[10] = -5;
      add(tensor_of(dt, {200}, v), 0, false, last, "nan, lanes");
    }
  }
}

void add_cumsum(CheckTable& t) {
  uint64_t seed = 900;
  auto add = [&](Tensor x, int64_t axis, bool exclusive, bool reverse, std::string note = "") {
    DType dt = x.dtype();
    t.add({.op = "cumsum",
           .dtype = dt,
           .inputs = {std::move(x)},
           .attrs = {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}},
           .ref = [](const Tensors& in, const Attrs& a) -> Tensors {
             return {cumsum_ref(in[0], a.get_int("axis"), a.get_bool("exclusive"),
                                a.get_bool("reverse"))};
           },
           .note = std::move(note)});
  };
  for (DType dt : kNumeric) {
    add(random_tensor(dt, {3, 4}, ++seed), 1, false, false);
    add(random_tensor(dt, {3, 4, 5}, ++seed), 1, true, false);
    add(random_tensor(dt, {3, 4, 5}, ++seed), 0, false, true);
    add(random_tensor(dt, {2, 3, 300}, ++seed), -1, true, true, "2 chunks");
  }
  DType dt = DType::f32;
  add(random_tensor(dt, {6}, ++seed), 0, false, false, "rank 1");
  add(random_tensor(dt, {2, 300, 3}, ++seed), 1, true, false, "long axis, inner");
  add(random_tensor(dt, {0}, ++seed), 0, false, false, "empty");
  add(random_tensor(dt, {3, 0}, ++seed), 0, true, true, "empty inner");
  add(random_tensor(dt, {5, 1}, ++seed), -1, false, true, "size-1 axis");
  add(random_tensor(DType::f64, {3000}, ++seed), 0, false, false, "long");
  add(tensor_of(dt, {5}, {1, kInf, 2, -kInf, 3}), 0, false, false, "inf");
  add(tensor_of(dt, {4}, {1, kNaN, 2, 3}), 0, true, true, "nan");
  add(random_tensor(DType::u8, {40}, ++seed, 0, 255), 0, false, false, "wraps");
  add(random_tensor(DType::i16, {3, 600}, ++seed, -32768, 32767), 1, false, true, "wraps");
}

// sum_squares: many inputs, mixed dtypes, one f64 value. The device squares in the inputs'
// compute type (f32 for 16-bit) before summing in f64, hence rtol 1e-6 against exact.
void add_sum_squares(CheckTable& t) {
  uint64_t seed = 1300;
  auto add = [&](DType dt, Tensors in, std::string note) {
    t.add({.op = "sum_squares",
           .dtype = dt,
           .inputs = std::move(in),
           .ref = [](const Tensors& in, const Attrs&) -> Tensors {
             double s = 0;
             for (const Tensor& x : in)
               for (double v : values(x)) s += v * v;
             return {tensor_of(DType::f64, {}, {s})};
           },
           .rtol = 1e-6,
           .atol = 1e-9,
           .note = std::move(note)});
  };
  for (DType dt : kFloats)
    add(dt, {random_tensor(dt, {3, 4}, ++seed), random_tensor(dt, {5}, ++seed)}, "two inputs");
  add(DType::f32, {random_tensor(DType::f32, {}, ++seed)}, "rank 0");
  add(DType::f32,
      {random_tensor(DType::f32, {700, 600}, ++seed), random_tensor(DType::bf16, {0, 3}, ++seed),
       random_tensor(DType::bf16, {33, 7}, ++seed), random_tensor(DType::f64, {2}, ++seed)},
      "large, empty, mixed dtypes");
  Tensors many;  // more inputs than one launch takes
  for (int i = 0; i < 150; ++i) many.push_back(random_tensor(DType::f32, {i % 7 + 1, 3}, ++seed));
  add(DType::f32, std::move(many), "150 inputs");
  add(DType::f32, {random_tensor(DType::f32, {0}, ++seed)}, "no elements");
}

}  // namespace

CheckTable checks_reduce() {
  CheckTable t;
  add_reductions(t);
  add_arg_reductions(t);
  add_cumsum(t);
  add_sum_squares(t);
  return t;
}

}  // namespace rlx::test
