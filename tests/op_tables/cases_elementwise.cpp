#include <cmath>

#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {

constexpr auto kValue = Expect::value_error;
constexpr auto kType = Expect::type_error;

void add_unary_cases(std::vector<InferCase>& v) {
  for (const char* op : {"neg", "abs", "sign", "square"}) {
    v.push_back(ok(op, {"f32[2,3]"}, {}, {"f32[2,3]"}));
    v.push_back(ok(op, {"i32[batch,?]"}, {}, {"i32[batch,?]"}));
    v.push_back(bad(op, {"bool[2]"}, {}, kType, "expected a numeric dtype for input 0"));
  }
  v.push_back(ok("abs", {"u8[0,4]"}, {}, {"u8[0,4]"}));
  v.push_back(ok("neg", {"f64[]"}, {}, {"f64[]"}));

  for (const char* op :
       {"exp",        "expm1",        "log",      "log1p", "sqrt",       "rsqrt",
        "reciprocal", "sin",          "cos",      "tan",   "tanh",       "sigmoid",
        "erf",        "softplus",     "softsign", "silu",  "floor",      "ceil",
        "round",      "hard_sigmoid", "gelu",     "elu",   "leaky_relu", "fake_quantize"}) {
    v.push_back(ok(op, {"f32[batch,64]"}, {}, {"f32[batch,64]"}));
    v.push_back(ok(op, {"bf16[0,1]"}, {}, {"bf16[0,1]"}));
    v.push_back(bad(op, {"i32[2]"}, {}, kType, "dtype for input 0, got i32[2]"));
  }
  v.push_back(ok("exp", {"f16[]"}, {}, {"f16[]"}));
  v.push_back(ok("hard_sigmoid", {"f32[3]"}, {{"alpha", 0.25}, {"beta", 1}}, {"f32[3]"}));
  v.push_back(bad("hard_sigmoid", {"f32[3]"}, {{"beta", std::nan("")}}, kValue,
                  "expected attribute 'beta' to be finite"));
  v.push_back(
      bad("fake_quantize", {"f32[2]"}, {{"scale", HUGE_VAL}}, kValue, "'scale' to be finite"));
  v.push_back(ok("gelu", {"f32[2]"}, {{"approximate", "tanh"}}, {"f32[2]"}));
  v.push_back(ok("gelu", {"f64[2]"}, {{"approximate", "none"}}, {"f64[2]"}));
  v.push_back(bad("gelu", {"f32[2]"}, {{"approximate", "erf"}}, kValue, "one of none|tanh"));
  v.push_back(bad("gelu", {"f32[2]"}, {{"approximate", true}}, kType, "of kind"));
  v.push_back(ok("elu", {"f32[2]"}, {{"alpha", 0.5}}, {"f32[2]"}));
  v.push_back(bad("elu", {"f32[2]"}, {{"alpha", HUGE_VAL}}, kValue, "'alpha' to be finite"));
  v.push_back(ok("leaky_relu", {"f16[n]"}, {{"alpha", 0.2}}, {"f16[n]"}));
  v.push_back(bad("leaky_relu", {"f32[2]"}, {{"alpha", "small"}}, kType, "of kind"));

  v.push_back(ok("relu", {"f32[batch,3]"}, {}, {"f32[batch,3]"}));
  v.push_back(ok("relu", {"i8[4]"}, {}, {"i8[4]"}));
  v.push_back(bad("relu", {"u8[4]"}, {}, kType, "expected a float or signed integer dtype"));
  v.push_back(bad("relu", {"bool[4]"}, {}, kType, "float or signed integer"));

  v.push_back(ok("logical_not", {"bool[batch,0]"}, {}, {"bool[batch,0]"}));
  v.push_back(bad("logical_not", {"i32[2]"}, {}, kType, "expected bool for input 0"));
  for (const char* op : {"isnan", "isinf"}) {
    v.push_back(ok(op, {"f16[2,batch]"}, {}, {"bool[2,batch]"}));
    v.push_back(bad(op, {"i64[2]"}, {}, kType, "a float dtype"));
  }

  // Schema errors come from the registry, with the op named.
  v.push_back(bad("exp", {"f32[2]"}, {{"axis", 1}}, kValue, "unknown 'axis'"));
  v.push_back(bad("neg", {"f32[2]", "f32[2]"}, {}, kValue, "expected 1 inputs, got 2"));
  v.push_back(bad("sigmoid", {}, {}, kValue, "expected 1 inputs, got 0"));
}

void add_binary_cases(std::vector<InferCase>& v) {
  for (const char* op : {"add", "sub", "mul", "div", "pow", "max", "min", "mod", "fmod"}) {
    v.push_back(ok(op, {"f32[2,3]", "f32[3]"}, {}, {"f32[2,3]"}));
    v.push_back(ok(op, {"i32[batch,1]", "i32[1,5]"}, {}, {"i32[batch,5]"}));
    v.push_back(bad(op, {"bool[2]", "bool[2]"}, {}, kType, "expected a numeric dtype"));
    v.push_back(bad(op, {"f32[2]", "f64[2]"}, {}, kType,
                    "expected inputs 0 and 1 of the same dtype, got f32[2] and f64[2]"));
  }
  v.push_back(ok("atan2", {"f32[2,1]", "f32[3]"}, {}, {"f32[2,3]"}));
  v.push_back(bad("atan2", {"i32[2]", "i32[2]"}, {}, kType, "a float dtype"));
  for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
    v.push_back(ok(op, {"bool[batch]", "bool[]"}, {}, {"bool[batch]"}));
    v.push_back(bad(op, {"i32[2]", "i32[2]"}, {}, kType, "expected bool for input 0"));
  }
  for (const char* op : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
    v.push_back(ok(op, {"u8[4]", "u8[4]"}, {}, {"u8[4]"}));
    v.push_back(ok(op, {"bool[2,1]", "bool[1,2]"}, {}, {"bool[2,2]"}));
    v.push_back(bad(op, {"f32[4]", "f32[4]"}, {}, kType, "an integer or bool dtype"));
  }
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    v.push_back(ok(op, {"f32[batch,3]", "f32[3]"}, {}, {"bool[batch,3]"}));
    v.push_back(ok(op, {"bool[2]", "bool[2]"}, {}, {"bool[2]"}));
    v.push_back(bad(op, {"i64[2]", "i32[2]"}, {}, kType, "of the same dtype"));
    v.push_back(bad(op, {"f32[2]", "f32[3]"}, {}, kValue, "expected broadcastable shapes"));
  }

  // Broadcasting: ranks align on the right; 1 stretches; symbols meet statics and symbols.
  v.push_back(ok("add", {"f32[2,1,4]", "f32[3,1]"}, {}, {"f32[2,3,4]"}));
  v.push_back(ok("add", {"f32[]", "f32[0,3]"}, {}, {"f32[0,3]"}));
  v.push_back(ok("add", {"f32[0]", "f32[1]"}, {}, {"f32[0]"}));
  v.push_back(ok("mul", {"f32[batch]", "f32[batch]"}, {}, {"f32[batch]"}));
  v.push_back(ok("mul", {"f32[batch]", "f32[4]"}, {}, {"f32[4]"}));
  v.push_back(ok("mul", {"f32[batch]", "f32[seq]"}, {}, {"f32[?]"}));
  v.push_back(ok("sub", {"f32[?,3]", "f32[?,1]"}, {}, {"f32[?,3]"}));
  v.push_back(bad("add", {"f32[2,3]", "f32[4]"}, {}, kValue,
                  "expected broadcastable shapes, got [2,3] and [4]"));
  v.push_back(bad("add", {"f32[0]", "f32[2]"}, {}, kValue, "broadcastable"));
  v.push_back(bad("add", {"f32[2]"}, {}, kValue, "expected 2 inputs, got 1"));
  v.push_back(bad("mul", {"f32[2]", "f32[2]", "f32[2]"}, {}, kValue, "expected 2 inputs, got 3"));
  v.push_back(bad("sub", {"f32[2]", "f32[2]"}, {{"alpha", 1.0}}, kValue, "unknown 'alpha'"));
}

void add_ternary_cases(std::vector<InferCase>& v) {
  v.push_back(ok("select", {"bool[2,3]", "f32[2,3]", "f32[3]"}, {}, {"f32[2,3]"}));
  v.push_back(ok("select", {"bool[batch,1]", "i32[1,4]", "i32[]"}, {}, {"i32[batch,4]"}));
  v.push_back(ok("select", {"bool[]", "bool[0]", "bool[1]"}, {}, {"bool[0]"}));
  v.push_back(bad("select", {"f32[2]", "f32[2]", "f32[2]"}, {}, kType,
                  "expected bool for input 0, got f32[2]"));
  v.push_back(bad("select", {"bool[2]", "f32[2]", "f16[2]"}, {}, kType,
                  "expected inputs 1 and 2 of the same dtype"));
  v.push_back(bad("select", {"bool[3]", "f32[2,1]", "f32[2]"}, {}, kValue, "broadcastable"));
  v.push_back(bad("select", {"bool[2]", "f32[2]"}, {}, kValue, "expected 3 inputs, got 2"));

  v.push_back(ok("clamp", {"f32[2,3]", "f32[]", "f32[3]"}, {}, {"f32[2,3]"}));
  v.push_back(ok("clamp", {"i32[batch]", "i32[1]", "i32[1]"}, {}, {"i32[batch]"}));
  v.push_back(ok("clamp", {"f32[1]", "f32[0]", "f32[]"}, {}, {"f32[0]"}));
  v.push_back(bad("clamp", {"bool[2]", "bool[2]", "bool[2]"}, {}, kType, "a numeric dtype"));
  v.push_back(bad("clamp", {"f32[2]", "f32[2]", "f64[2]"}, {}, kType,
                  "expected inputs 0 and 2 of the same dtype"));
  v.push_back(bad("clamp", {"f32[2]", "f32[3]", "f32[]"}, {}, kValue, "broadcastable"));
  v.push_back(
      bad("clamp", {"f32[2]", "f32[2]", "f32[2]"}, {{"min", 0.0}}, kValue, "unknown 'min'"));

  v.push_back(ok("cast", {"f32[batch,3]"}, {{"dtype", DType::i32}}, {"i32[batch,3]"}));
  v.push_back(ok("cast", {"bool[0]"}, {{"dtype", DType::bf16}}, {"bf16[0]"}));
  v.push_back(ok("cast", {"u8[]"}, {{"dtype", DType::u8}}, {"u8[]"}));
  v.push_back(bad("cast", {"f32[2]"}, {}, kValue, "expected attribute 'dtype' (required)"));
  v.push_back(bad("cast", {"f32[2]"}, {{"dtype", "f16"}}, kType, "of kind"));
  v.push_back(bad("cast", {"f32[2]", "f32[2]"}, {{"dtype", DType::f16}}, kValue,
                  "expected 1 inputs, got 2"));
}

}  // namespace

std::vector<InferCase> elementwise_cases() {
  std::vector<InferCase> v;
  add_unary_cases(v);
  add_binary_cases(v);
  add_ternary_cases(v);
  return v;
}

}  // namespace rlx::testing
