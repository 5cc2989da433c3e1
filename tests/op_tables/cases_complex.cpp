// Inference cases of the complex family and the FFTs.
#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {
constexpr auto kValue = Expect::value_error;
constexpr auto kType = Expect::type_error;
}  // namespace

std::vector<InferCase> complex_cases() {
  std::vector<InferCase> v;
  v.push_back(ok("complex", {"f32[2,3]", "f32[3]"}, {}, {"c64[2,3]"}));
  v.push_back(ok("complex", {"f64[n]", "f64[n]"}, {}, {"c128[n]"}));
  v.push_back(bad("complex", {"f16[2]", "f16[2]"}, {}, kType, "expected f32 or f64 parts"));
  v.push_back(bad("complex", {"f32[2]", "f64[2]"}, {}, kType));
  for (const char* op : {"real", "imag"}) {
    v.push_back(ok(op, {"c64[2,?]"}, {}, {"f32[2,?]"}));
    v.push_back(ok(op, {"c128[]"}, {}, {"f64[]"}));
    v.push_back(bad(op, {"f32[2]"}, {}, kType, "expected a complex dtype"));
  }
  v.push_back(ok("conj", {"c64[4]"}, {}, {"c64[4]"}));
  v.push_back(bad("conj", {"f64[4]"}, {}, kType, "expected a complex dtype"));
  // Complex arithmetic; the ops without a complex meaning refuse it.
  v.push_back(ok("mul", {"c64[2,3]", "c64[3]"}, {}, {"c64[2,3]"}));
  v.push_back(ok("neg", {"c128[2]"}, {}, {"c128[2]"}));
  v.push_back(bad("abs", {"c64[2]"}, {}, kType, "expected a numeric dtype"));
  v.push_back(bad("exp", {"c64[2]"}, {}, kType, "expected a float dtype"));

  auto ints = [](std::vector<int64_t> x) { return AttrValue(IntList(std::move(x))); };
  v.push_back(ok("fft", {"c64[3,8]"}, {}, {"c64[3,8]"}));
  v.push_back(
      ok("fft", {"c128[3,8]"}, {{"axes", ints({0, 1})}, {"n", ints({4, 16})}}, {"c128[4,16]"}));
  v.push_back(ok("fft", {"c64[b,8]"}, {}, {"c64[b,8]"}));
  v.push_back(bad("fft", {"c64[3,n]"}, {}, kValue, "expected a static length on axis 1"));
  v.push_back(bad("fft", {"f32[8]"}, {}, kType, "expected a complex dtype"));
  v.push_back(bad("fft", {"c64[8]"}, {{"axes", ints({2})}}, kValue));
  v.push_back(bad("fft", {"c64[8]"}, {{"n", ints({4, 4})}}, kValue, "one length per axis"));
  v.push_back(bad("fft", {"c64[8]"}, {{"n", ints({0})}}, kValue, "at least 1"));
  v.push_back(bad("fft", {"c64[8]"}, {{"norm", "half"}}, kValue));
  v.push_back(ok("ifft", {"c64[2,6]"}, {{"norm", "ortho"}}, {"c64[2,6]"}));
  v.push_back(bad("ifft", {"f64[6]"}, {}, kType));
  v.push_back(ok("rfft", {"f32[2,8]"}, {}, {"c64[2,5]"}));
  v.push_back(ok("rfft", {"f64[7,9]"}, {{"axes", ints({0, 1})}}, {"c128[7,5]"}));
  v.push_back(ok("rfft", {"f32[2,8]"}, {{"n", ints({11})}}, {"c64[2,6]"}));
  v.push_back(bad("rfft", {"c64[8]"}, {}, kType, "expected f32 or f64"));
  v.push_back(ok("irfft", {"c64[2,5]"}, {}, {"f32[2,8]"}));
  v.push_back(ok("irfft", {"c128[2,5]"}, {{"n", ints({9})}}, {"f64[2,9]"}));
  v.push_back(ok("irfft", {"c64[4,5]"}, {{"axes", ints({0, 1})}}, {"f32[4,8]"}));
  v.push_back(bad("irfft", {"f32[2,5]"}, {}, kType, "expected a complex dtype"));
  v.push_back(bad("irfft", {"c64[1]"}, {}, kValue, "at least 1"));
  return v;
}

}  // namespace rlx::testing
