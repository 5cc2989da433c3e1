// The model as an rlx graph: one step of `batch` sequences of `seq` new tokens each,
// reading and extending the KV cache, ending in `sample`. The weights are graph params in
// their stored encoding (quant_matmul reads the blocks), so the passes and every backend
// apply as to any graph.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "rlx/error.h"
#include "rlx/ops.h"
#include "rlx/quant.h"
#include "rlx/settings.h"
#include "rlx_llm/llm.h"

namespace rlx::llm {

namespace {

std::string layer_name(int64_t l, const char* what) {
  return "blk." + std::to_string(l) + "." + what;
}

// Builds the step graph; weights are params named as the file's tensors, or as a fused
// group of them (Model::fused_: the rows of its parts, one after another).
class Builder {
 public:
  Builder(const Config& c, const gguf::File& f, const std::map<std::string, std::string>& layouts,
          const std::map<std::string, std::vector<std::string>>& fused, Graph& g)
      : c_(c), f_(f), layouts_(layouts), fused_(fused), g_(g) {}

  Value weight(const std::string& name) {
    if (const Arg* a = g_.find_arg(name)) return a->value;
    if (auto it = fused_.find(name); it != fused_.end()) {
      const gguf::TensorInfo* t = f_.find(it->second[0]);
      int64_t rows = 0;
      for (const std::string& part : it->second) rows += f_.find(part)->shape[0];
      return g_.param(name, TensorType{*t->dtype, to_shape({rows, t->shape[1]})});
    }
    const gguf::TensorInfo* t = f_.find(name);
    if (!t) fail<ValueError>("llm", "expected a tensor ", name, " in the file, got none");
    if (!t->dtype) (void)f_.tensor(name);  // NotSupported, naming the tensor and its type
    return g_.param(name, TensorType{*t->dtype, to_shape(t->shape)});
  }

  // The products of x with each of `ws` (+ its bias): one quant_matmul over their fused
  // group where the model holds one (one pass over x, one kernel), split apart (one more).
  std::vector<Value> linears(Value x, const std::string& group, const std::vector<std::string>& ws,
                             const std::vector<std::string>& biases) {
    std::vector<Value> out;
    if (!fused_.count(group)) {
      for (size_t i = 0; i < ws.size(); ++i) out.push_back(linear(x, ws[i], biases[i]));
      return out;
    }
    IntList rows;
    for (const std::string& w : ws) rows.push_back(f_.find(w)->shape[0]);
    out = split(linear(x, group), 2, rows);
    for (size_t i = 0; i < ws.size(); ++i)
      if (!biases[i].empty()) out[i] = out[i] + weight(biases[i]);
    return out;
  }

  static std::vector<Value> split(Value x, int64_t axis, IntList sizes) {
    return op_n("split", {x}, {{"axis", axis}, {"sizes", std::move(sizes)}});
  }

  // A block's attention over the caches from its normalised input h. With
  // settings().decode_fusions (the default) one rope_attention_cached op (one kernel on the
  // CPU and CUDA), else the parts: a fused q/k/v product without biases (llama)
  // rotates the q and k heads as one tensor (one split before the rotation, one after,
  // instead of a slice and a rope per part).
  Value attention(int64_t l, Value h, Value positions, Value pos, Value k_cache, Value v_cache) {
    const int64_t H = c_.n_head, KVH = c_.n_kv_head, D = c_.head_dim;
    auto name = [&](const char* w) { return layer_name(l, w); };
    const std::string group = name("attn_qkv.weight");
    const bool fusions = settings().decode_fusions;
    auto parts = [&](Value q, Value k, Value v) {
      Value kc = op("kv_cache_write", {k_cache, k, pos});
      Value vc = op("kv_cache_write", {v_cache, v, pos});
      return op("attention_cached", {q, kc, vc, pos}, {{"scale", 1.0 / std::sqrt(double(D))}});
    };
    if (!fusions && fused_.count(group) && !c_.qkv_bias) {
      std::vector<Value> qk_v = split(linear(h, group), 2, {(H + KVH) * D, KVH * D});
      Value qk = rope(reshape(qk_v[0], {0, 0, H + KVH, D}), positions);
      std::vector<Value> q_k = split(qk, 2, {H, KVH});
      return parts(q_k[0], q_k[1], reshape(qk_v[1], {0, 0, KVH, D}));
    }
    auto bias = [&](const char* b) { return c_.qkv_bias ? name(b) : std::string(); };
    std::vector<Value> qkv =
        linears(h, group, {name("attn_q.weight"), name("attn_k.weight"), name("attn_v.weight")},
                {bias("attn_q.bias"), bias("attn_k.bias"), bias("attn_v.bias")});
    Value q = reshape(qkv[0], {0, 0, H, D}), k = reshape(qkv[1], {0, 0, KVH, D}),
          v = reshape(qkv[2], {0, 0, KVH, D});
    if (!fusions) return parts(rope(q, positions), rope(k, positions), v);
    std::vector<Value> in{q, k, v, k_cache, v_cache, positions, pos};
    if (c_.rope_freq_factors) in.push_back(weight("rope_freqs.weight"));
    return op_n("rope_attention_cached", in,
                {{"scale", 1.0 / std::sqrt(double(D))},
                 {"mode", c_.rope_mode},
                 {"n_rot", c_.n_rot},
                 {"base", c_.rope_base},
                 {"freq_scale", c_.rope_freq_scale}})[0];
  }

  // x [B, S, in] @ W^T (+ bias) with W [out, in] in its stored encoding.
  Value linear(Value x, const std::string& w, const std::string& bias = {}) {
    Attrs a;
    if (auto it = layouts_.find(w); it != layouts_.end()) a.set("layout", it->second);
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
    const int64_t H = c_.n_head, D = c_.head_dim;
    auto name = [&](const char* w) { return layer_name(l, w); };
    Value h = norm(x, name("attn_norm.weight"));
    Value o = attention(l, h, positions, pos, k_cache, v_cache);
    x = x + linear(reshape(o, {0, 0, H * D}), name("attn_output.weight"));
    h = norm(x, name("ffn_norm.weight"));
    // A fused gate / up product goes through swiglu whole (no split of it first).
    const std::string group = name("ffn_gate_up.weight");
    Value act;
    if (fused_.count(group)) {
      act = op("swiglu", {linear(h, group)});
    } else {
      act = op("silu", {linear(h, name("ffn_gate.weight"))}) * linear(h, name("ffn_up.weight"));
    }
    return x + linear(act, name("ffn_down.weight"));
  }

 private:
  const Config& c_;
  const gguf::File& f_;
  const std::map<std::string, std::string>& layouts_;
  const std::map<std::string, std::vector<std::string>>& fused_;
  Graph& g_;
};

// Host memory of n bytes in 2 MiB pages where the kernel grants them (transparent huge
// pages on request): a decode step streams every weight once, and with 4 KiB pages a 1B
// model's step walks ~500k page-table entries (10-20% of an f16 decode). One arena holds
// every streamed matrix, so small ones share huge pages too; its tail stays in small pages.
std::shared_ptr<uint8_t> weight_arena(size_t n, bool huge_pages) {
#if defined(__linux__)
  const size_t huge = size_t(1) << 21, len = (n + huge - 1) / huge * huge + huge;
  void* raw = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw != MAP_FAILED) {
    auto* base =
        reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + huge - 1) / huge * huge);
    if (huge_pages) madvise(base, n / huge * huge, MADV_HUGEPAGE);
    return std::shared_ptr<uint8_t>(base, [raw, len](uint8_t*) { munmap(raw, len); });
  }
#endif
  (void)huge_pages;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096));
  if (!p) fail<OutOfMemory>("llm", "expected ", n, " bytes for the weights, got none");
  return std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
}

// Gives back the whole pages of the mapping in [from, to) (read once, never again).
void release_pages(const uint8_t* from, const uint8_t* to) {
#if defined(__linux__)
  const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(from) + page - 1) / page * page;
  const uintptr_t last = reinterpret_cast<uintptr_t>(to) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
#else
  (void)from, (void)to;
#endif
}

// w held at `offset` in the arena (interleaved in groups of `rows` rows when > 1). The copy goes in
// slices of rows, each slice's source pages given back once it is done, so the process
// holds the weights once (plus a slice) even while it loads.
Tensor held_copy(const Tensor& w, int rows, const std::shared_ptr<uint8_t>& arena, size_t offset) {
  std::shared_ptr<uint8_t> keep = arena;
  Tensor t = Tensor::wrap(w.dtype(), w.shape(), arena.get() + offset, [keep](void*) {});
  const int64_t n = w.shape()[0], k = w.shape()[1];
  const size_t rb = w.nbytes() / size_t(std::max<int64_t>(n, 1));
  const int64_t slice =
      std::max<int64_t>(16, int64_t((size_t(1) << 21) / std::max<size_t>(rb, 1)) / 16 * 16);
  const auto* src = static_cast<const uint8_t*>(w.data());
  auto* dst = static_cast<uint8_t*>(t.data());
  for (int64_t r0 = 0; r0 < n; r0 += slice) {
    const int64_t count = std::min(slice, n - r0);
    if (rows > 1)
      quant::interleave(w.dtype(), rows, src + r0 * rb, dst + r0 * rb, count, k);
    else
      std::memcpy(dst + r0 * rb, src + r0 * rb, size_t(count) * rb);
    release_pages(src, src + (r0 + count) * rb);
  }
  return t;
}

}  // namespace

std::unique_ptr<Graph> Model::build_graph(int64_t batch, int64_t seq, const SamplerOptions& s,
                                          const std::string& logits, bool chain) const {
  const Config& c = config_;
  auto g = std::make_unique<Graph>("llm." + c.arch);
  Builder b(c, *file_, layouts_, fused_, *g);
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
  if (chain) {  // the next decode step's inputs, worked out where this step ran
    if (seq != 1)
      fail<ValueError>("llm.build_graph", "expected a chained step of one token, got ", seq);
    g->output(reshape(token, {batch, 1}), "next.tokens");
    g->output(positions + 1.0, "next.positions");
    g->output(pos + 1.0, "next.pos");
    g->output(rng + g->constant(Literal::from<int64_t>({0, 1}, {1, 2})), "next.rng");
    if (penalty) {
      Value kept =
          op("slice", {history},
             {{"starts", IntList{1}}, {"stops", IntList{INT64_MAX}}, {"axes", IntList{1}}});
      g->output(op("concat", {kept, reshape(token, {batch, 1})}, {{"axis", int64_t(1)}}),
                "next.history");
    }
  }
  return g;
}

// Per layer, q/k/v and gate/up as one weight each where the file allows it: the same
// implemented dtype and row length (and, for an interleaved form, parts of whole groups of
// 8 rows). llama.cpp's quantized mixes often keep attn_v in another type: those stay apart.
void Model::fuse_groups() {
  auto fusable = [&](const std::vector<std::string>& parts) {
    const gguf::TensorInfo* first = file_->find(parts[0]);
    if (!first || !first->dtype || first->shape.size() != 2) return false;
    for (const std::string& p : parts) {
      const gguf::TensorInfo* t = file_->find(p);
      if (!t || t->dtype != first->dtype || t->shape.size() != 2 ||
          t->shape[1] != first->shape[1] ||
          (quant::interleavable(*t->dtype, 8) && t->shape[0] % 8 != 0))
        return false;
    }
    return true;
  };
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    std::vector<std::string> qkv = {layer_name(l, "attn_q.weight"), layer_name(l, "attn_k.weight"),
                                    layer_name(l, "attn_v.weight")};
    std::vector<std::string> gate_up = {layer_name(l, "ffn_gate.weight"),
                                        layer_name(l, "ffn_up.weight")};
    if (fusable(qkv)) fused_[layer_name(l, "attn_qkv.weight")] = qkv;
    if (fusable(gate_up)) fused_[layer_name(l, "ffn_gate_up.weight")] = gate_up;
  }
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
  if (options.fuse.value_or(true)) m->fuse_groups();
  // Every tensor the graph reads, wrapped in the mapping (no copy on the CPU).
  auto g = m->build_graph(1, 1, SamplerOptions{}, "none");
  struct Held {
    std::string name;
    std::vector<Tensor> parts;  // one, or a fused group's in order
    int64_t rows;               // theirs in all
    int grouped;                // rows per interleaved group (1: plain)
    size_t offset;
  };
  std::vector<Held> held;
  size_t arena = 0;
  for (const Arg& a : g->args()) {
    if (a.kind != ArgKind::param) continue;
    std::vector<Tensor> parts;
    if (auto it = m->fused_.find(a.name); it != m->fused_.end())
      for (const std::string& p : it->second) parts.push_back(m->file_->tensor(p));
    else
      parts.push_back(m->file_->tensor(a.name));
    const Tensor& t = parts[0];
    int64_t rows = 0;
    size_t bytes = 0;
    for (const Tensor& p : parts) rows += p.shape()[0], bytes += p.nbytes();
    // What every decode step streams: the matrices quant_matmul reads (the embedding table
    // too when the output reuses it; otherwise it is read a row per token).
    const bool embd = a.name == "token_embd.weight";
    const bool streamed = t.rank() == 2 && (!embd || m->config_.tied_embeddings);
    // Whether the rows of every part split into whole groups of `rows`.
    auto whole = [&](int rows) {
      for (const Tensor& p : parts)
        if (p.shape()[0] % rows != 0) return false;
      return true;
    };
    if (!options.device.is_cpu()) {
      // The products' q8_0 / q4_k weights as tensor-core tiles (the embedding table stays
      // plain: a lookup reads its rows).
      const bool tiles = options.interleave && settings().cuda_tiles && !embd && t.rank() == 2 &&
                         quant::tileable(t.dtype()) && whole(16);
      if (parts.size() == 1 && !tiles) {
        m->weights_[a.name] = t.to(options.device);
        continue;
      }
      Tensor cat = Tensor::empty(t.dtype(), {rows, t.shape()[1]});
      size_t at = 0;
      for (const Tensor& p : parts) {
        auto* dst = static_cast<uint8_t*>(cat.data()) + at;
        if (tiles)
          quant::tile(p.dtype(), p.data(), dst, p.shape()[0], p.shape()[1]);
        else
          std::memcpy(dst, p.data(), p.nbytes());
        at += p.nbytes();
      }
      if (tiles) m->layouts_[a.name] = std::string(quant::kTiles16);
      m->weights_[a.name] = cat.to(options.device);
      continue;
    }
    // The CPU's layout, else groups of 8 (a form every CPU kernel reads), where the rows of
    // every part split into whole groups.
    int grouped = options.interleave && !embd ? quant::cpu_layout_rows(t.dtype()) : 1;
    if (grouped > 8 && !whole(grouped)) grouped = quant::interleavable(t.dtype(), 8) ? 8 : 1;
    if (!whole(grouped)) grouped = 1;
    if (grouped > 1) m->layouts_[a.name] = quant::layout_name(grouped);
    // A fused group is copied too: its parts lie one after another in the arena.
    if (grouped > 1 || parts.size() > 1 || (options.huge_pages && streamed)) {
      held.push_back({a.name, std::move(parts), rows, grouped, arena});
      arena += (bytes + 4095) / 4096 * 4096;
    } else {
      m->weights_[a.name] = t;
    }
  }
  if (!held.empty()) {
    std::shared_ptr<uint8_t> mem = weight_arena(arena, options.huge_pages);
    for (const Held& h : held) {
      size_t at = h.offset;
      for (const Tensor& p : h.parts) {
        (void)held_copy(p, h.grouped, mem, at);
        at += p.nbytes();
      }
      std::shared_ptr<uint8_t> keep = mem;
      const Tensor& t = h.parts[0];
      m->weights_[h.name] =
          Tensor::wrap(t.dtype(), {h.rows, t.shape()[1]}, mem.get() + h.offset, [keep](void*) {});
    }
  }
  return m;
}

const CompiledGraph& Model::compiled(int64_t batch, int64_t seq, const SamplerOptions& s,
                                     const std::string& logits, bool chain) {
  std::string key = std::to_string(batch) + "/" + std::to_string(seq) + "/" + logits +
                    (chain ? "/chain/" : "/") + std::to_string(s.temperature) + "/" +
                    std::to_string(s.top_k) + "/" + std::to_string(s.top_p) + "/" +
                    std::to_string(s.min_p) + "/" + std::to_string(s.repeat_penalty) + "/" +
                    std::to_string(s.repeat_last_n);
  auto it = compiled_.find(key);
  if (it != compiled_.end()) return it->second;
  auto g = build_graph(batch, seq, s, logits, chain);
  CompileOptions o;
  o.threads = options_.threads;
  o.cuda_graphs = options_.cuda_graphs;
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
