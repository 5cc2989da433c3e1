// Graph transforms (JAX style, over graphs): each takes a Graph and returns a new one.
#include "rlx/transforms.h"

#include "common.h"

namespace rlx::py {

namespace {

std::vector<std::string> names(pyb::handle obj) {
  if (obj.is_none()) return {};
  if (pyb::isinstance<pyb::str>(obj)) return {obj.cast<std::string>()};
  return obj.cast<std::vector<std::string>>();
}

Remat to_remat(bool checkpoints) { return checkpoints ? Remat::checkpoints : Remat::none; }

GradOptions grad_options(pyb::handle wrt, const std::string& output, bool checkpoints) {
  GradOptions o;
  o.wrt = names(wrt);
  o.output = output;
  o.remat = to_remat(checkpoints);
  return o;
}

// {name: axis or None} -> the C++ map (None: not batched).
std::map<std::string, int, std::less<>> axes_map(pyb::handle obj) {
  std::map<std::string, int, std::less<>> out;
  if (obj.is_none()) return out;
  for (auto [k, v] : obj.cast<pyb::dict>())
    out[k.cast<std::string>()] = v.is_none() ? kNotBatched : v.cast<int>();
  return out;
}

template <class F>
GraphPtr released(F f) {
  pyb::gil_scoped_release release;
  return GraphPtr(f());
}

}  // namespace

void register_transforms(pyb::module_& m) {
  const char* grad_args = R"doc(
wrt: arg names (a name or a list; default: every float param, or every float input when
there are no params); output: the scalar output (default: the first); checkpoints:
recompute activations between `checkpoint` ops instead of storing them.)doc";
  m.def(
      "grad",
      [](const GraphPtr& g, pyb::object wrt, const std::string& output, bool ck) {
        auto o = grad_options(wrt, output, ck);
        return released([&] { return grad(*g, o); });
      },
      pyb::arg("graph").none(false), pyb::arg("wrt") = pyb::none(), pyb::arg("output") = "",
      pyb::arg("checkpoints") = false,
      (std::string("The gradient graph: g's args in, \"grad.<arg>\" out.") + grad_args).c_str());
  m.def(
      "value_and_grad",
      [](const GraphPtr& g, pyb::object wrt, const std::string& output, bool ck) {
        auto o = grad_options(wrt, output, ck);
        return released([&] { return value_and_grad(*g, o); });
      },
      pyb::arg("graph").none(false), pyb::arg("wrt") = pyb::none(), pyb::arg("output") = "",
      pyb::arg("checkpoints") = false,
      (std::string("g's outputs, then \"grad.<arg>\" for each wrt arg.") + grad_args).c_str());
  m.def(
      "vjp",
      [](const GraphPtr& g, pyb::object wrt, bool ck) {
        VjpOptions o;
        o.wrt = names(wrt);
        o.remat = to_remat(ck);
        return released([&] { return vjp(*g, o); });
      },
      pyb::arg("graph").none(false), pyb::arg("wrt") = pyb::none(), pyb::arg("checkpoints") = false,
      "Inputs: g's args, then \"ct.<output>\" per float output. Outputs: g's outputs, then "
      "\"grad.<arg>\" per wrt arg.");
  m.def(
      "jvp",
      [](const GraphPtr& g, pyb::object wrt) {
        auto w = names(wrt);
        return released([&] { return jvp(*g, w); });
      },
      pyb::arg("graph").none(false), pyb::arg("wrt") = pyb::none(),
      "Inputs: g's args, then \"tan.<arg>\" per wrt arg. Outputs: g's outputs, then "
      "\"tan.<output>\" per float output.");
  m.def(
      "hvp",
      [](const GraphPtr& g, pyb::object wrt, const std::string& output) {
        auto o = grad_options(wrt, output, false);
        return released([&] { return hvp(*g, o); });
      },
      pyb::arg("graph").none(false), pyb::arg("wrt") = pyb::none(), pyb::arg("output") = "",
      "Hessian-vector product: g's args and \"tan.<arg>\" in, \"hvp.<arg>\" out.");
  m.def(
      "vmap",
      [](const GraphPtr& g, pyb::object in_axes, pyb::object out_axes, int default_in_axis,
         pyb::object size) {
        VmapOptions o;
        o.in_axes = axes_map(in_axes);
        o.out_axes = axes_map(out_axes);
        o.default_in_axis = default_in_axis;
        if (pyb::isinstance<pyb::str>(size))
          o.size = Dim::sym(size.cast<std::string>());
        else if (!size.is_none())
          o.size = Dim(size.cast<int64_t>());
        return released([&] { return vmap(*g, o); });
      },
      pyb::arg("graph").none(false), pyb::arg("in_axes") = pyb::none(),
      pyb::arg("out_axes") = pyb::none(), pyb::arg("default_in_axis") = 0,
      pyb::arg("size") = pyb::none(), R"doc(
Batches a graph. in_axes: {arg name: axis, or None for not batched}; inputs not listed
are batched at default_in_axis, params not listed are not batched. out_axes: {output
name: axis} (default 0). size: the batch size (an int or a symbol; default "vmap").
)doc");
  m.def(
      "jacfwd",
      [](const GraphPtr& g, pyb::object wrt) {
        auto w = names(wrt);
        return released([&] { return jacfwd(*g, w); });
      },
      pyb::arg("graph").none(false), pyb::arg("wrt") = pyb::none(),
      "Jacobians \"jac.<output>.<arg>\" by forward mode (static shapes).");
  m.def(
      "jacrev",
      [](const GraphPtr& g, pyb::object wrt) {
        auto w = names(wrt);
        return released([&] { return jacrev(*g, w); });
      },
      pyb::arg("graph").none(false), pyb::arg("wrt") = pyb::none(),
      "Jacobians \"jac.<output>.<arg>\" by reverse mode (static shapes).");
  m.def(
      "prune", [](const GraphPtr& g) { return GraphPtr(prune(*g)); }, pyb::arg("graph").none(false),
      "A copy without the nodes no output depends on.");
}

}  // namespace rlx::py
