// Every op's vjp / jvp / hvp / vmap rules against finite differences and unbatched loops,
// over the family grad-check tables.
#include "op_tables/gradcheck.h"

#include <gtest/gtest.h>

#include <map>

namespace rlx::test {
namespace {

const GradTable& table() {
  static const GradTable t = all_grads();
  return t;
}

bool exempt(const std::string& op) {
  for (const auto& e : table().exempt)
    if (e.first == op) return true;
  return false;
}

class GradCheckTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GradCheckTest, MatchesFiniteDifferences) {
  int n = 0;
  for (const GradCheck& c : table().checks) {
    if (c.op != GetParam()) continue;
    ++n;
    for (const auto& f : run_grad_check(c)) ADD_FAILURE() << grad_label(c) << ": " << f;
  }
  if (n == 0 && exempt(GetParam())) GTEST_SKIP() << "exempt: no inputs to differentiate or batch";
  EXPECT_GT(n, 0) << "no grad checks for op '" << GetParam() << "'";
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheckTest, ::testing::ValuesIn(registered_op_names()),
                         [](const auto& info) { return test_name_of(info.param); });

// Differentiable ops need a vjp check (jvp and hvp come with it unless turned off with a
// reason); every op with inputs needs a vmap check.
TEST(GradCheckCoverage, EveryOpIsChecked) {
  std::map<std::string, std::pair<bool, bool>> seen;  // op -> (vjp, vmap)
  for (const GradCheck& c : table().checks) {
    seen[c.op].first |= c.vjp;
    seen[c.op].second |= c.vmap;
  }
  for (const OpDef* d : OpRegistry::global().all()) {
    if (exempt(d->name)) continue;
    bool diff = !d->has(Trait::nondifferentiable) && !d->has(Trait::random);
    EXPECT_TRUE(!diff || seen[d->name].first) << d->name << " has no vjp check";
    EXPECT_TRUE(seen[d->name].second) << d->name << " has no vmap check";
  }
}

}  // namespace
}  // namespace rlx::test
