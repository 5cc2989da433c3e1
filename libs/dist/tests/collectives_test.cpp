// The collectives against hand-computed results, on any number of ranks (ctest runs it
// under mpirun -np 1, 2 and 3, and with no launcher). Rank r contributes values built
// from r, so every expected value is a closed form in the rank and the world size.
#include <numeric>

#include "dist_test_util.h"

using namespace rlx;
using dist_test::run1;

namespace {

int rank() { return dist::world().rank(); }
int size() { return dist::world().size(); }

// x_r[i] = (r + 1) * (i + 1), i < 6, shape [2, 3].
template <class T>
Tensor ramp(int r) {
  std::vector<T> v(6);
  for (int i = 0; i < 6; ++i) v[size_t(i)] = T((r + 1) * (i + 1));
  return Tensor::from_vector(v, {2, 3});
}

template <class T>
void check_all_reduce() {
  const int n = size();
  const double s = n * (n + 1) / 2.0;  // sum over r of (r + 1)
  Tensor x = ramp<T>(rank());
  auto sum = run1(x, [](Value v) { return dist::all_reduce(v, dist::ReduceOp::sum); });
  auto mx = run1(x, [](Value v) { return dist::all_reduce(v, dist::ReduceOp::max); });
  auto mn = run1(x, [](Value v) { return dist::all_reduce(v, dist::ReduceOp::min); });
  auto vs = sum.to_doubles(), vx = mx.to_doubles(), vn = mn.to_doubles();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(vs[size_t(i)], (i + 1) * s) << i;
    EXPECT_EQ(vx[size_t(i)], (i + 1) * n) << i;
    EXPECT_EQ(vn[size_t(i)], i + 1) << i;
  }
  EXPECT_EQ(sum.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(sum.dtype(), x.dtype());
}

}  // namespace

TEST(Collectives, WorldMatchesTheLauncher) {
  const char* np = std::getenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(size(), np ? std::atoi(np) : 1);
  EXPECT_GE(rank(), 0);
  EXPECT_LT(rank(), size());
}

TEST(Collectives, AllReduceSumMaxMin) {
  check_all_reduce<float>();
  check_all_reduce<double>();
  check_all_reduce<int32_t>();
  check_all_reduce<int64_t>();
}

TEST(Collectives, AllReduceMean) {
  const int n = size();
  Tensor x = ramp<float>(rank());
  auto y = run1(x, [](Value v) { return dist::all_reduce(v, dist::ReduceOp::mean); });
  auto v = y.to_vector<float>();
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(v[size_t(i)], float((i + 1) * (n + 1) / 2.0)) << i;
}

TEST(Collectives, BroadcastFromTheLastRank) {
  const int root = size() - 1;
  auto y = run1(ramp<double>(rank()), [&](Value v) { return dist::broadcast(v, root); });
  EXPECT_EQ(y.to_doubles(), ramp<double>(root).to_doubles());
}

TEST(Collectives, ReduceOntoRankZero) {
  const int n = size();
  auto y = run1(ramp<float>(rank()), [](Value v) { return dist::reduce(v, 0); });
  auto v = y.to_vector<float>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[size_t(i)], rank() == 0 ? (i + 1) * n * (n + 1) / 2 : 0);
}

TEST(Collectives, AllGatherAlongAxes) {
  const int n = size();
  Tensor x = ramp<int64_t>(rank());  // [2, 3]
  auto y0 = run1(x, [](Value v) { return dist::all_gather(v, 0); });
  auto y1 = run1(x, [](Value v) { return dist::all_gather(v, -1); });
  ASSERT_EQ(y0.shape(), (std::vector<int64_t>{2 * n, 3}));
  ASSERT_EQ(y1.shape(), (std::vector<int64_t>{2, 3 * n}));
  auto a = y0.to_vector<int64_t>(), b = y1.to_vector<int64_t>();
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        int64_t want = (r + 1) * (i * 3 + j + 1);
        EXPECT_EQ(a[size_t((r * 2 + i) * 3 + j)], want);
        EXPECT_EQ(b[size_t(i * 3 * n + r * 3 + j)], want);
      }
}

TEST(Collectives, ReduceScatterSumAndMean) {
  const int n = size();
  // x_r [2n, 2]: x_r[j, k] = 100 r + 2 j + k. Chunk r is rows 2r, 2r + 1.
  std::vector<double> v(size_t(4 * n));
  for (int j = 0; j < 2 * n; ++j)
    for (int k = 0; k < 2; ++k) v[size_t(j * 2 + k)] = 100.0 * rank() + 2 * j + k;
  Tensor x = Tensor::from_vector(v, {2 * n, 2});
  auto s = run1(x, [](Value x) { return dist::reduce_scatter(x, dist::ReduceOp::sum); });
  auto m = run1(x, [](Value x) { return dist::reduce_scatter(x, dist::ReduceOp::mean); });
  ASSERT_EQ(s.shape(), (std::vector<int64_t>{2, 2}));
  const double ranks = 100.0 * n * (n - 1) / 2;  // sum over r of 100 r
  auto sv = s.to_doubles(), mv = m.to_doubles();
  for (int j = 0; j < 2; ++j)
    for (int k = 0; k < 2; ++k) {
      double local = 2 * (2 * rank() + j) + k;
      EXPECT_DOUBLE_EQ(sv[size_t(j * 2 + k)], ranks + n * local);
      EXPECT_DOUBLE_EQ(mv[size_t(j * 2 + k)], (ranks + n * local) / n);
    }
}

TEST(Collectives, BarrierAndEagerCalls) {
  dist::world().barrier();
  auto b = run1(ramp<float>(rank()), [](Value v) { return dist::barrier(v); });
  EXPECT_EQ(b.to_doubles(), ramp<float>(rank()).to_doubles());
  auto& pg = dist::world();
  Tensor one = Tensor::full(DType::f64, {3}, 1.0);
  EXPECT_EQ(pg.all_reduce(one).to_doubles(), std::vector<double>(3, size()));
  EXPECT_EQ(pg.broadcast(Tensor::full(DType::f32, {}, rank()), 0).to_doubles()[0], 0.0);
  EXPECT_EQ(pg.all_gather(one).shape(), (std::vector<int64_t>{3 * size()}));
  Tensor col = Tensor::full(DType::f32, {2, size()}, 1.0);
  EXPECT_EQ(pg.reduce_scatter(col, dist::ReduceOp::sum, 1).to_doubles(),
            std::vector<double>(2, size()));
}

TEST(Collectives, DispatchReportShowsNativeCpuKernels) {
  Graph g("t");
  Value x = g.input("x", {DType::f32, {4}});
  g.output(dist::all_reduce(x) + dist::broadcast(x) + dist::reduce(x), "y");
  g.output(dist::all_gather(x), "g");
  CompiledGraph cg = Session(Device::cpu()).compile(g);
  for (const char* o : {"dist.all_reduce", "dist.broadcast", "dist.reduce", "dist.all_gather"})
    EXPECT_EQ(cg.report().count(o, DispatchPath::native), 1) << o << "\n" << cg.report().str();
  cg.run({{"x", Tensor::full(DType::f32, {4}, 1.0)}});  // every rank runs its collectives
}

// d/dw sum(all_reduce(x_r * w)) = sum over ranks of the cotangent (all ones) times x_r:
// the vjp of all_reduce is all_reduce, so the gradient is size * x_r.
TEST(Collectives, GradientOfAllReduce) {
  Graph g("t");
  Value x = g.input("x", {DType::f64, {3}});
  Value w = g.param("w", {DType::f64, {3}});
  g.output(sum(dist::all_reduce(x * w)), "loss");
  auto dg = grad(g, {.wrt = {"w"}});
  CompiledGraph cg = Session(Device::cpu()).compile(*dg);
  cg.set_param("w", Tensor::from_vector<double>({1, 2, 3}, {3}));
  Tensor xr = Tensor::from_vector<double>({1.0 + rank(), 2.0, -3.0 * rank()}, {3});
  auto gw = cg.run({{"x", xr}}).at("grad.w").to_doubles();
  auto xv = xr.to_doubles();
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(gw[size_t(i)], size() * xv[size_t(i)]) << i;
}

// The vjp of all_gather is reduce_scatter(sum): d/dx sum(c * all_gather(x)), with c the
// same [n * 2] weights on every rank, is n times rank r's slice of c.
TEST(Collectives, GradientOfAllGather) {
  const int n = size();
  Graph g("t");
  Value x = g.param("x", {DType::f64, {2}});
  Value c = g.input("c", {DType::f64, {2 * n}});
  g.output(sum(c * dist::all_gather(x)), "loss");
  auto dg = grad(g, {.wrt = {"x"}});
  CompiledGraph cg = Session(Device::cpu()).compile(*dg);
  cg.set_param("x", Tensor::full(DType::f64, {2}, 1.0));
  std::vector<double> cv(size_t(2 * n));
  std::iota(cv.begin(), cv.end(), 1.0);
  auto gx = cg.run({{"c", Tensor::from_vector(cv, {2 * n})}}).at("grad.x").to_doubles();
  EXPECT_DOUBLE_EQ(gx[0], n * cv[size_t(2 * rank())]);
  EXPECT_DOUBLE_EQ(gx[1], n * cv[size_t(2 * rank() + 1)]);
}

// broadcast's vjp is reduce onto root: with c_r = r + 1 on rank r, d/dx of
// sum(c_r * broadcast(x, root)) is the sum of every rank's c_r on root, zero elsewhere.
TEST(Collectives, GradientOfBroadcast) {
  const int n = size(), root = n - 1;
  Graph g("t");
  Value x = g.param("x", {DType::f64, {2}});
  Value c = g.input("c", {DType::f64, {2}});
  g.output(sum(c * dist::broadcast(x, root)), "loss");
  auto dg = grad(g, {.wrt = {"x"}});
  CompiledGraph cg = Session(Device::cpu()).compile(*dg);
  cg.set_param("x", Tensor::full(DType::f64, {2}, 1.0));
  auto gx = cg.run({{"c", Tensor::full(DType::f64, {2}, rank() + 1.0)}}).at("grad.x").to_doubles();
  const double want = rank() == root ? n * (n + 1) / 2.0 : 0.0;
  EXPECT_EQ(gx, std::vector<double>(2, want));
}

// vmap over a batch axis: the same as the collective of the batched tensor.
TEST(Collectives, VmapOfAllReduceAndAllGather) {
  Graph g("t");
  Value x = g.input("x", {DType::f32, {3}});
  g.output(dist::all_reduce(x), "s");
  g.output(dist::all_gather(x), "a");
  auto vg = vmap(g, {.in_axes = {{"x", 0}}});
  CompiledGraph cg = Session(Device::cpu()).compile(*vg);
  Tensor xb = ramp<float>(rank());  // a batch of 2 rows of 3
  auto out = cg.run({{"x", xb}});
  EXPECT_EQ(out.at("s").to_doubles(),
            run1(xb, [](Value v) { return dist::all_reduce(v); }).to_doubles());
  ASSERT_EQ(out.at("a").shape(), (std::vector<int64_t>{2, 3 * size()}));
  EXPECT_EQ(out.at("a").to_doubles(),
            run1(xb, [](Value v) { return dist::all_gather(v, 1); }).to_doubles());
}

TEST(Collectives, BadInputsAreTypedErrors) {
  Graph g("t");
  Value i = g.input("i", {DType::i32, {4}});
  EXPECT_THROW(dist::all_reduce(i, dist::ReduceOp::mean), TypeError);
  EXPECT_THROW(dist::broadcast(i, size()), ValueError);
  EXPECT_THROW(dist::all_gather(g.input("s", {DType::f32, {}})), ValueError);
  if (size() > 1) {
    EXPECT_THROW(dist::reduce_scatter(g.input("odd", {DType::f32, {size() + 1}})), ValueError);
  }
  // MPI cannot add bf16: no CPU kernel, one NotSupported at compile time.
  Graph b("t");
  b.output(dist::all_reduce(b.input("x", {DType::bf16, {4}})), "y");
  EXPECT_THROW(Session(Device::cpu()).compile(b), NotSupported);
  // A graph built for another world size is refused by the kernel, on every rank alike.
  Graph h("t");
  Value x = h.input("x", {DType::f32, {2}});
  h.output(op("dist.all_reduce", {x}, {{"size", int64_t(size() + 1)}}), "y");
  CompiledGraph cg = Session(Device::cpu()).compile(h);
  EXPECT_THROW(cg.run({{"x", Tensor::full(DType::f32, {2}, 1.0)}}), ValueError);
}

TEST(Sampler, ShardsCoverTheDatasetOnce) {
  dist::DistributedSampler s(10, dist::world(), /*shuffle=*/true, /*seed=*/3);
  s.set_epoch(1);
  std::vector<int64_t> mine = s.indices();
  EXPECT_EQ(int64_t(mine.size()), s.num_samples());
  // Gather every rank's shard and check: each index 0..9 at least once, padding only
  // up to a multiple of the world size.
  Tensor all = dist::world().all_gather(Tensor::from_vector(mine, {int64_t(mine.size())}));
  std::vector<int64_t> v = all.to_vector<int64_t>();
  EXPECT_EQ(int64_t(v.size()), (10 + size() - 1) / size() * size());
  std::vector<int> seen(10, 0);
  for (int64_t i : v) ++seen.at(size_t(i));
  for (int k = 0; k < 10; ++k) EXPECT_GE(seen[size_t(k)], 1) << k;
  dist::DistributedSampler unshuffled(10, dist::world(), false, 0, /*drop_last=*/true);
  for (int64_t k = 0; k < unshuffled.num_samples(); ++k)
    EXPECT_EQ(unshuffled.indices()[size_t(k)], rank() + k * size());
}

RLX_DIST_TEST_MAIN()
