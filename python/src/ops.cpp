// rlx.op(name, *inputs, **attrs) for every registered op, the registry's schemas (which
// python/rlx/ops.py turns into rlx.ops.<name>), and the core ops with hand-written docs.
#include "rlx/ops.h"

#include "common.h"
#include "rlx/op.h"
#include "rlx/text.h"

namespace rlx::py {

namespace {

std::string type_name(pyb::handle obj) { return pyb::str(pyb::type::of(obj)).cast<std::string>(); }

bool is_bool(pyb::handle h) {
  return PyBool_Check(h.ptr()) || pyb::isinstance(h, pyb::module_::import("numpy").attr("bool_"));
}
bool is_int(pyb::handle h) {
  if (is_bool(h)) return false;
  return pyb::isinstance<pyb::int_>(h) ||
         pyb::isinstance(h, pyb::module_::import("numpy").attr("integer"));
}
bool is_number(pyb::handle h) {
  return is_int(h) || pyb::isinstance<pyb::float_>(h) ||
         pyb::isinstance(h, pyb::module_::import("numpy").attr("floating"));
}
bool is_list(pyb::handle h) {
  return pyb::isinstance<pyb::list>(h) || pyb::isinstance<pyb::tuple>(h) ||
         pyb::isinstance<pyb::array>(h);
}

[[noreturn]] void wrong_kind(std::string_view op, const std::string& key, AttrKind kind,
                             pyb::handle v) {
  fail<TypeError>(op, "expected attribute '", key, "' of kind ", attr_kind_name(kind), ", got ",
                  type_name(v));
}

// rlx.op(name, *inputs, graph=None, **attrs): inputs may be Values, numbers (scalar
// constants of the first Value's dtype) or arrays (constants); Graph-valued keywords
// named after the op's subgraph slots ("then", "else_" or "else", "body") are subgraphs.
pyb::object apply_op(const std::string& name, pyb::args inputs, pyb::kwargs kwargs) {
  const OpDef& def = OpRegistry::global().get(name);
  GraphPtr g;
  if (kwargs.contains("graph")) g = kwargs["graph"].cast<GraphPtr>();
  if (!g) g = op_graph(inputs);
  DType like = DType::f32;
  for (pyb::handle h : inputs)
    if (pyb::isinstance<PyValue>(h)) {
      like = h.cast<const PyValue&>().value.dtype();
      break;
    }
  if (!g) fail<ValueError>(name, "expected an rlx.Value among the inputs (or graph=), got none");
  std::vector<Value> vals;
  for (pyb::handle h : inputs) vals.push_back(as_value(g, h, like));
  Attrs attrs;
  std::vector<SubgraphPtr> subs(def.subgraphs.size());
  for (auto [k, v] : kwargs) {
    std::string key = k.cast<std::string>();
    if (key == "graph") continue;
    std::string slot = !key.empty() && key.back() == '_' ? key.substr(0, key.size() - 1) : key;
    auto it = std::find(def.subgraphs.begin(), def.subgraphs.end(), slot);
    if (it != def.subgraphs.end()) {
      subs[size_t(it - def.subgraphs.begin())] = v.cast<GraphPtr>();
      continue;
    }
    attrs.set(key, to_attr(name, key, def.find_attr(key), v));
  }
  for (size_t i = 0; i < subs.size(); ++i)
    if (!subs[i])
      fail<ValueError>(name, "expected subgraph '", def.subgraphs[i], "' (a keyword), got none");
  std::vector<Value> outs = g->apply(def, std::move(vals), std::move(attrs), std::move(subs));
  if (outs.size() == 1) return pyb::cast(wrap(g, outs[0]));
  pyb::tuple t(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) t[i] = pyb::cast(wrap(g, outs[i]));
  return t;
}

pyb::dict op_schema(const std::string& name) {
  const OpDef& def = OpRegistry::global().get(name);
  pyb::dict d;
  d["name"] = def.name;
  d["doc"] = def.doc;
  d["min_inputs"] = def.min_inputs;
  d["max_inputs"] = def.max_inputs;  // -1: variadic
  pyb::list attrs;
  for (const AttrSpec& a : def.attrs) {
    pyb::dict ad;
    ad["name"] = a.name;
    ad["kind"] = std::string(attr_kind_name(a.kind));
    ad["default"] = a.default_value ? pyb::object(pyb::str(attr_str(*a.default_value)))
                                    : pyb::object(pyb::none());
    ad["choices"] = a.choices;
    attrs.append(ad);
  }
  d["attrs"] = attrs;
  d["subgraphs"] = def.subgraphs;
  return d;
}

PyValue unary(const PyValue& x, Value (*f)(Value)) { return wrap(x.graph, f(x.value)); }

}  // namespace

// A Python object as an attribute of the kind the op's schema gives it (attributes the
// schema does not know are guessed from the Python type; validate_attrs rejects them).
AttrValue to_attr(std::string_view op, const std::string& key, const AttrSpec* spec,
                  pyb::handle v) {
  AttrKind kind;
  if (spec) {
    kind = spec->kind;
  } else if (is_bool(v)) {
    kind = AttrKind::Bool;
  } else if (is_int(v)) {
    kind = AttrKind::Int;
  } else if (is_number(v)) {
    kind = AttrKind::Float;
  } else if (pyb::isinstance<pyb::str>(v)) {
    kind = AttrKind::String;
  } else if (pyb::isinstance<DType>(v)) {
    kind = AttrKind::DType;
  } else if (pyb::isinstance<pyb::array>(v) || pyb::isinstance<Tensor>(v)) {
    kind = AttrKind::Tensor;
  } else {
    kind = AttrKind::Ints;
  }
  switch (kind) {
    case AttrKind::Int:
      if (!is_int(v)) wrong_kind(op, key, kind, v);
      return AttrValue(v.cast<int64_t>());
    case AttrKind::Float:
      if (!is_number(v)) wrong_kind(op, key, kind, v);
      return AttrValue(v.cast<double>());
    case AttrKind::String:
      if (!pyb::isinstance<pyb::str>(v)) wrong_kind(op, key, kind, v);
      return AttrValue(v.cast<std::string>());
    case AttrKind::Bool:
      if (!is_bool(v)) wrong_kind(op, key, kind, v);
      return AttrValue((PyObject_IsTrue(v.ptr()) == 1));
    case AttrKind::Ints: {
      if (is_int(v)) return AttrValue(IntList{v.cast<int64_t>()});
      if (!is_list(v)) wrong_kind(op, key, kind, v);
      IntList out;
      for (pyb::handle e : pyb::iter(v)) {
        if (!is_int(e)) wrong_kind(op, key, kind, v);
        out.push_back(e.cast<int64_t>());
      }
      return AttrValue(out);
    }
    case AttrKind::Floats: {
      if (is_number(v)) return AttrValue(FloatList{v.cast<double>()});
      if (!is_list(v)) wrong_kind(op, key, kind, v);
      FloatList out;
      for (pyb::handle e : pyb::iter(v)) {
        if (!is_number(e)) wrong_kind(op, key, kind, v);
        out.push_back(e.cast<double>());
      }
      return AttrValue(out);
    }
    case AttrKind::DType:
      return AttrValue(to_dtype(v));
    case AttrKind::Tensor:
      if (pyb::isinstance<pyb::str>(v) || is_bool(v) || v.is_none()) wrong_kind(op, key, kind, v);
      return AttrValue(to_literal(v));
  }
  wrong_kind(op, key, kind, v);
}

IntList to_axes(std::string_view op, pyb::handle axes) {
  if (axes.is_none()) return {};
  static const AttrSpec spec{"axes", AttrKind::Ints, std::nullopt, {}};
  return *to_attr(op, "axes", &spec, axes).get_if<IntList>();
}

void register_ops(pyb::module_& m) {
  m.def("op", &apply_op, pyb::arg("name"), R"doc(
Applies a registered op: rlx.op("softmax", x, axis=-1). Returns a Value, or a tuple for
ops with several outputs. Inputs: Values of one graph, numbers (scalar constants of the
first Value's dtype) or arrays (constants). Attributes are converted to the kinds of the
op's schema (int, float, string, bool, int / float lists, dtypes, NumPy tensors).
Subgraphs are keywords named after the op's slots (then=, else_=, body=); graph= gives
the graph for ops without inputs.
)doc");
  m.def("op_names", [] {
    std::vector<std::string> out;
    for (const OpDef* d : OpRegistry::global().all()) out.push_back(d->name);
    return out;
  });
  m.def("op_schema", &op_schema, pyb::arg("name"),
        "An op's schema: doc, arity (max -1: variadic), attributes, subgraph slots.");

  m.def(
      "matmul",
      [](const pyb::object& self, pyb::handle b) {
        const auto& a = self.cast<const PyValue&>();
        GraphPtr g = op_graph({self, b});
        return wrap(g, matmul(as_value(g, self, a.value.dtype()), as_value(g, b, a.value.dtype())));
      },
      pyb::arg("a"), pyb::arg("b"),
      "Matrix product a @ b with NumPy's rules (batched over leading dims; dtypes promoted).");
  m.def(
      "relu", [](const PyValue& x) { return unary(x, relu); }, pyb::arg("x"), "max(x, 0).");
  m.def(
      "gelu",
      [](const PyValue& x, bool approximate) { return wrap(x.graph, gelu(x.value, approximate)); },
      pyb::arg("x"), pyb::arg("tanh_approx") = false,
      "x * Phi(x) (exact, with erf), or the tanh approximation when tanh_approx.");
  m.def(
      "exp", [](const PyValue& x) { return unary(x, rlx::exp); }, pyb::arg("x"), "e**x.");
  m.def(
      "log", [](const PyValue& x) { return unary(x, rlx::log); }, pyb::arg("x"),
      "Natural logarithm.");
  m.def(
      "tanh", [](const PyValue& x) { return unary(x, rlx::tanh); }, pyb::arg("x"),
      "Hyperbolic tangent.");
  m.def(
      "sigmoid", [](const PyValue& x) { return unary(x, sigmoid); }, pyb::arg("x"),
      "1 / (1 + exp(-x)).");
  m.def(
      "softmax",
      [](const PyValue& x, int64_t axis) { return wrap(x.graph, softmax(x.value, axis)); },
      pyb::arg("x"), pyb::arg("axis") = -1, "exp(x) / sum(exp(x)) along axis.");
  m.def(
      "sum",
      [](const PyValue& x, pyb::object axes, bool keepdims) {
        return wrap(x.graph, sum(x.value, to_axes("sum", axes), keepdims));
      },
      pyb::arg("x"), pyb::arg("axes") = pyb::none(), pyb::arg("keepdims") = false,
      "Sum over axes (an int or a list; None: all).");
  m.def(
      "mean",
      [](const PyValue& x, pyb::object axes, bool keepdims) {
        return wrap(x.graph, mean(x.value, to_axes("mean", axes), keepdims));
      },
      pyb::arg("x"), pyb::arg("axes") = pyb::none(), pyb::arg("keepdims") = false,
      "Mean over axes (an int or a list; None: all).");
  m.def(
      "reshape",
      [](const PyValue& x, IntList shape) { return wrap(x.graph, reshape(x.value, shape)); },
      pyb::arg("x"), pyb::arg("shape"), "A reshape (one dim may be -1).");
  m.def(
      "transpose",
      [](const PyValue& x, IntList perm) { return wrap(x.graph, transpose(x.value, perm)); },
      pyb::arg("x"), pyb::arg("perm") = IntList{}, "Permutes the axes (default: reversed).");
  m.def(
      "cast",
      [](const PyValue& x, pyb::handle t) { return wrap(x.graph, cast(x.value, to_dtype(t))); },
      pyb::arg("x"), pyb::arg("dtype"), "Converts to dtype.");
}

}  // namespace rlx::py
