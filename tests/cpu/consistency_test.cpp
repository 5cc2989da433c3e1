// Every core op on the CPU against its reference, over the family check tables.
#include "op_tables/consistency.h"

#include <gtest/gtest.h>

#include <map>

namespace rlx::test {
namespace {

const CheckTable& table() {
  static const CheckTable t = all_checks();
  return t;
}

class CpuConsistency : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuConsistency, MatchesReference) {
  int n = 0;
  for (const OpCheck& c : table().checks) {
    if (c.op != GetParam()) continue;
    ++n;
    for (const auto& f : run_op_check(c, Device::cpu()))
      ADD_FAILURE() << check_label(c) << " " << dtype_name(c.dtype) << ": " << f;
  }
  EXPECT_GT(n, 0) << "no consistency checks for op '" << GetParam() << "'";
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuConsistency, ::testing::ValuesIn(registered_op_names()),
                         [](const auto& info) { return test_name_of(info.param); });

// The dtypes an op's own type rules accept must all be checked: take the op's first
// check, swap its main dtype (in the inputs and in a `dtype` attribute) for each dtype in
// turn, and wherever inference accepts the result, require a check of that dtype (or an
// exemption that says why not).
TEST(CpuConsistencyCoverage, EveryAcceptedDTypeIsChecked) {
  std::map<std::string, std::vector<const OpCheck*>> by_op;
  for (const OpCheck& c : table().checks) by_op[c.op].push_back(&c);
  for (const OpDef* d : OpRegistry::global().all()) {
    auto it = by_op.find(d->name);
    if (it == by_op.end()) continue;  // reported by MatchesReference
    const OpCheck& first = *it->second.front();
    for (DType dt : kAllDTypes) {
      std::vector<TensorType> types;
      for (const Tensor& t : first.inputs) {
        TensorType tt = t.type();
        if (tt.dtype == first.dtype) tt.dtype = dt;
        types.push_back(tt);
      }
      Attrs attrs = first.attrs;
      if (const AttrValue* a = attrs.find("dtype");
          a && a->kind() == AttrKind::DType && attrs.get_dtype("dtype") == first.dtype)
        attrs.set("dtype", dt);
      bool accepted = true;
      try {
        infer_types(*d, types, validate_attrs(*d, attrs), first.subgraphs);
      } catch (const Error&) {
        accepted = false;
      }
      if (!accepted) continue;
      bool checked = false;
      for (const OpCheck* c : it->second) checked |= c->dtype == dt;
      for (const auto& e : table().exempt) checked |= e.op == d->name && e.dtype == dt;
      EXPECT_TRUE(checked) << d->name << " accepts " << dtype_name(dt)
                           << " but has no consistency check for it";
    }
  }
}

}  // namespace
}  // namespace rlx::test
