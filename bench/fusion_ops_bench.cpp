// rlx-bench-fusion: the fused ops against their unfused graphs on the CPU. Each row builds
// one small graph and times it compiled without passes (the core ops, one kernel each)
// and with the default pipeline (layout_sinking, matmul / conv / attention fusion, ...),
// reporting the median of several runs and which fused op the pipeline produced.
//
//   rlx-bench-fusion [--quick]
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "bench.h"
#include "rlx/rlx.h"

namespace {

using namespace rlx;

struct Case {
  std::string name;
  std::function<std::unique_ptr<Graph>()> build;
};

Tensor random(const TensorType& t, uint64_t seed) {
  std::vector<int64_t> shape = static_sizes(t.shape);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (double& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = double(s % 2001) / 1000.0 - 1.0;
  }
  return Tensor::from_doubles(t.dtype, shape, v);
}

// Median ms of one run of g compiled with `opt_level`; `fused` gets the ops the
// compiled graph holds that are not in the source graph.
double time_graph(const Graph& g, int opt_level, int runs, std::string* fused) {
  CompileOptions o;
  o.opt_level = opt_level;
  CompiledGraph cg = Session().compile(g, o);
  std::vector<Tensor> inputs;
  uint64_t seed = 1;
  for (const Arg& a : g.args()) {
    Tensor t = random(a.value.type(), seed++);
    if (a.kind == ArgKind::param)
      cg.set_param(a.name, t);
    else
      inputs.push_back(t);
  }
  if (fused) {
    for (const Node& n : cg.lowered().nodes()) {
      bool known = false;
      for (const Node& m : g.nodes()) known |= m.op_name() == n.op_name();
      if (!known && fused->find(n.op_name()) == std::string::npos)
        *fused += (fused->empty() ? "" : "+") + n.op_name();
    }
  }
  auto st = bench::measure([&] { cg.run(inputs); }, 2, runs);
  return st.median * 1e3;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  // BERT-base FFN up-projection: [1024 tokens, 768] x [768, 3072] + bias, gelu.
  c.push_back({"linear+bias+gelu [1024,768]x[768,3072]", [] {
                 auto g = std::make_unique<Graph>();
                 Value x = g->input("x", {DType::f32, {1024, 768}});
                 Value w = g->param("w", {DType::f32, {768, 3072}});
                 Value b = g->param("b", {DType::f32, {3072}});
                 g->output(gelu(matmul(x, w) + b), "y");
                 return g;
               }});
  // The same with the weight stored [out, in] (PyTorch / ONNX Gemm transB): x @ w^T.
  c.push_back({"x @ transpose(w) [1024,768]x[3072,768]^T", [] {
                 auto g = std::make_unique<Graph>();
                 Value x = g->input("x", {DType::f32, {1024, 768}});
                 Value w = g->param("w", {DType::f32, {3072, 768}});
                 g->output(matmul(x, transpose(w, {1, 0})), "y");
                 return g;
               }});
  c.push_back({"linear+bias+relu, w^T [1024,3072]x[768,3072]^T", [] {
                 auto g = std::make_unique<Graph>();
                 Value x = g->input("x", {DType::f32, {1024, 3072}});
                 Value w = g->param("w", {DType::f32, {768, 3072}});
                 Value b = g->param("b", {DType::f32, {768}});
                 g->output(relu(matmul(x, transpose(w, {1, 0})) + b), "y");
                 return g;
               }});
  // BERT-base self-attention core: 8 x 12 heads, 128 tokens, d 64, scaled softmax.
  c.push_back({"attention 8x12 heads, s=128, d=64", [] {
                 auto g = std::make_unique<Graph>();
                 TensorType t{DType::f32, {8, 12, 128, 64}};
                 Value q = g->input("q", t), k = g->input("k", t), v = g->input("v", t);
                 Value s = matmul(q, transpose(k, {0, 1, 3, 2})) * 0.125;
                 g->output(matmul(softmax(s, -1), v), "y");
                 return g;
               }});
  // A ResNet-50 stage-1 3x3 conv with bias and relu, batch 8.
  c.push_back({"conv3x3+bias+relu [8,64,56,56]", [] {
                 auto g = std::make_unique<Graph>();
                 Value x = g->input("x", {DType::f32, {8, 64, 56, 56}});
                 Value w = g->param("w", {DType::f32, {64, 64, 3, 3}});
                 Value b = g->param("b", {DType::f32, {1, 64, 1, 1}});
                 Value y = op("conv", {x, w}, {{"pads", IntList{1, 1, 1, 1}}});
                 g->output(relu(y + b), "y");
                 return g;
               }});
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int runs = quick ? 3 : 15;
  std::printf("%-48s %10s %10s %8s  %s\n", "case", "unfused", "fused", "speedup", "fused ops");
  for (const Case& c : cases()) {
    auto g = c.build();
    std::string fused;
    double base = time_graph(*g, 0, runs, nullptr);
    double opt = time_graph(*g, 2, runs, &fused);
    std::printf("%-48s %8.2fms %8.2fms %7.2fx  %s\n", c.name.c_str(), base, opt, base / opt,
                fused.c_str());
  }
  return 0;
}
