// The extension module rlx._rlx; the package python/rlx wraps it.
#include "common.h"
#include "rlx/text.h"
#include "rlx/version.h"

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

}  // namespace rlx::py

PYBIND11_MODULE(_rlx, m) {
  using namespace rlx::py;
  m.doc() = "rlx: an ML compiler and runtime (native module; use the package `rlx`).";
  m.attr("__version__") = rlx::version();
  register_errors(m);
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
