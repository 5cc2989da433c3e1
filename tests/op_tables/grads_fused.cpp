// Gradient checks of the fused ops, whose rules transform their decomposition.
#include "op_tables/gradcheck.h"

namespace rlx::test {

GradTable grads_fused() {
  GradTable t;
  auto add = [&](const char* op, std::vector<std::vector<int64_t>> shapes, Attrs attrs,
                 std::string note, bool smooth = true) {
    GradCheck c = grad_check(op, std::move(shapes), std::move(attrs), -1, 1, std::move(note));
    c.hvp = smooth;  // relu: piecewise linear
    t.add(std::move(c));
  };
  add("fused_matmul", {{3, 4}, {4, 2}, {2}}, {{"activation", "gelu"}}, "bias, gelu");
  add("fused_matmul", {{4, 3}, {2, 4}},
      {{"transpose_a", true}, {"transpose_b", true}, {"activation", "tanh"}},
      "both transposed, tanh");
  add("fused_matmul", {{2, 3, 4}, {4, 5}, {3, 1}}, {{"activation", "silu"}},
      "batched lhs, column bias, silu");
  add("fused_matmul", {{2, 1, 3, 4}, {3, 5, 4}}, {{"transpose_b", true}, {"activation", "sigmoid"}},
      "broadcast batch, sigmoid");
  add("fused_matmul", {{4}, {4, 3}, {3}}, {{"activation", "gelu_tanh"}}, "1-D lhs, gelu_tanh");
  add("fused_matmul", {{3, 4}, {4, 2}, {2}}, {{"activation", "relu"}}, "relu", false);
  add("fused_conv", {{1, 2, 5}, {3, 2, 3}, {3}}, {{"activation", "tanh"}}, "1-D, bias, tanh");
  add("fused_conv", {{1, 2, 4, 4}, {2, 1, 3, 3}},
      {{"groups", 2}, {"pads", IntList{1, 1, 1, 1}}, {"activation", "gelu"}},
      "2-D, groups, pads, gelu");
  add("fused_conv", {{2, 2, 5}, {2, 2, 2}, {2}}, {{"activation", "relu"}}, "relu", false);
  add("fused_conv", {{1, 2, 5}, {3, 2, 3}, {3}}, {{"activation", "hard_swish"}}, "hard_swish",
      false);
  add("fused_layer_norm", {{3, 5}, {3, 5}, {5}, {5}}, {{"residual", true}},
      "residual, scale, bias: both outputs");
  add("fused_layer_norm", {{2, 3, 4}, {3, 4}}, {{"axis", 1}}, "two axes, scale");
  add("fused_cast", {{3, 2}, {4}}, {{"dtype", DType::f64}}, "two tensors");
  // The blocked layout ops (nchwc_layout), through their decompositions.
  add("to_blocked", {{1, 18, 2, 3}}, {}, "18 channels: 14 zero lanes");
  add("from_blocked", {{1, 2, 2, 3, 16}}, {{"channels", 18}}, "18 channels");
  add("to_blocked", {{1, 10, 2, 3}}, {{"lanes", 8}}, "10 channels in 8 lanes");
  add("from_blocked", {{1, 2, 2, 3, 8}}, {{"channels", 10}}, "10 channels in 8 lanes");
  add("conv_blocked", {{1, 1, 4, 4, 16}, {3, 16, 3, 3}, {3}},
      {{"pads", IntList{1, 1, 1, 1}}, {"activation", "tanh"}}, "blocked input, bias, tanh");
  add("conv_blocked", {{1, 2, 4, 4}, {2, 1, 3, 3}}, {{"groups", 2}, {"activation", "gelu"}},
      "plain input, groups");
  add("max_pool_blocked", {{1, 1, 4, 4, 8}},
      {{"kernel_shape", IntList{2, 2}}, {"strides", IntList{2, 2}}, {"lanes", 8}}, "2x2/2");
  return t;
}

}  // namespace rlx::test
