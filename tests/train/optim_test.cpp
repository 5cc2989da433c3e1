// Optimizer updates as emitted graph ops, driven with a hand-given gradient input (no
// autodiff): 5 steps on the quadratic sum((w - t)^2) against reference loops in double
// and against values from torch.optim (torch 1.13, float64).
#include <gtest/gtest.h>

#include <cmath>

#include "rlx/session.h"
#include "rlx/train.h"

namespace rlx::train {
namespace {

using Vec = std::vector<double>;

const Vec kW0 = {1.0, -2.0, 0.5, 3.0};
const Vec kTarget = {0.5, 0.5, -1.0, 2.0};
constexpr int kSteps = 5;

double lr_at(int k) { return 0.1 / (1 + k); }  // a changing lr: the input is used each step

Vec grad_of(const Vec& w) {
  Vec g(w.size());
  for (size_t i = 0; i < w.size(); ++i) g[i] = 2 * (w[i] - kTarget[i]);
  return g;
}

// Runs the optimizer's emitted update for kSteps steps in `dt`, feeding the state back.
Vec run_graph(const Optimizer& opt, DType dt = DType::f64) {
  Graph g;
  Value w = g.param("w", {dt, {4}});
  Value gr = g.input("g", {dt, {4}});
  StepScalars s{g.input("train.lr", {DType::f64, {}}), g.input("train.step", {DType::f64, {}})};
  Update u = opt.emit(g, "w", w, gr, s);
  g.output(u.param, "new.w");
  for (auto& [name, v] : u.state) g.output(v, "new." + name);
  CompiledGraph cg = Session().compile(g);
  cg.set_param("w", Tensor::from_doubles(dt, {4}, kW0));
  for (auto& [name, v] : u.state) cg.set_param(name, Tensor::zeros(dt, {4}));
  for (int k = 0; k < kSteps; ++k) {
    Vec w_now = cg.param("w").to_doubles();
    TensorMap out = cg.run({{"g", Tensor::from_doubles(dt, {4}, grad_of(w_now))},
                            {"train.lr", Tensor::full(DType::f64, {}, lr_at(k))},
                            {"train.step", Tensor::full(DType::f64, {}, k + 1)}});
    cg.set_param("w", out.at("new.w"));
    for (auto& [name, v] : u.state) cg.set_param(name, out.at("new." + name));
  }
  return cg.param("w").to_doubles();
}

// torch.optim.SGD, written out.
Vec ref_sgd(double momentum, double dampening, double wd, bool nesterov) {
  Vec w = kW0, buf(4, 0.0);
  for (int k = 0; k < kSteps; ++k) {
    Vec g = grad_of(w);
    for (size_t i = 0; i < 4; ++i) {
      double d = g[i] + wd * w[i];
      if (momentum != 0) {
        buf[i] = k == 0 ? d : momentum * buf[i] + (1 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      w[i] -= lr_at(k) * d;
    }
  }
  return w;
}

// torch.optim.Adam / AdamW, written out.
Vec ref_adam(double b1, double b2, double eps, double wd, bool decoupled) {
  Vec w = kW0, m(4, 0.0), v(4, 0.0);
  for (int k = 0; k < kSteps; ++k) {
    Vec g = grad_of(w);
    double lr = lr_at(k), step = k + 1;
    for (size_t i = 0; i < 4; ++i) {
      if (decoupled)
        w[i] *= 1 - lr * wd;
      else
        g[i] += wd * w[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
      double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
      w[i] -= lr / bc1 * m[i] / denom;
    }
  }
  return w;
}

void expect_near(const Vec& got, const Vec& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Optimizers, SgdMatchesReference) {
  expect_near(run_graph(SGD()), ref_sgd(0, 0, 0, false), 1e-12);
  expect_near(run_graph(SGD(0.9, 0.1, 0.01)), ref_sgd(0.9, 0.1, 0.01, false), 1e-12);
  expect_near(run_graph(SGD(0.9, 0, 0.01, true)), ref_sgd(0.9, 0, 0.01, true), 1e-12);
}

TEST(Optimizers, AdamMatchesReference) {
  expect_near(run_graph(Adam()), ref_adam(0.9, 0.999, 1e-8, 0, false), 1e-12);
  expect_near(run_graph(Adam(0.9, 0.999, 1e-8, 0.05)), ref_adam(0.9, 0.999, 1e-8, 0.05, false),
              1e-12);
  expect_near(run_graph(Adam(0.3, 0.9, 1e-6)), ref_adam(0.3, 0.9, 1e-6, 0, false), 1e-12);
}

TEST(Optimizers, AdamWMatchesReference) {
  expect_near(run_graph(AdamW()), ref_adam(0.9, 0.999, 1e-8, 0.01, true), 1e-12);
  expect_near(run_graph(AdamW(0.8, 0.99, 1e-6, 0.5)), ref_adam(0.8, 0.99, 1e-6, 0.5, true), 1e-12);
}

TEST(Optimizers, MatchTorch) {
  // torch 1.13, float64, lr 0.1 / (1 + k) at step k, loss ((p - t)**2).sum().
  expect_near(run_graph(SGD()), {0.8064319999999999, -1.03216, -0.08070400000000003, 2.612864},
              1e-12);
  expect_near(run_graph(SGD(0.9, 0.1, 0.01)),
              {0.6429876231808004, -0.22554244392833475, -0.5622001904373216, 2.2824404703534897},
              1e-12);
  expect_near(run_graph(SGD(0.9, 0, 0.01, true)),
              {0.5516750308938059, 0.22830826229019274, -0.8338777546179341, 2.0989112007073523},
              1e-12);
  expect_near(run_graph(Adam(0.9, 0.999, 1e-8, 0.05)),
              {0.7746647338672025, -1.7720010747242425, 0.27229886604854486, 2.7726613128112576},
              1e-12);
  expect_near(run_graph(Adam(0.3, 0.9, 1e-6)),
              {0.7848738043939139, -1.773780990308195, 0.27531943694824046, 2.7774017080020283},
              1e-12);
  expect_near(run_graph(AdamW()),
              {0.7727511507044031, -1.7676311908909732, 0.2713358858645461, 2.766116593374974},
              1e-12);
  expect_near(run_graph(AdamW(0.8, 0.99, 1e-6, 0.5)),
              {0.6803890361096678, -1.5630606700682141, 0.2274773606216638, 2.458798778082251},
              1e-12);
}

TEST(Optimizers, ComputeInTheParamDtype) {
  // f32 params: the same trajectory to f32 precision, and f32 outputs.
  expect_near(run_graph(AdamW(), DType::f32), ref_adam(0.9, 0.999, 1e-8, 0.01, true), 1e-5);
  expect_near(run_graph(SGD(0.9), DType::f32), ref_sgd(0.9, 0, 0, false), 1e-5);
  Graph g;
  Value w = g.param("w", {DType::bf16, {3}});
  Value gr = g.input("g", {DType::bf16, {3}});
  StepScalars s{g.input("train.lr", {DType::f64, {}}), g.input("train.step", {DType::f64, {}})};
  Update u = Adam().emit(g, "w", w, gr, s);
  EXPECT_EQ(u.param.dtype(), DType::bf16);
  for (auto& [_, v] : u.state) EXPECT_EQ(v.type(), w.type());
}

TEST(Optimizers, StateNamesAndTypes) {
  Graph g;
  Value w = g.param("layer.w", {DType::f32, {2, 3}});
  Value gr = g.input("g", {DType::f32, {2, 3}});
  StepScalars s{g.input("train.lr", {DType::f64, {}}), g.input("train.step", {DType::f64, {}})};
  auto names = [&](const Optimizer& o) {
    std::vector<std::string> n;
    for (auto& [name, v] : o.emit(g, "layer.w", w, gr, s).state) {
      n.push_back(name);
      EXPECT_EQ(v.type(), w.type());
      const Arg* a = g.find_arg(name);
      EXPECT_TRUE(a && a->kind == ArgKind::param) << name;
    }
    return n;
  };
  EXPECT_EQ(names(SGD()), std::vector<std::string>{});
  EXPECT_EQ(names(SGD(0.5)), std::vector<std::string>{"sgd.momentum.layer.w"});
  EXPECT_EQ(names(Adam()), (std::vector<std::string>{"adam.m.layer.w", "adam.v.layer.w"}));
  EXPECT_EQ(names(AdamW()), (std::vector<std::string>{"adamw.m.layer.w", "adamw.v.layer.w"}));
}

TEST(Optimizers, BadSettings) {
  Graph g;
  Value w = g.param("w", {DType::f32, {2}});
  Value gr = g.input("g", {DType::f32, {2}});
  Value g64 = g.input("g64", {DType::f64, {2}});
  StepScalars s{g.input("train.lr", {DType::f64, {}}), g.input("train.step", {DType::f64, {}})};
  EXPECT_THROW(SGD(0, 0, 0, true).emit(g, "w", w, gr, s), ValueError);      // nesterov, no momentum
  EXPECT_THROW(SGD(0.9, 0.1, 0, true).emit(g, "w", w, gr, s), ValueError);  // nesterov, dampening
  EXPECT_THROW(SGD(-1).emit(g, "w", w, gr, s), ValueError);
  EXPECT_THROW(Adam(1.0).emit(g, "w", w, gr, s), ValueError);
  EXPECT_THROW(AdamW(0.9, 0.999, -1).emit(g, "w", w, gr, s), ValueError);
  EXPECT_THROW(AdamW().emit(g, "w", w, g64, s), TypeError);  // grad of another dtype
}

}  // namespace
}  // namespace rlx::train
