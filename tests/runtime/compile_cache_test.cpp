// The compile cache (graph hashes, in-memory reuse, keys that tell options apart), dims
// bound at compile time, and the on-disk blob cache.
#include "rlx/compile_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "rlx/rlx.h"

namespace rlx {
namespace {

std::unique_ptr<Graph> mlp(double bias = 1.0, std::string out = "y") {
  auto g = std::make_unique<Graph>();
  Value x = g->input("x", {DType::f32, {Dim::sym("batch"), 3}});
  Value w = g->param("w", {DType::f32, {3, 2}});
  g->output(relu(matmul(x, w) + bias), out);
  return g;
}

Tensor ones(std::vector<int64_t> shape) { return Tensor::full(DType::f32, shape, 1.0); }

TEST(GraphHash, EqualGraphsHashEqualAndChangesShow) {
  auto a = mlp(), b = mlp();
  EXPECT_EQ(graph_hash(*a), graph_hash(*b));
  EXPECT_EQ(graph_hash(*a), graph_hash(*a->clone()));
  EXPECT_NE(graph_hash(*a), graph_hash(*mlp(2.0)));       // a constant's value
  EXPECT_NE(graph_hash(*a), graph_hash(*mlp(1.0, "z")));  // an output's name
  Graph c;
  Value x = c.input("x", {DType::f32, {Dim::sym("n"), 3}});  // another symbol
  Value w = c.param("w", {DType::f32, {3, 2}});
  c.output(relu(matmul(x, w) + 1.0), "y");
  EXPECT_NE(graph_hash(*a), graph_hash(c));
}

TEST(CompileCache, SecondCompileReusesTheProgramWithItsOwnParams) {
  clear_compile_cache();
  auto g = mlp();
  Session s;
  CompiledGraph first = s.compile(*g);
  CompiledGraph second = s.compile(*mlp());  // an equal graph built anew
  EXPECT_FALSE(first.from_cache());
  EXPECT_TRUE(second.from_cache());
  EXPECT_EQ(&first.lowered(), &second.lowered());
  EXPECT_EQ(compile_cache_size(), 1u);

  first.set_param("w", ones({3, 2}));
  second.set_param("w", Tensor::full(DType::f32, {3, 2}, 2.0));
  Tensor x = ones({2, 3});
  EXPECT_EQ(first.run({{"x", x}}).at("y").to_vector<float>(), std::vector<float>(4, 4.0f));
  EXPECT_EQ(second.run({{"x", x}}).at("y").to_vector<float>(), std::vector<float>(4, 7.0f));
}

TEST(CompileCache, OptionsThatChangeTheProgramMiss) {
  clear_compile_cache();
  auto g = mlp();
  Session s;
  s.compile(*g);
  CompileOptions o0;
  o0.opt_level = 0;
  EXPECT_FALSE(s.compile(*g, o0).from_cache());
  CompileOptions threads;
  threads.threads = 1;
  EXPECT_FALSE(s.compile(*g, threads).from_cache());
  CompileOptions dims;
  dims.dims = {{"batch", 4}};
  EXPECT_FALSE(s.compile(*g, dims).from_cache());
  EXPECT_TRUE(s.compile(*g, dims).from_cache());
  CompileOptions off;
  off.cache = false;
  EXPECT_FALSE(s.compile(*g, off).from_cache());
  EXPECT_EQ(compile_cache_size(), 4u);
  clear_compile_cache();
  EXPECT_EQ(compile_cache_size(), 0u);
}

TEST(CompileCache, NewKernelsAndPrivateRegistriesAreNotServedStale) {
  clear_compile_cache();
  auto g = mlp();
  Session s;
  s.compile(*g);
  // A kernel registered anywhere may change how an equal graph resolves.
  KernelRegistry mine;
  mine.add("test.none", DeviceKind::cpu,
           [](const KernelContext&, std::span<const Tensor>, std::span<Tensor>) {});
  EXPECT_FALSE(s.compile(*g).from_cache());
  // Compiles against a caller's registry are not cached at all.
  CompileOptions o;
  o.kernels = &KernelRegistry::global();
  EXPECT_TRUE(s.compile(*g, o).from_cache());
  o.kernels = &mine;
  EXPECT_THROW(s.compile(*g, o), NotSupported);  // no kernels there: every op missing
}

TEST(BindDims, CompiledGraphTakesOnlyTheBoundSize) {
  auto g = mlp();
  CompileOptions o;
  o.dims = {{"batch", 2}};
  CompiledGraph cg = Session().compile(*g, o);
  EXPECT_EQ(cg.lowered().args()[0].value.type().str(), "f32[2,3]");
  cg.set_param("w", ones({3, 2}));
  EXPECT_EQ(cg.run({{"x", ones({2, 3})}}).at("y").shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_THROW(cg.run({{"x", ones({5, 3})}}), ValueError);
}

TEST(BindDims, UnknownSymbolOrNegativeSizeIsAValueError) {
  auto g = mlp();
  try {
    bind_dims(*g, {{"seq", 4}});
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("batch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("seq"), std::string::npos) << e.what();
  }
  EXPECT_THROW(bind_dims(*g, {{"batch", -1}}), ValueError);
  auto bound = bind_dims(*g, {{"batch", 7}});
  EXPECT_EQ(bound->outputs()[0].value.type().str(), "f32[7,2]");
}

class DiskCacheTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rlx-disk-cache-" + std::to_string(::getpid()) + "-" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(DiskCacheTest, PutGetEraseRoundTrip) {
  DiskCache c(dir_.string());
  EXPECT_FALSE(c.get("k1").has_value());
  std::string blob("ptx\0bytes", 9);
  ASSERT_TRUE(c.put("k1", blob));
  EXPECT_EQ(c.get("k1"), blob);
  EXPECT_TRUE(c.put("k1", "second"));  // replaced atomically
  EXPECT_EQ(c.get("k1"), "second");
  EXPECT_TRUE(c.erase("k1"));
  EXPECT_FALSE(c.get("k1").has_value());
  EXPECT_EQ(DiskCache(dir_.string()).dir(), dir_.string());
}

TEST_F(DiskCacheTest, DamagedEntriesAreMissesAndBadKeysAreErrors) {
  DiskCache c(dir_.string());
  ASSERT_TRUE(c.put("k", std::string(1000, 'x')));
  std::filesystem::resize_file(dir_ / "k", 500);  // truncated
  EXPECT_FALSE(c.get("k").has_value());
  std::ofstream(dir_ / "j") << "not a cache blob";
  EXPECT_FALSE(c.get("j").has_value());
  EXPECT_THROW(c.get("../escape"), ValueError);
  EXPECT_THROW(c.put("a/b", "x"), ValueError);
  EXPECT_THROW(DiskCache(""), ValueError);
  EXPECT_FALSE(DiskCache("/proc/rlx-no-such-dir").put("k", "x"));
}

}  // namespace
}  // namespace rlx
