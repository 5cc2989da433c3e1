// Gradient checks of the elementwise family: unary math, binary arithmetic with
// broadcasting, select, clamp, cast; vmap-only checks for the nondifferentiable ops.
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

using Shapes = std::vector<std::vector<int64_t>>;

// Nondifferentiable ops: only their batching is checked.
GradCheck vmap_only(GradCheck c) {
  c.vjp = c.jvp = c.hvp = false;
  return c;
}

Tensor f64(std::vector<int64_t> shape, uint64_t seed, double lo, double hi) {
  return random_tensor(DType::f64, std::move(shape), seed, lo, hi);
}

void add_unary(GradTable& t) {
  struct U {
    const char* op;
    double lo, hi;  // input range
    bool kink;      // not differentiable at 0: inputs kept away from it
    Attrs attrs = {};
  };
  const U table[] = {
      {"neg", -2, 2, false},
      {"abs", -2, 2, true},
      {"square", -2, 2, false},
      {"exp", -2, 2, false},
      {"expm1", -2, 2, false},
      {"log", 0.5, 3, false},
      {"log1p", -0.5, 2, false},
      {"sqrt", 0.5, 3, false},
      {"rsqrt", 0.5, 3, false},
      {"reciprocal", -2, 2, true},
      {"sin", -3, 3, false},
      {"cos", -3, 3, false},
      {"tan", -1, 1, false},
      {"tanh", -2, 2, false},
      {"sigmoid", -3, 3, false},
      {"erf", -2, 2, false},
      {"softplus", -3, 3, false},
      {"softsign", -3, 3, false},
      {"silu", -3, 3, false},
      {"hard_sigmoid", -2, 2, false},
      {"gelu", -3, 3, false},
      {"elu", -2, 2, true},
      {"leaky_relu", -2, 2, true},
      {"relu", -2, 2, true},
      {"gelu", -3, 3, false, {{"approximate", "tanh"}}},
      {"elu", -2, 2, true, {{"alpha", 0.5}}},
      {"leaky_relu", -2, 2, true, {{"alpha", 0.2}}},
      {"hard_sigmoid", -4, 4, false, {{"alpha", 0.3}, {"beta", 0.4}}},
  };
  const std::vector<std::vector<int64_t>> shapes = {{2, 3}, {}, {1, 4, 1}};
  uint64_t seed = 1;
  for (const U& u : table) {
    for (const auto& s : shapes) {
      Tensor x = u.kink ? away_from_zero(s, seed++, 0.2, u.hi) : f64(s, seed++, u.lo, u.hi);
      GradCheck c = with_inputs(u.op, {x}, u.attrs);
      // hard_sigmoid with alpha .3, beta .4 saturates at x = -4/3 and 2: keep clear.
      if (std::string(u.op) == "hard_sigmoid" && u.lo == -4)
        c.inputs[0] = tensor_of(DType::f64, {5}, {-3.5, -1.0, 0.3, 1.5, 3.0});
      t.add(std::move(c));
    }
  }
  for (const char* op : {"sign", "floor", "ceil", "round", "fake_quantize", "isnan", "isinf"})
    t.add(vmap_only(with_inputs(op, {f64({2, 3}, seed++, -3, 3)})));
  t.add(vmap_only(with_inputs("logical_not", {random_tensor(DType::boolean, {2, 3}, seed++)})));
}

void add_binary(GradTable& t) {
  struct B {
    const char* op;
    double alo, ahi, blo, bhi;
    bool b_away;  // b kept away from 0 (a divisor)
  };
  const B table[] = {
      {"add", -2, 2, -2, 2, false}, {"sub", -2, 2, -2, 2, false},      {"mul", -2, 2, -2, 2, false},
      {"div", -2, 2, 0.5, 2, true}, {"pow", 0.5, 2, -1.5, 1.5, false}, {"max", -2, 2, -2, 2, false},
      {"min", -2, 2, -2, 2, false}, {"atan2", -2, 2, -2, 2, false},
  };
  const Shapes pairs[] = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{}, {2, 2}}, {{3, 1, 2}, {2}}};
  uint64_t seed = 100;
  for (const B& b : table) {
    for (const Shapes& p : pairs) {
      Tensor x = f64(p[0], seed++, b.alo, b.ahi);
      Tensor y =
          b.b_away ? away_from_zero(p[1], seed++, b.blo, b.bhi) : f64(p[1], seed++, b.blo, b.bhi);
      t.add(with_inputs(b.op, {x, y}));
    }
  }
  // mod / fmod: quotients kept away from integers so that floor / trunc stay constant.
  for (const char* op : {"mod", "fmod"})
    for (const Shapes& p : {Shapes{{2, 3}, {2, 3}}, Shapes{{2, 3}, {3}}})
      t.add(with_inputs(
          op, {away_from_zero(p[0], seed++, 0.3, 0.9), away_from_zero(p[1], seed++, 1.2, 2.0)}));
  // Nondifferentiable binaries: vmap only.
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"})
    t.add(vmap_only(with_inputs(op, {f64({2, 3}, seed++, -1, 1), f64({3}, seed++, -1, 1)})));
  for (const char* op : {"logical_and", "logical_or", "logical_xor"})
    t.add(vmap_only(with_inputs(op, {random_tensor(DType::boolean, {2, 3}, seed++),
                                     random_tensor(DType::boolean, {3}, seed++)})));
  for (const char* op : {"bitwise_and", "bitwise_or", "bitwise_xor"})
    t.add(vmap_only(with_inputs(op, {random_tensor(DType::i32, {2, 3}, seed++, 0, 100),
                                     random_tensor(DType::i32, {2, 1}, seed++, 0, 100)})));
}

void add_select_clamp_cast(GradTable& t) {
  uint64_t seed = 500;
  for (const Shapes& p :
       {Shapes{{2, 3}, {2, 3}, {2, 3}}, Shapes{{2, 3}, {3}, {2, 1}}, Shapes{{}, {2, 2}, {}}}) {
    GradCheck c = with_inputs("select", {random_tensor(DType::boolean, p[0], seed++),
                                         f64(p[1], seed++, -2, 2), f64(p[2], seed++, -2, 2)});
    t.add(std::move(c));
  }
  // clamp: x values clear of the bounds so that each element has one clear winner.
  t.add(
      with_inputs("clamp", {tensor_of(DType::f64, {6}, {-2.0, -0.9, -0.2, 0.3, 0.8, 1.9}),
                            tensor_of(DType::f64, {}, {-0.5}), tensor_of(DType::f64, {}, {0.5})}));
  t.add(with_inputs(
      "clamp",
      {tensor_of(DType::f64, {2, 3}, {-2.0, -0.1, 0.3, 1.7, 0.2, -0.8}),
       tensor_of(DType::f64, {3}, {-1.0, -0.5, 0.0}), tensor_of(DType::f64, {2, 1}, {1.0, 0.6})},
      {}, "broadcast bounds"));
  // cast to f32 and back: the loss is in f32, so the finite differences need a larger
  // step and a looser tolerance.
  GradCheck c = with_inputs("cast", {f64({2, 3}, seed++, -2, 2)}, {{"dtype", DType::f32}});
  c.eps = 1e-2;
  c.rtol = 1e-3;
  t.add(std::move(c));
  t.add(with_inputs("cast", {f64({3}, seed++, -2, 2)}, {{"dtype", DType::f64}}, "same dtype"));
  t.add(vmap_only(with_inputs("cast", {f64({2, 3}, seed++, -5, 5)}, {{"dtype", DType::i32}})));
}

}  // namespace

GradTable grads_elementwise() {
  GradTable t;
  add_unary(t);
  add_binary(t);
  add_select_clamp_cast(t);
  return t;
}

}  // namespace rlx::test
