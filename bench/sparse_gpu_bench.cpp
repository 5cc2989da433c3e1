// rlx-bench-sparse-gpu: libs/sparse on the GPU against PyTorch and against the device.
//   CG      sparse.cg_solve (Jacobi) on the 2-D 5-point Poisson matrix of a 1024 x 1024 grid
//           (1,048,576 unknowns), f32, exactly 100 iterations on the GPU: ms per iteration,
//           next to PyTorch's CSR CG (bench/sparse_gpu_torch.py: torch.sparse_csr_tensor
//           and a hand-written CG loop, run by this program) and to the bandwidth limit:
//           the bytes one iteration of rlx's kernels must move over a device-to-device
//           copy's bandwidth measured in the same run.
//   spmv    sparse.spmv (rlx's kernel, which checks the pattern in the same pass) on the
//           same matrix, a whole run of its graph: GB/s of the bytes it must move.
// Usage: rlx-bench-sparse-gpu [--grid N] [--iters N] [--runs N] [--no-torch]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"
#include "rlx_sparse/sparse.h"

using rlx::Device;
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
  int runs = 10;
  bool torch = true;
};

struct Torch {
  double ms = -1, min_ms = -1;  // per iteration
  double spmv_ms = -1, spmv_min_ms = -1;
  std::string version;
};

Torch run_torch(const Options& o) {
  Torch r;
  const char* py = std::getenv("RLX_PYTHON");
  std::string cmd = std::string(py ? py : "python3") + " bench/sparse_gpu_torch.py --grid " +
                    std::to_string(o.grid) + " --iters " + std::to_string(o.iters) + " --runs " +
                    std::to_string(o.runs) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char line[512], v1[64], v2[64];
  while (std::fgets(line, sizeof line, p)) {
    if (std::sscanf(line, "RESULT torch_cg %lf %lf", &r.ms, &r.min_ms) == 2) continue;
    if (std::sscanf(line, "RESULT torch_spmv %lf %lf", &r.spmv_ms, &r.spmv_min_ms) == 2) continue;
    if (std::sscanf(line, "VERSION torch %63s %63s", v1, v2) == 2)
      r.version = rlx::str_cat("PyTorch ", v1, ", CUDA ", v2);
    else
      std::fputs(line, stderr);
  }
  pclose(p);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--grid") && i + 1 < argc) {
      o.grid = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      o.iters = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      o.runs = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--no-torch")) {
      o.torch = false;
    } else {
      std::fprintf(stderr, "usage: %s [--grid N] [--iters N] [--runs N] [--no-torch]\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 1;
    }
  }
  if (!rlx::cuda::available()) {
    std::printf("rlx-bench-sparse-gpu: no CUDA device here; nothing measured\n");
    return 0;
  }
  try {
    sp::register_ops();
    rlx::register_cuda_kernels();
    const Device gpu = Device::cuda();
    sp::SparseMatrix a = sp::poisson2d(o.grid, DType::f32, DType::i32);
    const int64_t n = a.rows, nnz = a.nnz();
    std::printf(
        "rlx %s sparse GPU benchmark: Poisson %lldx%lld grid: %lld unknowns, %lld nonzeros, "
        "f32 values, i32 indices; times: median (best) of %d runs\n\n",
        rlx::kVersion, (long long)o.grid, (long long)o.grid, (long long)n, (long long)nnz, o.runs);
    rlx::TensorMap in{{"A.values", a.values.to(gpu)},
                      {"A.col_idx", a.col_idx.to(gpu)},
                      {"A.row_ptr", a.row_ptr.to(gpu)},
                      {"b", Tensor::full(DType::f32, {n}, 1.0).to(gpu)}};
    // CG run for exactly `iters` iterations (tol 0): its time, the outputs.
    rlx::TensorMap out;
    auto cg_run = [&](int iters, bool report) {
      Graph g;
      sp::Csr A = sp::input(g, "A", a);
      Value b = g.input("b", {DType::f32, {n}});
      sp::IterativeOptions co;
      co.tol = 1e-30;
      co.max_iter = iters;
      sp::Solution s = sp::cg_solve(A, b, co);
      g.output(s.iterations, "iterations");
      g.output(s.residual, "residual");
      auto cg = rlx::Session(gpu).compile(g);
      if (report) std::printf("%s\n", cg.report().str().c_str());
      return measure(
          [&] {
            out = cg.run(in);
            rlx::cuda::synchronize();
          },
          2, o.runs);
    };
    // Twice the iterations as well: the difference is the iterations' own cost, the rest
    // the solve's fixed cost (the pattern check, Jacobi setup, the true residual).
    auto t2 = cg_run(2 * o.iters, false);
    auto t = cg_run(o.iters, true);
    int iters = out.at("iterations").to(Device::cpu()).to_vector<int32_t>()[0];
    double per = t.median * 1e3 / iters, per_min = t.min * 1e3 / iters;
    double slope = (t2.median - t.median) * 1e3 / o.iters;

    // The device's copy bandwidth (read + write), 1 GiB.
    Tensor src = Tensor::full(DType::u8, {int64_t(1) << 30}, 1).to(gpu);
    auto tc = measure(
        [&] {
          Tensor d = src.clone();
          rlx::cuda::synchronize();
        },
        2, o.runs);
    double copy_gbs = 2.0 * double(src.nbytes()) / tc.min / 1e9;
    // One CG iteration, rlx's one kernel: A (values, columns, row pointers); the old r, q,
    // p, the Jacobi diagonal and x read, the new r, p, q and x written: 9 vector passes.
    double bytes = 8.0 * double(nnz) + 4.0 * double(n + 1) + 9 * 4.0 * double(n);
    double limit = bytes / (copy_gbs * 1e9) * 1e3;

    std::printf("CG (Jacobi), %d iterations, ms per iteration:\n", iters);
    std::printf("  rlx            %7.4f (%7.4f)  final relative residual %.3g\n", per, per_min,
                out.at("residual").to(Device::cpu()).to_doubles()[0]);
    Torch py;
    if (o.torch) {
      py = run_torch(o);
      if (py.ms > 0)
        std::printf("  PyTorch CSR    %7.4f (%7.4f)  %s; rlx is %.2fx faster\n", py.ms, py.min_ms,
                    py.version.c_str(), py.ms / per);
      else
        std::printf(
            "  PyTorch CSR    n/a (python3 with torch + CUDA failed; RLX_PYTHON picks it)\n");
    }
    std::printf("  bandwidth      %7.4f            %.1f MB an iteration at %.0f GB/s (copy)\n",
                limit, bytes / 1e6, copy_gbs);
    std::printf(
        "  rlx's iterations alone %.4f ms each (from %d and %d iterations); %.3f ms a solve "
        "besides\n",
        slope, o.iters, 2 * o.iters, t.median * 1e3 - slope * o.iters);
    std::printf("  target <= 0.04 ms/iteration: %s\n\n", per <= 0.04 ? "met" : "NOT met");

    Graph mg;
    sp::Csr M = sp::input(mg, "A", a);
    mg.output(sp::spmv(M, mg.input("b", {DType::f32, {n}})), "y");
    auto mv = rlx::Session(gpu).compile(mg);
    auto tm = measure(
        [&] {
          out = mv.run(in);
          rlx::cuda::synchronize();
        },
        2, o.runs * 4);
    double mv_bytes = double(nnz) * 8 + double(n + 1) * 4 + double(n) * 8;
    std::printf(
        "spmv f32 (a run, the pattern checked in the same pass): %.4f ms (%.4f), %.0f GB/s of "
        "%.0f MB: "
        "%.0f%% of the copy's\n",
        tm.median * 1e3, tm.min * 1e3, mv_bytes / tm.min / 1e9, mv_bytes / 1e6,
        100 * mv_bytes / tm.min / 1e9 / copy_gbs);
    // A run's median against one PyTorch A @ x timed by CUDA events (no host overhead on
    // its side).
    if (py.spmv_ms > 0)
      std::printf("  PyTorch CSR A @ x: %.4f ms (%.4f); rlx is %.2fx faster\n", py.spmv_ms,
                  py.spmv_min_ms, py.spmv_ms / (tm.median * 1e3));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-bench-sparse-gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
