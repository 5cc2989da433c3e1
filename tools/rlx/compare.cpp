// Checking a model's outputs against expected ones: `rlx run --data` and `rlx onnx-test`.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli.h"

namespace rlx::cli {

namespace {

bool finite(double v) { return std::isfinite(v); }

std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// max - min of the finite values (0 when there are none): the scale the error is read on.
double value_range(const std::vector<double>& v) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : v)
    if (finite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  return hi >= lo ? hi - lo : 0;
}

void compare_strings(const Tensor& got, const Tensor& want, OutputCheck& c) {
  std::vector<std::string> a = got.to_strings(), b = want.to_strings();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (!c.mismatched)
      c.first = str_cat("element ", i, ": expected \"", b[i], "\", got \"", a[i], "\"");
    ++c.mismatched;
  }
}

void compare_numbers(const Tensor& got, const Tensor& want, const Tolerance& tol, OutputCheck& c) {
  std::vector<double> a = got.to_doubles(), b = want.to_doubles();
  c.range = value_range(b);
  double atol = std::max(tol.atol, tol.range_tol * c.range);
  c.vacuous =
      !b.empty() && std::all_of(b.begin(), b.end(), [&](double v) { return std::abs(v) <= atol; });
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    double err = std::abs(a[i] - b[i]);
    if (std::isnan(err)) err = INFINITY;  // NaN against a number, or inf - inf
    c.max_abs = std::max(c.max_abs, err);
    if (err <= atol + tol.rtol * std::abs(b[i])) continue;
    if (!c.mismatched) c.first = str_cat("element ", i, ": expected ", b[i], ", got ", a[i]);
    ++c.mismatched;
  }
}

}  // namespace

void validate(const Tolerance& tol) {
  auto non_negative = [](double v, const char* flag) {
    if (!(v >= 0) || !finite(v))
      throw ValueError(str_cat("expected ", flag, " to be a finite number >= 0, got ", v));
  };
  non_negative(tol.rtol, "--rtol");
  non_negative(tol.atol, "--atol");
  non_negative(tol.range_tol, "--range-tol");
  if (!(tol.max_mismatch >= 0 && tol.max_mismatch <= 1))
    throw ValueError(
        str_cat("expected --max-mismatch to be a fraction in [0, 1], got ", tol.max_mismatch));
}

OutputCheck compare(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  OutputCheck c;
  c.total = want.numel();
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    c.type_error = str_cat("expected ", want.type().str(), ", got ", got.type().str());
    c.ok = false;
    return c;
  }
  c.is_string = is_string(got.dtype());
  if (c.is_string)
    compare_strings(got, want, c);
  else
    compare_numbers(got, want, tol, c);
  // Compared as counts: max_mismatch * total rounds down, so 0 allows none.
  c.ok = double(c.mismatched) <= tol.max_mismatch * double(c.total);
  return c;
}

std::string OutputCheck::str(const Tolerance& tol) const {
  if (!type_error.empty()) return str_cat("FAIL: ", type_error);
  std::string s;
  if (!is_string) {
    std::string rel = range > 0 ? g3(max_abs / range) : std::string("n/a");
    s = str_cat("max abs err ", g3(max_abs), " (", rel, " of range ", g3(range), "), ");
  }
  double pct = total ? 100.0 * double(mismatched) / double(total) : 0.0;
  s += str_cat(mismatched, " of ", total, " out of tolerance (", g3(pct),
               "%): ", ok ? "PASS" : "FAIL");
  if (mismatched && ok) s += str_cat(" (within --max-mismatch ", g3(tol.max_mismatch), ")");
  if (!ok) s += str_cat("; first at ", first);
  // Logits of a random-weight net can be 1e-8: any answer near 0 would pass.
  if (vacuous) s += "; every expected value is within the tolerance of 0 (try --atol 0)";
  return s;
}

}  // namespace rlx::cli
