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

namespace {

// Runs the example op through a Session and compares with a loop over the same values.
TEST(CustomOp, RunsNativeOnCpuForEveryInputDtype) {
  example::register_example_ops();
  for (DType xt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    for (DType mt : {DType::boolean, DType::u8, DType::i32}) {
      rlx::Graph g;
      auto x = g.input("x", TensorType(xt, {rlx::Dim::sym("b"), 3, 4}));
      auto m = g.input("m", TensorType(mt, {rlx::Dim::sym("b"), 3, 4}));
      auto outs = g.apply("example.masked_moments", {x, m}, {{"axis", -2}, {"scale", 0.5}});
      g.output(outs[0], "mean");
      g.output(outs[1], "count");
      rlx::CompiledGraph cg = rlx::Session(rlx::Device::cpu()).compile(g);
      EXPECT_EQ(cg.report().count("example.masked_moments", rlx::DispatchPath::native), 1);

      std::vector<double> xv(24), mv(24);
      for (int i = 0; i < 24; ++i) {
        xv[size_t(i)] = (i % 7) - 3;
        mv[size_t(i)] = (i % 3 == 0) ? 0 : (i % 5) + 1;  // 0 = drop, anything else = keep
      }
      if (mt == DType::boolean)
        for (auto& v : mv) v = v != 0;
      auto out = cg.run({{"x", rlx::Tensor::from_doubles(xt, {2, 3, 4}, xv)},
                         {"m", rlx::Tensor::from_doubles(mt, {2, 3, 4}, mv)}});
      auto mean = out.at("mean").to_doubles();
      auto count = out.at("count").to_vector<int64_t>();
      ASSERT_EQ(out.at("mean").type().str(), TensorType(xt, {2, 4}).str());
      for (int b = 0; b < 2; ++b) {
        for (int j = 0; j < 4; ++j) {
          double sum = 0;
          int64_t kept = 0;
          for (int k = 0; k < 3; ++k) {
            size_t e = size_t((b * 3 + k) * 4 + j);
            if (mv[e] != 0) sum += xv[e], ++kept;
          }
          EXPECT_EQ(count[size_t(b * 4 + j)], kept);
          EXPECT_NEAR(mean[size_t(b * 4 + j)], 0.5 * sum / double(std::max<int64_t>(kept, 1)),
                      1e-2);
        }
      }
    }
  }
}

// The dispatch report tells native, decomposed and missing apart.
TEST(CustomOp, DispatchReportShowsEachPath) {
  example::register_example_ops();
  auto& reg = rlx::OpRegistry::global();
  if (!reg.contains("mytest.nothing")) {
    rlx::OpDef d;  // no kernel on any device, no decomposition
    d.name = "mytest.nothing";
    d.arity(1);
    d.infer = [](const rlx::InferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; };
    reg.add(std::move(d));
  }
  rlx::Session session(rlx::Device::cpu());
  rlx::Graph g;
  auto x = g.input("x", TensorType(DType::f32, {4}));
  auto y = g.input("y", TensorType(DType::f32, {4}));
  g.output(g.apply1("example.axpby", {x, y}, {{"alpha", 2.0}, {"beta", -1.0}}), "z");
  rlx::CompileOptions no_passes;
  no_passes.opt_level = 0;
  rlx::CompiledGraph cg = session.compile(g, no_passes);
  const rlx::DispatchReport& r = cg.report();
  EXPECT_EQ(r.count("example.axpby", rlx::DispatchPath::decomposed), 1);
  EXPECT_EQ(r.count("example.axpby", rlx::DispatchPath::native), 0);
  EXPECT_EQ(r.count("mul", rlx::DispatchPath::native), 2);
  EXPECT_EQ(r.count("add", rlx::DispatchPath::native), 1);
  EXPECT_NE(r.str().find("example.axpby"), std::string::npos);
  // With the passes, which run on the decomposition: its three ops are one fused region.
  rlx::CompiledGraph optimized = session.compile(g);
  const rlx::DispatchReport& fused = optimized.report();
  EXPECT_EQ(fused.count("example.axpby", rlx::DispatchPath::decomposed), 1);
  EXPECT_EQ(fused.count("fused_elementwise", rlx::DispatchPath::native), 1) << fused.str();
  EXPECT_EQ(fused.count("mul", rlx::DispatchPath::native), 0) << fused.str();
  auto z = cg.run({{"x", rlx::Tensor::from_vector<float>({1, 2, 3, 4}, {4})},
                   {"y", rlx::Tensor::from_vector<float>({1, 1, 1, 1}, {4})}});
  EXPECT_EQ(z.at("z").to_vector<float>(), (std::vector<float>{1, 3, 5, 7}));

  rlx::Graph bad;
  auto bx = bad.input("x", TensorType(DType::f32, {4}));
  auto bi = bad.input("i", TensorType(DType::i64, {4}));
  bad.output(bad.apply1("mytest.nothing", {bx}));
  bad.output(bad.apply1("mytest.nothing", {bi}));
  try {
    session.compile(bad);
    FAIL() << "expected NotSupported";
  } catch (const rlx::NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "got none for 2: (mytest.nothing, f32, cpu), (mytest.nothing, i64, cpu)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
