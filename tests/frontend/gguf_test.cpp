// The GGUF reader and writer: round trips of every metadata and tensor type, the
// no-copy mapping, unsupported types, every malformation as a typed error (bytes built
// here by hand, independently of the writer), and quantize_file.
#include "rlx/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::gguf {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("rlx_gguf_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// Expects `f` to throw E with every string of `parts` in its message.
template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// ---- a byte-level GGUF builder, independent of Writer ----------------------------------

struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put(uint64_t(s.size()));
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad(size_t a) {
    while (b.size() % a) b.push_back(0);
    return *this;
  }
  size_t size() const { return b.size(); }
};

struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  uint64_t offset;
};

// A file with the given metadata entries (already encoded: key, type, value) and tensors;
// `data_bytes` zero bytes of data after padding to `align`.
std::vector<uint8_t> build(uint32_t version, const std::vector<std::vector<uint8_t>>& kvs,
                           const std::vector<RawTensor>& tensors, size_t data_bytes,
                           size_t align = 32) {
  Bytes out;
  out.put(uint32_t(0x46554747)).put(version).put(uint64_t(tensors.size()));
  out.put(uint64_t(kvs.size()));
  for (auto& kv : kvs) out.b.insert(out.b.end(), kv.begin(), kv.end());
  for (auto& t : tensors) {
    out.str(t.name).put(uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) out.put(d);
    out.put(t.type).put(t.offset);
  }
  out.pad(align);
  out.b.resize(out.b.size() + data_bytes, 0);
  return out.b;
}

std::vector<uint8_t> kv_u32(const std::string& key, uint32_t v) {
  Bytes b;
  b.str(key).put(uint32_t(4)).put(v);
  return b.b;
}
std::vector<uint8_t> kv_str(const std::string& key, const std::string& v) {
  Bytes b;
  b.str(key).put(uint32_t(8)).str(v);
  return b.b;
}

// A valid file: one f32 [2, 32] tensor and a q4_0 [1, 64] one, and two keys.
std::vector<uint8_t> valid_file() {
  return build(3, {kv_str("general.architecture", "llama"), kv_u32("n", 7)},
               {{"a", {32, 2}, 0, 0}, {"b", {64, 1}, 2, 256}}, 256 + 36);
}

File parse(std::vector<uint8_t> bytes) { return File::from_bytes(std::move(bytes), "t.gguf"); }

// ---- round trips -------------------------------------------------------------------------

TEST(Gguf, HandBuiltFileParses) {
  File f = parse(valid_file());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("n"), 7);
  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo& b = f.tensors()[1];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.ne, (std::vector<int64_t>{64, 1}));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(b.dtype, DType::q4_0);
  EXPECT_EQ(b.nbytes, 36u);
  Tensor t = f.tensor("a");
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 32}));
  // Version 2 has the same layout.
  auto v2 = valid_file();
  v2[4] = 2;
  EXPECT_EQ(parse(v2).version(), 2u);
}

TEST(Gguf, EveryMetadataTypeRoundTrips) {
  Writer w;
  w.set("u8", uint8_t(250));
  w.set("i8", int8_t(-100));
  w.set("u16", uint16_t(65000));
  w.set("i16", int16_t(-32000));
  w.set("u32", uint32_t(4000000000u));
  w.set("i32", int32_t(-2000000000));
  w.set("f32", 1.5f);
  w.set("bool", true);
  w.set("string", "héllo \0 wörld");
  w.set("u64", uint64_t(1) << 62);
  w.set("i64", int64_t(-(int64_t(1) << 60)));
  w.set("f64", 2.0 / 3.0);
  const std::vector<std::pair<ValueType, std::vector<int64_t>>> int_arrays = {
      {ValueType::u8, {0, 255}},         {ValueType::i8, {-128, 127}},
      {ValueType::u16, {1, 65535}},      {ValueType::i16, {-32768, 5}},
      {ValueType::u32, {0, 4294967295}}, {ValueType::i32, {INT32_MIN, INT32_MAX}},
      {ValueType::u64, {INT64_MAX, 0}},  {ValueType::i64, {INT64_MIN, -1}},
      {ValueType::boolean, {1, 0, 1}}};
  for (auto& [t, v] : int_arrays)
    w.set(std::string("arr.") + std::string(value_type_name(t)), Value::int_array(t, v));
  w.set("arr.f32", Value::float_array(ValueType::f32, {0.25, -1e30}));
  w.set("arr.f64", Value::float_array(ValueType::f64, {1e300, -0.1}));
  w.set("arr.string", Value::string_array({"a", "", "tok\xe2\x96\x81"}));
  w.set("arr.empty", Value::int_array(ValueType::i32, {}));
  w.set("arr.nested", Value::array(ValueType::array, {Value::int_array(ValueType::i32, {1, 2, 3}),
                                                      Value::int_array(ValueType::i32, {}),
                                                      Value::int_array(ValueType::i32, {-4})}));
  w.set("arr.nested_strings", Value::array(ValueType::array, {Value::string_array({"x", "y"}),
                                                              Value::array(ValueType::array, {})}));
  w.set("u8", uint8_t(251));  // replaces in place: order unchanged

  File f = File::from_bytes(w.bytes());
  ASSERT_EQ(f.metadata().size(), 12u + int_arrays.size() + 6u);
  EXPECT_EQ(f.metadata()[0].first, "u8");
  EXPECT_EQ(f.metadata()[8].first, "string");
  EXPECT_EQ(f.metadata().back().first, "arr.nested_strings");

  EXPECT_EQ(f.get("u8").type(), ValueType::u8);
  EXPECT_EQ(f.get_int("u8"), 251);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 65000);
  EXPECT_EQ(f.get_int("i16"), -32000);
  EXPECT_EQ(f.get_int("u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.get_bool("bool"), true);
  EXPECT_EQ(f.get_string("string"), "héllo ");  // a C string literal stops at \0
  EXPECT_EQ(f.get_int("u64"), int64_t(1) << 62);
  EXPECT_EQ(f.get_int("i64"), -(int64_t(1) << 60));
  EXPECT_EQ(f.get_float("f64"), 2.0 / 3.0);
  EXPECT_EQ(f.get_float("u32"), 4e9);  // integers read as floats too
  for (auto& [t, v] : int_arrays) {
    const std::string key = std::string("arr.") + std::string(value_type_name(t));
    EXPECT_EQ(f.get(key).elem_type(), t) << key;
    EXPECT_EQ(f.get_ints(key), v) << key;
  }
  EXPECT_EQ(f.get_floats("arr.f32"), (std::vector<double>{0.25, double(-1e30f)}));
  EXPECT_EQ(f.get_floats("arr.f64"), (std::vector<double>{1e300, -0.1}));
  EXPECT_EQ(f.get_strings("arr.string"), (std::vector<std::string>{"a", "", "tok\xe2\x96\x81"}));
  EXPECT_TRUE(f.get_ints("arr.empty").empty());
  auto nested = f.get("arr.nested").items();
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested[0].as_ints(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(nested[2].as_ints(), (std::vector<int64_t>{-4}));
  auto ns = f.get("arr.nested_strings").items();
  EXPECT_EQ(ns[0].as_strings(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(ns[1].size(), 0u);
  // Every value equal to what was set; the bytes are stable through a second round trip.
  Writer w2;
  for (auto& [k, v] : f.metadata()) w2.set(k, v);
  EXPECT_EQ(w2.bytes(), w.bytes());

  // Defaults and typed errors naming the key.
  EXPECT_EQ(f.get_int("missing", 42), 42);
  EXPECT_EQ(f.get_float("missing", 0.5), 0.5);
  EXPECT_EQ(f.get_string("missing", "x"), "x");
  EXPECT_EQ(f.get_bool("missing", false), false);
  EXPECT_FALSE(f.has("missing"));
  expect_error<ValueError>([&] { f.get_int("llama.block_count"); }, {"llama.block_count"});
  expect_error<TypeError>([&] { f.get_int("string"); }, {"'string'", "integer", "string"});
  expect_error<TypeError>([&] { f.get_string("u8"); }, {"'u8'", "string", "u8"});
  expect_error<TypeError>([&] { f.get_strings("arr.i32"); }, {"arr.i32", "array of i32"});
  expect_error<TypeError>([&] { f.get_bool("i8"); }, {"'i8'"});
  const uint64_t big = ~uint64_t(0);
  expect_error<ValueError>([&] { Value::array(ValueType::u64, {Value(big)}).as_ints(); },
                           {"int64"});
  expect_error<ValueError>([&] { Value(big).as_int(); }, {"int64"});
  EXPECT_EQ(Value(big).as_uint(), big);
  expect_error<ValueError>([&] { Value::int_array(ValueType::u8, {256}); }, {"u8", "256"});
}

// Random encoded bytes for a tensor of dtype t and n values (finite f16 scales).
std::vector<uint8_t> random_data(DType t, int64_t n, std::mt19937& g) {
  std::vector<uint8_t> b(dtype_nbytes(t, n));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& v : b) v = uint8_t(byte(g));
  if (is_quantized(t)) {  // re-encode real values so every scale is finite
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = nd(g);
    quant::quantize_row(t, x.data(), b.data(), n);
  }
  return b;
}

TEST(Gguf, EveryTensorTypeRoundTripsThroughAMappedFile) {
  TempDir dir;
  std::mt19937 g(1);
  const DType plain[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                         DType::i8,  DType::i16, DType::i32,  DType::i64};
  std::vector<std::tuple<std::string, DType, std::vector<int64_t>, std::vector<uint8_t>>> all;
  for (DType t : plain)
    all.emplace_back(std::string(dtype_name(t)), t, std::vector<int64_t>{3, 5},
                     random_data(t, 15, g));
  for (DType t : kQuantDTypes) {
    const int64_t k = dtype_block(t) * 2;
    all.emplace_back(std::string(dtype_name(t)), t, std::vector<int64_t>{2, 3, k},
                     random_data(t, 6 * k, g));
  }
  all.emplace_back("scalar", DType::f32, std::vector<int64_t>{}, random_data(DType::f32, 1, g));
  all.emplace_back("vec", DType::f32, std::vector<int64_t>{7}, random_data(DType::f32, 7, g));
  all.emplace_back("empty", DType::f32, std::vector<int64_t>{0, 4}, std::vector<uint8_t>{});
  Writer w;
  w.set("general.architecture", "test");
  for (auto& [name, t, shape, bytes] : all)
    w.add_tensor(name, Tensor::from_data(t, shape, bytes.data()));
  const std::string path = dir.file("all.gguf");
  w.write(path);

  File f = File::open(path);
  ASSERT_EQ(f.tensors().size(), all.size());
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  for (size_t i = 0; i < all.size(); ++i) {
    auto& [name, t, shape, bytes] = all[i];
    SCOPED_TRACE(name);
    const TensorInfo& info = f.tensors()[i];
    EXPECT_EQ(info.name, name);
    EXPECT_EQ(info.shape, shape);
    EXPECT_EQ(info.ne, std::vector<int64_t>(shape.rbegin(), shape.rend()));
    EXPECT_EQ(info.offset % 32, 0u);
    EXPECT_EQ(ggml_type_name(info.ggml_type), ggml_type_name(ggml_of_dtype(t)));
    Tensor x = f.tensor(name);
    EXPECT_EQ(x.dtype(), t);
    EXPECT_EQ(x.shape(), shape);
    ASSERT_EQ(x.nbytes(), bytes.size());
    EXPECT_EQ(0, std::memcmp(x.data(), bytes.data(), bytes.size()));
    // No copy: the tensor's data is the mapped bytes, at data_offset + offset.
    EXPECT_EQ(x.data(), f.tensor_bytes(info).data());
  }
  // The quantized ids are ggml's.
  EXPECT_EQ(f.find("q4_k")->ggml_type, ggml_type::Q4_K);
  EXPECT_EQ(f.find("q6_k")->ggml_type, ggml_type::Q6_K);
  EXPECT_EQ(f.find("bf16")->ggml_type, ggml_type::BF16);
  EXPECT_EQ(f.find("missing"), nullptr);
  expect_error<ValueError>([&] { f.tensor("missing"); }, {"missing"});
}

// The address range of the mapping of `path` in /proc/self/maps that holds p, if any.
bool mapped_from(const void* p, const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  const std::string canon = fs::canonical(path).string();
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash;
    std::istringstream in(line);
    in >> std::hex >> lo >> dash >> hi;
    if (addr >= lo && addr < hi) return line.find(canon) != std::string::npos;
  }
  return false;
}

TEST(Gguf, TensorsWrapTheMappingAndOutliveTheFile) {
  TempDir dir;
  std::vector<float> v(4096);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  Writer w;
  w.add_tensor("w", Tensor::from_vector(v, {64, 64}));
  const std::string path = dir.file("m.gguf");
  w.write(path);
  Tensor t;
  {
    File f = File::open(path);
    t = f.tensor("w");
    EXPECT_TRUE(mapped_from(t.data(), path)) << "tensor data is not in a mapping of the file";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 32, 0u);
  }
  // The File is gone; the mapping lives as long as the tensor.
  EXPECT_TRUE(mapped_from(t.data(), path));
  EXPECT_EQ(t.to_vector<float>(), v);
  // Writes go to private pages, never to the file.
  t.data_as<float>()[0] = -1.f;
  EXPECT_EQ(File::open(path).tensor("w").data_as<float>()[0], 0.f);
  const void* p = t.data();
  t = Tensor();
  EXPECT_FALSE(mapped_from(p, path)) << "mapping not released with the last tensor";
}

TEST(Gguf, AlignmentFromMetadata) {
  Writer w;
  w.set("general.alignment", uint32_t(64));
  w.add_tensor("a", Tensor::from_vector(std::vector<float>(3, 1.f), {3}));
  w.add_tensor("b", Tensor::from_vector(std::vector<float>(5, 2.f), {5}));
  File f = File::from_bytes(w.bytes());
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.find("b")->offset, 64u);
  EXPECT_EQ(f.tensor("b").to_vector<float>(), std::vector<float>(5, 2.f));
  EXPECT_THROW(w.set("general.alignment", uint32_t(48)), ValueError);
  EXPECT_THROW(w.set("general.alignment", "x"), TypeError);
}

TEST(Gguf, WriterRejectsBadTensors) {
  Writer w;
  auto t = Tensor::from_vector(std::vector<float>(4, 0.f), {4});
  w.add_tensor("a", t);
  expect_error<ValueError>([&] { w.add_tensor("a", t); }, {"'a'"});
  expect_error<NotSupported>(
      [&] { w.add_tensor("u", Tensor::from_vector(std::vector<uint8_t>(4, 0), {4})); }, {"u8"});
  expect_error<ValueError>(
      [&] {
        w.add_raw("r", ggml_type::Q4_0, {2, 32}, std::vector<uint8_t>(35));
      },
      {"36 bytes", "Q4_0"});
  expect_error<IoError>([&] { w.write("/nonexistent-dir/x.gguf"); }, {"/nonexistent-dir/x.gguf"});
}

TEST(Gguf, UnsupportedTypesAreListedAndRefusedByName) {
  Writer w;
  w.add_tensor("ok", Tensor::from_vector(std::vector<float>(4, 0.f), {4}));
  w.add_raw("blk.0.attn_q.weight", ggml_type::IQ2_XXS, {2, 256}, std::vector<uint8_t>(2 * 66));
  w.add_raw("t2", ggml_type::TQ2_0, {256}, std::vector<uint8_t>(66));
  w.add_raw("q81", ggml_type::Q8_1, {32}, std::vector<uint8_t>(36));
  w.add_raw("future", 99, {4}, std::vector<uint8_t>(8));
  File f = File::from_bytes(w.bytes(), "odd.gguf");
  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_FALSE(f.find("blk.0.attn_q.weight")->dtype.has_value());
  EXPECT_EQ(f.find("blk.0.attn_q.weight")->nbytes, 132u);
  EXPECT_EQ(f.tensor("ok").numel(), 4);
  expect_error<NotSupported>([&] { f.tensor("blk.0.attn_q.weight"); },
                             {"blk.0.attn_q.weight", "IQ2_XXS"});
  expect_error<NotSupported>([&] { f.tensor("t2"); }, {"'t2'", "TQ2_0"});
  expect_error<NotSupported>([&] { f.tensor("q81"); }, {"'q81'", "Q8_1"});
  expect_error<NotSupported>([&] { f.tensor("future"); }, {"'future'", "type 99"});
}

// ---- malformed files ------------------------------------------------------------------------

TEST(Gguf, TruncationAnywhereIsAnIoError) {
  const auto good = valid_file();
  const size_t header_end = good.size() - (256 + 36);  // the data section's start
  for (size_t n = 0; n < good.size(); ++n) {
    if (n >= header_end && n < header_end + 200 && n % 37) continue;  // sample the data
    std::vector<uint8_t> cut(good.begin(), good.begin() + std::ptrdiff_t(n));
    EXPECT_THROW(parse(cut), IoError) << "cut at " << n;
  }
  EXPECT_NO_THROW(parse(good));
}

TEST(Gguf, MalformationsAreTypedErrors) {
  auto bad_magic = valid_file();
  bad_magic[0] = 'X';
  expect_error<IoError>([&] { parse(bad_magic); }, {"[gguf] t.gguf", "\"GGUF\"", "XGUF"});

  for (uint32_t v : {1u, 4u}) {
    auto f = valid_file();
    f[4] = uint8_t(v);
    expect_error<IoError>([&] { parse(f); }, {"version 2 or 3", std::to_string(v)});
  }
  auto be = valid_file();
  be[4] = 0, be[7] = 3;
  expect_error<IoError>([&] { parse(be); }, {"big-endian"});

  // A key longer than the file.
  {
    Bytes kv;
    kv.put(uint64_t(1) << 60);
    kv.b.resize(kv.b.size() + 20);  // enough bytes for one entry, not for the key
    expect_error<IoError>([&] { parse(build(3, {kv.b}, {}, 0)); },
                          {"length of 1152921504606846976"});
  }
  // A string value longer than the rest of the file.
  {
    Bytes kv;
    kv.str("k").put(uint32_t(8)).put(uint64_t(1000));
    expect_error<IoError>([&] { parse(build(3, {kv.b}, {}, 0)); }, {"length of 1000"});
  }
  // An array count that cannot fit, of scalars and of strings.
  for (uint32_t elem : {0u, 8u, 9u}) {
    Bytes kv;
    kv.str("arr").put(uint32_t(9)).put(elem).put(uint64_t(1) << 40);
    expect_error<IoError>([&] { parse(build(3, {kv.b}, {}, 0)); }, {"'arr'", "1099511627776"});
  }
  // Bad value types.
  {
    Bytes kv;
    kv.str("k").put(uint32_t(13)).put(uint32_t(0));
    expect_error<IoError>([&] { parse(build(3, {kv.b}, {}, 0)); }, {"value type", "13"});
    Bytes arr;
    arr.str("k").put(uint32_t(9)).put(uint32_t(77)).put(uint64_t(0));
    expect_error<IoError>([&] { parse(build(3, {arr.b}, {}, 0)); }, {"77"});
  }
  // Counts that cannot fit in the file.
  {
    auto f = valid_file();
    uint64_t huge = uint64_t(1) << 50;
    std::memcpy(f.data() + 8, &huge, 8);
    expect_error<IoError>([&] { parse(f); }, {"tensors", std::to_string(huge)});
    f = valid_file();
    std::memcpy(f.data() + 16, &huge, 8);
    expect_error<IoError>([&] { parse(f); }, {"metadata entries", std::to_string(huge)});
  }
  // Deeply nested arrays stop at a limit rather than recursing without end.
  {
    Bytes kv;
    kv.str("deep").put(uint32_t(9));
    for (int i = 0; i < 1000; ++i) kv.put(uint32_t(9)).put(uint64_t(1));
    kv.put(uint32_t(0)).put(uint64_t(0));
    expect_error<IoError>([&] { parse(build(3, {kv.b}, {}, 0)); }, {"nested"});
  }
  // Dims whose product overflows int64, and a dim above int64.
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"w", {uint64_t(1) << 32, uint64_t(1) << 32}, 0, 0}}, 64));
      },
      {"'w'", "int64"});
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"w", {uint64_t(-1)}, 0, 0}}, 64));
      },
      {"'w'", "int64"});
  // Too many dims.
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"w", {1, 1, 1, 1, 1}, 0, 0}}, 64));
      },
      {"'w'", "at most 4 dims"});
  // A tensor extending past the end of the file (by size, and by offset).
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"w", {32, 4}, 0, 0}}, 100));
      },
      {"'w'", "past the end"});
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"w", {4}, 0, uint64_t(1) << 62}}, 64));
      },
      {"'w'", "past the end"});
  // A huge tensor that would fit int64 values but not the file.
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"w", {uint64_t(1) << 40, 1 << 20}, 8, 0}}, 64));
      },
      {"'w'", "past the end"});
  // A row not a whole number of blocks.
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"q", {16, 2}, 2, 0}}, 64));
      },
      {"'q'", "Q4_0", "multiple of 32", "got 16"});
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"k", {128}, 12, 0}}, 256));
      },
      {"'k'", "multiple of 256"});
  // A misaligned offset.
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"a", {4}, 0, 0}, {"b", {4}, 0, 16}}, 64));
      },
      {"'b'", "multiple of 32", "got 16"});
  // Alignment not a power of two, or zero, or of the wrong type.
  for (uint32_t a : {0u, 24u})
    expect_error<IoError>([&] { parse(build(3, {kv_u32("general.alignment", a)}, {}, 0)); },
                          {"general.alignment", "power of two"});
  expect_error<IoError>([&] { parse(build(3, {kv_str("general.alignment", "32")}, {}, 0)); },
                        {"general.alignment"});
  // Duplicates.
  expect_error<IoError>(
      [&] {
        parse(build(3, {}, {{"w", {4}, 0, 0}, {"w", {4}, 0, 32}}, 64));
      },
      {"unique tensor names", "'w'"});
  expect_error<IoError>(
      [&] {
        parse(build(3, {kv_u32("k", 1), kv_u32("k", 2)}, {}, 0));
      },
      {"unique metadata keys", "'k'"});
  // Not a file at all.
  expect_error<IoError>([&] { File::open("/nonexistent/model.gguf"); },
                        {"/nonexistent/model.gguf"});
  expect_error<IoError>([&] { File::open("/tmp"); }, {"regular file"});
}

// Random mutations of a valid file: any outcome but a crash or a non-rlx exception.
TEST(Gguf, FuzzedHeadersNeverCrash) {
  Writer w;
  w.set("general.architecture", "llama");
  w.set("tokens", Value::string_array({"a", "bb", "ccc"}));
  w.set("nested", Value::array(ValueType::array, {Value::int_array(ValueType::i32, {1, 2})}));
  w.add_tensor("x", Tensor::from_vector(std::vector<float>(64, 1.f), {2, 32}));
  std::vector<uint8_t> q(36);
  w.add_raw("q", ggml_type::Q4_0, {64}, q);
  const auto good = w.bytes();
  std::mt19937 g(99);
  int errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto f = good;
    const int flips = 1 + int(g() % 4);
    for (int i = 0; i < flips; ++i) f[g() % 300 % f.size()] = uint8_t(g());
    try {
      File file = File::from_bytes(std::move(f));
      for (auto& ti : file.tensors()) (void)file.tensor_bytes(ti);
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 100);
}

// ---- quantize_file ------------------------------------------------------------------------

std::vector<float> gaussian(size_t n, std::mt19937& g) {
  std::normal_distribution<float> nd(0.f, 0.05f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(g);
  return x;
}

std::vector<float> decode(const File& f, const std::string& name) {
  const TensorInfo* ti = f.find(name);
  std::vector<float> out(size_t(ti->numel()));
  quant::dequantize_row(*ti->dtype, f.tensor_bytes(*ti).data(), out.data(), ti->numel());
  return out;
}

TEST(Gguf, QuantizeFileReencodesWeightMatrices) {
  TempDir dir;
  std::mt19937 g(2);
  auto embd = gaussian(64 * 256, g), wq = gaussian(256 * 256, g), norm = gaussian(256, g);
  auto odd = gaussian(8 * 96, g), odder = gaussian(8 * 48, g), outw = gaussian(64 * 256, g);
  Writer w;
  w.set("general.architecture", "llama");
  w.set("general.file_type", uint32_t(0));
  w.set("llama.block_count", uint32_t(1));
  w.add_tensor("token_embd.weight", Tensor::from_vector(embd, {64, 256}));
  w.add_tensor("blk.0.attn_norm.weight", Tensor::from_vector(norm, {256}));
  w.add_tensor("blk.0.attn_q.weight", Tensor::from_vector(wq, {256, 256}));
  w.add_tensor("blk.0.ffn_down.weight", Tensor::from_vector(odd, {8, 96}));  // 96 % 256
  w.add_tensor("blk.0.ffn_up.weight", Tensor::from_vector(odder, {8, 48}));  // 48 % 32
  w.add_tensor("blk.0.pos", Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4}, {2, 2}));
  // The f16 source of output.weight is decoded first.
  std::vector<uint16_t> outh(outw.size());
  for (size_t i = 0; i < outw.size(); ++i) outh[i] = f32_to_f16(outw[i]);
  w.add_tensor("output.weight", Tensor::from_data(DType::f16, {64, 256}, outh.data()));
  const std::string in = dir.file("in.gguf"), out = dir.file("out.gguf");
  w.write(in);

  auto report = quantize_file(in, out, DType::q4_k, {.output_type = DType::q6_k, .threads = 2});
  ASSERT_EQ(report.size(), 7u);
  File f = File::open(out);
  EXPECT_EQ(f.get_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(f.get_int("general.quantization_version"), 2);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 1);
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");
  auto type_of = [&](const std::string& n) { return f.find(n)->dtype.value(); };
  EXPECT_EQ(type_of("token_embd.weight"), DType::q4_k);
  EXPECT_EQ(type_of("blk.0.attn_norm.weight"), DType::f32);
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), DType::q4_k);
  EXPECT_EQ(type_of("blk.0.ffn_down.weight"), DType::q5_0);  // llama.cpp's q4_k fallback
  EXPECT_EQ(type_of("blk.0.ffn_up.weight"), DType::f16);
  EXPECT_EQ(type_of("blk.0.pos"), DType::i32);
  EXPECT_EQ(type_of("output.weight"), DType::q6_k);
  EXPECT_EQ(report[6].from, "F16");
  EXPECT_EQ(report[6].to, DType::q6_k);

  // The bytes are exactly the reference encoder's, row by row.
  auto expect_encoded = [&](const std::string& name, DType t, const std::vector<float>& x) {
    std::vector<uint8_t> want(dtype_nbytes(t, int64_t(x.size())));
    quant::quantize_row(t, x.data(), want.data(), int64_t(x.size()));
    auto got = f.tensor_bytes(*f.find(name));
    ASSERT_EQ(got.size(), want.size()) << name;
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size())) << name;
  };
  expect_encoded("token_embd.weight", DType::q4_k, embd);
  expect_encoded("blk.0.attn_q.weight", DType::q4_k, wq);
  expect_encoded("blk.0.ffn_down.weight", DType::q5_0, odd);
  expect_encoded("blk.0.ffn_up.weight", DType::f16, odder);
  std::vector<float> outf(outh.size());
  for (size_t i = 0; i < outh.size(); ++i) outf[i] = f16_to_f32(outh[i]);
  expect_encoded("output.weight", DType::q6_k, outf);
  EXPECT_EQ(decode(f, "blk.0.attn_norm.weight"), norm);
  EXPECT_EQ(f.tensor("blk.0.pos").to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));

  // A quantized source re-encodes through f32: q4_k -> q8_0 equals quantizing the decoded.
  const std::string out2 = dir.file("out2.gguf");
  quantize_file(out, out2, DType::q8_0);
  File f2 = File::open(out2);
  EXPECT_EQ(f2.get_int("general.file_type"), 7);
  EXPECT_EQ(f2.find("output.weight")->dtype, DType::q8_0);  // no output_type: the target
  auto dq = decode(f, "blk.0.attn_q.weight");
  std::vector<uint8_t> want(dtype_nbytes(DType::q8_0, int64_t(dq.size())));
  quant::quantize_row(DType::q8_0, dq.data(), want.data(), int64_t(dq.size()));
  auto got = f2.tensor_bytes(*f2.find("blk.0.attn_q.weight"));
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size()));

  EXPECT_THROW(quantize_file(in, out2, DType::i32), ValueError);

  // In place: the output replaces the input only once it is complete.
  quantize_file(out2, out2, DType::q4_0);
  File f3 = File::open(out2);
  EXPECT_EQ(f3.find("blk.0.attn_q.weight")->dtype, DType::q4_0);
  EXPECT_FALSE(fs::exists(out2 + ".tmp"));
  // Rewriting a file whose tensors are still mapped keeps them readable.
  Tensor mapped = f3.tensor("blk.0.attn_norm.weight");
  Writer again;
  again.add_tensor("n", mapped);
  again.write(out2);
  EXPECT_EQ(decode(File::open(out2), "n"), norm);
  EXPECT_EQ(mapped.to_vector<float>(), norm);
}

TEST(Gguf, QuantizeFileRefusesUndecodableTensors) {
  TempDir dir;
  Writer w;
  w.add_raw("blk.0.attn_q.weight", ggml_type::IQ2_XXS, {2, 256}, std::vector<uint8_t>(132));
  w.write(dir.file("in.gguf"));
  expect_error<NotSupported>(
      [&] { quantize_file(dir.file("in.gguf"), dir.file("out.gguf"), DType::q8_0); },
      {"blk.0.attn_q.weight", "IQ2_XXS"});
}

}  // namespace
}  // namespace rlx::gguf
