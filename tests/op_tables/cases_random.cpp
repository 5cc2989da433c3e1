#include "op_tables/infer_harness.h"

namespace rlx::testing {

std::vector<InferCase> random_cases() {
  const auto V = Expect::value_error;
  const auto T = Expect::type_error;
  std::vector<InferCase> c;
  for (const char* op : {"uniform", "normal"}) {
    c.push_back(ok(op, {}, {{"shape", IntList{2, 3}}}, {"f32[2,3]"}));
    c.push_back(ok(op, {}, {{"shape", IntList{}}, {"dtype", DType::f16}}, {"f16[]"}));
    c.push_back(ok(op, {}, {{"shape", IntList{0, 4}}, {"seed", 7}}, {"f32[0,4]"}));
    c.push_back(
        ok(op, {"i64[]"}, {{"shape", IntList{1, 5}}, {"dtype", DType::bf16}}, {"bf16[1,5]"}));
    c.push_back(ok(op, {"u8[]"}, {{"shape", IntList{3}}, {"dtype", DType::f64}}, {"f64[3]"}));
    c.push_back(bad(op, {}, {}, V, "'shape' (required)"));
    c.push_back(bad(op, {}, {{"shape", IntList{2}}, {"dtype", DType::i32}}, T, "float dtype"));
    c.push_back(bad(op, {}, {{"shape", IntList{2, -1}}}, V, "shape entries >= 0"));
    c.push_back(bad(op, {"f32[]"}, {{"shape", IntList{2}}}, T, "integer dtype"));
    c.push_back(bad(op, {"i64[1]"}, {{"shape", IntList{2}}}, V, "integer scalar key"));
    c.push_back(bad(op, {"i64[]", "i64[]"}, {{"shape", IntList{2}}}, V, "0 to 1 inputs"));
    c.push_back(bad(op, {}, {{"shape", IntList{2}}, {"seed", 1.5}}, T, "'seed' of kind"));
  }
  c.push_back(ok("uniform", {}, {{"shape", IntList{4}}, {"low", -1}, {"high", 1}}, {"f32[4]"}));
  c.push_back(
      bad("uniform", {}, {{"shape", IntList{4}}, {"low", 1.0}, {"high", 1.0}}, V, "low < high"));
  c.push_back(bad("uniform", {}, {{"shape", IntList{4}}, {"mean", 1.0}}, V, "unknown 'mean'"));
  c.push_back(
      ok("normal", {"i32[]"}, {{"shape", IntList{2}}, {"mean", 2.0}, {"std", 0.0}}, {"f32[2]"}));
  c.push_back(bad("normal", {}, {{"shape", IntList{4}}, {"std", -1.0}}, V, "std >= 0"));
  c.push_back(bad("normal", {}, {{"shape", IntList{4}}, {"high", 2.0}}, V, "unknown 'high'"));
  return c;
}

}  // namespace rlx::testing
