// rlx.Session and compiled graphs: compile a Graph, set params, run with NumPy arrays.
#include "rlx/session.h"

#include "common.h"
#include "rlx/cuda.h"
#include "rlx/passes.h"

namespace rlx::py {

namespace {

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return Device::cuda(std::stoi(s.substr(5)));
  fail<ValueError>("Session", "expected a device 'cpu', 'cuda' or 'cuda:N', got '", s, "'");
}

Precision parse_precision(const std::string& s) {
  for (Precision p :
       {Precision::f32, Precision::bf16, Precision::f16, Precision::auto_bf16, Precision::auto_f16})
    if (precision_name(p) == s) return p;
  fail<ValueError>("compile", "expected a precision (f32, bf16, f16, auto_bf16, auto_f16), got '",
                   s, "'");
}

// A compiled graph and the graph it was compiled from (for the inputs' dtypes).
struct PyCompiled {
  GraphPtr graph;
  std::shared_ptr<CompiledGraph> compiled;

  std::optional<DType> arg_dtype(const std::string& name) const {
    const Arg* a = graph->find_arg(name);
    return a ? std::optional<DType>(a->value.dtype()) : std::nullopt;
  }

  pyb::dict run(pyb::handle inputs) const {
    TensorMap in;
    auto names = compiled->input_names();
    if (pyb::isinstance<pyb::dict>(inputs)) {
      for (auto [k, v] : inputs.cast<pyb::dict>()) {
        auto name = k.cast<std::string>();
        in[name] = to_tensor(v, arg_dtype(name));
      }
    } else if (pyb::isinstance<pyb::sequence>(inputs) && !pyb::isinstance<pyb::str>(inputs)) {
      auto seq = inputs.cast<pyb::sequence>();
      if (seq.size() != names.size())
        fail<ValueError>("run", "expected ", names.size(), " inputs in order, got ", seq.size());
      for (size_t i = 0; i < names.size(); ++i)
        in[names[i]] = to_tensor(seq[i], arg_dtype(names[i]));
    } else {
      fail<TypeError>("run", "expected a dict {name: array} or a list of arrays, got ",
                      pyb::str(pyb::type::of(inputs)).cast<std::string>());
    }
    TensorMap out;
    {
      pyb::gil_scoped_release release;
      out = compiled->run(in);
    }
    pyb::dict d;
    for (const std::string& name : compiled->output_names())
      d[pyb::str(name)] = to_numpy(out.at(name));
    return d;
  }
};

}  // namespace

void register_session(pyb::module_& m) {
  pyb::class_<PyCompiled>(m, "CompiledGraph", R"doc(
A graph compiled for a device. run() takes the inputs as a dict {name: array} or a list
in the graph's input order and returns {output name: numpy array} in output order.
Arrays keep their dtype (a float64 array for an f32 input is a TypeError); Python
numbers and lists are converted to the input's dtype; bf16 inputs take uint16 bits.
)doc")
      .def("run", &PyCompiled::run, pyb::arg("inputs") = pyb::dict())
      .def("__call__", &PyCompiled::run, pyb::arg("inputs") = pyb::dict())
      .def(
          "set_param",
          [](PyCompiled& c, const std::string& name, pyb::handle value) {
            c.compiled->set_param(name, to_tensor(value, c.arg_dtype(name)));
          },
          pyb::arg("name"), pyb::arg("value"), "Binds a param to a copy of an array.")
      .def(
          "param",
          [](const PyCompiled& c, const std::string& name) -> pyb::object {
            Tensor t = c.compiled->param(name);
            if (!t.defined()) return pyb::none();
            return to_numpy(t);
          },
          pyb::arg("name"), "A param's current value (a view), or None when unset.")
      .def_property_readonly("input_names",
                             [](const PyCompiled& c) { return c.compiled->input_names(); })
      .def_property_readonly("param_names",
                             [](const PyCompiled& c) { return c.compiled->param_names(); })
      .def_property_readonly("output_names",
                             [](const PyCompiled& c) { return c.compiled->output_names(); })
      .def_property_readonly("device",
                             [](const PyCompiled& c) { return c.compiled->device().str(); })
      .def(
          "report", [](const PyCompiled& c) { return c.compiled->report().str(); },
          "The dispatch report: for each op, how its nodes run.")
      .def(
          "lowered", [](const PyCompiled& c) { return GraphPtr(c.compiled->lowered().clone()); },
          "The graph as it runs (passes applied, decompositions inlined).");

  pyb::class_<Session>(m, "Session", "Compiles graphs for a device: rlx.Session('cpu').")
      .def(pyb::init([](const std::string& device) { return Session(parse_device(device)); }),
           pyb::arg("device") = "cpu")
      .def_property_readonly("device", [](const Session& s) { return s.device().str(); })
      .def(
          "compile",
          [](const Session& s, const GraphPtr& g, int opt_level, int threads,
             std::map<std::string, int64_t> dims, const std::string& precision,
             std::optional<std::vector<std::string>> passes,
             std::vector<std::string> disable_passes, bool cache) {
            CompileOptions o;
            o.opt_level = opt_level;
            o.threads = threads;
            o.dims = std::move(dims);
            o.precision = parse_precision(precision);
            o.passes = std::move(passes);
            o.disable_passes = std::move(disable_passes);
            o.cache = cache;
            std::shared_ptr<CompiledGraph> cg;
            {
              pyb::gil_scoped_release release;
              cg = std::make_shared<CompiledGraph>(s.compile(*g, o));
            }
            return PyCompiled{g, cg};
          },
          pyb::arg("graph").none(false), pyb::arg("opt_level") = -1, pyb::arg("threads") = 0,
          pyb::arg("dims") = std::map<std::string, int64_t>{}, pyb::arg("precision") = "f32",
          pyb::arg("passes") = pyb::none(), pyb::arg("disable_passes") = std::vector<std::string>{},
          pyb::arg("cache") = true, R"doc(
Compiles a graph. opt_level: 0 no passes, 1 clean-ups, 2 also fusion (-1: RLX_OPT_LEVEL,
else 2); threads: kernel threads per run (0: every core); dims: {symbol: size} fixed
now; precision: "f32", "bf16", "f16", "auto_bf16" or "auto_f16" (of the heavy ops);
passes: the pass pipeline to run instead of the default; disable_passes: passes left
out; cache: reuse an earlier compile of an equal graph.
)doc");
}

void register_cuda(pyb::module_& m) {
  m.def("available", &cuda::available,
        "Whether this build has the CUDA backend and a CUDA device is present.");
  m.def("device_count", &cuda::device_count);
  m.def("synchronize", &cuda::synchronize, pyb::arg("device") = 0,
        "Waits for the work queued on the device's stream.");
  m.def(
      "memory_info",
      [](int device) {
        cuda::MemoryInfo i = cuda::memory_info(device);
        pyb::dict d;
        d["reserved"] = i.reserved;
        d["used"] = i.used;
        return d;
      },
      pyb::arg("device") = 0,
      "{'reserved': bytes the caching pool holds, 'used': bytes live tensors take}.");
  m.def("empty_cache", &cuda::empty_cache, pyb::arg("device") = 0,
        "Gives the pool's unused memory back to the driver; returns the bytes released.");
  pyb::class_<cuda::Event>(m, "Event", R"doc(
A mark in a device's stream, for timing device work without waiting after each step:
record() marks the end of the work queued so far; start.elapsed_ms(end) is the device time
between two marks (it waits for end).
)doc")
      .def(pyb::init<int>(), pyb::arg("device") = 0)
      .def("record", &cuda::Event::record, "Marks the end of the work queued so far.")
      .def("done", &cuda::Event::done, "Whether the device has passed the mark.")
      .def("synchronize", &cuda::Event::synchronize, pyb::call_guard<pyb::gil_scoped_release>(),
           "Waits until the device has passed the mark.")
      .def("elapsed_ms", &cuda::Event::elapsed_ms, pyb::arg("end"),
           pyb::call_guard<pyb::gil_scoped_release>(),
           "Milliseconds of device time from this mark to end (waits for end).")
      .def_property_readonly("device", &cuda::Event::device);
  m.def("set_f32_matmul", &cuda::set_f32_matmul, pyb::arg("mode"), R"doc(
How matmul computes f32 products on the GPU: "auto" (default; large products on the
tensor cores at SGEMM's accuracy, the rest as SGEMM), "sgemm" or "tc". Graphs compiled
afterwards take it.
)doc");
}

}  // namespace rlx::py
