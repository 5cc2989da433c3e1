// The torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), started by
// env_check.sh as two plain processes: the rendezvous, barriers, and the graph's
// dist.barrier; CPU tensor collectives need MPI and say so (NotSupported).
#include "dist_test_util.h"

using namespace rlx;

TEST(EnvLaunch, RankAndSizeFromTheEnvironment) {
  dist::ProcessGroup& pg = dist::world();
  EXPECT_EQ(pg.launch(), dist::Launch::env);
  EXPECT_EQ(pg.rank(), std::atoi(std::getenv("RANK")));
  EXPECT_EQ(pg.size(), std::atoi(std::getenv("WORLD_SIZE")));
}

TEST(EnvLaunch, BarriersThroughTheRendezvous) {
  for (int i = 0; i < 3; ++i) dist::world().barrier();
  Tensor x = Tensor::full(DType::f32, {2}, 3.0);
  EXPECT_EQ(dist_test::run1(x, [](Value v) { return dist::barrier(v); }).to_doubles(),
            x.to_doubles());
}

TEST(EnvLaunch, CpuCollectivesNeedMpi) {
  if (dist::world().size() == 1) GTEST_SKIP() << "one rank: CPU collectives are copies";
  EXPECT_THROW(dist::world().all_reduce(Tensor::full(DType::f32, {2}, 1.0)), NotSupported);
}

RLX_DIST_TEST_MAIN()
