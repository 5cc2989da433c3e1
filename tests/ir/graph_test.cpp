// The graph builder and the op registry: bad input gives typed errors, never a crash.
#include <gtest/gtest.h>

#include "rlx/rlx.h"

namespace rlx {
namespace {

// A two-output test op registered through the public API.
const OpDef& pair_op() {
  auto& reg = OpRegistry::global();
  if (const OpDef* d = reg.find("graphtest.pair")) return *d;
  OpDef d;
  d.name = "graphtest.pair";
  d.arity(1, 2).attr("k", AttrKind::Int, 1);
  d.infer = [](const InferContext& ctx) {
    return std::vector<TensorType>{ctx.input(0), {DType::i64, {}}};
  };
  return reg.add(std::move(d));
}

TEST(Graph, BuildsArgsConstantsAndOutputs) {
  Graph g("model");
  Value x = g.input("x", TensorType::parse("f32[batch,4]"));
  Value w = g.param("w", TensorType::parse("f32[4,4]"));
  Value c = g.constant(Literal::from<float>({1, 2, 3, 4}));
  auto outs = g.apply(pair_op(), {x, w});
  ASSERT_EQ(outs.size(), 2u);
  g.output(outs[0], "y");
  g.output(outs[1]);
  g.output(c);
  EXPECT_EQ(g.name(), "model");
  EXPECT_EQ(g.args().size(), 2u);
  EXPECT_EQ(g.inputs(), std::vector<Value>{x});
  EXPECT_EQ(g.params(), std::vector<Value>{w});
  EXPECT_EQ(g.find_arg("w")->kind, ArgKind::param);
  EXPECT_EQ(g.outputs()[1].name, "out1");
  EXPECT_EQ(c.type().str(), "f32[4]");
  EXPECT_EQ(g.producer(x), nullptr);
  EXPECT_EQ(g.producer(outs[1])->op_name(), "graphtest.pair");
  EXPECT_EQ(g.info(outs[1]).index, 1);
  EXPECT_EQ(g.nodes().back().attrs.get_int("k"), 1);  // default filled in
  EXPECT_EQ(g.num_values(), 5u);
}

TEST(Graph, RejectsBadBuilderCalls) {
  Graph g;
  Graph other("other");
  Value x = g.input("x", TensorType::parse("f32[2]"));
  Value y = other.input("y", TensorType::parse("f32[2]"));
  EXPECT_THROW(g.input("x", TensorType::parse("f32[2]")), ValueError);   // duplicate
  EXPECT_THROW(g.param("x", TensorType::parse("f32[2]")), ValueError);   // duplicate
  EXPECT_THROW(g.input("1x", TensorType::parse("f32[2]")), ValueError);  // bad name
  EXPECT_THROW(g.apply("no_such_op", {x}), ValueError);
  EXPECT_THROW(g.apply(pair_op(), {y}), ValueError);        // another graph's value
  EXPECT_THROW(g.apply(pair_op(), {Value{}}), ValueError);  // empty handle
  EXPECT_THROW(g.apply(pair_op(), {}), ValueError);         // arity
  EXPECT_THROW(g.apply(pair_op(), {x, x, x}), ValueError);  // arity
  EXPECT_THROW(g.apply(pair_op(), {x}, {{"k", 1.5}}), TypeError);
  EXPECT_THROW(g.apply(pair_op(), {x}, {{"j", 1}}), ValueError);
  EXPECT_THROW(g.apply(pair_op(), {x}, {}, {std::make_shared<Graph>("sub")}), ValueError);
  EXPECT_THROW(g.apply1("graphtest.pair", {x}), ValueError);
  EXPECT_THROW(g.output(y), ValueError);
  g.output(x, "a");
  EXPECT_THROW(g.output(x, "a"), ValueError);
  EXPECT_THROW(g.output(x, "not a name"), ValueError);
  EXPECT_THROW(Graph("bad name"), ValueError);
  EXPECT_THROW(Value{}.type(), ValueError);
  EXPECT_THROW(g.value(99), ValueError);
  // The message names the op and what was expected.
  try {
    g.apply(pair_op(), {});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "[graphtest.pair] expected 1 to 2 inputs, got 0");
  }
  EXPECT_EQ(g.nodes().size(), 0u);  // failed calls add nothing
}

TEST(Graph, CloneIsIndependent) {
  Graph g;
  Value x = g.input("x", TensorType::parse("f32[3]"));
  auto outs = g.apply(pair_op(), {x});
  g.output(outs[1], "n");
  auto c = g.clone();
  ASSERT_EQ(c->nodes().size(), 1u);
  EXPECT_EQ(c->nodes()[0].inputs[0].graph, c.get());
  EXPECT_EQ(c->outputs()[0].value.graph, c.get());
  EXPECT_EQ(c->outputs()[0].value.type().str(), "i64[]");
  c->input("z", TensorType::parse("f32[1]"));
  EXPECT_EQ(g.args().size(), 1u);
}

TEST(Registry, RejectsInvalidDefinitions) {
  OpRegistry reg;  // a private registry: nothing leaks into the global one
  OpDef no_infer;
  no_infer.name = "t.a";
  EXPECT_THROW(reg.add(no_infer), ValueError);
  OpDef bad_name;
  bad_name.name = "bad name";
  bad_name.infer = [](const InferContext&) { return std::vector<TensorType>{}; };
  EXPECT_THROW(reg.add(bad_name), ValueError);
  OpDef bad_arity = bad_name;
  bad_arity.name = "t.b";
  bad_arity.arity(3, 1);
  EXPECT_THROW(reg.add(bad_arity), ValueError);
  OpDef bad_default = bad_name;
  bad_default.name = "t.c";
  bad_default.attr("x", AttrKind::Int, 1.5);
  EXPECT_THROW(reg.add(bad_default), TypeError);
  OpDef good = bad_name;
  good.name = "t.good";
  const OpDef& stored = reg.add(good);
  EXPECT_EQ(&reg.get("t.good"), &stored);
  EXPECT_THROW(reg.add(good), ValueError);
  EXPECT_THROW(reg.get("t.missing"), ValueError);
  EXPECT_EQ(reg.all().size(), 1u);
}

TEST(Registry, CoreOpsAreRegisteredThroughThePublicApi) {
  auto all = OpRegistry::global().all();
  EXPECT_FALSE(all.empty());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end(),
                             [](const OpDef* a, const OpDef* b) { return a->name < b->name; }));
  EXPECT_NE(OpRegistry::global().find("constant"), nullptr);
}

}  // namespace
}  // namespace rlx
