// Shared pieces of the Python bindings: NumPy <-> Tensor conversion, graph handles that
// keep their graph alive, and the per-area registration functions module.cpp calls.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx {
struct AttrSpec;
}

namespace rlx::py {

namespace pyb = pybind11;

// Graphs are shared between Python objects (values, compiled graphs, transforms).
using GraphPtr = std::shared_ptr<Graph>;

// A Value together with its graph: Python values keep their graph alive.
struct PyValue {
  GraphPtr graph;
  Value value;
};

inline std::string py_str(pyb::handle h) { return pyb::str(h).cast<std::string>(); }

// The NumPy dtype that holds an rlx dtype (bf16 is held as uint16 bit patterns).
pyb::dtype numpy_dtype(DType t);
// The rlx dtype of a NumPy dtype; uint16 reads as bf16 only when `want` is bf16.
// Throws TypeError for dtypes rlx has no counterpart for.
DType dtype_from_numpy(const pyb::dtype& d, std::optional<DType> want = std::nullopt);
// An rlx.DType, a dtype name ("f32", "bool"), or a NumPy dtype / type -> DType.
DType to_dtype(pyb::handle obj);

// A NumPy array viewing t's memory (no copy); the array keeps the buffer alive.
pyb::array to_numpy(const Tensor& t);
// A fresh host Tensor holding obj (an rlx.Tensor is returned as is). Non-arrays (Python
// scalars, lists) are converted to `want` when given; arrays keep their dtype, except
// that uint16 arrays are taken as bf16 bit patterns where bf16 is wanted.
Tensor to_tensor(pyb::handle obj, std::optional<DType> want = std::nullopt);
Literal to_literal(pyb::handle obj, std::optional<DType> want = std::nullopt);

// obj as a value of g: a Value of g as is; a Python number as a scalar constant of
// dtype `like`; an array or rlx.Tensor as a constant of its own dtype. A Value of another
// graph is lifted into g when g is being traced (below), else a ValueError.
Value as_value(const GraphPtr& g, pyb::handle obj, DType like);
// The graph an op over these operands goes in: of their Values' graphs, the innermost one
// being traced, else the first Value's (null when there is no Value).
GraphPtr op_graph(std::initializer_list<pyb::handle> operands);
GraphPtr op_graph(const pyb::args& operands);

// The graphs rlx.jit and the function transforms are tracing, innermost last. A function
// traced inside another may use Values of the outer trace it closes over: each is lifted
// into the inner graph as a new input "c<k>" and recorded, and the caller binds it to the
// outer Value when it inlines the inner graph (functional.py).
struct Trace {
  GraphPtr graph;
  std::vector<PyValue> captured;  // outer Values, in the order of their inputs
  std::vector<Value> lifted;      // their inputs in graph
};
std::vector<Trace>& traces();
PyValue wrap(const GraphPtr& g, Value v);
// A Python object as an attribute of spec's kind (guessed from the Python type when spec
// is null); TypeError naming op and key when it does not fit.
AttrValue to_attr(std::string_view op, const std::string& key, const AttrSpec* spec, pyb::handle v);
// Reduction axes: None (all), an int or a sequence of ints.
IntList to_axes(std::string_view op, pyb::handle axes);

void register_errors(pyb::module_& m);
void register_tensor(pyb::module_& m);
void register_graph(pyb::module_& m);
void register_ops(pyb::module_& m);
void register_session(pyb::module_& m);
void register_llm(pyb::module_& m);
void register_cuda(pyb::module_& m);
void register_transforms(pyb::module_& m);
void register_onnx(pyb::module_& m);
void register_train(pyb::module_& m);
void register_custom(pyb::module_& m);

}  // namespace rlx::py
