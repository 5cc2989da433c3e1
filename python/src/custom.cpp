// Custom ops from Python: an op's type rule and its CPU kernel written in Python,
// registered in the same OpRegistry / KernelRegistry that C++ packages use. The slow
// path: each call of the rule or the kernel takes the GIL and goes through NumPy.
#include <cstring>

#include "common.h"
#include "rlx/kernel.h"
#include "rlx/op.h"
#include "rlx/session.h"

namespace rlx::py {

namespace {

pyb::object attr_to_py(const AttrValue& a) {
  return std::visit(
      [](const auto& v) -> pyb::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Literal>)
          return to_numpy(Tensor::from_literal(v));
        else
          return pyb::cast(v);
      },
      a.variant());
}

pyb::dict attrs_to_py(const Attrs& attrs) {
  pyb::dict d;
  for (const auto& [k, v] : attrs) d[pyb::str(k)] = attr_to_py(v);
  return d;
}

pyb::tuple dims_to_py(const Shape& s) {
  pyb::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    t[i] = s[i].is_static() ? pyb::object(pyb::int_(s[i].value()))
                            : pyb::object(pyb::str(s[i].symbol()));
  return t;
}

// (shape, dtype) from a rule: dims are ints, symbol names or None (a size not known).
TensorType type_from_py(const std::string& op, pyb::handle t) {
  if (!pyb::isinstance<pyb::tuple>(t) || pyb::len(t) != 2)
    fail<TypeError>(op, "expected the type rule to return (shape, dtype) pairs, got ",
                    py_str(pyb::type::of(t)));
  auto pair = t.cast<pyb::tuple>();
  Shape s;
  for (pyb::handle d : pyb::iter(pair[0])) {
    if (d.is_none())
      s.push_back(Dim::unknown());
    else if (pyb::isinstance<pyb::str>(d))
      s.push_back(Dim::sym(d.cast<std::string>()));
    else
      s.push_back(Dim(d.cast<int64_t>()));
  }
  return TensorType(to_dtype(pair[1]), std::move(s));
}

AttrKind kind_from_name(const std::string& op, const std::string& name) {
  for (AttrKind k : {AttrKind::Int, AttrKind::Float, AttrKind::String, AttrKind::Bool,
                     AttrKind::Ints, AttrKind::Floats, AttrKind::DType, AttrKind::Tensor})
    if (attr_kind_name(k) == name) return k;
  fail<ValueError>(op, "expected an attribute kind (int, float, string, bool, ints, floats, ",
                   "dtype, tensor), got '", name, "'");
}

// Python callables are released with the GIL held, whichever thread drops the last copy.
std::shared_ptr<pyb::object> keep(pyb::object fn) {
  return std::shared_ptr<pyb::object>(new pyb::object(std::move(fn)), [](pyb::object* p) {
    pyb::gil_scoped_acquire gil;
    delete p;
  });
}

// The rule's graph as a handle Python values can hold. It does not own the graph (the
// transform does): values a rule keeps after it returns must not be used.
GraphPtr borrowed(Graph& g) { return GraphPtr(GraphPtr(), &g); }

pyb::list values_to_py(const GraphPtr& g, std::span<const Value> vs) {
  pyb::list out;
  for (Value v : vs) out.append(v.valid() ? pyb::cast(wrap(g, v)) : pyb::none());
  return out;
}

// A rule's result: `want` Values of g (or None: no / zero tangent); `like`, when given,
// holds values of the types they must have.
std::vector<Value> values_from_py(const std::string& op, const char* rule, Graph& g, pyb::handle r,
                                  size_t want, std::span<const Value> like = {}) {
  if (pyb::isinstance<PyValue>(r) || r.is_none()) r = pyb::make_tuple(r).release();
  if (!pyb::isinstance<pyb::sequence>(r) || pyb::len(r) != want)
    fail<TypeError>(op, "expected the ", rule, " rule to return a list of ", want,
                    " rlx.Values (or None), got ", py_str(pyb::type::of(r)));
  std::vector<Value> out;
  for (pyb::handle h : pyb::iter(r)) {
    if (h.is_none()) {
      out.emplace_back();
      continue;
    }
    if (!pyb::isinstance<PyValue>(h))
      fail<TypeError>(op, "expected the ", rule, " rule to return rlx.Values (or None), got ",
                      py_str(pyb::type::of(h)));
    const auto& pv = h.cast<const PyValue&>();
    if (pv.graph.get() != &g)
      fail<ValueError>(op, "expected the ", rule,
                       " rule to return values of the graph it "
                       "was given, got one of graph '",
                       pv.graph->name(), "'");
    if (!like.empty() && pv.value.type() != like[out.size()].type())
      fail<TypeError>(op, "expected the ", rule, " rule's result ", out.size(), " of type ",
                      like[out.size()].type().str(), ", got ", pv.value.type().str());
    out.push_back(pv.value);
  }
  return out;
}

// Autodiff and batching rules written in Python, over rlx Values of the graph the
// transform builds (see register_op's doc).
void add_rules(OpDef& def, const std::string& name, pyb::object vjp, pyb::object jvp,
               pyb::object vmap) {
  for (auto [rule, what] : {std::pair{&vjp, "vjp"}, {&jvp, "jvp"}, {&vmap, "vmap"}})
    if (!rule->is_none() && !PyCallable_Check(rule->ptr()))
      fail<TypeError>(name, "expected a callable ", what, " rule (or None), got ",
                      py_str(pyb::type::of(*rule)));
  if (!vjp.is_none())
    def.vjp = [fn = keep(vjp), name](const RuleArgs& a, std::span<const Value> cts) {
      pyb::gil_scoped_acquire gil;
      GraphPtr g = borrowed(a.g);
      pyb::object r = (*fn)(values_to_py(g, a.inputs), values_to_py(g, a.outputs),
                            values_to_py(g, cts), attrs_to_py(a.attrs));
      return values_from_py(name, "vjp", a.g, r, a.inputs.size(), a.inputs);
    };
  if (!jvp.is_none())
    def.jvp = [fn = keep(jvp), name](const RuleArgs& a, std::span<const Value> tans) {
      pyb::gil_scoped_acquire gil;
      GraphPtr g = borrowed(a.g);
      pyb::object r = (*fn)(values_to_py(g, a.inputs), values_to_py(g, a.outputs),
                            values_to_py(g, tans), attrs_to_py(a.attrs));
      return values_from_py(name, "jvp", a.g, r, a.outputs.size(), a.outputs);
    };
  if (!vmap.is_none())
    def.vmap = [fn = keep(vmap), name](const RuleArgs& a, std::span<const int> in_axes) {
      pyb::gil_scoped_acquire gil;
      GraphPtr g = borrowed(a.g);
      pyb::list axes;
      for (int ax : in_axes)
        axes.append(ax < 0 ? pyb::object(pyb::none()) : pyb::object(pyb::int_(ax)));
      pyb::object r = (*fn)(values_to_py(g, a.inputs), axes, attrs_to_py(a.attrs));
      if (!pyb::isinstance<pyb::tuple>(r) || pyb::len(r) != 2)
        fail<TypeError>(name, "expected the vmap rule to return (outputs, out_axes), got ",
                        py_str(pyb::type::of(r)));
      auto pair = r.cast<pyb::tuple>();
      VmapResult res;
      // The transform checks the count against the node's outputs.
      res.outputs = values_from_py(name, "vmap", a.g, pair[0], pyb::len(pair[0]));
      size_t n = res.outputs.size();
      for (Value v : res.outputs)
        if (!v.valid()) fail<TypeError>(name, "expected the vmap rule to return Values, got None");
      for (pyb::handle ax : pyb::iter(pair[1]))
        res.out_axes.push_back(ax.is_none() ? -1 : ax.cast<int>());
      if (res.out_axes.size() != n)
        fail<TypeError>(name, "expected the vmap rule to return one out axis per output (", n,
                        "), got ", res.out_axes.size());
      return res;
    };
}

void register_op(const std::string& name, pyb::object infer, pyb::object kernel, int min_inputs,
                 int max_inputs, pyb::dict attrs, const std::string& doc, pyb::object vjp,
                 pyb::object jvp, pyb::object vmap) {
  if (!PyCallable_Check(infer.ptr()))
    fail<TypeError>(name, "expected a callable type rule, got ", py_str(pyb::type::of(infer)));
  if (!kernel.is_none() && !PyCallable_Check(kernel.ptr()))
    fail<TypeError>(name, "expected a callable kernel (or None), got ",
                    py_str(pyb::type::of(kernel)));
  OpDef def;
  def.name = name;
  def.arity(min_inputs, max_inputs);
  def.doc = doc;
  for (auto [k, v] : attrs) {
    auto key = k.cast<std::string>();
    // {name: kind} or {name: (kind, default)}
    std::string kind_name;
    pyb::object def_value = pyb::none();
    if (pyb::isinstance<pyb::str>(v)) {
      kind_name = v.cast<std::string>();
    } else {
      auto t = v.cast<pyb::tuple>();
      if (t.size() != 2)
        fail<TypeError>(name, "expected attribute '", key, "' as kind or (kind, default)");
      kind_name = t[0].cast<std::string>();
      def_value = t[1];
    }
    AttrKind kind = kind_from_name(name, kind_name);
    std::optional<AttrValue> dflt;
    AttrSpec spec{key, kind, std::nullopt, {}};
    if (!def_value.is_none()) dflt = to_attr(name, key, &spec, def_value);
    def.attr(key, kind, dflt);
  }
  auto rule = keep(infer);
  def.infer = [rule, name](const InferContext& c) {
    pyb::gil_scoped_acquire gil;
    pyb::list ins;
    for (const TensorType& t : c.inputs())
      ins.append(pyb::make_tuple(dims_to_py(t.shape), t.dtype));
    pyb::object r = (*rule)(ins, attrs_to_py(c.attrs()));
    std::vector<TensorType> out;
    if (pyb::isinstance<pyb::tuple>(r) && pyb::len(r) == 2 &&
        !pyb::isinstance<pyb::tuple>(r.cast<pyb::tuple>()[1]))
      out.push_back(type_from_py(name, r));  // one output
    else
      for (pyb::handle t : pyb::iter(r)) out.push_back(type_from_py(name, t));
    return out;
  };
  add_rules(def, name, vjp, jvp, vmap);
  OpRegistry::global().add(std::move(def));
  if (kernel.is_none()) return;
  register_cpu_kernels();  // the CPU kernels first, as a CPU session would
  auto fn = keep(kernel);
  KernelRegistry::global().add(
      name, DeviceKind::cpu,
      [fn, name](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        pyb::gil_scoped_acquire gil;
        pyb::list arrays;
        for (const Tensor& t : in) {
          pyb::array a = to_numpy(t);
          a.attr("flags").attr("writeable") = false;  // inputs are read-only
          arrays.append(a);
        }
        pyb::object r = (*fn)(arrays, attrs_to_py(ctx.attrs));
        std::vector<pyb::object> results;
        if (pyb::isinstance<pyb::list>(r) || pyb::isinstance<pyb::tuple>(r))
          for (pyb::handle h : pyb::iter(r))
            results.push_back(pyb::reinterpret_borrow<pyb::object>(h));
        else
          results.push_back(r);
        if (results.size() != out.size())
          fail<ValueError>(name, "expected the kernel to return ", out.size(), " arrays, got ",
                           results.size());
        for (size_t i = 0; i < out.size(); ++i) {
          std::optional<DType> want;
          if (out[i].defined()) want = out[i].dtype();
          Tensor t = to_tensor(results[i], want);
          if (!out[i].defined()) {
            out[i] = t;
            continue;
          }
          if (t.dtype() != out[i].dtype() || t.shape() != out[i].shape())
            fail<ValueError>(name, "expected kernel output ", i, " of type ", out[i].type().str(),
                             ", got ", t.type().str());
          if (t.nbytes()) std::memcpy(out[i].data(), t.data(), t.nbytes());
        }
      });
}

}  // namespace

void register_custom(pyb::module_& m) {
  m.def("register_op", &register_op, pyb::arg("name"), pyb::arg("infer"),
        pyb::arg("kernel") = pyb::none(), pyb::arg("min_inputs") = 1, pyb::arg("max_inputs") = 1,
        pyb::arg("attrs") = pyb::dict(), pyb::arg("doc") = "", pyb::kw_only(),
        pyb::arg("vjp") = pyb::none(), pyb::arg("jvp") = pyb::none(),
        pyb::arg("vmap") = pyb::none(), R"doc(
Registers an op written in Python (the slow path: each call takes the GIL and goes
through NumPy). name: "package.op" (namespaced, new); infer(inputs, attrs) gets a list
of (shape, dtype) per input (dims: ints or symbol names) and the complete attributes,
and returns (shape, dtype) or a list of them (a dim may be None: known at run time
only); kernel(arrays, attrs) gets read-only NumPy arrays and returns an array or a list
of them, of the inferred types; attrs: {name: kind} or {name: (kind, default)} with
kinds int, float, string, bool, ints, floats, dtype, tensor; max_inputs -1: variadic.
Then: rlx.op(name, ...), rlx.ops.<package>.<op>.

Autodiff and batching rules (optional) build rlx ops on the Values they are given (any
op: rlx.exp, operators, rlx.op(name, ...) of this or another custom op); the Values are
valid only while the rule runs:
  vjp(inputs, outputs, cotangents, attrs) -> one cotangent per input (a Value of the
    input's type, or None: no gradient); grad, vjp, value_and_grad use it.
  jvp(inputs, outputs, tangents, attrs) -> one tangent per output (or None: zero); a
    tangent given is None where it is zero. jvp, hvp, jacfwd use it.
  vmap(inputs, in_axes, attrs) -> (outputs, out_axes): in_axes holds each input's batch
    axis (None: not batched), out_axes each output's.
Without a rule, that transform raises NotImplementedError naming the op.
)doc");
}

}  // namespace rlx::py
