#include "rlx/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace rlx {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> le64(uint64_t v) {
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(v >> (8 * i));
  return b;
}

// A file by hand: the size prefix, the header text as given, then `data`.
std::vector<uint8_t> file_bytes(const std::string& header, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> b(8 + header.size() + data.size());
  std::vector<uint8_t> size = le64(header.size());
  std::copy(size.begin(), size.end(), b.begin());
  std::copy(header.begin(), header.end(), b.begin() + 8);
  std::copy(data.begin(), data.end(), b.begin() + 8 + long(header.size()));
  return b;
}

std::vector<uint8_t> floats(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data(), cb.data(), ca.nbytes()) == 0;
}

// Every dtype, a 0-d tensor and empty tensors.
TensorMap sample_tensors() {
  TensorMap m;
  for (DType dt : kAllDTypes) {
    std::vector<double> v = {0, 1, -2, 3.5, 100, -7};
    if (dt == DType::u8) v = {0, 1, 2, 3, 200, 255};
    if (dt == DType::boolean) v = {0, 1, 1, 0, 1, 0};
    m.emplace(str_cat("t_", dtype_name(dt)), Tensor::from_doubles(dt, {2, 3}, v));
  }
  m.emplace("scalar", Tensor::from_doubles(DType::f64, {}, {3.25}));
  m.emplace("empty", Tensor::zeros(DType::f32, {0, 4}));
  m.emplace("empty_bf16", Tensor::zeros(DType::bf16, {3, 0}));
  return m;
}

void expect_same(const TensorMap& a, const TensorMap& b) {
  ASSERT_EQ(a.size(), b.size());
  for (auto& [name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name;
    EXPECT_TRUE(same_bytes(t, it->second)) << name;
  }
}

std::string header_of(const std::vector<uint8_t>& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
  return std::string(bytes.begin() + 8, bytes.begin() + 8 + long(n));
}

void expect_io_error(const std::vector<uint8_t>& bytes, const std::string& part) {
  try {
    read_safetensors(bytes);
    ADD_FAILURE() << "expected an IoError containing: " << part;
  } catch (const IoError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[safetensors] <memory>: expected", 0), 0u) << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / str_cat("rlx_st_", ::getpid(), "_", std::rand());
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(Safetensors, RoundTripEveryDtypeInMemory) {
  TensorMap t = sample_tensors();
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "12"}};
  SafetensorsFile f = read_safetensors(write_safetensors_bytes(t, meta));
  expect_same(t, f.tensors);
  EXPECT_EQ(f.metadata, meta);
}

TEST(Safetensors, RoundTripThroughAFile) {
  TempDir dir;
  std::string path = (dir.path / "x.safetensors").string();
  TensorMap t = sample_tensors();
  save_safetensors(path, t, {{"note", "hello \"world\"\n"}});
  SafetensorsFile f = load_safetensors(path);
  expect_same(t, f.tensors);
  EXPECT_EQ(f.metadata.at("note"), "hello \"world\"\n");
  // The file and the in-memory form are the same bytes.
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(disk, write_safetensors_bytes(t, {{"note", "hello \"world\"\n"}}));
}

TEST(Safetensors, EmptyMapAndNoMetadata) {
  std::vector<uint8_t> b = write_safetensors_bytes({});
  EXPECT_EQ(header_of(b), "{}      ");
  SafetensorsFile f = read_safetensors(b);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST(Safetensors, LayoutMatchesPython) {
  // What Python's safetensors writes for {"b": int64 [2], "a": float32 [3]} with metadata
  // {"format": "pt"}: metadata first, then I64 before F32, data_offsets tiling the data.
  TensorMap t = {{"a", Tensor::from_vector<float>({1, 2, 3}, {3})},
                 {"b", Tensor::from_vector<int64_t>({4, 5}, {2})}};
  std::vector<uint8_t> b = write_safetensors_bytes(t, {{"format", "pt"}});
  std::string want =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
      R"("a":{"dtype":"F32","shape":[3],"data_offsets":[16,28]}})";
  want.append((8 - want.size() % 8) % 8, ' ');
  EXPECT_EQ(header_of(b), want);
  EXPECT_EQ(b.size(), 8 + want.size() + 28);
  EXPECT_EQ((8 + header_of(b).size()) % 8, 0u);
}

TEST(Safetensors, WiderDtypesFirstSoEveryTensorIsAligned) {
  TensorMap t = {{"a_u8", Tensor::zeros(DType::u8, {3})},
                 {"b_f64", Tensor::zeros(DType::f64, {2})},
                 {"c_f16", Tensor::zeros(DType::f16, {1})},
                 {"d_i32", Tensor::zeros(DType::i32, {1})}};
  std::string h = header_of(write_safetensors_bytes(t));
  EXPECT_LT(h.find("b_f64"), h.find("d_i32"));
  EXPECT_LT(h.find("d_i32"), h.find("c_f16"));
  EXPECT_LT(h.find("c_f16"), h.find("a_u8"));
  EXPECT_NE(h.find(R"("b_f64":{"dtype":"F64","shape":[2],"data_offsets":[0,16]})"),
            std::string::npos);
  EXPECT_NE(h.find(R"("a_u8":{"dtype":"U8","shape":[3],"data_offsets":[22,25]})"),
            std::string::npos);
}

TEST(Safetensors, HandMadeFileLoads) {
  // Keys in any order, padding spaces, an F32 and a BF16 (1.0 = 0x3F80, -2.0 = 0xC000).
  std::string h = R"({"w":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
                  R"("h":{"shape":[2,1],"dtype":"BF16","data_offsets":[8,12]},)"
                  R"("__metadata__":{"format":"np"}}    )";
  std::vector<uint8_t> data = floats({1.5f, -4.0f});
  for (uint8_t byte : {0x80, 0x3F, 0x00, 0xC0}) data.push_back(byte);
  SafetensorsFile f = read_safetensors(file_bytes(h, data));
  EXPECT_EQ(f.tensors.at("w").to_vector<float>(), (std::vector<float>{1.5f, -4.0f}));
  EXPECT_EQ(f.tensors.at("h").dtype(), DType::bf16);
  EXPECT_EQ(f.tensors.at("h").shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(f.tensors.at("h").to_doubles(), (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(f.metadata.at("format"), "np");
}

TEST(Safetensors, ScalarAndEmptyTensorsByHand) {
  std::string h = R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                  R"("e":{"dtype":"I32","shape":[0,3],"data_offsets":[8,8]}})";
  std::vector<uint8_t> data(8);
  double v = -0.5;
  std::memcpy(data.data(), &v, 8);
  SafetensorsFile f = read_safetensors(file_bytes(h, data));
  EXPECT_EQ(f.tensors.at("s").rank(), 0);
  EXPECT_EQ(f.tensors.at("s").to_vector<double>(), std::vector<double>{-0.5});
  EXPECT_EQ(f.tensors.at("e").shape(), (std::vector<int64_t>{0, 3}));
}

TEST(Safetensors, BoolBytesReadAsZeroOrOne) {
  std::string h = R"({"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
  SafetensorsFile f = read_safetensors(file_bytes(h, {0, 7, 1}));
  const auto* p = f.tensors.at("b").data_as<uint8_t>();
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[1], 1);
  EXPECT_EQ(p[2], 1);
}

TEST(Safetensors, ViewsAreWrittenInElementOrder) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).permute({1, 0});
  SafetensorsFile f = read_safetensors(write_safetensors_bytes({{"t", t}}));
  EXPECT_EQ(f.tensors.at("t").shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(f.tensors.at("t").to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(SafetensorsErrors, Truncated) {
  expect_io_error({}, "8-byte header size");
  expect_io_error({1, 2, 3}, "8-byte header size");
  expect_io_error(le64(100), "header of 100 bytes");
  std::vector<uint8_t> b = write_safetensors_bytes({{"x", Tensor::zeros(DType::f32, {4})}});
  b.pop_back();  // the data is one byte short: the last tensor runs past the end
  expect_io_error(b, "within the 15 bytes of data");
  std::vector<uint8_t> huge = le64(~uint64_t(0));
  expect_io_error(huge, "truncated");
}

TEST(SafetensorsErrors, BadJson) {
  expect_io_error(file_bytes("{\"a\": "), "JSON header");
  expect_io_error(file_bytes("not json"), "JSON header");
  expect_io_error(file_bytes(""), "JSON header");
  expect_io_error(file_bytes("[1, 2]"), "JSON object header, got a array");
  expect_io_error(file_bytes("\"x\""), "JSON object header");
  expect_io_error(file_bytes(R"({"a": 3})"), "tensor 'a' to be an object");
  expect_io_error(file_bytes(R"({"__metadata__": [1]})"), "\"__metadata__\" to be an object");
  expect_io_error(file_bytes(R"({"__metadata__": {"k": 1}})"), "metadata value \"k\"");
}

TEST(SafetensorsErrors, BadEntries) {
  auto one = [](const std::string& entry, size_t data = 8) {
    return file_bytes("{\"a\":" + entry + "}", std::vector<uint8_t>(data));
  };
  expect_io_error(one(R"({"dtype":"U16","shape":[4],"data_offsets":[0,8]})"),
                  "one of F32 F64 F16 BF16 I8 I16 I32 I64 U8 BOOL, got \"U16\"");
  expect_io_error(one(R"({"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]})"), "F8_E4M3");
  expect_io_error(one(R"({"shape":[2],"data_offsets":[0,8]})"), "string \"dtype\"");
  expect_io_error(one(R"({"dtype":"F32","data_offsets":[0,8]})"), "\"shape\" array");
  expect_io_error(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
                  "non-negative integers");
  expect_io_error(one(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"),
                  "non-negative integers");
  expect_io_error(one(R"({"dtype":"F32","shape":[2]})"), "\"data_offsets\": [begin, end]");
  expect_io_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), "[begin, end]");
  expect_io_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,7]})"),
                  "non-negative integers");
  // Sizes that do not match dtype * shape.
  expect_io_error(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"),
                  "expected 12 bytes for 'a' (F32 [3]), got data_offsets [0, 8]");
  expect_io_error(one(R"({"dtype":"F64","shape":[1],"data_offsets":[0,4]})", 4),
                  "expected 8 bytes for 'a'");
  // A shape whose byte count overflows 64 bits.
  expect_io_error(one(R"({"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                  "bytes for 'a'");
  // Out of range, or end before begin.
  expect_io_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})"),
                  "within the 8 bytes of data");
  expect_io_error(one(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"), "begin <= end");
}

TEST(SafetensorsErrors, OffsetsMustTileTheData) {
  std::string overlap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  expect_io_error(file_bytes(overlap, std::vector<uint8_t>(12)),
                  "tensor 'b' to start at byte 8 (where 'a' ends), got 4 (overlapping offsets)");
  std::string same = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_io_error(file_bytes(same, std::vector<uint8_t>(8)), "overlapping offsets");
  std::string hole = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  expect_io_error(file_bytes(hole, std::vector<uint8_t>(12)), "a hole in the data");
  std::string one = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  expect_io_error(file_bytes(one, std::vector<uint8_t>(6)), "unindexed bytes at the end");
}

TEST(SafetensorsErrors, Files) {
  TempDir dir;
  EXPECT_THROW(load_safetensors((dir.path / "missing.safetensors").string()), IoError);
  EXPECT_THROW(load_safetensors(dir.path.string()), IoError);
  EXPECT_THROW(save_safetensors((dir.path / "no/such/dir/x.safetensors").string(), {}), IoError);
  std::string path = (dir.path / "cut.safetensors").string();
  std::vector<uint8_t> b = write_safetensors_bytes({{"x", Tensor::zeros(DType::f64, {8})}});
  b.resize(b.size() - 9);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  try {
    load_safetensors(path);
    ADD_FAILURE() << "expected an IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("[safetensors] " + path + ": expected"), std::string::npos)
        << e.what();
  }
}

TEST(SafetensorsErrors, WritingChecksItsInput) {
  EXPECT_THROW(write_safetensors_bytes({{"x", Tensor()}}), ValueError);
  EXPECT_THROW(write_safetensors_bytes({{"__metadata__", Tensor::zeros(DType::f32, {1})}}),
               ValueError);
}

}  // namespace
}  // namespace rlx
