// The model as an rlx graph: one step of `batch` sequences of `seq` new tokens each,
// reading and extending the KV cache, ending in `sample`. The weights are graph params in
// their stored encoding (quant_matmul reads the blocks), so the passes and every backend
// apply as to any graph.
#include <algorithm>
#include <cmath>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "rlx/error.h"
#include "rlx/ops.h"
#include "rlx/quant.h"
#include "rlx_llm/llm.h"

namespace rlx::llm {

namespace {

std::string layer_name(int64_t l, const char* what) {
  return "blk." + std::to_string(l) + "." + what;
}

// Builds the step graph; weights are params named as the file's tensors.
class Builder {
 public:
  Builder(const Config& c, const gguf::File& f, const std::set<std::string>& rows8, Graph& g)
      : c_(c), f_(f), rows8_(rows8), g_(g) {}

  Value weight(const std::string& name) {
    const gguf::TensorInfo* t = f_.find(name);
    if (!t) fail<ValueError>("llm", "expected a tensor ", name, " in the file, got none");
    if (const Arg* a = g_.find_arg(name)) return a->value;
    if (!t->dtype) (void)f_.tensor(name);  // NotSupported, naming the tensor and its type
    return g_.param(name, TensorType{*t->dtype, to_shape(t->shape)});
  }

  // x [B, S, in] @ W^T (+ bias) with W [out, in] in its stored encoding.
  Value linear(Value x, const std::string& w, const std::string& bias = {}) {
    Attrs a;
    if (rows8_.count(w)) a.set("layout", std::string("rows8"));
    Value y = op("quant_matmul", {x, weight(w)}, a);
    if (!bias.empty()) y = y + weight(bias);
    return y;
  }

  Value norm(Value x, const std::string& w) {
    return op("rms_norm", {x, weight(w)}, {{"axis", int64_t(-1)}, {"epsilon", c_.eps}});
  }

  Value rope(Value x, Value positions) {
    std::vector<Value> in{x, positions};
    if (c_.rope_freq_factors) in.push_back(weight("rope_freqs.weight"));
    return op("rope", in,
              {{"mode", c_.rope_mode},
               {"n_rot", c_.n_rot},
               {"base", c_.rope_base},
               {"freq_scale", c_.rope_freq_scale}});
  }

  // One transformer block over x [B, S, dim].
  Value block(int64_t l, Value x, Value positions, Value pos, Value k_cache, Value v_cache) {
    const int64_t H = c_.n_head, KVH = c_.n_kv_head, D = c_.head_dim;
    auto name = [&](const char* w) { return layer_name(l, w); };
    auto bias = [&](const char* b) { return c_.qkv_bias ? name(b) : std::string(); };
    Value h = norm(x, name("attn_norm.weight"));
    Value q = reshape(linear(h, name("attn_q.weight"), bias("attn_q.bias")), {0, 0, H, D});
    Value k = reshape(linear(h, name("attn_k.weight"), bias("attn_k.bias")), {0, 0, KVH, D});
    Value v = reshape(linear(h, name("attn_v.weight"), bias("attn_v.bias")), {0, 0, KVH, D});
    q = rope(q, positions);
    k = rope(k, positions);
    Value kc = op("kv_cache_write", {k_cache, k, pos});
    Value vc = op("kv_cache_write", {v_cache, v, pos});
    Value o = op("attention_cached", {q, kc, vc, pos}, {{"scale", 1.0 / std::sqrt(double(D))}});
    x = x + linear(reshape(o, {0, 0, H * D}), name("attn_output.weight"));
    h = norm(x, name("ffn_norm.weight"));
    Value gate = linear(h, name("ffn_gate.weight"));
    Value up = linear(h, name("ffn_up.weight"));
    return x + linear(op("silu", {gate}) * up, name("ffn_down.weight"));
  }

 private:
  const Config& c_;
  const gguf::File& f_;
  const std::set<std::string>& rows8_;
  Graph& g_;
};

// w [n, k] interleaved in groups of 8 rows; the mapped pages of w that the copy replaces
// are given back (they were read once, here), so the process holds the weights once.
Tensor interleaved(const Tensor& w) {
  Tensor t = Tensor::empty(w.dtype(), w.shape());
  quant::interleave_rows8(w.dtype(), w.data(), t.data(), w.shape()[0], w.shape()[1]);
#if defined(__linux__)
  const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(w.data()), end = begin + w.nbytes();
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
#endif
  return t;
}

}  // namespace

std::unique_ptr<Graph> Model::build_graph(int64_t batch, int64_t seq, const SamplerOptions& s,
                                          const std::string& logits) const {
  const Config& c = config_;
  auto g = std::make_unique<Graph>("llm." + c.arch);
  Builder b(c, *file_, rows8_, *g);
  Dim S = seq > 0 ? Dim(seq) : Dim::sym("seq");
  Value tokens = g->input("tokens", {DType::i32, {Dim(batch), S}});
  Value positions = g->input("positions", {DType::i32, {Dim(batch), S}});
  Value pos = g->input("pos", {DType::i32, {Dim(batch)}});
  Value rng = g->input("rng", {DType::i64, {Dim(batch), Dim(2)}});
  bool penalty = s.repeat_penalty != 1.0 && s.repeat_last_n > 0;
  Value history;
  if (penalty) history = g->input("history", {DType::i32, {Dim(batch), Dim(s.repeat_last_n)}});
  Shape cache{Dim(batch), Dim(c.n_kv_head), Dim(ctx_), Dim(c.head_dim)};
  std::vector<Value> kc, vc;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    kc.push_back(g->input("k_cache." + std::to_string(l), {options_.kv_dtype, cache}));
    vc.push_back(g->input("v_cache." + std::to_string(l), {options_.kv_dtype, cache}));
  }

  Value x = op("dequantize", {b.weight("token_embd.weight"), tokens}, {{"dtype", DType::f32}});
  for (int64_t l = 0; l < c.n_layer; ++l)
    x = b.block(l, x, positions, pos, kc[size_t(l)], vc[size_t(l)]);
  auto last_row = [&](Value v) {  // [B, S, n] -> [B, n]
    if (seq != 1)
      v = op("slice", {v},
             {{"starts", IntList{-1}}, {"stops", IntList{INT64_MAX}}, {"axes", IntList{1}}});
    return reshape(v, {batch, -1});
  };
  // Sampling needs only the last position: the other rows skip the output projection.
  if (logits != "all") x = last_row(x);
  x = b.norm(x, "output_norm.weight");
  Value out = b.linear(x, c.tied_embeddings ? "token_embd.weight" : "output.weight");
  Value last = logits == "all" ? last_row(out) : out;
  std::vector<Value> sin{last, rng};
  if (penalty) sin.push_back(history);
  Value token = op("sample", sin,
                   {{"temperature", s.temperature},
                    {"top_k", s.top_k},
                    {"top_p", s.top_p},
                    {"min_p", s.min_p},
                    {"repeat_penalty", s.repeat_penalty}});
  g->output(token, "token");
  if (logits == "all") g->output(out, "logits");
  if (logits == "last") g->output(last, "logits");
  return g;
}

std::shared_ptr<Model> Model::load(const std::string& path, LoadOptions options) {
  std::shared_ptr<Model> m(new Model());
  m->file_ = std::make_shared<gguf::File>(gguf::File::open(path));
  m->config_ = Config::from_gguf(*m->file_);
  m->options_ = options;
  if (options.batch < 1) fail<ValueError>("llm", "expected batch >= 1, got ", options.batch);
  if (options.kv_dtype != DType::f16 && options.kv_dtype != DType::f32 &&
      options.kv_dtype != DType::bf16)
    fail<ValueError>("llm", "expected a KV cache of f16, bf16 or f32, got ",
                     dtype_name(options.kv_dtype));
  m->ctx_ = options.ctx > 0 ? options.ctx : std::min<int64_t>(m->config_.ctx_train, 4096);
  m->tokenizer_ = std::make_unique<Tokenizer>(vocab_from_gguf(*m->file_));
  if (int64_t(m->tokenizer_->size()) > m->config_.vocab)
    fail<ValueError>("llm", "expected at most ", m->config_.vocab,
                     " tokens (token_embd rows), got ", m->tokenizer_->size());
  // Every tensor the graph reads, wrapped in the mapping (no copy on the CPU).
  auto g = m->build_graph(1, 1, SamplerOptions{}, "none");
  for (const Arg& a : g->args()) {
    if (a.kind != ArgKind::param) continue;
    Tensor t = m->file_->tensor(a.name);
    // The embedding table is read by rows (dequantize), not only by quant_matmul.
    if (options.device.is_cpu() && options.interleave && a.name != "token_embd.weight" &&
        quant::interleavable(t.dtype()) && t.shape()[0] % 8 == 0) {
      m->weights_[a.name] = interleaved(t);
      m->rows8_.insert(a.name);
      continue;
    }
    m->weights_[a.name] = options.device.is_cpu() ? t : t.to(options.device);
  }
  return m;
}

const CompiledGraph& Model::compiled(int64_t batch, int64_t seq, const SamplerOptions& s,
                                     const std::string& logits) {
  std::string key = std::to_string(batch) + "/" + std::to_string(seq) + "/" + logits + "/" +
                    std::to_string(s.temperature) + "/" + std::to_string(s.top_k) + "/" +
                    std::to_string(s.top_p) + "/" + std::to_string(s.min_p) + "/" +
                    std::to_string(s.repeat_penalty) + "/" + std::to_string(s.repeat_last_n);
  auto it = compiled_.find(key);
  if (it != compiled_.end()) return it->second;
  auto g = build_graph(batch, seq, s, logits);
  CompileOptions o;
  o.threads = options_.threads;
  CompiledGraph cg = Session(options_.device).compile(*g, o);
  for (const auto& [name, t] : weights_)
    if (g->find_arg(name)) cg.set_param(name, t);
  return compiled_.emplace(key, std::move(cg)).first->second;
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : weights_) n += t.nbytes();
  return n;
}

size_t Model::kv_bytes_per_seq() const {
  return size_t(2 * config_.n_layer * config_.n_kv_head * ctx_ * config_.head_dim) *
         dtype_size(options_.kv_dtype);
}

}  // namespace rlx::llm
