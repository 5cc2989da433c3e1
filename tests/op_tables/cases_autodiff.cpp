// Inference cases of the autodiff helper ops.
#include "op_tables/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> autodiff_cases() {
  const auto V = Expect::value_error;
  std::vector<InferCase> c;
  c.push_back(ok("reshape_like", {"f32[2,3]", "i64[3,2]"}, {}, {"f32[3,2]"}));
  c.push_back(ok("reshape_like", {"f32[b,6]", "f16[b,2,3]"}, {}, {"f32[b,2,3]"}));
  c.push_back(ok("reshape_like", {"f64[4,2,3]", "f32[6]"}, {{"lead", 1}}, {"f64[4,6]"}));
  c.push_back(ok("reshape_like", {"f32[]", "f32[1,1]"}, {}, {"f32[1,1]"}));
  c.push_back(bad("reshape_like", {"f32[2,3]", "f32[5]"}, {}, V, "as many elements"));
  c.push_back(bad("reshape_like", {"f32[2,3]", "f32[6]"}, {{"lead", 3}}, V, "lead in [0, 2]"));
  c.push_back(bad("reshape_like", {"f32[2]"}, {}, V, "2 inputs"));
  c.push_back(ok("broadcast_like", {"f32[3]", "bool[2,3]"}, {}, {"f32[2,3]"}));
  c.push_back(ok("broadcast_like", {"f32[]", "f32[n,4]"}, {}, {"f32[n,4]"}));
  c.push_back(ok("broadcast_like", {"i32[2,1]", "f32[1,5]"}, {}, {"i32[2,5]"}));
  c.push_back(bad("broadcast_like", {"f32[3]", "f32[4]"}, {}, V, "broadcastable"));
  for (const char* op : {"stop_gradient", "checkpoint"}) {
    c.push_back(ok(op, {"f32[2,b]"}, {}, {"f32[2,b]"}));
    c.push_back(ok(op, {"i64[]"}, {}, {"i64[]"}));
    c.push_back(bad(op, {"f32[2]", "f32[2]"}, {}, V, "1 input"));
  }
  return c;
}

}  // namespace rlx::testing
