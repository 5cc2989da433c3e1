#include "op_tables/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "rlx/rules.h"
#include "rlx/transforms.h"

namespace rlx::test {

void GradTable::append(GradTable other) {
  for (auto& c : other.checks) checks.push_back(std::move(c));
  for (auto& e : other.exempt) exempt.push_back(std::move(e));
}

GradTable all_grads() {
  GradTable t;
  t.append(grads_elementwise());
  t.append(grads_reduce());
  t.append(grads_shape());
  t.append(grads_nn());
  t.append(grads_conv());
  t.append(grads_control());
  t.append(grads_autodiff());
  t.append(grads_fused());
  t.append(grads_quant());
  t.append(grads_complex());
  t.append(grads_llm());
  t.append(grads_region());
  return t;
}

namespace {

uint64_t name_seed(const std::string& s) { return fnv1a64(s.data(), s.size()) % 100000; }

std::string input_name(size_t i) { return str_cat("x", i); }

// Float and complex values carry gradients. A complex tensor's values() are (re, im)
// pairs: finite differences step each part, and a gradient in JAX's convention is
// dL/dre - i dL/dim (ops/complex.cpp).
bool differentiable(const Tensor& t) { return rules::has_tangents(t.dtype()); }

std::vector<int> wrt_of(const GradCheck& c) {
  if (!c.wrt.empty()) return c.wrt;
  std::vector<int> w;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (differentiable(c.inputs[i])) w.push_back(int(i));
  return w;
}

std::vector<std::string> wrt_names(const GradCheck& c) {
  std::vector<std::string> n;
  for (int i : wrt_of(c)) n.push_back(input_name(size_t(i)));
  return n;
}

// The op as a graph over inputs x0…: outputs y0… (every output of the op).
std::unique_ptr<Graph> op_graph(const GradCheck& c) {
  auto g = std::make_unique<Graph>("check");
  std::vector<Value> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ins.push_back(g->input(input_name(i), c.inputs[i].type()));
  std::vector<Value> outs = g->apply(c.op, ins, c.attrs, c.subgraphs);
  for (size_t k = 0; k < outs.size(); ++k) g->output(outs[k], str_cat("y", k));
  return g;
}

// loss = sum_k sum(y_k * w_k) over the float outputs, w_k fixed random weights: every
// output element matters, with a different weight (complex y_k: re(y_k * w_k), w_k complex).
std::unique_ptr<Graph> loss_graph(const GradCheck& c) {
  auto g = std::make_unique<Graph>("check");
  std::vector<Value> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ins.push_back(g->input(input_name(i), c.inputs[i].type()));
  std::vector<Value> outs = g->apply(c.op, ins, c.attrs, c.subgraphs);
  Value loss;
  for (size_t k = 0; k < outs.size(); ++k) {
    const TensorType t = outs[k].type();  // a copy: adding nodes may move the graph's values
    if (!rules::has_tangents(t.dtype)) continue;
    Tensor w = random_tensor(t.dtype, static_sizes(t.shape), 7 + k, 0.5, 1.5);
    Value weighted = outs[k] * g->constant(w.to_literal());
    Value term = sum(is_complex(t.dtype) ? op("real", {weighted}) : weighted);
    loss = loss.valid() ? loss + term : term;
  }
  if (!loss.valid()) fail<ValueError>("gradcheck", "expected a float output of ", c.op);
  g->output(loss, "loss");
  return g;
}

Device& check_device() {
  static Device d = Device::cpu();
  return d;
}

// Host inputs go over to the device; the outputs come back.
Tensors run(const CompiledGraph& cg, const Tensors& inputs) {
  std::vector<Tensor> out = cg.run(std::span<const Tensor>(inputs));
  for (Tensor& t : out) t = t.to(Device::cpu());
  return out;
}

CompiledGraph compile(const Graph& g) { return Session(check_device()).compile(g); }

// x + s * d elementwise (float or complex tensors of one shape).
Tensor axpy(const Tensor& x, double s, const Tensor& d) {
  std::vector<double> a = values(x), b = values(d);
  for (size_t i = 0; i < a.size(); ++i) a[i] += s * b[i];
  return tensor_of(x.dtype(), x.shape(), a);
}

// x with values()[j] moved by delta (a complex x: one part of one element).
Tensor with_element(const Tensor& x, size_t j, double delta) {
  std::vector<double> a = values(x);
  a[j] += delta;
  return tensor_of(x.dtype(), x.shape(), a);
}

// "" when got ≈ want within rtol * max(1, max |want|), else the first mismatch.
std::string compare(const Tensor& got, const std::vector<double>& want, double rtol,
                    const std::string& what) {
  std::vector<double> g = values(got);
  if (g.size() != want.size())
    return str_cat(what, ": expected ", want.size(), " elements, got ", g.size(), " (",
                   got.type().str(), ")");
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < g.size(); ++i) {
    bool both_nan = std::isnan(g[i]) && std::isnan(want[i]);
    if (!both_nan && !(std::abs(g[i] - want[i]) <= rtol * scale))
      return str_cat(what, ": element ", i, " is ", g[i], ", expected ", want[i], " (error ",
                     std::abs(g[i] - want[i]), " > ", rtol * scale, ")");
  }
  return {};
}

void check_vjp(const GradCheck& c, std::vector<std::string>& fails) {
  auto lg = loss_graph(c);
  auto dg = grad(*lg, {.wrt = wrt_names(c)});
  Tensors grads = run(compile(*dg), c.inputs);
  CompiledGraph f = compile(*lg);
  std::vector<int> wrt = wrt_of(c);
  for (size_t w = 0; w < wrt.size(); ++w) {
    size_t i = size_t(wrt[w]);
    const bool cx = is_complex(c.inputs[i].dtype());
    std::vector<double> fd(values(c.inputs[i]).size());
    for (size_t j = 0; j < fd.size(); ++j) {
      Tensors in = c.inputs;
      in[i] = with_element(c.inputs[i], j, c.eps);
      double up = values(run(f, in)[0])[0];
      in[i] = with_element(c.inputs[i], j, -c.eps);
      double down = values(run(f, in)[0])[0];
      fd[j] = (up - down) / (2 * c.eps) * (cx && j % 2 ? -1 : 1);  // dL/dre - i dL/dim
    }
    std::string e = compare(grads[w], fd, c.rtol, str_cat("vjp d/d", input_name(i)));
    if (!e.empty()) fails.push_back(e);
  }
}

// Random tangents for the wrt inputs.
Tensors tangents(const GradCheck& c) {
  Tensors t;
  for (int i : wrt_of(c))
    t.push_back(random_tensor(c.inputs[size_t(i)].dtype(), c.inputs[size_t(i)].shape(),
                              101 + uint64_t(i), -1, 1));
  return t;
}

void check_jvp(const GradCheck& c, std::vector<std::string>& fails) {
  auto g = op_graph(c);
  auto jg = jvp(*g, wrt_names(c));
  Tensors t = tangents(c);
  Tensors in = c.inputs;
  in.insert(in.end(), t.begin(), t.end());
  Tensors res = run(compile(*jg), in);
  CompiledGraph f = compile(*g);
  std::vector<int> wrt = wrt_of(c);
  Tensors up = c.inputs, down = c.inputs;
  for (size_t w = 0; w < wrt.size(); ++w) {
    up[size_t(wrt[w])] = axpy(c.inputs[size_t(wrt[w])], c.eps, t[w]);
    down[size_t(wrt[w])] = axpy(c.inputs[size_t(wrt[w])], -c.eps, t[w]);
  }
  Tensors yu = run(f, up), yd = run(f, down);
  size_t nout = g->outputs().size(), k = nout;
  for (size_t o = 0; o < nout; ++o) {
    if (!differentiable(yu[o])) continue;
    std::vector<double> a = values(yu[o]), b = values(yd[o]);
    for (size_t j = 0; j < a.size(); ++j) a[j] = (a[j] - b[j]) / (2 * c.eps);
    std::string e = compare(res[k++], a, c.rtol, str_cat("jvp of y", o));
    if (!e.empty()) fails.push_back(e);
  }
}

void check_hvp(const GradCheck& c, std::vector<std::string>& fails) {
  auto lg = loss_graph(c);
  auto hg = hvp(*lg, {.wrt = wrt_names(c)});
  auto dg = grad(*lg, {.wrt = wrt_names(c)});
  Tensors v = tangents(c);
  Tensors in = c.inputs;
  in.insert(in.end(), v.begin(), v.end());
  Tensors res = run(compile(*hg), in);
  CompiledGraph f = compile(*dg);
  std::vector<int> wrt = wrt_of(c);
  double eps = c.eps * 10;
  Tensors up = c.inputs, down = c.inputs;
  for (size_t w = 0; w < wrt.size(); ++w) {
    up[size_t(wrt[w])] = axpy(c.inputs[size_t(wrt[w])], eps, v[w]);
    down[size_t(wrt[w])] = axpy(c.inputs[size_t(wrt[w])], -eps, v[w]);
  }
  Tensors gu = run(f, up), gd = run(f, down);
  for (size_t w = 0; w < wrt.size(); ++w) {
    std::vector<double> a = values(gu[w]), b = values(gd[w]);
    for (size_t j = 0; j < a.size(); ++j) a[j] = (a[j] - b[j]) / (2 * eps);
    std::string e = compare(res[w], a, c.rtol * 10, str_cat("hvp d/d", input_name(size_t(wrt[w]))));
    if (!e.empty()) fails.push_back(e);
  }
}

// Batch element b of x: the values scaled (floats), or the same values (integers and
// bools: they are often indices that must stay in range).
Tensor batch_element(const Tensor& x, int64_t b) {
  if (!differentiable(x)) return x;
  std::vector<double> v = values(x);
  for (double& e : v) e *= 1.0 + 0.25 * double(b);
  return tensor_of(x.dtype(), x.shape(), v);
}

// The B elements stacked at `axis`.
Tensor stack(const Tensors& elems, int64_t axis) {
  std::vector<int64_t> shape = elems[0].shape();
  std::vector<int64_t> stacked = shape;
  stacked.insert(stacked.begin() + axis, int64_t(elems.size()));
  const size_t width = is_complex(elems[0].dtype()) ? 2 : 1;  // doubles an element
  std::vector<double> out(size_t(numel(stacked)) * width);
  for (size_t b = 0; b < elems.size(); ++b) {
    std::vector<double> v = values(elems[b]);
    for (size_t j = 0; j < v.size(); ++j) {
      std::vector<int64_t> idx = unravel(int64_t(j / width), shape);
      idx.insert(idx.begin() + axis, int64_t(b));
      out[size_t(ravel(idx, stacked)) * width + j % width] = v[j];
    }
  }
  return tensor_of(elems[0].dtype(), stacked, out);
}

constexpr int64_t kBatch = 3;

void check_vmap_variant(const GradCheck& c, const std::vector<int>& in_axes, int out_axis,
                        const std::string& what, std::vector<std::string>& fails) {
  auto g = op_graph(c);
  VmapOptions o;
  o.size = Dim(kBatch);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    o.in_axes[input_name(i)] = in_axes[i] < 0 ? kNotBatched : in_axes[i];
  for (const Output& out : g->outputs()) o.out_axes[out.name] = out_axis;
  auto vg = vmap(*g, o);
  Tensors batched;
  std::vector<Tensors> per(static_cast<size_t>(kBatch));
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensors elems;
    for (int64_t b = 0; b < kBatch; ++b) elems.push_back(batch_element(c.inputs[i], b));
    batched.push_back(in_axes[i] < 0 ? c.inputs[i] : stack(elems, in_axes[i]));
    for (int64_t b = 0; b < kBatch; ++b)
      per[size_t(b)].push_back(in_axes[i] < 0 ? c.inputs[i] : elems[size_t(b)]);
  }
  Tensors res = run(compile(*vg), batched);
  CompiledGraph f = compile(*g);
  std::vector<Tensors> loop;
  for (int64_t b = 0; b < kBatch; ++b) loop.push_back(run(f, per[size_t(b)]));
  for (size_t k = 0; k < res.size(); ++k) {
    Tensors elems;
    for (auto& l : loop) elems.push_back(l[k]);
    int64_t ax = out_axis < 0 ? out_axis + elems[0].rank() + 1 : out_axis;
    std::string e = compare(res[k], values(stack(elems, ax)), 1e-9, str_cat(what, " y", k));
    if (!e.empty()) fails.push_back(e);
  }
}

void check_vmap(const GradCheck& c, std::vector<std::string>& fails) {
  size_t n = c.inputs.size();
  std::vector<int> front(n, 0), back(n), first_only(n, -1);
  for (size_t i = 0; i < n; ++i) back[i] = int(c.inputs[i].rank());
  first_only[0] = 0;
  check_vmap_variant(c, front, 0, "vmap in_axes 0", fails);
  check_vmap_variant(c, back, -1, "vmap in_axes last, out_axes -1", fails);
  if (n > 1) check_vmap_variant(c, first_only, 0, "vmap only x0 batched", fails);
  if (n > 1) {
    std::vector<int> last_only(n, -1);
    last_only[n - 1] = int(c.inputs[n - 1].rank());
    check_vmap_variant(c, last_only, 0, "vmap only last input batched", fails);
  }
}

template <class F>
void guarded(const char* what, F f, std::vector<std::string>& fails) {
  try {
    f();
  } catch (const std::exception& e) {
    fails.push_back(str_cat(what, " threw: ", e.what()));
  }
}

}  // namespace

GradCheck grad_check(std::string op, std::vector<std::vector<int64_t>> shapes, Attrs attrs,
                     double lo, double hi, std::string note) {
  GradCheck c;
  uint64_t seed = name_seed(op + note);
  for (size_t i = 0; i < shapes.size(); ++i)
    c.inputs.push_back(random_tensor(DType::f64, shapes[i], seed + i, lo, hi));
  c.op = std::move(op);
  c.attrs = std::move(attrs);
  c.note = std::move(note);
  return c;
}

GradCheck with_inputs(std::string op, Tensors inputs, Attrs attrs, std::string note) {
  GradCheck c;
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.attrs = std::move(attrs);
  c.note = std::move(note);
  return c;
}

Tensor away_from_zero(std::vector<int64_t> shape, uint64_t seed, double gap, double hi) {
  Tensor u = random_tensor(DType::f64, shape, seed, -1, 1);
  std::vector<double> v = values(u);
  for (double& x : v) x = (x < 0 ? -1 : 1) * (gap + std::abs(x) * (hi - gap));
  return Tensor::from_doubles(DType::f64, std::move(shape), v);
}

void set_grad_check_device(Device d) { check_device() = d; }

std::vector<std::string> run_grad_check(const GradCheck& c) {
  std::vector<std::string> fails;
  if (c.vjp)
    guarded(
        "vjp", [&] { check_vjp(c, fails); }, fails);
  if (c.jvp)
    guarded(
        "jvp", [&] { check_jvp(c, fails); }, fails);
  if (c.hvp)
    guarded(
        "hvp", [&] { check_hvp(c, fails); }, fails);
  if (c.vmap)
    guarded(
        "vmap", [&] { check_vmap(c, fails); }, fails);
  return fails;
}

std::string grad_label(const GradCheck& c) {
  std::string s = c.op + "(";
  for (size_t i = 0; i < c.inputs.size(); ++i) s += (i ? ", " : "") + c.inputs[i].type().str();
  s += ")";
  if (!c.note.empty()) s += " [" + c.note + "]";
  return s;
}

}  // namespace rlx::test
