// The main job of `make demo`: build a small transformer classifier through the C++ API,
// print it in the text format with the types rlx inferred for every value, then compile
// it for the CPU and run it.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include "rlx/rlx.h"

using namespace rlx;

int main() {
  try {
    Graph g("classifier");
    const int64_t d = 64, hidden = 256, classes = 10;
    // Inputs with symbolic batch and sequence dims; the labels are class indices.
    Value x = g.input("x", {DType::f32, {Dim::sym("batch"), Dim::sym("seq"), d}});
    Value labels = g.input("labels", {DType::i64, {Dim::sym("batch")}});
    auto param = [&](const char* name, Shape s) { return g.param(name, {DType::f32, s}); };
    Value ln_scale = param("ln_scale", {d}), ln_bias = param("ln_bias", {d});
    Value wq = param("wq", {d, d}), wk = param("wk", {d, d}), wv = param("wv", {d, d});
    Value w1 = param("w1", {d, hidden}), b1 = param("b1", {hidden});
    Value w2 = param("w2", {hidden, d}), b2 = param("b2", {d});
    Value head = param("head", {d, classes});

    // Pre-norm causal self-attention block with a GELU MLP, then mean-pool and classify.
    Value h = op("layer_norm", {x, ln_scale, ln_bias});
    Value attn =
        op("attention", {matmul(h, wq), matmul(h, wk), matmul(h, wv)}, {{"mask", "causal"}});
    Value x2 = x + attn;
    Value x3 = x2 + (matmul(gelu(matmul(x2, w1) + b1, /*tanh_approx=*/true), w2) + b2);
    Value logits = matmul(mean(x3, {1}), head);
    Value loss = op("cross_entropy", {logits, labels}, {{"label_smoothing", 0.1}});
    g.output(logits, "logits");
    g.output(loss, "loss");
    verify(g);

    std::printf("rlx %s: %zu ops registered\n\n", kVersion, OpRegistry::global().all().size());
    std::string text = print_graph(g);
    std::printf("-- the graph in rlx's text format --\n%s\n", text.c_str());

    std::printf("-- inferred types (the builder was never given an output shape) --\n");
    for (const Node& n : g.nodes()) {
      std::string outs;
      for (Value v : n.outputs) outs += (outs.empty() ? "" : ", ") + v.type().str();
      std::printf("  %-12s -> %s\n", n.op_name().c_str(), outs.c_str());
    }
    std::map<std::string, int> histogram;
    for (const Node& n : g.nodes()) histogram[n.op_name()]++;
    std::printf("\n-- %zu nodes:", g.nodes().size());
    for (const auto& [name, count] : histogram) std::printf(" %s×%d", name.c_str(), count);

    // The text round-trips: parse it back and print it again, byte for byte.
    auto parsed = parse_graph(text);
    verify(*parsed);
    bool same = print_graph(*parsed) == text;
    std::printf("\n-- text round trip: %s\n", same ? "identical" : "DIFFERENT");

    // Compile for the CPU and run it with two bindings of (batch, seq).
    CompiledGraph cg = Session(Device::cpu()).compile(g);
    std::printf("\n-- %s", cg.report().str().c_str());
    uint64_t state = 42;
    auto random = [&](DType dt, std::vector<int64_t> shape, double scale, int64_t mod = 0) {
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      std::vector<double> v(static_cast<size_t>(n));
      for (auto& e : v) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        double u = double(state >> 11) * 0x1.0p-53;
        e = mod ? double(int64_t(u * double(mod))) : scale * (2 * u - 1);
      }
      return Tensor::from_doubles(dt, std::move(shape), v);
    };
    for (const Arg& a : cg.lowered().args()) {
      if (a.kind != ArgKind::param) continue;
      std::vector<int64_t> shape;
      for (const Dim& dim : a.value.shape()) shape.push_back(dim.value());
      cg.set_param(a.name, random(DType::f32, shape, 1 / std::sqrt(double(shape[0]))));
    }
    for (auto [batch, seq] : {std::pair<int64_t, int64_t>{4, 16}, {8, 32}}) {
      TensorMap out = cg.run({{"x", random(DType::f32, {batch, seq, d}, 1.0)},
                              {"labels", random(DType::i64, {batch}, 0, classes)}});
      auto logits = out.at("logits").to_vector<float>();
      std::printf(
          "-- run with batch=%lld seq=%lld: logits %s, loss %.4f, logits[0][:3] = "
          "%.4f %.4f %.4f\n",
          (long long)batch, (long long)seq, out.at("logits").type().str().c_str(),
          double(out.at("loss").to_vector<float>()[0]), double(logits[0]), double(logits[1]),
          double(logits[2]));
    }
    std::printf("-- plans cached (one per binding of the symbolic dims): %zu\n", cg.cached_plans());

    // Bad input is a typed error naming the op, never a crash.
    try {
      matmul(x, w1 + b2);
    } catch (const Error& e) {
      std::printf("-- a rejected builder call: %s\n", e.what());
    }
    try {
      cg.run({{"x", Tensor::zeros(DType::f32, {2, 3, d})},
              {"labels", Tensor::zeros(DType::i64, {3})}});
    } catch (const Error& e) {
      std::printf("-- a rejected run: %s\n", e.what());
    }
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-demo: %s\n", e.what());
    return 1;
  }
}
