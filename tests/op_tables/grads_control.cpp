// Gradient checks of the control family (cond, while, scan) and of the random ops (vmap
// only: they are nondifferentiable). The subgraphs are small closed graphs of elementwise
// ops; loops are bounded by integer counters, so the iteration count never depends on the
// float inputs (finite differences stay smooth).
#include "op_tables/gradcheck.h"

namespace rlx::test {

namespace {

using Types = std::vector<TensorType>;
using Values = std::vector<Value>;
using Body = std::function<Values(Graph&, const Values&)>;

TensorType f64(std::vector<int64_t> shape) {
  Shape s(shape.begin(), shape.end());
  return TensorType(DType::f64, s);
}
const TensorType kI64(DType::i64, {});
const TensorType kBool(DType::boolean, {});

// A closed subgraph over args of the given types.
SubgraphPtr subgraph(const char* name, const Types& types, const Body& f) {
  auto g = std::make_shared<Graph>(name);
  Values args;
  for (size_t i = 0; i < types.size(); ++i) args.push_back(g->input(str_cat("a", i), types[i]));
  for (Value v : f(*g, args)) g->output(v);
  return g;
}

Tensor scalar_i64(double v) { return tensor_of(DType::i64, {}, {v}); }
Tensor boolean(bool v) { return tensor_of(DType::boolean, {}, {v ? 1.0 : 0.0}); }
Value i64_const(Graph& g, double v) { return g.constant(Literal::scalar(DType::i64, v)); }

GradCheck check(std::string op, Tensors inputs, std::vector<SubgraphPtr> subgraphs, Attrs attrs,
                std::string note) {
  GradCheck c;
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.subgraphs = std::move(subgraphs);
  c.attrs = std::move(attrs);
  c.note = std::move(note);
  return c;
}

void add_cond(GradTable& t) {
  // then = x*y + sin(x), else = x - y, with y broadcast against x.
  Types xy{f64({2, 3}), f64({3})};
  auto then_g = subgraph(
      "then", xy, [](Graph&, const Values& a) { return Values{a[0] * a[1] + op("sin", {a[0]})}; });
  auto else_g = subgraph("else", xy, [](Graph&, const Values& a) { return Values{a[0] - a[1]}; });
  for (bool p : {true, false})
    t.add(check("cond",
                {boolean(p), random_tensor(DType::f64, {2, 3}, 1, -1, 1),
                 random_tensor(DType::f64, {3}, 2, -1, 1)},
                {then_g, else_g}, {}, p ? "then, broadcast" : "else, broadcast"));

  // Two outputs, rank 0 operands; the else branch ignores x (a zero gradient there).
  Types ss{f64({}), f64({})};
  auto then2 = subgraph("then", ss, [](Graph&, const Values& a) {
    return Values{a[0] * a[1], tanh(a[1])};
  });
  // A constant output: unbatched under vmap while the other branch's is batched.
  auto else2 = subgraph("else", ss, [](Graph& g, const Values& a) {
    return Values{a[1] * a[1], g.constant(Literal::scalar(DType::f64, 2.0))};
  });
  for (bool p : {true, false})
    t.add(check("cond",
                {boolean(p), tensor_of(DType::f64, {}, {0.7}), tensor_of(DType::f64, {}, {-0.4})},
                {then2, else2}, {}, p ? "then, rank 0, two outputs" : "else, unused operand"));

  // An integer operand (no gradient) next to a float one.
  Types xk{f64({4}), kI64};
  auto then3 = subgraph("then", xk, [](Graph&, const Values& a) {
    return Values{a[0] * cast(a[1], DType::f64) + a[0] * a[0]};
  });
  auto else3 = subgraph("else", xk, [](Graph&, const Values& a) {
    return Values{op("cos", {a[0]}) - cast(a[1], DType::f64)};
  });
  for (bool p : {true, false})
    t.add(check("cond", {boolean(p), random_tensor(DType::f64, {4}, 3, -1, 1), scalar_i64(2)},
                {then3, else3}, {}, p ? "then, integer operand" : "else, integer operand"));
}

void add_while(GradTable& t) {
  // State (i, x, c): while i < 4 { i += 1; x = x*0.9 + c }.
  Types st{kI64, f64({3}), f64({3})};
  auto cond_g = subgraph("cond", st, [](Graph& g, const Values& a) {
    return Values{op("lt", {a[0], i64_const(g, 4)})};
  });
  auto body_g = subgraph("body", st, [](Graph& g, const Values& a) {
    return Values{a[0] + i64_const(g, 1), a[1] * 0.9 + a[2], a[2]};
  });
  Tensors in{scalar_i64(0), random_tensor(DType::f64, {3}, 4, -1, 1),
             random_tensor(DType::f64, {3}, 5, -1, 1)};
  t.add(check("while", in, {cond_g, body_g}, {{"max_iter", int64_t(10)}}, "4 steps"));
  t.add(check("while", in, {cond_g, body_g}, {{"max_iter", int64_t(2)}}, "cut by max_iter"));
  in[0] = scalar_i64(6);
  t.add(check("while", in, {cond_g, body_g}, {{"max_iter", int64_t(5)}}, "no step"));

  // A nonlinear body with a rank-0 parameter in the state and a limit the loop reads:
  // while i < n { i += 1; h = tanh(h * w + 0.5) }.
  Types st2{kI64, kI64, f64({2, 2}), f64({})};
  auto cond2 = subgraph("cond", st2, [](Graph&, const Values& a) {
    return Values{op("lt", {a[0], a[1]})};
  });
  auto body2 = subgraph("body", st2, [](Graph& g, const Values& a) {
    return Values{a[0] + i64_const(g, 1), a[1], tanh(a[2] * a[3] + 0.5), a[3]};
  });
  t.add(check("while",
              {scalar_i64(0), scalar_i64(3), random_tensor(DType::f64, {2, 2}, 6, -1, 1),
               tensor_of(DType::f64, {}, {0.8})},
              {cond2, body2}, {{"max_iter", int64_t(8)}}, "tanh body, limit in the state"));
}

void add_scan(GradTable& t) {
  // Running product: p' = p * x, y = p'.
  Types px{f64({2}), f64({2})};
  auto prod = subgraph("body", px, [](Graph&, const Values& a) {
    Value p = a[0] * a[1];
    return Values{p, p};
  });
  for (bool rev : {false, true})
    t.add(check("scan",
                {random_tensor(DType::f64, {2}, 7, 0.5, 1.5),
                 random_tensor(DType::f64, {4, 2}, 8, 0.5, 1.5)},
                {prod}, {{"num_carry", int64_t(1)}, {"reverse", rev}},
                rev ? "running product, reverse" : "running product"));

  // RNN-like step with a weight riding along as a carry: h' = tanh(h * w + x), ys h' * h
  // and w * w (unbatched under vmap when only x is).
  Types rnn{f64({3}), f64({3}), f64({3})};
  auto step = subgraph("body", rnn, [](Graph&, const Values& a) {
    Value h = tanh(a[0] * a[1] + a[2]);
    return Values{h, a[1], h * a[0], a[1] * a[1]};
  });
  t.add(check("scan",
              {random_tensor(DType::f64, {3}, 9, -1, 1), random_tensor(DType::f64, {3}, 10, -1, 1),
               random_tensor(DType::f64, {5, 3}, 11, -1, 1)},
              {step}, {{"num_carry", int64_t(2)}}, "rnn step, weight carry"));

  // No xs: the length comes from the attribute; rank-0 carry.
  Types c0{f64({})};
  auto decay = subgraph("body", c0, [](Graph&, const Values& a) {
    return Values{a[0] * 0.5 + op("sin", {a[0]}), a[0] * a[0]};
  });
  t.add(check("scan", {tensor_of(DType::f64, {}, {0.3})}, {decay},
              {{"num_carry", int64_t(1)}, {"length", int64_t(3)}}, "length attribute"));

  // An integer counter carry next to a float one; two xs, one of them integer; no ys.
  Types mixed{kI64, f64({2}), f64({2}), kI64};
  auto count = subgraph("body", mixed, [](Graph&, const Values& a) {
    Value k = cast(a[0] + a[3], DType::f64);
    return Values{a[0] + a[3], a[1] * op("cos", {a[2]}) + k * a[2]};
  });
  t.add(check("scan",
              {scalar_i64(1), random_tensor(DType::f64, {2}, 12, -1, 1),
               random_tensor(DType::f64, {3, 2}, 13, -1, 1), tensor_of(DType::i64, {3}, {1, 2, 0})},
              {count}, {{"num_carry", int64_t(2)}, {"reverse", true}},
              "integer carry and xs, no ys"));
}

void add_random(GradTable& t) {
  // Nondifferentiable: vmap only (a batched key: one draw per key).
  struct Case {
    const char* op;
    Tensor key;
    Attrs attrs;
    const char* note;
  };
  const Case cases[] = {
      {"uniform", scalar_i64(3), {{"shape", IntList{2, 3}}, {"dtype", DType::f64}}, "i64 key"},
      {"uniform",
       tensor_of(DType::i32, {}, {7}),
       {{"shape", IntList{4}}, {"low", -2.0}, {"high", 3.0}, {"seed", int64_t(11)}},
       "i32 key, low/high, seed"},
      {"normal", scalar_i64(5), {{"shape", IntList{3, 2}}, {"dtype", DType::f64}}, "i64 key"},
      {"normal",
       tensor_of(DType::i32, {}, {2}),
       {{"shape", IntList{}}, {"mean", 1.5}, {"std", 0.5}},
       "rank 0, mean/std"},
  };
  for (const Case& k : cases) {
    GradCheck c = check(k.op, {k.key}, {}, k.attrs, k.note);
    c.vjp = c.jvp = c.hvp = false;
    t.add(std::move(c));
  }
}

}  // namespace

GradTable grads_control() {
  GradTable t;
  add_cond(t);
  add_while(t);
  add_scan(t);
  add_random(t);
  return t;
}

}  // namespace rlx::test
