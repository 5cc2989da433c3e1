// Property test of the whole pipeline: random graphs of elementwise, broadcast, reduce,
// matmul, reshape, transpose and concat ops give the same results with every pass on
// (opt level 2) as with none — bitwise for integer graphs, within a tolerance for float
// ones — and so do their gradients, whether the passes run before autodiff or after.
#include <gtest/gtest.h>

#include <random>

#include "op_tables/pass_check.h"
#include "rlx/rlx.h"
#include "transforms/common.h"

namespace rlx {
namespace {

using Shape64 = std::vector<int64_t>;

Shape64 static_shape(Value v) {
  Shape64 s;
  for (const Dim& d : v.shape()) s.push_back(d.value());
  return s;
}

// "x3": appended rather than concatenated, which g++ 12 misreads as overlapping memcpy.
std::string numbered(char prefix, int i) {
  std::string s(1, prefix);
  s.append(std::to_string(i));
  return s;
}

// Builds one random graph. Values are kept in a pool; each step applies a random op to
// values drawn from it, choosing partners whose shapes broadcast.
class RandomGraph {
 public:
  RandomGraph(uint64_t seed, DType dtype) : rng_(seed), dtype_(dtype) {}

  std::unique_ptr<Graph> build() {
    g_ = std::make_unique<Graph>("random");
    base_ = random_shape();
    int n_inputs = 1 + pick(2);
    for (int i = 0; i < n_inputs; ++i)
      pool_.push_back(g_->input(numbered('x', i), {dtype_, to_shape(sub_shape(base_))}));
    pool_.push_back(g_->param("w", {dtype_, to_shape(sub_shape(base_))}));
    int steps = 6 + pick(20);
    for (int i = 0; i < steps; ++i) pool_.push_back(step());
    // Outputs: the last value, and sometimes an intermediate (multi-use values).
    g_->output(pool_.back(), "out");
    if (pick(2)) g_->output(pool_[pool_.size() / 2], "mid");
    return std::move(g_);
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  Value any() { return pool_[size_t(pick(int(pool_.size())))]; }
  Value recent() {
    return pool_[pool_.size() - 1 - size_t(pick(std::min<int>(4, int(pool_.size()))))];
  }
  bool is_f() const { return is_float(dtype_); }

  Shape64 random_shape() {
    Shape64 s(size_t(1 + pick(3)));
    for (auto& d : s) d = 1 + pick(5);
    return s;
  }
  // A shape that broadcasts to s: some dims set to 1, maybe fewer leading dims.
  Shape64 sub_shape(const Shape64& s) {
    Shape64 out(s.begin() + pick(int(s.size())) * (pick(3) == 0), s.end());
    for (auto& d : out)
      if (pick(4) == 0) d = 1;
    return out;
  }

  Value constant(const Shape64& shape, double v) {
    return g_->constant(Literal::full(dtype_, shape, v));
  }
  // A partner for x in a binary op: a constant (sometimes the identity, so simplify has
  // work), an earlier value whose shape broadcasts with x's, or a new param.
  Value partner(Value x, double identity) {
    Shape64 xs = static_shape(x);
    switch (pick(5)) {
      case 0:
        return constant(pick(2) ? Shape64{} : sub_shape(xs), identity);
      case 1:
        return constant(sub_shape(xs), is_f() ? 0.5 + pick(4) : 1 + pick(3));
      case 2:
        for (int tries = 0; tries < 8; ++tries) {
          Value c = any();
          if (static_shape(c) == xs) return c;
        }
        [[fallthrough]];
      default:
        return g_->param(numbered('p', params_++), {dtype_, to_shape(sub_shape(xs))});
    }
  }

  Value step() {
    Value x = recent();
    Shape64 xs = static_shape(x);
    int64_t r = int64_t(xs.size());
    if (r == 0)  // after a full reduction: back to rank 1 (a reshape of a scalar)
      return pick(2) ? op("reshape", {x}, {{"shape", IntList{1}}})
                     : op("expand_dims", {x}, {{"axes", IntList{0}}});
    switch (pick(12)) {
      case 0:
      case 1: {  // unary chains: the bread and butter of elementwise fusion
        static const char* kFloat[] = {"relu", "tanh", "sigmoid", "neg", "abs", "square", "silu"};
        static const char* kInt[] = {"neg", "abs", "square", "relu"};
        return is_f() ? op(kFloat[pick(7)], {x}) : op(kInt[pick(4)], {x});
      }
      case 2:
      case 3: {
        static const char* kBin[] = {"add", "sub", "mul", "max", "min"};
        int k = pick(5);
        double identity = k == 2 ? 1.0 : 0.0;
        Value y = partner(x, identity);
        return pick(4) == 0 ? op(kBin[k], {y, x}) : op(kBin[k], {x, y});
      }
      case 4:  // division by a constant (→ multiplication) and by one (→ nothing)
        return is_f() ? op("div", {x, constant({}, pick(2) ? 1.0 : 4.0)}) : op("neg", {x});
      case 5: {  // a reduction over random axes
        IntList axes;
        for (int64_t a = 0; a < r; ++a)
          if (pick(2)) axes.push_back(pick(2) ? a : a - r);
        static const char* kRed[] = {"sum", "reduce_max", "mean"};
        const char* name = kRed[pick(is_f() ? 3 : 2)];
        return op(name, {x}, {{"axes", axes}, {"keepdims", pick(2) == 1}});
      }
      case 6: {  // transpose, sometimes twice (which cancels)
        IntList perm(static_cast<size_t>(r));
        for (int64_t i = 0; i < r; ++i) perm[size_t(i)] = i;
        std::shuffle(perm.begin(), perm.end(), rng_);
        Value t = op("transpose", {x}, {{"perm", perm}});
        if (pick(2)) {
          IntList inv(static_cast<size_t>(r));
          for (int64_t i = 0; i < r; ++i) inv[size_t(perm[size_t(i)])] = i;
          t = op("transpose", {t}, {{"perm", inv}});
        }
        return t;
      }
      case 7: {  // reshape: flatten, or a chain through a flat view
        int64_t n = 1;
        for (int64_t d : xs) n *= d;
        Value flat = op("reshape", {x}, {{"shape", IntList{n}}});
        return pick(2) ? flat : op("reshape", {flat}, {{"shape", IntList(xs.begin(), xs.end())}});
      }
      case 8: {  // matmul with a param or with x transposed (x xᵀ)
        if (r < 2 || !is_f()) return op("relu", {x});
        if (pick(2)) {
          IntList perm;
          for (int64_t i = 0; i < r - 2; ++i) perm.push_back(i);
          perm.push_back(r - 1);
          perm.push_back(r - 2);
          return matmul(x, op("transpose", {x}, {{"perm", perm}}));
        }
        Value w = g_->param(numbered('m', params_++), {dtype_, {xs.back(), Dim(1 + pick(4))}});
        Value y = matmul(x, w);
        if (pick(2)) y = y + constant({static_shape(y).back()}, 1.0);  // a bias
        return pick(2) ? op("relu", {y}) : y;
      }
      case 9: {  // concat with itself or a same-shaped value
        Value y = pick(2) ? x : partner(x, 0.0);
        if (static_shape(y) != xs) y = x;
        return op("concat", {x, y}, {{"axis", int64_t(pick(int(r)))}});
      }
      case 10: {  // casts that cancel, and one that does not
        if (!is_f())
          return op("cast", {op("cast", {x}, {{"dtype", DType::i64}})}, {{"dtype", dtype_}});
        Value c = op("cast", {x}, {{"dtype", DType::f64}});
        return op("cast", {pick(2) ? op("relu", {c}) : c}, {{"dtype", dtype_}});
      }
      default: {  // expand_dims + broadcast partner, then squeeze back
        Value e = op("expand_dims", {x}, {{"axes", IntList{0}}});
        Value y = op("add", {e, partner(e, 0.0)});
        return static_shape(y)[0] == 1 ? op("squeeze", {y}, {{"axes", IntList{0}}}) : y;
      }
    }
  }

  std::mt19937_64 rng_;
  DType dtype_;
  std::unique_ptr<Graph> g_;
  Shape64 base_;
  std::vector<Value> pool_;
  int params_ = 0;
};

CompileOptions all_passes() {
  CompileOptions o;
  o.opt_level = 2;
  o.cache = false;
  return o;
}

class PipelineProperty : public testing::TestWithParam<int> {};

TEST_P(PipelineProperty, FloatGraphsMatchWithAndWithoutPasses) {
  for (int i = 0; i < 10; ++i) {
    uint64_t seed = uint64_t(GetParam()) * 1000 + uint64_t(i);
    auto g = RandomGraph(seed, DType::f32).build();
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(*g));
    test::expect_same_outputs(*g, all_passes(), seed, 1e-4, 1e-5);
  }
}

TEST_P(PipelineProperty, IntegerGraphsMatchBitwise) {
  for (int i = 0; i < 10; ++i) {
    uint64_t seed = uint64_t(GetParam()) * 1000 + 500 + uint64_t(i);
    auto g = RandomGraph(seed, DType::i32).build();
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(*g));
    test::expect_same_outputs(*g, all_passes(), seed, 0, 0, -3, 3);
  }
}

// A scalar loss over a random float graph: the sum of its outputs' squares.
std::unique_ptr<Graph> with_loss(const Graph& g) {
  auto out = std::make_unique<Graph>("loss");
  detail::ValueMap map = detail::copy_args(g, *out);
  detail::copy_nodes(g, *out, map);
  Value loss;
  for (const Output& o : g.outputs()) {
    Value v = detail::mapped(map, o.value);
    Value s = sum(v * v);
    loss = loss.valid() ? loss + s : s;
  }
  out->output(loss, "loss");
  return out;
}

TEST_P(PipelineProperty, GradientsMatchWithPassesBeforeOrAfterAutodiff) {
  for (int i = 0; i < 5; ++i) {
    uint64_t seed = uint64_t(GetParam()) * 1000 + 800 + uint64_t(i);
    auto g = with_loss(*RandomGraph(seed, DType::f64).build());
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + print_graph(*g));
    GradOptions go;
    go.wrt = {};
    for (const Arg& a : g->args()) go.wrt.push_back(a.name);
    auto plain = grad(*g, go);
    // Passes after autodiff: the grad graph compiled with every pass.
    test::expect_same_outputs(*plain, all_passes(), seed, 1e-9, 1e-10);
    // Passes before autodiff: grad of the optimized (fused) graph.
    std::vector<std::string> pipeline = default_pipeline(Device::cpu(), 2);
    auto fused = run_pipeline(*g, pipeline, test::session_like({})).graph;
    auto fused_grad = grad(*fused, go);
    test::expect_same_outputs(*plain, *fused_grad, seed, 1e-9, 1e-10);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PipelineProperty, testing::Range(0, 10));

}  // namespace
}  // namespace rlx
