// rlx-bench-amp: f32 against 16-bit compute on this CPU.
//
// - GEMMs (1024^3, and a BERT-base FFN linear [B*128, 768] x [768, 3072] + bias) with
//   f32 operands, with bf16 / f16 operands (the kernel alone), and the f32 graph compiled
//   with auto_bf16 (the kernel plus the casts the pass adds);
// - the demo GPT's forward and one BERT-base encoder layer's forward, f32 against
//   auto_bf16.
//
//   rlx-bench-amp [--threads N] [--runs R] [--quick]
//
// On a shared box, OMP_WAIT_POLICY=passive keeps spinning OpenMP threads from swamping
// the timings. Measured on the 2-core AMD EPYC (avx512_bf16; oneDNN 2.6), 1 thread, the
// box loaded by other builds: 1024^3 f32 39 ms, bf16 operands 20 ms (x1.96), the f32
// graph under auto_bf16 23 ms (x1.66, the casts included); BERT-base FFN linear
// [512,768]x[768,3072]+b: f32 47 ms, bf16 23 ms (x2.0), auto_bf16 26 ms (x1.8); f16 has
// no native GEMM here (widened to f32): x0.6-0.9. Forward passes under auto_bf16: the demo
// GPT (d 96) x1.0, a BERT-base layer (4 x 128) x1.8.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "model.h"
#include "rlx/rlx.h"

using namespace rlx;

namespace {

struct Options {
  int threads = int(std::thread::hardware_concurrency());
  int runs = 10;
  int64_t layer_batch = 4;
};

// The median time of one run of g (params set to `params`, inputs `inputs`), in ms.
double time_ms(const Graph& g, const TensorMap& params, const TensorMap& inputs, Precision p,
               const Options& o, int warmup = 2) {
  CompileOptions co;
  co.threads = o.threads;
  co.precision = p;
  CompiledGraph cg = Session().compile(g, co);
  for (const auto& [name, t] : params) cg.set_param(name, t);
  auto s = bench::measure([&] { cg.run(inputs); }, warmup, o.runs);
  return s.median * 1e3;
}

// Random values of a param or input's type (static dims).
Tensor random_like(Value v, uint64_t seed, double scale) {
  std::vector<int64_t> shape;
  for (const Dim& d : v.shape()) shape.push_back(d.value());
  return train::normal(shape, 0, scale, seed, v.dtype());
}

void fill(const Graph& g, TensorMap& params, TensorMap& inputs, double scale) {
  uint64_t seed = 1;
  for (const Arg& a : g.args())
    (a.kind == ArgKind::param ? params : inputs)[a.name] = random_like(a.value, seed++, scale);
}

// out = x w (+ b) in dtype dt.
std::unique_ptr<Graph> linear(int64_t m, int64_t k, int64_t n, bool bias, DType dt) {
  auto g = std::make_unique<Graph>("linear");
  Value x = g->input("x", {dt, {m, k}});
  Value y = matmul(x, g->param("w", {dt, {k, n}}));
  if (bias) y = y + g->param("b", {dt, {n}});
  g->output(y, "y");
  return g;
}

void gemm_rows(const char* title, int64_t m, int64_t k, int64_t n, bool bias, const Options& o) {
  double flop = 2.0 * double(m) * double(n) * double(k);
  auto row = [&](const char* what, DType dt, Precision p, double base) {
    auto g = linear(m, k, n, bias, dt);
    TensorMap params, inputs;
    fill(*g, params, inputs, 1.0);
    double ms = time_ms(*g, params, inputs, p, o);
    std::printf("  %-34s %9.2f ms %8.1f GFLOP/s", what, ms, flop / ms * 1e-6);
    if (base > 0) std::printf("   x%.2f vs f32", base / ms);
    std::printf("\n");
    return ms;
  };
  std::printf("%s: [%lld, %lld] x [%lld, %lld]%s\n", title, (long long)m, (long long)k,
              (long long)k, (long long)n, bias ? " + bias" : "");
  double f32 = row("f32", DType::f32, Precision::f32, 0);
  row("bf16 operands (kernel only)", DType::bf16, Precision::f32, f32);
  row("f16 operands (kernel only)", DType::f16, Precision::f32, f32);
  row("f32 graph, auto_bf16 (with casts)", DType::f32, Precision::auto_bf16, f32);
  row("f32 graph, auto_f16 (with casts)", DType::f32, Precision::auto_f16, f32);
}

void model_rows(const char* title, const Graph& g, TensorMap params, const TensorMap& inputs,
                const Options& o) {
  double f32 = time_ms(g, params, inputs, Precision::f32, o);
  double bf = time_ms(g, params, inputs, Precision::auto_bf16, o);
  std::printf("%s forward\n  %-34s %9.2f ms\n  %-34s %9.2f ms   x%.2f vs f32\n", title, "f32", f32,
              "auto_bf16", bf, f32 / bf);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      o.runs = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--quick")) {
      o.runs = 3;
      o.layer_batch = 1;
    } else {
      std::fprintf(stderr, "usage: rlx-bench-amp [--threads N] [--runs R] [--quick]\n");
      return 2;
    }
  }
  std::printf("rlx-bench-amp: %d threads, median of %d runs\n\n", o.threads, o.runs);
  gemm_rows("GEMM 1024^3", 1024, 1024, 1024, false, o);
  gemm_rows("BERT-base FFN linear", o.layer_batch * 128, 768, 3072, true, o);

  {
    demo::GptConfig cfg{.vocab = 63, .context = demo::kSeq};
    auto g = demo::build_gpt(cfg, /*with_loss=*/false);
    std::vector<int64_t> tokens(size_t(demo::kBatch * demo::kSeq));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t(i * 7 % 63);
    TensorMap inputs{{"tokens", Tensor::from_vector(tokens, {demo::kBatch, demo::kSeq})},
                     {"pos", demo::positions(demo::kSeq)}};
    std::printf("\n");
    model_rows("demo GPT (d 96, 4 heads, 2 blocks, 16 x 64)", *g, demo::init_params(*g, 2, 0),
               inputs, o);
  }
  {
    const int64_t seq = 128, d = 768;
    auto g = std::make_unique<Graph>("bert_layer");
    Value x = g->input("x", {DType::f32, {o.layer_batch, seq, d}});
    g->output(demo::transformer_block(x, "layer", 12, /*causal=*/false), "y");
    TensorMap inputs{{"x", train::normal({o.layer_batch, seq, d}, 0, 1, 5)}};
    std::printf("\n");
    model_rows(("BERT-base layer (" + std::to_string(o.layer_batch) + " x 128)").c_str(), *g,
               demo::init_params(*g, 1, 0), inputs, o);
  }
  return 0;
}
