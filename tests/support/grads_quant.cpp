// Gradient checks of quant_matmul through x (f64 activations: the CPU kernel then forms the
// products in double from the decoded weights, so finite differences are exact enough).
// The weights are constants (no tangent). vmap runs with float weights only: the harness
// batches every input by its values, which a quantized tensor has not.
#include "support/gradcheck.h"

namespace rlx::test {

// checks_quant.cpp: random weights of any storage dtype, [rows, k].
Tensor random_quantized(DType t, int64_t rows, int64_t k, uint64_t seed);

GradTable grads_quant() {
  GradTable t;
  auto add = [&](std::vector<int64_t> xshape, DType wt, int64_t n, std::string note) {
    const int64_t k = xshape.back();
    Tensor x = random_tensor(DType::f64, std::move(xshape), 7000 + n, -1, 1);
    GradCheck c =
        with_inputs("quant_matmul", {x, random_quantized(wt, n, k, 7100 + n)}, {}, std::move(note));
    c.wrt = {0};
    c.vmap = !is_quantized(wt);
    t.add(std::move(c));
  };
  add({3, 64}, DType::q4_0, 5, "q4_0");
  add({2, 2, 256}, DType::q4_k, 3, "q4_k, batch dims");
  add({256}, DType::q6_k, 4, "q6_k, 1-D x");
  add({2, 32}, DType::f16, 6, "f16 weights");
  t.exempt.push_back({"dequantize", "no gradient: weights in storage form are constants"});
  return t;
}

}  // namespace rlx::test
