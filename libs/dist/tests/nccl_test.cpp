// The NCCL path: dist.* ops on CUDA tensors, one rank per GPU (ctest runs it under
// mpirun -np 1 and as an env launch of one rank: a communicator of one still runs every
// NCCL call; tools/gpu/run.sh runs it on 2 GPUs where there are 2). Skips, saying so,
// without a GPU.
#include <cmath>

#include "dist_test_util.h"
#include "rlx/cuda.h"

using namespace rlx;
using dist_test::run1;

namespace {

#define NEED_GPU() \
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device here: the NCCL tests need one"

int rank() { return dist::world().rank(); }
int size() { return dist::world().size(); }
Device gpu() { return dist::local_device(); }

// x_r[i] = (r + 1) * (i + 1), shape [2, 3], on this rank's GPU.
Tensor ramp(DType dt, int r) {
  std::vector<double> v(6);
  for (int i = 0; i < 6; ++i) v[size_t(i)] = (r + 1) * (i + 1);
  return Tensor::from_doubles(dt, {2, 3}, v).to(gpu());
}

}  // namespace

TEST(Nccl, EachRankHasItsOwnGpu) {
  NEED_GPU();
  EXPECT_EQ(gpu().kind, DeviceKind::cuda);
  EXPECT_EQ(gpu().index, rank() % cuda::device_count());
}

TEST(Nccl, AllReduceSumMeanMaxInSeveralDtypes) {
  NEED_GPU();
  const int n = size();
  const double s = n * (n + 1) / 2.0;
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64}) {
    Tensor x = ramp(dt, rank());
    auto sum = run1(x, [](Value v) { return dist::all_reduce(v); });
    auto mx = run1(x, [](Value v) { return dist::all_reduce(v, dist::ReduceOp::max); });
    EXPECT_EQ(sum.device(), gpu());
    auto vs = sum.to_doubles(), vx = mx.to_doubles();
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(vs[size_t(i)], (i + 1) * s) << dtype_name(dt) << " " << i;
      EXPECT_EQ(vx[size_t(i)], (i + 1) * n) << dtype_name(dt) << " " << i;
    }
    if (is_float(dt)) {
      auto mean = run1(x, [](Value v) { return dist::all_reduce(v, dist::ReduceOp::mean); });
      auto vm = mean.to_doubles();
      for (int i = 0; i < 6; ++i) EXPECT_NEAR(vm[size_t(i)], (i + 1) * s / n, 1e-2) << i;
    }
  }
}

TEST(Nccl, BroadcastReduceGatherScatter) {
  NEED_GPU();
  const int n = size();
  Tensor x = ramp(DType::f32, rank());
  EXPECT_EQ(run1(x, [&](Value v) { return dist::broadcast(v, n - 1); }).to_doubles(),
            ramp(DType::f32, n - 1).to_doubles());
  auto red = run1(x, [](Value v) { return dist::reduce(v, 0); }).to_doubles();
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(red[size_t(i)], rank() == 0 ? (i + 1) * n * (n + 1) / 2 : 0);
  auto g = run1(x, [](Value v) { return dist::all_gather(v, 0); });
  ASSERT_EQ(g.shape(), (std::vector<int64_t>{2 * n, 3}));
  auto gv = g.to_doubles();
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 6; ++i) EXPECT_EQ(gv[size_t(r * 6 + i)], (r + 1) * (i + 1));
  // [2n, 2] with x_r[j, k] = 100 r + 2 j + k; chunk r is rows 2r, 2r + 1.
  std::vector<double> v(size_t(4 * n));
  for (int j = 0; j < 2 * n; ++j)
    for (int k = 0; k < 2; ++k) v[size_t(j * 2 + k)] = 100.0 * rank() + 2 * j + k;
  Tensor y = Tensor::from_doubles(DType::f32, {2 * n, 2}, v).to(gpu());
  auto rs = run1(y, [](Value v) { return dist::reduce_scatter(v); }).to_doubles();
  for (int j = 0; j < 2; ++j)
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(rs[size_t(j * 2 + k)], 100.0 * n * (n - 1) / 2 + n * (2 * (2 * rank() + j) + k));
}

TEST(Nccl, DispatchReportSaysNative) {
  NEED_GPU();
  Graph g("t");
  Value x = g.input("x", {DType::f32, {8}});
  g.output(dist::barrier(dist::all_reduce(x) + dist::broadcast(x)), "y");
  g.output(dist::reduce_scatter(dist::all_gather(x)), "z");
  CompiledGraph cg = Session(gpu()).compile(g);
  const DispatchReport& r = cg.report();
  for (const char* o :
       {"dist.all_reduce", "dist.broadcast", "dist.all_gather", "dist.reduce_scatter"})
    EXPECT_EQ(r.count(o, DispatchPath::native), 1) << o << "\n" << r.str();
  EXPECT_EQ(r.count("dist.barrier", DispatchPath::host), 1) << r.str();
  auto out = cg.run({{"x", Tensor::full(DType::f32, {8}, 1.0).to(gpu())}});
  EXPECT_EQ(out.at("y").to_doubles(), std::vector<double>(8, 2.0 * size()));
  EXPECT_EQ(out.at("z").to_doubles(), std::vector<double>(8, double(size())));
}

// A data-parallel step on the GPU: the gradients' all_reduce runs through NCCL inside the
// compiled step. With n ranks each on the same shard, the mean of the gradients is that
// shard's, so the params must match a plain Trainer's.
TEST(Nccl, DataParallelStepOnTheGpu) {
  NEED_GPU();
  Graph m("m");
  Value xin = m.input("x", {DType::f32, {Dim::sym("batch"), 4}});
  Value y = m.input("y", {DType::f32, {Dim::sym("batch"), 1}});
  Value w = m.param("w", {DType::f32, {4, 1}});
  Value b = m.param("b", {DType::f32, {1}});
  Value d = matmul(xin, w) + b - y;
  m.output(mean(d * d), "loss");
  train::TrainerOptions base;
  base.device = gpu();
  base.optimizer = std::make_shared<train::AdamW>();
  base.schedule = train::constant_lr(0.05);
  train::TrainerOptions o = base;
  dist::data_parallel(o, dist::world());
  train::Trainer ref(m, base), dp(m, o);
  EXPECT_GE(dp.compiled().report().count("dist.all_reduce", DispatchPath::native), 1)
      << dp.compiled().report().str();
  for (auto* t : {&ref, &dp}) {
    t->set_param("w", train::xavier_uniform({4, 1}, 0));
    t->set_param("b", Tensor::zeros(DType::f32, {1}));
  }
  dist::broadcast_params(dp, dist::world());
  std::vector<double> xs(32), ys(8);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(double(i));
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = std::cos(double(i));
  TensorMap in{{"x", Tensor::from_doubles(DType::f32, {8, 4}, xs)},
               {"y", Tensor::from_doubles(DType::f32, {8, 1}, ys)}};
  for (int s = 0; s < 5; ++s) {
    ref.step(in);
    dp.step(in);
  }
  auto a = dp.param("w").to_doubles(), e = ref.param("w").to_doubles();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-5) << i;
  EXPECT_GT(std::abs(e[0] - train::xavier_uniform({4, 1}, 0).to_doubles()[0]), 1e-3);
}

RLX_DIST_TEST_MAIN()
