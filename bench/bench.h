// Shared pieces of rlx-bench-cpu: timing, the table rows, the measurements.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace rlx::bench {

struct Config {
  bool quick = false;
  int matmul_runs = 10;
  int stream_runs = 20;
  int overhead_runs = 20000;
};

struct Stats {
  double min = 0, median = 0;  // seconds
};

// Runs f `warmup` times untimed, then `runs` times timed.
template <class F>
Stats measure(F&& f, int warmup, int runs) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < std::max(runs, 1); ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

// One line of the table; `na` (why the rlx side could not run) replaces the fraction.
struct Row {
  std::string op, size, time, rate, limit, fraction, na;
};

std::vector<Row> matmul_rows(const Config& c);
std::vector<Row> elementwise_rows(const Config& c);
Row overhead_row(const Config& c);

}  // namespace rlx::bench
