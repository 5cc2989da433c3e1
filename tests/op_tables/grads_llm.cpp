// Gradient checks of the LLM ops: rope (a rotation: its vjp is the inverse rotation),
// kv_cache_write and attention_cached (their rules are their decompositions': with respect
// to the cache and the new rows, and to q, k_cache and v_cache), and vmap of sample.
// Positions and freq_factors are model constants: not differentiated.
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

Tensor f64(std::vector<int64_t> shape, uint64_t seed, double lo = -1, double hi = 1) {
  return random_tensor(DType::f64, std::move(shape), seed, lo, hi);
}
Tensor idx(DType dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  return tensor_of(dt, std::move(shape), v);
}

GradCheck wrt_first(GradCheck c, std::vector<int> wrt) {
  c.wrt = std::move(wrt);
  return c;
}

}  // namespace

GradTable grads_llm() {
  GradTable t;
  t.add(wrt_first(
      with_inputs("rope", {f64({2, 3, 2, 4}, 41), idx(DType::i32, {3}, {0, 5, 17})}, {}, "pairs"),
      {0}));
  t.add(wrt_first(
      with_inputs("rope", {f64({2, 3, 2, 6}, 42), idx(DType::i64, {2, 3}, {1, 2, 3, 9, 8, 7})},
                  {{"mode", "neox"}, {"base", 100.0}}, "neox, pos [B, S]"),
      {0}));
  t.add(wrt_first(
      with_inputs("rope",
                  {f64({1, 2, 3, 6}, 43), idx(DType::i32, {2}, {4, 11}), f64({2}, 44, 1, 3)},
                  {{"n_rot", 4}, {"freq_scale", 0.25}, {"inverse", true}},
                  "partial, freq_factors, inverse"),
      {0}));

  t.add(with_inputs("swiglu", {f64({2, 3, 8}, 60)}, {}, "last axis"));
  t.add(with_inputs("swiglu", {f64({4, 3}, 61)}, {{"axis", 0}}, "first axis"));

  // Rows 1..2 of sequence 0 and 3..4 of sequence 1 are written: their cache gradient is 0.
  t.add(with_inputs("kv_cache_write",
                    {f64({2, 2, 5, 3}, 45), f64({2, 2, 2, 3}, 46), idx(DType::i32, {2}, {1, 3})},
                    {}, "f64 cache"));

  // Sequence 0 sees rows 0..3, sequence 1 rows 0..1 (cache rows past them get no gradient).
  t.add(with_inputs("attention_cached",
                    {f64({2, 2, 4, 3}, 47), f64({2, 2, 5, 3}, 48), f64({2, 2, 5, 3}, 49),
                     idx(DType::i32, {2}, {2, 0})},
                    {}, "GQA 2:1, per-sequence positions"));
  t.add(with_inputs("attention_cached",
                    {f64({1, 1, 2, 4}, 50), f64({1, 2, 6, 4}, 51), f64({1, 2, 6, 4}, 52),
                     idx(DType::i64, {1}, {4})},
                    {{"scale", 0.7}}, "decode, scale"));

  // The three parts as one op: gradients of the output and the caches by its decomposition.
  t.add(wrt_first(with_inputs("rope_attention_cached",
                              {f64({2, 1, 4, 4}, 54), f64({2, 1, 2, 4}, 55), f64({2, 1, 2, 4}, 56),
                               f64({2, 2, 5, 4}, 57), f64({2, 2, 5, 4}, 58),
                               idx(DType::i32, {2, 1}, {1, 3}), idx(DType::i32, {2}, {1, 3})},
                              {{"mode", "neox"}}, "decode, GQA 2:1"),
                  {0, 1, 2, 3, 4}));

  GradCheck s =
      with_inputs("sample",
                  {f64({2, 6}, 53, -2, 2), idx(DType::i64, {2, 2}, {7, 1, 8, 2}),
                   idx(DType::i32, {2, 3}, {1, -1, 4, 0, 0, 5})},
                  {{"temperature", 0.8}, {"top_k", 4}, {"repeat_penalty", 1.3}}, "vmap only");
  s.vjp = s.jvp = s.hvp = false;
  t.add(std::move(s));
  return t;
}

}  // namespace rlx::test
