// Node resolution on a device: native -> decomposed -> host -> missing, and the report.
#include "rlx/dispatch.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "rlx/rlx.h"
#include "rlx/settings.h"

namespace rlx {
namespace {

using Types = std::vector<TensorType>;

void register_dispatch_test_ops() {
  auto& r = OpRegistry::global();
  if (r.contains("dtest.scale")) return;
  auto same = [](const InferContext& ctx) { return Types{ctx.input(0)}; };
  OpDef scale;
  scale.name = "dtest.scale";
  scale.arity(1).attr("factor", AttrKind::Float, 2.0);
  scale.infer = same;
  r.add(scale);

  OpDef axpy;  // a * x + y, by decomposition only
  axpy.name = "dtest.axpy";
  axpy.arity(3);
  axpy.infer = same;
  axpy.decompose = [](const RuleArgs& a) {
    Value ax = a.g.apply1("mul", {a.inputs[0], a.inputs[1]});
    return std::vector<Value>{a.g.apply1("add", {ax, a.inputs[2]})};
  };
  r.add(axpy);

  OpDef twice;  // decomposes into another decomposed op
  twice.name = "dtest.twice";
  twice.arity(1);
  twice.infer = same;
  twice.decompose = [](const RuleArgs& a) {
    Value x = a.inputs[0];
    return a.g.apply("dtest.axpy", {x, x, x});
  };
  r.add(twice);

  OpDef nothing;  // no kernel anywhere, no decomposition
  nothing.name = "dtest.nothing";
  nothing.arity(1);
  nothing.infer = same;
  r.add(nothing);

  OpDef picky;  // a decomposition that cannot be built (as one needing static sizes)
  picky.name = "dtest.picky";
  picky.arity(1);
  picky.infer = same;
  picky.decompose = [](const RuleArgs&) -> std::vector<Value> {
    fail<ValueError>("dtest.picky", "expected static sizes");
  };
  r.add(picky);

  OpDef self;  // a decomposition that never ends
  self.name = "dtest.self";
  self.arity(1);
  self.infer = same;
  self.decompose = [](const RuleArgs& a) { return a.g.apply("dtest.self", {a.inputs[0]}); };
  r.add(self);
}

void noop(const KernelContext&, std::span<const Tensor>, std::span<Tensor>) {}

// CPU kernels: scale for f32 only; add and mul for any dtype.
KernelRegistry& cpu_kernels() {
  static KernelRegistry reg;
  static bool once = [] {
    reg.add("dtest.scale", DeviceKind::cpu, noop,
            [](const KernelQuery& q) { return q.inputs[0].dtype == DType::f32; });
    reg.add("add", DeviceKind::cpu, noop);
    reg.add("mul", DeviceKind::cpu, noop);
    return true;
  }();
  (void)once;
  return reg;
}

struct Fixture {
  Graph g;
  Value x;
  Fixture(const char* type = "f32[batch,4]") {
    register_dispatch_test_ops();
    x = g.input("x", TensorType::parse(type));
  }
};

TEST(Dispatch, NativeKernel) {
  Fixture f;
  f.g.output(f.g.apply1("dtest.scale", {f.x}), "y");
  LoweredGraph l = lower_for_device(f.g, Device::cpu(), cpu_kernels());
  EXPECT_EQ(l.report.count("dtest.scale", DispatchPath::native), 1);
  ASSERT_EQ(l.kernels.size(), 1u);
  EXPECT_NE(l.kernels[0], nullptr);
  EXPECT_EQ(l.paths[0], DispatchPath::native);
  EXPECT_EQ(l.graph->outputs()[0].name, "y");
  verify(*l.graph);
}

TEST(Dispatch, DecomposedIntoNativeOps) {
  Fixture f;
  Value y = f.g.apply1("dtest.twice", {f.x});
  f.g.output(f.g.apply1("dtest.axpy", {y, f.x, f.x}));
  LoweredGraph l = lower_for_device(f.g, Device::cpu(), cpu_kernels());
  EXPECT_EQ(l.report.count("dtest.twice", DispatchPath::decomposed), 1);
  EXPECT_EQ(l.report.count("dtest.axpy", DispatchPath::decomposed), 2);
  EXPECT_EQ(l.report.count("mul", DispatchPath::native), 2);
  EXPECT_EQ(l.report.count("add", DispatchPath::native), 2);
  ASSERT_EQ(l.graph->nodes().size(), 4u);
  for (const Node& n : l.graph->nodes()) EXPECT_TRUE(n.op_name() == "add" || n.op_name() == "mul");
  EXPECT_EQ(l.graph->outputs()[0].value.type().str(), "f32[batch,4]");
  verify(*l.graph);
  std::string table = l.report.str();
  EXPECT_NE(table.find("dtest.axpy"), std::string::npos) << table;
}

// Before the passes: decompositions inlined, everything else kept as it is (a native node,
// one without any path: lowering reports those); lowering then counts both stages.
TEST(Dispatch, DecompositionsInlineBeforeThePasses) {
  Fixture f;
  Value y = f.g.apply1("dtest.scale", {f.g.apply1("dtest.twice", {f.x})});
  f.g.output(f.g.apply1("dtest.nothing", {y}), "z");
  DispatchReport early;
  std::unique_ptr<Graph> g = inline_decompositions(f.g, Device::cpu(), cpu_kernels(), early);
  verify(*g);
  std::vector<std::string> ops;
  for (const Node& n : g->nodes()) ops.push_back(n.op_name());
  EXPECT_EQ(ops, (std::vector<std::string>{"mul", "add", "dtest.scale", "dtest.nothing"}));
  EXPECT_EQ(g->outputs()[0].name, "z");
  EXPECT_EQ(early.count("dtest.twice", DispatchPath::decomposed), 1);
  EXPECT_EQ(early.count("dtest.axpy", DispatchPath::decomposed), 1);
  EXPECT_EQ(early.total(DispatchPath::native), 0);

  Graph& h = *g;  // without the op that has no path, lowering resolves the rest
  Graph ok("ok");
  Value x = ok.input("x", f.x.type());
  ok.output(ok.apply1("dtest.scale", {ok.apply1("dtest.axpy", {x, x, x})}));
  DispatchReport early_ok;
  std::unique_ptr<Graph> inl = inline_decompositions(ok, Device::cpu(), cpu_kernels(), early_ok);
  LoweredGraph l = lower_for_device(*inl, Device::cpu(), cpu_kernels(), &early_ok);
  EXPECT_EQ(l.report.count("dtest.axpy", DispatchPath::decomposed), 1);
  EXPECT_EQ(l.report.count("mul", DispatchPath::native), 1);
  EXPECT_EQ(l.report.count("dtest.scale", DispatchPath::native), 1);
  EXPECT_THROW(lower_for_device(h, Device::cpu(), cpu_kernels(), &early), NotSupported);
}

// A decomposition that cannot be built before the passes leaves its node for lowering,
// whose error stands.
TEST(Dispatch, DecompositionsThatFailEarlyWaitForLowering) {
  Fixture f;
  f.g.output(f.g.apply1("dtest.picky", {f.x}));
  DispatchReport early;
  std::unique_ptr<Graph> g = inline_decompositions(f.g, Device::cpu(), cpu_kernels(), early);
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0].op_name(), "dtest.picky");
  EXPECT_EQ(early.total(DispatchPath::decomposed), 0);
  EXPECT_THROW(lower_for_device(*g, Device::cpu(), cpu_kernels(), &early), ValueError);
}

TEST(Dispatch, HostPathOnADeviceWithoutKernels) {
  Fixture f;
  f.g.output(f.g.apply1("dtest.scale", {f.g.apply1("dtest.axpy", {f.x, f.x, f.x})}));
  LoweredGraph l = lower_for_device(f.g, Device::cuda(0), cpu_kernels());
  EXPECT_EQ(l.report.count("dtest.axpy", DispatchPath::decomposed), 1);
  EXPECT_EQ(l.report.count("mul", DispatchPath::host), 1);
  EXPECT_EQ(l.report.count("add", DispatchPath::host), 1);
  EXPECT_EQ(l.report.count("dtest.scale", DispatchPath::host), 1);
  EXPECT_EQ(l.report.total(DispatchPath::native), 0);
  for (const Kernel* k : l.kernels) EXPECT_EQ(k->device, DeviceKind::cpu);
}

TEST(Dispatch, SupportsDecidesPerNode) {
  Fixture f("f64[3]");
  f.g.output(f.g.apply1("dtest.scale", {f.x}));
  try {
    lower_for_device(f.g, Device::cpu(), cpu_kernels());
    FAIL() << "expected NotSupported";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("(dtest.scale, f64, cpu)"), std::string::npos) << e.what();
  }
}

TEST(Dispatch, MissingListsEveryUnresolvedOpAtOnce) {
  Fixture f;
  Value a = f.g.apply1("dtest.nothing", {f.x});
  Value b = f.g.apply1("dtest.self", {a});
  Value i = f.g.input("i", TensorType::parse("i32[2]"));
  f.g.output(f.g.apply1("dtest.nothing", {i}));
  f.g.output(b);
  try {
    lower_for_device(f.g, Device::cuda(), cpu_kernels());
    FAIL() << "expected NotSupported";
  } catch (const NotSupported& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("[compile] ", 0), 0u) << m;
    for (const char* want : {"(dtest.nothing, f32, cuda:0)", "(dtest.nothing, i32, cuda:0)",
                             "(dtest.self, f32, cuda:0)", "got none for 3"})
      EXPECT_NE(m.find(want), std::string::npos) << want << " in " << m;
  }
}

TEST(Dispatch, ReportPrintedWhenAsked) {
  Fixture f;
  f.g.output(f.g.apply1("dtest.scale", {f.x}));
  settings().dispatch_report = true;
  ::testing::internal::CaptureStderr();
  lower_for_device(f.g, Device::cpu(), cpu_kernels());
  std::string err = ::testing::internal::GetCapturedStderr();
  settings().dispatch_report = false;
  EXPECT_NE(err.find("dispatch report (cpu)"), std::string::npos) << err;
  EXPECT_NE(err.find("dtest.scale"), std::string::npos) << err;
}

TEST(KernelRegistry, FirstSupportingKernelWins) {
  register_dispatch_test_ops();
  KernelRegistry reg;
  int which = 0;
  reg.add(
      "dtest.scale", DeviceKind::cpu, [&](auto&, auto, auto) { which = 1; },
      [](const KernelQuery& q) { return q.attrs.get_float("factor") == 1.0; });
  reg.add("dtest.scale", DeviceKind::cpu, [&](auto&, auto, auto) { which = 2; });
  const OpDef& op = OpRegistry::global().get("dtest.scale");
  Types in{TensorType::parse("f32[2]")};
  Attrs one{{"factor", 1.0}}, two{{"factor", 2.0}};
  const Kernel* k1 = reg.find({op, one, in, in}, DeviceKind::cpu);
  const Kernel* k2 = reg.find({op, two, in, in}, DeviceKind::cpu);
  ASSERT_TRUE(k1 && k2);
  KernelContext ctx{op, one, Device::cpu()};
  k1->fn(ctx, {}, {});
  EXPECT_EQ(which, 1);
  k2->fn(ctx, {}, {});
  EXPECT_EQ(which, 2);
  EXPECT_EQ(reg.find({op, one, in, in}, DeviceKind::cuda), nullptr);
  EXPECT_TRUE(reg.has("dtest.scale", DeviceKind::cpu));
  EXPECT_FALSE(reg.has("dtest.scale", DeviceKind::cuda));
  EXPECT_THROW(reg.add("dtest.scale", DeviceKind::cpu, nullptr), ValueError);
}

}  // namespace
}  // namespace rlx
