// Generation: the KV caches allocated once, prefill and decode through the model's
// compiled step graphs, one token id per sequence in and out per step. The step's small
// inputs (token, positions, rng state, history) are tensors made once and rewritten in
// place, so a decode step allocates nothing of its own.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <optional>

#include "rlx/cuda.h"
#include "rlx/error.h"
#include "rlx/settings.h"
#include "rlx_llm/llm.h"

namespace rlx::llm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool uses_history(const SamplerOptions& s) {
  return s.repeat_penalty != 1.0 && s.repeat_last_n > 0;
}

// The graph's inputs in declaration order: tokens, positions, pos, rng, [history], then
// each layer's k and v cache.
std::vector<Tensor> step_inputs(const Tensor& tokens, const Tensor& positions, const Tensor& pos,
                                const Tensor& rng, const Tensor& history,
                                const std::vector<Tensor>& k, const std::vector<Tensor>& v) {
  std::vector<Tensor> in{tokens, positions, pos, rng};
  if (history.defined()) in.push_back(history);
  for (size_t l = 0; l < k.size(); ++l) {
    in.push_back(k[l]);
    in.push_back(v[l]);
  }
  return in;
}

// The last `n` ids of `h` (newest last), -1 where there are fewer.
void fill_history(int32_t* dst, const std::vector<int32_t>& h, int64_t n) {
  int64_t have = std::min<int64_t>(n, int64_t(h.size()));
  std::fill(dst, dst + (n - have), -1);
  std::copy(h.end() - have, h.end(), dst + (n - have));
}

std::vector<Tensor> make_caches(const Model& m, int64_t batch) {
  const Config& c = m.config();
  std::vector<Tensor> out;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Tensor t = Tensor::zeros(m.options().kv_dtype, {batch, c.n_kv_head, m.ctx(), c.head_dim});
    out.push_back(m.options().device.is_cpu() ? t : t.to(m.options().device));
  }
  return out;
}

}  // namespace

Model::Caches Model::take_caches(int64_t batch) {
  {
    std::lock_guard lock(caches_mu_);
    for (auto it = spare_caches_.begin(); it != spare_caches_.end(); ++it)
      if (it->batch == batch) {
        Caches c = std::move(*it);
        spare_caches_.erase(it);
        return c;
      }
  }
  return {batch, make_caches(*this, batch), make_caches(*this, batch)};
}

void Model::give_caches(Caches c) {
  std::lock_guard lock(caches_mu_);
  spare_caches_.push_back(std::move(c));
}

Generator::Generator(Model& model, SamplerOptions sampler)
    : model_(model), sampler_(sampler), batch_(model.options().batch) {
  caches_ = model.take_caches(batch_);
  pos_.assign(size_t(batch_), 0);
  history_.resize(size_t(batch_));
  counter_.assign(size_t(batch_), 0);
  tokens_ = Tensor::empty(DType::i32, {batch_, 1});
  positions_ = Tensor::empty(DType::i32, {batch_, 1});
  pos_in_ = Tensor::empty(DType::i32, {batch_});
  rng_ = Tensor::empty(DType::i64, {batch_, 2});
  if (uses_history(sampler_))
    history_in_ = Tensor::empty(DType::i32, {batch_, sampler_.repeat_last_n});
}

// A cache's rows past a sequence's position are never read (attention reads the first
// pos + n), so the next Generator takes them as they are.
Generator::~Generator() { model_.give_caches(std::move(caches_)); }

int32_t Generator::prefill(std::span<const int32_t> ids, int64_t seq) {
  if (seq < 0 || seq >= batch_)
    fail<ValueError>("llm.prefill", "expected a sequence in [0, ", batch_, "), got ", seq);
  auto n = int64_t(ids.size());
  if (n < 1 || n > model_.ctx())
    fail<ValueError>("llm.prefill", "expected 1 to ", model_.ctx(), " prompt tokens (--ctx), got ",
                     n);
  for (int32_t t : ids)
    if (t < 0 || t >= model_.config().vocab)
      fail<ValueError>("llm.prefill", "expected token ids in [0, ", model_.config().vocab,
                       "), got ", t);
  auto t0 = std::chrono::steady_clock::now();
  auto& hist = history_[size_t(seq)];
  hist.assign(ids.begin(), ids.end());
  counter_[size_t(seq)] = 0;
  Tensor rng = Tensor::from_vector<int64_t>({int64_t(sampler_.seed) + seq, 0}, {1, 2});
  Tensor history;
  if (uses_history(sampler_)) {
    history = Tensor::empty(DType::i32, {1, sampler_.repeat_last_n});
    fill_history(history.data_as<int32_t>(), hist, sampler_.repeat_last_n);
  }
  std::vector<Tensor> k, v;
  for (size_t l = 0; l < caches_.k.size(); ++l) {  // this sequence's rows: views, no copy
    k.push_back(batch_ == 1 ? caches_.k[l] : caches_.k[l].slice(0, seq, seq + 1));
    v.push_back(batch_ == 1 ? caches_.v[l] : caches_.v[l].slice(0, seq, seq + 1));
  }
  // Steps of at most `chunk` tokens; only the last one's sample (and logits) are kept.
  const int64_t chunk = model_.options().prefill_chunk > 0 ? model_.options().prefill_chunk : n;
  int32_t next = 0;
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t len = std::min(chunk, n - at);
    const bool last = at + len == n;
    const CompiledGraph& cg =
        model_.compiled(1, len, sampler_, last && keep_logits ? "last" : "none");
    Tensor tokens = Tensor::from_data(DType::i32, {1, len}, ids.data() + at);
    Tensor positions = Tensor::empty(DType::i32, {1, len});
    for (int64_t i = 0; i < len; ++i) positions.data_as<int32_t>()[i] = int32_t(at + i);
    Tensor pos = Tensor::from_vector<int32_t>({int32_t(at)}, {1});
    std::vector<Tensor> out = cg.run(step_inputs(tokens, positions, pos, rng, history, k, v));
    if (!last) continue;
    next = out[0].to(Device::cpu()).data_as<int32_t>()[0];
    if (keep_logits) last_logits_ = out[1].to(Device::cpu()).reshape({model_.config().vocab});
  }
  pos_[size_t(seq)] = n;
  counter_[size_t(seq)] = 1;
  hist.push_back(next);
  stats_.prompt_tokens += n;
  stats_.prefill_seconds += seconds_since(t0);
  return next;
}

void Generator::set_inputs(std::span<const int32_t> last, int64_t steps) {
  if (int64_t(last.size()) != batch_)
    fail<ValueError>("llm.step", "expected one token per sequence (", batch_, "), got ",
                     last.size());
  for (int64_t b = 0; b < batch_; ++b) {
    if (pos_[size_t(b)] + steps > model_.ctx())
      fail<ValueError>("llm.step", "expected room for ", steps, " more tokens in the context of ",
                       model_.ctx(), " (--ctx), got sequence ", b, " at position ",
                       pos_[size_t(b)]);
    tokens_.data_as<int32_t>()[b] = last[size_t(b)];
    positions_.data_as<int32_t>()[b] = int32_t(pos_[size_t(b)]);
    pos_in_.data_as<int32_t>()[b] = int32_t(pos_[size_t(b)]);
    rng_.data_as<int64_t>()[2 * b] = int64_t(sampler_.seed) + b;
    rng_.data_as<int64_t>()[2 * b + 1] = int64_t(counter_[size_t(b)]);
    if (history_in_.defined())
      fill_history(history_in_.data_as<int32_t>() + b * sampler_.repeat_last_n, history_[size_t(b)],
                   sampler_.repeat_last_n);
  }
}

void Generator::accept(std::span<const int32_t> next) {
  for (int64_t b = 0; b < batch_; ++b) {
    ++pos_[size_t(b)];
    ++counter_[size_t(b)];
    history_[size_t(b)].push_back(next[size_t(b)]);
  }
  stats_.generated_tokens += batch_;
}

std::vector<int32_t> Generator::step(std::span<const int32_t> last) {
  set_inputs(last, 1);
  auto t0 = std::chrono::steady_clock::now();
  if (!decode_ || decode_logits_ != keep_logits) {  // not a map lookup per token
    decode_ = &model_.compiled(batch_, 1, sampler_, keep_logits ? "last" : "none");
    decode_logits_ = keep_logits;
  }
  std::vector<Tensor> out = decode_->run(
      step_inputs(tokens_, positions_, pos_in_, rng_, history_in_, caches_.k, caches_.v));
  Tensor ids = out[0].to(Device::cpu());
  std::vector<int32_t> next(ids.data_as<int32_t>(), ids.data_as<int32_t>() + batch_);
  if (keep_logits) last_logits_ = out[1].to(Device::cpu());
  accept(next);
  stats_.decode_seconds += seconds_since(t0);
  return next;
}

int64_t Generator::decode(std::span<const int32_t> last, int64_t n,
                          const std::function<bool(std::span<const int32_t>)>& on_step) {
  if (n <= 0) return 0;
  if (!settings().llm_chain || keep_logits) {  // the logits leave every step anyway
    std::vector<int32_t> t(last.begin(), last.end());
    for (int64_t i = 0; i < n; ++i) {
      t = step(t);
      if (on_step && !on_step(t)) return i + 1;
    }
    return n;
  }
  set_inputs(last, n);
  auto t0 = std::chrono::steady_clock::now();
  const CompiledGraph& cg = model_.compiled(batch_, 1, sampler_, "none", /*chain=*/true);
  // On a GPU each step's tokens come back while the next step runs; on the CPU they are
  // there when the step returns.
  const Device device = model_.options().device;
  std::optional<cuda::Pipeline> pipe;
  if (!device.is_cpu()) pipe.emplace(device.index);
  std::deque<Tensor> done;
  const size_t ahead = pipe ? 1 : 0;
  auto queued = [&] { return pipe ? pipe->queued() : done.size(); };
  int64_t taken = 0;
  auto take = [&] {
    Tensor ids = pipe ? pipe->take() : done.front();
    if (!pipe) done.pop_front();
    std::span<const int32_t> next(ids.data_as<int32_t>(), size_t(batch_));
    accept(next);
    ++taken;
    return !on_step || on_step(next);
  };
  // Outputs: token, then the next step's tokens, positions, pos, rng [, history].
  Tensor tokens = tokens_, positions = positions_, pos = pos_in_, rng = rng_, history = history_in_;
  bool go = true;
  for (int64_t i = 0; i < n && go; ++i) {
    std::vector<Tensor> out =
        cg.run(step_inputs(tokens, positions, pos, rng, history, caches_.k, caches_.v));
    if (pipe)
      pipe->read_back(out[0]);
    else
      done.push_back(out[0]);
    tokens = out[1], positions = out[2], pos = out[3], rng = out[4];
    if (history.defined()) history = out[5];
    if (queued() > ahead) go = take();
  }
  while (go && queued() > 0) go = take();
  if (pipe) pipe->finish();
  stats_.decode_seconds += seconds_since(t0);
  return taken;
}

Tensor Model::logits(std::span<const int32_t> ids, bool all) {
  auto n = int64_t(ids.size());
  if (n < 1 || n > ctx_) fail<ValueError>("llm.logits", "expected 1 to ", ctx_, " tokens, got ", n);
  for (int32_t t : ids)
    if (t < 0 || t >= config_.vocab)
      fail<ValueError>("llm.logits", "expected token ids in [0, ", config_.vocab, "), got ", t);
  SamplerOptions greedy;
  greedy.temperature = 0;
  const CompiledGraph& cg = compiled(1, n, greedy, all ? "all" : "last");
  Tensor tokens = Tensor::from_data(DType::i32, {1, n}, ids.data());
  Tensor positions = Tensor::empty(DType::i32, {1, n});
  for (int64_t i = 0; i < n; ++i) positions.data_as<int32_t>()[i] = int32_t(i);
  std::vector<Tensor> k = make_caches(*this, 1), v = make_caches(*this, 1);
  std::vector<Tensor> out = cg.run(step_inputs(tokens, positions, Tensor::zeros(DType::i32, {1}),
                                               Tensor::zeros(DType::i64, {1, 2}), Tensor(), k, v));
  Tensor l = out[1].to(Device::cpu());
  return all ? l.reshape({n, config_.vocab}) : l.reshape({config_.vocab});
}

std::vector<int32_t> generate(Model& model, std::span<const int32_t> prompt, int64_t n,
                              const SamplerOptions& sampler,
                              const std::function<void(const std::string&)>& on_piece,
                              GenerationStats* stats) {
  Generator gen(model, sampler);
  StreamDecoder text(model.tokenizer());
  std::vector<int32_t> out;
  if (n <= 0) return out;
  auto emit = [&](int32_t t) {
    out.push_back(t);
    if (on_piece) on_piece(text.push(t));
    return int64_t(out.size()) < n && !model.tokenizer().is_eog(t) && gen.position() < model.ctx();
  };
  int32_t t = gen.prefill(prompt);
  if (emit(t))
    gen.decode(std::span(&t, 1), std::min(n - 1, model.ctx() - gen.position()),
               [&](std::span<const int32_t> next) { return emit(next[0]); });
  if (on_piece) on_piece(text.flush());
  if (stats) *stats = gen.stats();
  return out;
}

}  // namespace rlx::llm
