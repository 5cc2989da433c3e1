// `rlx generate`, `rlx bench-llm` and `rlx quantize`: GGUF models through rlx::llm.
#include "rlx_llm/llm.h"

#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "cli.h"
#include "rlx/cpu_isa.h"
#include "rlx/cuda.h"
#include "rlx/gguf.h"
#include "rlx/npy.h"

namespace rlx::cli {

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    ids.push_back(int32_t(parse_size(item, "--prompt-tokens entry")));
  }
  return ids;
}

DType parse_kv(const std::string& s) { return s == "f32" ? DType::f32 : DType::f16; }

llm::LoadOptions load_options(const LlmOptions& o) {
  llm::LoadOptions lo;
  lo.device = parse_device(o.device);
  lo.ctx = o.ctx;
  lo.threads = o.threads;
  lo.kv_dtype = parse_kv(o.kv);
  lo.batch = o.batch;
  lo.prefill_chunk = o.ubatch;
  if (o.fuse >= 0) lo.fuse = o.fuse == 1;
  return lo;
}

// The device's copy bandwidth (bytes read + written per second): a 1 GiB device-to-device
// copy, the best of five. A decode step on the GPU streams every weight once.
double copy_bandwidth(Device d) {
  const int64_t n = int64_t(1) << 30;
  Tensor a = Tensor::empty(DType::u8, {n}, d);  // the bytes do not matter
  double best = 0;
  for (int r = 0; r < 6; ++r) {
    synchronize(d);
    auto t0 = Clock::now();
    Tensor b = a.clone();
    synchronize(d);
    if (r > 0) best = std::max(best, 2.0 * double(n) / seconds_since(t0));
  }
  return best;
}

// The machine's read bandwidth on `threads` threads (bytes/s): a sum over 512 MiB, the
// best of five passes. Decode reads every weight once per token, so this is its limit.
double read_bandwidth(int threads) {
  const size_t n = (size_t(512) << 20) / sizeof(double);
  std::vector<double> buf(n, 1.0);
  double best = 0, sink = 0;
  int nt = threads > 0 ? threads : omp_get_max_threads();
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    double total = 0;
#pragma omp parallel num_threads(nt) reduction(+ : total)
    {
      // 16 independent lanes, which the compiler vectorises without reassociating: one
      // running sum would make the adds' latency, not memory, the limit (half the speed).
      double acc[16] = {};
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 16)
        for (size_t j = 0; j < 16; ++j) acc[j] += buf[i + j];
      for (double a : acc) total += a;
    }
    sink += total;
    best = std::max(best, double(n * sizeof(double)) / seconds_since(t0));
  }
  if (sink < 0) std::printf("%f", sink);  // keeps the sum alive
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

void add_llm_commands(CLI::App& app, LlmOptions& o) {
  auto common = [&](CLI::App* c) {
    c->add_option("model", o.model, "GGUF model")->required()->type_name("MODEL.gguf");
    c->add_option("--device", o.device, "device to run on")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    c->add_option("--threads,-t", o.threads, "kernel threads (0: every core)")
        ->check(CLI::Range(0, 1 << 30))
        ->capture_default_str();
    c->add_option("--ctx,-c", o.ctx, "context size (0: the model's, at most 4096)")
        ->check(CLI::Range(0, 1 << 24))
        ->capture_default_str();
    c->add_option("--kv", o.kv, "KV cache dtype")
        ->check(CLI::IsMember({"f16", "f32"}))
        ->capture_default_str();
    c->add_option("--ubatch,-u", o.ubatch, "prompt tokens per prefill step (0: all at once)")
        ->check(CLI::Range(int64_t(0), int64_t(1) << 24))
        ->capture_default_str();
    c->add_flag_callback(
        "--fuse", [&o] { o.fuse = 1; },
        "q/k/v and gate/up each as one product (the default; LoadOptions::fuse)");
    c->add_flag_callback(
        "--no-fuse", [&o] { o.fuse = 0; }, "each projection as its own product");
  };
  o.generate =
      app.add_subcommand("generate", "generate text from a GGUF model (streams to stdout)");
  common(o.generate);
  o.generate->add_option("-p,--prompt", o.prompt, "prompt text");
  o.generate->add_option("--prompt-tokens", o.prompt_tokens, "prompt as token ids")
      ->type_name("1,2,3");
  o.generate->add_option("-n,--n-predict", o.n, "tokens to generate")->capture_default_str();
  o.generate->add_option("--temp", o.sampler.temperature, "temperature (0: greedy)")
      ->capture_default_str();
  o.generate->add_option("--top-k", o.sampler.top_k, "top-k (0: off)")->capture_default_str();
  o.generate->add_option("--top-p", o.sampler.top_p, "top-p (1: off)")->capture_default_str();
  o.generate->add_option("--min-p", o.sampler.min_p, "min-p (0: off)")->capture_default_str();
  o.generate->add_option("--repeat-penalty", o.sampler.repeat_penalty, "repetition penalty")
      ->capture_default_str();
  o.generate->add_option("--repeat-last-n", o.sampler.repeat_last_n, "tokens it looks back on")
      ->capture_default_str();
  o.generate->add_option("--seed,-s", o.sampler.seed, "sampling seed")->capture_default_str();
  o.generate->add_flag("--print-tokens", o.print_tokens, "print the generated ids (one line)");
  o.generate
      ->add_option("--dump-logits", o.dump_logits,
                   "write the last prompt position's logits to FILE.npy")
      ->type_name("FILE.npy");

  o.bench = app.add_subcommand("bench-llm",
                               "prefill (ppN) and decode (tgN) tokens/s, as llama-bench prints");
  common(o.bench);
  o.bench->add_option("-p,--n-prompt", o.bench_prompt, "prompt tokens")->capture_default_str();
  o.bench->add_option("-n,--n-gen", o.bench_gen, "generated tokens")->capture_default_str();
  o.bench->add_option("-r,--repetitions", o.bench_reps, "runs (median)")->capture_default_str();
  o.bench->add_option("-b,--batch", o.batch, "sequences decoded together (tg counts them all)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();

  o.quantize = app.add_subcommand("quantize", "re-encode a GGUF model's weights");
  o.quantize->add_option("input", o.model, "GGUF model")->required()->type_name("IN.gguf");
  o.quantize->add_option("output", o.out, "GGUF file to write")->required()->type_name("OUT.gguf");
  o.quantize->add_option("type", o.type, "target type")
      ->required()
      ->type_name("Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|Q2_K|Q3_K|Q4_K|Q5_K|Q6_K|F16|F32");
  o.quantize
      ->add_option("--output-type", o.output_type,
                   "type of output.weight (token_embd.weight when tied); default: the target")
      ->type_name("TYPE");
  o.quantize->add_option("-t,--threads", o.threads, "threads (0: every core)")
      ->capture_default_str();
}

int generate_command(const LlmOptions& o) {
  if (o.prompt.empty() && o.prompt_tokens.empty())
    fail<ValueError>("generate", "expected a prompt (-p TEXT or --prompt-tokens), got none");
  auto model = llm::Model::load(o.model, load_options(o));
  std::vector<int32_t> prompt =
      o.prompt_tokens.empty() ? model->tokenizer().encode(o.prompt) : parse_ids(o.prompt_tokens);
  if (prompt.empty()) fail<ValueError>("generate", "expected at least one prompt token, got none");
  if (!o.dump_logits.empty()) {
    Tensor l = model->logits(prompt, false);
    save_npy(o.dump_logits, l);
  }
  llm::GenerationStats st;
  std::vector<int32_t> ids = llm::generate(
      *model, prompt, o.n, o.sampler,
      [](const std::string& piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      },
      &st);
  std::printf("\n");
  if (o.print_tokens) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);  // the text ends its line before the figures on stderr
  std::fprintf(stderr,
               "prefill: %lld tokens in %.3f s (%.2f tok/s)\n"
               "decode:  %lld tokens in %.3f s (%.2f tok/s)\n"
               "peak memory: %.1f MiB\n",
               (long long)st.prompt_tokens, st.prefill_seconds,
               st.prompt_tokens / std::max(st.prefill_seconds, 1e-9),
               (long long)std::max<int64_t>(st.generated_tokens, 0), st.decode_seconds,
               st.generated_tokens / std::max(st.decode_seconds, 1e-9), peak_rss_mib());
  return 0;
}

int bench_llm_command(const LlmOptions& o) {
  llm::LoadOptions lo = load_options(o);
  if (lo.ctx == 0) lo.ctx = std::max(o.bench_prompt, o.bench_gen + 1);
  auto model = llm::Model::load(o.model, lo);
  llm::SamplerOptions greedy;
  greedy.temperature = 0;
  int64_t V = model->config().vocab;
  std::vector<int32_t> prompt;  // llama-bench's prompt is random ids too
  for (int64_t i = 0; i < std::max<int64_t>(o.bench_prompt, 1); ++i)
    prompt.push_back(int32_t(3 + (i * 7919 + 17) % (V - 3)));
  // As llama-bench: ppN prefills N tokens into an empty cache; tgN decodes N tokens one
  // at a time from an empty cache (here after one untimed token, which compiles the step).
  // The first run warms up (compiles); on a GPU the second too, as it captures the step's
  // CUDA Graph, which the timed runs replay.
  const int warm = lo.device.is_cpu() ? 1 : 2;
  std::vector<double> pp, tg;
  for (int r = 0; r < o.bench_reps + warm; ++r) {
    if (o.bench_prompt > 0) {
      llm::Generator gen(*model, greedy);
      auto t0 = Clock::now();
      gen.prefill(prompt);
      synchronize(lo.device);
      if (r >= warm) pp.push_back(double(o.bench_prompt) / seconds_since(t0));
    }
    if (o.bench_gen > 0) {  // every sequence of the batch decodes; t/s counts them all
      llm::Generator gen(*model, greedy);
      std::vector<int32_t> t;
      for (int64_t b = 0; b < o.batch; ++b)
        t.push_back(
            gen.prefill(std::span(prompt).subspan(size_t(b % int64_t(prompt.size())), 1), b));
      auto t0 = Clock::now();
      gen.decode(t, o.bench_gen, {});
      synchronize(lo.device);
      if (r >= warm) tg.push_back(double(o.bench_gen * o.batch) / seconds_since(t0));
    }
  }
  std::printf("model %s: %s, %.1f MiB of weights, %lld threads, %s, batch %lld, CPU kernels %s\n",
              o.model.c_str(), model->config().arch.c_str(),
              double(model->weight_bytes()) / (1 << 20), (long long)o.threads, o.device.c_str(),
              (long long)o.batch, std::string(cpu_isa_name(cpu_isa())).c_str());
  if (!pp.empty()) std::printf("pp%lld %.2f\n", (long long)o.bench_prompt, median(pp));
  if (!tg.empty()) std::printf("tg%lld %.2f\n", (long long)o.bench_gen, median(tg));
  double rss = peak_rss_mib();  // before the bandwidth probe's buffer
  if (!tg.empty()) {
    // Bytes one decode step reads: every weight but the embedding table (one row), and
    // each sequence's KV cache up to the middle of the decoded span (tgN starts from an
    // empty cache).
    const llm::Config& c = model->config();
    double bytes = double(model->weight_bytes());
    if (!c.tied_embeddings) bytes -= double(model->file().tensor("token_embd.weight").nbytes());
    double mid = double(o.bench_gen) / 2;
    bytes += double(o.batch) * 2.0 * double(c.n_layer * c.n_kv_head * c.head_dim) * mid *
             double(dtype_size(lo.kv_dtype));
    const bool cpu = lo.device.is_cpu();
    double bw = cpu ? read_bandwidth(o.threads) : copy_bandwidth(lo.device);
    double got = bytes * median(tg) / double(o.batch);
    std::printf(
        "decode reads %.1f MiB/step: %.2f GB/s = %.0f%% of the %s bandwidth (%.2f GB/s, %s, "
        "measured now)\n",
        bytes / (1 << 20), got / 1e9, 100.0 * got / bw, cpu ? "read" : "copy", bw / 1e9,
        cpu ? (std::to_string(o.threads) + " threads").c_str() : o.device.c_str());
  }
  if (!lo.device.is_cpu()) {
    cuda::MemoryInfo mi = cuda::memory_info(lo.device.index);
    std::printf(
        "device memory: %.1f MiB used (weights %.1f MiB, KV cache %.1f MiB per sequence), "
        "%.1f MiB reserved\n",
        double(mi.used) / (1 << 20), double(model->weight_bytes()) / (1 << 20),
        double(model->kv_bytes_per_seq()) / (1 << 20), double(mi.reserved) / (1 << 20));
  }
  std::printf("peak memory %.1f MiB\n", rss);
  return 0;
}

// A quantize type by its ggml name (any case).
DType quantize_type(const std::string& name) {
  std::string t = name;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  std::optional<DType> d = dtype_from_name(t);
  if (!d || !(is_quantized(*d) || *d == DType::f16 || *d == DType::f32))
    fail<ValueError>("quantize",
                     "expected a type Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
                     "Q5_K, Q6_K, F16 or F32, got '",
                     name, "'");
  return *d;
}

int quantize_command(const LlmOptions& o) {
  gguf::QuantizeOptions q;
  if (!o.output_type.empty()) q.output_type = quantize_type(o.output_type);
  q.threads = o.threads;
  gguf::quantize_file(o.model, o.out, quantize_type(o.type), q);
  std::printf("wrote %s (%s)\n", o.out.c_str(), o.type.c_str());
  return 0;
}

int llm_command(const LlmOptions& o) {
  if (o.generate && *o.generate) return generate_command(o);
  if (o.bench && *o.bench) return bench_llm_command(o);
  return quantize_command(o);
}

}  // namespace rlx::cli
