// sparse.* rules: gradients (rlx::grad on a compiled graph) and tangents (rlx::jvp) of every
// op against central finite differences in f64, a second-order check (hvp), and vmap over
// right-hand sides (and over matrices, through the scan fallback) against a loop.
#include <gtest/gtest.h>

#include "sparse_test_util.h"

namespace {

using namespace sparse_test;
namespace sp = rlx::sparse;
using Shape64 = std::vector<int64_t>;

// ---- gradients against finite differences --------------------------------------------

struct GradCase {
  std::string name;
  std::vector<Shape64> shapes;
  std::vector<std::vector<double>> inputs;
  std::function<std::vector<Value>(std::vector<Value>)> build;
  double tol = 1e-6;
};

Graph& loss_graph(Graph& g, const GradCase& c, std::vector<std::string>& names, bool square) {
  std::vector<Value> xs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    xs.push_back(g.input(names.back(), TensorType(DType::f64, rlx::to_shape(c.shapes[i]))));
  }
  Value loss;
  uint64_t seed = 100;
  for (Value o : c.build(xs)) {
    Shape64 s = rlx::static_sizes(o.shape());
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    Value w = g.constant(rlx::Literal::from_doubles(DType::f64, s, random_vec(n, seed++)));
    Value term = rlx::sum((square ? o * o : o) * w);
    loss = loss.valid() ? loss + term : term;
  }
  g.output(loss, "loss");
  return g;
}

rlx::TensorMap feed(const std::vector<std::string>& names, const GradCase& c,
                    const std::vector<std::vector<double>>& vals) {
  rlx::TensorMap m;
  for (size_t i = 0; i < names.size(); ++i)
    m[names[i]] = Tensor::from_doubles(DType::f64, c.shapes[i], vals[i]);
  return m;
}

// grad (vjp) and jvp along a random direction of loss = sum_k sum(w_k * out_k), against
// central differences.
void check_grad(const GradCase& c) {
  sp::register_ops();
  Graph g;
  std::vector<std::string> names;
  loss_graph(g, c, names, false);
  rlx::Session s(rlx::Device::cpu());
  auto fwd = s.compile(g);
  auto bwd = s.compile(*rlx::grad(g, {.wrt = names}));
  auto tan = s.compile(*rlx::jvp(g, names));
  auto f = [&](const std::vector<std::vector<double>>& v) {
    return fwd.run(feed(names, c, v)).at("loss").to_doubles()[0];
  };
  auto grads = bwd.run(feed(names, c, c.inputs));
  const double eps = 1e-6;
  double scale = 1;
  std::vector<std::vector<double>> fd(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i)
    for (size_t e = 0; e < c.inputs[i].size(); ++e) {
      auto p = c.inputs, m = c.inputs;
      p[i][e] += eps, m[i][e] -= eps;
      fd[i].push_back((f(p) - f(m)) / (2 * eps));
      scale = std::max(scale, std::abs(fd[i].back()));
    }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    auto gv = grads.at("grad." + names[i]).to_doubles();
    ASSERT_EQ(gv.size(), fd[i].size());
    for (size_t e = 0; e < gv.size(); ++e)
      EXPECT_NEAR(gv[e], fd[i][e], c.tol * scale)
          << c.name << ": vjp of input " << i << " [" << e << "]";
  }
  rlx::TensorMap tin = feed(names, c, c.inputs);
  double expect = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    auto dir = random_vec(int64_t(c.inputs[i].size()), 500 + i);
    tin["tan." + names[i]] = Tensor::from_doubles(DType::f64, c.shapes[i], dir);
    for (size_t e = 0; e < dir.size(); ++e) expect += fd[i][e] * dir[e];
  }
  EXPECT_NEAR(tan.run(tin).at("tan.loss").to_doubles()[0], expect, c.tol * scale * 10)
      << c.name << ": jvp";
}

// For each entry (i, j) of a symmetric pattern, the index of (j, i).
std::vector<int64_t> transpose_index(const SparseMatrix& a) {
  auto rp = a.row_ptr.to_literal().to_ints(), ci = a.col_idx.to_literal().to_ints();
  std::vector<int64_t> t(ci.size());
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t e = rp[size_t(i)]; e < rp[size_t(i + 1)]; ++e) {
      int64_t j = ci[size_t(e)];
      for (int64_t f = rp[size_t(j)]; f < rp[size_t(j + 1)]; ++f)
        if (ci[size_t(f)] == i) t[size_t(e)] = f;
    }
  return t;
}

// (w + w[transpose]) / 2: symmetric values built in the graph, so that finite differences
// move A along symmetric directions (the solvers that read A as symmetric).
Value symmetrise(Value w, const std::vector<int64_t>& tidx) {
  Value idx = w.graph->constant(rlx::Literal::from(tidx));
  return (w + rlx::op("gather", {w, idx}, {{"axis", 0}})) * 0.5;
}

sp::IterativeOptions tight(bool transpose = false) {
  sp::IterativeOptions o;
  o.tol = 1e-14;
  o.transpose = transpose;
  return o;
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cs;
  static const SparseMatrix R = random_sparse(7, 5, 3, 1);  // rectangular, duplicates summed
  static const SparseMatrix N = dominant(8, 2);             // non-symmetric, nonsingular
  static const SparseMatrix S = spd(8, 3);                  // symmetric positive definite
  static const std::vector<int64_t> T = transpose_index(S);
  auto vals = [](const SparseMatrix& m) { return m.values.to_doubles(); };
  int64_t r = R.nnz(), n = N.nnz(), s = S.nnz();
  cs.push_back({"spmv", {{r}, {5}}, {vals(R), random_vec(5, 4)}, [](auto x) {
                  return std::vector<Value>{sp::spmv(sp::with_pattern(R, x[0]), x[1])};
                }});
  cs.push_back({"spmv_t", {{r}, {7}}, {vals(R), random_vec(7, 5)}, [](auto x) {
                  return std::vector<Value>{sp::spmv_t(sp::with_pattern(R, x[0]), x[1])};
                }});
  cs.push_back({"spmm", {{r}, {2, 5, 3}}, {vals(R), random_vec(30, 6)}, [](auto x) {
                  return std::vector<Value>{sp::spmm(sp::with_pattern(R, x[0]), x[1])};
                }});
  cs.push_back({"spmm_t", {{r}, {7, 2}}, {vals(R), random_vec(14, 7)}, [](auto x) {
                  return std::vector<Value>{sp::spmm_t(sp::with_pattern(R, x[0]), x[1])};
                }});
  cs.push_back(
      {"sddmm", {{7, 2}, {5, 2}}, {random_vec(14, 8), random_vec(10, 9)}, [](auto x) {
         sp::Csr A = sp::constant(*x[0].graph, R);
         return std::vector<Value>{rlx::op("sparse.sddmm", {A.col_idx, A.row_ptr, x[0], x[1]})};
       }});
  for (Shape64 b : {Shape64{8}, Shape64{8, 2}}) {
    std::string sfx = b.size() == 1 ? " b[n]" : " b[n,k]";
    int64_t nb = b.size() == 1 ? 8 : 16;
    for (bool t : {false, true})
      cs.push_back({rlx::str_cat("lu_solve transpose=", t, sfx),
                    {{n}, b},
                    {vals(N), random_vec(nb, 10)},
                    [t](auto x) {
                      return std::vector<Value>{sp::lu_solve(sp::with_pattern(N, x[0]), x[1], t)};
                    }});
    cs.push_back({"cholesky_solve" + sfx, {{s}, b}, {vals(S), random_vec(nb, 11)}, [](auto x) {
                    return std::vector<Value>{
                        sp::cholesky_solve(sp::with_pattern(S, symmetrise(x[0], T)), x[1])};
                  }});
    cs.push_back({"cg_solve" + sfx, {{s}, b}, {vals(S), random_vec(nb, 12)}, [](auto x) {
                    return std::vector<Value>{
                        sp::cg_solve(sp::with_pattern(S, symmetrise(x[0], T)), x[1], tight()).x};
                  }});
    for (bool t : {false, true}) {
      cs.push_back({rlx::str_cat("bicgstab_solve transpose=", t, sfx),
                    {{n}, b},
                    {vals(N), random_vec(nb, 13)},
                    [t](auto x) {
                      return std::vector<Value>{
                          sp::bicgstab_solve(sp::with_pattern(N, x[0]), x[1], tight(t)).x};
                    }});
      cs.push_back({rlx::str_cat("gmres_solve transpose=", t, sfx),
                    {{n}, b},
                    {vals(N), random_vec(nb, 14)},
                    [t](auto x) {
                      return std::vector<Value>{
                          sp::gmres_solve(sp::with_pattern(N, x[0]), x[1], tight(t)).x};
                    }});
    }
  }
  return cs;
}

TEST(SparseGrad, EveryOpMatchesFiniteDifferences) {
  for (const auto& c : grad_cases()) {
    SCOPED_TRACE(c.name);
    check_grad(c);
  }
}

// Second order: hvp (jvp of grad, through the rules' own sparse.* ops) against central
// differences of grad along the tangent, for a loss quadratic in the outputs.
TEST(SparseGrad, HvpMatchesFiniteDifferencesOfGrad) {
  for (const auto& c : grad_cases()) {
    if (c.name.find("transpose=1") != std::string::npos ||
        c.name.find("b[n,k]") != std::string::npos)
      continue;
    SCOPED_TRACE(c.name);
    Graph g;
    std::vector<std::string> names;
    loss_graph(g, c, names, true);
    rlx::Session s(rlx::Device::cpu());
    auto bwd = s.compile(*rlx::grad(g, {.wrt = names}));
    auto hv = s.compile(*rlx::hvp(g, {.wrt = names}));
    std::vector<std::vector<double>> dirs;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      dirs.push_back(random_vec(int64_t(c.inputs[i].size()), 700 + i));
    auto at = [&](double t) {
      auto v = c.inputs;
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t e = 0; e < v[i].size(); ++e) v[i][e] += t * dirs[i][e];
      return feed(names, c, v);
    };
    const double eps = 1e-5;
    auto plus = bwd.run(at(eps)), minus = bwd.run(at(-eps));
    rlx::TensorMap in = at(0);
    for (size_t i = 0; i < names.size(); ++i)
      in["tan." + names[i]] = Tensor::from_doubles(DType::f64, c.shapes[i], dirs[i]);
    auto got = hv.run(in);
    for (size_t i = 0; i < names.size(); ++i) {
      auto p = plus.at("grad." + names[i]).to_doubles(),
           m = minus.at("grad." + names[i]).to_doubles();
      auto h = got.at("hvp." + names[i]).to_doubles();
      double scale = 1;
      for (size_t e = 0; e < p.size(); ++e)
        scale = std::max(scale, std::abs(p[e] - m[e]) / (2 * eps));
      for (size_t e = 0; e < h.size(); ++e)
        EXPECT_NEAR(h[e], (p[e] - m[e]) / (2 * eps), 1e-5 * scale)
            << "hvp of input " << i << " [" << e << "]";
    }
  }
}

TEST(SparseGrad, PatternAsGraphInputsGetsNoGradient) {
  sp::register_ops();
  SparseMatrix a = dominant(6, 4);
  Graph g;
  sp::Csr A = sp::input(g, "A", a);
  Value b = g.input("b", TensorType(DType::f64, {6}));
  g.output(rlx::sum(sp::lu_solve(A, b)), "loss");
  // Every float input by default: values and b, never the integer pattern.
  auto vg = rlx::vjp(g);
  std::vector<std::string> outs;
  for (const auto& o : vg->outputs()) outs.push_back(o.name);
  EXPECT_EQ(outs, (std::vector<std::string>{"loss", "grad.A.values", "grad.b"}));
  rlx::Session s(rlx::Device::cpu());
  auto r = s.compile(*vg).run({{"A.values", a.values},
                               {"A.col_idx", a.col_idx},
                               {"A.row_ptr", a.row_ptr},
                               {"b", Tensor::from_doubles(DType::f64, {6}, random_vec(6, 1))},
                               {"ct.loss", Tensor::from_doubles(DType::f64, {}, {1.0})}});
  // d(sum x)/db = A^-T 1: A^T times it is all ones.
  auto gb = r.at("grad.b").to_doubles();
  for (double y : host_product(a, gb, 1, true)) EXPECT_NEAR(y, 1.0, 1e-12);
}

// ---- vmap --------------------------------------------------------------------------------

using OpFn = std::function<std::vector<Value>(const sp::Csr&, Value)>;

// f vmapped over a batch of 3 (the operand batched at `axis`, the values too when asked)
// against f on each element.
void check_vmap(const std::string& name, const SparseMatrix& a, Shape64 shape, int axis,
                bool batch_values, const OpFn& f) {
  SCOPED_TRACE(rlx::str_cat(name, " axis ", axis, batch_values ? " values batched" : ""));
  sp::register_ops();
  Graph g;
  Value v = g.input("v", a.values.type());
  Value x = g.input("x", TensorType(DType::f64, rlx::to_shape(shape)));
  auto outs = f(sp::with_pattern(a, v), x);
  for (size_t i = 0; i < outs.size(); ++i) g.output(outs[i], "y" + std::to_string(i));
  rlx::VmapOptions vo;
  vo.in_axes["x"] = axis;
  vo.in_axes["v"] = batch_values ? 0 : rlx::kNotBatched;
  rlx::Session s(rlx::Device::cpu());
  auto cg = s.compile(*rlx::vmap(g, vo));
  auto one = s.compile(g);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<Tensor> xs, vs;
  std::vector<double> xcat, vcat;
  for (int e = 0; e < 3; ++e) {
    auto xe = random_vec(numel, 40 + uint64_t(e));
    auto ve = a.values.to_doubles();
    for (double& y : ve) y *= 1 + 0.1 * e;
    xs.push_back(Tensor::from_doubles(DType::f64, shape, xe));
    vs.push_back(Tensor::from_doubles(DType::f64, {a.nnz()}, ve));
    xcat.insert(xcat.end(), xe.begin(), xe.end());
    vcat.insert(vcat.end(), ve.begin(), ve.end());
  }
  Shape64 front = shape;
  front.insert(front.begin(), 3);
  std::vector<int64_t> perm;
  for (int64_t i = 1; i <= axis; ++i) perm.push_back(i);
  perm.push_back(0);
  for (int64_t i = axis + 1; i < int64_t(front.size()); ++i) perm.push_back(i);
  Tensor xb = Tensor::from_doubles(DType::f64, front, xcat).permute(perm).contiguous();
  Tensor vb = batch_values ? Tensor::from_doubles(DType::f64, {3, a.nnz()}, vcat) : a.values;
  auto res = cg.run({{"v", vb}, {"x", xb}});
  for (int e = 0; e < 3; ++e) {
    auto want = one.run({{"v", batch_values ? vs[size_t(e)] : a.values}, {"x", xs[size_t(e)]}});
    for (size_t o = 0; o < outs.size(); ++o) {
      std::string y = "y" + std::to_string(o);
      Tensor got = res.at(y).slice(0, e, e + 1).contiguous();
      auto gv = got.to_doubles(), wv = want.at(y).to_doubles();
      ASSERT_EQ(gv.size(), wv.size()) << y;
      for (size_t i = 0; i < gv.size(); ++i)
        EXPECT_NEAR(gv[i], wv[i], 1e-10 * (1 + std::abs(wv[i]))) << y << " element " << e;
    }
  }
}

std::vector<Value> all(sp::Solution s) { return {s.x, s.iterations, s.residual}; }

TEST(SparseVmap, RightHandSidesMatchALoop) {
  SparseMatrix R = random_sparse(7, 5, 3, 1), N = dominant(9, 2), S = sp::poisson2d(3);
  for (bool bv : {false, true}) {
    for (int axis : {0, 1}) {
      check_vmap("spmv", R, {5}, axis, bv,
                 [](auto A, auto x) { return std::vector<Value>{sp::spmv(A, x)}; });
      check_vmap("spmv_t", R, {7}, axis, bv,
                 [](auto A, auto x) { return std::vector<Value>{sp::spmv_t(A, x)}; });
      check_vmap("lu_solve", N, {9}, axis, bv,
                 [](auto A, auto x) { return std::vector<Value>{sp::lu_solve(A, x, true)}; });
      check_vmap("cg_solve", S, {9}, axis, bv,
                 [](auto A, auto x) { return all(sp::cg_solve(A, x, tight())); });
      // sddmm sums over its batch, so its vmap is a scan (per-example gradients need it).
      check_vmap("sddmm", N, {9}, axis, bv, [](auto A, auto x) {
        return std::vector<Value>{rlx::op("sparse.sddmm", {A.col_idx, A.row_ptr, x, x * 2.0})};
      });
    }
    for (int axis : {0, 2}) {
      check_vmap("spmm", R, {5, 2}, axis, bv,
                 [](auto A, auto x) { return std::vector<Value>{sp::spmm(A, x)}; });
      check_vmap("spmm_t", R, {7, 2}, axis, bv,
                 [](auto A, auto x) { return std::vector<Value>{sp::spmm_t(A, x)}; });
      check_vmap("cholesky_solve", S, {9, 2}, axis, bv,
                 [](auto A, auto x) { return std::vector<Value>{sp::cholesky_solve(A, x)}; });
      check_vmap("gmres_solve", N, {9, 2}, axis, bv,
                 [](auto A, auto x) { return all(sp::gmres_solve(A, x, tight())); });
      check_vmap("bicgstab_solve", N, {9, 2}, axis, bv,
                 [](auto A, auto x) { return all(sp::bicgstab_solve(A, x, tight(true))); });
    }
  }
}

// Batched right-hand sides run as one call: no scan in the vmapped graph.
TEST(SparseVmap, RightHandSidesNeedNoLoop) {
  sp::register_ops();
  SparseMatrix N = dominant(9, 2);
  Graph g;
  Value x = g.input("x", TensorType(DType::f64, {9}));
  sp::Csr A = sp::constant(g, N);
  g.output(sp::gmres_solve(A, sp::spmv(A, x)).x, "y");
  auto vg = rlx::vmap(g, {});
  int solves = 0;
  for (const auto& node : vg->nodes()) {
    EXPECT_NE(node.op_name(), "scan");
    solves += node.op_name() == "sparse.gmres_solve";
  }
  EXPECT_EQ(solves, 1);
}

}  // namespace
