#include "op_tables/pass_graphs.h"

#include "rlx/kernel.h"
#include "rlx/train.h"

namespace rlx::test {

namespace {

Value layer_norm(Value x, const std::string& prefix) {
  Graph& g = *x.graph;
  Dim d = x.shape().back();
  return op("layer_norm", {x, g.param(prefix + ".scale", {x.dtype(), {d}}),
                           g.param(prefix + ".bias", {x.dtype(), {d}})});
}

Value block(Value x, const std::string& prefix, int64_t heads) {
  Graph& g = *x.graph;
  const int64_t d = x.shape().back().value(), dh = d / heads;
  auto w = [&](const std::string& name, int64_t rows, int64_t cols) {
    return g.param(prefix + name, {x.dtype(), {rows, cols}});
  };
  auto split = [&](Value v) { return transpose(reshape(v, {0, 0, heads, dh}), {0, 2, 1, 3}); };
  Value h = layer_norm(x, prefix + ".ln1");
  Value q = split(matmul(h, w(".wq", d, d))), k = split(matmul(h, w(".wk", d, d)));
  Value v = split(matmul(h, w(".wv", d, d)));
  Value a = op("attention", {q, k, v}, {{"mask", "causal"}});
  x = x + matmul(reshape(transpose(a, {0, 2, 1, 3}), {0, 0, d}), w(".wo", d, d));
  h = layer_norm(x, prefix + ".ln2");
  h = gelu(matmul(h, w(".w1", d, 4 * d)) + g.param(prefix + ".b1", {x.dtype(), {4 * d}}));
  return x + (matmul(h, w(".w2", 4 * d, d)) + g.param(prefix + ".b2", {x.dtype(), {d}}));
}

std::unique_ptr<Graph> train_step(const Graph& model, Remat remat) {
  train::TrainerOptions o;
  o.remat = remat;
  o.compile.opt_level = 0;
  train::Trainer t(model, o);
  return t.train_graph().clone();
}

}  // namespace

std::unique_ptr<Graph> gpt_train_graph(const TrainGraphOptions& c) {
  Graph g("gpt_train");
  Dim batch = Dim::sym("batch"), seq = Dim::sym("seq");
  Value tokens = g.input("tokens", {DType::i64, {batch, seq}});
  Value pos = g.input("pos", {DType::i64, {seq}});
  Value table = g.param("tok_emb", {DType::f32, {c.vocab, c.d_model}});
  Value x = op("embedding", {table, tokens}) +
            op("embedding", {g.param("pos_emb", {DType::f32, {c.context, c.d_model}}), pos});
  for (int64_t i = 0; i < c.layers; ++i) {
    x = block(x, str_cat("blocks.", i), c.heads);
    if (c.remat == Remat::checkpoints) x = op("checkpoint", {x});
  }
  Value logits = matmul(layer_norm(x, "ln_f"), transpose(table, {1, 0}));
  g.output(op("cross_entropy", {logits, g.input("targets", {DType::i64, {batch, seq}})}), "loss");
  return train_step(g, c.remat);
}

void register_effect_op() {
  static bool once = [] {
    OpDef d;
    d.name = "test.effect";
    d.traits = Trait::side_effect;
    d.arity(1);
    d.infer = [](const InferContext&) { return std::vector<TensorType>{}; };
    d.doc = "Does nothing, visibly: a side effect.";
    OpRegistry::global().add(std::move(d));
    KernelRegistry::global().add(
        "test.effect", DeviceKind::cpu,
        [](const KernelContext&, std::span<const Tensor>, std::span<Tensor>) {});
    return true;
  }();
  (void)once;
}

size_t count_op(const Graph& g, std::string_view name) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op_name() == name;
  return n;
}

}  // namespace rlx::test
