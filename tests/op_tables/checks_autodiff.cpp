// Consistency checks of the autodiff helper ops: every dtype, views of their input.
#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

// The input's values with another shape (reshape) or broadcast to it (NumPy rules).
Tensor reshaped(const Tensor& x, std::vector<int64_t> shape) {
  return Tensor::from_doubles(x.dtype(), std::move(shape), values(x));
}

Tensor broadcast(const Tensor& x, const std::vector<int64_t>& shape) {
  std::vector<double> v = values(x), out(size_t(numel(shape)));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = v[size_t(broadcast_index(unravel(int64_t(i), shape), x.shape()))];
  return Tensor::from_doubles(x.dtype(), shape, out);
}

}  // namespace

CheckTable checks_autodiff() {
  CheckTable t;
  uint64_t seed = 900;
  for (DType dt : kAllDTypes) {
    Tensor like = random_tensor(DType::f32, {3, 2}, seed++);
    t.add(ref_check("reshape_like", dt, {random_tensor(dt, {2, 3}, seed++), like}, {},
                    [](const Tensors& in, const Attrs&) {
                      return Tensors{reshaped(in[0], {3, 2})};
                    }));
    t.add(ref_check("broadcast_like", dt, {random_tensor(dt, {3, 1}, seed++), like.reshape({1, 6})},
                    {}, [](const Tensors& in, const Attrs&) {
                      return Tensors{broadcast(in[0], {3, 6})};
                    }));
    for (const char* op : {"stop_gradient", "checkpoint"})
      t.add(ref_check(op, dt, {random_tensor(dt, {2, 3}, seed++)}, {},
                      [](const Tensors& in, const Attrs&) { return Tensors{in[0].clone()}; }));
  }
  Tensor x = random_tensor(DType::f32, {4, 2, 3}, seed++);
  t.add(ref_check(
      "reshape_like", DType::f32, {x, random_tensor(DType::i64, {6}, seed++)}, {{"lead", 1}},
      [](const Tensors& in, const Attrs&) {
        return Tensors{reshaped(in[0], {4, 6})};
      },
      "lead"));
  t.add(ref_check(
      "broadcast_like", DType::f32,
      {random_tensor(DType::f32, {}, seed++), random_tensor(DType::f32, {2, 0}, seed++)}, {},
      [](const Tensors& in, const Attrs&) {
        return Tensors{broadcast(in[0], {2, 0})};
      },
      "empty"));
  return t;
}

}  // namespace rlx::test
