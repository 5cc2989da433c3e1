// uniform and normal: draws are not unique values, so every check verifies properties
// (verify, not ref): the output type; uniform values inside [low, high); for 64K draws the
// sample mean, standard deviation and one quantile fraction within 5 sigma of the
// distribution's; a second compile and run with the same seed (and key) reproduces the
// values; another seed or key gives others. The exact Philox stream is pinned down by
// tests/cpu/random_test.cpp.
#include <algorithm>
#include <cmath>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Shape = std::vector<int64_t>;

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// Moments of the distribution: mean, standard deviation, kurtosis, and the probability p
// of the event `in_event` used for the quantile check.
struct Dist {
  double mean, sd, kurtosis, p;
  double lo, hi;  // the event: lo <= x < hi
};

Dist dist_of(const std::string& op, const Attrs& a) {
  if (op == "uniform") {
    double lo = a.get_float("low"), hi = a.get_float("high");
    return {(lo + hi) / 2, (hi - lo) / std::sqrt(12.0), 1.8, 0.25, lo, lo + (hi - lo) / 4};
  }
  double mu = a.get_float("mean"), sd = a.get_float("std");
  return {mu, sd, 3.0, 0.682689492137, mu - sd, mu + sd};
}

// Checks the statistics of a large sample against 5-sigma bounds.
std::string check_stats(const std::vector<double>& y, const Dist& d) {
  double n = double(y.size()), sum = 0, sq = 0, hits = 0;
  for (double v : y) sum += v, hits += (v >= d.lo && v < d.hi);
  double mean = sum / n;
  for (double v : y) sq += (v - mean) * (v - mean);
  double sd = std::sqrt(sq / (n - 1));
  if (std::fabs(mean - d.mean) > 5 * d.sd / std::sqrt(n) + 1e-12)
    return str_cat("expected a sample mean near ", d.mean, ", got ", mean);
  // The standard error of a sample sd is about sd * sqrt((kurtosis - 1) / (4n)).
  if (std::fabs(sd - d.sd) > 5 * d.sd * std::sqrt((d.kurtosis - 1) / (4 * n)) + 1e-12)
    return str_cat("expected a sample standard deviation near ", d.sd, ", got ", sd);
  if (d.sd > 0 && std::fabs(hits / n - d.p) > 5 * std::sqrt(d.p * (1 - d.p) / n))
    return str_cat("expected a fraction ", d.p, " in [", d.lo, ", ", d.hi, "), got ", hits / n);
  return "";
}

size_t distinct(std::vector<double> y) {
  std::sort(y.begin(), y.end());
  return size_t(std::unique(y.begin(), y.end()) - y.begin());
}

// How many positions two samples share.
double same_fraction(const std::vector<double>& a, const std::vector<double>& b) {
  double same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return a.empty() ? 0 : same / double(a.size());
}

VerifyFn random_verify(const std::string& op) {
  return [op](const Tensors& in, const Tensors& out, const Attrs& a) -> std::string {
    const IntList& shape = a.get_ints("shape");
    TensorType want{a.get_dtype("dtype"), to_shape(shape)};
    if (out.size() != 1 || out[0].type().str() != want.str())
      return str_cat("expected one output of type ", want.str());
    auto y = values(out[0]);
    Dist d = dist_of(op, a);
    for (size_t i = 0; i < y.size(); ++i) {
      if (!std::isfinite(y[i])) return str_cat("expected finite draws, got ", y[i], " at ", i);
      if (op == "uniform" && !(y[i] >= a.get_float("low") && y[i] < a.get_float("high")))
        return str_cat("expected draws in [low, high), got ", y[i], " at ", i);
      if (op == "normal" && d.sd == 0 && y[i] != d.mean)
        return str_cat("expected every draw to be the mean with std 0, got ", y[i], " at ", i);
    }
    if (y.size() >= 60000)
      if (std::string e = check_stats(y, d); !e.empty()) return e;
    Device dev = out[0].device();
    auto again = values(run_graph(op, in, a, dev)[0]);
    if (again != y) return "expected the same draws from a second run with the same seed";
    if (y.size() >= 16 && distinct(y) > y.size() / 2) {
      // Collisions are rare even in bf16 (a few hundred values per unit interval); the
      // check skips degenerate samples (std 0, a range of a few representable values).
      Attrs other = a;
      other.set("seed", a.get_int("seed") + 1);
      if (same_fraction(values(run_graph(op, in, other, dev)[0]), y) > 0.1)
        return "expected other draws from another seed";
      if (!in.empty()) {
        Tensor key = Tensor::from_doubles(in[0].dtype(), {}, {values(in[0])[0] + 1});
        if (same_fraction(values(run_graph(op, {key}, a, dev)[0]), y) > 0.1)
          return "expected other draws from another key";
      }
    }
    return "";
  };
}

}  // namespace

CheckTable checks_random() {
  CheckTable t;
  struct Case {
    Shape shape;
    Attrs attrs;              // besides shape and dtype
    std::vector<double> key;  // empty: no key input
    DType key_dtype;
    const char* note;
  };
  for (const char* op : {"uniform", "normal"}) {
    bool uni = std::string(op) == "uniform";
    Attrs params = uni ? Attrs{{"low", -3.0}, {"high", 5.0}} : Attrs{{"mean", 2.0}, {"std", 0.5}};
    const std::vector<Case> cases = {
        {{256, 256}, {}, {}, DType::i64, "64K draws, defaults"},
        {{256, 256}, params, {}, DType::i64, "64K draws, parameters"},
        {{300, 211}, {{"seed", -12345}}, {7}, DType::i64, "64K draws, key, negative seed"},
        {{3, 5}, {{"seed", 9}}, {-2}, DType::i8, "i8 key"},
        {{17}, {}, {200}, DType::u8, "u8 key, odd length"},
        {{}, params, {}, DType::i64, "rank 0"},
        {{0, 4}, {}, {}, DType::i64, "empty"},
    };
    for (DType dt : kFloats) {
      for (const Case& c : cases) {
        OpCheck ck;
        ck.op = op;
        ck.dtype = dt;
        ck.attrs = c.attrs;
        ck.attrs.set("shape", IntList(c.shape)).set("dtype", dt);
        if (!c.key.empty()) ck.inputs.push_back(tensor_of(c.key_dtype, {}, c.key));
        ck.verify = random_verify(op);  // draws are random: properties, not values
        ck.note = c.note;
        t.add(std::move(ck));
      }
    }
    if (uni) {
      // A range narrower than a bf16/f16 step near 1: rounding must not reach `high`.
      for (DType dt : {DType::f16, DType::bf16}) {
        OpCheck ck;
        ck.op = op;
        ck.dtype = dt;
        ck.attrs = {{"shape", IntList{1000}}, {"dtype", dt}, {"low", 1.0}, {"high", 1.002}};
        ck.verify = random_verify(op);
        ck.note = "narrow range";
        t.add(std::move(ck));
      }
    } else {
      OpCheck ck;
      ck.op = op;
      ck.dtype = DType::f32;
      ck.attrs = {{"shape", IntList{100}}, {"dtype", DType::f32}, {"mean", -1.5}, {"std", 0.0}};
      ck.verify = random_verify(op);
      ck.note = "std 0";
      t.add(std::move(ck));
    }
  }
  return t;
}

}  // namespace rlx::test
