// Reading and writing GGUF files (llama.cpp's model format).
//
//   rlx::gguf::File f = rlx::gguf::File::open("model.gguf");      // memory-mapped
//   int64_t n_layer = f.get_int("llama.block_count");
//   float eps = f.get_float("llama.attention.layer_norm_rms_epsilon", 1e-5);
//   rlx::Tensor w = f.tensor("blk.0.attn_q.weight");  // q4_k [4096, 4096], no copy
//
//   rlx::gguf::Writer w;
//   w.set("general.architecture", "llama");
//   w.add_tensor("token_embd.weight", t);
//   w.write("out.gguf");
//
// Layout (versions 2 and 3, little-endian): magic "GGUF", u32 version, u64 tensor count,
// u64 metadata count; the metadata (string key, u32 value type, value); the tensor infos
// (string name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml type, u64 offset into
// the data section); padding to general.alignment (default 32); the data section.
// Strings are a u64 length and that many bytes; arrays a u32 element type, a u64 count and
// the elements (arrays of arrays too).
//
// Shapes: GGUF's ne[] lists the innermost dimension first; TensorInfo::shape and every
// Tensor here are row-major (shape = reversed ne), so a [n_out, n_in] weight has
// ne = {n_in, n_out} in the file and rows of n_in values, blocked along n_in.
//
// Errors: a malformed file is an IoError "[gguf] PATH: expected …, got …" raised by open()
// (bad magic or version, truncation, lengths or counts that cannot fit in the file, dims
// whose product overflows, a tensor outside the data, a row not a whole number of blocks,
// a misaligned offset, a bad alignment, duplicate names or keys). open() never allocates
// more than a small multiple of the file's size. A tensor of a ggml type rlx does not
// implement (IQ*, TQ*, Q8_1, …) is listed, and requesting it is NotSupported naming the
// tensor and the type. A missing metadata key is a ValueError, one of the wrong type a
// TypeError, both naming the key.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/tensor.h"

namespace rlx::gguf {

// Metadata value types, numbered as in the file.
enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
std::string_view value_type_name(ValueType t);  // "u8", …, "bool", "string", "array"

// One metadata value: a scalar, a string, or an array (of scalars, strings or arrays).
class Value {
 public:
  Value() : Value(uint8_t(0)) {}
  Value(bool v);
  Value(uint8_t v);
  Value(int8_t v);
  Value(uint16_t v);
  Value(int16_t v);
  Value(uint32_t v);
  Value(int32_t v);
  Value(uint64_t v);
  Value(int64_t v);
  Value(float v);
  Value(double v);
  Value(std::string v);
  Value(const char* v) : Value(std::string(v)) {}
  Value(std::string_view v) : Value(std::string(v)) {}

  // Arrays. int_array takes an integer or bool element type (values must fit: else
  // ValueError), float_array f32 or f64; array() takes items that all have type `elem`.
  static Value int_array(ValueType elem, const std::vector<int64_t>& values);
  static Value float_array(ValueType elem, const std::vector<double>& values);
  static Value string_array(std::vector<std::string> values);
  static Value array(ValueType elem, std::vector<Value> items);

  ValueType type() const { return type_; }
  ValueType elem_type() const { return elem_; }  // arrays only
  bool is_array() const { return type_ == ValueType::array; }
  size_t size() const;  // array length (1 for a scalar or string)

  // Conversions; the wrong kind is a TypeError. as_int takes any integer type (a u64
  // above INT64_MAX is a ValueError); as_float also takes integers; as_bool only bool.
  int64_t as_int() const;
  uint64_t as_uint() const;
  double as_float() const;
  bool as_bool() const;
  const std::string& as_string() const;
  // Array element views: as_ints (integer or bool elements), as_floats (float or integer
  // elements), as_strings (string elements), items (any elements, each as a Value).
  std::vector<int64_t> as_ints() const;
  std::vector<double> as_floats() const;
  const std::vector<std::string>& as_strings() const;
  std::vector<Value> items() const;
  // The packed little-endian elements of a numeric or bool array (as in the file).
  std::span<const uint8_t> raw() const { return raw_; }

  bool operator==(const Value& o) const;

 private:
  friend struct ValueAccess;
  ValueType type_ = ValueType::u8;
  ValueType elem_ = ValueType::u8;
  uint64_t bits_ = 0;              // a scalar's little-endian bits
  std::string str_;                // a string
  std::vector<uint8_t> raw_;       // numeric / bool array elements, packed
  std::vector<std::string> strs_;  // string array elements
  std::vector<Value> items_;       // array-of-array elements
};

// ggml tensor type ids (the file's u32), including those rlx reads but does not compute
// with. ggml_type_name(99) is "type 99".
namespace ggml_type {
inline constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
                          Q8_1 = 9, Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14,
                          Q8_K = 15, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19,
                          IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25,
                          I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30, TQ1_0 = 34,
                          TQ2_0 = 35, MXFP4 = 39;
}
std::string ggml_type_name(uint32_t type);  // "Q4_K", "IQ2_XXS", "BF16", …
// The rlx dtype of a ggml type (nullopt for the ones rlx does not implement) and back
// (NotSupported for u8 / bool / string, which GGUF has no type for).
std::optional<DType> dtype_of_ggml(uint32_t type);
uint32_t ggml_of_dtype(DType t);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;     // as in the file: innermost first
  std::vector<int64_t> shape;  // row-major (reversed ne)
  uint32_t ggml_type = 0;
  std::optional<DType> dtype;  // nullopt: a ggml type rlx does not implement
  uint64_t offset = 0;         // into the data section
  uint64_t nbytes = 0;         // of the data (0 for an unknown ggml type id)
  int64_t numel() const;
};

class File {
 public:
  // Maps `path` privately (copy-on-write pages: writing through a tensor never reaches
  // the file) and parses the header. IoError when unreadable or malformed.
  static File open(const std::string& path);
  // The same over bytes in memory (kept alive by the File); `name` is what errors say.
  static File from_bytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

  const std::string& path() const;
  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t data_offset() const;  // where the data section starts in the file
  size_t file_size() const;

  // Metadata, in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const;
  bool has(std::string_view key) const;
  const Value* find_value(std::string_view key) const;  // nullptr when absent
  const Value& get(std::string_view key) const;         // ValueError when absent
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, std::string_view fallback) const;
  const std::vector<std::string>& get_strings(std::string_view key) const;
  std::vector<int64_t> get_ints(std::string_view key) const;
  std::vector<double> get_floats(std::string_view key) const;

  // Tensors, in file order.
  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  // The tensor's bytes in the mapping, wrapped without a copy (the Tensor keeps the
  // mapping alive). ValueError for an unknown name, NotSupported for a ggml type rlx does
  // not implement. The data is aligned to alignment() (32 bytes by default).
  Tensor tensor(std::string_view name) const;
  std::span<const uint8_t> tensor_bytes(const TensorInfo& info) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Builds a GGUF v3 file: metadata in the order first set, tensors in the order added.
class Writer {
 public:
  // Sets (or replaces, keeping its position) a metadata value. "general.alignment" (an
  // integer power of two) also sets the data alignment (default 32).
  void set(std::string key, Value value);
  // Adds a tensor of any dtype GGUF has (f32 f64 f16 bf16 i8 i16 i32 i64 and the
  // quantized ones); a non-contiguous one is copied, a contiguous host one referenced
  // until write(). ValueError for a duplicate name or a device tensor.
  void add_tensor(std::string name, const Tensor& t);
  // A tensor given as ggml type id, row-major shape and its encoded bytes (any ggml
  // type, including ones rlx does not implement; the size is checked when known).
  void add_raw(std::string name, uint32_t ggml_type, std::vector<int64_t> shape,
               std::vector<uint8_t> bytes);

  // Writes PATH.tmp and renames it over `path` (so rewriting a file whose tensors are
  // still mapped is safe). IoError when it cannot be written.
  void write(const std::string& path) const;
  std::vector<uint8_t> bytes() const;

 private:
  struct Entry {
    std::string name;
    uint32_t ggml_type;
    std::vector<int64_t> shape;
    Tensor tensor;               // either this (contiguous, host)
    std::vector<uint8_t> bytes;  // or these
    std::span<const uint8_t> data() const;
  };
  std::vector<std::pair<std::string, Value>> meta_;
  std::vector<Entry> tensors_;
  uint64_t alignment_ = 32;
  void write_to(std::ostream& os) const;
};

// llama.cpp's file_type number for a file whose weights are `t` (F32 0, F16 1, Q4_0 2,
// Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q2_K 10, Q3_K 12 (Q3_K_M), Q4_K 15 (Q4_K_M), Q5_K 17
// (Q5_K_M), Q6_K 18, BF16 32).
uint32_t llama_file_type(DType t);

struct QuantizeOptions {
  // The type of output.weight (or token_embd.weight when there is no output.weight);
  // nullopt: the target, as llama-quantize --pure does.
  std::optional<DType> output_type;
  int threads = 0;  // 0: every core
};

struct QuantizedTensor {
  std::string name;
  std::string from;  // the source ggml type's name
  DType to;
};

// Re-encodes a GGUF file as llama.cpp's quantizer does (without an importance matrix):
// each weight matrix (a name ending in "weight" with 2 or more dims) is decoded to f32
// and encoded as `target` (f32, f16, bf16 or a quantized dtype); when its rows are not a
// whole number of target blocks it falls back as llama.cpp does (q4_k → q5_0, q5_k →
// q5_1, q6_k → q8_0; q2_k / q3_k → q4_0, where llama.cpp picks iq4_nl, which rlx lacks),
// then to f16 when rows are not a multiple of 32 either. Other tensors keep their type (quantized
// ones become f32). Metadata is copied with general.file_type and general.quantization_version
// updated. Returns what each tensor became.
std::vector<QuantizedTensor> quantize_file(const std::string& in_path, const std::string& out_path,
                                           DType target, const QuantizeOptions& options = {});

}  // namespace rlx::gguf
