// A downstream program against an installed rlx: it checks the library's version against
// its headers', registers an op with a CPU kernel and runs it in a compiled graph, runs an
// ONNX model against its expected output, and calls into each installed package.
//
//   consumer MODEL.onnx INPUT.pb OUTPUT.pb
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "rlx/onnx.h"
#include "rlx/rlx.h"
#include "rlx_linalg/linalg.h"
#include "rlx_llm/tokenizer.h"
#include "rlx_sparse/sparse.h"
#ifdef CONSUMER_HAVE_DIST
#include "rlx/dist.h"
#endif

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("consumer: %s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

// consumer.scaled_square(x) {scale} = scale * x * x, with a CPU kernel for f32.
void register_scaled_square() {
  rlx::OpDef d;
  d.name = "consumer.scaled_square";
  d.traits = rlx::Trait::elementwise;
  d.arity(1).attr("scale", rlx::AttrKind::Float, 1.0);
  d.doc = "scale * x * x";
  d.infer = [](const rlx::InferContext& ctx) {
    if (ctx.dtype(0) != rlx::DType::f32) ctx.fail_type("expected f32, got ", ctx.input(0).str());
    return std::vector<rlx::TensorType>{ctx.input(0)};
  };
  rlx::OpRegistry::global().add(std::move(d));
  rlx::KernelRegistry::global().add(
      "consumer.scaled_square", rlx::DeviceKind::cpu,
      [](const rlx::KernelContext& ctx, std::span<const rlx::Tensor> in,
         std::span<rlx::Tensor> out) {
        float scale = float(ctx.attrs.get_float("scale"));
        const float* x = in[0].data_as<float>();
        float* y = out[0].data_as<float>();
        for (int64_t i = 0; i < in[0].numel(); ++i) y[i] = scale * x[i] * x[i];
      });
}

void custom_op() {
  register_scaled_square();
  rlx::Graph g;
  rlx::Value x = g.input("x", {rlx::DType::f32, {4}});
  g.output(rlx::op("consumer.scaled_square", {x}, {{"scale", 2.0}}) + 1.0, "y");
  rlx::CompiledGraph cg = rlx::Session(rlx::Device::cpu()).compile(g);
  rlx::TensorMap out = cg.run({{"x", rlx::Tensor::from_vector<float>({0, 1, 2, 3}, {4})}});
  std::vector<float> y = out.at("y").to_vector<float>();
  check(y == std::vector<float>{1, 3, 9, 19}, "custom op in a compiled graph");
}

void onnx_model(const char* model, const char* input, const char* output) {
  rlx::onnx::Model m = rlx::onnx::load(model);
  const rlx::Graph& g = *m.graph;
  rlx::TensorMap args;
  args[g.args()[0].name] = rlx::onnx::read_values(input, rlx::onnx::ValueKind::tensor).at(0);
  rlx::TensorMap out = rlx::Session(rlx::Device::cpu()).compile(g).run(args);
  rlx::Tensor expected = rlx::onnx::read_values(output, rlx::onnx::ValueKind::tensor).at(0);
  std::vector<float> got = out.at(g.outputs()[0].name).to_vector<float>();
  std::vector<float> want = expected.to_vector<float>();
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i)
    ok = std::fabs(got[i] - want[i]) <= 1e-5f + 1e-3f * std::fabs(want[i]);
  check(ok, std::string("ONNX model ") + model + " (" + std::to_string(got.size()) + " outputs)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: consumer MODEL.onnx INPUT.pb OUTPUT.pb\n");
    return 2;
  }
  check(std::strcmp(rlx::version(), rlx::kVersion) == 0,
        std::string("librlx ") + rlx::version() + ", headers " + rlx::kVersion);
  custom_op();
  onnx_model(argv[1], argv[2], argv[3]);
  // The packages: their ops register in librlx's registries.
  rlx::sparse::register_ops();
  rlx::linalg::register_ops();
#ifdef CONSUMER_HAVE_DIST
  rlx::dist::register_ops();
#endif
  check(rlx::llm::pretokenize(rlx::llm::PreTokenizer::gpt2, "hello world").size() == 2,
        "rlx::llm's pre-tokenizer");
  return failures == 0 ? 0 : 1;
}
