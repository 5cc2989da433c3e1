// The extension module rlx._rlx; the package python/rlx wraps it.
#include "common.h"
#include "rlx/cpu_isa.h"
#include "rlx/settings.h"
#include "rlx/text.h"
#include "rlx/version.h"
#include "rlx_linalg/linalg.h"
#include "rlx_sparse/sparse.h"

namespace rlx::py {

void register_errors(pyb::module_& m) {
  (void)m;
  // rlx's typed errors become the Python exceptions of the same meaning, same message.
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rlx::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const rlx::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const rlx::NotSupported& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const rlx::IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const rlx::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const pybind11::cast_error& e) {
      // An argument of the wrong Python type (pybind11 would say RuntimeError).
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
}

// rlx.settings: the process's Settings (rlx/settings.h), one attribute per field.
void register_settings(pyb::module_& m) {
  pyb::class_<Settings> cls(m, "Settings", R"doc(
rlx's runtime switches (rlx.settings): each starts from its RLX_* environment variable;
set one before compiling, e.g. rlx.settings.profile = True. str(rlx.settings) lists them.
)doc");
#define RLX_SETTING_ATTR(type, field, var, def, doc) \
  cls.def_readwrite(#field, &Settings::field, var ": " doc);
  RLX_SETTINGS(RLX_SETTING_ATTR)
#undef RLX_SETTING_ATTR
  cls.def("__repr__", [](const Settings&) {
    std::string out;
    for (const SettingInfo& r : setting_table())
      out +=
          str_cat(r.name, " = ", r.value, "  (", r.variable, ", default ", r.default_value, ")\n");
    return out;
  });
  m.attr("settings") = pyb::cast(&settings(), pyb::return_value_policy::reference);
}

}  // namespace rlx::py

PYBIND11_MODULE(_rlx, m) {
  using namespace rlx::py;
  m.doc() = "rlx: an ML compiler and runtime (native module; use the package `rlx`).";
  m.attr("__version__") = rlx::version();
  // The CPU kernels' instruction-set level ("baseline", "avx2", "avx512" or "native"):
  // RLX_CPU_ISA / rlx.settings.cpu_isa where set before the first CPU compile.
  m.def("cpu_isa", [] { return std::string(rlx::cpu_isa_name(rlx::cpu_isa())); });
  register_errors(m);
  // The downstream op packages rlx.linalg and rlx.sparse wrap: their ops are in the registry
  // (rlx.op_names(), rlx.ops.linalg.*) from import on.
  rlx::linalg::register_ops();
  rlx::sparse::register_ops();
  register_settings(m);
  register_tensor(m);
  register_graph(m);
  register_ops(m);
  register_custom(m);
  register_session(m);
  register_transforms(m);
  auto cuda = m.def_submodule("cuda", "The CUDA device: presence, memory, how f32 matmul runs");
  register_cuda(cuda);
  auto onnx = m.def_submodule("onnx", "ONNX import");
  register_onnx(onnx);
  auto optim = m.def_submodule("optim", "Optimizers, schedules, initialisers, Trainer");
  register_train(optim);
  auto llm = m.def_submodule("llm", "GGUF models: tokenize, logits, generate");
  register_llm(llm);
}
