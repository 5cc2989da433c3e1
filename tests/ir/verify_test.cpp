// The verifier accepts every graph the builder makes and rejects each kind of damage
// that the low-level mutation API can do, with a message naming the node and the rule.
#include <gtest/gtest.h>

#include <functional>

#include "op_tables/infer_harness.h"
#include "op_tables/test_ops.h"

namespace rlx::testing {
namespace {

using Types = std::vector<TensorType>;

TensorType T(const char* s) { return TensorType::parse(s); }

TEST(Verify, AcceptsEveryOkCase) {
  int n = for_each_ok_case([](const InferCase& c, Graph& g) {
    EXPECT_NO_THROW(verify(g));
    for (const auto& sg : c.subgraphs) EXPECT_NO_THROW(verify(*sg));
  });
  EXPECT_GT(n, 0);
}

// x, y: f32[2]; %a = vadd(x, y); %b, %c = vsplit(a); %d = vadd(b, c); outputs a, d.
struct Fixture {
  std::unique_ptr<Graph> g = std::make_unique<Graph>("main");
  Value x, y, a, b, c, d;
  Fixture() {
    register_test_ops();
    x = g->input("x", T("f32[2]"));
    y = g->param("y", T("f32[2]"));
    a = g->apply1("test.add", {x, y});
    auto bc = g->apply("test.split", {a});
    b = bc[0];
    c = bc[1];
    d = g->apply1("test.add", {b, c});
    g->output(a);
    g->output(d, "d");
  }
  Node& node(size_t i) { return g->mutable_nodes()[i]; }
};

TEST(Verify, AcceptsTheFixtureAndAClone) {
  Fixture f;
  EXPECT_NO_THROW(verify(*f.g));
  EXPECT_NO_THROW(verify(*f.g->clone()));
}

// Graphs with subgraphs: cond inside a while body (two deep), and scan.
std::shared_ptr<Graph> ident(const std::string& name, const std::vector<const char*>& types) {
  auto g = std::make_shared<Graph>(name);
  for (size_t i = 0; i < types.size(); ++i) g->output(g->input(str_cat("a", i), T(types[i])));
  return g;
}

struct Nested {
  std::unique_ptr<Graph> g = std::make_unique<Graph>("main");
  std::shared_ptr<Graph> cond, body, then_, else_;
  Nested() {
    auto p = g->input("p", T("bool[]"));
    auto x = g->input("x", T("f32[3]"));
    cond = ident("cond", {"bool[]", "f32[3]"});
    cond->mutable_outputs().pop_back();  // only the predicate
    body = std::make_shared<Graph>("body");
    auto bp = body->input("p", T("bool[]"));
    auto bx = body->input("x", T("f32[3]"));
    then_ = ident("then", {"f32[3]"});
    else_ = ident("else", {"f32[3]"});
    auto r = body->apply("cond", {bp, bx}, {}, {then_, else_});
    body->output(bp);
    body->output(r[0]);
    auto out = g->apply("while", {p, x}, {}, {cond, body});
    g->output(out[1]);
  }
};

TEST(Verify, AcceptsNestedSubgraphs) {
  Nested n;
  EXPECT_NO_THROW(verify(*n.g));
}

void expect_rejected(const Graph& g, const std::vector<std::string>& fragments) {
  try {
    verify(g);
    ADD_FAILURE() << "expected verify() to fail";
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[verify] ", 0), 0u) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a ValueError, got " << e.what();
  }
}

struct Damage {
  std::string what;
  std::function<void(Fixture&)> apply;
  std::vector<std::string> fragments;
};

TEST(Verify, RejectsEachMalformedKind) {
  Graph other("other");
  Value foreign = other.input("z", T("f32[2]"));
  std::vector<Damage> cases = {
      {"input defined later",
       [](Fixture& f) { f.node(0).inputs[0] = f.d; },
       {"node 0 (test.add): expected input 0 defined before use, got value",
        "defined later by node 2"}},
      {"input from another graph",
       [&](Fixture& f) { f.node(2).inputs[1] = foreign; },
       {"node 2 (test.add): expected input 1 to be a value of graph 'main'", "another graph"}},
      {"input never defined",
       [](Fixture& f) { f.node(0).inputs[1] = f.g->add_value(T("f32[2]")); },
       {"node 0 (test.add)", "that no node or argument defines"}},
      {"empty handle",
       [](Fixture& f) { f.node(1).inputs[0] = Value{}; },
       {"node 1 (test.split): expected input 0", "an empty handle"}},
      {"input id out of range",
       [](Fixture& f) {
         f.node(1).inputs[0] = Value{f.g.get(), 99};
       },
       {"node 1 (test.split)", "value id 99, out of range"}},
      {"wrong output type",
       [](Fixture& f) { f.g->set_type(f.a, T("f32[3]")); },
       {"node 0 (test.add): expected output 0 of type f32[2], got f32[3]"}},
      {"wrong output dtype",
       [](Fixture& f) { f.g->set_type(f.c, T("i32[2]")); },
       {"node 1 (test.split): expected output 1 of type f32[2], got i32[2]"}},
      {"changed arg type breaks inference",
       [](Fixture& f) { f.g->set_type(f.y, T("f32[5]")); },
       {"node 0 (test.add): expected equal input types, got f32[2] and f32[5]"}},
      {"unknown attribute",
       [](Fixture& f) { f.node(1).attrs.set("bogus", 1); },
       {"node 1 (test.split): expected attributes among {num, mode}, got unknown 'bogus'"}},
      {"attribute missing",
       [](Fixture& f) {
         f.node(1).attrs = Attrs{{"mode", "a"}};
       },
       {"node 1 (test.split): expected attribute 'num'", "got none"}},
      {"attribute of the wrong kind",
       [](Fixture& f) { f.node(1).attrs.set("num", 2.0); },
       {"node 1 (test.split): expected attribute 'num' of kind int, got float"}},
      {"attribute not among the choices",
       [](Fixture& f) { f.node(1).attrs.set("mode", "z"); },
       {"node 1 (test.split): expected attribute 'mode' to be one of its choices, got 'z'"}},
      {"attribute on an op without any",
       [](Fixture& f) { f.node(0).attrs.set("axis", 0); },
       {"node 0 (test.add): expected attributes among {}, got unknown 'axis'"}},
      {"too many inputs",
       [](Fixture& f) { f.node(0).inputs.push_back(f.x); },
       {"node 0 (test.add): expected 2 inputs, got 3"}},
      {"too few inputs",
       [](Fixture& f) { f.node(1).inputs.clear(); },
       {"node 1 (test.split): expected 1 inputs, got 0"}},
      {"a subgraph on an op without slots",
       [](Fixture& f) { f.node(0).subgraphs.push_back(std::make_shared<Graph>("sg")); },
       {"node 0 (test.add): expected 0 subgraphs, got 1"}},
      {"missing node output",
       [](Fixture& f) { f.node(1).outputs.pop_back(); },
       {"node 1 (test.split): expected 2 outputs, got 1"}},
      {"node output out of range",
       [](Fixture& f) {
         f.node(1).outputs[1] = Value{f.g.get(), 42};
       },
       {"node 1 (test.split): expected output 1", "value id 42, out of range"}},
      {"node output from another graph",
       [&](Fixture& f) { f.node(0).outputs[0] = foreign; },
       {"node 0 (test.add): expected output 0", "another graph"}},
      {"node output with the wrong producer",
       [](Fixture& f) { f.node(0).outputs[0] = f.g->add_value(T("f32[2]"), 7, 0); },
       {"node 0 (test.add): expected output 0",
        "recorded with producer node 0 index 0, got node 7"}},
      {"node output that is an argument",
       [](Fixture& f) { f.node(0).outputs[0] = f.x; },
       {"node 0 (test.add): expected output 0", "got node -1 index 0"}},
      {"null op", [](Fixture& f) { f.node(2).op = nullptr; }, {"node 2: expected an op, got null"}},
      {"graph output out of range",
       [](Fixture& f) {
         f.g->mutable_outputs().push_back({"bad", Value{f.g.get(), 999}});
       },
       {"output 2 ('bad'): expected a value of graph 'main'", "value id 999, out of range"}},
      {"graph output empty handle",
       [](Fixture& f) {
         f.g->mutable_outputs().push_back({"bad", Value{}});
       },
       {"output 2 ('bad')", "an empty handle"}},
      {"graph output never defined",
       [](Fixture& f) { f.g->mutable_outputs()[0].value = f.g->add_value(T("f32[2]")); },
       {"output 0 ('out0'): expected a defined value"}},
      {"duplicate output names",
       [](Fixture& f) { f.g->mutable_outputs()[1].name = "out0"; },
       {"output 1: expected a unique name, got duplicate 'out0'"}},
      {"output name not an identifier",
       [](Fixture& f) { f.g->mutable_outputs()[1].name = "1st"; },
       {"output 1: expected an identifier as the name, got '1st'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Fixture f;
    c.apply(f);
    expect_rejected(*f.g, c.fragments);
  }
}

TEST(Verify, RejectsMalformedSubgraphs) {
  {
    Nested n;
    n.then_->param("w", T("f32[3]"));  // a subgraph with a param
    expect_rejected(*n.g, {"node 0 (while): subgraph 'body': node 0 (cond): subgraph 'then': "
                           "arg 1: expected no params in a subgraph, got param 'w'"});
  }
  {
    Nested n;  // damage two levels down
    n.else_->set_type(n.else_->inputs()[0], T("f32[4]"));
    expect_rejected(*n.g, {"node 0 (while): subgraph 'body': node 0 (cond): expected subgraph "
                           "'else' args (f32[3]), got (f32[4])"});
  }
  {
    Nested n;
    n.body->mutable_nodes()[0].inputs[1] = Value{n.g.get(), 1};  // an outer value inside
    expect_rejected(*n.g, {"node 0 (while): subgraph 'body': node 0 (cond): expected input 1 to "
                           "be a value of graph 'body', got a value of another graph"});
  }
  {
    Nested n;
    n.cond->mutable_outputs().push_back({"bad", Value{n.cond.get(), 9}});
    expect_rejected(*n.g, {"node 0 (while): subgraph 'cond': output 1 ('bad')", "out of range"});
  }
  {
    Nested n;
    n.g->mutable_nodes()[0].subgraphs.pop_back();
    expect_rejected(*n.g, {"node 0 (while): expected 2 subgraphs, got 1"});
  }
  {
    Nested n;
    n.g->mutable_nodes()[0].subgraphs[1] = nullptr;
    expect_rejected(*n.g, {"node 0 (while): subgraph 'body': expected a graph, got null"});
  }
  {
    Nested n;
    n.body->mutable_outputs().pop_back();  // the body no longer returns the state
    expect_rejected(*n.g, {"node 0 (while): expected subgraph 'body' outputs (bool[], f32[3]), "
                           "got (bool[])"});
  }
}

TEST(Verify, OutputValueDefinedTwice) {
  Fixture f;
  f.node(2).outputs[0] = f.a;  // a is already defined by node 0
  expect_rejected(*f.g, {"node 2 (test.add): expected output 0"});
}

}  // namespace
}  // namespace rlx::testing
