// rlx-bench-llm-matvec: quant_matmul (one-node graphs, as a model runs them) on the weight
// shapes of the `small` (134 M) and `1b` (1.1 B) llama configs of ../shared/tools/llm, for
// f16 / q8_0 / q4_0 / q4_k / q6_k weights:
//  - decode (one activation row): time, GB/s of weight bytes, and that as a fraction of a
//    2-thread read from memory measured in the same run (decode is memory-bound: 1.0 is
//    the limit). Each shape cycles through copies of its weights filling 256 MB, so that every
//    run reads them from memory, as a model does. Per model, the sum over one token's
//    matrices (layers × per-layer shapes + the output projection) gives the matmul share of
//    a token and its bandwidth;
//  - prefill (512 rows): GFLOP/s of the many-row paths (RLX_QMM_PATH): the int8 GEMM of
//    4-bit weights, decoded panels through sgemm and the integer dots tiled over the rows.
// Best-of-N times (the machine may be shared; the best run is the least disturbed).
// Usage: rlx-bench-llm-matvec [--quick] [--threads N] [--no-prefill] [--only TYPE] [--hot]
// (--hot: decode reruns one copy of each matrix, from the caches where it fits: the
// kernel's compute limit, not the memory's.)
//
// llama.cpp's side: `llama-bench -m M.gguf -p 512 -n 128 -t 2` on the same shapes
// (make_gguf.py --config small|1b --type T); its tg128 tokens/s times the bytes of the
// weights read per token is its effective bandwidth, comparable to the per-model lines.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rlx/quant.h"
#include "rlx/rlx.h"
#include "rlx/session.h"
#include "rlx/settings.h"

using namespace rlx;

namespace {

struct Options {
  bool quick = false, prefill = true, hot = false;
  int threads = 2;
  std::string only;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double best_of(F&& f, int runs, double budget_s = 2.0) {
  f();  // warm-up
  double best = 1e30, start = now();
  for (int i = 0; i < runs && (i < 3 || now() - start < budget_s); ++i) {
    double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

// Read bandwidth: `threads` threads sum 8 MB slices of a 512 MB buffer (far beyond the
// caches), each run the next slice; bytes / s of the best run. (Slices of the size of a
// large weight matrix: the best of many short runs, as the matrices are timed.)
double read_bandwidth(int threads, int runs) {
  const int64_t n = int64_t(1) << 27, slice = int64_t(1) << 21;  // floats
  std::vector<float> buf(size_t(n), 1.f);
  volatile float sink = 0;
  int64_t next = 0;
  double t = best_of(
      [&] {
        const float* p = buf.data() + (next++ % (n / slice)) * slice;
        float s = 0;
#pragma omp parallel num_threads(threads) reduction(+ : s)
        {
          // 32 independent lanes: the compiler vectorises them without reassociating.
          float acc[32] = {};
          const int nt = omp_get_num_threads(), id = omp_get_thread_num();
          const int64_t lo = slice / 32 * id / nt * 32, hi = slice / 32 * (id + 1) / nt * 32;
          for (int64_t i = lo; i < hi; i += 32)
            for (int j = 0; j < 32; ++j) acc[j] += p[i + j];
          for (float a : acc) s += a;
        }
        sink = sink + s;
      },
      runs, 4);
  return double(slice) * 4 / t;
}

// The rows per group rlx::llm holds w in on this CPU (1: plain).
int grouped(const Tensor& w) {
  const int rows = quant::cpu_layout_rows(w.dtype());
  return w.shape()[0] % rows == 0 ? rows : 1;
}

// Weights [n, k] of dtype t: 64 rows of N(0, 0.02) values encoded with the reference
// quantizer, repeated (the values do not change the speed; encoding all would be slow);
// interleaved where the type has that form, as rlx::llm loads them.
Tensor make_weights(DType t, int64_t n, int64_t k) {
  const int64_t base = std::min<int64_t>(n, 64);
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 0.02f);
  std::vector<float> v(size_t(base * k));
  for (float& x : v) x = d(rng);
  const size_t rb = dtype_nbytes(t, k);
  std::vector<uint8_t> rows(rb * size_t(base));
  for (int64_t r = 0; r < base; ++r)
    quant::quantize_row(t, v.data() + r * k, rows.data() + r * rb, k);
  Tensor w = Tensor::empty(t, {n, k});
  auto* p = static_cast<uint8_t*>(w.data());
  for (int64_t r = 0; r < n; ++r) std::memcpy(p + r * rb, rows.data() + (r % base) * rb, rb);
  if (grouped(w) == 1) return w;
  Tensor wi = Tensor::empty(t, {n, k});
  quant::interleave(t, grouped(w), w.data(), wi.data(), n, k);
  return wi;
}

Tensor random_x(int64_t m, int64_t k) {
  Tensor x = Tensor::empty(DType::f32, {m, k});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < m * k; ++i) x.data_as<float>()[i] = d(rng);
  return x;
}

// Seconds of the best of `runs` quant_matmul runs of x [m, k] against the weights, each
// run on the next copy of them. (Copies filling more than the last-level cache make each
// run read its weights from memory, as a model's decode does: every matrix once a token.)
double time_matmul(const std::vector<Tensor>& ws, int64_t m, int threads, int runs) {
  const int64_t k = ws[0].shape()[1];
  Graph g("llm_matvec");
  Value xv = g.input("x", {DType::f32, {m, k}});
  Value wv = g.input("w", ws[0].type());
  Attrs a;
  if (grouped(ws[0]) > 1) a.set("layout", quant::layout_name(grouped(ws[0])));
  g.output(op("quant_matmul", {xv, wv}, a), "y");
  CompileOptions o;
  o.threads = threads;
  CompiledGraph cg = Session(Device::cpu()).compile(g, o);
  std::vector<std::vector<Tensor>> ins;
  Tensor x = random_x(m, k);
  for (const Tensor& w : ws) ins.push_back({x, w});
  // Each run takes the next copy; the best run (the least disturbed) still read its
  // weights from memory.
  size_t next = 0;
  return best_of([&] { cg.run(std::span<const Tensor>(ins[next++ % ins.size()])); },
                 std::max<int>(runs, int(2 * ins.size())));
}

// Copies of w that together hold at least `bytes` (at least one).
std::vector<Tensor> copies(const Tensor& w, size_t bytes) {
  std::vector<Tensor> out = {w};
  while (out.size() * w.nbytes() < bytes) out.push_back(w.clone());
  return out;
}

struct MatShape {
  int64_t n, k, count;  // count: matrices of this shape per token
  const char* what;
};
struct Model {
  const char* name;
  int layers;
  std::vector<MatShape> shapes;  // per layer; the output projection has count -1
};

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      opt.quick = true;
    else if (a == "--hot")
      opt.hot = true;
    else if (a == "--no-prefill")
      opt.prefill = false;
    else if (a == "--threads" && i + 1 < argc)
      opt.threads = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc)
      opt.only = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--threads N] [--no-prefill] [--only TYPE] [--hot]\n",
                   argv[0]);
      return 2;
    }
  }
  const int runs = opt.quick ? 30 : 300;
  const Model models[] = {
      {"small",
       12,
       {{768, 768, 4, "attn q/k/v/o"},
        {2048, 768, 2, "ffn gate/up"},
        {768, 2048, 1, "ffn down"},
        {32000, 768, -1, "output"}}},
      {"1b",
       22,
       {{2048, 2048, 2, "attn q/o"},
        {256, 2048, 2, "attn k/v"},
        {5632, 2048, 2, "ffn gate/up"},
        {2048, 5632, 1, "ffn down"},
        {32000, 2048, -1, "output"}}},
  };
  const DType types[] = {DType::f16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k};

  const double bw = read_bandwidth(opt.threads, opt.quick ? 200 : 1000);
  std::printf("rlx-bench-llm-matvec: %d threads; %d-thread read bandwidth %.1f GB/s\n\n",
              opt.threads, opt.threads, bw / 1e9);

  std::printf("decode (1 row): quant_matmul time, weight GB/s, fraction of the read bandwidth\n");
  std::printf("%-6s %-5s %-14s %-12s %10s %9s %7s\n", "model", "type", "shape n x k", "matrix",
              "us", "GB/s", "/read");
  for (const Model& md : models)
    for (DType t : types) {
      if (!opt.only.empty() && opt.only != dtype_name(t)) continue;
      double token_s = 0, token_bytes = 0;
      for (const MatShape& s : md.shapes) {
        Tensor w = make_weights(t, s.n, s.k);
        double sec = time_matmul(copies(w, opt.hot ? 0 : size_t(256) << 20), 1, opt.threads, runs);
        double bytes = double(w.nbytes());
        std::printf("%-6s %-5s %5lldx%-8lld %-12s %10.1f %9.1f %7.2f\n", md.name,
                    std::string(dtype_name(t)).c_str(), (long long)s.n, (long long)s.k, s.what,
                    sec * 1e6, bytes / sec / 1e9, bytes / sec / bw);
        double times = s.count < 0 ? 1 : double(s.count * md.layers);
        token_s += times * sec;
        token_bytes += times * bytes;
      }
      std::printf(
          "%-6s %-5s per token: matmuls %.2f ms (%.0f tok/s ceiling), %.1f MB, %.1f GB/s = "
          "%.2f of read\n\n",
          md.name, std::string(dtype_name(t)).c_str(), token_s * 1e3, 1 / token_s,
          token_bytes / 1e6, token_bytes / token_s / 1e9, token_bytes / token_s / bw);
    }

  if (!opt.prefill) return 0;
  std::printf(
      "prefill (512 rows): GFLOP/s of the many-row paths (settings().qmm_path): the int8 GEMM "
      "(the default for q4_0 / q4_k), decoded panels + sgemm (q5_0 … q8_0, f16) and the tiled "
      "integer dots (the other K-quants); best/panels = the default's speed over sgemm's\n");
  std::printf("%-6s %-5s %-14s %8s %8s %8s %12s\n", "model", "type", "shape n x k", "int8",
              "panels", "dots", "best/panels");
  const int64_t m = 512;
  auto gflops = [&](const Tensor& w, const char* path, double flop) {
    settings().qmm_path = path;
    const double t = time_matmul({w}, m, opt.threads, opt.quick ? 2 : 5);
    settings().qmm_path = "auto";
    return flop / t / 1e9;
  };
  for (const Model& md : models)
    for (DType t : types) {
      if (!opt.only.empty() && opt.only != dtype_name(t)) continue;
      for (const MatShape& s : md.shapes) {
        if (s.count < 0) continue;  // the output projection runs on the last row only
        Tensor w = make_weights(t, s.n, s.k);
        const double flop = 2.0 * double(m) * double(s.n) * double(s.k);
        const double int8 = gflops(w, "int8", flop), panels = gflops(w, "panels", flop),
                     dots = gflops(w, "dots", flop);
        std::printf("%-6s %-5s %5lldx%-8lld %8.1f %8.1f %8.1f %12.2f\n", md.name,
                    std::string(dtype_name(t)).c_str(), (long long)s.n, (long long)s.k, int8,
                    panels, dots, std::max({int8, dots}) / panels);
      }
    }
  return 0;
}
