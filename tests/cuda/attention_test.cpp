// The tensor-core attention (f16 / bf16, head dims 64 and 128; f32, 64) against the CPU kernel,
// over masks, additive biases, ragged lengths (Sq != Sk, lengths that are not multiples of the
// 64-row tiles) and broadcast batch dims. P is rounded to 16 bits before P V (as FlashAttention
// does), so the tolerance is a 16-bit one.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda/dnn.h"
#include "op_tables/consistency.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

struct Case {
  DType dt;
  std::vector<int64_t> q, k;  // q [..., Sq, D], k = v [..., Sk, D]
  const char* mask;
  int64_t window;
  std::vector<int64_t> bias = {};  // additive bias, broadcast to [..., Sq, Sk]
};

// The largest difference between got and want, relative to want's largest magnitude (or 1).
double scaled_error(const Tensor& got, const Tensor& want) {
  std::vector<double> a = values(got), b = values(want);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0, scale = 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return worst / scale;
}

TEST(CudaAttention, TensorCorePathMatchesTheCpu) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  const Case cases[] = {
      {DType::bf16, {2, 3, 128, 64}, {2, 3, 128, 64}, "causal", 0},
      {DType::f16, {2, 3, 100, 64}, {2, 3, 100, 64}, "none", 0},
      {DType::bf16, {1, 2, 70, 128}, {1, 2, 150, 128}, "causal", 0},
      {DType::f16, {2, 1, 200, 64}, {2, 1, 200, 64}, "sliding_window", 48},
      {DType::bf16, {3, 4, 17, 64}, {1, 4, 65, 64}, "none", 0},      // k, v broadcast over batch
      {DType::bf16, {1, 1, 1, 128}, {1, 1, 300, 128}, "causal", 0},  // one decoding step
      {DType::bf16, {2, 3, 90, 64}, {2, 3, 90, 64}, "causal", 0, {2, 1, 90, 90}},
      {DType::f16, {1, 2, 64, 128}, {1, 2, 130, 128}, "none", 0, {130}},  // a key padding bias
      // f32 (3xTF32)
      {DType::f32, {2, 3, 130, 64}, {2, 3, 130, 64}, "causal", 0},
      {DType::f32, {1, 2, 70, 64}, {1, 2, 150, 64}, "sliding_window", 33, {1, 1, 70, 150}},
      {DType::f32, {3, 1, 40, 64}, {1, 1, 90, 64}, "none", 0},
  };
  for (const Case& c : cases) {
    Graph g("attn");
    Value q = g.input("q", {c.dt, to_shape(c.q)}), k = g.input("k", {c.dt, to_shape(c.k)}),
          v = g.input("v", {c.dt, to_shape(c.k)});
    std::vector<Value> args{q, k, v};
    std::vector<Tensor> in{random_tensor(c.dt, c.q, 1), random_tensor(c.dt, c.k, 2),
                           random_tensor(c.dt, c.k, 3)};
    if (!c.bias.empty()) {
      args.push_back(g.input("bias", {c.dt, to_shape(c.bias)}));
      in.push_back(random_tensor(c.dt, c.bias, 4, -3, 1));
    }
    g.output(g.apply("attention", args, {{"mask", c.mask}, {"window", c.window}})[0]);
    Tensor want = Session().compile(g).run(in)[0];
    Tensor got = Session(Device::cuda()).compile(g).run(in)[0];
    // 3xTF32 keeps f32's accuracy up to the rounding of ~21-bit products.
    double tol = c.dt == DType::f32 ? 2e-5 : 2e-2;
    EXPECT_LE(scaled_error(got, want), tol)
        << dtype_name(c.dt) << " q " << ints_str(c.q) << " k " << ints_str(c.k) << " " << c.mask;
  }
}

// A transformer's attention (f16 / bf16, head dim 64, causal, none or a sliding window, bshd
// read in place) runs on cuDNN's flash attention where the build has cuDNN,
// attention_lse's statistics with it, and attention_grad reads both: all against the CPU.
TEST(CudaAttention, CudnnPathTakesTransformerShapes) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
#ifndef RLX_HAVE_CUDNN
  GTEST_SKIP() << "this build has no cuDNN";
#endif
  for (DType dt : {DType::bf16, DType::f16})
    for (const char* mask : {"causal", "none", "sliding_window"})
      for (const char* layout : {"bhsd", "bshd"}) {
        std::vector<int64_t> shape = std::string(layout) == "bhsd"
                                         ? std::vector<int64_t>{2, 4, 256, 64}
                                         : std::vector<int64_t>{2, 256, 4, 64};
        Graph g("attn_lse");
        Value q = g.input("q", {dt, to_shape(shape)}), k = g.input("k", {dt, to_shape(shape)}),
              v = g.input("v", {dt, to_shape(shape)});
        Value dy = g.input("dy", {dt, to_shape(shape)});
        int64_t window = std::string(mask) == "sliding_window" ? 100 : 0;
        Attrs attrs{{"mask", mask}, {"layout", layout}, {"window", window}};
        auto outs = g.apply("attention_lse", {q, k, v}, attrs);
        g.output(outs[0]);
        g.output(outs[1]);
        // The backward reading cuDNN's output and statistics instead of its own forward.
        for (Value t : g.apply("attention_grad", {q, k, v, dy, outs[0], outs[1]}, attrs))
          g.output(t);
        std::vector<Tensor> in{random_tensor(dt, shape, 1), random_tensor(dt, shape, 2),
                               random_tensor(dt, shape, 3), random_tensor(dt, shape, 4)};
        auto want = Session().compile(g).run(in);
        int64_t before = cuda::cudnn_attention_runs(),
                before_grad = cuda::cudnn_attention_grad_runs();
        CompiledGraph cuda = Session(Device::cuda()).compile(g);
        auto got = cuda.run(in);
        EXPECT_EQ(cuda::cudnn_attention_runs(), before + 1) << dtype_name(dt) << " " << mask;
        EXPECT_EQ(cuda::cudnn_attention_grad_runs(), before_grad + 1)
            << dtype_name(dt) << " " << mask << " " << layout;
        const char* names[] = {"y", "lse", "dq", "dk", "dv"};
        for (size_t o = 0; o < 5; ++o)
          EXPECT_LE(scaled_error(got[o], want[o]), 3e-2)
              << names[o] << " " << dtype_name(dt) << " " << mask << " " << layout;
        // The backward is cuDNN's deterministic variant: a second run repeats it bit for bit.
        auto again = cuda.run(in);
        for (size_t o = 2; o < 5; ++o)
          EXPECT_EQ(bytes_of(again[o]), bytes_of(got[o]))
              << names[o] << " " << dtype_name(dt) << " " << mask << " " << layout;
      }
}

// An additive bias ([h, sq, sk] broadcast over the batch, and one per batch entry) on
// cuDNN's forward, against the CPU.
TEST(CudaAttention, CudnnPathAddsABias) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
#ifndef RLX_HAVE_CUDNN
  GTEST_SKIP() << "this build has no cuDNN";
#endif
  std::vector<int64_t> qs{2, 4, 128, 64};
  for (std::vector<int64_t> bs : {std::vector<int64_t>{4, 128, 128}, {2, 4, 128, 128}})
    for (const char* mask : {"none", "causal"}) {
      Graph g("attn_bias");
      Value q = g.input("q", {DType::f16, to_shape(qs)}),
            k = g.input("k", {DType::f16, to_shape(qs)}),
            v = g.input("v", {DType::f16, to_shape(qs)}),
            b = g.input("b", {DType::f16, to_shape(bs)});
      g.output(g.apply("attention", {q, k, v, b}, {{"mask", mask}})[0]);
      std::vector<Tensor> in{random_tensor(DType::f16, qs, 1), random_tensor(DType::f16, qs, 2),
                             random_tensor(DType::f16, qs, 3),
                             random_tensor(DType::f16, bs, 4, -3, 1)};
      Tensor want = Session().compile(g).run(in)[0];
      int64_t before = cuda::cudnn_attention_runs();
      Tensor got = Session(Device::cuda()).compile(g).run(in)[0];
      EXPECT_EQ(cuda::cudnn_attention_runs(), before + 1) << bs.size() << " " << mask;
      EXPECT_LE(scaled_error(got, want), 2e-2) << bs.size() << " " << mask;
    }
}

// Fewer queries than keys (a prompt's continuation over a longer cache): the causal mask is
// aligned bottom-right, on cuDNN's path too.
TEST(CudaAttention, CudnnPathAlignsTheCausalMaskBottomRight) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
#ifndef RLX_HAVE_CUDNN
  GTEST_SKIP() << "this build has no cuDNN";
#endif
  std::vector<int64_t> qs{2, 3, 96, 64}, ks{2, 3, 256, 64};
  Graph g("attn");
  Value q = g.input("q", {DType::bf16, to_shape(qs)}),
        k = g.input("k", {DType::bf16, to_shape(ks)}),
        v = g.input("v", {DType::bf16, to_shape(ks)}),
        dy = g.input("dy", {DType::bf16, to_shape(qs)});
  Attrs causal{{"mask", "causal"}};
  auto fwd = g.apply("attention_lse", {q, k, v}, causal);
  g.output(fwd[0]);
  for (Value t : g.apply("attention_grad", {q, k, v, dy, fwd[0], fwd[1]}, causal)) g.output(t);
  std::vector<Tensor> in{random_tensor(DType::bf16, qs, 1), random_tensor(DType::bf16, ks, 2),
                         random_tensor(DType::bf16, ks, 3), random_tensor(DType::bf16, qs, 4)};
  auto want = Session().compile(g).run(in);
  int64_t before = cuda::cudnn_attention_runs(), before_grad = cuda::cudnn_attention_grad_runs();
  auto got = Session(Device::cuda()).compile(g).run(in);
  EXPECT_EQ(cuda::cudnn_attention_runs(), before + 1);
  EXPECT_EQ(cuda::cudnn_attention_grad_runs(), before_grad + 1);
  const char* names[] = {"y", "dq", "dk", "dv"};
  for (size_t o = 0; o < 4; ++o) EXPECT_LE(scaled_error(got[o], want[o]), 3e-2) << names[o];
}

// attention_grad with f16 / bf16 and head dim 64 takes the tensor-core passes
// (flash_grad.cuh): against the CPU's attention_grad over the same masks and raggedness,
// rows that see no key, broadcast k / v and the dispatch to that path's shapes.
TEST(CudaAttention, TensorCoreBackwardMatchesTheCpu) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one";
  const Case cases[] = {
      {DType::bf16, {2, 3, 128, 64}, {2, 3, 128, 64}, "causal", 0},
      {DType::f16, {2, 3, 100, 64}, {2, 3, 100, 64}, "none", 0},
      {DType::bf16, {1, 2, 70, 64}, {1, 2, 150, 64}, "causal", 0},
      {DType::f16, {2, 1, 200, 64}, {2, 1, 200, 64}, "sliding_window", 48},
      {DType::bf16, {3, 4, 17, 64}, {1, 4, 65, 64}, "none", 0},    // k, v broadcast over batch
      {DType::bf16, {2, 2, 64, 64}, {2, 2, 40, 64}, "causal", 0},  // 24 rows see no key
      {DType::f16, {1, 1, 300, 64}, {1, 1, 300, 64}, "sliding_window", 100},
  };
  for (const Case& c : cases) {
    Graph g("attn_grad");
    std::vector<int64_t> y = c.q;
    Value q = g.input("q", {c.dt, to_shape(c.q)}), k = g.input("k", {c.dt, to_shape(c.k)}),
          v = g.input("v", {c.dt, to_shape(c.k)}), dy = g.input("dy", {c.dt, to_shape(y)});
    auto grads = g.apply("attention_grad", {q, k, v, dy}, {{"mask", c.mask}, {"window", c.window}});
    for (Value t : grads) g.output(t);
    std::vector<Tensor> in{random_tensor(c.dt, c.q, 1), random_tensor(c.dt, c.k, 2),
                           random_tensor(c.dt, c.k, 3), random_tensor(c.dt, y, 4)};
    auto want = Session().compile(g).run(in);
    auto gpu = Session(Device::cuda()).compile(g);
    auto got = gpu.run(in);
    EXPECT_EQ(gpu.report().count("attention_grad", DispatchPath::native), 1u);
    const char* names[] = {"dq", "dk", "dv"};
    // P and dS are rounded to 16 bits for their products, and dS cancels (dP - delta).
    for (size_t o = 0; o < 3; ++o)
      EXPECT_LE(scaled_error(got[o], want[o]), 3e-2)
          << names[o] << " " << dtype_name(c.dt) << " q " << ints_str(c.q) << " k " << ints_str(c.k)
          << " " << c.mask;
  }
}

}  // namespace
}  // namespace rlx::test
