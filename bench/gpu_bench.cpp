// rlx-bench-gpu: rlx's CUDA backend next to PyTorch on the same GPU, in one run.
//
//   gemm      bf16 [8192 x 8192] @ [8192 x 8192] (f32 accumulate): TFLOP/s
//   gemm_f32  f32 products (GPT-2's and square ones) as cuBLAS SGEMM and on the tensor
//             cores (cuda::set_f32_matmul), each against the H200's f32 peak (67 TFLOP/s)
//   chain     y = relu(sigmoid(x * a + b) * x - c) on 64M f32 (6 ops): ms, against the
//             bandwidth limit (one device copy of the bytes a fused kernel must move,
//             measured here) — unfused until the NVRTC regions land
//   attention causal, [8, 12, 1024, 64] bf16 forward
//   attention also in f32 (what the f32 GPT-2 forward runs), and its bf16 backward
//   train     GPT-2 small's AMP-bf16 train step with AdamW on 8 x 1024 tokens
//   fft       fft / ifft / rfft / irfft of 1024 x 4096, fft of 4096 x 1009 (a prime), fft2 of
//             64 x 256 x 256, rfft2 of 16 x 1024 x 1024, and the stft of 64 x 10 s of 16 kHz
//             audio (n_fft 400, hop 160, hann, centred): against torch.fft / torch.stft
//   gpt2      GPT-2 small (12 layers, d 768, 12 heads, vocab 50304; the demo's model,
//             examples/demo) forward on 8 x 1024 tokens to logits, f32 and auto-bf16
//
// Each rlx case is a compiled graph; its inputs live on the GPU. Times are the median of
// --runs runs after warm-up, synchronised. PyTorch's numbers come from bench/gpu_torch.py
// (eager and torch.compile) when python3 with torch and CUDA is there.
// Usage: rlx-bench-gpu [--runs N] [--no-torch] [--only
// gemm|gemm_f32|chain|fft|attention|gpt2|train] (RLX_BENCH_DISABLE=pass,... compiles the train step
// without those passes.)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench.h"
#include "model.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"
#include "rlx/train.h"

using namespace rlx;

namespace {

Tensor random_on_gpu(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double& x : v) x = u(rng);
  return Tensor::from_doubles(dt, std::move(shape), v).to(Device::cuda());
}

// Uniform values in [-1, 1) for both parts.
Tensor random_complex_on_gpu(std::vector<int64_t> shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(2 * n));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : v) x = u(rng);
  return Tensor::from_data(DType::c64, std::move(shape), v.data()).to(Device::cuda());
}

double median_ms(CompiledGraph& cg, const std::vector<Tensor>& in, int runs) {
  auto st = bench::measure(
      [&] {
        cg.run(std::span<const Tensor>(in));
        cuda::synchronize();
      },
      3, runs);
  return st.median * 1e3;
}

// "name value" lines from the torch script.
std::map<std::string, double> torch_times(int runs, const std::string& only) {
  std::map<std::string, double> out;
  std::string cmd = "python3 bench/gpu_torch.py --runs " + std::to_string(runs) +
                    (only.empty() ? "" : " --only " + only) + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char name[128];
  double v;
  while (std::fscanf(p, "%127s %lf", name, &v) == 2) out[name] = v;
  pclose(p);
  return out;
}

void row(const char* what, double rlx_ms, const std::map<std::string, double>& torch,
         const std::string& key, const char* extra) {
  auto it = torch.find(key), ct = torch.find(key + "_compiled");
  std::printf("%-34s rlx %9.3f ms", what, rlx_ms);
  if (it != torch.end())
    std::printf("   torch %9.3f ms (rlx/torch %.2f)", it->second, rlx_ms / it->second);
  if (ct != torch.end())
    std::printf("   torch.compile %9.3f ms (rlx/compiled %.2f)", ct->second, rlx_ms / ct->second);
  std::printf("%s\n", extra);
}

// GPT-2 small with GPT-2's own GELU, the tanh form (as in OpenAI's release and HF's
// "gelu_new"); RLX_BENCH_GELU=erf builds the erf form, as this bench did before
// 2026-12-03. bench/gpu_torch.py reads the same variable.
demo::GptConfig gpt2_small() {
  const char* g = std::getenv("RLX_BENCH_GELU");
  return {.vocab = 50304,
          .d_model = 768,
          .heads = 12,
          .layers = 12,
          .context = 1024,
          .gelu_tanh = !(g && std::string_view(g) == "erf")};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  bool torch = true;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--no-torch")) torch = false;
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
  }
  auto want = [&](const char* c) { return only.empty() || only == c; };
  if (!cuda::available()) {
    std::printf("rlx-bench-gpu: no CUDA device here\n");
    return 0;
  }
  std::map<std::string, double> t =
      torch ? torch_times(runs, only) : std::map<std::string, double>{};
  if (torch && t.empty()) std::printf("(no PyTorch numbers: python3 with torch+CUDA not found)\n");
  Session s(Device::cuda());
  char extra[160];

  if (want("gemm")) {  // bf16 GEMM
    const int64_t n = 8192;
    Graph g("gemm");
    Value a = g.input("a", TensorType::parse("bf16[8192,8192]"));
    Value b = g.input("b", TensorType::parse("bf16[8192,8192]"));
    g.output(g.apply("matmul", {a, b})[0]);
    CompiledGraph cg = s.compile(g);
    std::vector<Tensor> in{random_on_gpu(DType::bf16, {n, n}, 1),
                           random_on_gpu(DType::bf16, {n, n}, 2)};
    double ms = median_ms(cg, in, runs);
    double tflops = 2.0 * double(n) * n * n / (ms * 1e-3) / 1e12;
    std::snprintf(extra, sizeof extra, "   %.0f TFLOP/s", tflops);
    row("gemm bf16 8192^3", ms, t, "gemm_bf16", extra);
  }

  if (want("gemm_f32")) {
    struct Shape {
      int64_t m, k, n;
      const char* what;
    };
    const Shape shapes[] = {{8192, 768, 3072, "GPT-2 fc"},
                            {8192, 3072, 768, "GPT-2 proj"},
                            {8192, 768, 2304, "GPT-2 qkv"},
                            {8192, 768, 50304, "GPT-2 logits"},
                            {4096, 4096, 4096, ""},
                            {2048, 2048, 2048, ""},
                            {1024, 1024, 1024, ""},
                            {512, 512, 512, ""},
                            {256, 768, 768, ""},
                            {8192, 64, 8192, ""}};
    for (const Shape& sh : shapes) {
      Graph g("gemm_f32");
      Value a = g.input("a", {DType::f32, to_shape({sh.m, sh.k})});
      Value b = g.input("b", {DType::f32, to_shape({sh.k, sh.n})});
      g.output(g.apply("matmul", {a, b})[0]);
      std::vector<Tensor> in{random_on_gpu(DType::f32, {sh.m, sh.k}, 1),
                             random_on_gpu(DType::f32, {sh.k, sh.n}, 2)};
      double flop = 2.0 * double(sh.m) * double(sh.k) * double(sh.n), ms[2];
      const char* modes[] = {"sgemm", "tc"};
      for (int i = 0; i < 2; ++i) {
        cuda::set_f32_matmul(modes[i]);
        CompiledGraph cg = s.compile(g);
        ms[i] = median_ms(cg, in, runs);
      }
      cuda::set_f32_matmul("auto");
      std::printf(
          "gemm f32 %5lld x %5lld x %5lld %-12s sgemm %8.3f ms (%4.1f TFLOP/s)   "
          "tensor cores %8.3f ms (%4.1f TFLOP/s, %.2fx SGEMM's speed, %.2f of f32 peak)\n",
          (long long)sh.m, (long long)sh.k, (long long)sh.n, sh.what, ms[0], flop / ms[0] * 1e-9,
          ms[1], flop / ms[1] * 1e-9, ms[0] / ms[1], flop / ms[1] * 1e-9 / 67.0);
      if (sh.m == 8192 && sh.k == 768 && sh.n == 3072) {
        std::snprintf(extra, sizeof extra, "   (tensor cores; SGEMM %.3f ms)", ms[0]);
        row("gemm f32 8192x768x3072", ms[1], t, "gemm_f32", extra);
      }
    }
  }

  if (want("chain")) {  // the elementwise chain, against a device copy of what a fused kernel moves
    const int64_t n = int64_t(64) << 20;
    Graph g("chain");
    Value x = g.input("x", TensorType::parse("f32[67108864]"));
    Value a = g.input("a", TensorType::parse("f32[]")),
          b = g.input("b", TensorType::parse("f32[]")),
          c = g.input("c", TensorType::parse("f32[]"));
    auto ap = [&](const char* op, std::vector<Value> v) { return g.apply(op, v)[0]; };
    Value y =
        ap("relu",
           {ap("sub", {ap("mul", {ap("sigmoid", {ap("add", {ap("mul", {x, a}), b})}), x}), c})});
    g.output(y);
    CompiledGraph cg = s.compile(g);
    std::vector<Tensor> in{random_on_gpu(DType::f32, {n}, 3), Tensor::full(DType::f32, {}, 0.5),
                           Tensor::full(DType::f32, {}, 0.1), Tensor::full(DType::f32, {}, 0.2)};
    for (size_t i = 1; i < in.size(); ++i) in[i] = in[i].to(Device::cuda());
    double ms = median_ms(cg, in, runs);
    Graph cp("copy");
    Value cx = cp.input("x", TensorType::parse("f32[67108864]"));
    cp.output(cp.apply("neg", {cx})[0]);  // one read and one write of the same bytes
    CompiledGraph cc = s.compile(cp);
    double limit = median_ms(cc, {in[0]}, runs);
    std::snprintf(extra, sizeof extra, "   limit %.3f ms (rlx/limit %.2f, %.0f GB/s)", limit,
                  ms / limit, 2.0 * 4 * double(n) / (limit * 1e-3) / 1e9);
    row("chain 6 ops 64M f32 (unfused)", ms, t, "chain", extra);
  }

  if (want("fft")) {  // the FFT family on cuFFT, as torch.fft runs it
    struct Case {
      const char* key;
      const char* op;
      const char* input;
      Attrs attrs;
    };
    auto ints = [](std::vector<int64_t> v) { return AttrValue(IntList(std::move(v))); };
    const Case cases[] = {
        {"fft_c64_1024x4096", "fft", "c64[1024,4096]", {}},
        {"ifft_c64_1024x4096", "ifft", "c64[1024,4096]", {}},
        {"rfft_f32_1024x4096", "rfft", "f32[1024,4096]", {}},
        {"irfft_c64_1024x2049", "irfft", "c64[1024,2049]", {{"n", ints({4096})}}},
        {"fft_c64_4096x1009", "fft", "c64[4096,1009]", {}},
        {"fft2_c64_64x256x256", "fft", "c64[64,256,256]", {{"axes", ints({-2, -1})}}},
        {"rfft2_f32_16x1024x1024", "rfft", "f32[16,1024,1024]", {{"axes", ints({-2, -1})}}},
        {"stft_64x160000",
         "stft",
         "f32[64,160000]",
         {{"n_fft", int64_t(400)},
          {"hop_length", int64_t(160)},
          {"center", true},
          {"pad_mode", std::string("reflect")},
          {"onesided", true},
          {"normalized", false}}},
    };
    uint64_t seed = 10;
    for (const Case& c : cases) {
      Graph g(c.key);
      TensorType tt = TensorType::parse(c.input);
      std::vector<Value> args{g.input("x", tt)};
      std::vector<Tensor> in{tt.dtype == DType::c64
                                 ? random_complex_on_gpu(static_sizes(tt.shape), seed++)
                                 : random_on_gpu(tt.dtype, static_sizes(tt.shape), seed++)};
      if (std::string_view(c.op) == "stft") {  // torch.hann_window(400): periodic
        args.push_back(g.input("w", TensorType::parse("f32[400]")));
        std::vector<double> w(400);
        for (size_t i = 0; i < w.size(); ++i)
          w[i] = 0.5 - 0.5 * std::cos(2 * M_PI * double(i) / 400);
        in.push_back(Tensor::from_doubles(DType::f32, {400}, w).to(Device::cuda()));
      }
      g.output(g.apply(c.op, args, c.attrs)[0]);
      CompiledGraph cg = s.compile(g);
      row(c.key, median_ms(cg, in, runs), t, c.key, "");
    }
  }

  if (want("attention")) {  // causal attention forward
    for (DType dt : {DType::bf16, DType::f32}) {
      Graph g("attn");
      TensorType ty{dt, to_shape({8, 12, 1024, 64})};
      Value q = g.input("q", ty), k = g.input("k", ty), v = g.input("v", ty);
      g.output(g.apply("attention", {q, k, v}, {{"mask", "causal"}})[0]);
      CompiledGraph cg = s.compile(g);
      std::vector<Tensor> in;
      for (uint64_t i = 0; i < 3; ++i) in.push_back(random_on_gpu(dt, {8, 12, 1024, 64}, 10 + i));
      double ms = median_ms(cg, in, runs);
      double flops = 4.0 * 8 * 12 * 1024 * 1024 * 64 / 2;  // causal: half the scores
      std::snprintf(extra, sizeof extra, "   %.0f TFLOP/s", flops / (ms * 1e-3) / 1e12);
      bool bf = dt == DType::bf16;
      row(bf ? "attention causal 8x12x1024x64 bf16" : "attention causal 8x12x1024x64 f32", ms, t,
          bf ? "attention" : "attention_f32", extra);
    }
    // The backward (attention_grad: dq, dk, dv from q, k, v, dy), bf16, on [b, h, s, d]
    // and on [b, s, h, d] as projections leave them (layout bshd, the GPT-2 train step's):
    // reading attention_lse's output and statistics, as a train step and PyTorch's backward
    // do, and (bhsd) without them, running the forward again.
    for (const char* layout : {"bhsd", "bshd", "bhsd-recompute"}) {
      bool bshd = std::string(layout) == "bshd", saved = std::string(layout) != "bhsd-recompute";
      std::vector<int64_t> shape =
          bshd ? std::vector<int64_t>{8, 1024, 12, 64} : std::vector<int64_t>{8, 12, 1024, 64};
      Attrs attrs{{"mask", "causal"}, {"layout", bshd ? "bshd" : "bhsd"}};
      TensorType ty{DType::bf16, to_shape(shape)};
      std::vector<Tensor> in;
      for (uint64_t i = 0; i < 4; ++i) in.push_back(random_on_gpu(DType::bf16, shape, 20 + i));
      Graph g("attn_grad");
      Value q = g.input("q", ty), k = g.input("k", ty), v = g.input("v", ty),
            dy = g.input("dy", ty);
      std::vector<Value> args{q, k, v, dy};
      if (saved) {  // y and lse from one forward, made here
        Graph f("attn_lse");
        Value fq = f.input("q", ty), fk = f.input("k", ty), fv = f.input("v", ty);
        for (Value o : f.apply("attention_lse", {fq, fk, fv}, attrs)) f.output(o);
        std::vector<Tensor> fwd = s.compile(f).run(std::vector<Tensor>{in[0], in[1], in[2]});
        args.push_back(g.input("y", ty));
        args.push_back(g.input("lse", {DType::f32, to_shape({8, 12, 1024})}));
        in.insert(in.end(), fwd.begin(), fwd.end());
      }
      for (Value o : g.apply("attention_grad", args, attrs)) g.output(o);
      CompiledGraph cg = s.compile(g);
      double ms = median_ms(cg, in, runs);
      double flops = 2.5 * 4.0 * 8 * 12 * 1024 * 1024 * 64 / 2;  // FlashAttention's count
      std::snprintf(extra, sizeof extra, "   %.0f TFLOP/s", flops / (ms * 1e-3) / 1e12);
      row(!saved ? "attention_grad causal bf16, recomputing the forward"
          : bshd ? "attention_grad causal bf16 bshd"
                 : "attention_grad causal bf16",
          ms, t, saved && !bshd ? "attention_grad" : "", extra);
    }
  }

  if (want("gpt2") || want("train"))
    std::printf("GPT-2 small's GELU: %s\n", gpt2_small().gelu_tanh ? "tanh form" : "erf");
  if (want("gpt2")) {  // GPT-2 small forward
    demo::GptConfig cfg = gpt2_small();
    auto g = demo::build_gpt(cfg, /*with_loss=*/false);
    TensorMap params = demo::init_params(*g, cfg.layers, 1);
    std::vector<int64_t> tok(8 * 1024);
    std::mt19937_64 rng(4);
    for (auto& v : tok) v = int64_t(rng() % 50304);
    TensorMap in{{"tokens", Tensor::from_vector(tok, {8, 1024}).to(Device::cuda())},
                 {"pos", demo::positions(1024).to(Device::cuda())}};
    for (Precision p : {Precision::f32, Precision::auto_bf16}) {
      CompileOptions o;
      o.precision = p;
      CompiledGraph cg = s.compile(*g, o);
      for (const auto& [name, v] : params) cg.set_param(name, v.to(Device::cuda()));
      auto st = bench::measure(
          [&] {
            cg.run(in);
            cuda::synchronize();
          },
          2, std::max(runs / 4, 3));
      bool bf16 = p != Precision::f32;
      row(bf16 ? "gpt2 forward 8x1024 auto-bf16" : "gpt2 forward 8x1024 f32", st.median * 1e3, t,
          bf16 ? "gpt2_bf16" : "gpt2_f32", "");
    }
  }

  if (want("train")) {  // GPT-2 small AMP-bf16 train step
    demo::GptConfig cfg = gpt2_small();
    auto g = demo::build_gpt(cfg, /*with_loss=*/true);
    train::TrainerOptions opts;
    opts.optimizer = std::make_shared<train::AdamW>();
    opts.schedule = train::constant_lr(1e-4);
    opts.compile.precision = Precision::auto_bf16;
    opts.device = Device::cuda();
    // RLX_BENCH_DISABLE=pass,pass: the step without those passes (to measure what each
    // brings).
    if (const char* off = std::getenv("RLX_BENCH_DISABLE"))
      for (std::string_view rest = off; !rest.empty();) {
        size_t comma = std::min(rest.find(','), rest.size());
        opts.compile.disable_passes.emplace_back(rest.substr(0, comma));
        rest.remove_prefix(std::min(comma + 1, rest.size()));
      }
    train::Trainer trainer(*g, opts);
    for (const auto& [name, v] : demo::init_params(*g, cfg.layers, 1)) trainer.set_param(name, v);
    std::vector<int64_t> tok(8 * 1024), tgt(8 * 1024);
    std::mt19937_64 rng(5);
    for (auto& v : tok) v = int64_t(rng() % 50304);
    for (auto& v : tgt) v = int64_t(rng() % 50304);
    TensorMap in{{"tokens", Tensor::from_vector(tok, {8, 1024}).to(Device::cuda())},
                 {"targets", Tensor::from_vector(tgt, {8, 1024}).to(Device::cuda())},
                 {"pos", demo::positions(1024).to(Device::cuda())}};
    std::vector<double> issue;  // the host's time in step(), before waiting for the device
    auto st = bench::measure(
        [&] {
          auto t0 = std::chrono::steady_clock::now();
          trainer.step(in);
          issue.push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          cuda::synchronize();
        },
        2, std::max(runs / 4, 3));
    std::sort(issue.begin(), issue.end());
    // Whether the steps replayed CUDA Graphs (captures alternate between two arenas).
    char graphs[128];
    std::snprintf(graphs, sizeof graphs, "   (CUDA Graph replays: %zu; host %.1f ms a step)",
                  trainer.compiled().graph_launches() - trainer.compiled().graph_captures(),
                  issue[issue.size() / 2] * 1e3);
    row("gpt2 AMP-bf16 train step 8x1024", st.median * 1e3, t, "train_bf16", graphs);
  }
  return 0;
}
