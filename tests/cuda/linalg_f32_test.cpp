// The f32 tensor-core GEMM (linalg_f32.cu) against f64 and against cuBLAS's SGEMM on the
// same data: its error must stay SGEMM's, on odd shapes (padding), every operand layout,
// batches, a shared weight, the fused bias + GELU epilogue, and all-positive operands over
// a long k (where a truncating accumulator drifts: cuBLAS's 3xTF32 does there); and inf /
// NaN as SGEMM has them.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda/linalg.h"
#include "op_tables/consistency.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

struct Case {
  const char* what;
  std::vector<int64_t> x, w;  // as the graph's inputs take them
  bool transpose_x = false;   // x is stored [.., k, m] and transposed in the graph
  bool fused = false;         // fused_matmul(x, w, bias) {transpose_b, gelu_tanh}
  double lo = -1, hi = 1;     // the operands' values
  // tc's rms error at most this times SGEMM's. On values of one sign the tensor cores'
  // truncations all lean one way: there its error is ~2^-22 of the result's, 2-3x SGEMM's
  // (whose roundings cancel), where cuBLAS's 3xTF32 drifts with k.
  double vs_sgemm = 1.5;
};

void build(Graph& g, const Case& c, DType dt) {
  Value x = g.input("x", {dt, to_shape(c.x)}), w = g.input("w", {dt, to_shape(c.w)});
  if (c.transpose_x) {
    IntList perm;
    for (int64_t d = 0; d < int64_t(c.x.size()); ++d) perm.push_back(d);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    x = g.apply("transpose", {x}, {{"perm", perm}})[0];
  }
  if (c.fused) {
    Value b = g.input("b", {dt, to_shape({c.w[0]})});
    g.output(g.apply("fused_matmul", {x, w, b},
                     {{"transpose_b", true}, {"activation", "gelu_tanh"}})[0]);
  } else {
    g.output(g.apply("matmul", {x, w})[0]);
  }
}

struct Error {
  double rms, max;  // relative to the reference's rms
};

Error error(const Tensor& got, const std::vector<double>& want) {
  std::vector<double> a = values(got);
  EXPECT_EQ(a.size(), want.size());
  double se = 0, sw = 0, worst = 0;
  for (size_t i = 0; i < std::min(a.size(), want.size()); ++i) {
    double d = a[i] - want[i];
    se += d * d;
    sw += want[i] * want[i];
    worst = std::max(worst, std::abs(d));
  }
  double scale = std::sqrt(sw / double(std::max<size_t>(want.size(), 1)));
  return {std::sqrt(se / double(std::max<size_t>(want.size(), 1))) / scale, worst / scale};
}

TEST(CudaF32Gemm, TensorCoresKeepSgemmAccuracy) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  const Case cases[] = {
      {"odd sizes", {300, 260}, {260, 700}},
      {"long k, positive", {256, 3072}, {3072, 384}, false, false, 0, 1, 4},
      {"k 768 like GPT-2", {512, 768}, {768, 1000}},
      {"x transposed", {200, 333}, {200, 129}, true},
      {"batched", {3, 130, 200}, {3, 200, 150}},
      {"shared weight over a batch", {2, 3, 64, 96}, {96, 80}},
      {"bias + gelu, w transposed", {257, 500}, {384, 500}, false, true},
  };
  for (const Case& c : cases) {
    Graph g32("gemm"), g64("gemm");
    build(g32, c, DType::f32);
    build(g64, c, DType::f64);
    std::vector<Tensor> in{random_tensor(DType::f32, c.x, 1, c.lo, c.hi),
                           random_tensor(DType::f32, c.w, 2, c.lo, c.hi)};
    if (c.fused) in.push_back(random_tensor(DType::f32, {c.w[0]}, 3));
    std::vector<Tensor> in64;
    for (const Tensor& t : in) {
      std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
      in64.push_back(tensor_of(DType::f64, shape, values(t)));
    }
    std::vector<double> want = values(Session().compile(g64).run(in64)[0]);

    cuda::set_f32_matmul("sgemm");
    Error sgemm = error(Session(Device::cuda()).compile(g32).run(in)[0], want);
    cuda::set_f32_matmul("tc");
    int64_t before = cuda::tc_f32_gemm_runs();
    Error tc = error(Session(Device::cuda()).compile(g32).run(in)[0], want);
    cuda::set_f32_matmul("auto");
    EXPECT_EQ(cuda::tc_f32_gemm_runs(), before + 1) << c.what;
    std::printf("  %-28s rms error: sgemm %.2e, tensor cores %.2e; max: %.2e, %.2e\n", c.what,
                sgemm.rms, tc.rms, sgemm.max, tc.max);
    EXPECT_LE(tc.rms, c.vs_sgemm * sgemm.rms) << c.what;
    EXPECT_LE(tc.rms, 4e-7) << c.what;  // 2^-21.3; cuBLAS's 3xTF32: 1.8e-6 at k 768
    EXPECT_LE(tc.max, 3 * sgemm.max) << c.what;
  }
}

// inf and NaN propagate as SGEMM's do (the split keeps them in the head).
TEST(CudaF32Gemm, NonFiniteValuesPropagate) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  Graph g("gemm");
  Value x = g.input("x", TensorType::parse("f32[4,40]")),
        w = g.input("w", TensorType::parse("f32[40,3]"));
  g.output(g.apply("matmul", {x, w})[0]);
  std::vector<double> xv(160, 1.0), wv(120, 0.5);
  xv[0] = INFINITY;        // row 0: +inf in every column
  xv[40 + 5] = NAN;        // row 1: NaN
  xv[80 + 7] = 3.4025e38;  // row 2: finite, but its head would round up to inf
  std::vector<Tensor> in{tensor_of(DType::f32, {4, 40}, xv), tensor_of(DType::f32, {40, 3}, wv)};
  cuda::set_f32_matmul("tc");
  std::vector<double> y = values(Session(Device::cuda()).compile(g).run(in)[0]);
  cuda::set_f32_matmul("auto");
  for (int j = 0; j < 3; ++j) {
    EXPECT_TRUE(std::isinf(y[size_t(j)]) && y[size_t(j)] > 0) << y[size_t(j)];
    EXPECT_TRUE(std::isnan(y[size_t(3 + j)])) << y[size_t(3 + j)];
    EXPECT_NEAR(y[size_t(6 + j)], 3.4025e38 * 0.5, 1e32);
    EXPECT_FLOAT_EQ(float(y[size_t(9 + j)]), 20.0f);
  }
}

TEST(CudaF32Gemm, UnknownModeIsATypedError) {
  EXPECT_THROW(cuda::set_f32_matmul("fast"), ValueError);
}

}  // namespace
}  // namespace rlx::test
