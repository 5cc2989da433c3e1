// Gradient checks of the shape family. Random f64 inputs have no ties, so sort / top_k /
// scatter max and min are differentiable at them; indices are fixed i64 tensors (with
// negative and duplicate entries where the op allows them).
#include <cstdint>

#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

Tensor f64(std::vector<int64_t> shape, uint64_t seed) {
  return random_tensor(DType::f64, std::move(shape), seed, -1, 1);
}

Tensor i64(std::vector<int64_t> shape, std::vector<double> v) {
  return tensor_of(DType::i64, std::move(shape), v);
}

// Nondifferentiable: vmap only.
GradCheck vmap_only(std::string op, Tensors inputs, Attrs attrs, std::string note = {}) {
  GradCheck c = with_inputs(std::move(op), std::move(inputs), std::move(attrs), std::move(note));
  c.vjp = c.jvp = c.hvp = false;
  return c;
}

void movement(GradTable& t) {
  t.add(grad_check("reshape", {{2, 3, 4}}, {{"shape", IntList{6, 4}}}));
  t.add(grad_check("reshape", {{2, 3, 4}}, {{"shape", IntList{0, -1}}}, -1, 1, "copy and infer"));
  t.add(grad_check("reshape", {{1}}, {{"shape", IntList{}}}, -1, 1, "to rank 0"));
  t.add(grad_check("reshape", {{}}, {{"shape", IntList{1, 1}}}, -1, 1, "from rank 0"));

  t.add(grad_check("transpose", {{2, 3, 4}}, {}, -1, 1, "reversed"));
  t.add(grad_check("transpose", {{2, 3, 4}}, {{"perm", IntList{1, 2, 0}}}));
  t.add(grad_check("transpose", {{2, 3, 4}}, {{"perm", IntList{0, -1, -2}}}, -1, 1, "negative"));
  t.add(grad_check("transpose", {{}}, {}, -1, 1, "rank 0"));

  t.add(grad_check("broadcast_to", {{3}}, {{"shape", IntList{2, 3}}}));
  t.add(grad_check("broadcast_to", {{1, 3}}, {{"shape", IntList{4, 2, 3}}}));
  t.add(grad_check("broadcast_to", {{2, 1}}, {{"shape", IntList{2, 3}}}, -1, 1, "size-1 dim"));
  t.add(grad_check("broadcast_to", {{}}, {{"shape", IntList{2, 2}}}, -1, 1, "from rank 0"));

  t.add(grad_check("expand_dims", {{2, 3}}, {{"axes", IntList{0}}}));
  t.add(grad_check("expand_dims", {{2, 3}}, {{"axes", IntList{-1}}}, -1, 1, "negative"));
  t.add(grad_check("expand_dims", {{2, 3}}, {{"axes", IntList{3, 1}}}, -1, 1, "unsorted"));
  t.add(grad_check("expand_dims", {{}}, {{"axes", IntList{0, 1}}}, -1, 1, "rank 0"));

  t.add(grad_check("squeeze", {{1, 3, 1}}, {}, -1, 1, "all size-1"));
  t.add(grad_check("squeeze", {{1, 3, 1}}, {{"axes", IntList{-1}}}, -1, 1, "negative"));
  t.add(grad_check("squeeze", {{2, 1, 3}}, {{"axes", IntList{1}}}));
  t.add(grad_check("squeeze", {{1}}, {}, -1, 1, "to rank 0"));

  t.add(grad_check("flip", {{3, 4}}, {}, -1, 1, "all axes"));
  t.add(grad_check("flip", {{3, 4}}, {{"axes", IntList{-1}}}));
  t.add(grad_check("flip", {{2, 3, 2}}, {{"axes", IntList{0, 2}}}));
  t.add(grad_check("flip", {{4}}, {{"axes", IntList{0}}}));

  t.add(grad_check("tile", {{2, 3}}, {{"repeats", IntList{2, 1}}}));
  t.add(grad_check("tile", {{2, 1}}, {{"repeats", IntList{1, 3}}}, -1, 1, "size-1 dim"));
  t.add(grad_check("tile", {{2, 2}}, {{"repeats", IntList{2, 3}}}));
  t.add(grad_check("tile", {{3}}, {{"repeats", IntList{2}}}));
  t.add(grad_check("tile", {{}}, {{"repeats", IntList{}}}, -1, 1, "rank 0"));
}

void slicing(GradTable& t) {
  constexpr int64_t kBig = INT64_MAX, kSmall = INT64_MIN;
  t.add(grad_check("slice", {{5, 4}}, {{"starts", IntList{1}}, {"stops", IntList{4}}}));
  t.add(grad_check("slice", {{5, 4}},
                   {{"starts", IntList{4}}, {"stops", IntList{kSmall}}, {"steps", IntList{-2}}}, -1,
                   1, "negative step"));
  t.add(grad_check("slice", {{5, 6}},
                   {{"starts", IntList{0, 1}},
                    {"stops", IntList{5, 6}},
                    {"steps", IntList{2, 3}},
                    {"axes", IntList{0, -1}}},
                   -1, 1, "steps on two axes"));
  t.add(grad_check("slice", {{4, 3}},
                   {{"starts", IntList{-3}}, {"stops", IntList{kBig}}, {"axes", IntList{1}}}, -1, 1,
                   "negative start, clamped stop"));
  t.add(grad_check("slice", {{6}},
                   {{"starts", IntList{-2}}, {"stops", IntList{0}}, {"steps", IntList{-5}}}, -1, 1,
                   "one element of a big step"));

  t.add(grad_check("concat", {{2, 3}, {4, 3}}, {{"axis", 0}}));
  t.add(grad_check("concat", {{2, 1}, {2, 3}, {2, 2}}, {{"axis", -1}}, -1, 1, "three, negative"));
  t.add(grad_check("concat", {{3}, {3}}, {}));
  t.add(grad_check("concat", {{2, 2}}, {{"axis", 1}}, -1, 1, "one input"));

  t.add(grad_check("split", {{6, 2}}, {{"num", 3}}));
  t.add(grad_check("split", {{2, 5}}, {{"axis", -1}, {"sizes", IntList{2, 3}}}));
  t.add(grad_check("split", {{4}}, {{"sizes", IntList{1, 3}}}));

  t.add(grad_check("pad", {{2, 3}}, {{"pads", IntList{1, 0, 0, 2}}, {"value", 0.5}}, -1, 1,
                   "constant value"));
  t.add(grad_check("pad", {{3, 4}}, {{"pads", IntList{-1, 1, 0, -2}}}, -1, 1, "crop and pad"));
  t.add(grad_check("pad", {{3, 4}}, {{"pads", IntList{2, 1, 1, 3}}, {"mode", "reflect"}}));
  t.add(grad_check("pad", {{4, 3}}, {{"pads", IntList{-1, 2, 3, -1}}, {"mode", "reflect"}}, -1, 1,
                   "reflect with crops"));
  t.add(grad_check("pad", {{3, 4}}, {{"pads", IntList{2, 0, 1, 3}}, {"mode", "edge"}}));
  t.add(grad_check("pad", {{4}}, {{"pads", IntList{-5, 3}}, {"mode", "edge"}}, -1, 1,
                   "edge past a crop"));
  t.add(grad_check("pad", {{}}, {{"pads", IntList{}}}, -1, 1, "rank 0"));
}

void indexing(GradTable& t) {
  t.add(with_inputs("gather", {f64({4, 3}, 1), i64({3}, {3, 0, 3})}, {}, "duplicates"));
  t.add(with_inputs("gather", {f64({2, 5}, 2), i64({2, 2}, {4, 0, -1, 2})}, {{"axis", 1}},
                    "2-d indices, negative"));
  t.add(with_inputs("gather", {f64({3, 4, 2}, 3), i64({}, {2})}, {{"axis", -2}}, "rank-0 index"));
  t.add(with_inputs("gather", {f64({5}, 4), i64({3}, {1, 1, 4})}, {}));

  t.add(with_inputs("gather_elements", {f64({3, 4}, 5), i64({2, 4}, {0, 2, -1, 1, 2, 2, 0, 1})}, {},
                    "smaller indices"));
  t.add(with_inputs("gather_elements", {f64({3, 4}, 6), i64({3, 2}, {3, 3, 0, 1, 2, -4})},
                    {{"axis", -1}}, "duplicates"));
  t.add(with_inputs("gather_elements", {f64({4}, 7), i64({6}, {0, 3, 1, 1, 2, 0})}, {}));

  t.add(with_inputs("gather_nd", {f64({3, 4}, 8), i64({2, 2}, {0, 1, 2, 3})}, {}, "elements"));
  t.add(with_inputs("gather_nd", {f64({3, 4}, 9), i64({3, 1}, {2, 0, 2})}, {}, "rows, duplicate"));
  t.add(with_inputs("gather_nd", {f64({2, 3, 4}, 10), i64({2, 1}, {1, 2})}, {{"batch_dims", 1}}));
  t.add(with_inputs("gather_nd", {f64({2, 3}, 11), i64({2, 2, 1}, {0, 2, 1, 1})},
                    {{"batch_dims", 1}}, "batch dims, duplicates"));

  // Reduction 'mul' has no rule (NotSupported names it), so it has no check.
  t.add(with_inputs("scatter_elements",
                    {f64({3, 4}, 12), i64({2, 4}, {0, 2, 1, 0, 2, 0, 2, 1}), f64({2, 4}, 13)}, {},
                    "none"));
  t.add(with_inputs("scatter_elements", {f64({5}, 14), i64({4}, {1, 3, 1, -5}), f64({4}, 15)}, {},
                    "none, duplicates"));
  t.add(with_inputs("scatter_elements",
                    {f64({3, 4}, 16), i64({3, 2}, {0, 0, 3, 1, 2, -1}), f64({3, 2}, 17)},
                    {{"axis", 1}, {"reduction", "add"}}, "add, duplicates"));
  t.add(with_inputs("scatter_elements", {f64({4}, 18), i64({3}, {0, 2, 0}), f64({3}, 19)},
                    {{"reduction", "max"}}, "max, duplicates"));
  t.add(with_inputs("scatter_elements",
                    {f64({2, 3}, 20), i64({2, 2}, {0, 2, 1, 1}), f64({2, 2}, 21)},
                    {{"axis", -1}, {"reduction", "min"}}, "min"));

  t.add(with_inputs("scatter_nd", {f64({4, 3}, 22), i64({2, 1}, {3, 1}), f64({2, 3}, 23)}, {},
                    "none, rows"));
  t.add(with_inputs("scatter_nd", {f64({4}, 24), i64({3, 1}, {2, 0, -2}), f64({3}, 25)}, {},
                    "none, duplicates"));
  t.add(with_inputs("scatter_nd", {f64({3, 4}, 26), i64({3, 2}, {0, 1, 2, 3, 0, 1}), f64({3}, 27)},
                    {{"reduction", "add"}}, "add, duplicates"));
  t.add(with_inputs("scatter_nd", {f64({3, 2}, 28), i64({2, 1}, {1, 1}), f64({2, 2}, 29)},
                    {{"reduction", "max"}}, "max, duplicates"));
  t.add(with_inputs("scatter_nd", {f64({4}, 30), i64({2, 1}, {0, 3}), f64({2}, 31)},
                    {{"reduction", "min"}}, "min"));
}

// dynamic_reshape's output dims are unknown to inference unless the target has rank 1,
// and the vjp / hvp checks project outputs of static shape: those run on rank-1 targets.
void dynamic(GradTable& t) {
  t.add(with_inputs("dynamic_reshape", {f64({2, 3}, 32), i64({1}, {-1})}, {}, "flatten"));
  t.add(with_inputs("dynamic_reshape", {f64({2, 3, 4}, 33), i64({1}, {24})}));
  auto jvp_vmap = [](GradCheck c) {
    c.vjp = c.hvp = false;
    return c;
  };
  t.add(jvp_vmap(with_inputs("dynamic_reshape", {f64({2, 3, 4}, 34), i64({2}, {0, -1})}, {},
                             "copy and infer")));
  t.add(jvp_vmap(with_inputs("dynamic_reshape", {f64({6}, 35), i64({3}, {3, 1, 2})})));
  t.add(jvp_vmap(with_inputs("dynamic_reshape", {f64({1}, 36), i64({0}, {})}, {}, "to rank 0")));
  t.add(vmap_only("shape_of", {f64({2, 3}, 37)}, {}));
  t.add(vmap_only("shape_of", {f64({}, 38)}, {}, "rank 0: an empty shape"));
}

void sorting(GradTable& t) {
  t.add(grad_check("sort", {{2, 5}}, {}));
  t.add(grad_check("sort", {{4, 3}}, {{"axis", 0}, {"descending", true}}));
  t.add(grad_check("sort", {{5}}, {{"stable", true}}));

  t.add(grad_check("top_k", {{2, 5}}, {{"k", 2}}));
  t.add(grad_check("top_k", {{4, 3}}, {{"k", 3}, {"axis", 0}, {"largest", false}}));
  t.add(grad_check("top_k", {{6}}, {{"k", 6}, {"sorted", false}}, -1, 1, "k = n"));
}

void nondifferentiable(GradTable& t) {
  t.add(vmap_only("one_hot", {i64({3}, {0, 2, -1})}, {{"depth", 3}}, "negative index"));
  t.add(vmap_only("one_hot", {i64({2, 2}, {3, 0, 1, 5})}, {{"depth", 4}, {"axis", 0}},
                  "axis 0, out of range"));
  t.add(vmap_only("one_hot", {i64({}, {1})}, {{"depth", 2}, {"dtype", DType::f64}}, "rank 0"));
  t.exempt = {
      {"constant", "no inputs: vmap never applies; nondifferentiable"},
      {"iota", "no inputs: vmap never applies; nondifferentiable"},
      // Expected: rlx::vmap of a graph with nonzero on a batched input throws
      // rlx::NotSupported whose message names "nonzero" and "vmap".
      {"nonzero", "output shape depends on the data: vmap throws NotSupported; nondifferentiable"},
  };
}

}  // namespace

GradTable grads_shape() {
  GradTable t;
  movement(t);
  slicing(t);
  indexing(t);
  sorting(t);
  dynamic(t);
  nondifferentiable(t);
  return t;
}

}  // namespace rlx::test
