// Every input the fuzz targets keep (tests/data/fuzz/<target>/: what the fuzzers found,
// fixed since; fuzz/corpus/<target>/: the committed seeds) through the target's entry
// function (fuzz/entries.h), in the regular build: each must be read, or rejected with a
// typed error, and not crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/entries.h"

namespace rlx::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class FuzzInputs : public testing::TestWithParam<Target> {};

}  // namespace

// Test names and ctest's list say the target's name.
void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

namespace {

TEST_P(FuzzInputs, AreReadOrRejected) {
  const Target& t = GetParam();
  const fs::path root(RLX_SOURCE_DIR);
  int inputs = 0;
  for (fs::path dir : {root / "tests/data/fuzz" / t.name, root / "fuzz/corpus" / t.name}) {
    if (!fs::is_directory(dir)) continue;
    for (const auto& f : fs::directory_iterator(dir)) {
      if (!f.is_regular_file()) continue;
      std::vector<uint8_t> bytes = read_bytes(f.path());
      ++inputs;
      try {
        t.entry(bytes);
      } catch (const std::exception& e) {
        ADD_FAILURE() << f.path().string() << ": " << e.what();
      }
    }
  }
  EXPECT_GT(inputs, 0) << "no inputs for fuzz target " << t.name;
}

INSTANTIATE_TEST_SUITE_P(Fuzz, FuzzInputs, testing::ValuesIn(targets()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace rlx::fuzz
