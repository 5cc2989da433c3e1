// rlx::llm — decoder-only LLMs from GGUF files: the model's configuration read from the
// file's metadata, the model as an rlx graph (llama, qwen2), and generation (prefill and
// decode graphs compiled once per context size, the KV cache preallocated, sampling inside
// the graph so only the sampled token ids leave it).
//
//   auto m = rlx::llm::Model::load("model.gguf");
//   rlx::llm::Generator gen(*m, {.temperature = 0});
//   int32_t t = gen.prefill(m->tokenizer().encode("Once upon a time"));
//   for (int i = 0; i < 16 && !m->tokenizer().is_eog(t); ++i) t = gen.step(t);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "rlx/device.h"
#include "rlx/gguf.h"
#include "rlx/graph.h"
#include "rlx/session.h"
#include "rlx/tensor.h"
#include "rlx_llm/tokenizer.h"

namespace rlx::llm {

// The architecture's hyperparameters, from the GGUF metadata ("<arch>.…" keys).
struct Config {
  std::string arch;  // "llama" (Llama 2/3, Mistral, TinyLlama, SmolLM) or "qwen2"
  std::string name;  // general.name
  int64_t dim = 0, n_layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0, ffn = 0;
  int64_t vocab = 0, ctx_train = 0;
  int64_t n_rot = 0;               // rotary dims per head (partial rotary: < head_dim)
  double eps = 1e-5;               // RMSNorm epsilon
  double rope_base = 10000.0;      // rope.freq_base
  double rope_freq_scale = 1;      // 1 / rope.scaling.factor for linear scaling
  std::string rope_mode;           // "pairs" (llama) or "neox" (qwen2)
  bool qkv_bias = false;           // q/k/v projections carry biases (qwen2)
  bool tied_embeddings = false;    // no output.weight: the logits read token_embd
  bool rope_freq_factors = false;  // a rope_freqs.weight tensor (llama3-style scaling)

  // Reads and checks the keys; a missing or inconsistent one is a ValueError naming it.
  static Config from_gguf(const gguf::File& file);
};

// The tokenizer's data from the GGUF metadata (tokenizer.ggml.* keys).
VocabData vocab_from_gguf(const gguf::File& file);

struct LoadOptions {
  Device device = Device::cpu();
  int64_t ctx = 0;              // context (KV cache rows) per sequence; 0: min(ctx_train, 4096)
  int64_t batch = 1;            // sequences decoded together in one step
  int threads = 0;              // kernel threads (0: every core)
  DType kv_dtype = DType::f16;  // f16 (as llama.cpp) or f32
  // On the CPU, q4_0 and q8_0 weights are interleaved in groups of 16 rows (AVX-512) or 8
  // (quant_matmul layouts rows16 / rows8, rlx/quant.h), the form their decode kernels read
  // fastest (rlx's bench/RESULTS.md, "Decode on the Xeon", "rows16"); the file's pages they
  // came from are released. On CUDA, q8_0 and q4_k ones are held as tensor-core tiles
  // (tiles16, unless settings().cuda_tiles is off), the form the decode products read
  // fastest. false keeps every weight as the file stores it.
  bool interleave = true;
  // On the CPU, the weight matrices a decode step streams are copied into one arena of
  // 2 MiB pages (Linux transparent huge pages) and the file's pages released: fewer TLB
  // misses, 5-20% faster decode, the same resident memory.
  bool huge_pages = true;
  // On a GPU, each compiled step runs as a captured CUDA Graph from its second run on (one
  // launch per token); false runs every kernel eagerly (for comparison).
  bool cuda_graphs = true;
  // A prompt is prefilled in steps of at most this many tokens, each attending to the cache
  // the earlier ones wrote: the activations of one step bound the memory a long prompt
  // needs (llama.cpp's ubatch, with its default). 0: the whole prompt in one step.
  int64_t prefill_chunk = 512;
  // Each layer's q/k/v projections run as one product over their rows stacked, and gate/up
  // as another (as gpt-fast's wqkv and w13), where their types allow: fewer, larger
  // kernels per token. The stacked copy replaces the file's pages (no extra memory). Unset:
  // on (H100, 1.1 B: decode 6-15 % and prefill 24-70 % faster, bench/RESULTS.md; 2-core
  // Xeon: decode 2-7 % faster, one parallel region where there were three).
  std::optional<bool> fuse;
};

// llama.cpp's defaults. temperature 0 is greedy.
struct SamplerOptions {
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 0.95;
  double min_p = 0.05;
  double repeat_penalty = 1.0;
  int64_t repeat_last_n = 64;
  uint64_t seed = 0;
};

class Generator;

class Model {
 public:
  // Maps the file (weights stay in the mapping, in their encoding) and builds the graphs
  // lazily. Throws IoError / ValueError / NotSupported naming what is wrong.
  static std::shared_ptr<Model> load(const std::string& path, LoadOptions options = {});

  const Config& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const LoadOptions& options() const { return options_; }
  int64_t ctx() const { return ctx_; }
  const gguf::File& file() const { return *file_; }

  // Logits of a fresh sequence: [n, vocab] f32 for every position of `ids` (all), or
  // [vocab] for the last one.
  Tensor logits(std::span<const int32_t> ids, bool all = true);

  // The graph of one step (exposed for tests and the dispatch report): `batch`
  // sequences of `seq` new tokens each (0: a symbolic length), sampling with `sampler`;
  // outputs "token" (i32 [batch]) and, with `logits` "last" or "all", "logits". With
  // `chain` (one token per sequence), the next step's inputs too: "next.tokens",
  // "next.positions", "next.pos", "next.rng" and "next.history" (with a repeat penalty),
  // so that decode steps follow each other on the device.
  std::unique_ptr<Graph> build_graph(int64_t batch, int64_t seq, const SamplerOptions& sampler,
                                     const std::string& logits = "none", bool chain = false) const;

  // A graph compiled for this model's device with its weights bound, cached by key (the
  // reference stays valid for the model's life).
  const CompiledGraph& compiled(int64_t batch, int64_t seq, const SamplerOptions& sampler,
                                const std::string& logits, bool chain = false);

  // Bytes of the weights (as stored) and of one sequence's KV cache.
  size_t weight_bytes() const;
  size_t kv_bytes_per_seq() const;

 private:
  Model() = default;
  friend class Generator;
  Config config_;
  LoadOptions options_;
  int64_t ctx_ = 0;
  std::shared_ptr<gguf::File> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::map<std::string, Tensor> weights_;  // graph param name -> tensor (on the device)
  // The weights held in another layout than the file's: quant_matmul's layout name.
  std::map<std::string, std::string> layouts_;
  // Fused weights (a param name such as blk.0.attn_qkv.weight) and their parts in order.
  std::map<std::string, std::vector<std::string>> fused_;
  void fuse_groups();
  std::map<std::string, CompiledGraph> compiled_;
  // KV caches a Generator gave back, kept for the next one: the same storage, so the
  // CUDA Graphs captured over it replay instead of being captured again.
  struct Caches {
    int64_t batch = 0;
    std::vector<Tensor> k, v;  // per layer [batch, kv_heads, ctx, head_dim]
  };
  std::mutex caches_mu_;
  std::vector<Caches> spare_caches_;
  Caches take_caches(int64_t batch);
  void give_caches(Caches c);
};

struct GenerationStats {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

// One generation over `batch` sequences with their own KV caches (allocated once).
// Each step passes one token id per sequence into the decode graph and gets one back.
class Generator {
 public:
  Generator(Model& model, SamplerOptions sampler = {});
  ~Generator();  // its caches go back to the model
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Prefills sequence `seq` with `ids` from position 0 (resetting it) and returns its
  // first sampled token.
  int32_t prefill(std::span<const int32_t> ids, int64_t seq = 0);
  // One decode step of every sequence: last[b] is sequence b's newest token; returns the
  // next token of each. A sequence at the end of its context is a ValueError.
  std::vector<int32_t> step(std::span<const int32_t> last);
  int32_t step(int32_t last) { return step(std::span<const int32_t>(&last, 1))[0]; }
  // Up to `n` decode steps after `last` (as step()), each step's tokens handed to on_step,
  // which returns false to stop; returns the steps taken. Each step hands its tokens,
  // positions and sampler state to the next where it ran (build_graph's `chain`); on a GPU
  // step t + 1 is queued before step t's tokens reach the host, so the device does not
  // wait for the host between tokens (the one step queued past a stop is dropped: it
  // wrote only cache rows past the sequence's end). Positions past the context are a
  // ValueError before anything runs.
  int64_t decode(std::span<const int32_t> last, int64_t n,
                 const std::function<bool(std::span<const int32_t>)>& on_step);
  // Logits of the last step's last positions ([vocab] after prefill, [batch, vocab] after
  // a decode step), kept when keep_logits is set.
  bool keep_logits = false;
  const Tensor& last_logits() const { return last_logits_; }

  int64_t position(int64_t seq = 0) const { return pos_[size_t(seq)]; }
  const GenerationStats& stats() const { return stats_; }

 private:
  // Writes the step's host inputs from `last` and each sequence's state; a ValueError when
  // a sequence has no room for `steps` more tokens.
  void set_inputs(std::span<const int32_t> last, int64_t steps);
  void accept(std::span<const int32_t> next);  // each sequence one token further
  Model& model_;
  SamplerOptions sampler_;
  int64_t batch_;
  Model::Caches caches_;
  std::vector<int64_t> pos_;
  std::vector<std::vector<int32_t>> history_;
  std::vector<uint64_t> counter_;
  // The decode step's small inputs, made once and rewritten in place each step.
  Tensor tokens_, positions_, pos_in_, rng_, history_in_;
  const CompiledGraph* decode_ = nullptr;  // the step graph, looked up on the first step
  bool decode_logits_ = false;             // keep_logits when it was looked up
  Tensor last_logits_;
  GenerationStats stats_;
};

// Streams `n` tokens after `prompt` to on_piece (text, never a split UTF-8 sequence);
// stops early at an end-of-generation token. Returns the generated ids.
std::vector<int32_t> generate(Model& model, std::span<const int32_t> prompt, int64_t n,
                              const SamplerOptions& sampler,
                              const std::function<void(const std::string&)>& on_piece = {},
                              GenerationStats* stats = nullptr);

}  // namespace rlx::llm
