// Models imported with their dynamic dims left symbolic (no input shapes given): the shape
// arithmetic that cannot fold at import runs late (onnx.late, dynamic_reshape), and the
// results must equal the expected outputs recorded by ONNX Runtime. The text IR of such a
// model (rlx convert) parses back and runs the same.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "rlx/onnx.h"
#include "rlx/session.h"
#include "rlx/text.h"

namespace rlx {
namespace {

std::string data(const std::string& rel) { return std::string(RLX_ONNX_TEST_DATA) + "/" + rel; }

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<double> a = got.to_doubles(), b = want.to_doubles();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::abs(a[i] - b[i]), atol + rtol * std::abs(b[i])) << "element " << i;
}

void check_symbolic(const std::string& dir, const std::vector<std::string>& symbolic_args) {
  SCOPED_TRACE(dir);
  onnx::Model m = onnx::load(data(dir + "/model.onnx"));
  for (size_t i = 0; i < symbolic_args.size(); ++i) {
    const Arg* a = m.graph->find_arg(symbolic_args[i]);
    ASSERT_NE(a, nullptr);
    EXPECT_FALSE(a->value.type().is_static()) << a->value.type().str();
  }
  std::vector<Tensor> in, want;
  for (size_t i = 0; i < m.inputs.size(); ++i)
    in.push_back(
        onnx::read_tensor(data(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb")));
  for (size_t j = 0; j < m.outputs.size(); ++j)
    want.push_back(
        onnx::read_tensor(data(dir + "/test_data_set_0/output_" + std::to_string(j) + ".pb")));
  CompiledGraph cg = Session(Device::cpu()).compile(*m.graph);
  for (int run = 0; run < 2; ++run) {  // the second run reuses the late programs
    std::vector<Tensor> out = cg.run(in);
    for (size_t j = 0; j < want.size(); ++j) expect_close(out[j], want[j], 1e-4, 1e-5);
  }
  onnx::register_ops();
  std::unique_ptr<Graph> back = parse_graph(print_graph(*m.graph));
  std::vector<Tensor> out = Session(Device::cpu()).compile(*back).run(in);
  for (size_t j = 0; j < want.size(); ++j) expect_close(out[j], want[j], 1e-4, 1e-5);
}

TEST(OnnxSymbolic, DynamicBatchMlp) { check_symbolic("mlp", {"x"}); }

TEST(OnnxSymbolic, LstmKeywordSpotterWithDynamicBatch) {
  check_symbolic("realworld/kws_lstm", {"mfcc"});
}

TEST(OnnxSymbolic, OcrRecogniserWithDynamicBatchAndWidth) {
  check_symbolic("realworld/crnn_ocr", {"image"});
}

TEST(OnnxSymbolic, NhwcModelWithTf2onnxNames) { check_symbolic("realworld/tf_nhwc", {"input_0"}); }

}  // namespace
}  // namespace rlx
