// The measurements: each rlx row next to the limit it is compared with.
#include <cblas.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "bench.h"
#include "rlx/ops.h"
#include "rlx/session.h"

namespace rlx::bench {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string time_str(double s) {
  return s < 1e-3 ? fmt("%.2f us", s * 1e6) : fmt("%.2f ms", s * 1e3);
}

Tensor random_f32(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::empty(DType::f32, std::move(shape));
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

// A row whose rlx side could not run (a kernel missing, …): the limit, and why.
Row na_row(std::string op, std::string size, std::string limit, const std::exception& e) {
  return {std::move(op),
          std::move(size),
          "n/a",
          "-",
          std::move(limit),
          "-",
          std::string("n/a: ") + e.what()};
}

// Worst relative error of `got` against `want(i)` over a sample of elements.
double max_rel_err(const Tensor& got, const std::function<float(int64_t)>& want) {
  const float* g = got.data_as<float>();
  int64_t n = got.numel(), step = std::max<int64_t>(1, n / 4096);
  double worst = 0;
  for (int64_t i = 0; i < n; i += step) {
    double w = want(i);
    double err = std::abs(g[i] - w) / std::max(1.0, std::abs(w));
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  return worst;
}

CompiledGraph compile(const Graph& g) {
  static Session session(Device::cpu());
  return session.compile(g);
}

Row matmul_row(int64_t n, const Config& c) {
  std::string size = str_cat(n, "^3");
  Tensor a = random_f32({n, n}, 1), b = random_f32({n, n}, 2),
         ref = Tensor::empty(DType::f32, {n, n});
  int ni = int(n);
  auto sgemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.f, a.data_as<float>(), ni,
                b.data_as<float>(), ni, 0.f, ref.data_as<float>(), ni);
  };
  double flop = 2.0 * double(n) * double(n) * double(n);
  Stats limit = measure(sgemm, 1, c.matmul_runs);
  double limit_rate = flop / limit.min / 1e9;
  std::string limit_str = fmt("sgemm %.1f GFLOP/s", limit_rate);
  try {
    Graph g;
    Value x = g.input("a", {DType::f32, {n, n}}), y = g.input("b", {DType::f32, {n, n}});
    g.output(matmul(x, y), "c");
    CompiledGraph cg = compile(g);
    std::vector<Tensor> in = {a, b}, out;
    Stats s = measure([&] { out = cg.run(in); }, 1, c.matmul_runs);
    const float* r = ref.data_as<float>();
    double err = max_rel_err(out[0], [&](int64_t i) { return r[i]; });
    double rate = flop / s.median / 1e9;
    Row row{"matmul f32",       size,
            time_str(s.median), fmt("%.1f GFLOP/s", rate),
            limit_str,          fmt("%.2f", rate / limit_rate)};
    if (err > 1e-3) row.fraction += fmt(" WRONG (rel err %.2g)", err);
    return row;
  } catch (const std::exception& e) {
    return na_row("matmul f32", size, limit_str, e);
  }
}

// Best-of-N bandwidth of a parallel copy over every OpenMP thread, bytes read + written.
double stream_copy_gbs(const Tensor& src, Tensor& dst, int runs) {
  const char* s = static_cast<const char*>(src.data());
  char* d = static_cast<char*>(dst.data());
  int64_t bytes = int64_t(src.nbytes()), chunk = 1 << 20;
  int64_t chunks = (bytes + chunk - 1) / chunk;
  auto copy = [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < chunks; ++i)
      std::memcpy(d + i * chunk, s + i * chunk, size_t(std::min(chunk, bytes - i * chunk)));
  };
  return 2.0 * double(bytes) / measure(copy, 2, runs).min / 1e9;
}

}  // namespace

std::vector<Row> matmul_rows(const Config& c) { return {matmul_row(1024, c), matmul_row(2048, c)}; }

std::vector<Row> elementwise_rows(const Config& c) {
  const int64_t n = int64_t(1) << 24;  // 16M f32 = 64 MB per tensor
  Tensor a = random_f32({n}, 3), b = random_f32({n}, 4), scratch = Tensor::empty(DType::f32, {n});
  double copy = stream_copy_gbs(a, scratch, c.stream_runs);
  std::string limit = fmt("copy %.1f GB/s", copy);
  const float *pa = a.data_as<float>(), *pb = b.data_as<float>();

  struct Case {
    const char* op;
    int tensors;  // 64 MB tensors read + written per run
    std::function<Value(Value, Value)> build;
    std::function<float(int64_t)> want;
  };
  std::vector<Case> cases = {
      {"add f32", 3, [](Value x, Value y) { return x + y; },
       [&](int64_t i) { return pa[i] + pb[i]; }},
      {"mul f32", 3, [](Value x, Value y) { return x * y; },
       [&](int64_t i) { return pa[i] * pb[i]; }},
      {"exp f32", 2, [](Value x, Value) { return rlx::exp(x); },
       [&](int64_t i) { return std::exp(pa[i]); }},
  };
  std::vector<Row> rows;
  for (const Case& k : cases) {
    try {
      Graph g;
      Value x = g.input("a", {DType::f32, {n}}), y = g.input("b", {DType::f32, {n}});
      g.output(k.build(x, y), "out");
      CompiledGraph cg = compile(g);
      std::vector<Tensor> in = {a, b}, out;
      Stats s = measure([&] { out = cg.run(in); }, 2, c.stream_runs);
      double gbs = k.tensors * double(a.nbytes()) / s.median / 1e9;
      Row row{
          k.op, "16M", time_str(s.median), fmt("%.1f GB/s", gbs), limit, fmt("%.2f", gbs / copy)};
      if (double err = max_rel_err(out[0], k.want); err > 1e-5)
        row.fraction += fmt(" WRONG (rel err %.2g)", err);
      rows.push_back(row);
    } catch (const std::exception& e) {
      rows.push_back(na_row(k.op, "16M", limit, e));
    }
  }
  return rows;
}

Row overhead_row(const Config& c) {
  const double limit_us = 5.0;
  std::string limit = fmt("<= %.0f us", limit_us);
  try {
    Graph g;
    Value x = g.input("a", {DType::f32, {4}}), y = g.input("b", {DType::f32, {4}});
    g.output(x + y, "out");
    CompiledGraph cg = compile(g);
    std::vector<Tensor> in = {random_f32({4}, 5), random_f32({4}, 6)};
    for (int i = 0; i < 100; ++i) cg.run(in);
    // The mean over many runs: one run is too short for the clock.
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < c.overhead_runs; ++i) cg.run(in);
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        c.overhead_runs;
    return {"run() overhead",          "add [4]", fmt("%.2f us", us), "-", limit,
            fmt("%.2f", us / limit_us)};
  } catch (const std::exception& e) {
    return na_row("run() overhead", "add [4]", limit, e);
  }
}

}  // namespace rlx::bench
