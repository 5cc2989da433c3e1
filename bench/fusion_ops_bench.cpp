// rlx-bench-fusion: the fused ops against their unfused graphs on the CPU. Each row builds
// one small graph and times it compiled without passes (the core ops, one kernel each)
// and with the default pipeline (layout_sinking, matmul / conv / attention fusion, ...),
// reporting the best and median of several runs and the fused ops the pipeline made.
//
//   rlx-bench-fusion [--quick]
#include <algorithm>
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

// g compiled with `opt_level`, its args bound to random values.
struct Compiled {
  CompiledGraph cg;
  std::vector<Tensor> inputs;
};

Compiled compile(const Graph& g, int opt_level) {
  CompileOptions o;
  o.opt_level = opt_level;
  Compiled c{Session().compile(g, o), {}};
  uint64_t seed = 1;
  for (const Arg& a : g.args()) {
    Tensor t = random(a.value.type(), seed++);
    if (a.kind == ArgKind::param)
      c.cg.set_param(a.name, t);
    else
      c.inputs.push_back(t);
  }
  return c;
}

// The ops of the compiled graph that the source graph does not have.
std::string new_ops(const Graph& g, const Graph& lowered) {
  std::string out;
  for (const Node& n : lowered.nodes()) {
    bool known = false;
    for (const Node& m : g.nodes()) known |= m.op_name() == n.op_name();
    if (!known && out.find(n.op_name()) == std::string::npos)
      out += (out.empty() ? "" : "+") + n.op_name();
  }
  return out;
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
  int runs = quick ? 3 : 21;
  // The two versions run alternately, so that load from elsewhere on the machine hits
  // both alike; the minimum is the least disturbed run.
  std::printf("%-48s %19s %19s %8s  %s\n", "case", "unfused min / med", "fused min / med",
              "speedup", "fused ops");
  for (const Case& c : cases()) {
    auto g = c.build();
    Compiled base = compile(*g, 0), opt = compile(*g, 2);
    std::vector<double> tb, to;
    for (int i = 0; i < runs + 2; ++i) {
      auto b = bench::measure([&] { base.cg.run(base.inputs); }, 0, 1);
      auto o = bench::measure([&] { opt.cg.run(opt.inputs); }, 0, 1);
      if (i < 2) continue;  // warm-up
      tb.push_back(b.min * 1e3);
      to.push_back(o.min * 1e3);
    }
    std::sort(tb.begin(), tb.end());
    std::sort(to.begin(), to.end());
    std::printf("%-48s %7.2f / %7.2f ms %7.2f / %7.2f ms %7.2fx  %s\n", c.name.c_str(), tb[0],
                tb[tb.size() / 2], to[0], to[to.size() / 2], tb[0] / to[0],
                new_ops(*g, opt.cg.lowered()).c_str());
  }
  return 0;
}
