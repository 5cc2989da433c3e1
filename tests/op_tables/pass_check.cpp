#include "op_tables/pass_check.h"

#include <gtest/gtest.h>

#include <cmath>

#include "op_tables/consistency.h"
#include "rlx/text.h"
#include "rlx/verify.h"

namespace rlx::test {

namespace {

std::vector<Tensor> random_args(const Graph& g, uint64_t seed, double lo, double hi) {
  std::vector<Tensor> args;
  for (const Arg& a : g.args()) {
    const TensorType& t = a.value.type();
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape) shape.push_back(d.is_static() ? d.value() : 3);
    args.push_back(random_tensor(t.dtype, shape, seed++, lo, hi));
  }
  return args;
}

std::vector<Tensor> run_all(const Graph& g, const CompileOptions& options,
                            const std::vector<Tensor>& args) {
  CompiledGraph cg = Session(Device::cpu()).compile(g, options);
  std::vector<Tensor> inputs;
  size_t p = 0;
  std::vector<std::string> params = cg.param_names();
  for (size_t i = 0; i < g.args().size(); ++i) {
    if (g.args()[i].kind == ArgKind::input) {
      inputs.push_back(args[i]);
    } else {
      cg.set_param(params[p++], args[i]);
    }
  }
  return cg.run(inputs);
}

void compare(const Graph& g, const std::vector<Tensor>& want, const std::vector<Tensor>& got,
             double rtol, double atol) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string& name = g.outputs()[i].name;
    ASSERT_EQ(want[i].dtype(), got[i].dtype()) << "output " << name;
    ASSERT_EQ(want[i].shape(), got[i].shape()) << "output " << name;
    std::vector<double> a = values(want[i]), b = values(got[i]);
    bool exact = !is_float(want[i].dtype());
    size_t bad = 0;
    for (size_t j = 0; j < a.size(); ++j) {
      bool ok = exact ? a[j] == b[j]
                      : (std::isnan(a[j]) && std::isnan(b[j])) || a[j] == b[j] ||
                            std::abs(a[j] - b[j]) <= atol + rtol * std::abs(a[j]);
      if (!ok && bad++ < 5)
        ADD_FAILURE() << "output " << name << " element " << j << ": expected " << a[j] << ", got "
                      << b[j];
    }
    EXPECT_EQ(bad, 0u) << "output " << name << ": " << bad << " of " << a.size() << " differ";
  }
}

CompileOptions no_passes() {
  CompileOptions o;
  o.opt_level = 0;
  return o;
}

}  // namespace

void expect_same_outputs(const Graph& g, const CompileOptions& options, uint64_t seed, double rtol,
                         double atol, double lo, double hi) {
  std::vector<Tensor> args = random_args(g, seed, lo, hi);
  std::vector<Tensor> want = run_all(g, no_passes(), args);
  std::vector<Tensor> got = run_all(g, options, args);
  compare(g, want, got, rtol, atol);
}

void expect_same_outputs(const Graph& a, const Graph& b, uint64_t seed, double rtol, double atol,
                         double lo, double hi) {
  std::vector<Tensor> args = random_args(a, seed, lo, hi);
  compare(a, run_all(a, no_passes(), args), run_all(b, no_passes(), args), rtol, atol);
}

void expect_pass(std::string_view pass, std::string_view before, std::string_view after,
                 const PassCheckOptions& options) {
  std::unique_ptr<Graph> g = parse_graph(before);
  std::unique_ptr<Graph> out = run_pass(pass, *g, session_like(options.ctx));
  if (after.empty()) {
    EXPECT_EQ(out, nullptr) << "expected pass '" << pass << "' to change nothing, got\n"
                            << print_graph(*out);
    return;
  }
  ASSERT_NE(out, nullptr) << "expected pass '" << pass << "' to change the graph";
  EXPECT_NO_THROW(verify(*out)) << print_graph(*out);
  EXPECT_EQ(print_graph(*out), print_graph(*parse_graph(after)));
  if (options.compare_outputs)
    expect_same_outputs(*g, *out, 1, options.rtol, options.atol, options.lo, options.hi);
}

}  // namespace rlx::test
