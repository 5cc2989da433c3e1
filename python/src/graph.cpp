// rlx.Graph and rlx.Value: building graphs from Python, with operators
// (+ - * / @, unary -) that take Values, Python numbers and arrays.
#include "common.h"
#include "rlx/ops.h"
#include "rlx/text.h"
#include "rlx/transforms.h"

namespace rlx::py {

PyValue wrap(const GraphPtr& g, Value v) { return PyValue{g, v}; }

std::vector<Trace>& traces() {
  thread_local std::vector<Trace> stack;  // per thread: each traces its own functions
  return stack;
}

namespace {

// g's position on the trace stack, or -1.
int trace_depth(const Graph* g) {
  const auto& t = traces();
  for (size_t i = t.size(); i-- > 0;)
    if (t[i].graph.get() == g) return int(i);
  return -1;
}

// pv as an input of the traced graph of t (one input per outer Value).
Value lift(Trace& t, const PyValue& pv) {
  for (size_t i = 0; i < t.captured.size(); ++i)
    if (t.captured[i].graph == pv.graph && t.captured[i].value.id == pv.value.id)
      return t.lifted[i];
  Value v = t.graph->input("c" + std::to_string(t.captured.size()), pv.value.type());
  t.captured.push_back(pv);
  t.lifted.push_back(v);
  return v;
}

template <class Range>
GraphPtr innermost(const Range& operands) {
  GraphPtr first, best;
  int best_depth = -1;
  for (pyb::handle h : operands) {
    if (!pyb::isinstance<PyValue>(h)) continue;
    const GraphPtr& g = h.cast<const PyValue&>().graph;
    if (!first) first = g;
    int d = trace_depth(g.get());
    if (d > best_depth) best = g, best_depth = d;
  }
  return best ? best : first;
}

}  // namespace

GraphPtr op_graph(std::initializer_list<pyb::handle> operands) { return innermost(operands); }
GraphPtr op_graph(const pyb::args& operands) { return innermost(operands); }

Value as_value(const GraphPtr& g, pyb::handle obj, DType like) {
  if (pyb::isinstance<PyValue>(obj)) {
    const auto& pv = obj.cast<const PyValue&>();
    if (pv.graph == g) return pv.value;
    if (int d = trace_depth(g.get()); d >= 0) return lift(traces()[size_t(d)], pv);
    fail<ValueError>("Value", "expected values of one graph, got one of graph '", pv.graph->name(),
                     "' with one of graph '", g->name(), "'");
  }
  if (PyBool_Check(obj.ptr()) || pyb::isinstance<pyb::int_>(obj) ||
      pyb::isinstance<pyb::float_>(obj))
    return g->constant(Literal::scalar(like, obj.cast<double>()));
  if (pyb::isinstance<pyb::array>(obj) || pyb::isinstance<Tensor>(obj))
    return g->constant(to_literal(obj));
  fail<TypeError>("Value", "expected an rlx.Value, a number or an array, got ",
                  pyb::str(pyb::type::of(obj)).cast<std::string>());
}

namespace {

// (None, 64, "batch") -> [x.d0, 64, batch]: None is a symbol of its own per input axis.
Shape to_shape(pyb::handle obj, const std::string& arg) {
  if (pyb::isinstance<pyb::int_>(obj)) return Shape{Dim(obj.cast<int64_t>())};
  if (!pyb::isinstance<pyb::sequence>(obj) || pyb::isinstance<pyb::str>(obj))
    fail<TypeError>(arg, "expected a shape (a tuple of ints, None and symbol names), got ",
                    pyb::str(pyb::type::of(obj)).cast<std::string>());
  Shape s;
  for (pyb::handle d : obj.cast<pyb::sequence>()) {
    if (d.is_none())
      s.push_back(Dim::sym(arg + ".d" + std::to_string(s.size())));
    else if (pyb::isinstance<pyb::str>(d))
      s.push_back(Dim::sym(d.cast<std::string>()));
    else if (pyb::hasattr(d, "__index__") && !PyBool_Check(d.ptr()))
      s.push_back(Dim(d.cast<int64_t>()));
    else
      fail<TypeError>(arg, "expected a dim (an int, None or a symbol name), got ",
                      pyb::str(pyb::type::of(d)).cast<std::string>());
  }
  return s;
}

pyb::tuple shape_tuple(const Shape& s) {
  pyb::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    t[i] = s[i].is_static() ? pyb::object(pyb::int_(s[i].value()))
                            : pyb::object(pyb::str(s[i].symbol()));
  return t;
}

PyValue arg_value(const GraphPtr& g, const std::string& name) {
  const Arg* a = g->find_arg(name);
  if (!a) fail<ValueError>("Graph", "expected an input or param named '", name, "', got none");
  return wrap(g, a->value);
}

std::vector<std::string> arg_names(const Graph& g, ArgKind kind) {
  std::vector<std::string> out;
  for (const Arg& a : g.args())
    if (a.kind == kind) out.push_back(a.name);
  return out;
}

// A binary op with NumPy-like promotion (the IR's ops take operands of one dtype).
Value promoted(std::string_view op, Value a, Value b) {
  auto [x, y] = promote(a, b);
  return rlx::op(op, {x, y});
}

// Operators: the operands' innermost traced graph (a closed-over outer Value is lifted).
template <class F>
auto binary(F f) {
  return [f](const pyb::object& self, pyb::handle b) {
    const auto& a = self.cast<const PyValue&>();
    GraphPtr g = op_graph({self, b});
    return wrap(g, f(as_value(g, self, a.value.dtype()), as_value(g, b, a.value.dtype())));
  };
}
template <class F>
auto rbinary(F f) {
  return [f](const pyb::object& self, pyb::handle b) {
    const auto& a = self.cast<const PyValue&>();
    GraphPtr g = op_graph({self, b});
    return wrap(g, f(as_value(g, b, a.value.dtype()), as_value(g, self, a.value.dtype())));
  };
}

}  // namespace

void register_graph(pyb::module_& m) {
  pyb::class_<Graph, GraphPtr>(m, "Graph", R"doc(
A graph under construction (or returned by a transform, parse_graph or onnx.load).

    g = rlx.Graph()
    x = g.input("x", (None, 64), rlx.f32)   # None: a symbolic dim; "batch": a named one
    w = g.param("w", (64, 32))
    g.output(rlx.relu(x @ w), "y")
    print(g)
)doc")
      .def(pyb::init([](const std::string& name) { return std::make_shared<Graph>(name); }),
           pyb::arg("name") = "main")
      .def_property_readonly("name", &Graph::name)
      .def(
          "input",
          [](const GraphPtr& g, const std::string& name, pyb::handle shape, pyb::handle dtype) {
            return wrap(g, g->input(name, TensorType(to_dtype(dtype), to_shape(shape, name))));
          },
          pyb::arg("name"), pyb::arg("shape"), pyb::arg("dtype") = DType::f32,
          "A runtime input. Dims: ints, symbol names, or None (a symbol '<name>.d<axis>').")
      .def(
          "param",
          [](const GraphPtr& g, const std::string& name, pyb::handle shape, pyb::handle dtype) {
            return wrap(g, g->param(name, TensorType(to_dtype(dtype), to_shape(shape, name))));
          },
          pyb::arg("name"), pyb::arg("shape"), pyb::arg("dtype") = DType::f32,
          "A parameter: a tensor set once on the compiled graph (set_param) and kept.")
      .def(
          "constant",
          [](const GraphPtr& g, pyb::handle value, pyb::object dtype) {
            std::optional<DType> want;
            if (!dtype.is_none()) want = to_dtype(dtype);
            Literal lit = to_literal(value, want);
            if (want && lit.dtype() != *want)
              fail<TypeError>("constant", "expected an array of ", dtype_name(*want), ", got ",
                              dtype_name(lit.dtype()), " (convert with astype first)");
            return wrap(g, g->constant(lit));
          },
          pyb::arg("value"), pyb::arg("dtype") = pyb::none(),
          "A constant holding a copy of an array (or a number, a list; dtype converts those).")
      .def(
          "output",
          [](const GraphPtr& g, const pyb::object& v, const std::string& name) {
            const auto& pv = v.cast<const PyValue&>();
            if (pv.graph != g && trace_depth(g.get()) < 0)
              fail<ValueError>("output", "expected a value of graph '", g->name(),
                               "', got one of graph '", pv.graph->name(), "'");
            g->output(as_value(g, v, pv.value.dtype()), name);
          },
          pyb::arg("value"), pyb::arg("name") = "", "Marks a value as an output ('out<N>').")
      .def("arg", &arg_value, pyb::arg("name"), "The value of an input or param, by name.")
      .def_property_readonly("input_names",
                             [](const Graph& g) { return arg_names(g, ArgKind::input); })
      .def_property_readonly("param_names",
                             [](const Graph& g) { return arg_names(g, ArgKind::param); })
      .def_property_readonly("output_names",
                             [](const Graph& g) {
                               std::vector<std::string> out;
                               for (const Output& o : g.outputs()) out.push_back(o.name);
                               return out;
                             })
      .def(
          "outputs",
          [](const GraphPtr& g) {
            pyb::dict d;
            for (const Output& o : g->outputs()) d[pyb::str(o.name)] = wrap(g, o.value);
            return d;
          },
          "The outputs as a dict {name: Value}.")
      .def(
          "inline",
          [](const GraphPtr& g, const GraphPtr& callee, const pyb::sequence& args) {
            const auto& params = callee->args();
            if (args.size() != params.size())
              fail<ValueError>("inline", "expected ", params.size(), " args for graph '",
                               callee->name(), "', got ", args.size());
            std::vector<Value> vals;
            for (size_t i = 0; i < params.size(); ++i)
              vals.push_back(as_value(g, args[i], callee->type(params[i].value).dtype));
            std::vector<Value> outs = inline_call(*callee, *g, vals);
            pyb::list out;
            for (Value v : outs) out.append(wrap(g, v));
            return out;
          },
          pyb::arg("graph").none(false), pyb::arg("args"),
          "Emits a copy of graph's nodes into this graph with graph's args bound to args "
          "(Values of this graph, numbers or arrays, in graph's arg order); returns graph's "
          "outputs as a list of Values of this graph (an inlined call).")
      .def(
          "_trace_push",
          [](const GraphPtr& g) {
            traces().push_back(Trace{g, {}, {}});
          },
          "Starts tracing into this graph (rlx.jit and the function transforms).")
      .def(
          "_trace_pop",
          [](const GraphPtr& g) {
            auto& t = traces();
            if (t.empty() || t.back().graph != g)
              fail<ValueError>("trace", "expected graph '", g->name(),
                               "' to be the innermost trace, got another");
            std::vector<PyValue> captured = std::move(t.back().captured);
            t.pop_back();
            return captured;
          },
          "Ends tracing into this graph; returns the outer Values it lifted, in the order of "
          "their inputs c0, c1, ...")
      .def_property_readonly("num_nodes", [](const Graph& g) { return g.nodes().size(); })
      .def("clone", [](const Graph& g) { return GraphPtr(g.clone()); })
      .def("__str__", [](const Graph& g) { return print_graph(g); })
      .def("__repr__", [](const Graph& g) {
        return str_cat("<rlx.Graph '", g.name(), "': ", g.args().size(), " args, ",
                       g.nodes().size(), " nodes, ", g.outputs().size(), " outputs>");
      });

  pyb::class_<PyValue> value(m, "Value",
                             "A value of a graph (an SSA value with an inferred type).");
  // NumPy defers to Value's reflected operators: array * value is one node, not an
  // object array of per-element nodes.
  value.attr("__array_ufunc__") = pyb::none();
  value.def_property_readonly("dtype", [](const PyValue& v) { return v.value.dtype(); })
      .def_property_readonly("shape", [](const PyValue& v) { return shape_tuple(v.value.shape()); })
      .def_property_readonly("ndim", [](const PyValue& v) { return v.value.rank(); })
      .def_property_readonly("graph", [](const PyValue& v) { return v.graph; })
      .def("__repr__",
           [](const PyValue& v) {
             return str_cat("<rlx.Value %", v.value.id, ": ", v.value.type().str(), ">");
           })
      .def("__add__", binary([](Value a, Value b) { return a + b; }))
      .def("__radd__", rbinary([](Value a, Value b) { return a + b; }))
      .def("__sub__", binary([](Value a, Value b) { return a - b; }))
      .def("__rsub__", rbinary([](Value a, Value b) { return a - b; }))
      .def("__mul__", binary([](Value a, Value b) { return a * b; }))
      .def("__rmul__", rbinary([](Value a, Value b) { return a * b; }))
      .def("__truediv__", binary([](Value a, Value b) { return a / b; }))
      .def("__rtruediv__", rbinary([](Value a, Value b) { return a / b; }))
      .def("__matmul__", binary([](Value a, Value b) { return matmul(a, b); }))
      .def("__rmatmul__", rbinary([](Value a, Value b) { return matmul(a, b); }))
      .def("__pow__", binary([](Value a, Value b) { return promoted("pow", a, b); }))
      .def("__rpow__", rbinary([](Value a, Value b) { return promoted("pow", a, b); }))
      .def("__lt__", binary([](Value a, Value b) { return promoted("lt", a, b); }))
      .def("__le__", binary([](Value a, Value b) { return promoted("le", a, b); }))
      .def("__gt__", binary([](Value a, Value b) { return promoted("gt", a, b); }))
      .def("__ge__", binary([](Value a, Value b) { return promoted("ge", a, b); }))
      .def("__neg__", [](const PyValue& a) { return wrap(a.graph, -a.value); })
      .def("__pos__", [](const PyValue& a) { return a; })
      .def(
          "astype",
          [](const PyValue& a, pyb::handle t) { return wrap(a.graph, cast(a.value, to_dtype(t))); },
          pyb::arg("dtype"))
      .def(
          "reshape",
          [](const PyValue& a, IntList shape) { return wrap(a.graph, reshape(a.value, shape)); },
          pyb::arg("shape"))
      .def_property_readonly("T",
                             [](const PyValue& a) { return wrap(a.graph, transpose(a.value)); })
      .def(
          "sum",
          [](const PyValue& a, pyb::object axes, bool keepdims) {
            return wrap(a.graph, sum(a.value, to_axes("sum", axes), keepdims));
          },
          pyb::arg("axes") = pyb::none(), pyb::arg("keepdims") = false,
          "Sum over axes (an int or a list; None: all).")
      .def(
          "mean",
          [](const PyValue& a, pyb::object axes, bool keepdims) {
            return wrap(a.graph, mean(a.value, to_axes("mean", axes), keepdims));
          },
          pyb::arg("axes") = pyb::none(), pyb::arg("keepdims") = false,
          "Mean over axes (an int or a list; None: all).");

  m.def(
      "_op_graph", [](const pyb::args& values) { return op_graph(values); },
      "The graph an op over these operands goes in (None without a Value).");
  m.def(
      "parse_graph", [](const std::string& text) { return GraphPtr(parse_graph(text)); },
      pyb::arg("text"), "Parses a graph in the text format print(g) writes.");
}

}  // namespace rlx::py
