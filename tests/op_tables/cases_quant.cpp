#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {
constexpr auto V = Expect::value_error;
constexpr auto T = Expect::type_error;
}  // namespace

std::vector<InferCase> quant_cases() {
  const Attrs f16{{"dtype", DType::f16}};
  return {
      // dequantize: the same shape as a float (f32 unless asked); with rows, a lookup.
      ok("dequantize", {"q4_0[4,64]"}, {}, {"f32[4,64]"}),
      ok("dequantize", {"q6_k[2,3,512]"}, f16, {"f16[2,3,512]"}),
      ok("dequantize", {"q8_0[n,32]"}, {{"dtype", DType::bf16}}, {"bf16[n,32]"}),
      ok("dequantize", {"q4_k[v,512]"}, {{"dtype", DType::f64}}, {"f64[v,512]"}),
      ok("dequantize", {"f16[3,5]"}, {}, {"f32[3,5]"}),
      ok("dequantize", {"q4_k[32000,256]", "i32[b,s]"}, {}, {"f32[b,s,256]"}),
      ok("dequantize", {"q8_0[10,64]", "i64[]"}, f16, {"f16[64]"}),
      bad("dequantize", {"f64[3,4]"}, {}, T, "a quantized, f32, f16 or bf16 dtype"),
      bad("dequantize", {"i8[3,32]"}, {}, T, "a quantized, f32, f16 or bf16 dtype"),
      // (A quantized value's last dim is a static multiple of its block from the graph
      // input on; the ops check it again for types built otherwise.)
      bad("dequantize", {"f16[]"}, {}, V, "rank >= 1"),
      bad("dequantize", {"q4_0[32]"}, {{"dtype", DType::i32}}, T, "attribute dtype f32"),
      bad("dequantize", {"q4_0[2,3,32]", "i64[2]"}, {}, V, "rank 2"),
      bad("dequantize", {"q4_0[3,32]", "f32[2]"}, {}, T, "i32 or i64 row indices"),
      bad("dequantize", {"q4_0[3,32]", "i16[2]"}, {}, T, "i32 or i64 row indices"),
      bad("dequantize", {"q4_0[3,32]", "i64[2]", "i64[2]"}, {}, V, "inputs"),

      // quant_matmul: x [..., k] @ w[n, k]^T in x's dtype.
      ok("quant_matmul", {"f32[1,2048]", "q4_0[5632,2048]"}, {}, {"f32[1,5632]"}),
      ok("quant_matmul", {"f32[b,s,768]", "q6_k[32000,768]"}, {}, {"f32[b,s,32000]"}),
      ok("quant_matmul", {"f16[7,256]", "q4_k[n,256]"}, {}, {"f16[7,n]"}),
      ok("quant_matmul", {"bf16[64]", "bf16[3,64]"}, {}, {"bf16[3]"}),
      ok("quant_matmul", {"f64[2,64]", "q8_0[5,64]"}, {}, {"f64[2,5]"}),
      ok("quant_matmul", {"f32[2,?]", "f16[9,33]"}, {}, {"f32[2,9]"}),
      ok("quant_matmul", {"f32[0,64]", "q5_1[3,64]"}, {}, {"f32[0,3]"}),
      bad("quant_matmul", {"i32[2,64]", "q4_0[3,64]"}, {}, T, "float dtype"),
      bad("quant_matmul", {"f32[2,64]", "i8[3,64]"}, {}, T, "a quantized, f32, f16 or bf16"),
      bad("quant_matmul", {"f32[2,64]", "f64[3,64]"}, {}, T, "a quantized, f32, f16 or bf16"),
      bad("quant_matmul", {"f32[2,64]", "q4_0[3,32]"}, {}, V, "contraction dims"),
      bad("quant_matmul", {"f32[2,512]", "q4_0[2,3,512]"}, {}, V, "rank 2"),
      bad("quant_matmul", {"f32[]", "q4_0[3,32]"}, {}, V, "rank"),
      bad("quant_matmul", {"f32[2,32]"}, {}, V, "expected 2 to 3 inputs"),
      // With an addend c that broadcasts onto the product without growing it.
      ok("quant_matmul", {"f32[1,2048]", "q4_0[5632,2048]", "f32[1,5632]"}, {}, {"f32[1,5632]"}),
      ok("quant_matmul", {"f32[b,s,256]", "q4_k[n,256]", "f32[n]"}, {}, {"f32[b,s,n]"}),
      ok("quant_matmul", {"f32[2,64]", "q8_0[5,64]", "f32[2,1]"}, {}, {"f32[2,5]"}),
      bad("quant_matmul", {"f32[2,64]", "q8_0[5,64]", "f32[3,2,5]"}, {}, V, "without growing"),
      bad("quant_matmul", {"f32[2,64]", "q8_0[5,64]", "f32[4]"}, {}, V, "broadcast"),
      bad("quant_matmul", {"f32[2,64]", "q8_0[5,64]", "f16[5]"}, {}, T, "dtype"),
      // layout rows8: q4_0 interleaved in groups of 8 rows.
      ok("quant_matmul", {"f32[1,64]", "q4_0[16,64]"}, {{"layout", std::string("rows8")}},
         {"f32[1,16]"}),
      ok("quant_matmul", {"f32[s,64]", "q4_0[n,64]"}, {{"layout", std::string("rows8")}},
         {"f32[s,n]"}),
      ok("quant_matmul", {"f32[2,64]", "q8_0[16,64]"}, {{"layout", std::string("rows8")}},
         {"f32[2,16]"}),
      bad("quant_matmul", {"f32[1,256]", "q4_k[16,256]"}, {{"layout", std::string("rows8")}}, T,
          "the interleaved form rows8 (q4_0, q8_0)"),
      bad("quant_matmul", {"f32[1,64]", "q4_0[12,64]"}, {{"layout", std::string("rows8")}}, V,
          "a multiple of 8 weight rows"),
      // layout rows16: groups of 16 rows.
      ok("quant_matmul", {"f32[2,64]", "q8_0[32,64]"}, {{"layout", std::string("rows16")}},
         {"f32[2,32]"}),
      bad("quant_matmul", {"f32[1,64]", "q4_0[24,64]"}, {{"layout", std::string("rows16")}}, V,
          "a multiple of 16 weight rows for layout rows16"),
      bad("quant_matmul", {"f32[1,64]", "f16[16,64]"}, {{"layout", std::string("rows16")}}, T,
          "the interleaved form rows16 (q4_0, q8_0, q4_k)"),
      ok("quant_matmul", {"f32[3,512]", "q4_k[32,512]"}, {{"layout", std::string("rows16")}},
         {"f32[3,32]"}),
      bad("quant_matmul", {"f32[1,256]", "q6_k[16,256]"}, {{"layout", std::string("rows16")}}, T,
          "the interleaved form rows16"),
      bad("quant_matmul", {"f32[1,64]", "q4_0[16,64]"}, {{"layout", std::string("cols")}}, V,
          "layout"),
      // fused_quant_matmul: x, [the norm's scale], w, [c]; swiglu halves the product.
      ok("fused_quant_matmul", {"f32[1,1,2048]", "f32[2048]", "bf16[11264,2048]"},
         {{"norm", std::string("rms_norm")}, {"activation", std::string("swiglu")}},
         {"f32[1,1,5632]"}),
      ok("fused_quant_matmul", {"f32[b,s,256]", "f32[256]", "q4_k[n,256]"},
         {{"norm", std::string("rms_norm")}}, {"f32[b,s,n]"}),
      ok("fused_quant_matmul", {"f32[2,64]", "q8_0[10,64]", "f32[2,5]"},
         {{"activation", std::string("swiglu")}}, {"f32[2,5]"}),
      ok("fused_quant_matmul", {"f32[s,64]", "q8_0[n,64]"}, {{"activation", std::string("swiglu")}},
         {"f32[s,?]"}),
      bad("fused_quant_matmul", {"f32[2,64]", "q8_0[9,64]"},
          {{"activation", std::string("swiglu")}}, V, "an even number of weight rows"),
      bad("fused_quant_matmul", {"f32[2,64]", "f32[32]", "q8_0[8,64]"},
          {{"norm", std::string("rms_norm")}}, V, "the norm's scale"),
      bad("fused_quant_matmul", {"f32[2,64]", "f16[64]", "q8_0[8,64]"},
          {{"norm", std::string("rms_norm")}}, T, "dtype"),
      bad("fused_quant_matmul", {"f32[2,64]", "f32[64]"}, {{"norm", std::string("rms_norm")}}, V,
          "expected x, the norm's scale, w"),
      bad("fused_quant_matmul", {"f32[2,64]", "q8_0[8,64]"}, {{"activation", std::string("gelu")}},
          V, "activation"),
  };
}

}  // namespace rlx::testing
