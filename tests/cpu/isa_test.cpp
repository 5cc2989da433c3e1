// The CPU kernels' instruction-set level (rlx/cpu_isa.h): the one in use is built and runs
// here; RLX_CPU_ISA, where the level runs here, is the one in use (tests/isa/run_level.sh
// runs this file at each level).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "rlx/cpu_isa.h"

namespace rlx {
namespace {

TEST(CpuIsa, TheLevelInUseIsBuiltAndRunsHere) {
  const std::vector<CpuIsa> built = cpu_isas_built();
  ASSERT_FALSE(built.empty());
  EXPECT_NE(std::find(built.begin(), built.end(), cpu_isa()), built.end())
      << cpu_isa_name(cpu_isa());
  EXPECT_TRUE(cpu_isa_supported(cpu_isa())) << cpu_isa_name(cpu_isa());
  EXPECT_TRUE(std::is_sorted(built.begin(), built.end()));
  if (built.size() > 1) EXPECT_TRUE(cpu_isa_supported(CpuIsa::baseline));
}

TEST(CpuIsa, TheBestLevelUnlessOneIsForced) {
  const char* env = std::getenv("RLX_CPU_ISA");
  const std::string want = env && *env ? env : "auto";
  const std::vector<CpuIsa> built = cpu_isas_built();
  if (built.size() == 1) {
    EXPECT_EQ(cpu_isa(), CpuIsa::native);
    return;
  }
  CpuIsa best = CpuIsa::baseline;
  for (CpuIsa l : built)
    if (cpu_isa_supported(l)) best = l;
  for (CpuIsa l : built)
    if (cpu_isa_name(l) == want && cpu_isa_supported(l)) {
      EXPECT_EQ(cpu_isa(), l) << cpu_isa_name(cpu_isa()) << ", forced " << want;
      return;
    }
  // "auto", or a level this CPU lacks (or no level at all): the best it has.
  EXPECT_EQ(cpu_isa(), best) << cpu_isa_name(cpu_isa()) << " vs " << cpu_isa_name(best);
}

TEST(CpuIsa, OnlyTheAvx512LevelRunsAvx512Code) {
  if (cpu_isa() == CpuIsa::native) GTEST_SKIP() << "a native build: its -march decides";
  EXPECT_EQ(cpu_isa_avx512(), cpu_isa() == CpuIsa::avx512);
}

}  // namespace
}  // namespace rlx
