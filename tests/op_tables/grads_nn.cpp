// Gradient checks of the nn family: softmax, log_softmax, the norms, attention, embedding,
// dropout, cross_entropy (the sliding-window ops are in grads_conv.cpp).
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

Tensor f64(std::vector<int64_t> shape, uint64_t seed, double lo = -1, double hi = 1) {
  return random_tensor(DType::f64, std::move(shape), seed, lo, hi);
}
Tensor i64(std::vector<int64_t> shape, const std::vector<double>& v) {
  return tensor_of(DType::i64, std::move(shape), v);
}

// batch_norm inputs: x [N, C, ...] and the per-channel scale, bias, mean, var (> 0).
Tensors batch_norm_inputs(std::vector<int64_t> x, uint64_t seed) {
  std::vector<int64_t> c{x[1]};
  return {f64(x, seed), f64(c, seed + 1), f64(c, seed + 2), f64(c, seed + 3),
          f64(c, seed + 4, 0.5, 1.5)};
}

}  // namespace

GradTable grads_nn() {
  GradTable t;
  for (const char* op : {"softmax", "log_softmax"}) {
    t.add(grad_check(op, {{3, 4}}));
    t.add(grad_check(op, {{2, 3, 4}}, {{"axis", 1}}, -1, 1, "middle axis"));
    t.add(grad_check(op, {{5}}, {{"axis", 0}}, -1, 1, "rank 1"));
    t.add(grad_check(op, {{4, 1, 2}}, {{"axis", -3}}, -1, 1, "negative axis, size-1 dim"));
  }

  t.add(grad_check("layer_norm", {{3, 4}}, {}, -1, 1, "no scale, bias"));
  t.add(grad_check("layer_norm", {{2, 3, 4}, {3, 4}, {3, 4}}, {{"axis", 1}}, -1, 1, "axis 1"));
  t.add(grad_check("layer_norm", {{2, 5}, {5}}, {{"axis", -1}, {"epsilon", 0.1}}, -1, 1,
                   "scale only, epsilon"));
  t.add(grad_check("layer_norm", {{3, 2}, {3, 2}, {3, 2}}, {{"axis", 0}}, -1, 1, "all axes"));
  t.add(grad_check("layer_norm_grad", {{3, 4}, {3, 4}, {4}}, {}, -1, 1, "scale"));
  t.add(grad_check("layer_norm_grad", {{2, 3, 2}, {2, 3, 2}}, {{"axis", 1}, {"center", false}}, -1,
                   1, "rms, two axes"));
  t.add(grad_check("rms_norm", {{3, 4}}, {}, -1, 1, "no scale"));
  t.add(grad_check("rms_norm", {{2, 3, 4}, {3, 4}}, {{"axis", -2}}, -1, 1, "negative axis"));
  t.add(grad_check("rms_norm", {{2, 5}, {5}}, {{"epsilon", 0.1}}, -1, 1, "epsilon"));

  t.add(grad_check("group_norm", {{2, 4, 3}, {4}, {4}}, {{"num_groups", 2}}));
  t.add(grad_check("group_norm", {{2, 6}, {6}, {6}}, {{"num_groups", 2}}, -1, 1, "no spatial"));
  t.add(grad_check("group_norm", {{1, 2, 2, 2}, {2}, {2}}, {{"num_groups", 1}, {"epsilon", 0.01}},
                   -1, 1, "one group"));
  t.add(
      grad_check("group_norm", {{2, 3, 4}, {3}, {3}}, {{"num_groups", 3}}, -1, 1, "instance norm"));

  t.add(with_inputs("batch_norm", batch_norm_inputs({2, 3}, 1), {}, "rank 2"));
  t.add(with_inputs("batch_norm", batch_norm_inputs({2, 3, 2}, 11), {}, ""));
  t.add(with_inputs("batch_norm", batch_norm_inputs({1, 2, 2, 2}, 21), {{"epsilon", 0.1}},
                    "epsilon"));

  t.add(grad_check("attention", {{3, 2}, {4, 2}, {4, 3}}, {}, -1, 1, "no mask, Sq != Sk"));
  t.add(grad_check("attention", {{2, 3, 2}, {2, 3, 2}, {2, 3, 2}, {3, 3}}, {{"mask", "causal"}}, -1,
                   1, "causal, bias"));
  t.add(grad_check("attention", {{4, 2}, {4, 2}, {4, 2}},
                   {{"mask", "sliding_window"}, {"window", 2}, {"scale", 0.7}}, -1, 1,
                   "sliding window, scale"));
  t.add(grad_check("attention", {{2, 1, 2, 2}, {3, 3, 2}, {3, 2}, {1, 3}}, {{"mask", "causal"}}, -1,
                   1, "broadcast lead dims and bias, Sq < Sk"));
  t.add(grad_check("attention", {{4, 2}, {2, 2}, {2, 2}}, {{"mask", "causal"}}, -1, 1,
                   "rows that see no key"));
  t.add(grad_check("attention", {{1, 3, 2, 2}, {1, 4, 2, 2}, {1, 4, 2, 3}},
                   {{"mask", "causal"}, {"layout", "bshd"}}, -1, 1, "layout bshd"));
  t.add(grad_check("attention", {{3, 2, 2}, {4, 2, 2}, {4, 2, 2}, {2, 3, 4}}, {{"layout", "bshd"}},
                   -1, 1, "layout bshd, bias"));
  t.add(grad_check("attention_grad", {{3, 2}, {4, 2}, {4, 3}, {3, 3}}, {}, -1, 1, "no mask"));
  t.add(grad_check("attention_grad", {{1, 3, 2, 2}, {1, 3, 2, 2}, {1, 3, 2, 2}, {1, 3, 2, 2}},
                   {{"mask", "causal"}, {"layout", "bshd"}}, -1, 1, "layout bshd"));
  t.add(grad_check("attention_lse", {{2, 3, 2}, {2, 4, 2}, {2, 4, 3}}, {{"mask", "causal"}}, -1, 1,
                   "causal, Sq < Sk"));
  t.add(grad_check("attention_lse", {{1, 3, 2, 2}, {1, 3, 2, 2}, {1, 3, 2, 2}},
                   {{"layout", "bshd"}}, -1, 1, "layout bshd"));
  t.add(grad_check("attention_grad", {{2, 3, 2}, {1, 3, 2}, {3, 2}, {2, 3, 2}},
                   {{"mask", "causal"}}, -1, 1, "causal, broadcast lead dims"));

  t.add(with_inputs("embedding", {f64({5, 3}, 31), i64({4}, {0, 2, 2, 4})}, {}, "repeated rows"));
  t.add(with_inputs("embedding", {f64({4, 2}, 32), i64({2, 3}, {3, 1, 0, 1, 2, 3})}, {}, "rank 2"));
  t.add(with_inputs("embedding", {f64({3, 2}, 33), i64({}, {1})}, {}, "rank 0 index"));

  t.add(grad_check("dropout", {{3, 4}}, {{"training", true}, {"rate", 0.5}, {"seed", 7}}));
  t.add(grad_check("dropout", {{5}}, {{"training", true}, {"rate", 0.2}, {"seed", 1}}));
  t.add(grad_check("dropout", {{2, 3}}, {{"training", false}}, -1, 1, "inference"));

  t.add(with_inputs("cross_entropy", {f64({3, 4}, 41), i64({3}, {0, 3, 1})}, {}, "labels, mean"));
  t.add(with_inputs("cross_entropy", {f64({3, 4}, 42), i64({3}, {1, -100, 2})},
                    {{"label_smoothing", 0.1}}, "ignore_index, smoothing"));
  t.add(with_inputs("cross_entropy", {f64({2, 2, 3}, 43), i64({2, 2}, {0, 1, 2, 1})},
                    {{"reduction", "none"}, {"ignore_index", 1}}, "none, ignore_index 1"));
  t.add(with_inputs("cross_entropy", {f64({4}, 44), i64({}, {2})}, {{"reduction", "sum"}},
                    "rank 1 logits"));
  t.add(with_inputs("cross_entropy_grad", {f64({3, 4}, 51), i64({3}, {0, -100, 2}), f64({3}, 52)},
                    {{"label_smoothing", 0.1}}, "per-row weights, ignored row"));
  t.add(with_inputs("cross_entropy_grad",
                    {f64({2, 2, 3}, 53), i64({2, 2}, {0, 1, 2, 1}), f64({}, 54)},
                    {{"ignore_index", 1}}, "one weight"));
  t.add(with_inputs("cross_entropy", {f64({2, 3}, 45), f64({2, 3}, 46, 0, 1)},
                    {{"reduction", "sum"}, {"label_smoothing", 0.2}}, "probabilities, sum"));
  t.add(with_inputs("cross_entropy", {f64({3, 3}, 47), f64({3, 3}, 48, 0, 1)},
                    {{"reduction", "none"}}, "probabilities, none"));
  t.add(with_inputs("cross_entropy", {f64({2, 2, 3}, 49), f64({2, 2, 3}, 50, 0, 1)}, {},
                    "probabilities, mean"));
  return t;
}

}  // namespace rlx::test
