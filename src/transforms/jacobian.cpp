// Jacobians: jacrev = vmap of vjp over the cotangent basis, jacfwd = vmap of jvp over the
// tangent basis. The basis is a constant, so shapes must be static.
#include "rlx/error.h"
#include "rlx/rules.h"
#include "transforms/common.h"

namespace rlx::detail {

namespace {

int64_t static_numel(const TensorType& t, const char* transform, const std::string& name) {
  auto n = t.numel();
  if (!n) fail<NotSupported>(transform, "expected a static shape for '", name, "', got ", t.str());
  return *n;
}

// The identity basis [n, shape…] of dtype dt.
Literal basis(DType dt, const TensorType& t, int64_t n) {
  std::vector<double> v(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[size_t(i * n + i)] = 1.0;
  std::vector<int64_t> shape{n};
  for (const Dim& d : t.shape) shape.push_back(d.value());
  return Literal::from_doubles(dt, shape, v);
}

Literal zeros(const TensorType& t) { return Literal::full(t.dtype, static_sizes(t.shape), 0.0); }

IntList concat_sizes(const TensorType& a, const TensorType& b) {
  IntList s = static_sizes(a.shape);
  for (int64_t d : static_sizes(b.shape)) s.push_back(d);
  return s;
}

// Batches `lin` (a vjp or jvp graph of g) over the extra input named `basis_name`, feeds
// the basis there and zeros to the other extra inputs, and inlines it into `out` with g's
// args mapped. Returns lin's outputs, each with its batch at axis 0 (or invalid when the
// output does not depend on the basis).
std::vector<Value> batch_over_basis(const Graph& g, const Graph& lin, Graph& out,
                                    const ValueMap& map, const std::string& basis_name, int64_t n) {
  std::vector<int> in_axes(lin.args().size(), -1);
  std::vector<Value> args;
  for (size_t i = 0; i < lin.args().size(); ++i) {
    const Arg& a = lin.args()[i];
    const TensorType& t = lin.type(a.value);
    if (const Arg* orig = g.find_arg(a.name)) {
      args.push_back(mapped(map, orig->value));
    } else if (a.name == basis_name) {
      in_axes[i] = 0;
      args.push_back(out.constant(basis(t.dtype, t, n)));
    } else {
      args.push_back(out.constant(zeros(t)));
    }
  }
  std::vector<int> chosen;
  auto batched = transform::vmap(lin, in_axes, {}, Dim(n), &chosen);
  std::vector<Value> res = inline_graph(*batched, out, args);
  for (size_t k = 0; k < res.size(); ++k)
    res[k] = chosen[k] < 0 ? Value{} : rules::moveaxis(res[k], chosen[k], 0);
  return res;
}

Value reshape_to(Value v, const IntList& shape) { return op("reshape", {v}, {{"shape", shape}}); }

}  // namespace

}  // namespace rlx::detail

namespace rlx {

using namespace detail;

std::unique_ptr<Graph> jacrev(const Graph& g, const std::vector<std::string>& wrt_names) {
  std::vector<int> wrt = resolve_wrt(g, wrt_names, "jacrev");
  std::vector<std::string> names;
  for (int i : wrt) names.push_back(g.args()[size_t(i)].name);
  auto lin = vjp(g, {.wrt = names});
  auto out = derived_graph(g, "jacrev");
  ValueMap map = copy_args(g, *out);
  size_t n_out = g.outputs().size();
  for (const Output& y : g.outputs()) {
    const TensorType& yt = g.type(y.value);
    if (!is_float(yt.dtype)) continue;
    int64_t m = static_numel(yt, "jacrev", y.name);
    std::vector<Value> res = batch_over_basis(g, *lin, *out, map, str_cat("ct.", y.name), m);
    for (size_t j = 0; j < wrt.size(); ++j) {
      const TensorType& xt = g.type(g.args()[size_t(wrt[j])].value);
      static_numel(xt, "jacrev", names[j]);
      IntList shape = concat_sizes(yt, xt);
      Value r = res[n_out + j];
      Value jac =
          r.valid() ? reshape_to(r, shape) : out->constant(Literal::full(xt.dtype, shape, 0.0));
      out->output(jac, str_cat("jac.", y.name, ".", names[j]));
    }
  }
  return prune(*out);
}

std::unique_ptr<Graph> jacfwd(const Graph& g, const std::vector<std::string>& wrt_names) {
  std::vector<int> wrt = resolve_wrt(g, wrt_names, "jacfwd");
  std::vector<std::string> names;
  for (int i : wrt) names.push_back(g.args()[size_t(i)].name);
  auto lin = jvp(g, names);
  auto out = derived_graph(g, "jacfwd");
  ValueMap map = copy_args(g, *out);
  // jac[y][x], filled per x, emitted per y so the output order matches jacrev's.
  std::vector<std::vector<Value>> jac(g.outputs().size(), std::vector<Value>(wrt.size()));
  for (size_t j = 0; j < wrt.size(); ++j) {
    const TensorType& xt = g.type(g.args()[size_t(wrt[j])].value);
    int64_t n = static_numel(xt, "jacfwd", names[j]);
    std::vector<Value> res = batch_over_basis(g, *lin, *out, map, str_cat("tan.", names[j]), n);
    size_t t = g.outputs().size();  // tangent outputs follow g's outputs
    for (size_t k = 0; k < g.outputs().size(); ++k) {
      const TensorType& yt = g.type(g.outputs()[k].value);
      if (!is_float(yt.dtype)) continue;
      static_numel(yt, "jacfwd", g.outputs()[k].name);
      Value r = res[t++];
      IntList shape = concat_sizes(yt, xt);
      jac[k][j] = r.valid() ? reshape_to(rules::moveaxis(r, 0, -1), shape)
                            : out->constant(Literal::full(yt.dtype, shape, 0.0));
    }
  }
  for (size_t k = 0; k < g.outputs().size(); ++k)
    for (size_t j = 0; j < wrt.size(); ++j)
      if (jac[k][j].valid())
        out->output(jac[k][j], str_cat("jac.", g.outputs()[k].name, ".", names[j]));
  return prune(*out);
}

}  // namespace rlx
