// rlx-bench-sparse: libs/sparse on the CPU against SciPy and against the machine.
//   CG      sparse.cg_solve (Jacobi) on the 2-D 5-point Poisson matrix of a 1024 x 1024 grid
//           (1,048,576 unknowns), f32, exactly 100 iterations, against SciPy's
//           scipy.sparse.linalg.cg with a Jacobi M on the same system (bench/sparse_scipy.py,
//           run by this program with Debian's python3): the ratio rlx / SciPy.
//   spmv    sparse.spmv on the same matrix: GB/s of the bytes it must move (values, column
//           indices, row pointers, x and y once each) against a STREAM-like parallel copy
//           measured in the same run (the target's yardstick), and next to a parallel
//           read-only stream, and the floor of its own work: the same op on a matrix that
//           stays in cache, scaled to this one.
// Usage: rlx-bench-sparse [--quick] [--grid N] [--threads N] [--no-scipy]
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench.h"
#include "rlx/rlx.h"
#include "rlx_sparse/sparse.h"

using rlx::DType;
using rlx::Graph;
using rlx::Tensor;
using rlx::Value;
using rlx::bench::measure;
namespace sp = rlx::sparse;

namespace {

struct Options {
  int64_t grid = 1024;
  int iters = 100;
  int runs = 5;
  int threads = 0;  // CompileOptions::threads (0: every core)
  bool scipy = true;
};

// A parallel memcpy over `threads` threads, 1 MiB chunks: the STREAM-like copy of
// bench/cpu_bench.cpp. Its bandwidth counts the bytes read and written.
struct Copy {
  Tensor src, dst;
  int threads;
  Copy(size_t bytes, int threads)
      : src(Tensor::full(DType::u8, {int64_t(bytes)}, 1)),
        dst(Tensor::zeros(DType::u8, {int64_t(bytes)})),
        threads(threads) {}
  double bytes() const { return 2.0 * double(src.nbytes()); }
  void operator()() const {
    const char* s = static_cast<const char*>(src.data());
    char* d = static_cast<char*>(dst.data());
    const int64_t n = src.numel(), chunk = 1 << 20, chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < chunks; ++i)
      std::memcpy(d + i * chunk, s + i * chunk, size_t(std::min(chunk, n - i * chunk)));
  }
};

// A parallel read of the same buffer (a vectorised sum of u32 words into 64 lanes, i.e.
// several independent vector sums): the read-only bandwidth, for kernels like spmv that
// read ~95 % of the bytes they move.
struct Read {
  const Copy& c;
  double bytes() const { return double(c.src.nbytes()); }
  void operator()() const {
    constexpr int64_t kLanes = 64;
    const auto* s = static_cast<const uint32_t*>(c.src.data());
    const int64_t n = c.src.numel() / 4 / kLanes;  // the buffer is a multiple of 256 B
    uint32_t sum = 0;
#pragma omp parallel num_threads(c.threads) reduction(+ : sum)
    {
      uint32_t acc[kLanes] = {};
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < kLanes; ++j) acc[j] += s[i * kLanes + j];
      for (uint32_t a : acc) sum += a;
    }
    sink = sum;
  }
  static inline volatile uint32_t sink = 0;
};

// SciPy's best and median ms with M = Jacobi, its median without M; < 0 when python3 with
// SciPy fails.
struct Scipy {
  double jacobi_ms = -1, jacobi_min_ms = -1, none_ms = -1;
  int iterations = 0;
  std::string version;
};
Scipy run_scipy(const Options& o) {
  Scipy r;
  const char* py = std::getenv("RLX_PYTHON");
  std::string cmd = std::string(py ? py : "/usr/bin/python3") +
                    " " RLX_SPARSE_SCIPY_PY " n=" + std::to_string(o.grid) +
                    " iters=" + std::to_string(o.iters) + " runs=" + std::to_string(o.runs) +
                    " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char line[512], name[64], v1[64], v2[64];
  double ms = 0, min_ms = 0;
  int it = 0;
  while (std::fgets(line, sizeof line, p)) {
    if (std::sscanf(line, "RESULT cg %63s %lf %lf %d", name, &min_ms, &ms, &it) == 4) {
      if (std::strcmp(name, "jacobi") == 0) {
        r.jacobi_ms = ms;
        r.jacobi_min_ms = min_ms;
      } else {
        r.none_ms = ms;
      }
      r.iterations = it;
    } else if (std::sscanf(line, "VERSION scipy %63s numpy %63s", v1, v2) == 2) {
      r.version = rlx::str_cat("SciPy ", v1, ", NumPy ", v2);
    } else {
      std::fputs(line, stderr);
    }
  }
  pclose(p);
  return r;
}

rlx::CompiledGraph compile(const Graph& g, const Options& o) {
  rlx::CompileOptions co;
  co.threads = o.threads;
  return rlx::Session(rlx::Device::cpu()).compile(g, co);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      o.runs = 2;
    } else if (!std::strcmp(argv[i], "--grid") && i + 1 < argc) {
      o.grid = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--no-scipy")) {
      o.scipy = false;
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--grid N] [--threads N] [--no-scipy]\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 1;
    }
  }
  try {
    sp::register_ops();
    sp::SparseMatrix a = sp::poisson2d(o.grid, DType::f32, DType::i32);
    const int64_t n = a.rows, nnz = a.nnz();
    int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
    std::printf(
        "rlx %s sparse benchmark: %d threads; Poisson %lldx%lld grid: %lld unknowns, "
        "%lld nonzeros, f32 values, i32 indices; times: best / median of %d runs\n\n",
        rlx::kVersion, threads, (long long)o.grid, (long long)o.grid, (long long)n, (long long)nnz,
        o.runs);
    Graph g;
    sp::Csr A = sp::input(g, "A", a);
    Value b = g.input("b", {DType::f32, {n}});
    rlx::TensorMap in{{"A.values", a.values},
                      {"A.col_idx", a.col_idx},
                      {"A.row_ptr", a.row_ptr},
                      {"b", Tensor::full(DType::f32, {n}, 1.0)}};

    // CG, exactly o.iters iterations (a tolerance nothing reaches).
    sp::IterativeOptions co;
    co.tol = 1e-30;
    co.max_iter = o.iters;
    sp::Solution s = sp::cg_solve(A, b, co);
    g.output(s.iterations, "iterations");
    g.output(s.residual, "residual");
    rlx::TensorMap out;
    auto cg = compile(g, o);
    auto t = measure([&] { out = cg.run(in); }, 1, o.runs);
    int iters = out.at("iterations").to_vector<int32_t>()[0];
    std::printf("CG (Jacobi), %d iterations:\n", o.iters);
    std::printf(
        "  rlx    %8.1f / %8.1f ms  (%.2f ms/iteration; ran %d, final relative residual %.3g)\n",
        t.min * 1e3, t.median * 1e3, t.min * 1e3 / iters, iters,
        out.at("residual").to_doubles()[0]);
    if (o.scipy) {
      Scipy py = run_scipy(o);
      if (py.jacobi_ms > 0) {
        std::printf(
            "  SciPy  %8.1f / %8.1f ms  (%.2f ms/iteration; ran %d; %s; without M %.1f ms)\n",
            py.jacobi_min_ms, py.jacobi_ms, py.jacobi_min_ms / py.iterations, py.iterations,
            py.version.c_str(), py.none_ms);
        std::printf("  rlx / SciPy = %.2fx best, %.2fx median (target <= 1.0x)\n\n",
                    t.min * 1e3 / py.jacobi_min_ms, t.median * 1e3 / py.jacobi_ms);
      } else {
        std::printf(
            "  SciPy  n/a (python3 with scipy failed; RLX_PYTHON picks the interpreter)\n\n");
      }
    }

    // spmv against the copy bandwidth, best against best (both are bandwidth probes).
    Graph mg;
    sp::Csr M = sp::input(mg, "A", a);
    mg.output(sp::spmv(M, mg.input("b", {DType::f32, {n}})), "y");
    auto mv = compile(mg, o);
    // The three alternate, so that all see the same machine (its other load included).
    Copy copy(size_t(256) << 20, threads);
    Read read{copy};
    std::vector<double> t_mv, t_copy, t_read;
    for (int r = 0; r < 2 + o.runs * 4; ++r) {
      auto t_mv_one = measure([&] { out = mv.run(in); }, 0, 1);
      auto t_copy_one = measure(copy, 0, 1);
      auto t_read_one = measure(read, 0, 1);
      if (r < 2) continue;  // warm-up
      t_mv.push_back(t_mv_one.min);
      t_copy.push_back(t_copy_one.min);
      t_read.push_back(t_read_one.min);
    }
    std::sort(t_mv.begin(), t_mv.end());
    std::sort(t_copy.begin(), t_copy.end());
    std::sort(t_read.begin(), t_read.end());
    double bytes = double(nnz) * 8 + double(n + 1) * 4 + double(n) * 8;
    double gbs = bytes / t_mv.front() / 1e9, copy_gbs = copy.bytes() / t_copy.front() / 1e9;
    std::printf(
        "spmv f32: %.3f / %.3f ms, %.1f GB/s of %.0f MB; parallel copy %.1f GB/s: %.0f%% "
        "of it (target >= 70%%)\n",
        t_mv.front() * 1e3, t_mv[t_mv.size() / 2] * 1e3, gbs, bytes / 1e6, copy_gbs,
        100 * gbs / copy_gbs);
    // The target is against the copy; the read-only stream is reported next to it.
    double read_gbs = read.bytes() / t_read.front() / 1e9;
    std::printf("  (a parallel read-only stream: %.1f GB/s; spmv is %.0f%% of it)\n", read_gbs,
                100 * gbs / read_gbs);
    // The kernel's own floor: the same spmv on a 256 x 256 grid, whose 2.6 MB stay in cache,
    // scaled to this matrix's nonzeros (memory free). Where this floor is above the time the
    // copy's bandwidth allows, the spmv is bound by the cores' work, not by memory.
    sp::SparseMatrix small = sp::poisson2d(256, DType::f32, DType::i32);
    Graph sg;
    sp::Csr S = sp::input(sg, "A", small);
    sg.output(sp::spmv(S, sg.input("b", {DType::f32, {small.rows}})), "y");
    auto smv = compile(sg, o);
    rlx::TensorMap sin{{"A.values", small.values},
                       {"A.col_idx", small.col_idx},
                       {"A.row_ptr", small.row_ptr},
                       {"b", Tensor::full(DType::f32, {small.rows}, 1.0)}};
    auto ts = measure([&] { out = smv.run(sin); }, 20, 50 + o.runs * 40);
    double ns_per_nnz = ts.min * 1e9 / double(small.nnz()), floor_ms = ns_per_nnz * nnz * 1e-6;
    std::printf(
        "  in cache (256^2 grid): %.3f ns a nonzero on %d threads, so this spmv cannot beat "
        "%.3f ms (%.0f%% of the copy) with memory free\n",
        ns_per_nnz, threads, floor_ms, 100 * bytes / (floor_ms * 1e-3) / 1e9 / copy_gbs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-bench-sparse: %s\n", e.what());
    return 1;
  }
  return 0;
}
