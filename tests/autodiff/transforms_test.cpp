// The transforms as an API: names of added inputs and outputs, compositions (grad of
// grad, vmap of grad, jvp of vjp), Jacobians, symbolic shapes, rematerialisation, and the
// typed errors.
#include <gtest/gtest.h>

#include <cmath>

#include "op_tables/consistency.h"
#include "rlx/rlx.h"

namespace rlx::test {
namespace {

TensorMap run(const Graph& g, const TensorMap& in) {
  return Session(Device::cpu()).compile(g).run(in);
}

Tensor f64(std::vector<int64_t> shape, uint64_t seed) {
  return random_tensor(DType::f64, std::move(shape), seed, -1, 1);
}

void expect_near(const Tensor& got, const std::vector<double>& want, double tol = 1e-10) {
  std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "element " << i;
}

// loss = sum(tanh(x @ w + b)^2) over a symbolic batch.
std::unique_ptr<Graph> mlp_loss() {
  auto g = std::make_unique<Graph>("mlp");
  Value x = g->input("x", TensorType::parse("f64[batch,3]"));
  Value w = g->param("w", TensorType::parse("f64[3,2]"));
  Value b = g->param("b", TensorType::parse("f64[2]"));
  Value h = tanh(matmul(x, w) + b);
  g->output(sum(h * h), "loss");
  return g;
}

// Host reference of mlp_loss's gradients.
void mlp_reference(const Tensor& x, const Tensor& w, const Tensor& b, std::vector<double>& gw,
                   std::vector<double>& gb, double& loss) {
  std::vector<double> xv = values(x), wv = values(w), bv = values(b);
  int64_t n = x.shape()[0];
  gw.assign(6, 0);
  gb.assign(2, 0);
  loss = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      double z = bv[size_t(j)];
      for (int64_t k = 0; k < 3; ++k) z += xv[size_t(i * 3 + k)] * wv[size_t(k * 2 + j)];
      double h = std::tanh(z), dz = 2 * h * (1 - h * h);
      loss += h * h;
      gb[size_t(j)] += dz;
      for (int64_t k = 0; k < 3; ++k) gw[size_t(k * 2 + j)] += dz * xv[size_t(i * 3 + k)];
    }
}

TEST(Transforms, GradOfParamsOverSymbolicBatch) {
  auto g = mlp_loss();
  auto vg = value_and_grad(*g);  // wrt: every float param
  ASSERT_EQ(vg->outputs().size(), 3u);
  EXPECT_EQ(vg->outputs()[1].name, "grad.w");
  EXPECT_EQ(vg->outputs()[2].name, "grad.b");
  CompiledGraph cg = Session(Device::cpu()).compile(*vg);
  Tensor w = f64({3, 2}, 1), b = f64({2}, 2);
  cg.set_param("w", w);
  cg.set_param("b", b);
  for (int64_t n : {4, 7}) {  // two batch sizes, one compiled graph
    Tensor x = f64({n, 3}, uint64_t(10 + n));
    TensorMap out = cg.run({{"x", x}});
    std::vector<double> gw, gb;
    double loss;
    mlp_reference(x, w, b, gw, gb, loss);
    expect_near(out.at("loss"), {loss});
    expect_near(out.at("grad.w"), gw);
    expect_near(out.at("grad.b"), gb);
  }
}

TEST(Transforms, GradOfGradIsTheSecondDerivative) {
  Graph g;
  Value x = g.input("x", TensorType::parse("f64[]"));
  g.output(op("sin", {x}) * x, "f");  // f'' = 2 cos x - x sin x
  auto d2 = grad(*grad(g, {.wrt = {"x"}}), {.wrt = {"x"}, .output = "grad.x"});
  Tensor xv = tensor_of(DType::f64, {}, {0.7});
  expect_near(run(*d2, {{"x", xv}}).at("grad.x"), {2 * std::cos(0.7) - 0.7 * std::sin(0.7)});
}

TEST(Transforms, VmapOfGradGivesPerExampleGradients) {
  // Per-example gradient of sum(tanh(x . w)^2) w.r.t. w, batched over x.
  Graph g;
  Value x = g.input("x", TensorType::parse("f64[3]"));
  Value w = g.input("w", TensorType::parse("f64[3]"));
  Value h = tanh(sum(x * w));
  g.output(h * h, "loss");
  auto per = vmap(*grad(g, {.wrt = {"w"}}), {.in_axes = {{"w", kNotBatched}}});
  Tensor xs = f64({5, 3}, 3), wv = f64({3}, 4);
  Tensor res = run(*per, {{"x", xs}, {"w", wv}}).at("grad.w");
  ASSERT_EQ(res.shape(), (std::vector<int64_t>{5, 3}));
  std::vector<double> xd = values(xs), wd = values(wv), want;
  for (int i = 0; i < 5; ++i) {
    double z = 0;
    for (int k = 0; k < 3; ++k) z += xd[size_t(i * 3 + k)] * wd[size_t(k)];
    double t = std::tanh(z);
    for (int k = 0; k < 3; ++k) want.push_back(2 * t * (1 - t * t) * xd[size_t(i * 3 + k)]);
  }
  expect_near(res, want);
}

TEST(Transforms, JvpOfVjpAndJacobiansAgree) {
  // y = A x (A is 2x3): J = A. jacfwd and jacrev both give A; the jvp of the vjp along a
  // cotangent direction dct is A^T dct.
  Graph g;
  Value a = g.input("a", TensorType::parse("f64[2,3]"));
  Value x = g.input("x", TensorType::parse("f64[3]"));
  g.output(op("sin", {matmul(a, x)}), "y");
  Tensor av = f64({2, 3}, 5), xv = f64({3}, 6);
  TensorMap in{{"a", av}, {"x", xv}};
  Tensor jf = run(*jacfwd(g, {"x"}), in).at("jac.y.x");
  Tensor jr = run(*jacrev(g, {"x"}), in).at("jac.y.x");
  ASSERT_EQ(jf.shape(), (std::vector<int64_t>{2, 3}));
  std::vector<double> A = values(av), X = values(xv), want;
  for (int i = 0; i < 2; ++i) {
    double z = 0;
    for (int k = 0; k < 3; ++k) z += A[size_t(i * 3 + k)] * X[size_t(k)];
    for (int k = 0; k < 3; ++k) want.push_back(std::cos(z) * A[size_t(i * 3 + k)]);
  }
  expect_near(jf, want);
  expect_near(jr, want);

  // jvp of vjp: d/de [J(x)^T ct] along x-tangent e, checked against finite differences.
  auto v = vjp(g, {.wrt = {"x"}});
  auto jv = jvp(*v, {"x"});
  Tensor ct = f64({2}, 7), e = f64({3}, 8);
  TensorMap in2{{"a", av}, {"x", xv}, {"ct.y", ct}, {"tan.x", e}};
  Tensor got = run(*jv, in2).at("tan.grad.x");
  CompiledGraph vc = Session(Device::cpu()).compile(*v);
  auto at = [&](double s) {
    std::vector<double> xs = values(xv), ed = values(e);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] += s * ed[i];
    return values(
        vc.run({{"a", av}, {"x", tensor_of(DType::f64, {3}, xs)}, {"ct.y", ct}}).at("grad.x"));
  };
  std::vector<double> up = at(1e-6), down = at(-1e-6), fd;
  for (size_t i = 0; i < up.size(); ++i) fd.push_back((up[i] - down[i]) / 2e-6);
  expect_near(got, fd, 1e-7);
}

TEST(Transforms, HvpOfAQuadraticFormIsSymmetrisedMatrixTimesV) {
  Graph g;
  Value a = g.input("a", TensorType::parse("f64[3,3]"));
  Value x = g.input("x", TensorType::parse("f64[3]"));
  g.output(sum(x * matmul(a, x)), "q");  // H = A + A^T
  auto h = hvp(g, {.wrt = {"x"}});
  EXPECT_EQ(h->outputs()[0].name, "hvp.x");
  Tensor av = f64({3, 3}, 9), vv = f64({3}, 10);
  Tensor got = run(*h, {{"a", av}, {"x", f64({3}, 11)}, {"tan.x", vv}}).at("hvp.x");
  std::vector<double> A = values(av), V = values(vv), want(3, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      want[size_t(i)] += (A[size_t(i * 3 + j)] + A[size_t(j * 3 + i)]) * V[size_t(j)];
  expect_near(got, want);
}

// Peak bytes of the intermediates alive at once when the nodes run in order (static
// shapes), each value freed after its last use: what the runtime's liveness release does.
int64_t peak_live_bytes(const Graph& g) {
  std::vector<int64_t> last(g.num_values(), -1);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (Value v : nodes[i].inputs) last[size_t(v.id)] = int64_t(i);
  for (const Output& o : g.outputs()) last[size_t(o.value.id)] = int64_t(nodes.size());
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (Value v : nodes[i].outputs) live += *v.type().numel() * int64_t(dtype_size(v.dtype()));
    peak = std::max(peak, live);
    for (Value v : nodes[i].outputs)
      if (last[size_t(v.id)] <= int64_t(i))
        live -= *v.type().numel() * int64_t(dtype_size(v.dtype()));
    for (Value v : nodes[i].inputs)
      if (last[size_t(v.id)] == int64_t(i) && g.info(v).node >= 0)
        live -= *v.type().numel() * int64_t(dtype_size(v.dtype()));
  }
  return peak;
}

TEST(Transforms, RematRecomputesSegmentsWithTheSameGradients) {
  // A deep tanh MLP with a checkpoint after every layer.
  Graph g;
  Value h = g.input("x", TensorType::parse("f64[64,32]"));
  for (int l = 0; l < 6; ++l) {
    Value w = g.param(str_cat("w", l), TensorType::parse("f64[32,32]"));
    h = op("checkpoint", {tanh(tanh(matmul(h, w)) * 1.5)});
  }
  g.output(sum(h * h), "loss");
  auto plain = grad(g);
  auto remat = grad(g, {.remat = Remat::checkpoints});
  EXPECT_GT(remat->nodes().size(), plain->nodes().size());  // the recomputation
  EXPECT_LT(peak_live_bytes(*remat), peak_live_bytes(*plain));
  TensorMap in{{"x", f64({64, 32}, 12)}};
  CompiledGraph a = Session().compile(*plain), b = Session().compile(*remat);
  for (int l = 0; l < 6; ++l) {
    Tensor w = random_tensor(DType::f64, {32, 32}, uint64_t(20 + l), -0.3, 0.3);
    a.set_param(str_cat("w", l), w);
    b.set_param(str_cat("w", l), w);
  }
  TensorMap ga = a.run(in), gb = b.run(in);
  for (int l = 0; l < 6; ++l)
    expect_near(gb.at(str_cat("grad.w", l)), values(ga.at(str_cat("grad.w", l))), 1e-12);
}

TEST(Transforms, IntegerValuesCarryNoGradientAndRandomOpsAreConstants) {
  Graph g;
  Value x = g.input("x", TensorType::parse("f64[4]"));
  Value idx = op("argmax", {x});
  const Attrs draw{{"shape", IntList{4}}, {"dtype", DType::f64}, {"seed", 3}};
  Value noise = g.apply1("normal", {}, draw);
  g.output(sum(x * noise) + cast(idx, DType::f64), "loss");
  Tensor xv = f64({4}, 13);
  TensorMap out = run(*value_and_grad(g), {{"x", xv}});
  // d/dx = the noise itself (the same draw, as random ops are constants).
  Graph n;
  n.output(n.apply1("normal", {}, draw), "n");
  expect_near(out.at("grad.x"), values(run(n, {}).at("n")));
}

TEST(Transforms, ErrorsAreTyped) {
  auto g = mlp_loss();
  EXPECT_THROW(grad(*g, {.wrt = {"nope"}}), ValueError);
  Graph gi;
  Value i = gi.input("i", TensorType::parse("i32[3]"));
  Value f = gi.input("f", TensorType::parse("f32[3]"));
  gi.output(sum(f * cast(i, DType::f32)), "loss");
  gi.output(f, "vec");
  EXPECT_THROW(grad(gi, {.wrt = {"i"}}), TypeError);
  EXPECT_THROW(grad(gi, {.wrt = {"f"}, .output = "vec"}), ValueError);  // not a scalar
  EXPECT_THROW(grad(gi, {.wrt = {"f"}, .output = "missing"}), ValueError);
  EXPECT_THROW(vmap(gi, {.in_axes = {{"i", 5}}}), ValueError);
  EXPECT_THROW(vmap(gi, {.in_axes = {{"zzz", 0}}}), ValueError);
  // A symbolic output has no static cotangent basis.
  Graph gs;
  Value xs = gs.input("x", TensorType::parse("f32[batch,2]"));
  gs.output(xs * xs, "y");
  EXPECT_THROW(jacrev(gs), NotSupported);
}

}  // namespace
}  // namespace rlx::test
