// cond, while and scan: subgraphs built from a few core ops, references as plain loops.
#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Fn2 = std::function<Value(Value, Value)>;

// A subgraph (a, b) -> f(a, b) over two operands of type t.
SubgraphPtr binary_graph(const char* name, TensorType t, const Fn2& f) {
  auto g = std::make_shared<Graph>(name);
  Value a = g->input("a", t), b = g->input("b", t);
  g->output(f(a, b));
  return g;
}

Tensors map2(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  auto x = values(a), y = values(b);
  for (size_t i = 0; i < x.size(); ++i) x[i] = f(x[i], y[i]);
  return {tensor_of(a.dtype(), a.shape(), x)};
}

void add_cond(CheckTable& t) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::i32, DType::i64}) {
    TensorType ty(dt, {2, 3});
    auto then_g = binary_graph("then", ty, [](Value a, Value b) { return a + b; });
    auto else_g = binary_graph("else", ty, [](Value a, Value b) { return a * b; });
    for (bool pred : {true, false}) {
      OpCheck c{"cond", dt};
      c.inputs = {tensor_of(DType::boolean, {}, {pred ? 1.0 : 0.0}), random_tensor(dt, {2, 3}, 1),
                  random_tensor(dt, {2, 3}, 2)};
      c.subgraphs = {then_g, else_g};
      c.ref = [](const Tensors& in, const Attrs&) {
        bool p = values(in[0])[0] != 0;
        return map2(in[1], in[2], [p](double a, double b) { return p ? a + b : a * b; });
      };
      c.note = pred ? "then" : "else";
      t.add(std::move(c));
    }
  }
}

// while (i < limit) { i += 1; acc = acc * 2 + x }  over state (i: i64[], acc, x, limit).
void add_while(CheckTable& t) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    TensorType it(DType::i64, {}), at(dt, {4});
    auto cond_g = std::make_shared<Graph>("cond");
    {
      Value i = cond_g->input("i", it), a = cond_g->input("acc", at);
      Value x = cond_g->input("x", at), lim = cond_g->input("limit", it);
      (void)a;
      (void)x;
      cond_g->output(cond_g->apply1("lt", {i, lim}));
    }
    auto body_g = std::make_shared<Graph>("body");
    {
      Value i = body_g->input("i", it), a = body_g->input("acc", at);
      Value x = body_g->input("x", at), lim = body_g->input("limit", it);
      body_g->output(i + body_g->constant(Literal::scalar(DType::i64, 1)));
      body_g->output(a * 2.0 + x);
      body_g->output(x);
      body_g->output(lim);
    }
    for (auto [limit, max_iter] : {std::pair{3, -1}, {0, -1}, {5, 2}}) {
      OpCheck c{"while", dt};
      c.inputs = {tensor_of(DType::i64, {}, {0}), random_tensor(dt, {4}, 3, -1, 1),
                  random_tensor(dt, {4}, 4, -1, 1), tensor_of(DType::i64, {}, {double(limit)})};
      c.attrs = {{"max_iter", int64_t(max_iter)}};
      c.subgraphs = {cond_g, body_g};
      c.ref = [dt](const Tensors& in, const Attrs& attrs) {
        int64_t max_iter = attrs.get_int("max_iter"), limit = int64_t(values(in[3])[0]);
        auto acc = values(in[1]), x = values(in[2]);
        int64_t i = 0;
        for (; i < limit && (max_iter < 0 || i < max_iter); ++i)
          for (size_t k = 0; k < acc.size(); ++k)  // round per step, as the graph does
            acc[k] = values(tensor_of(dt, {}, {acc[k] * 2 + x[k]}))[0];
        return Tensors{tensor_of(DType::i64, {}, {double(i)}), tensor_of(dt, {4}, acc), in[2],
                       in[3]};
      };
      c.note = str_cat("limit ", limit, ", max_iter ", max_iter);
      t.add(std::move(c));
    }
  }
}

// scan with one carry c and one xs: c' = c + x, y = c' * x; forward and reverse.
void add_scan(CheckTable& t) {
  for (DType dt : {DType::f32, DType::f64, DType::i32}) {
    TensorType ct(dt, {2});
    auto body = std::make_shared<Graph>("body");
    {
      Value c = body->input("c", ct), x = body->input("x", ct);
      Value next = c + x;
      body->output(next);
      body->output(next * x);
    }
    for (int64_t len : {5, 1, 0}) {
      for (bool reverse : {false, true}) {
        OpCheck c{"scan", dt};
        c.inputs = {random_tensor(dt, {2}, 5), random_tensor(dt, {len, 2}, 6)};
        c.attrs = {{"num_carry", int64_t(1)}, {"reverse", reverse}};
        c.subgraphs = {body};
        c.ref = [dt, len](const Tensors& in, const Attrs& attrs) {
          auto carry = values(in[0]), xs = values(in[1]);
          std::vector<double> ys(xs.size());
          for (int64_t s = 0; s < len; ++s) {
            int64_t r = attrs.get_bool("reverse") ? len - 1 - s : s;
            for (size_t k = 0; k < 2; ++k) {
              carry[k] += xs[size_t(r) * 2 + k];
              ys[size_t(r) * 2 + k] = carry[k] * xs[size_t(r) * 2 + k];
            }
          }
          return Tensors{tensor_of(dt, {2}, carry), tensor_of(dt, {len, 2}, ys)};
        };
        c.note = str_cat("length ", len, reverse ? ", reverse" : "");
        t.add(std::move(c));
      }
    }
  }
  // No xs: the length comes from the attribute.
  auto body = std::make_shared<Graph>("body");
  {
    Value c = body->input("c", TensorType(DType::f32, {}));
    body->output(c * 3.0);
    body->output(c);
  }
  OpCheck c{"scan", DType::f32};
  c.inputs = {tensor_of(DType::f32, {}, {1.0})};
  c.attrs = {{"num_carry", int64_t(1)}, {"length", int64_t(4)}};
  c.subgraphs = {body};
  c.ref = [](const Tensors&, const Attrs&) {
    return Tensors{tensor_of(DType::f32, {}, {81}), tensor_of(DType::f32, {4}, {1, 3, 9, 27})};
  };
  c.note = "length attribute";
  t.add(std::move(c));
}

}  // namespace

CheckTable checks_control() {
  CheckTable t;
  add_cond(t);
  add_while(t);
  add_scan(t);
  return t;
}

}  // namespace rlx::test
