#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {

constexpr auto kValue = Expect::value_error;
constexpr auto kType = Expect::type_error;

void add_axes_reduce_cases(std::vector<InferCase>& v) {
  const char* numeric[] = {"sum", "prod", "reduce_max", "reduce_min"};
  const char* floating[] = {"mean", "logsumexp", "l1_norm", "l2_norm"};
  auto each = [&](auto fn) {
    for (const char* op : numeric) fn(op);
    for (const char* op : floating) fn(op);
  };
  each([&](const char* op) {
    v.push_back(ok(op, {"f32[2,3,4]"}, {}, {"f32[]"}));
    v.push_back(ok(op, {"f32[2,3,4]"}, {{"axes", IntList{1}}}, {"f32[2,4]"}));
    v.push_back(
        ok(op, {"f64[2,3,4]"}, {{"axes", IntList{-1, 0}}, {"keepdims", true}}, {"f64[1,3,1]"}));
    v.push_back(ok(op, {"f32[2,3]"}, {{"keepdims", true}}, {"f32[1,1]"}));
    v.push_back(ok(op, {"f16[batch,seq,8]"}, {{"axes", IntList{-2}}}, {"f16[batch,8]"}));
    v.push_back(ok(op, {"f32[]"}, {{"keepdims", true}}, {"f32[]"}));
    v.push_back(ok(op, {"f32[0,3]"}, {{"axes", IntList{1}}}, {"f32[0]"}));
    v.push_back(bad(op, {"f32[2,3,4]"}, {{"axes", IntList{0, -3}}}, kValue,
                    "expected distinct axes, got [0,-3]"));
    v.push_back(
        bad(op, {"f32[2,3,4]"}, {{"axes", IntList{3}}}, kValue, "expected axes in [-3, 3), got 3"));
    v.push_back(bad(op, {"f32[]"}, {{"axes", IntList{0}}}, kValue, "expected axes in [0, 0)"));
    v.push_back(bad(op, {"bool[2]"}, {}, kType, "bool[2]"));
  });
  for (const char* op : numeric) {
    v.push_back(ok(op, {"i32[batch,3]"}, {{"axes", IntList{1}}}, {"i32[batch]"}));
    v.push_back(ok(op, {"u8[4]"}, {}, {"u8[]"}));
    v.push_back(bad(op, {"bool[2,3]"}, {{"axes", IntList{0}}}, kType,
                    "expected a numeric dtype for input 0, got bool[2,3]"));
  }
  for (const char* op : floating)
    v.push_back(bad(op, {"i32[2,3]"}, {}, kType, "expected a float dtype for input 0, got i32"));

  // Empty axes: sum / prod / mean / logsumexp / norms have a value; max and min do not.
  v.push_back(ok("sum", {"f32[0,3]"}, {{"axes", IntList{0}}}, {"f32[3]"}));
  v.push_back(ok("prod", {"i64[2,0]"}, {}, {"i64[]"}));
  v.push_back(ok("logsumexp", {"f32[0]"}, {{"keepdims", true}}, {"f32[1]"}));
  v.push_back(ok("reduce_max", {"f32[?,3]"}, {}, {"f32[]"}));
  v.push_back(bad("reduce_max", {"f32[0,3]"}, {{"axes", IntList{0}}}, kValue,
                  "expected a non-empty reduced axis, got size 0 at axis 0"));
  v.push_back(bad("reduce_min", {"i32[3,0]"}, {}, kValue, "size 0 at axis 1"));

  // Schema errors.
  v.push_back(bad("sum", {"f32[2]"}, {{"axis", 0}}, kValue, "unknown 'axis'"));
  v.push_back(bad("mean", {"f32[2]"}, {{"axes", 0}}, kType, "expected attribute 'axes' of kind"));
  v.push_back(bad("sum", {"f32[2]", "f32[2]"}, {}, kValue, "expected 1 inputs, got 2"));
  v.push_back(bad("l2_norm", {"f32[2]"}, {{"keepdims", 1}}, kType, "'keepdims' of kind"));
}

void add_index_cases(std::vector<InferCase>& v) {
  for (const char* op : {"argmax", "argmin"}) {
    v.push_back(ok(op, {"f32[2,3]"}, {}, {"i64[3]"}));
    v.push_back(ok(op, {"f32[2,3]"}, {{"axis", 1}}, {"i64[2]"}));
    v.push_back(ok(op, {"i32[2,3]"}, {{"axis", -1}, {"keepdims", true}}, {"i64[2,1]"}));
    v.push_back(
        ok(op, {"u8[batch,5]"}, {{"axis", 1}, {"select_last_index", true}}, {"i64[batch]"}));
    v.push_back(ok(op, {"f16[batch,?]"}, {{"axis", 0}, {"keepdims", true}}, {"i64[1,?]"}));
    v.push_back(ok(op, {"f32[7]"}, {}, {"i64[]"}));
    v.push_back(ok(op, {"f32[0,3]"}, {{"axis", 1}}, {"i64[0]"}));
    v.push_back(bad(op, {"f32[0,3]"}, {}, kValue, "size 0 at axis 0"));
    v.push_back(bad(op, {"f32[]"}, {}, kValue, "expected input 0 of rank >= 1, got f32[]"));
    v.push_back(bad(op, {"f32[2,3]"}, {{"axis", 2}}, kValue, "expected axis in [-2, 2), got 2"));
    v.push_back(bad(op, {"f32[2,3]"}, {{"axis", -3}}, kValue, "got -3"));
    v.push_back(bad(op, {"bool[2]"}, {}, kType, "a numeric dtype"));
    v.push_back(bad(op, {"f32[2]"}, {{"axes", IntList{0}}}, kValue, "unknown 'axes'"));
  }

  v.push_back(ok("cumsum", {"f32[2,3]"}, {}, {"f32[2,3]"}));
  v.push_back(ok("cumsum", {"i32[batch,4]"}, {{"axis", -1}, {"exclusive", true}, {"reverse", true}},
                 {"i32[batch,4]"}));
  v.push_back(ok("cumsum", {"u8[0]"}, {}, {"u8[0]"}));
  v.push_back(ok("cumsum", {"f64[?,1]"}, {{"axis", 1}}, {"f64[?,1]"}));
  v.push_back(bad("cumsum", {"f32[]"}, {}, kValue, "expected input 0 of rank >= 1"));
  v.push_back(bad("cumsum", {"f32[2,3]"}, {{"axis", 2}}, kValue, "expected axis in [-2, 2)"));
  v.push_back(bad("cumsum", {"bool[3]"}, {}, kType, "a numeric dtype"));
  v.push_back(bad("cumsum", {"f32[3]"}, {{"exclusive", "yes"}}, kType, "of kind"));
  v.push_back(bad("cumsum", {"f32[3]"}, {{"keepdims", true}}, kValue, "unknown 'keepdims'"));

  v.push_back(ok("sum_squares", {"f32[2,3]"}, {}, {"f64[]"}));
  v.push_back(ok("sum_squares", {"bf16[batch,4]", "f32[]", "f64[0]"}, {}, {"f64[]"}));
  v.push_back(bad("sum_squares", {"f32[2]", "i32[2]"}, {}, kType,
                  "expected a float dtype for input 1, got i32"));
  v.push_back(bad("sum_squares", {}, {}, kValue, "expected at least 1 inputs, got 0"));
}

}  // namespace

std::vector<InferCase> reduce_cases() {
  std::vector<InferCase> v;
  add_axes_reduce_cases(v);
  add_index_cases(v);
  return v;
}

}  // namespace rlx::testing
