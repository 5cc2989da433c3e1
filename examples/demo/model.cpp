#include "model.h"

#include <cmath>

#include "rlx/ops.h"
#include "rlx/train.h"

namespace demo {

using namespace rlx;

namespace {

Value param(Graph& g, const std::string& name, DType dt, Shape shape) {
  return g.param(name, {dt, std::move(shape)});
}

Value layer_norm(Value x, const std::string& prefix) {
  Graph& g = *x.graph;
  Dim d = x.shape().back();
  return op("layer_norm", {x, param(g, prefix + ".scale", x.dtype(), {d}),
                           param(g, prefix + ".bias", x.dtype(), {d})});
}

// [batch, seq, heads * dh] <-> [batch, heads, seq, dh]: the layout `attention` wants.
Value split_heads(Value x, int64_t heads) {
  int64_t dh = x.shape().back().value() / heads;
  return transpose(reshape(x, {0, 0, heads, dh}), {0, 2, 1, 3});
}
Value merge_heads(Value x) {
  int64_t d = x.shape()[1].value() * x.shape()[3].value();
  return reshape(transpose(x, {0, 2, 1, 3}), {0, 0, d});
}

}  // namespace

Value transformer_block(Value x, const std::string& prefix, int64_t heads, bool causal,
                        bool gelu_tanh) {
  Graph& g = *x.graph;
  const DType dt = x.dtype();
  const int64_t d = x.shape().back().value();
  auto weight = [&](const std::string& name, int64_t rows, int64_t cols) {
    return param(g, prefix + name, dt, {rows, cols});
  };

  Value h = layer_norm(x, prefix + ".ln1");
  Value q = split_heads(matmul(h, weight(".attn.wq", d, d)), heads);
  Value k = split_heads(matmul(h, weight(".attn.wk", d, d)), heads);
  Value v = split_heads(matmul(h, weight(".attn.wv", d, d)), heads);
  Value a = op("attention", {q, k, v}, {{"mask", causal ? "causal" : "none"}});
  x = x + matmul(merge_heads(a), weight(".attn.wo", d, d));

  h = layer_norm(x, prefix + ".ln2");
  h = gelu(matmul(h, weight(".mlp.w1", d, 4 * d)) + param(g, prefix + ".mlp.b1", dt, {4 * d}),
           gelu_tanh);
  return x + (matmul(h, weight(".mlp.w2", 4 * d, d)) + param(g, prefix + ".mlp.b2", dt, {d}));
}

std::unique_ptr<Graph> build_gpt(const GptConfig& cfg, bool with_loss) {
  auto g = std::make_unique<Graph>(with_loss ? "gpt_train" : "gpt");
  const DType dt = cfg.dtype;
  Dim batch = Dim::sym("batch"), seq = Dim::sym("seq");
  Value tokens = g->input("tokens", {DType::i64, {batch, seq}});
  Value pos = g->input("pos", {DType::i64, {seq}});
  Value table = param(*g, "tok_emb", dt, {cfg.vocab, cfg.d_model});

  // [batch, seq, d] + [seq, d]: the position rows broadcast over the batch.
  Value x = op("embedding", {table, tokens}) +
            op("embedding", {param(*g, "pos_emb", dt, {cfg.context, cfg.d_model}), pos});
  for (int64_t i = 0; i < cfg.layers; ++i)
    x = transformer_block(x, "blocks." + std::to_string(i), cfg.heads, true, cfg.gelu_tanh);
  x = layer_norm(x, "ln_f");
  Value logits = matmul(x, transpose(table, {1, 0}));  // tied head: h @ tok_emb^T

  if (with_loss) {
    Value targets = g->input("targets", {DType::i64, {batch, seq}});
    g->output(op("cross_entropy", {logits, targets}), "loss");
  } else {
    g->output(logits, "logits");
  }
  return g;
}

TensorMap init_params(const Graph& g, int64_t layers, uint64_t seed) {
  auto ends_with = [](const std::string& s, const char* tail) {
    std::string t(tail);
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  TensorMap params;
  for (const Arg& a : g.args()) {
    if (a.kind != ArgKind::param) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : a.value.shape()) shape.push_back(d.value());
    const DType dt = a.value.dtype();
    if (ends_with(a.name, ".scale")) {
      params[a.name] = Tensor::full(dt, shape, 1.0);
    } else if (ends_with(a.name, ".bias") || ends_with(a.name, ".b1") || ends_with(a.name, ".b2")) {
      params[a.name] = Tensor::zeros(dt, shape);
    } else {
      bool residual = ends_with(a.name, ".wo") || ends_with(a.name, ".w2");
      double std = residual ? 0.02 / std::sqrt(2.0 * double(layers)) : 0.02;
      params[a.name] = train::normal(shape, 0.0, std, seed++, dt);
    }
  }
  return params;
}

Tensor positions(int64_t seq) {
  std::vector<int64_t> p(static_cast<size_t>(seq));
  for (int64_t i = 0; i < seq; ++i) p[size_t(i)] = i;
  return Tensor::from_vector(p, {seq});
}

}  // namespace demo
