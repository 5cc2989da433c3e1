// Gradient checks of fused_elementwise: its vjp / jvp / vmap rules transform the body, so
// these check them against finite differences (and vmap against a loop) on bodies with
// broadcasting, scalar inputs and constants, several outputs, trailing reductions,
// broadcasts of inputs, and a select on a bool input (not differentiated).
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

using Values = std::vector<Value>;
using Body = std::function<Values(Graph&, const Values&)>;

SubgraphPtr body_of(const Tensors& inputs, const Body& f) {
  auto g = std::make_shared<Graph>("body");
  Values args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(g->input(str_cat("x", i), inputs[i].type()));
  for (Value v : f(*g, args)) g->output(v);
  return g;
}

GradCheck region(Tensors inputs, const Body& f, std::string note) {
  GradCheck c;
  c.op = "fused_elementwise";
  c.subgraphs = {body_of(inputs, f)};
  c.inputs = std::move(inputs);
  c.note = std::move(note);
  return c;
}

Tensor f64(std::vector<int64_t> shape, uint64_t seed) {
  return random_tensor(DType::f64, std::move(shape), seed, -1, 1);
}

}  // namespace

GradTable grads_region() {
  GradTable t;
  t.add(region(
      {f64({2, 3}, 1), f64({3}, 2)},
      [](Graph&, const Values& x) {
        Value y = sigmoid(x[0] * x[1] + 0.5) * x[0];
        return Values{y, sum(y * y, {-1})};
      },
      "chain, broadcast row, output and trailing sum"));
  t.add(region(
      {f64({3}, 3), f64({2, 3}, 4), f64({}, 5)},
      [](Graph& g, const Values& x) {
        Value b = g.apply1("broadcast_to", {x[0]}, {{"shape", IntList{2, 3}}});
        Value y = tanh(b * x[1] + x[2]);
        return Values{mean(y), op("reduce_max", {y * x[1]}, {{"axes", IntList{1}}})};
      },
      "broadcast_to of an input, scalar input, mean and max over trailing axes"));
  t.checks.back().hvp = false;  // max: piecewise
  Tensor p = tensor_of(DType::boolean, {4}, {1, 0, 0, 1});
  t.add(region(
      {f64({4}, 6), p},
      [](Graph& g, const Values& x) {
        return Values{g.apply1("select", {x[1], exp(x[0]), x[0] * x[0]}) - 0.25};
      },
      "select on a bool input"));
  return t;
}

}  // namespace rlx::test
