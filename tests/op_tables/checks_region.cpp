// fused_elementwise: regions built with the graph API, against references evaluated in
// double at every element (integers exactly, wrapped per op as their arithmetic does).
// Covered: every dtype; broadcast, scalar and constant operands; several outputs; trailing
// reductions (sum, mean, prod, reduce_max, reduce_min; rows split between threads and
// not); broadcasts of inputs inside the body; casts that round; rank 0 and empty shapes;
// and (from the harness) strided inputs.
#include <cmath>
#include <functional>
#include <limits>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Sizes = std::vector<int64_t>;
using Vals = std::vector<double>;
using Fn = std::function<double(const Vals&)>;
using Build = std::function<std::vector<Value>(Graph&, const std::vector<Value>&)>;

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kInts[] = {DType::i8, DType::i16, DType::i32, DType::i64, DType::u8};

// A body over args of the inputs' types.
SubgraphPtr body_of(const Tensors& inputs, const Build& build) {
  auto g = std::make_shared<Graph>("body");
  std::vector<Value> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(g->input(str_cat("x", i), inputs[i].type()));
  for (Value v : build(*g, args)) g->output(v);
  return g;
}

OpCheck region_check(DType dt, Tensors inputs, const Build& build, RefFn ref, std::string note) {
  OpCheck c{"fused_elementwise", dt};
  c.subgraphs = {body_of(inputs, build)};
  c.inputs = std::move(inputs);
  c.ref = std::move(ref);
  c.note = std::move(note);
  return c;
}

// f at every element of `shape`, each input read under broadcasting.
Vals eval(const Sizes& shape, const Tensors& in, const Fn& f) {
  std::vector<Vals> v;
  for (const Tensor& t : in) v.push_back(values(t));
  Vals out(size_t(numel(shape))), args(in.size());
  for (size_t i = 0; i < out.size(); ++i) {
    Sizes idx = unravel(int64_t(i), shape);
    for (size_t k = 0; k < in.size(); ++k)
      args[k] = v[k][size_t(broadcast_index(idx, in[k].shape()))];
    out[i] = f(args);
  }
  return out;
}

enum class Fold { sum, mean, prod, max, min };

// Folds each run of `cols` consecutive values.
Vals fold_rows(const Vals& v, int64_t rows, int64_t cols, Fold f) {
  Vals out;
  for (int64_t r = 0; r < rows; ++r) {
    long double s = f == Fold::prod ? 1 : 0;
    double m = f == Fold::max ? -INFINITY : INFINITY;
    for (int64_t c = 0; c < cols; ++c) {
      double x = v[size_t(r * cols + c)];
      s = f == Fold::prod ? s * x : s + x;
      m = std::isnan(x) || std::isnan(m) ? NAN : (f == Fold::max ? std::max(m, x) : std::min(m, x));
    }
    if (f == Fold::max || f == Fold::min)
      out.push_back(m);
    else
      out.push_back(f == Fold::mean ? double(s / (long double)cols) : double(s));
  }
  return out;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double round_to(DType dt, double v) { return values(tensor_of(dt, {}, {v}))[0]; }

Value k(Value like, double v) { return scalar_like(like, v); }

void add_float_chains(CheckTable& t) {
  // relu(x * s + t) with per-channel s, t in a blocked layout's shape (a run of lanes
  // repeated over the pixels): blocks of repeats longer than a tile, runs of 8 and of 5
  // (tiles then start inside a run), and many blocks per tile ([4, 5, 3, 5]).
  for (Sizes xs : {Sizes{1, 3, 50, 7, 8}, Sizes{2, 3, 40, 7, 5}, Sizes{4, 5, 3, 5}}) {
    Sizes cs = xs;
    cs[cs.size() - 2] = 1;
    if (cs.size() == 5) cs[2] = 1;
    Tensors in = {random_tensor(DType::f32, xs, 6), random_tensor(DType::f32, cs, 7),
                  random_tensor(DType::f32, cs, 8)};
    t.add(region_check(
        DType::f32, in,
        [](Graph&, const std::vector<Value>& x) {
          return std::vector<Value>{relu(x[0] * x[1] + x[2])};
        },
        [xs](const Tensors& in, const Attrs&) {
          Vals y = eval(xs, in, [](const Vals& a) { return std::max(0.0, a[0] * a[1] + a[2]); });
          return Tensors{tensor_of(DType::f32, xs, y)};
        },
        "per-channel affine, runs repeated over pixels"));
  }
  for (DType dt : kFloats) {
    // relu(sigmoid(x * a + s) * x - 0.25): a broadcast row, a scalar input, a constant.
    Tensors in = {random_tensor(dt, {4, 5}, 1), random_tensor(dt, {5}, 2),
                  random_tensor(dt, {}, 3)};
    t.add(region_check(
        dt, in,
        [](Graph&, const std::vector<Value>& x) {
          return std::vector<Value>{relu(sigmoid(x[0] * x[1] + x[2]) * x[0] - k(x[0], 0.25))};
        },
        [dt](const Tensors& in, const Attrs&) {
          Vals y = eval({4, 5}, in, [](const Vals& a) {
            return std::max(0.0, sigmoid(a[0] * a[1] + a[2]) * a[0] - 0.25);
          });
          return Tensors{tensor_of(dt, {4, 5}, y)};
        },
        "chain, broadcast row, scalar, constant"));

    // Outputs of the region shape and trailing reductions of it, sharing one body.
    in = {random_tensor(dt, {3, 4, 6}, 4, -1, 1), random_tensor(dt, {6}, 5, -1, 1)};
    t.add(region_check(
        dt, in,
        [](Graph&, const std::vector<Value>& x) {
          Value e = exp(x[0]) * x[1];
          Value m = x[0] * x[1];
          return std::vector<Value>{
              e, sum(e, {-1}), op("reduce_max", {m}, {{"axes", IntList{2}}, {"keepdims", true}}),
              op("reduce_min", {m}, {{"axes", IntList{-1}}}), mean(m + 1.0, {2})};
        },
        [dt](const Tensors& in, const Attrs&) {
          Vals e = eval({3, 4, 6}, in, [](const Vals& a) { return std::exp(a[0]) * a[1]; });
          Vals m = eval({3, 4, 6}, in, [](const Vals& a) { return a[0] * a[1]; });
          Vals m1 = m;
          for (double& v : m1) v += 1;
          return Tensors{tensor_of(dt, {3, 4, 6}, e),
                         tensor_of(dt, {3, 4}, fold_rows(e, 12, 6, Fold::sum)),
                         tensor_of(dt, {3, 4, 1}, fold_rows(m, 12, 6, Fold::max)),
                         tensor_of(dt, {3, 4}, fold_rows(m, 12, 6, Fold::min)),
                         tensor_of(dt, {3, 4}, fold_rows(m1, 12, 6, Fold::mean))};
        },
        "outputs and trailing reductions"));

    // Reductions over every axis (axes = []), mean and prod.
    in = {random_tensor(dt, {2, 3, 4}, 6, 0.5, 1.5)};
    t.add(region_check(
        dt, in,
        [](Graph&, const std::vector<Value>& x) {
          Value s = x[0] * x[0];
          return std::vector<Value>{mean(s), op("prod", {x[0] * 0.5 + 0.5})};
        },
        [dt](const Tensors& in, const Attrs&) {
          Vals s = eval({2, 3, 4}, in, [](const Vals& a) { return a[0] * a[0]; });
          Vals p = eval({2, 3, 4}, in, [](const Vals& a) { return a[0] * 0.5 + 0.5; });
          return Tensors{tensor_of(dt, {}, fold_rows(s, 1, 24, Fold::mean)),
                         tensor_of(dt, {}, fold_rows(p, 1, 24, Fold::prod))};
        },
        "mean and prod over all axes"));

    // Cheap ops the kernel runs as pairs in one loop, the inner result at either operand.
    in = {random_tensor(dt, {4, 5}, 20), random_tensor(dt, {5}, 21)};
    t.add(region_check(
        dt, in,
        [](Graph& g, const std::vector<Value>& x) {
          Value u = 1.5 - x[0] * x[1];
          Value v = g.apply1("abs", {x[0]}) + 1.0;
          Value z = g.apply1("min", {x[1], -x[0]});
          return std::vector<Value>{u / v, z, g.apply1("square", {x[0] - x[1]}) * 0.5};
        },
        [dt](const Tensors& in, const Attrs&) {
          Vals w = eval({4, 5}, in,
                        [](const Vals& a) { return (1.5 - a[0] * a[1]) / (std::fabs(a[0]) + 1); });
          Vals z = eval({4, 5}, in, [](const Vals& a) { return std::min(a[1], -a[0]); });
          Vals q =
              eval({4, 5}, in, [](const Vals& a) { return (a[0] - a[1]) * (a[0] - a[1]) * 0.5; });
          return Tensors{tensor_of(dt, {4, 5}, w), tensor_of(dt, {4, 5}, z),
                         tensor_of(dt, {4, 5}, q)};
        },
        "op pairs"));

    // A compare and select: where(x > 0, x, 0.1 x), rank 0.
    in = {random_tensor(dt, {}, 7)};
    t.add(region_check(
        dt, in,
        [](Graph&, const std::vector<Value>& x) {
          Value pos = op("gt", {x[0], k(x[0], 0)});
          return std::vector<Value>{op("select", {pos, x[0], x[0] * 0.1}) + 1.0};
        },
        [dt](const Tensors& in, const Attrs&) {
          double v = values(in[0])[0];
          return Tensors{tensor_of(dt, {}, {(v > 0 ? v : v * 0.1) + 1})};
        },
        "compare, select, rank 0"));
  }
}

// Broadcasts of inputs inside the body: broadcast_to, expand_dims, broadcast_like.
void add_views(CheckTable& t) {
  for (DType dt : {DType::f32, DType::f16}) {
    Tensors in = {random_tensor(dt, {3}, 8), random_tensor(dt, {2}, 9),
                  random_tensor(dt, {2, 3}, 10)};
    t.add(region_check(
        dt, in,
        [](Graph& g, const std::vector<Value>& x) {
          Value b = g.apply1("broadcast_to", {x[0]}, {{"shape", IntList{2, 3}}});
          Value e = g.apply1("expand_dims", {x[1]}, {{"axes", IntList{1}}});
          Value l = g.apply1("broadcast_like", {x[0], x[2]});
          return std::vector<Value>{b * x[2] + e, l - e};
        },
        [dt](const Tensors& in, const Attrs&) {
          auto a = values(in[0]), b = values(in[1]), c = values(in[2]);
          Vals y0, y1;
          for (int r = 0; r < 2; ++r)
            for (int j = 0; j < 3; ++j) {
              y0.push_back(a[size_t(j)] * c[size_t(r * 3 + j)] + b[size_t(r)]);
              y1.push_back(a[size_t(j)] - b[size_t(r)]);
            }
          return Tensors{tensor_of(dt, {2, 3}, y0), tensor_of(dt, {2, 3}, y1)};
        },
        "broadcast_to, expand_dims, broadcast_like of inputs"));
  }
}

// A cast to f16 inside an f32 region rounds there, as the unfused cast does.
void add_casts(CheckTable& t) {
  Tensors in = {random_tensor(DType::f32, {7}, 11)};
  t.add(region_check(
      DType::f32, in,
      [](Graph&, const std::vector<Value>& x) {
        Value h = cast(x[0] * 3.0 + 0.001, DType::f16);
        return std::vector<Value>{cast(h, DType::f32) - x[0], cast(x[0] * 100.0, DType::i32)};
      },
      [](const Tensors& in, const Attrs&) {
        Vals y, z;
        for (double v : values(in[0])) {
          double x = double(float(v));
          y.push_back(round_to(DType::f16, double(float(float(x * 3) + 0.001f))) - x);
          z.push_back(std::trunc(double(float(x * 100))));
        }
        return Tensors{tensor_of(DType::f32, {7}, y), tensor_of(DType::i32, {7}, z)};
      },
      "cast to f16 rounds; float to int truncates"));
}

// Sizes that take several thread chunks: rows split by whole rows, and one long row
// folded in pieces.
void add_large(CheckTable& t) {
  for (Sizes shape : {Sizes{3, 50000}, Sizes{100000}}) {
    Tensors in = {random_tensor(DType::f32, shape, 12, -1, 1)};
    int64_t cols = shape.back(), rows = numel(shape) / cols;
    t.add(region_check(
        DType::f32, in,
        [](Graph&, const std::vector<Value>& x) {
          Value y = x[0] * x[0] - 0.5;
          return std::vector<Value>{y, sum(y, {-1}),
                                    op("reduce_max", {y}, {{"axes", IntList{-1}}})};
        },
        [shape, rows, cols](const Tensors& in, const Attrs&) {
          Vals y = eval(shape, in, [](const Vals& a) { return double(float(a[0] * a[0]) - 0.5f); });
          Sizes red(shape.begin(), shape.end() - 1);
          return Tensors{tensor_of(DType::f32, shape, y),
                         tensor_of(DType::f32, red, fold_rows(y, rows, cols, Fold::sum)),
                         tensor_of(DType::f32, red, fold_rows(y, rows, cols, Fold::max))};
        },
        str_cat("large ", ints_str(shape))));
    t.checks.back().rtol = 1e-5;
    t.checks.back().atol = 1e-3;  // sums of many f32 values
  }
}

// Chains of exact arithmetic over one tensor: scalar inputs and constants, a second full
// input, a reversed sub, division by a leaf, neg / abs / square, and special values
// through relu (NaN passes: oneDNN's relu post-op, tried for these chains, maps it to 0).
void add_exact_chains(CheckTable& t) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensors in = {random_tensor(dt, {100000}, 20), random_tensor(dt, {}, 21),
                  random_tensor(dt, {}, 22), random_tensor(dt, {1}, 23)};
    t.add(region_check(
        dt, in,
        [](Graph&, const std::vector<Value>& x) {
          return std::vector<Value>{relu((x[0] * x[1] + x[2]) * x[0] - x[3]) * x[1]};
        },
        [dt](const Tensors& in, const Attrs&) {
          Vals y = eval({100000}, in, [](const Vals& a) {
            return std::max(0.0, (a[0] * a[1] + a[2]) * a[0] - a[3]) * a[1];
          });
          return Tensors{tensor_of(dt, {100000}, y)};
        },
        "exact chain, scalars"));
    in = {random_tensor(dt, {3, 7}, 24), random_tensor(dt, {}, 25, 0.5, 2),
          random_tensor(dt, {3, 7}, 26)};
    t.add(region_check(
        dt, in,
        [](Graph& g, const std::vector<Value>& x) {
          Value r = g.apply1("neg", {k(x[0], 0.5) - x[0] / x[1]}) + x[2];
          return std::vector<Value>{g.apply1("square", {g.apply1("abs", {r})}) - k(x[0], 1)};
        },
        [dt](const Tensors& in, const Attrs&) {
          Vals y = eval({3, 7}, in, [](const Vals& a) {
            double r = -(0.5 - a[0] / a[1]) + a[2];
            return r * r - 1;
          });
          return Tensors{tensor_of(dt, {3, 7}, y)};
        },
        "exact chain, reversed sub, division, a second input"));
    const double inf = std::numeric_limits<double>::infinity();
    in = {tensor_of(dt, {8}, {NAN, -0.0, 0.0, inf, -inf, -1.5, 2.5, 1e-40}),
          tensor_of(dt, {}, {1.0})};
    t.add(region_check(
        dt, in,
        [](Graph&, const std::vector<Value>& x) { return std::vector<Value>{relu(x[0] * x[1])}; },
        [dt](const Tensors& in, const Attrs&) {
          Vals y = values(in[0]);
          for (double& v : y) v = v < 0 ? 0.0 : v;  // NaN and -0 pass, as relu's
          return Tensors{tensor_of(dt, {8}, y)};
        },
        "exact chain, special values through relu"));
  }
}

// Zero-size regions: empty outputs, and sums over an empty trailing axis (zeros).
void add_empty(CheckTable& t) {
  for (Sizes shape : {Sizes{0, 4}, Sizes{3, 0}}) {
    Tensors in = {random_tensor(DType::f32, shape, 13)};
    t.add(region_check(
        DType::f32, in,
        [](Graph&, const std::vector<Value>& x) {
          Value y = x[0] + 1.0;
          return std::vector<Value>{y, sum(y * 2.0, {-1})};
        },
        [shape](const Tensors&, const Attrs&) {
          return Tensors{tensor_of(DType::f32, shape, {}), Tensor::zeros(DType::f32, {shape[0]})};
        },
        str_cat("empty ", ints_str(shape))));
  }
}

// Integers: max(x * a + b, c) wraps per op; sum (wrapping) and max over the last axis.
void add_ints(CheckTable& t) {
  for (DType dt : kInts) {
    Tensors in = {random_tensor(dt, {3, 4}, 14, -100, 100), random_tensor(dt, {4}, 15, -100, 100),
                  random_tensor(dt, {}, 16, -100, 100)};
    t.add(region_check(
        dt, in,
        [](Graph& g, const std::vector<Value>& x) {
          Value y = g.apply1("max", {x[0] * x[1] + x[2], k(x[0], 3)});
          return std::vector<Value>{y, sum(y, {-1}), op("reduce_max", {y}, {{"axes", IntList{1}}})};
        },
        [dt](const Tensors& in, const Attrs&) {
          auto wrap = [dt](double v) { return double(wrap_int(dt, uint64_t(int64_t(v)))); };
          Vals y = eval({3, 4}, in, [&](const Vals& a) {
            return std::max(wrap(wrap(a[0] * a[1]) + a[2]), 3.0);
          });
          Vals s = fold_rows(y, 3, 4, Fold::sum);
          for (double& v : s) v = wrap(v);
          return Tensors{tensor_of(dt, {3, 4}, y), tensor_of(dt, {3}, s),
                         tensor_of(dt, {3}, fold_rows(y, 3, 4, Fold::max))};
        },
        "wrapping chain, sum and max"));
  }
}

// bool: logic ops and a select of bools.
void add_bools(CheckTable& t) {
  Tensors in = {random_tensor(DType::boolean, {2, 5}, 17), random_tensor(DType::boolean, {5}, 18),
                random_tensor(DType::boolean, {2, 5}, 19)};
  t.add(region_check(
      DType::boolean, in,
      [](Graph& g, const std::vector<Value>& x) {
        Value a = g.apply1("logical_and", {x[0], x[1]});
        Value b = g.apply1("logical_xor", {a, g.apply1("logical_not", {x[2]})});
        return std::vector<Value>{b, g.apply1("select", {x[1], b, x[0]})};
      },
      [](const Tensors& in, const Attrs&) {
        Vals b = eval({2, 5}, in, [](const Vals& a) {
          return double((a[0] != 0 && a[1] != 0) != (a[2] == 0));
        });
        Vals p = values(in[0]), q = values(in[1]), s;
        for (size_t i = 0; i < b.size(); ++i) s.push_back(q[i % 5] != 0 ? b[i] : p[i]);
        return Tensors{tensor_of(DType::boolean, {2, 5}, b), tensor_of(DType::boolean, {2, 5}, s)};
      },
      "logic and select"));
}

}  // namespace

CheckTable checks_region() {
  CheckTable t;
  add_float_chains(t);
  add_views(t);
  add_casts(t);
  add_large(t);
  add_exact_chains(t);
  add_empty(t);
  add_ints(t);
  add_bools(t);
  return t;
}

}  // namespace rlx::test
