// rlx::settings(): the one list of runtime switches (rlx/settings.h), its documentation
// table and the compiles that read it. Reading the environment is tested from Python
// (tests/python/test_settings.py), in a fresh process.
#include "rlx/settings.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "rlx/rlx.h"

namespace rlx {
namespace {

// Sets one field for the scope of a test.
template <typename T>
struct Scoped {
  T& field;
  T saved;
  Scoped(T& f, T v) : field(f), saved(f) { field = v; }
  ~Scoped() { field = saved; }
};

TEST(Settings, DocsTableListsEverySettingWithItsDefault) {
  std::ifstream f(RLX_SOURCE_DIR "/docs/settings.md");
  ASSERT_TRUE(f) << "cannot read docs/settings.md";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string docs = ss.str();
  size_t rows = 0;
  for (size_t at = docs.find("\n| `"); at != std::string::npos; at = docs.find("\n| `", at + 1))
    ++rows;
  std::vector<SettingInfo> table = setting_table();
  EXPECT_EQ(rows, table.size()) << "docs/settings.md has a row per setting, no more";
  for (const SettingInfo& s : table) {
    std::string def = s.default_value.empty() ? "(empty)" : "`" + s.default_value + "`";
    std::string row = str_cat("| `", s.name, "` | `", s.variable, "` | ", def, " | ");
    EXPECT_NE(docs.find(row), std::string::npos) << "docs/settings.md lacks the row " << row;
  }
}

TEST(Settings, OptLevelDecidesThePipelineOfCompilesThatLeaveItOpen) {
  CompileOptions options;  // opt_level -1: the setting's
  Scoped level(settings().opt_level, 0);
  std::vector<std::string> at0 = compile_pipeline(Device::cpu(), options);
  settings().opt_level = 2;
  std::vector<std::string> at2 = compile_pipeline(Device::cpu(), options);
  EXPECT_LT(at0.size(), at2.size());
  options.opt_level = 0;  // the caller's word wins
  EXPECT_EQ(compile_pipeline(Device::cpu(), options), at0);
}

TEST(Settings, ACompileUnderOtherSettingsIsNotServedFromTheCache) {
  Graph g("g");
  Value x = g.input("x", TensorType(DType::f32, {4}));
  g.output(exp(exp(x)), "y");
  Session s(Device::cpu());
  CompiledGraph a = s.compile(g);
  CompiledGraph b = s.compile(g);
  EXPECT_TRUE(b.from_cache()) << "an equal compile is served from the cache";
  Scoped arena(settings().arena, false);
  CompiledGraph c = s.compile(g);
  EXPECT_FALSE(c.from_cache());
  TensorMap in{{"x", Tensor::from_vector<float>({0, 1, 2, 3}, {4})}};
  EXPECT_EQ(c.run(in).at("y").to_doubles(), a.run(in).at("y").to_doubles());
}

TEST(Settings, DebugNamesWhatToPrint) {
  Settings s;
  EXPECT_FALSE(s.debug_has("passes"));
  s.debug = "passes";
  EXPECT_TRUE(s.debug_has("passes"));
  EXPECT_FALSE(s.debug_has("graph"));
  s.debug = "all";
  EXPECT_TRUE(s.debug_has("graph"));
}

}  // namespace
}  // namespace rlx
