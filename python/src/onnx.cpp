// rlx.onnx: ONNX models as rlx graphs, and the TensorProto files of ONNX's test layout.
#include "rlx/onnx.h"

#include <pybind11/stl/filesystem.h>

#include <filesystem>

#include "common.h"

namespace rlx::py {

namespace {

// What onnx.load returns: the graph and the ONNX names of its inputs and outputs.
struct PyModel {
  GraphPtr graph;
  std::vector<std::string> inputs, outputs;
  int64_t ir_version = 0, opset = 0;
  std::string producer;
};

}  // namespace

void register_onnx(pyb::module_& m) {
  pyb::class_<PyModel>(m, "Model", R"doc(
An imported ONNX model: .graph (an rlx.Graph), .inputs / .outputs (ONNX names, in the
order of the graph's inputs and outputs: graph.input_names[i] is inputs[i] made an
identifier), .opset, .ir_version, .producer.
)doc")
      .def_readonly("graph", &PyModel::graph)
      .def_readonly("inputs", &PyModel::inputs)
      .def_readonly("outputs", &PyModel::outputs)
      .def_readonly("ir_version", &PyModel::ir_version)
      .def_readonly("opset", &PyModel::opset)
      .def_readonly("producer", &PyModel::producer)
      .def("__repr__", [](const PyModel& p) {
        return str_cat("<rlx.onnx.Model opset ", p.opset, ": ", p.inputs.size(), " inputs, ",
                       p.outputs.size(), " outputs>");
      });
  m.def(
      "load",
      [](const std::filesystem::path& path,
         std::map<std::string, std::vector<int64_t>> input_shapes,
         std::map<std::string, int64_t> dims) {
        onnx::ImportOptions o;
        o.input_shapes = std::move(input_shapes);
        o.dims = std::move(dims);
        onnx::Model model;
        {
          pyb::gil_scoped_release release;
          model = onnx::load(path.string(), o);
        }
        return PyModel{GraphPtr(std::move(model.graph)),
                       model.inputs,
                       model.outputs,
                       model.ir_version,
                       model.opset,
                       model.producer};
      },
      pyb::arg("path"), pyb::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
      pyb::arg("dims") = std::map<std::string, int64_t>{}, R"doc(
Imports an ONNX model. input_shapes: {ONNX input name: shape} fixes input shapes (shape
arithmetic then folds at import); dims: sizes for named symbolic dims (dim_param).
Raises OSError (unreadable file), ValueError (malformed graph), NotImplementedError
(ops with no converter, all listed).
)doc");
  m.def(
      "read_tensor",
      [](const std::filesystem::path& path) { return to_numpy(onnx::read_tensor(path.string())); },
      pyb::arg("path"), "A TensorProto file (input_N.pb / output_N.pb) as a NumPy array.");
  m.def(
      "read_tensor_name",
      [](const std::filesystem::path& path) { return onnx::read_tensor_name(path.string()); },
      pyb::arg("path"), "The ONNX name recorded in a TensorProto file ('' when none).");
  m.def("register_ops", &onnx::register_ops,
        "Registers the onnx.* ops (load() does it; parse_graph of a converted model needs it).");
}

}  // namespace rlx::py
