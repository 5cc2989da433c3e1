// rlx-bench-fusion: elementwise fusion against the memory bandwidth it is bound by.
//
//   sigmoid chain:  y = relu(sigmoid(x * a + b) * x - c)    (6 ops)
//   affine chain:   y = relu((x * a + b) * x - c) * a       (6 ops, no transcendental)
//
// x: 16M f32, a, b, c: f32 scalars; each compiled with opt_level 0 (six kernels, five
// intermediate tensors) and 2 (one fused region), next to the limit: a parallel memcpy of
// the bytes the fused kernel must move (one read and one write of 64 MB) on as many
// threads. Also shown: the same chain as a hand-written loop over the same math (what
// generated code would run), the best a fused kernel could do per element. Per thread count:
// best-of-N times (the machine may be shared; the best run is the one least disturbed), speedup,
// and fused / limit (1 = at the bandwidth limit). Targets: speedup >= 4, fused / limit <= 1.3.
// Usage: rlx-bench-fusion [--quick] [--threads N,M,…] [--size N]
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "backend/cpu/elementwise_math.h"
#include "bench.h"
#include "rlx/rlx.h"

using namespace rlx;
using rlx::bench::measure;

namespace {

struct Options {
  int runs = 20;
  std::vector<int> threads = {1, 2};
  int64_t n = int64_t(1) << 24;
};

Tensor random_f32(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::empty(DType::f32, std::move(shape));
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

std::unique_ptr<Graph> chain(int64_t n, bool sigmoid_chain) {
  auto g = std::make_unique<Graph>("fusion_bench");
  Value x = g->input("x", {DType::f32, {n}});
  Value a = g->input("a", {DType::f32, {}});
  Value b = g->input("b", {DType::f32, {}});
  Value c = g->input("c", {DType::f32, {}});
  if (sigmoid_chain)
    g->output(relu(sigmoid(x * a + b) * x - c), "y");
  else
    g->output(relu((x * a + b) * x - c) * a, "y");
  return g;
}

// Seconds of the best parallel memcpy of `bytes` on `threads` threads (one read, one
// write of each byte).
double copy_seconds(const Tensor& src, Tensor& dst, int threads, int runs) {
  const char* s = static_cast<const char*>(src.data());
  char* d = static_cast<char*>(dst.data());
  int64_t bytes = int64_t(src.nbytes()), chunk = 1 << 20;
  int64_t chunks = (bytes + chunk - 1) / chunk;
  auto copy = [&] {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < chunks; ++i)
      std::memcpy(d + i * chunk, s + i * chunk, size_t(std::min(chunk, bytes - i * chunk)));
  };
  return measure(copy, 2, runs).min;
}

// The chain as one hand-written loop (with rlx's vectorisable sigmoid).
double hand_seconds(bool sigmoid_chain, const Tensor& x, Tensor& y, float a, float b, float c,
                    int threads, int runs) {
  const float* px = x.data_as<float>();
  float* py = y.data_as<float>();
  int64_t n = x.numel();
  auto loop = [&] {
    if (sigmoid_chain) {
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t i = 0; i < n; ++i) {
        float v = cpu::fm::sigmoid(px[i] * a + b) * px[i] - c;
        py[i] = v < 0.f ? 0.f : v;
      }
    } else {
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t i = 0; i < n; ++i) {
        float v = (px[i] * a + b) * px[i] - c;
        py[i] = (v < 0.f ? 0.f : v) * a;
      }
    }
  };
  return measure(loop, 2, runs).min;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const float *pa = a.data_as<float>(), *pb = b.data_as<float>();
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, double(std::fabs(pa[i] - pb[i])));
  return worst;
}

int parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick") {
      o.runs = 5;
    } else if (arg == "--threads" && i + 1 < argc) {
      o.threads.clear();
      for (char* s = argv[++i]; *s;) {
        o.threads.push_back(int(std::strtol(s, &s, 10)));
        if (*s == ',') ++s;
      }
    } else if (arg == "--size" && i + 1 < argc) {
      o.n = std::strtoll(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--threads N,M,...] [--size N]\n", argv[0]);
      return arg == "--help" ? 0 : 1;
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, o); rc >= 0) return rc;
  try {
    Tensor x = random_f32({o.n}, 1), scratch = Tensor::empty(DType::f32, {o.n});
    const float a = 0.75f, b = -0.25f, c = 0.1f;
    TensorMap in = {{"x", x},
                    {"a", Tensor::full(DType::f32, {}, a)},
                    {"b", Tensor::full(DType::f32, {}, b)},
                    {"c", Tensor::full(DType::f32, {}, c)}};
    double mb = double(x.nbytes()) / 1e6;
    std::printf(
        "rlx %s elementwise fusion: 6-op chains on x: %lld f32 (%.0f MB), best of %d "
        "runs\n",
        kVersion, static_cast<long long>(o.n), mb, o.runs);
    std::printf("limit: parallel memcpy of %.0f MB (one read + one write), best of %d\n\n", mb,
                o.runs);
    std::printf("%-37s  %7s  %10s  %8s  %7s  %8s  %8s  %13s  %s\n", "chain", "threads",
                "unfused ms", "fused ms", "speedup", "limit ms", "hand ms", "fused / limit",
                "check");
    bool ok = true;
    for (bool sig : {true, false}) {
      auto g = chain(o.n, sig);
      const char* name = sig ? "relu(sigmoid(x * a + b) * x - c)" : "relu((x * a + b) * x - c) * a";
      for (int t : o.threads) {
        CompileOptions unfused_o, fused_o;
        unfused_o.threads = fused_o.threads = t;
        unfused_o.opt_level = 0;
        fused_o.opt_level = 2;
        CompiledGraph unfused = Session().compile(*g, unfused_o);
        CompiledGraph fused = Session().compile(*g, fused_o);
        int regions = 0;
        for (const Node& n : fused.lowered().nodes()) regions += n.op_name() == "fused_elementwise";
        TensorMap yu, yf;
        double tu = measure([&] { yu = unfused.run(in); }, 2, o.runs).min;
        double tf = measure([&] { yf = fused.run(in); }, 2, o.runs).min;
        double tl = copy_seconds(x, scratch, t, o.runs);
        double th = hand_seconds(sig, x, scratch, a, b, c, t, o.runs);
        double diff = max_abs_diff(yu.at("y"), yf.at("y"));
        bool good = regions == 1 && diff <= 1e-6;
        ok = ok && good;
        std::printf(
            "%-37s  %7d  %10.2f  %8.2f  %6.2fx  %8.2f  %8.2f  %13.2f  %s\n", name, t, tu * 1e3,
            tf * 1e3, tu / tf, tl * 1e3, th * 1e3, tf / tl,
            good ? "ok" : str_cat("WRONG (", regions, " regions, max diff ", diff, ")").c_str());
      }
    }
    std::printf("\nspeedup: unfused / fused (target >= 4); fused / limit: target <= 1.3.\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-bench-fusion: %s\n", e.what());
    return 1;
  }
}
