// The CUDA device runtime: copies, the memory pool, typed errors, the host delegate and
// custom ops. Tests that need a GPU skip, saying so, where there is none.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../../examples/custom_op/custom_op.h"
#include "op_tables/consistency.h"
#include "rlx/cuda.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

#define NEED_GPU() \
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the GPU tests need one"

TEST(CudaRuntime, WithoutADeviceSessionsSayWhatIsMissing) {
  if (cuda::available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(Session(Device::cuda()), NotSupported);
  EXPECT_THROW(Tensor::empty(DType::f32, {4}, Device::cuda()), NotSupported);
  EXPECT_THROW(cuda::Event(), NotSupported);
  EXPECT_THROW(cuda::Pipeline(), NotSupported);
}

// A Pipeline reads results back while later work may be queued, and the bad-input checks
// of the CUDA Graph replays queued under it surface at take() / finish(), not at the run
// (which would have to wait for the device; a second replay of the same graph reads the
// first one's before it starts); without one a replay's bad index throws at the run.
TEST(CudaRuntime, PipelineReadsBackAndDefersReplayChecks) {
  NEED_GPU();
  Graph g("gather");
  Value t = g.input("t", TensorType::parse("f32[8,4]"));
  Value i = g.input("i", TensorType::parse("i32[2]"));
  g.output(g.apply("gather", {t, i}, {{"axis", int64_t(0)}})[0]);
  CompileOptions o;
  o.cuda_graphs = true;
  CompiledGraph cg = Session(Device::cuda()).compile(g, o);
  Tensor host = random_tensor(DType::f32, {8, 4}, 2), table = host.to(Device::cuda());
  auto idx = [](std::vector<int32_t> v) { return Tensor::from_vector<int32_t>(v, {2}); };
  for (int r = 0; r < 3; ++r) cg.run(std::vector<Tensor>{table, idx({1, 7})});
  ASSERT_GT(cg.graph_launches(), 0) << "the gather never replayed a CUDA Graph";
  {
    cuda::Pipeline pipe;
    EXPECT_THROW(pipe.take(), ValueError);                               // nothing queued
    EXPECT_THROW(pipe.read_back(host), ValueError);                      // not on the device
    pipe.read_back(cg.run(std::vector<Tensor>{table, idx({3, 9})})[0]);  // no throw here
    EXPECT_EQ(pipe.queued(), 1u);
    EXPECT_THROW(pipe.take(), ValueError);  // index 9 of 8 rows, read with the copy
    pipe.read_back(cg.run(std::vector<Tensor>{table, idx({2, 5})})[0]);
    Tensor got = pipe.take();
    std::vector<float> want;
    for (int row : {2, 5})
      for (int c = 0; c < 4; ++c) want.push_back(host.data_as<float>()[row * 4 + c]);
    EXPECT_EQ(std::vector<float>(got.data_as<float>(), got.data_as<float>() + 8), want);
    pipe.finish();
  }
  EXPECT_THROW(cg.run(std::vector<Tensor>{table, idx({3, 9})}), ValueError);
}

// Events time device work without a synchronize() between the steps: a mark before and
// after a large matmul, queued without waiting, measure it; marks misused are ValueErrors.
TEST(CudaRuntime, EventsTimeQueuedDeviceWork) {
  NEED_GPU();
  EXPECT_THROW(cuda::Event(cuda::device_count()), NotSupported);
  Graph g("mm");
  Value a = g.input("a", TensorType::parse("f32[2048,2048]"));
  g.output(g.apply("matmul", {a, a})[0]);
  CompiledGraph mm = Session(Device::cuda()).compile(g);
  Tensor x = random_tensor(DType::f32, {2048, 2048}, 1).to(Device::cuda());
  mm.run(std::vector<Tensor>{x});  // compiled and warm
  cuda::Event start, mid, end;
  EXPECT_FALSE(start.done());
  EXPECT_THROW(start.elapsed_ms(end), ValueError);
  EXPECT_THROW(start.synchronize(), ValueError);
  start.record();
  for (int i = 0; i < 4; ++i) mm.run(std::vector<Tensor>{x});
  mid.record();
  mm.run(std::vector<Tensor>{x});
  end.record();
  double four = start.elapsed_ms(mid), one = mid.elapsed_ms(end);
  EXPECT_TRUE(end.done());
  // 2 * 2048^3 flops each: well above 0.01 ms, and four of them take longer than one.
  EXPECT_GT(one, 0.01);
  EXPECT_GT(four, 2 * one);
  EXPECT_EQ(start.device(), 0);
  cuda::Event moved = std::move(start);
  EXPECT_NEAR(moved.elapsed_ms(mid), four, 1e-9);
  EXPECT_THROW(start.record(), ValueError);  // NOLINT(bugprone-use-after-move): on purpose
}

TEST(CudaRuntime, CopiesRoundTripEveryDtypeAndLargeTensors) {
  NEED_GPU();
  for (DType dt : kAllDTypes) {
    Tensor h = random_tensor(dt, {3, 5, 7}, 11);
    Tensor d = h.to(Device::cuda());
    EXPECT_EQ(d.device(), Device::cuda());
    EXPECT_EQ(bytes_of(d), bytes_of(h)) << dtype_name(dt);
    EXPECT_EQ(bytes_of(d.clone()), bytes_of(h)) << dtype_name(dt);
  }
  // Several staging chunks (16 MiB each) in both directions.
  Tensor big = random_tensor(DType::f32, {int64_t(11) << 20}, 3);
  EXPECT_EQ(bytes_of(big.to(Device::cuda())), bytes_of(big));
}

TEST(CudaRuntime, StridedViewsCopyOnTheDevice) {
  NEED_GPU();
  Tensor h = random_tensor(DType::f32, {4, 6, 5}, 5);
  Tensor d = h.to(Device::cuda());
  for (const auto& [view, dview] : {std::pair{h.permute({2, 0, 1}), d.permute({2, 0, 1})},
                                    std::pair{h.slice(1, 1, 6, 2), d.slice(1, 1, 6, 2)},
                                    std::pair{h.slice(0, 0, 1).broadcast_to({3, 1, 6, 5}),
                                              d.slice(0, 0, 1).broadcast_to({3, 1, 6, 5})}}) {
    EXPECT_FALSE(dview.is_contiguous());
    EXPECT_EQ(bytes_of(dview.contiguous()), bytes_of(view.contiguous()));
    EXPECT_EQ(values(dview), values(view));
  }
}

TEST(CudaRuntime, PoolKeepsFreedMemoryUntilEmptyCache) {
  NEED_GPU();
  cuda::empty_cache();
  size_t before = cuda::memory_info().used;
  {
    Tensor t = Tensor::empty(DType::f32, {int64_t(64) << 20}, Device::cuda());
    cuda::synchronize();
    EXPECT_GE(cuda::memory_info().used, before + (size_t(256) << 20));
  }
  cuda::synchronize();
  EXPECT_GE(cuda::memory_info().reserved, size_t(256) << 20);  // kept for reuse
  EXPECT_GE(cuda::empty_cache(), size_t(256) << 20);
}

TEST(CudaRuntime, OutOfMemoryIsAnErrorTheProcessSurvives) {
  NEED_GPU();
  EXPECT_THROW(Tensor::empty(DType::f32, {int64_t(1) << 50}, Device::cuda()), OutOfMemory);
  Tensor ok = Tensor::full(DType::f32, {8}, 2).to(Device::cuda());
  EXPECT_EQ(values(ok), std::vector<double>(8, 2.0));
  // The next graph compiles and runs.
  Graph g("after_oom");
  g.output(g.apply1("exp", {g.input("x", TensorType::parse("f32[8]"))}));
  const std::vector<Tensor> y = Session(Device::cuda()).compile(g).run(std::vector<Tensor>{ok});
  EXPECT_NEAR(values(y[0])[0], std::exp(2.0), 1e-5);
}

// example.masked_moments has only a CPU kernel: on cuda it takes the host path, and its
// results are the CPU's, bit for bit.
TEST(CudaHostDelegate, CpuOnlyOpRunsOnTheHostBitIdentical) {
  example::register_example_ops();
  register_cpu_kernels();
  register_cuda_kernels();
  Graph g("host");
  Value x = g.input("x", TensorType::parse("f32[6,5]"));
  Value m = g.input("m", TensorType::parse("bool[6,5]"));
  auto outs = g.apply("example.masked_moments", {g.apply("exp", {x})[0], m}, {{"axis", 0}});
  g.output(g.apply("neg", {outs[0]})[0], "y");
  g.output(outs[1], "count");
  LoweredGraph l = lower_for_device(g, Device::cuda());
  EXPECT_EQ(l.report.count("example.masked_moments", DispatchPath::host), 1);
  EXPECT_EQ(l.report.count("exp", DispatchPath::native), 1);
  NEED_GPU();
  TensorMap in{{"x", random_tensor(DType::f32, {6, 5}, 1)},
               {"m", random_tensor(DType::boolean, {6, 5}, 2)}};
  TensorMap cpu = Session().compile(g).run(in);
  TensorMap gpu = Session(Device::cuda()).compile(g).run(in);
  EXPECT_EQ(gpu.at("y").device(), Device::cuda());
  EXPECT_EQ(bytes_of(gpu.at("count")), bytes_of(cpu.at("count")));
  // exp runs on the GPU (CUDA's libm), so y agrees up to exp's rounding; the delegated op
  // alone is compared bit for bit below.
  std::vector<double> gy = values(gpu.at("y")), cy = values(cpu.at("y"));
  ASSERT_EQ(gy.size(), cy.size());
  for (size_t i = 0; i < gy.size(); ++i) EXPECT_NEAR(gy[i], cy[i], 1e-5 * (1 + std::abs(cy[i])));

  Graph h("host_only");
  Value hx = h.input("x", TensorType::parse("f32[6,5]"));
  Value hm = h.input("m", TensorType::parse("bool[6,5]"));
  auto ho = h.apply("example.masked_moments", {hx, hm}, {{"axis", 1}});
  h.output(ho[0], "y");
  h.output(ho[1], "count");
  TensorMap c2 = Session().compile(h).run(in), g2 = Session(Device::cuda()).compile(h).run(in);
  for (const char* name : {"y", "count"})
    EXPECT_EQ(bytes_of(g2.at(name)), bytes_of(c2.at(name))) << name;
}

// A downstream op with a native CUDA kernel (cuBLAS on the op's stream), registered through
// the public KernelRegistry like any package would.
TEST(CudaCustomKernel, NativeKernelRunsOnTheDevice) {
  static bool registered = [] {
    OpDef d;
    d.name = "test.scale";
    d.arity(1).attr("alpha", AttrKind::Float, 2.0);
    d.infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; };
    OpRegistry::global().add(std::move(d));
    KernelRegistry::global().add(
        "test.scale", DeviceKind::cuda,
        [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
          static cublasHandle_t handle = [] {
            cublasHandle_t h;
            cublasCreate(&h);
            return h;
          }();
          auto s = static_cast<cudaStream_t>(ctx.stream);
          cudaMemcpyAsync(out[0].data(), in[0].data(), in[0].nbytes(), cudaMemcpyDeviceToDevice, s);
          cublasSetStream(handle, s);
          float alpha = float(ctx.attrs.get_float("alpha"));
          if (cublasSscal(handle, int(in[0].numel()), &alpha, out[0].data_as<float>(), 1) !=
              CUBLAS_STATUS_SUCCESS)
            throw DeviceError("[test.scale] cublasSscal failed");
        });
    return true;
  }();
  ASSERT_TRUE(registered);
  register_cuda_kernels();
  Graph g("custom");
  Value x = g.input("x", TensorType::parse("f32[100]"));
  g.output(g.apply("test.scale", {x}, {{"alpha", 3.0}})[0]);
  EXPECT_EQ(lower_for_device(g, Device::cuda()).report.count("test.scale", DispatchPath::native),
            1);
  NEED_GPU();
  Tensor in = random_tensor(DType::f32, {100}, 4);
  std::vector<Tensor> out = Session(Device::cuda()).compile(g).run(std::vector<Tensor>{in});
  std::vector<double> want = values(in);
  for (double& v : want) v = double(float(v) * 3.0f);  // f32 arithmetic, as cuBLAS does
  EXPECT_EQ(values(out[0]), want);
}

// A composite CUDA kernel: test.softplus has a CPU kernel only, and on cuda a composite
// that builds it from core ops (log1p(exp(x))), so the GPU runs it natively, with no host
// node, where without the composite it would take the host path.
TEST(CudaCustomKernel, CompositeKernelBecomesCoreOps) {
  static bool registered = [] {
    OpDef d;
    d.name = "test.softplus";
    d.arity(1);
    d.infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; };
    OpRegistry::global().add(std::move(d));
    KernelRegistry::global().add(
        "test.softplus", DeviceKind::cpu,
        [](const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
          const float* x = in[0].data_as<float>();
          float* y = out[0].data_as<float>();
          for (int64_t i = 0; i < in[0].numel(); ++i) y[i] = std::log1p(std::exp(x[i]));
        },
        [](const KernelQuery& q) { return q.inputs[0].dtype == DType::f32; });
    return true;
  }();
  ASSERT_TRUE(registered);
  register_cpu_kernels();
  register_cuda_kernels();
  Graph g("composite");
  Value x = g.input("x", TensorType::parse("f32[64]"));
  g.output(g.apply("test.softplus", {x})[0]);
  EXPECT_EQ(lower_for_device(g, Device::cuda()).report.count("test.softplus", DispatchPath::host),
            1);  // no composite yet: the host path
  static bool composite = [] {
    KernelRegistry::global().add_composite(
        "test.softplus", DeviceKind::cuda, [](const RuleArgs& a) {
          Graph& sg = a.g;
          return std::vector<Value>{sg.apply("log1p", {sg.apply("exp", {a.inputs[0]})[0]})[0]};
        });
    return true;
  }();
  ASSERT_TRUE(composite);
  LoweredGraph l = lower_for_device(g, Device::cuda());
  EXPECT_EQ(l.report.count("test.softplus", DispatchPath::decomposed), 1);
  EXPECT_EQ(l.report.count("exp", DispatchPath::native), 1);
  EXPECT_EQ(l.report.count("log1p", DispatchPath::native), 1);
  EXPECT_EQ(l.report.total(DispatchPath::host), 0);
  // The CPU keeps its own kernel.
  EXPECT_EQ(lower_for_device(g, Device::cpu()).report.count("test.softplus", DispatchPath::native),
            1);
  NEED_GPU();
  Tensor in = random_tensor(DType::f32, {64}, 6, -5, 5);
  std::vector<double> want = values(Session().compile(g).run(std::vector<Tensor>{in})[0]);
  std::vector<double> got =
      values(Session(Device::cuda()).compile(g).run(std::vector<Tensor>{in})[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + want[i]));
}

}  // namespace
}  // namespace rlx::test
