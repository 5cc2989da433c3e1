// Gradient checks of the complex family, the ops that take complex numbers and the FFTs,
// in c128 / f64: finite differences step the real and imaginary parts apart, and the
// rules' gradients are JAX's dL/dre - i dL/dim (gradcheck.cpp).
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

Tensor cx(std::vector<int64_t> shape, uint64_t seed, double lo = -1, double hi = 1) {
  return random_complex(DType::c128, std::move(shape), seed, lo, hi);
}

Tensor re(std::vector<int64_t> shape, uint64_t seed) {
  return random_tensor(DType::f64, std::move(shape), seed, -1, 1);
}

AttrValue ints(std::vector<int64_t> v) { return AttrValue(IntList(std::move(v))); }

}  // namespace

GradTable grads_complex() {
  GradTable t;
  uint64_t seed = 900;
  t.add(with_inputs("complex", {re({2, 3}, seed++), re({3}, seed++)}, {}, "broadcast"));
  for (const char* op : {"real", "imag", "conj", "angle"})
    t.add(with_inputs(op, {cx({2, 3}, seed++)}));
  t.add(with_inputs("angle", {away_from_zero({4}, seed++)}, {}, "real x"));

  // Holomorphic ops, on values in the right half-plane (away from log's and sqrt's branch
  // cut and from 0), and the modulus.
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh",
                         "square", "neg", "abs"})
    t.add(with_inputs(op, {cx({2, 3}, seed++, 0.3, 1.2)}, {}, "complex"));
  for (const char* op : {"add", "sub", "mul", "div"})
    t.add(with_inputs(op, {cx({3, 4}, seed++, 0.5, 2), cx({4}, seed++, 0.5, 2)}, {}, "complex"));

  t.add(with_inputs("sum", {cx({3, 4}, seed++)}, {{"axes", ints({1})}}, "complex"));
  t.add(with_inputs("mean", {cx({3, 4}, seed++)}, {{"axes", ints({0})}, {"keepdims", true}},
                    "complex"));
  t.add(with_inputs("matmul", {cx({2, 3, 4}, seed++), cx({4, 2}, seed++)}, {}, "complex"));
  t.add(with_inputs("dot_general", {cx({3, 4}, seed++), cx({4, 5}, seed++)},
                    {{"lhs_contracting", ints({1})}, {"rhs_contracting", ints({0})}}, "complex"));
  t.add(with_inputs("cast", {re({3}, seed++)}, {{"dtype", DType::c128}}, "f64 -> c128"));

  Attrs ortho{{"norm", AttrValue(std::string("ortho"))}};
  t.add(with_inputs("fft", {cx({2, 8}, seed++)}));
  t.add(with_inputs("fft", {cx({3, 5}, seed++)}, {{"axes", ints({0, 1})}, {"n", ints({4, 6})}},
                    "two axes, n"));
  t.add(with_inputs("ifft", {cx({2, 7}, seed++)}, ortho, "ortho"));
  t.add(with_inputs("rfft", {re({2, 8}, seed++)}));
  t.add(with_inputs("rfft", {re({3, 7}, seed++)}, {{"axes", ints({0, 1})}}, "two axes"));
  t.add(with_inputs("irfft", {cx({2, 5}, seed++)}));
  t.add(with_inputs("irfft", {cx({2, 4}, seed++)}, {{"n", ints({7})}}, "odd n"));

  auto stft = [](int64_t n, int64_t hop, bool center, bool onesided) {
    return Attrs{{"n_fft", n}, {"hop_length", hop}, {"center", center}, {"onesided", onesided}};
  };
  Tensor window = random_tensor(DType::f64, {6}, seed++, 0.5, 1);
  t.add(with_inputs("stft", {re({2, 20}, seed++), window}, stft(8, 3, true, true), "window"));
  t.add(with_inputs("stft", {cx({12}, seed++)}, stft(6, 2, false, false), "complex"));
  Attrs inv = stft(8, 2, true, true);
  inv.set("length", int64_t(9));
  t.add(with_inputs("istft", {cx({5, 6}, seed++), window}, inv, "window, length"));
  return t;
}

}  // namespace rlx::test
