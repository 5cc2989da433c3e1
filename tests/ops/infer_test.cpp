// Shape and dtype inference of every core op: the family tables, and a coverage check
// that every registered core op has at least one accepted and one rejected case.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "op_tables/infer_harness.h"

namespace rlx::testing {
namespace {

class Infer : public ::testing::TestWithParam<InferCase> {};
TEST_P(Infer, Case) { run_infer_case(GetParam()); }

#define RLX_FAMILY(name)                                                                       \
  INSTANTIATE_TEST_SUITE_P(name, Infer, ::testing::ValuesIn(name##_cases()),                   \
                           [](const ::testing::TestParamInfo<InferCase>& info) {               \
                             std::string s = info.param.op + "_" + std::to_string(info.index); \
                             for (char& ch : s)                                                \
                               if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';         \
                             return s;                                                         \
                           })
RLX_FAMILY(elementwise);
RLX_FAMILY(reduce);
RLX_FAMILY(linalg);
RLX_FAMILY(shape);
RLX_FAMILY(nn);
RLX_FAMILY(random);
RLX_FAMILY(control);
RLX_FAMILY(autodiff);
RLX_FAMILY(fused);
RLX_FAMILY(quant);
RLX_FAMILY(llm);
RLX_FAMILY(complex);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Infer);

TEST(InferCoverage, EveryCoreOpHasAcceptedAndRejectedCases) {
  std::map<std::string, std::pair<int, int>> seen;  // op -> (ok, error)
  for (const auto& c : all_cases()) {
    auto& s = seen[c.op];
    (c.expect == Expect::ok ? s.first : s.second)++;
  }
  std::vector<std::string> missing;
  for (const OpDef* op : OpRegistry::global().all()) {
    auto it = seen.find(op->name);
    if (it == seen.end() || it->second.first == 0 || it->second.second == 0)
      missing.push_back(op->name);
  }
  EXPECT_TRUE(missing.empty()) << "ops without an ok and an error case: "
                               << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace rlx::testing
