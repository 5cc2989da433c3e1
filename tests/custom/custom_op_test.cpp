// The extension surface, used from outside src/ through the public API only:
// a downstream op with attributes, two outputs and inputs of several dtypes.
#include "custom_op.h"

#include <gtest/gtest.h>

#include "rlx/rlx.h"

namespace {

using rlx::DType;
using rlx::TensorType;

TEST(CustomOp, RegistersOnceAndInfersTwoOutputs) {
  example::register_example_ops();
  example::register_example_ops();  // idempotent
  const rlx::OpDef& def = rlx::OpRegistry::global().get("example.masked_moments");
  EXPECT_TRUE(def.has(rlx::Trait::reduction));

  rlx::Graph g;
  auto x = g.input("x", TensorType::parse("bf16[batch,16,8]"));
  auto m = g.input("m", TensorType::parse("bool[batch,16,8]"));
  auto outs = g.apply("example.masked_moments", {x, m}, {{"axis", 1}, {"scale", 2}});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].type().str(), "bf16[batch,8]");
  EXPECT_EQ(outs[1].type().str(), "i64[batch,8]");
  // Defaults are filled in and the Int given for a Float attribute is converted.
  const rlx::Node& n = g.nodes().back();
  EXPECT_EQ(n.attrs.get_float("scale"), 2.0);
  EXPECT_EQ(n.attrs.find("scale")->kind(), rlx::AttrKind::Float);

  auto d = g.apply("example.masked_moments", {x, m});
  EXPECT_EQ(g.nodes().back().attrs.get_int("axis"), -1);
  EXPECT_EQ(d[0].type().str(), "bf16[batch,16]");
}

TEST(CustomOp, RejectsBadInputWithTypedErrors) {
  example::register_example_ops();
  rlx::Graph g;
  auto x = g.input("x", TensorType::parse("f32[4,8]"));
  auto m = g.input("m", TensorType::parse("u8[4,8]"));
  auto xi = g.input("xi", TensorType::parse("i32[4,8]"));
  auto m2 = g.input("m2", TensorType::parse("u8[4,9]"));
  EXPECT_NO_THROW(g.apply("example.masked_moments", {x, m}));
  EXPECT_THROW(g.apply("example.masked_moments", {xi, m}), rlx::TypeError);
  EXPECT_THROW(g.apply("example.masked_moments", {x, x}), rlx::TypeError);
  EXPECT_THROW(g.apply("example.masked_moments", {x, m2}), rlx::ValueError);
  EXPECT_THROW(g.apply("example.masked_moments", {x}), rlx::ValueError);
  EXPECT_THROW(g.apply("example.masked_moments", {x, m}, {{"axis", 2}}), rlx::ValueError);
  EXPECT_THROW(g.apply("example.masked_moments", {x, m}, {{"axis", "0"}}), rlx::TypeError);
  EXPECT_THROW(g.apply("example.masked_moments", {x, m}, {{"axes", 0}}), rlx::ValueError);
  try {
    g.apply("example.masked_moments", {x, m2});
    FAIL() << "expected an error";
  } catch (const rlx::ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "[example.masked_moments] expected a mask of x's shape f32[4,8], got u8[4,9]");
  }
}

// An op registered right here, in a test file outside src/, through the same API.
TEST(CustomOp, RegisterFromATestFile) {
  auto& reg = rlx::OpRegistry::global();
  if (!reg.contains("mytest.split_halves")) {
    rlx::OpDef d;
    d.name = "mytest.split_halves";
    d.arity(1)
        .attr("axis", rlx::AttrKind::Int, 0)
        .attr("tag", rlx::AttrKind::String, "a", {"a", "b"});
    d.infer = [](const rlx::InferContext& ctx) {
      int64_t axis = ctx.attrs().get_int("axis");
      if (axis < 0 || axis >= ctx.rank(0)) ctx.fail("expected a valid axis, got ", axis);
      rlx::Shape s = ctx.shape(0);
      if (!s[size_t(axis)].is_static() || s[size_t(axis)].value() % 2)
        ctx.fail("expected an even dim, got ", ctx.input(0).str());
      s[size_t(axis)] = s[size_t(axis)].value() / 2;
      return std::vector<TensorType>{{ctx.dtype(0), s}, {ctx.dtype(0), s}};
    };
    reg.add(std::move(d));
  }
  rlx::OpDef dup;
  dup.name = "mytest.split_halves";
  dup.infer = [](const rlx::InferContext&) { return std::vector<TensorType>{}; };
  EXPECT_THROW(reg.add(dup), rlx::ValueError);

  rlx::Graph g;
  auto x = g.input("x", TensorType::parse("i8[6,4]"));
  auto h = g.apply("mytest.split_halves", {x}, {{"axis", 1}, {"tag", "b"}});
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].type().str(), "i8[6,2]");
  EXPECT_THROW(g.apply("mytest.split_halves", {x}, {{"tag", "c"}}), rlx::ValueError);
  auto y = g.input("y", TensorType::parse("i8[5]"));
  EXPECT_THROW(g.apply("mytest.split_halves", {y}), rlx::ValueError);
  EXPECT_THROW(g.apply1("mytest.split_halves", {x}), rlx::ValueError);  // two outputs
}

}  // namespace
