// Gradient checks of the autodiff helper ops.
#include "op_tables/gradcheck.h"

namespace rlx::test {

GradTable grads_autodiff() {
  GradTable t;
  auto f64 = [](std::vector<int64_t> s, uint64_t seed) {
    return random_tensor(DType::f64, std::move(s), seed, -1, 1);
  };
  GradCheck c;
  c.op = "reshape_like";
  c.inputs = {f64({2, 3}, 1), f64({3, 2}, 2)};
  c.wrt = {0};
  t.add(c);
  c.inputs = {f64({4, 2, 3}, 3), random_tensor(DType::i32, {6}, 4, 0, 5)};
  c.attrs = {{"lead", 1}};
  c.note = "lead";
  t.add(c);
  c = GradCheck{};
  c.op = "broadcast_like";
  c.wrt = {0};
  for (auto [x, like] : {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{3, 1}, {2, 3, 4}},
                         {{}, {2, 2}},
                         {{2, 1, 3}, {4, 1}}}) {
    c.inputs = {f64(x, 5), f64(like, 6)};
    t.add(c);
  }
  c = GradCheck{};
  c.op = "checkpoint";
  c.inputs = {f64({2, 3}, 7)};
  t.add(c);
  c = GradCheck{};
  c.op = "stop_gradient";  // no gradient flows: vmap only
  c.inputs = {f64({2, 3}, 8)};
  c.vjp = c.jvp = c.hvp = false;
  t.add(c);
  return t;
}

}  // namespace rlx::test
