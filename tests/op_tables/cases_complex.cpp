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
  v.push_back(ok("abs", {"c64[2]"}, {}, {"f32[2]"}));
  v.push_back(ok("abs", {"c128[2]"}, {}, {"f64[2]"}));
  v.push_back(ok("abs", {"i8[2]"}, {}, {"i8[2]"}));
  for (const char* op :
       {"exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh"}) {
    v.push_back(ok(op, {"c64[2,n]"}, {}, {"c64[2,n]"}));
    v.push_back(bad(op, {"i32[2]"}, {}, kType, "expected a float or complex dtype"));
  }
  v.push_back(ok("square", {"c128[3]"}, {}, {"c128[3]"}));
  v.push_back(bad("sign", {"c64[2]"}, {}, kType, "expected a numeric dtype"));
  v.push_back(bad("sigmoid", {"c64[2]"}, {}, kType, "expected a float dtype"));
  v.push_back(bad("max", {"c64[2]", "c64[2]"}, {}, kType, "expected a numeric dtype"));
  v.push_back(ok("angle", {"c64[2,3]"}, {}, {"f32[2,3]"}));
  v.push_back(ok("angle", {"f64[2]"}, {}, {"f64[2]"}));
  v.push_back(bad("angle", {"i32[2]"}, {}, kType, "expected a float or complex dtype"));
  // Reductions and products; casts into complex, never out of it.
  auto axes = [](std::vector<int64_t> x) { return AttrValue(IntList(std::move(x))); };
  v.push_back(ok("sum", {"c64[3,4]"}, {{"axes", axes({1})}}, {"c64[3]"}));
  v.push_back(ok("mean", {"c128[3,4]"}, {}, {"c128[]"}));
  v.push_back(bad("prod", {"c64[3]"}, {}, kType, "expected a numeric dtype"));
  v.push_back(bad("reduce_max", {"c64[3]"}, {}, kType, "expected a numeric dtype"));
  v.push_back(ok("matmul", {"c64[2,3,4]", "c64[4,5]"}, {}, {"c64[2,3,5]"}));
  v.push_back(bad("matmul", {"c64[3,4]", "f32[4,5]"}, {}, kType));
  v.push_back(ok("cast", {"f32[2]"}, {{"dtype", AttrValue(DType::c64)}}, {"c64[2]"}));
  v.push_back(ok("cast", {"c64[2]"}, {{"dtype", AttrValue(DType::c128)}}, {"c128[2]"}));
  v.push_back(
      bad("cast", {"c64[2]"}, {{"dtype", AttrValue(DType::f32)}}, kType, "take real() or abs()"));

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

  // stft / istft: frames = 1 + (L + 2 (n_fft / 2) - n_fft) / hop (center pads n_fft / 2).
  v.push_back(
      ok("stft", {"f32[2,100]", "f32[16]"}, {{"n_fft", 16}, {"hop_length", 4}}, {"c64[2,9,26]"}));
  v.push_back(ok("stft", {"f64[100]"}, {{"n_fft", 16}, {"center", false}}, {"c128[9,22]"}));
  v.push_back(ok("stft", {"c64[b,50]"}, {{"n_fft", 8}, {"hop_length", 2}, {"onesided", false}},
                 {"c64[b,8,26]"}));
  v.push_back(bad("stft", {"c64[50]"}, {{"n_fft", 8}}, kValue, "onesided false"));
  v.push_back(bad("stft", {"i32[50]"}, {{"n_fft", 8}}, kType, "an f32, f64 or complex signal"));
  v.push_back(bad("stft", {"f32[n]"}, {{"n_fft", 8}}, kValue, "a static signal length"));
  v.push_back(
      bad("stft", {"f32[5]"}, {{"n_fft", 16}, {"center", false}}, kValue, "at least n_fft"));
  v.push_back(bad("stft", {"f32[5]"}, {{"n_fft", 16}}, kValue, "reflect padding"));
  v.push_back(bad("stft", {"f32[50]", "f32[20]"}, {{"n_fft", 16}}, kValue, "a window"));
  v.push_back(bad("stft", {"f32[50]", "f64[16]"}, {{"n_fft", 16}}, kType, "f32 window"));
  v.push_back(bad("stft", {"f32[50]"}, {{"n_fft", 0}}, kValue, "n_fft >= 1"));
  v.push_back(
      ok("istft", {"c64[2,9,26]", "f32[16]"}, {{"n_fft", 16}, {"hop_length", 4}}, {"f32[2,100]"}));
  v.push_back(
      ok("istft", {"c128[9,26]"}, {{"n_fft", 16}, {"hop_length", 4}, {"length", 90}}, {"f64[90]"}));
  v.push_back(ok("istft", {"c64[16,5]"}, {{"n_fft", 16}, {"onesided", false}, {"center", false}},
                 {"f32[32]"}));
  v.push_back(bad("istft", {"f32[9,26]"}, {{"n_fft", 16}}, kType, "a complex spectrogram"));
  v.push_back(bad("istft", {"c64[8,26]"}, {{"n_fft", 16}}, kValue, "expected 9 frequencies"));
  v.push_back(bad("istft", {"c64[9,n]"}, {{"n_fft", 16}}, kValue, "a static number of frames"));
  return v;
}

}  // namespace rlx::testing
