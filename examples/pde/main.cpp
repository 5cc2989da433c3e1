// An inverse problem through a sparse solver: the 2-D Poisson equation -lap(u) = f on the
// unit square (u = 0 on the boundary), discretised on an N x N interior grid as A u = f
// with A the 5-point Laplacian over h^2. A hidden source f* (two Gaussian bumps) gives the
// observed field u* = A^-1 f*. Training fits a source f (a param, started at zero) so that
// u = A^-1 f matches u*: the loss mean((u - u*)^2) is differentiated through the solve by
// the adjoint rules of libs/sparse (dloss/df = A^-T dloss/du: one more solve per step).
//
// Usage: rlx-example-pde [--grid N] [--steps S] [--lr LR] [--solver cholesky|lu|cg|gmres]
//                        [--expect-drop F]
// Exits 1 when the last loss is not below F times the first (default F = 1e-2).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rlx/rlx.h"
#include "rlx_sparse/sparse.h"

namespace sp = rlx::sparse;
using rlx::DType;
using rlx::Tensor;
using rlx::Value;

namespace {

struct Options {
  int64_t grid = 32;
  int steps = 300;
  double lr = 20.0;
  std::string solver = "cholesky";
  double expect_drop = 1e-2;
};

// Two Gaussian bumps of opposite sign: the source the training has to find.
Tensor true_source(int64_t n) {
  std::vector<double> f(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double x = double(j + 1) / double(n + 1), y = double(i + 1) / double(n + 1);
      auto bump = [&](double cx, double cy, double w) {
        return std::exp(-((x - cx) * (x - cx) + (y - cy) * (y - cy)) / (2 * w * w));
      };
      f[size_t(i * n + j)] = 100 * bump(0.3, 0.35, 0.08) - 60 * bump(0.7, 0.6, 0.12);
    }
  return Tensor::from_doubles(DType::f64, {n * n}, f);
}

Value solve(const std::string& solver, const sp::Csr& a, Value f) {
  if (solver == "lu") return sp::lu_solve(a, f);
  if (solver == "cg") return sp::cg_solve(a, f, {.tol = 1e-10}).x;
  if (solver == "gmres") return sp::gmres_solve(a, f, {.tol = 1e-10}).x;
  if (solver == "cholesky") return sp::cholesky_solve(a, f);
  rlx::fail<rlx::ValueError>("rlx-example-pde", "expected --solver cholesky, lu, cg or gmres, got ",
                             solver);
}

double rel_error(const Tensor& a, const Tensor& b) {
  auto x = a.to_doubles(), y = b.to_doubles();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) num += (x[i] - y[i]) * (x[i] - y[i]), den += y[i] * y[i];
  return std::sqrt(num / den);
}

int run(const Options& o) {
  sp::register_ops();
  const int64_t n = o.grid, unknowns = n * n;
  const double h = 1.0 / double(n + 1);
  sp::SparseMatrix A = sp::poisson2d(n, DType::f64, DType::i32, 1 / (h * h));
  Tensor f_true = true_source(n);

  // The observation, computed with the same solver outside the training graph.
  rlx::Session session(rlx::Device::cpu());
  rlx::Graph fwd;
  fwd.output(solve(o.solver, sp::constant(fwd, A), fwd.input("f", f_true.type())), "u");
  Tensor u_obs = session.compile(fwd).run({{"f", f_true}}).at("u");

  // The model: u = A^-1 f for the param f; loss = mean((u - u*)^2).
  rlx::Graph model;
  Value f = model.param("f", f_true.type());
  Value u = solve(o.solver, sp::constant(model, A), f);
  Value diff = u - model.input("u_obs", u_obs.type());
  model.output(rlx::mean(diff * diff), "loss");

  rlx::train::TrainerOptions topts;
  topts.optimizer = std::make_shared<rlx::train::Adam>();
  topts.schedule = rlx::train::constant_lr(o.lr);
  topts.compile.threads = 1;  // a small grid: one core is as fast, and steady on a busy machine
  rlx::train::Trainer trainer(model, topts);
  trainer.set_param("f", Tensor::zeros(DType::f64, {unknowns}));

  std::printf(
      "Poisson %lldx%lld (%lld unknowns, %lld nonzeros), solver sparse.%s_solve, Adam lr %g\n",
      (long long)n, (long long)n, (long long)unknowns, (long long)A.nnz(), o.solver.c_str(), o.lr);
  double first = 0, last = 0;
  for (int step = 1; step <= o.steps; ++step) {
    last = trainer.step({{"u_obs", u_obs}}).at("loss").to_doubles()[0];
    if (step == 1) first = last;
    if (step == 1 || step % std::max(1, o.steps / 15) == 0 || step == o.steps)
      std::printf("step %4d  loss %.4e\n", step, last);
  }
  // ||u - u*|| / ||u*||, from the mean squared error.
  double u_norm = 0;
  for (double v : u_obs.to_doubles()) u_norm += v * v;
  std::printf(
      "loss fell from %.4e to %.4e (x%.2g); relative error of the field %.2e, of the "
      "source %.3f\n",
      first, last, last / first, std::sqrt(last * double(unknowns) / u_norm),
      rel_error(trainer.param("f"), f_true));
  if (o.solver == "cholesky" || o.solver == "lu") {
    sp::FactorCacheStats s = sp::factor_cache_stats();
    std::printf(
        "factorisation cache: %lld analyses, %lld factorisations, %lld reuses (the forward "
        "and the adjoint solve of a step share one factorisation)\n",
        (long long)s.analyses, (long long)s.factorisations, (long long)s.reuses);
  }
  if (!(last < o.expect_drop * first)) {
    std::fprintf(stderr, "rlx-example-pde: the loss did not fall below %g times the first\n",
                 o.expect_drop);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto value = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (!std::strcmp(argv[i], "--grid")) {
      o.grid = std::atoll(value());
    } else if (!std::strcmp(argv[i], "--steps")) {
      o.steps = std::atoi(value());
    } else if (!std::strcmp(argv[i], "--lr")) {
      o.lr = std::atof(value());
    } else if (!std::strcmp(argv[i], "--solver")) {
      o.solver = value();
    } else if (!std::strcmp(argv[i], "--expect-drop")) {
      o.expect_drop = std::atof(value());
    } else {
      std::fprintf(stderr,
                   "usage: %s [--grid N] [--steps S] [--lr LR] [--solver cholesky|lu|cg|gmres] "
                   "[--expect-drop F]\n",
                   argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx-example-pde: %s\n", e.what());
    return 1;
  }
}
