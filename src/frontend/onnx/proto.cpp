// TensorProto decoding and model parsing, on the classes protoc generated for Debian's
// libonnx (onnx-ml.pb.h): nothing here parses protobuf by hand.
#include "frontend/onnx/proto.h"

#include <onnx/onnx_pb.h>

#include <bit>
#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx_import {

using ::onnx::TensorProto;

std::optional<DType> dtype_from_onnx(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT:
      return DType::f32;
    case TensorProto::DOUBLE:
      return DType::f64;
    case TensorProto::FLOAT16:
      return DType::f16;
    case TensorProto::BFLOAT16:
      return DType::bf16;
    case TensorProto::INT8:
      return DType::i8;
    case TensorProto::INT16:
      return DType::i16;
    case TensorProto::INT32:
      return DType::i32;
    case TensorProto::INT64:
      return DType::i64;
    case TensorProto::UINT8:
      return DType::u8;
    case TensorProto::BOOL:
      return DType::boolean;
    case TensorProto::STRING:
      return DType::string;
    case TensorProto::COMPLEX64:
      return DType::c64;
    case TensorProto::COMPLEX128:
      return DType::c128;
    case TensorProto::UINT16:
      return DType::i32;  // widened: every value fits
    case TensorProto::UINT32:
      return DType::i64;
    case TensorProto::UINT64:
      return DType::i64;  // values >= 2^63 wrap
    default:
      return std::nullopt;
  }
}

int32_t onnx_from_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return TensorProto::FLOAT;
    case DType::f64:
      return TensorProto::DOUBLE;
    case DType::f16:
      return TensorProto::FLOAT16;
    case DType::bf16:
      return TensorProto::BFLOAT16;
    case DType::i8:
      return TensorProto::INT8;
    case DType::i16:
      return TensorProto::INT16;
    case DType::i32:
      return TensorProto::INT32;
    case DType::i64:
      return TensorProto::INT64;
    case DType::u8:
      return TensorProto::UINT8;
    case DType::boolean:
      return TensorProto::BOOL;
    case DType::string:
      return TensorProto::STRING;
    case DType::c64:
      return TensorProto::COMPLEX64;
    case DType::c128:
      return TensorProto::COMPLEX128;
    default:  // quantized blocks: ONNX has no such element type
      break;
  }
  return TensorProto::UNDEFINED;
}

std::string onnx_type_name(int32_t elem_type) {
  if (TensorProto::DataType_IsValid(elem_type))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type));
  return str_cat("elem_type ", elem_type);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail<IoError>("onnx", "cannot open '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) fail<IoError>("onnx", "cannot read '", path, "'");
  return ss.str();
}

void parse_model(std::string_view bytes, ::onnx::ModelProto& model, std::string_view what) {
  if (bytes.size() > size_t(INT_MAX))
    fail<IoError>("onnx", what,
                  ": expected a model under 2 GiB (larger weights go in external "
                  "data files), got ",
                  bytes.size(), " bytes");
  if (bytes.empty() || !model.ParseFromArray(bytes.data(), int(bytes.size())))
    fail<IoError>("onnx", what,
                  ": not a valid ONNX model (the protobuf does not parse: a "
                  "truncated or corrupt file?)");
  if (!model.has_graph())
    fail<ValueError>("onnx", what, ": expected a model with a graph, got none");
}

namespace {

// The `want` bytes of a tensor stored outside the model (data_location EXTERNAL), in a
// file inside the model's folder (as ONNX's checker requires: a model cannot name any file
// on the machine).
std::string external_bytes(const TensorProto& t, const std::string& base_dir, std::string_view what,
                           size_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset") offset = std::stoll(kv.value());
      if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      fail<ValueError>("onnx", what, ": expected an integer external-data ", kv.key(), ", got '",
                       kv.value(), "'");
    }
  }
  if (location.empty())
    fail<ValueError>("onnx", what, ": expected an external-data location, got none");
  std::filesystem::path rel(location);
  bool inside = rel.is_relative() && !rel.has_root_name();
  for (const auto& part : rel) inside &= part != "..";
  if (!inside)
    fail<ValueError>("onnx", what,
                     ": expected an external-data location inside the model's folder, got '",
                     location, "'");
  std::filesystem::path p = std::filesystem::path(base_dir) / rel;
  std::ifstream f(p, std::ios::binary);
  if (!f) fail<IoError>("onnx", what, ": cannot open external data file '", p.string(), "'");
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  if (length < 0 && offset >= 0 && offset <= size) length = size - offset;
  if (offset < 0 || length < 0 || offset > size || length > size - offset)
    fail<IoError>("onnx", what, ": expected bytes [", offset, ", +", length, ") of '", p.string(),
                  "', which holds ", size);
  if (size_t(length) != want)
    fail<ValueError>("onnx", what, ": expected ", want, " bytes of external data for ",
                     onnx_type_name(t.data_type()), ints_str({t.dims().begin(), t.dims().end()}),
                     ", got ", length);
  std::string out(size_t(length), '\0');
  f.seekg(offset);
  f.read(out.data(), length);
  if (!f) fail<IoError>("onnx", what, ": cannot read '", p.string(), "'");
  return out;
}

// Little-endian raw bytes of `n` elements of `src_size` bytes each -> rlx storage. The
// widened unsigned types are zero-extended.
void copy_raw(std::string_view raw, int32_t elem, Tensor& out) {
  auto* dst = static_cast<uint8_t*>(out.data());
  size_t n = size_t(out.numel());
  switch (elem) {
    case TensorProto::UINT16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, raw.data() + 2 * i, 2);
        reinterpret_cast<int32_t*>(dst)[i] = v;
      }
      return;
    case TensorProto::UINT32:
      for (size_t i = 0; i < n; ++i) {
        uint32_t v;
        std::memcpy(&v, raw.data() + 4 * i, 4);
        reinterpret_cast<int64_t*>(dst)[i] = v;
      }
      return;
    case TensorProto::BOOL:
      for (size_t i = 0; i < n; ++i) dst[i] = raw[i] != 0;
      return;
    default:
      if (n) std::memcpy(dst, raw.data(), raw.size());
  }
}

size_t onnx_elem_size(int32_t elem) {
  switch (elem) {
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32:
      return 4;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::COMPLEX64:
      return 8;
    case TensorProto::COMPLEX128:
      return 16;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
    case TensorProto::INT16:
    case TensorProto::UINT16:
      return 2;
    default:
      return 1;
  }
}

template <class Src, class Field>
void copy_field(const Field& f, DType dtype, Tensor& out) {
  auto* dst = static_cast<uint8_t*>(out.data());
  for (int i = 0; i < f.size(); ++i) {
    Src v = static_cast<Src>(f.Get(i));
    switch (dtype) {
      case DType::f32:
        reinterpret_cast<float*>(dst)[i] = float(v);
        break;
      case DType::f64:
        reinterpret_cast<double*>(dst)[i] = double(v);
        break;
      case DType::i8:
        reinterpret_cast<int8_t*>(dst)[i] = int8_t(v);
        break;
      case DType::i16:
        reinterpret_cast<int16_t*>(dst)[i] = int16_t(v);
        break;
      case DType::i32:
        reinterpret_cast<int32_t*>(dst)[i] = int32_t(v);
        break;
      case DType::i64:
        reinterpret_cast<int64_t*>(dst)[i] = int64_t(v);
        break;
      case DType::u8:
        dst[i] = uint8_t(v);
        break;
      case DType::boolean:
        dst[i] = v != 0;
        break;
      case DType::f16:
      case DType::bf16:  // stored as their 16 bits in int32_data
        reinterpret_cast<uint16_t*>(dst)[i] = uint16_t(v);
        break;
      default:  // string_data: read by tensor_from_proto itself; no quantized protos
        break;
    }
  }
}

// The length of the typed field that holds a TensorProto's elements, and its name.
std::pair<size_t, const char*> typed_count(const TensorProto& t) {
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      return {size_t(t.float_data_size()), "float_data"};
    case TensorProto::DOUBLE:
      return {size_t(t.double_data_size()), "double_data"};
    case TensorProto::COMPLEX64:  // (re, im) pairs; an odd count is never a whole element
      return {t.float_data_size() % 2 ? SIZE_MAX : size_t(t.float_data_size() / 2),
              "float_data (re, im pairs)"};
    case TensorProto::COMPLEX128:
      return {t.double_data_size() % 2 ? SIZE_MAX : size_t(t.double_data_size() / 2),
              "double_data (re, im pairs)"};
    case TensorProto::INT64:
      return {size_t(t.int64_data_size()), "int64_data"};
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      return {size_t(t.uint64_data_size()), "uint64_data"};
    default:
      return {size_t(t.int32_data_size()), "int32_data"};
  }
}

}  // namespace

Tensor tensor_from_proto(const TensorProto& t, const std::string& base_dir, std::string_view what) {
  std::optional<DType> dtype = dtype_from_onnx(t.data_type());
  if (!dtype)
    fail<NotSupported>("onnx", what, ": tensors of type ", onnx_type_name(t.data_type()),
                       " are not supported (rlx holds numeric, complex, bool and string tensors)");
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  int64_t n = 0;
  try {
    n = checked_numel(dims, what);
  } catch (const ValueError&) {
    fail<ValueError>("onnx", what, ": expected dims >= 0 whose product fits in int64, got ",
                     ints_str(dims));
  }
  if (*dtype == DType::string) {  // always in string_data (the spec allows no raw form)
    if (t.string_data_size() != n)
      fail<ValueError>("onnx", what, ": expected ", n, " elements for dims ", ints_str(dims),
                       " in string_data, got ", t.string_data_size());
    return Tensor::from_strings({t.string_data().begin(), t.string_data().end()}, dims);
  }
  // The data is checked against dims before the tensor is allocated: a small file that
  // claims 10^12 elements is a ValueError, not a 4 TB allocation.
  size_t es = onnx_elem_size(t.data_type());
  if (uint64_t(n) > uint64_t(INT64_MAX) / es)
    fail<ValueError>("onnx", what, ": expected dims whose size fits in memory, got ",
                     ints_str(dims));
  size_t want = size_t(n) * es;
  auto check_count = [&](size_t got, const char* field) {
    if (got != size_t(n))
      fail<ValueError>("onnx", what, ": expected ", n, " elements for dims ", ints_str(dims),
                       " in ", field, ", got ", got);
  };
  if (t.data_location() == TensorProto::EXTERNAL) {
    std::string raw = external_bytes(t, base_dir, what, want);
    Tensor out = Tensor::empty(*dtype, dims);
    copy_raw(raw, t.data_type(), out);
    return out;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != want)
      fail<ValueError>("onnx", what, ": expected ", want, " bytes of raw_data for ",
                       onnx_type_name(t.data_type()), ints_str(dims), ", got ",
                       t.raw_data().size());
    Tensor out = Tensor::empty(*dtype, dims);
    copy_raw(t.raw_data(), t.data_type(), out);
    return out;
  }
  auto [count, field] = typed_count(t);
  check_count(count, field);
  Tensor out = Tensor::empty(*dtype, dims);
  switch (t.data_type()) {
    case TensorProto::COMPLEX64:  // the pairs are the storage: c64 is two f32
      if (n) std::memcpy(out.data(), t.float_data().data(), size_t(n) * 8);
      break;
    case TensorProto::COMPLEX128:
      if (n) std::memcpy(out.data(), t.double_data().data(), size_t(n) * 16);
      break;
    case TensorProto::FLOAT:
      copy_field<float>(t.float_data(), *dtype, out);
      break;
    case TensorProto::DOUBLE:
      copy_field<double>(t.double_data(), *dtype, out);
      break;
    case TensorProto::INT64:
      copy_field<int64_t>(t.int64_data(), *dtype, out);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      copy_field<uint64_t>(t.uint64_data(), *dtype, out);
      break;
    default:
      copy_field<int32_t>(t.int32_data(), *dtype, out);
      break;
  }
  return out;
}

}  // namespace rlx::onnx_import
