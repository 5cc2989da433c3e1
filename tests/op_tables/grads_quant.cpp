// Gradient checks of quant_matmul through x (f64 activations: the CPU kernel then forms the
// products in double from the decoded weights, so finite differences are exact enough).
// The weights are constants (no tangent). vmap runs with float weights only: the harness
// batches every input by its values, which a quantized tensor has not.
#include "op_tables/gradcheck.h"

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
  // With an addend (a residual, a per-column bias): gradients through x and c.
  for (auto [cshape, note] : {std::pair<std::vector<int64_t>, const char*>{{3, 5}, "a residual"},
                              {{5}, "a per-column bias"}}) {
    Tensor x = random_tensor(DType::f64, {3, 64}, 7200, -1, 1);
    Tensor c = random_tensor(DType::f64, cshape, 7201, -1, 1);
    GradCheck g = with_inputs("quant_matmul", {x, random_quantized(DType::q8_0, 5, 64, 7202), c},
                              {}, str_cat("q8_0 + ", note));
    g.wrt = {0, 2};
    g.vmap = false;
    t.add(std::move(g));
    Tensor xf = random_tensor(DType::f64, {3, 32}, 7203, -1, 1);
    GradCheck f = with_inputs("quant_matmul", {xf, random_quantized(DType::f32, 5, 32, 7204), c},
                              {}, str_cat("f32 weights + ", note, ", vmap"));
    f.wrt = {0, 2};
    t.add(std::move(f));
  }
  // fused_quant_matmul through its decomposition: gradients through x, the norm's scale
  // and the addend.
  for (bool swiglu : {false, true}) {
    Tensor x = random_tensor(DType::f64, {2, 32}, 7300 + swiglu, -1, 1);
    Tensor g = random_tensor(DType::f64, {32}, 7302 + swiglu, 0.5, 1.5);
    Tensor c = random_tensor(DType::f64, {2, swiglu ? 3 : 6}, 7304 + swiglu, -1, 1);
    GradCheck f =
        with_inputs("fused_quant_matmul", {x, g, random_quantized(DType::f32, 6, 32, 7306), c},
                    {{"norm", std::string("rms_norm")},
                     {"activation", std::string(swiglu ? "swiglu" : "none")}},
                    swiglu ? "norm + swiglu + residual" : "norm + residual");
    f.wrt = {0, 1, 3};
    t.add(std::move(f));
  }
  t.exempt.push_back({"dequantize", "no gradient: weights in storage form are constants"});
  return t;
}

}  // namespace rlx::test
