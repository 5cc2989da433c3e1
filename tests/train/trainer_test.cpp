// The Trainer end to end: optimizers through autodiff against torch, clipping, a least
// squares fit, no recompilation, checkpoints, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "rlx/ops.h"
#include "rlx/safetensors.h"
#include "rlx/train.h"

namespace rlx::train {
namespace {

namespace fs = std::filesystem;
using Vec = std::vector<double>;

const Vec kW0 = {1.0, -2.0, 0.5, 3.0};
const Vec kTarget = {0.5, 0.5, -1.0, 2.0};

// loss = sum((w - t)^2), w a param, t an input.
std::unique_ptr<Graph> quadratic(DType dt = DType::f64) {
  auto g = std::make_unique<Graph>();
  Value w = g->param("w", {dt, {4}});
  Value t = g->input("t", {dt, {4}});
  Value d = w - t;
  g->output(sum(d * d), "loss");
  return g;
}

// Trains the quadratic for 5 steps with lr 0.1 / (1 + k) at step k; returns w.
Vec train_quadratic(std::shared_ptr<Optimizer> opt, double clip = 0, Vec* norms = nullptr) {
  auto g = quadratic();
  TrainerOptions o;
  o.optimizer = std::move(opt);
  o.schedule = [](int64_t k) { return 0.1 / double(1 + k); };
  o.clip_norm = clip;
  Trainer t(*g, o);
  t.set_param("w", Tensor::from_doubles(DType::f64, {4}, kW0));
  for (int k = 0; k < 5; ++k) {
    TensorMap out = t.step({{"t", Tensor::from_doubles(DType::f64, {4}, kTarget)}});
    if (norms) norms->push_back(out.at("train.grad_norm").to_doubles()[0]);
  }
  EXPECT_EQ(t.steps(), 5);
  return t.param("w").to_doubles();
}

void expect_near(const Vec& got, const Vec& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Trainer, OptimizersThroughAutodiffMatchTorch) {
  // torch 1.13, float64: the same values as the emit-level tests in optim_test.cpp.
  expect_near(train_quadratic(std::make_shared<SGD>()),
              {0.8064319999999999, -1.03216, -0.08070400000000003, 2.612864}, 1e-12);
  expect_near(train_quadratic(std::make_shared<SGD>(0.9, 0.1, 0.01)),
              {0.6429876231808004, -0.22554244392833475, -0.5622001904373216, 2.2824404703534897},
              1e-12);
  expect_near(train_quadratic(std::make_shared<SGD>(0.9, 0, 0.01, true)),
              {0.5516750308938059, 0.22830826229019274, -0.8338777546179341, 2.0989112007073523},
              1e-12);
  expect_near(train_quadratic(std::make_shared<Adam>(0.9, 0.999, 1e-8, 0.05)),
              {0.7746647338672025, -1.7720010747242425, 0.27229886604854486, 2.7726613128112576},
              1e-12);
  expect_near(train_quadratic(std::make_shared<AdamW>()),
              {0.7727511507044031, -1.7676311908909732, 0.2713358858645461, 2.766116593374974},
              1e-12);
}

TEST(Trainer, ClipsByGlobalNormLikeTorch) {
  // Reference: clip_grad_norm_(max_norm=0.5) then SGD.
  Vec w = kW0, want_norms;
  for (int k = 0; k < 5; ++k) {
    Vec g(4);
    double ss = 0;
    for (size_t i = 0; i < 4; ++i) ss += (g[i] = 2 * (w[i] - kTarget[i])) * g[i];
    double norm = std::sqrt(ss), coef = 0.5 / (norm + 1e-6);
    want_norms.push_back(norm);
    for (size_t i = 0; i < 4; ++i) w[i] -= 0.1 / (1 + k) * g[i] * std::min(coef, 1.0);
  }
  Vec norms;
  expect_near(train_quadratic(std::make_shared<SGD>(), 0.5, &norms), w, 1e-12);
  expect_near(norms, want_norms, 1e-12);
  // A large max_norm changes nothing.
  expect_near(train_quadratic(std::make_shared<SGD>(), 1e6),
              {0.8064319999999999, -1.03216, -0.08070400000000003, 2.612864}, 1e-12);
}

// Least squares: loss = mean((x @ w + b - y)^2) with y from a known w, b.
struct LeastSquares {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  TensorMap batch;

  LeastSquares() {
    Value x = g->input("x", {DType::f32, {32, 3}});
    Value y = g->input("y", {DType::f32, {32, 1}});
    Value w = g->param("w", {DType::f32, {3, 1}});
    Value b = g->param("b", {DType::f32, {1}});
    Value d = matmul(x, w) + b - y;
    g->output(mean(d * d), "loss");
    g->output(matmul(x, w) + b, "pred");
    Tensor xs = uniform({32, 3}, -1, 1, 1);
    std::vector<float> xv = xs.to_vector<float>(), yv(32);
    for (size_t i = 0; i < 32; ++i)
      yv[i] = 2 * xv[3 * i] - 1 * xv[3 * i + 1] + 0.5f * xv[3 * i + 2] + 0.3f;
    batch = {{"x", xs}, {"y", Tensor::from_vector(yv, {32, 1})}};
  }
  void init(Trainer& t) const {
    t.set_param("w", xavier_uniform({3, 1}, 2));
    t.set_param("b", Tensor::zeros(DType::f32, {1}));
  }
};

double scalar(const Tensor& t) { return t.to_doubles().at(0); }

TEST(Trainer, LeastSquaresLossFallsWithoutRecompiling) {
  LeastSquares ls;
  TrainerOptions o;
  o.optimizer = std::make_shared<AdamW>(0.9, 0.999, 1e-8, 0.0);
  o.schedule = constant_lr(0.05);
  Trainer t(*ls.g, o);
  ls.init(t);
  double first = scalar(t.evaluate(ls.batch).at("loss"));
  double last = first;
  for (int k = 0; k < 200; ++k) {
    TensorMap out = t.step(ls.batch);
    EXPECT_EQ(out.count("pred"), 1u);
    EXPECT_EQ(out.count("train.grad_norm"), 1u);
    EXPECT_EQ(out.count("new.w"), 0u);
    last = scalar(out.at("loss"));
  }
  EXPECT_LT(last, first * 1e-2) << "first " << first << ", last " << last;
  EXPECT_EQ(t.compiled().cached_plans(), 1u);
  // evaluate() sees the trained params.
  EXPECT_LT(scalar(t.evaluate(ls.batch).at("loss")), last * 1.01);
  std::vector<float> w = t.param("w").to_vector<float>();
  EXPECT_NEAR(w[0], 2.0, 0.1);
  EXPECT_NEAR(w[1], -1.0, 0.1);
  EXPECT_NEAR(w[2], 0.5, 0.1);
  EXPECT_EQ(t.param("adamw.m.w").shape(), (std::vector<int64_t>{3, 1}));
}

TEST(Trainer, RematGivesTheSameSteps) {
  LeastSquares ls;
  TrainerOptions o;
  o.schedule = constant_lr(0.01);
  Trainer plain(*ls.g, o);
  o.remat = Remat::checkpoints;
  Trainer remat(*ls.g, o);
  ls.init(plain);
  ls.init(remat);
  for (int k = 0; k < 3; ++k) {
    double a = scalar(plain.step(ls.batch).at("loss")), b = scalar(remat.step(ls.batch).at("loss"));
    EXPECT_NEAR(a, b, 1e-6 * std::abs(a)) << "step " << k;
  }
}

TEST(Trainer, OnlyTheListedParamsTrain) {
  LeastSquares ls;
  TrainerOptions o;
  o.params = {"w"};
  o.optimizer = std::make_shared<SGD>(0.9);
  Trainer t(*ls.g, o);
  ls.init(t);
  Tensor b0 = t.param("b");
  for (int k = 0; k < 3; ++k) t.step(ls.batch);
  EXPECT_EQ(t.param("b").to_vector<float>(), b0.to_vector<float>());
  EXPECT_EQ(t.trained_params(), std::vector<std::string>{"w"});
  EXPECT_EQ(t.state_names(), std::vector<std::string>{"sgd.momentum.w"});
  EXPECT_THROW(t.param("sgd.momentum.b"), ValueError);
}

TEST(Trainer, TrainGraphNames) {
  LeastSquares ls;
  Trainer t(*ls.g, {});
  const Graph& g = t.train_graph();
  ASSERT_NE(g.find_arg("train.lr"), nullptr);
  ASSERT_NE(g.find_arg("train.step"), nullptr);
  EXPECT_EQ(g.find_arg("train.lr")->value.type(), (TensorType{DType::f64, {}}));
  EXPECT_NE(g.find_arg("adamw.v.b"), nullptr);
  std::vector<std::string> outs;
  for (const Output& o : g.outputs()) outs.push_back(o.name);
  EXPECT_EQ(outs, (std::vector<std::string>{"loss", "pred", "train.grad_norm", "new.w", "new.b",
                                            "new.adamw.m.w", "new.adamw.v.w", "new.adamw.m.b",
                                            "new.adamw.v.b"}));
  EXPECT_DOUBLE_EQ(t.lr(), 1e-3);  // the defaults: AdamW, constant 1e-3
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / str_cat("rlx_trainer_", ::getpid(), "_", std::rand());
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(Trainer, SaveLoadGivesTheIdenticalNextStep) {
  TempDir dir;
  std::string path = (dir.path / "ckpt.safetensors").string();
  LeastSquares ls;
  TrainerOptions o;
  o.optimizer = std::make_shared<Adam>();
  o.schedule = warmup_cosine(0.05, 2, 20);
  Trainer a(*ls.g, o);
  ls.init(a);
  for (int k = 0; k < 3; ++k) a.step(ls.batch);
  a.save(path);

  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata.at("train.step"), "3");
  EXPECT_EQ(f.metadata.at("train.optimizer"), "adam");
  EXPECT_EQ(f.tensors.size(), 6u);  // w, b and two moments each

  Trainer b(*ls.g, o);
  b.load(path);
  EXPECT_EQ(b.steps(), 3);
  EXPECT_EQ(b.lr(), a.lr());
  TensorMap ra = a.step(ls.batch), rb = b.step(ls.batch);
  EXPECT_EQ(ra.at("loss").to_vector<float>(), rb.at("loss").to_vector<float>());
  for (const char* n : {"w", "b", "adam.m.w", "adam.v.b"})
    EXPECT_EQ(a.param(n).to_vector<float>(), b.param(n).to_vector<float>()) << n;
}

// The data-parallel hook (rlx::dist fills it in): the gradients it returns are the ones
// clipped and applied. Doubling them doubles plain SGD's first step.
TEST(Trainer, GradTransformRewritesTheGradients) {
  auto g = quadratic();
  TrainerOptions o;
  o.optimizer = std::make_shared<SGD>();
  o.schedule = constant_lr(0.1);
  std::vector<std::string> seen;
  o.grad_transform = [&](Graph&, const std::vector<std::string>& names, std::vector<Value> gr) {
    seen = names;
    for (Value& v : gr) v = v * 2.0;
    return gr;
  };
  Trainer t(*g, o);
  EXPECT_EQ(seen, std::vector<std::string>{"w"});
  t.set_param("w", Tensor::from_doubles(DType::f64, {4}, kW0));
  TensorMap out = t.step({{"t", Tensor::from_doubles(DType::f64, {4}, kTarget)}});
  Vec w = t.param("w").to_doubles();
  double norm = 0;
  for (size_t i = 0; i < 4; ++i) {
    double grad = 2 * 2 * (kW0[i] - kTarget[i]);  // twice d/dw (w - t)^2
    EXPECT_NEAR(w[i], kW0[i] - 0.1 * grad, 1e-12) << i;
    norm += grad * grad;
  }
  EXPECT_NEAR(out.at("train.grad_norm").to_doubles()[0], std::sqrt(norm), 1e-12);
  // A hook that returns the wrong gradients is refused at construction.
  o.grad_transform = [](Graph&, const std::vector<std::string>&, std::vector<Value> gr) {
    gr[0] = cast(gr[0], DType::f32);
    return gr;
  };
  EXPECT_THROW(Trainer(*g, o), ValueError);
}

TEST(Trainer, SaveWritesNothingWhenNotTheWriter) {
  auto g = quadratic();
  TrainerOptions o;
  o.writes_checkpoints = false;
  Trainer t(*g, o);
  t.set_param("w", Tensor::from_doubles(DType::f64, {4}, kW0));
  fs::path p = fs::temp_directory_path() / "rlx_trainer_not_writer.safetensors";
  fs::remove(p);
  t.save(p.string());
  EXPECT_FALSE(fs::exists(p));
}

TEST(TrainerErrors, Construction) {
  LeastSquares ls;
  TrainerOptions unknown;
  unknown.params = {"w", "nope"};
  EXPECT_THROW(Trainer(*ls.g, unknown), ValueError);
  TrainerOptions input;
  input.params = {"x"};  // an input, not a param
  EXPECT_THROW(Trainer(*ls.g, input), ValueError);
  TrainerOptions not_scalar;
  not_scalar.loss = "pred";
  EXPECT_THROW(Trainer(*ls.g, not_scalar), ValueError);
  TrainerOptions missing;
  missing.loss = "nope";
  EXPECT_THROW(Trainer(*ls.g, missing), ValueError);
  TrainerOptions negative;
  negative.clip_norm = -1;
  EXPECT_THROW(Trainer(*ls.g, negative), ValueError);

  Graph ints;
  Value i = ints.param("i", {DType::i32, {2}});
  ints.output(cast(sum(i), DType::f32), "loss");
  EXPECT_THROW(Trainer(ints, {}), ValueError);  // no float param to train
}

TEST(TrainerErrors, Params) {
  LeastSquares ls;
  Trainer t(*ls.g, {});
  t.set_param("w", xavier_uniform({3, 1}, 2));
  try {
    t.step(ls.batch);
    ADD_FAILURE() << "expected a ValueError for the unset param b";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.evaluate(ls.batch), ValueError);
  EXPECT_THROW(t.save("/nonexistent-dir/never-written.safetensors"), ValueError);  // b unset
  EXPECT_THROW(t.set_param("nope", Tensor::zeros(DType::f32, {1})), ValueError);
  EXPECT_THROW(t.set_param("w", Tensor::zeros(DType::f32, {4, 1})), ValueError);
  EXPECT_THROW(t.set_param("w", Tensor::zeros(DType::f64, {3, 1})), TypeError);
  EXPECT_THROW(t.param("nope"), ValueError);
  t.set_param("b", Tensor::zeros(DType::f32, {1}));
  EXPECT_THROW(t.step({{"x", ls.batch.at("x")}}), ValueError);  // y missing
  TensorMap with_lr = ls.batch;
  with_lr["train.lr"] = Tensor::full(DType::f64, {}, 1.0);
  EXPECT_THROW(t.step(with_lr), ValueError);
  EXPECT_EQ(t.steps(), 0);
}

TEST(TrainerErrors, Load) {
  TempDir dir;
  LeastSquares ls;
  Trainer t(*ls.g, {});
  ls.init(t);
  auto path = [&](const char* n) { return (dir.path / n).string(); };
  TensorMap good = {{"w", t.param("w")},
                    {"b", t.param("b")},
                    {"adamw.m.w", t.param("adamw.m.w")},
                    {"adamw.v.w", t.param("adamw.v.w")},
                    {"adamw.m.b", t.param("adamw.m.b")},
                    {"adamw.v.b", t.param("adamw.v.b")}};
  auto write = [&](const char* n, TensorMap m, std::map<std::string, std::string> meta) {
    save_safetensors(path(n), m, meta);
    return path(n);
  };
  std::map<std::string, std::string> meta = {{"train.step", "4"}};
  TensorMap missing = good;
  missing.erase("adamw.v.b");
  EXPECT_THROW(t.load(write("missing", missing, meta)), ValueError);
  TensorMap shape = good;
  shape["w"] = Tensor::zeros(DType::f32, {1, 3});
  EXPECT_THROW(t.load(write("shape", shape, meta)), ValueError);
  TensorMap dtype = good;
  dtype["b"] = Tensor::zeros(DType::f64, {1});
  EXPECT_THROW(t.load(write("dtype", dtype, meta)), TypeError);
  TensorMap extra = good;
  extra["c"] = Tensor::zeros(DType::f32, {1});
  EXPECT_THROW(t.load(write("extra", extra, meta)), ValueError);
  EXPECT_THROW(t.load(write("nostep", good, {})), ValueError);
  EXPECT_THROW(t.load(write("badstep", good, {{"train.step", "x1"}})), ValueError);
  EXPECT_THROW(t.load(write("opt", good, {{"train.step", "1"}, {"train.optimizer", "sgd"}})),
               ValueError);
  EXPECT_THROW(t.load(path("does_not_exist")), IoError);
  EXPECT_EQ(t.steps(), 0);  // nothing changed by the failed loads
  t.load(write("good", good, meta));
  EXPECT_EQ(t.steps(), 4);
}

}  // namespace
}  // namespace rlx::train
