// The main job of `make demo`: build a small transformer classifier through the C++ API,
// then print it in the text format with the types rlx inferred for every value.
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

    // Bad input is a typed error naming the op, never a crash.
    try {
      matmul(x, w1 + b2);
    } catch (const Error& e) {
      std::printf("-- a rejected builder call: %s\n", e.what());
    }
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-demo: %s\n", e.what());
    return 1;
  }
}
