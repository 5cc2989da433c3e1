// Session / CompiledGraph: named runs, symbol binding and the plan cache, params, the
// errors a caller can provoke, data-dependent shapes, and runs from several threads.
// Kernels come from a private registry so the runtime is tested on its own.
#include "rlx/session.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <thread>

#include "rlx/cuda.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {

using Types = std::vector<TensorType>;

void add_f32(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  const float* a = in[0].data_as<float>();
  const float* b = in[1].data_as<float>();
  float* c = out[0].data_as<float>();
  // Same shapes, or b a scalar: enough for these tests.
  bool scalar = in[1].numel() == 1;
  for (int64_t i = 0; i < out[0].numel(); ++i) c[i] = a[i] + b[scalar ? 0 : i];
}

// stest.positive(x: f32[n]) -> f32[?]: the positive elements, a data-dependent shape.
void register_session_test_ops() {
  auto& r = OpRegistry::global();
  if (r.contains("stest.positive")) return;
  OpDef d;
  d.name = "stest.positive";
  d.arity(1);
  d.infer = [](const InferContext&) { return Types{TensorType(DType::f32, {Dim::unknown()})}; };
  r.add(d);
}

void positive_f32(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  EXPECT_FALSE(out[0].defined());  // its shape is known only here
  std::vector<float> keep;
  for (float v : in[0].to_vector<float>())
    if (v > 0) keep.push_back(v);
  out[0] = Tensor::from_vector(keep, {int64_t(keep.size())});
}

// Records whether it was handed a contiguous input.
std::atomic<int> contiguous_seen{0};
void copy_f32(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  if (in[0].is_contiguous()) ++contiguous_seen;
  std::memcpy(out[0].data(), in[0].data(), out[0].nbytes());
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_session_test_ops();
    kernels.add("add", DeviceKind::cpu, add_f32);
    kernels.add("stest.positive", DeviceKind::cpu, positive_f32);
    kernels.add("neg", DeviceKind::cpu, copy_f32);  // a stand-in: only layout matters
    options.kernels = &kernels;
  }
  CompiledGraph compile(const Graph& g) { return Session().compile(g, options); }

  KernelRegistry kernels;
  CompileOptions options;
};

TEST_F(SessionTest, NamedAndPositionalRuns) {
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {3}));
  Value w = g.param("w", TensorType(DType::f32, {3}));
  g.output(g.apply1("add", {x, w}), "y");
  CompiledGraph cg = compile(g);
  EXPECT_EQ(cg.input_names(), std::vector<std::string>{"x"});
  EXPECT_EQ(cg.param_names(), std::vector<std::string>{"w"});
  EXPECT_EQ(cg.output_names(), std::vector<std::string>{"y"});
  cg.set_param("w", Tensor::from_vector<float>({10, 20, 30}, {3}));
  auto out = cg.run({{"x", Tensor::from_vector<float>({1, 2, 3}, {3})}});
  EXPECT_EQ(out.at("y").to_vector<float>(), (std::vector<float>{11, 22, 33}));
  Tensor x2 = Tensor::from_vector<float>({0, 0, 1}, {3});
  auto pos = cg.run(std::span<const Tensor>(&x2, 1));
  EXPECT_EQ(pos.at(0).to_vector<float>(), (std::vector<float>{10, 20, 31}));
  EXPECT_EQ(cg.report().count("add", DispatchPath::native), 1);
}

TEST_F(SessionTest, SymbolsAreBoundPerRunAndPlansCached) {
  Graph g;
  Value a = g.input("a", TensorType(DType::f32, {Dim::sym("n"), 2}));
  Value b = g.input("b", TensorType(DType::f32, {Dim::sym("n"), 2}));
  g.output(g.apply1("add", {a, b}), "c");
  CompiledGraph cg = compile(g);
  for (int64_t n : {1, 4, 1, 0, 4}) {
    Tensor x = Tensor::full(DType::f32, {n, 2}, 1.5);
    auto out = cg.run({{"a", x}, {"b", x}});
    EXPECT_EQ(out.at("c").shape(), (std::vector<int64_t>{n, 2}));
    for (float v : out.at("c").to_vector<float>()) EXPECT_EQ(v, 3.0f);
  }
  EXPECT_EQ(cg.cached_plans(), 3u);  // n = 1, 4, 0
  try {
    cg.run({{"a", Tensor::zeros(DType::f32, {2, 2})}, {"b", Tensor::zeros(DType::f32, {3, 2})}});
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("dim 'n' of input 'b' to be 2"), std::string::npos)
        << e.what();
  }
}

template <class E>
void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << fragment;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
  }
}

TEST_F(SessionTest, BadRunsGiveTypedErrorsNamingTheArgument) {
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {Dim::sym("b"), 3}));
  Value w = g.param("w", TensorType(DType::f32, {1}));
  g.output(g.apply1("add", {x, w}), "y");
  CompiledGraph cg = compile(g);
  Tensor good = Tensor::zeros(DType::f32, {2, 3});
  expect_error<ValueError>(
      [&] {
        cg.run({{"x", good}});
      },
      "expected param 'w' to be set with set_param, got none");
  expect_error<ValueError>([&] { cg.set_param("v", Tensor::zeros(DType::f32, {1})); },
                           "expected one of the params [w], got 'v'");
  expect_error<TypeError>([&] { cg.set_param("w", Tensor::zeros(DType::f64, {1})); },
                          "expected param 'w' of type f32[1], got f64[1]");
  cg.set_param("w", Tensor::zeros(DType::f32, {1}));
  expect_error<TypeError>(
      [&] {
        cg.run({{"x", Tensor::zeros(DType::i32, {2, 3})}});
      },
      "expected input 'x' of type f32[b,3], got i32[2,3]");
  expect_error<ValueError>(
      [&] {
        cg.run({{"x", Tensor::zeros(DType::f32, {2, 4})}});
      },
      "expected input 'x' of type f32[b,3], got f32[2,4]");
  expect_error<ValueError>(
      [&] {
        cg.run({{"x", Tensor::zeros(DType::f32, {6})}});
      },
      "expected input 'x' of type f32[b,3], got f32[6]");
  expect_error<ValueError>([&] { cg.run(TensorMap{}); }, "expected input 'x', got none");
  expect_error<ValueError>(
      [&] {
        cg.run({{"x", good}, {"z", good}});
      },
      "expected inputs [x], got unknown input 'z'");
  expect_error<ValueError>(
      [&] {
        cg.run(std::vector<Tensor>{good, good});
      },
      "expected 1 inputs [x], got 2");
  expect_error<ValueError>(
      [&] {
        cg.run({{"x", Tensor()}});
      },
      "expected a tensor for input 'x', got none");
  expect_error<ValueError>([] { CompiledGraph().run(TensorMap{}); }, "expected a compiled graph");
  // A param whose static dims do not fit is caught at run (set_param checks the rank).
  cg.set_param("w", Tensor::zeros(DType::f32, {2}));
  expect_error<ValueError>(
      [&] {
        cg.run({{"x", good}});
      },
      "expected param 'w' of type f32[1], got f32[2]");
}

TEST_F(SessionTest, MissingKernelsAreListedAtCompile) {
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {3}));
  g.output(g.apply1("exp", {g.apply1("sin", {x})}));
  expect_error<NotSupported>([&] { compile(g); },
                             "got none for 2: (exp, f32, cpu), (sin, f32, cpu)");
}

TEST_F(SessionTest, DataDependentShapesFlowDownstream) {
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {Dim::sym("n")}));
  Value p = g.apply1("stest.positive", {x});
  g.output(g.apply1("add", {p, p}), "twice");
  CompiledGraph cg = compile(g);
  auto out = cg.run({{"x", Tensor::from_vector<float>({-1, 2, 0, 3}, {4})}});
  EXPECT_EQ(out.at("twice").to_vector<float>(), (std::vector<float>{4, 6}));
  out = cg.run({{"x", Tensor::from_vector<float>({-1}, {1})}});
  EXPECT_EQ(out.at("twice").numel(), 0);
}

TEST_F(SessionTest, StridedInputsReachPlainKernelsContiguous) {
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {3, 2}));
  g.output(g.apply1("neg", {x}));
  CompiledGraph cg = compile(g);
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).permute({1, 0});
  ASSERT_FALSE(t.is_contiguous());
  contiguous_seen = 0;
  auto out = cg.run(std::vector<Tensor>{t});
  EXPECT_EQ(contiguous_seen.load(), 1);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

// Many threads run one CompiledGraph with their own sizes (so plans are built and looked
// up concurrently) while another thread swaps the param; every result must match the
// inputs and one of the param values.
TEST_F(SessionTest, ConcurrentRunsAreSafe) {
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {Dim::sym("n")}));
  Value w = g.param("w", TensorType(DType::f32, {1}));
  g.output(g.apply1("add", {g.apply1("add", {x, w}), w}), "y");
  CompiledGraph cg = compile(g);
  cg.set_param("w", Tensor::from_vector<float>({1}, {1}));
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, runs{0};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) cg.set_param("w", Tensor::from_vector<float>({float(i % 2)}, {1}));
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        int64_t n = 1 + (t * 7 + i) % 13;
        Tensor in = Tensor::full(DType::f32, {n}, double(t));
        Tensor y = cg.run({{"x", in}}).at("y");
        auto v = y.to_vector<float>();
        bool ok = int64_t(v.size()) == n && (v[0] == float(t) || v[0] == float(t) + 2);
        for (float e : v) ok &= e == v[0];
        if (!ok) ++bad;
        ++runs;
      }
    });
  }
  for (auto& w : workers) w.join();
  stop = true;
  writer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(runs.load(), 8 * 300);
  EXPECT_EQ(cg.cached_plans(), 13u);
}

// Control ops whose subgraphs carry symbolic dims run with any binding of them, and
// the nodes after them see the sizes the subgraph produced.
TEST(SessionControl, SymbolicSubgraphsRunWithEachBinding) {
  TensorType t(DType::f32, {Dim::sym("n"), 3});
  auto then_g = std::make_shared<Graph>("then");
  then_g->output(then_g->input("a", t) * 2.0);
  auto else_g = std::make_shared<Graph>("else");
  else_g->output(-else_g->input("a", t));
  Graph g;
  Value p = g.input("p", TensorType(DType::boolean, {}));
  Value x = g.input("x", t);
  Value y = g.apply1("cond", {p, x}, {}, {then_g, else_g});
  g.output(y + x, "y");
  CompiledGraph cg = Session().compile(g);
  for (int64_t n : {2, 5}) {
    for (bool pred : {true, false}) {
      Tensor xv = Tensor::full(DType::f32, {n, 3}, 1.5);
      auto out = cg.run({{"p", Tensor::from_vector<bool>({pred}, {})}, {"x", xv}}).at("y");
      EXPECT_EQ(out.shape(), (std::vector<int64_t>{n, 3}));
      for (float v : out.to_vector<float>()) EXPECT_EQ(v, pred ? 4.5f : 0.0f);
    }
  }
}

// A reshape is a view of its (contiguous) input: the runtime allocates nothing for it.
TEST(SessionViews, ReshapeSharesTheInputBuffer) {
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {2, 3}));
  g.output(g.apply1("reshape", {x}, {{"shape", IntList{3, 2}}}), "y");
  CompiledGraph cg = Session().compile(g);
  Tensor in = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = cg.run({{"x", in}}).at("y");
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(y.buffer(), in.buffer());
  EXPECT_EQ(y.to_vector<float>(), in.to_vector<float>());
}

TEST(SessionThreads, ARunGivesTheCallersThreadCountBack) {
  // A compile's constant folding runs graphs on one thread; the caller's later runs (and
  // the oneDNN primitives made meanwhile) must keep the threads they had.
  Graph g;
  Value x = g.input("x", TensorType(DType::f32, {4}));
  g.output(g.apply1("reshape", {x}, {{"shape", IntList{2, 2}}}), "y");
  CompileOptions one;
  one.threads = 1;
  CompiledGraph cg = Session().compile(g, one);
  omp_set_num_threads(3);
  cg.run({{"x", Tensor::zeros(DType::f32, {4})}});
  EXPECT_EQ(omp_get_max_threads(), 3);
}

// A CUDA device past the last one present: an error on every host (with or without a GPU,
// with or without the CUDA backend built in).
TEST(SessionDevice, UnsupportedDeviceIsAnError) {
  EXPECT_THROW(Session(Device::cuda(cuda::device_count())), NotSupported);
  EXPECT_THROW(Session(Device::cuda(-1)), NotSupported);
}

// A compile inlines decompositions before its passes: stft's closing transpose of the
// spectrum folds into the mel product after it (layout sinking), and the report still says
// that stft was decomposed (a complex signal's: the CPU has a kernel for real ones).
TEST(SessionPasses, SeeWhatDecompositionsAreMadeOf) {
  Graph g;
  Value x = g.input("x", TensorType::parse("c64[2,4000]"));
  Value mel = g.input("mel", TensorType::parse("f32[8,256]"));
  Value spec = g.apply1("stft", {x},
                        {{"n_fft", int64_t(256)},
                         {"hop_length", int64_t(64)},
                         {"center", true},
                         {"pad_mode", std::string("reflect")},
                         {"onesided", false},
                         {"normalized", false}});
  g.output(g.apply1("matmul", {mel, g.apply1("abs", {spec})}), "y");
  CompiledGraph cg = Session(Device::cpu()).compile(g);
  EXPECT_EQ(cg.report().count("stft", DispatchPath::decomposed), 1) << cg.report().str();
  for (const Node& n : cg.lowered().nodes())
    EXPECT_NE(n.op_name(), "transpose") << print_graph(cg.lowered());
}

}  // namespace
}  // namespace rlx
