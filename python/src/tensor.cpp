// rlx.Tensor and dtypes: NumPy arrays in (copied), NumPy views out (zero-copy, through
// the buffer protocol). bf16 data is a NumPy uint16 array of bit patterns; bf16_to_f32
// and f32_to_bf16 convert (round to nearest even).
#include <cstring>

#include "common.h"

namespace rlx::py {

namespace {

const char* numpy_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "uint16";
    case DType::i8:
      return "int8";
    case DType::i16:
      return "int16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u8:
      return "uint8";
    case DType::boolean:
      return "bool";
    case DType::string:
      return "object";  // Python str elements
    case DType::c64:
      return "complex64";
    case DType::c128:
      return "complex128";
    default:  // quantized blocks have no NumPy element type
      break;
  }
  return "?";
}

// struct-module format characters (what the buffer protocol reports).
const char* buffer_format(DType t) {
  switch (t) {
    case DType::f32:
      return "f";
    case DType::f64:
      return "d";
    case DType::f16:
      return "e";
    case DType::bf16:
      return "H";
    case DType::i8:
      return "b";
    case DType::i16:
      return "h";
    case DType::i32:
      return "i";
    case DType::i64:
      return "q";
    case DType::c64:
      return "Zf";
    case DType::c128:
      return "Zd";
    case DType::u8:
      return "B";
    case DType::boolean:
      return "?";
    default:  // strings, quantized blocks
      break;
  }
  fail<NotSupported>("Tensor", "expected a numeric or bool tensor for the buffer protocol, got ",
                     dtype_name(t));
}

std::vector<int64_t> shape_of(const pyb::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

pyb::module_ numpy() { return pyb::module_::import("numpy"); }

pyb::array bf16_to_f32_array(const pyb::handle& obj) {
  auto a = pyb::array::ensure(obj);
  if (!a || a.dtype().kind() != 'u' || a.dtype().itemsize() != 2)
    fail<TypeError>("bf16_to_f32", "expected a uint16 array of bf16 bit patterns, got ",
                    pyb::str(pyb::type::of(obj)).cast<std::string>(),
                    a ? " of " + py_str(a.dtype()) : "");
  pyb::array_t<uint16_t, pyb::array::c_style> in(a);
  pyb::array_t<float> out(std::vector<pyb::ssize_t>(in.shape(), in.shape() + in.ndim()));
  const uint16_t* p = in.data();
  float* q = out.mutable_data();
  for (pyb::ssize_t i = 0; i < in.size(); ++i) q[i] = rlx::bf16_to_f32(p[i]);
  return out;
}

pyb::array f32_to_bf16_array(const pyb::handle& obj) {
  pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast> in =
      numpy().attr("asarray")(obj, "float32");
  pyb::array_t<uint16_t> out(std::vector<pyb::ssize_t>(in.shape(), in.shape() + in.ndim()));
  const float* p = in.data();
  uint16_t* q = out.mutable_data();
  for (pyb::ssize_t i = 0; i < in.size(); ++i) q[i] = rlx::f32_to_bf16(p[i]);
  return out;
}

// DLPack (the v0.8 ABI, as NumPy's and PyTorch's from_dlpack read it): t.__dlpack__()
// hands out a capsule viewing the tensor's memory; the consumer's deleter call drops
// the Tensor handle the capsule holds.
namespace dl {
struct Device {
  int32_t device_type, device_id;
};
struct DataType {
  uint8_t code, bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};
enum : int32_t { kCPU = 1, kCUDA = 2 };
enum : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kBool = 6 };

struct Holder {
  rlx::Tensor tensor;
  std::vector<int64_t> shape, strides;
  ManagedTensor managed;
};

DataType data_type(DType t) {
  auto bits = uint8_t(dtype_size(t) * 8);
  if (t == DType::bf16) return {kBfloat, 16, 1};
  if (is_float(t)) return {kFloat, bits, 1};
  if (t == DType::boolean) return {kBool, 8, 1};
  if (t == DType::u8) return {kUInt, 8, 1};
  return {kInt, bits, 1};
}

pyb::capsule export_tensor(const rlx::Tensor& t) {
  if (!t.defined()) fail<ValueError>("__dlpack__", "expected a defined tensor, got an empty one");
  auto* h = new Holder{t, t.shape(), t.strides(), {}};
  Device dev = t.device().is_cpu() ? Device{kCPU, 0} : Device{kCUDA, t.device().index};
  h->managed.dl_tensor = {
      t.data(),          dev, int32_t(t.rank()), data_type(t.dtype()), h->shape.data(),
      h->strides.data(), 0};
  h->managed.manager_ctx = h;
  h->managed.deleter = [](ManagedTensor* self) { delete static_cast<Holder*>(self->manager_ctx); };
  // A capsule the consumer never took ("dltensor", not renamed "used_dltensor") is
  // freed here.
  return pyb::capsule(&h->managed, "dltensor", [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<ManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      m->deleter(m);
    } else {
      PyErr_Clear();
    }
  });
}
}  // namespace dl

}  // namespace

pyb::dtype numpy_dtype(DType t) {
  if (is_quantized(t))
    fail<NotSupported>("Tensor", "expected a dtype NumPy has, got ", dtype_name(t),
                       " (decode it with rlx.op('dequantize', ...))");
  return pyb::dtype(numpy_name(t));
}

DType dtype_from_numpy(const pyb::dtype& d, std::optional<DType> want) {
  char k = d.kind();
  auto size = d.itemsize();
  if (k == 'f' && size == 4) return DType::f32;
  if (k == 'f' && size == 8) return DType::f64;
  if (k == 'f' && size == 2) return DType::f16;
  if (k == 'i' && size == 1) return DType::i8;
  if (k == 'i' && size == 2) return DType::i16;
  if (k == 'i' && size == 4) return DType::i32;
  if (k == 'i' && size == 8) return DType::i64;
  if (k == 'u' && size == 1) return DType::u8;
  if (k == 'b') return DType::boolean;
  if (k == 'c' && size == 8) return DType::c64;
  if (k == 'c' && size == 16) return DType::c128;
  if (k == 'u' && size == 2 && want == DType::bf16) return DType::bf16;
  if (k == 'U') return DType::string;
  fail<TypeError>("rlx", "expected a NumPy dtype rlx holds (float32, float64, float16, int8, ",
                  "int16, int32, int64, uint8, bool, str, complex64, complex128; uint16 as bf16 ",
                  "bits where bf16 is expected), got ", py_str(d));
}

DType to_dtype(pyb::handle obj) {
  if (pyb::isinstance<DType>(obj)) return obj.cast<DType>();
  bool is_name = pyb::isinstance<pyb::str>(obj);
  if (is_name)
    if (auto t = dtype_from_name(obj.cast<std::string>())) return *t;
  pyb::dtype d;
  try {  // a NumPy dtype, type or dtype string ("float32", "<f8")
    d = pyb::dtype::from_args(pyb::reinterpret_borrow<pyb::object>(obj));
  } catch (const pyb::error_already_set&) {
    if (is_name)
      fail<TypeError>("rlx", "expected a dtype name (f32, f64, f16, bf16, i8, i16, i32, i64, ",
                      "u8, bool), got '", obj.cast<std::string>(), "'");
    fail<TypeError>("rlx", "expected a dtype (rlx.f32, 'f32', numpy.float32), got ",
                    py_str(pyb::type::of(obj)));
  }
  return dtype_from_numpy(d);
}

pyb::array to_numpy(const Tensor& t) {
  if (!t.defined()) fail<ValueError>("Tensor", "expected a defined tensor, got an empty one");
  if (!t.device().is_cpu())
    fail<NotSupported>("Tensor", "expected a host tensor for NumPy, got one on ", t.device().str());
  if (t.dtype() == DType::string) {  // an object array of str, not a view of the handles
    pyb::list items;
    for (const std::string& s : t.to_strings()) items.append(pyb::str(s));
    pyb::object a = numpy().attr("array")(items, "object");
    return a.attr("reshape")(pyb::cast(t.shape())).cast<pyb::array>();
  }
  auto item = int64_t(dtype_size(t.dtype()));
  std::vector<pyb::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<pyb::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(pyb::ssize_t(s * item));
  // The capsule owns a Tensor handle: the buffer lives as long as the array does.
  pyb::capsule base(new Tensor(t), [](void* p) { delete static_cast<Tensor*>(p); });
  return pyb::array(numpy_dtype(t.dtype()), shape, strides, t.data(), base);
}

Tensor to_tensor(pyb::handle obj, std::optional<DType> want) {
  if (pyb::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  pyb::array a;
  if (pyb::isinstance<pyb::array>(obj)) {
    a = pyb::reinterpret_borrow<pyb::array>(obj);
  } else if (want == DType::bf16) {
    a = f32_to_bf16_array(obj);
  } else if (want) {
    a = numpy().attr("asarray")(obj, numpy_dtype(*want));
  } else {
    a = numpy().attr("asarray")(obj);
  }
  if (a.dtype().kind() == 'U' || (a.dtype().kind() == 'O' && want == DType::string)) {
    std::vector<std::string> words;  // str elements, row-major
    for (pyb::handle e : a.attr("ravel")().attr("tolist")()) {
      if (!pyb::isinstance<pyb::str>(e))
        fail<TypeError>("rlx", "expected str elements for a string tensor, got ",
                        py_str(pyb::type::of(e)));
      words.push_back(e.cast<std::string>());
    }
    return Tensor::from_strings(words, shape_of(a));
  }
  DType dt = dtype_from_numpy(a.dtype(), want);
  pyb::array c = a;  // (numpy.ascontiguousarray would make a 0-d array 1-d)
  if (!(a.flags() & pyb::array::c_style)) c = a.attr("copy")("C");
  return Tensor::from_data(dt, shape_of(c), c.data());
}

Literal to_literal(pyb::handle obj, std::optional<DType> want) {
  Tensor t = to_tensor(obj, want);
  return t.to_literal();
}

void register_tensor(pyb::module_& m) {
  pyb::enum_<DType> dt(m, "DType", "An element type: rlx.f32, rlx.bf16, rlx.bool_, …");
  std::vector<DType> all(std::begin(kAllDTypes), std::end(kAllDTypes));
  all.push_back(DType::string);  // rlx.string: str elements (NumPy arrays of str / object)
  all.insert(all.end(), std::begin(kComplexDTypes), std::end(kComplexDTypes));
  for (DType t : all) {
    std::string name(dtype_name(t));
    if (name == "bool") name = "bool_";
    dt.value(name.c_str(), t);
    m.attr(name.c_str()) = t;
  }
  dt.def_property_readonly("name", [](DType t) { return std::string(dtype_name(t)); })
      .def_property_readonly("itemsize", [](DType t) { return dtype_size(t); })
      .def_property_readonly("is_float", [](DType t) { return is_float(t); })
      .def_property_readonly(
          "numpy", [](DType t) { return numpy_dtype(t); },
          "The NumPy dtype holding this dtype's elements (uint16 bit patterns for bf16).");
  // Replaced, not overloaded: enum_'s own __str__ / __repr__ would match first.
  pyb::setattr(dt, "__str__",
               pyb::cpp_function([](DType t) { return std::string(dtype_name(t)); },
                                 pyb::name("__str__"), pyb::is_method(dt)));
  pyb::setattr(dt, "__repr__",
               pyb::cpp_function(
                   [](DType t) {
                     std::string n(dtype_name(t));
                     return "rlx." + (n == "bool" ? n + "_" : n);
                   },
                   pyb::name("__repr__"), pyb::is_method(dt)));
  m.def("dtype", &to_dtype, pyb::arg("like"),
        "The rlx dtype of an rlx.DType, a name ('f32') or a NumPy dtype.");

  pyb::class_<Tensor>(m, "Tensor", pyb::buffer_protocol(), R"doc(
A host tensor. rlx.Tensor(array, dtype=None) copies a NumPy array (or anything
numpy.asarray takes); numpy.asarray(t) and t.numpy() view its memory without copying.
bf16 tensors read and write as NumPy uint16 arrays of bit patterns (see rlx.bf16_to_f32).
)doc")
      .def(pyb::init([](pyb::handle obj, pyb::object dtype) {
             std::optional<DType> want;
             if (!dtype.is_none()) want = to_dtype(dtype);
             Tensor t = to_tensor(obj, want);
             if (want && t.dtype() != *want)
               fail<TypeError>("Tensor", "expected an array of ", dtype_name(*want), ", got ",
                               dtype_name(t.dtype()), " (convert with astype first)");
             return t;
           }),
           pyb::arg("data"), pyb::arg("dtype") = pyb::none())
      .def_buffer([](const Tensor& t) {
        if (!t.device().is_cpu())
          fail<NotSupported>("Tensor", "expected a host tensor for the buffer protocol, got ",
                             t.device().str());
        auto item = pyb::ssize_t(dtype_size(t.dtype()));
        std::vector<pyb::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
        for (int64_t s : t.strides()) strides.push_back(pyb::ssize_t(s) * item);
        return pyb::buffer_info(t.data(), item, buffer_format(t.dtype()), t.rank(), shape, strides);
      })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("shape",
                             [](const Tensor& t) { return pyb::tuple(pyb::cast(t.shape())); })
      .def_property_readonly(
          "strides", [](const Tensor& t) { return pyb::tuple(pyb::cast(t.strides())); },
          "Strides in elements.")
      .def_property_readonly("ndim", &Tensor::rank)
      .def_property_readonly("size", &Tensor::numel)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("device", [](const Tensor& t) { return t.device().str(); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("numpy", &to_numpy, "A NumPy array viewing this tensor's memory (no copy).")
      .def(
          "__array__",
          [](const Tensor& t, pyb::object dtype, pyb::object) -> pyb::object {
            pyb::array a = to_numpy(t);
            if (dtype.is_none()) return a;
            return a.attr("astype")(dtype);
          },
          pyb::arg("dtype") = pyb::none(), pyb::arg("copy") = pyb::none())
      .def(
          "__dlpack__",
          [](const Tensor& t, pyb::object stream) {
            (void)stream;  // host memory, or CUDA work already finished by run()
            return dl::export_tensor(t);
          },
          pyb::arg("stream") = pyb::none(),
          "A DLPack capsule viewing this tensor (numpy.from_dlpack, torch.from_dlpack).")
      .def("__dlpack_device__",
           [](const Tensor& t) {
             return pyb::make_tuple(t.device().is_cpu() ? int(dl::kCPU) : int(dl::kCUDA),
                                    t.device().is_cpu() ? 0 : t.device().index);
           })
      .def("__len__",
           [](const Tensor& t) {
             if (t.rank() == 0) fail<TypeError>("Tensor", "expected rank >= 1 for len(), got 0");
             return t.shape()[0];
           })
      .def("__repr__", [](const Tensor& t) { return "rlx.Tensor(" + t.type().str() + ")"; });

  m.def("bf16_to_f32", &bf16_to_f32_array, pyb::arg("bits"), R"doc(
bf16 bit patterns (a NumPy uint16 array, as rlx hands out bf16 tensors) -> float32 array.
)doc");
  m.def("f32_to_bf16", &f32_to_bf16_array, pyb::arg("values"), R"doc(
Floats -> bf16 bit patterns (a NumPy uint16 array), rounded to nearest even; pass the
result where a bf16 tensor is expected.
)doc");
}

}  // namespace rlx::py
