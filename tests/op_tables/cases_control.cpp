#include "op_tables/infer_harness.h"

namespace rlx::testing {

namespace {

using Types = std::vector<std::string>;
using Graphs = std::vector<SubgraphPtr>;

std::shared_ptr<Graph> with_args(const std::string& name, const Types& args) {
  auto g = std::make_shared<Graph>(name);
  for (size_t i = 0; i < args.size(); ++i) g->input(str_cat("a", i), TensorType::parse(args[i]));
  return g;
}

// Returns its args unchanged (in the order `order`, default all).
SubgraphPtr identity(const std::string& name, const Types& args, std::vector<int> order = {}) {
  auto g = with_args(name, args);
  if (order.empty())
    for (size_t i = 0; i < args.size(); ++i) order.push_back(int(i));
  for (int i : order) g->output(g->inputs()[size_t(i)]);
  return g;
}

// Ignores its args and returns constants of the given types (zeros).
SubgraphPtr consts(const std::string& name, const Types& args, const Types& outs) {
  auto g = with_args(name, args);
  for (const auto& t : outs) {
    TensorType tt = TensorType::parse(t);
    g->output(g->constant(Literal::full(tt.dtype, static_sizes(tt.shape), 0)));
  }
  return g;
}

// Returns the first `keep` args followed by constants of the given types.
SubgraphPtr pass_and(const std::string& name, const Types& args, size_t keep, const Types& outs) {
  auto g = with_args(name, args);
  for (size_t i = 0; i < keep; ++i) g->output(g->inputs()[i]);
  for (const auto& t : outs) {
    TensorType tt = TensorType::parse(t);
    g->output(g->constant(Literal::full(tt.dtype, static_sizes(tt.shape), 1)));
  }
  return g;
}

SubgraphPtr with_param(const std::string& name, const Types& args) {
  auto g = with_args(name, args);
  for (auto v : g->inputs()) g->output(v);
  g->param("w", TensorType::parse("f32[2]"));
  return g;
}

InferCase sub(InferCase c, Graphs graphs) {
  c.subgraphs = std::move(graphs);
  return c;
}

// A while body that is itself a cond: (p, x) -> (p, cond(p, x)), nesting two deep.
SubgraphPtr body_with_cond(const std::string& x) {
  auto g = with_args("body", {"bool[]", x});
  auto p = g->inputs()[0];
  auto v = g->inputs()[1];
  auto out = g->apply("cond", {p, v}, {}, {identity("then", {x}), identity("else", {x})});
  g->output(p);
  g->output(out[0]);
  return g;
}

std::vector<InferCase> cond_cases() {
  const auto V = Expect::value_error;
  const auto T = Expect::type_error;
  Types ops = {"f32[2,3]", "i64[]"};
  Graphs same = {identity("then", ops), identity("else", ops)};
  return {
      sub(ok("cond", {"bool[]", "f32[2,3]", "i64[]"}, {}, {"f32[2,3]", "i64[]"}), same),
      sub(ok("cond", {"bool[]", "f32[batch,3]"}, {}, {"f32[batch,3]"}),
          {identity("then", {"f32[batch,3]"}), identity("else", {"f32[batch,3]"})}),
      sub(ok("cond", {"bool[]", "f32[0,1]"}, {}, {"f32[0,1]"}),
          {identity("then", {"f32[0,1]"}), identity("else", {"f32[0,1]"})}),
      // No operands: branches return constants.
      sub(ok("cond", {"bool[]"}, {}, {"f32[2]", "i32[]"}),
          {consts("then", {}, {"f32[2]", "i32[]"}), consts("b", {}, {"f32[2]", "i32[]"})}),
      // Branches may return different operands of the same type, or none at all.
      sub(ok("cond", {"bool[]", "f32[2]", "f32[2]"}, {}, {"f32[2]", "f32[2]"}),
          {identity("then", {"f32[2]", "f32[2]"}), identity("else", {"f32[2]", "f32[2]"}, {1, 0})}),
      sub(ok("cond", {"bool[]", "f32[2]"}, {}, {}),
          {consts("then", {"f32[2]"}, {}), consts("else", {"f32[2]"}, {})}),
      // Rejected.
      sub(bad("cond", {"f32[]", "f32[2,3]", "i64[]"}, {}, T, "bool"), same),
      sub(bad("cond", {"bool[1]", "f32[2,3]", "i64[]"}, {}, V, "rank 0"), same),
      sub(bad("cond", {"bool[]", "f32[2,3]"}, {}, V, "subgraph 'then' args"), same),
      sub(bad("cond", {"bool[]", "f32[2,3]", "i64[]"}, {}, V, "subgraph 'else' args"),
          {identity("then", ops), identity("else", {"f32[2,4]", "i64[]"})}),
      sub(bad("cond", {"bool[]", "f32[2,3]", "i64[]"}, {}, T, "subgraph 'else' args"),
          {identity("then", ops), identity("else", {"f64[2,3]", "i64[]"})}),
      sub(bad("cond", {"bool[]", "f32[batch,3]"}, {}, V, "subgraph 'then' args"),
          {identity("then", {"f32[n,3]"}), identity("else", {"f32[batch,3]"})}),
      sub(bad("cond", {"bool[]"}, {}, V, "equal to subgraph 'then' outputs"),
          {consts("then", {}, {"f32[2]"}), consts("else", {}, {"f32[3]"})}),
      sub(bad("cond", {"bool[]"}, {}, T, "equal to subgraph 'then' outputs"),
          {consts("then", {}, {"f32[2]"}), consts("else", {}, {"i32[2]"})}),
      sub(bad("cond", {"bool[]"}, {}, V, "equal to subgraph 'then' outputs"),
          {consts("then", {}, {"f32[2]"}), consts("else", {}, {"f32[2]", "f32[2]"})}),
      sub(bad("cond", {"bool[]", "f32[2,3]", "i64[]"}, {}, V, "expected 2 subgraphs, got 1"),
          {identity("then", ops)}),
      sub(bad("cond", {"bool[]", "f32[2,3]", "i64[]"}, {}, V, "without params"),
          {identity("then", ops), with_param("else", ops)}),
      sub(bad("cond", {}, {}, V, "expected at least 1 inputs, got 0"), {}),
      sub(bad("cond", {"bool[]", "f32[2,3]", "i64[]"}, {{"max_iter", 3}}, V, "unknown 'max_iter'"),
          same),
  };
}

std::vector<InferCase> while_cases() {
  const auto V = Expect::value_error;
  const auto T = Expect::type_error;
  Types st = {"f32[2]", "i64[]"};
  Graphs loop = {consts("cond", st, {"bool[]"}), identity("body", st)};
  return {
      sub(ok("while", {"f32[2]", "i64[]"}, {}, {"f32[2]", "i64[]"}), loop),
      sub(ok("while", {"f32[2]", "i64[]"}, {{"max_iter", 10}}, {"f32[2]", "i64[]"}), loop),
      sub(ok("while", {"f32[2]", "i64[]"}, {{"max_iter", 0}}, {"f32[2]", "i64[]"}), loop),
      sub(ok("while", {"f32[n,4]"}, {}, {"f32[n,4]"}),
          {consts("cond", {"f32[n,4]"}, {"bool[]"}), identity("body", {"f32[n,4]"})}),
      sub(ok("while", {"f32[0]"}, {}, {"f32[0]"}),
          {consts("cond", {"f32[0]"}, {"bool[]"}), identity("body", {"f32[0]"})}),
      // The body replaces the state by constants of the same types.
      sub(ok("while", {"f32[2]", "i64[]"}, {}, {"f32[2]", "i64[]"}),
          {consts("cond", st, {"bool[]"}), consts("body", st, st)}),
      // A body that is a cond: subgraphs nested two deep.
      sub(ok("while", {"bool[]", "f32[3]"}, {{"max_iter", 4}}, {"bool[]", "f32[3]"}),
          {identity("cond", {"bool[]", "f32[3]"}, {0}), body_with_cond("f32[3]")}),
      // Rejected.
      sub(bad("while", {"f32[2]", "i64[]"}, {}, T, "subgraph 'cond' output of dtype bool"),
          {consts("cond", st, {"f32[]"}), identity("body", st)}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, V, "subgraph 'cond' output of rank 0"),
          {consts("cond", st, {"bool[2]"}), identity("body", st)}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, V, "subgraph 'cond' to have 1 output"),
          {consts("cond", st, {"bool[]", "bool[]"}), identity("body", st)}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, V, "subgraph 'cond' args"),
          {consts("cond", {"f32[2]"}, {"bool[]"}), identity("body", st)}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, V, "subgraph 'body' outputs"),
          {consts("cond", st, {"bool[]"}), consts("body", st, {"f32[3]", "i64[]"})}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, T, "subgraph 'body' outputs"),
          {consts("cond", st, {"bool[]"}), consts("body", st, {"f32[2]", "i32[]"})}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, V, "subgraph 'body' outputs"),
          {consts("cond", st, {"bool[]"}), identity("body", st, {0})}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, T, "subgraph 'body' args"),
          {consts("cond", st, {"bool[]"}), identity("body", {"f32[2]", "i32[]"})}),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, V, "without params"),
          {consts("cond", st, {"bool[]"}), with_param("body", st)}),
      sub(bad("while", {}, {}, V, "expected at least 1 inputs, got 0"),
          {consts("cond", {}, {"bool[]"}), identity("body", {})}),
      sub(bad("while", {"f32[2]", "i64[]"}, {{"max_iter", -2}}, V, "max_iter >= -1"), loop),
      sub(bad("while", {"f32[2]", "i64[]"}, {{"max_iter", 1.5}}, T, "max_iter"), loop),
      sub(bad("while", {"f32[2]", "i64[]"}, {}, V, "expected 2 subgraphs, got 3"),
          {loop[0], loop[1], loop[1]}),
  };
}

std::vector<InferCase> scan_cases() {
  const auto V = Expect::value_error;
  const auto T = Expect::type_error;
  Graphs cumsum_like = {identity("body", {"f32[4]", "f32[4]"})};  // carry, y = c, x
  return {
      sub(ok("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, {"f32[4]", "f32[10,4]"}),
          cumsum_like),
      sub(ok("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}, {"reverse", true}},
             {"f32[4]", "f32[10,4]"}),
          cumsum_like),
      sub(ok("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}, {"length", 10}},
             {"f32[4]", "f32[10,4]"}),
          cumsum_like),
      // Symbolic lengths unify across xs; a static one wins.
      sub(ok("scan", {"f32[4]", "f32[T,4]", "i32[T]"}, {{"num_carry", 1}},
             {"f32[4]", "f32[T,4]", "i32[T]"}),
          {identity("body", {"f32[4]", "f32[4]", "i32[]"})}),
      sub(ok("scan", {"f32[T,4]", "i32[7]"}, {{"num_carry", 0}}, {"i32[7]", "f32[7,4]"}),
          {identity("body", {"f32[4]", "i32[]"}, {1, 0})}),
      sub(ok("scan", {"f32[T,4]"}, {{"num_carry", 0}, {"length", 5}}, {"f32[5,4]"}),
          {identity("body", {"f32[4]"})}),
      sub(ok("scan", {"f32[?,4]"}, {{"num_carry", 0}}, {"f32[?,4]"}),
          {identity("body", {"f32[4]"})}),
      // No xs: the length attribute gives L; ys come from constants.
      sub(ok("scan", {"i64[]"}, {{"num_carry", 1}, {"length", 5}}, {"i64[]", "f32[5,3]"}),
          {pass_and("body", {"i64[]"}, 1, {"f32[3]"})}),
      sub(ok("scan", {}, {{"num_carry", 0}, {"length", 0}}, {"f32[0]"}),
          {consts("body", {}, {"f32[]"})}),
      sub(ok("scan", {"f32[0,2]"}, {{"num_carry", 0}}, {"f32[0,2]"}),
          {identity("body", {"f32[2]"})}),
      sub(ok("scan", {"f32[2,3]", "f32[1]"}, {{"num_carry", 2}, {"length", 3}},
             {"f32[2,3]", "f32[1]"}),
          {identity("body", {"f32[2,3]", "f32[1]"})}),
      // Rejected.
      sub(bad("scan", {"f32[4]", "f32[]"}, {{"num_carry", 1}}, V, "xs input 1 of rank >= 1"),
          {identity("body", {"f32[4]", "f32[]"})}),
      sub(bad("scan", {"f32[3,4]", "f32[4,4]"}, {{"num_carry", 0}}, V, "leading dims of xs"),
          {identity("body", {"f32[4]", "f32[4]"})}),
      sub(bad("scan", {"f32[T,4]", "f32[S,4]"}, {{"num_carry", 0}}, V, "leading dims of xs"),
          {identity("body", {"f32[4]", "f32[4]"})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}, {"length", 9}}, V,
              "length and leading dim"),
          cumsum_like),
      sub(bad("scan", {"i64[]"}, {{"num_carry", 1}}, V, "length >= 0 when there are no xs"),
          {identity("body", {"i64[]"})}),
      sub(bad("scan", {"f32[4]"}, {{"num_carry", 1}, {"length", -3}}, V, "length >= 0 or -1"),
          {identity("body", {"f32[4]"})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 3}}, V, "num_carry in [0, 2]"),
          cumsum_like),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", -1}}, V, "num_carry"), cumsum_like),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {}, V, "'num_carry' (required)"), cumsum_like),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}, {"reverse", 1}}, T, "reverse"),
          cumsum_like),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, V, "subgraph 'body' args"),
          {identity("body", {"f32[4]", "f32[10,4]"})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, T, "subgraph 'body' args"),
          {identity("body", {"f32[4]", "f64[4]"})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, V, "carry outputs"),
          {consts("body", {"f32[4]", "f32[4]"}, {"f32[5]", "f32[4]"})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, T, "carry outputs"),
          {consts("body", {"f32[4]", "f32[4]"}, {"i32[4]", "f32[4]"})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, V, "at least 1 outputs"),
          {consts("body", {"f32[4]", "f32[4]"}, {})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, V, "without params"),
          {with_param("body", {"f32[4]", "f32[4]"})}),
      sub(bad("scan", {"f32[4]", "f32[10,4]"}, {{"num_carry", 1}}, V,
              "expected 1 subgraphs, got 0"),
          {}),
  };
}

}  // namespace

std::vector<InferCase> control_cases() {
  std::vector<InferCase> out;
  for (auto fn : {cond_cases, while_cases, scan_cases}) {
    auto v = fn();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace rlx::testing
