// rlx-bench-cpu: rlx's CPU path next to the limits of the machine it runs on.
//   matmul f32         rlx vs cblas_sgemm on the same buffers (GFLOP/s)
//   add / mul / exp    rlx vs a STREAM-like parallel copy (GB/s, bytes read + written)
//   run() overhead     a 4-element add, per run, vs a 5 us budget
// Usage: rlx-bench-cpu [--quick]
#include <cblas.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench.h"
#include "rlx/rlx.h"

using namespace rlx::bench;

namespace {

void print_table(const std::vector<Row>& rows) {
  std::vector<Row> all = {{"op", "size", "time", "rate", "limit", "fraction"}};
  all.insert(all.end(), rows.begin(), rows.end());
  size_t w[5] = {};
  for (const Row& r : all) {
    const std::string* cols[5] = {&r.op, &r.size, &r.time, &r.rate, &r.limit};
    for (int i = 0; i < 5; ++i) w[i] = std::max(w[i], cols[i]->size());
  }
  for (const Row& r : all)
    std::printf("%-*s  %-*s  %*s  %*s  %-*s  %s\n", int(w[0]), r.op.c_str(), int(w[1]),
                r.size.c_str(), int(w[2]), r.time.c_str(), int(w[3]), r.rate.c_str(), int(w[4]),
                r.limit.c_str(), (r.na.empty() ? r.fraction : r.na).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      c = {true, 3, 5, 2000};
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 1;
    }
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("rlx %s CPU benchmark%s: %d OpenMP threads\n", rlx::kVersion,
              c.quick ? " (--quick)" : "", omp_get_max_threads());
  std::printf("OpenBLAS core %s, %d threads, OPENBLAS_CORETYPE=%s\n  config: %s\n\n",
              openblas_get_corename(), openblas_get_num_threads(), coretype ? coretype : "(unset)",
              openblas_get_config());
  try {
    std::vector<Row> rows = matmul_rows(c);
    for (Row& r : elementwise_rows(c)) rows.push_back(std::move(r));
    rows.push_back(overhead_row(c));
    print_table(rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-bench-cpu: %s\n", e.what());
    return 1;
  }
  std::printf(
      "\ntime: median of %d (matmul) / %d (elementwise) runs; limits: best of as many;\n"
      "fraction: rate / limit (1 = at the limit); for the overhead, time / budget.\n",
      c.matmul_runs, c.stream_runs);
  return 0;
}
