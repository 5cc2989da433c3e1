#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {
constexpr auto V = Expect::value_error;
constexpr auto T = Expect::type_error;
}  // namespace

std::vector<InferCase> fused_cases() {
  const Attrs ta{{"transpose_a", true}}, tb{{"transpose_b", true}};
  const Attrs conv{{"pads", IntList{1, 1, 1, 1}}, {"activation", "relu"}};
  return {
      // fused_matmul: matmul's shapes on the (transposed) operands, then a bias that
      // broadcasts onto the product without growing it.
      ok("fused_matmul", {"f32[2,3]", "f32[3,4]"}, {}, {"f32[2,4]"}),
      ok("fused_matmul", {"f32[3,2]", "f32[3,4]"}, ta, {"f32[2,4]"}),
      ok("fused_matmul", {"f32[b,s,8]", "f32[16,8]", "f32[16]"},
         {{"transpose_b", true}, {"activation", "gelu"}}, {"f32[b,s,16]"}),
      ok("fused_matmul", {"f64[3]", "f64[3,4]", "f64[4]"}, {{"activation", "tanh"}}, {"f64[4]"}),
      ok("fused_matmul", {"f16[2,3]", "f16[3]", "f16[1]"}, {}, {"f16[2]"}),
      ok("fused_matmul", {"bf16[5,1,2,3]", "bf16[7,3,4]", "bf16[7,1,4]"}, {{"activation", "silu"}},
         {"bf16[5,7,2,4]"}),
      ok("fused_matmul", {"f32[2,n]", "f32[n,m]", "f32[m]"}, {}, {"f32[2,m]"}),
      ok("fused_matmul", {"f32[3,?]", "f32[4,3]", "f32[1,4]"},
         {{"transpose_a", true}, {"transpose_b", true}}, {"f32[?,4]"}),
      ok("fused_matmul", {"f32[2,0]", "f32[0,4]", "f32[4]"}, {}, {"f32[2,4]"}),
      bad("fused_matmul", {"i32[2,3]", "i32[3,4]"}, {}, T, "float dtype"),
      bad("fused_matmul", {"f32[2,3]", "f32[3,4]", "f16[4]"}, {}, T, "same dtype"),
      bad("fused_matmul", {"f32[3]", "f32[3,4]"}, ta, V, "transpose_a only for an operand"),
      bad("fused_matmul", {"f32[2,3]", "f32[3,4]"}, tb, V, "contraction dims"),
      bad("fused_matmul", {"f32[2,3]", "f32[3,4]", "f32[5,2,4]"}, {}, V,
          "bias broadcastable to the product [2,4]"),
      bad("fused_matmul", {"f32[2,3]", "f32[3,4]", "f32[3]"}, {}, V, "bias broadcastable"),
      bad("fused_matmul", {"f32[1,3]", "f32[3,4]", "f32[2,4]"}, {}, V, "bias broadcastable"),
      bad("fused_matmul", {"f32[2,3]", "f32[3,4]"}, {{"activation", "softmax"}}, V, "activation"),
      bad("fused_matmul", {"f32[2,3]"}, {}, V, "expected 2 to 3 inputs"),

      // fused_layer_norm: layer_norm's shapes on x (+ the residual, same shape); the norm
      // stored as out_dtype, the sum second.
      ok("fused_layer_norm", {"f32[b,s,8]", "f32[b,s,8]", "f32[8]", "f32[8]"},
         {{"residual", true}, {"out_dtype", "bf16"}}, {"bf16[b,s,8]", "f32[b,s,8]"}),
      ok("fused_layer_norm", {"f16[2,3,4]", "f16[3,4]"}, {{"axis", 1}}, {"f16[2,3,4]"}),
      ok("fused_layer_norm", {"f32[2,?]", "f32[2,5]"}, {{"residual", true}},
         {"f32[2,5]", "f32[2,5]"}),
      bad("fused_layer_norm", {"f32[2,4]"}, {{"residual", true}}, V, "residual as input 1"),
      bad("fused_layer_norm", {"f32[2,4]", "f32[4]"}, {{"residual", true}}, V, "rank 2"),
      bad("fused_layer_norm", {"f32[2,4]", "f32[2,5]"}, {{"residual", true}}, V,
          "x and the residual"),
      bad("fused_layer_norm", {"f32[2,4]", "f16[4]"}, {}, T, "same dtype"),
      bad("fused_layer_norm", {"i32[2,4]"}, {}, T, "float dtype"),
      bad("fused_layer_norm", {"f32[2,4]"}, {{"out_dtype", "i8"}}, V, "out_dtype"),
      bad("fused_layer_norm", {"f32[2,4]"}, {{"epsilon", -1.0}}, V, "epsilon"),

      // fused_cast: each input's shape in the new dtype.
      ok("fused_cast", {"f32[3,4]", "f32[n]", "f32[]"}, {{"dtype", DType::bf16}},
         {"bf16[3,4]", "bf16[n]", "bf16[]"}),
      bad("fused_cast", {"f32[3]", "f16[3]"}, {{"dtype", DType::bf16}}, T, "same dtype"),
      bad("fused_cast", {"f32[3]"}, {}, V, "dtype"),
      bad("fused_cast", {"i32[3]"}, {{"dtype", DType::f32}}, T, "float dtype"),
      bad("fused_cast", {"f32[3]"}, {{"dtype", DType::i32}}, V, "float dtype to cast to"),

      // fused_conv: conv's rules, naming fused_conv.
      ok("fused_conv", {"f32[1,3,8,8]", "f32[4,3,3,3]", "f32[4]"}, conv, {"f32[1,4,8,8]"}),
      ok("fused_conv", {"bf16[n,4,9]", "bf16[6,2,3]"}, {{"groups", 2}, {"activation", "gelu"}},
         {"bf16[n,6,7]"}),
      bad("fused_conv", {"i32[1,3,8,8]", "i32[4,3,3,3]"}, conv, T, "float dtype"),
      bad("fused_conv", {"f32[1,3,8,8]", "f32[4,2,3,3]"}, conv, V, "channels"),
      bad("fused_conv", {"f32[1,3,8,8]", "f32[4,3,3,3]"}, {{"activation", "elu"}}, V, "activation"),
      // The blocked layout: [N, C, H, W] <-> [N, ceil(C/L), H, W, L], L 16 or 8.
      ok("to_blocked", {"f32[2,24,5,5]"}, {}, {"f32[2,2,5,5,16]"}),
      ok("to_blocked", {"f32[n,16,3,5]"}, {}, {"f32[n,1,3,5,16]"}),
      ok("to_blocked", {"f32[2,20,5,5]"}, {{"lanes", 8}}, {"f32[2,3,5,5,8]"}),
      bad("to_blocked", {"f32[2,24,5,5]"}, {{"lanes", 4}}, V, "lanes 8 or 16"),
      bad("to_blocked", {"f32[2,24,5]"}, {}, V, "rank"),
      bad("to_blocked", {"i32[2,24,5,5]"}, {}, T, "float dtype"),
      bad("to_blocked", {"f32[2,c,5,5]"}, {}, V, "static channel dim"),
      ok("from_blocked", {"f32[2,2,5,5,16]"}, {{"channels", 24}}, {"f32[2,24,5,5]"}),
      ok("from_blocked", {"f32[2,3,5,5,8]"}, {{"channels", 20}}, {"f32[2,20,5,5]"}),
      bad("from_blocked", {"f32[2,6,5,5,4]"}, {{"channels", 24}}, V, "8 or 16 lanes"),
      bad("from_blocked", {"f32[2,3,5,5,16]"}, {{"channels", 24}}, V, "for channels 24"),
      bad("from_blocked", {"f32[2,2,5,5,8]"}, {{"channels", 24}}, V, "for channels 24"),
      bad("from_blocked", {"f32[2,2,5,5,16]"}, {{"channels", 0}}, V, "channels >= 1"),
      // conv_blocked: conv's shapes on the logical input (C = w.shape[1] * groups).
      ok("conv_blocked", {"f32[1,3,8,8]", "f32[24,3,3,3]", "f32[24]"}, conv, {"f32[1,2,8,8,16]"}),
      ok("conv_blocked", {"f32[1,2,8,8,16]", "f32[24,1,3,3]"},
         {{"groups", 24}, {"strides", IntList{2, 2}}, {"pads", IntList{1, 1, 1, 1}}},
         {"f32[1,2,4,4,16]"}),
      ok("conv_blocked", {"f32[2,1,5,5,16]", "f32[40,16,1,1]"}, {}, {"f32[2,3,5,5,16]"}),
      ok("conv_blocked", {"f32[2,2,5,5,8]", "f32[20,16,1,1]"}, {{"lanes", 8}}, {"f32[2,3,5,5,8]"}),
      bad("conv_blocked", {"f32[2,2,5,5,8]", "f32[20,16,1,1]"}, {{"lanes", 12}}, V,
          "lanes 8 or 16"),
      bad("conv_blocked", {"f32[1,3,8,8,16]", "f32[24,16,1,1]"}, {}, V, "channel blocks"),
      bad("conv_blocked", {"f32[1,1,8,8,8]", "f32[24,16,1,1]"}, {}, V, "[N, Cb, H, W, 16]"),
      bad("conv_blocked", {"f32[1,3,8,8]", "f32[4,2,3,3]"}, {}, V, "channels"),
      bad("conv_blocked", {"f32[1,3,8,8]", "f32[4,3,3,3]"}, {{"activation", "elu"}}, V,
          "activation"),
      // max_pool_blocked: max_pool's shapes on [N, Cb * L, H, W].
      ok("max_pool_blocked", {"f32[1,2,8,8,16]"},
         {{"kernel_shape", IntList{3, 3}}, {"strides", IntList{2, 2}}}, {"f32[1,2,3,3,16]"}),
      ok("max_pool_blocked", {"f32[n,3,7,7,8]"},
         {{"kernel_shape", IntList{3, 3}},
          {"strides", IntList{2, 2}},
          {"ceil_mode", true},
          {"lanes", 8}},
         {"f32[n,3,3,3,8]"}),
      bad("max_pool_blocked", {"f32[1,2,8,8,8]"}, {{"kernel_shape", IntList{2, 2}}}, V,
          "[N, Cb, H, W, 16]"),
      bad("max_pool_blocked", {"f32[1,16,8,8]"}, {{"kernel_shape", IntList{2, 2}}}, V,
          "[N, Cb, H, W, 16]"),
      bad("max_pool_blocked", {"f32[1,c,8,8,16]"}, {{"kernel_shape", IntList{2, 2}}}, V,
          "static Cb"),
      bad("max_pool_blocked", {"f32[1,2,8,8,16]"}, {{"kernel_shape", IntList{2, 2}}, {"lanes", 4}},
          V, "lanes 8 or 16"),
  };
}

}  // namespace rlx::testing
