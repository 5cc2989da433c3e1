// .npy I/O: round trips of every dtype and shape, files as NumPy writes them, and every
// kind of malformed input (an IoError naming the file, never a crash).
#include "rlx/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace rlx {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes raw(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data());
  return Bytes(p, p + c.nbytes());
}

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A file laid out as NumPy >= 1.24 writes it (numpy/lib/format.py): the magic, the
// version, the header length (u16 for 1.0, u32 for 2.0 / 3.0), the dict followed by
// spaces (room for the growth axis to gain digits) and '\n' so that the data starts at a
// multiple of 64, then the data.
Bytes numpy_file(const std::string& dict, const Bytes& data, int major = 1) {
  size_t pre = major == 1 ? 10 : 12;
  std::string header = dict;
  size_t used = pre + header.size() + 1;
  header += std::string((64 - used % 64) % 64, ' ') + "\n";
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  for (size_t i = 0; i < pre - 8; ++i) out.push_back(uint8_t(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A directory for this process, removed at exit.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("rlx_npy_test_" + std::to_string(getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::string temp_path(const std::string& name) {
  static TempDir dir;
  return (dir.path / name).string();
}

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// read_npy must fail with an IoError whose message has `name` and `needle`.
void expect_io_error(const Bytes& b, const std::string& needle) {
  try {
    read_npy(b, "case.npy");
    ADD_FAILURE() << "no error; expected one mentioning: " << needle;
  } catch (const IoError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("case.npy"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "' in: " << msg;
  }
}

const std::string kI4Dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
const Bytes kI4Data = {0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0};

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 3}, {2, 0, 4}, {1, 2, 3, 2}};
  for (DType dt : kAllDTypes) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(str_cat(dtype_name(dt), ints_str(shape)));
      std::vector<double> v(size_t(checked_numel(shape, "test")));
      for (size_t i = 0; i < v.size(); ++i) v[i] = double(i % 5) * (is_float(dt) ? 0.5 : 1);
      Tensor t = Tensor::from_doubles(dt, shape, v);
      Bytes file = write_npy_bytes(t);
      ASSERT_GE(file.size(), 10u);
      EXPECT_EQ(file[6], 1);                               // format 1.0
      EXPECT_EQ((10 + file[8] + 256 * file[9]) % 64, 0u);  // the data is 64-byte aligned
      Tensor r = read_npy(file);
      EXPECT_EQ(r.dtype(), dt);
      EXPECT_EQ(r.shape(), shape);
      EXPECT_EQ(raw(r), raw(t));
      std::string path = temp_path("t.npy");
      save_npy(path, t);
      Tensor f = load_npy(path);
      EXPECT_EQ(f.dtype(), dt);
      EXPECT_EQ(f.shape(), shape);
      EXPECT_EQ(raw(f), raw(t));
    }
  }
}

TEST(Npy, WritesTheHeaderNumPyWrites) {
  Tensor t = Tensor::from_vector<int32_t>({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(write_npy_bytes(t), numpy_file(kI4Dict, kI4Data));
  auto header = [](const Tensor& x) {
    Bytes b = write_npy_bytes(x);
    return std::string(b.begin() + 10, b.begin() + 10 + b[8]);
  };
  EXPECT_NE(header(Tensor::zeros(DType::f64, {})).find("'shape': ()"), std::string::npos);
  EXPECT_NE(header(Tensor::zeros(DType::u8, {3})).find("'|u1'"), std::string::npos);
  EXPECT_NE(header(Tensor::zeros(DType::u8, {3})).find("'shape': (3,)"), std::string::npos);
  EXPECT_NE(header(Tensor::zeros(DType::boolean, {1})).find("'|b1'"), std::string::npos);
  EXPECT_NE(header(Tensor::zeros(DType::bf16, {1})).find("'<V2'"), std::string::npos);
  EXPECT_NE(header(Tensor::zeros(DType::f16, {1})).find("'<f2'"), std::string::npos);
}

TEST(Npy, WritesViewsInElementOrder) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}).permute({1, 0});
  Tensor r = read_npy(write_npy_bytes(t));
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(write_npy_bytes(Tensor()), ValueError);
}

TEST(Npy, ReadsFilesAsNumPyWritesThem) {
  // np.save(f, np.arange(6, dtype='<i4').reshape(2, 3)) with NumPy 1.26: the header has
  // 20 spaces of growth room after the dict; byte for byte, in hex.
  const char* hex =
      "934e554d5059010076007b276465736372273a20273c6934272c2027666f727472616e5f6f72646572273a20"
      "46616c73652c20277368617065273a2028322c2033292c207d20202020202020202020202020202020202020"
      "2020202020202020202020202020202020202020202020202020202020202020202020202020200a00000000"
      "0100000002000000030000000400000005000000";
  Bytes file;
  for (const char* p = hex; p[0] && p[1]; p += 2)
    file.push_back(uint8_t(std::stoi(std::string(p, 2), nullptr, 16)));
  ASSERT_EQ(file.size(), 128u + 24u);
  Tensor t = read_npy(file);
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  std::string path = temp_path("numpy.npy");
  write_file(path, file);
  EXPECT_EQ(load_npy(path).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));

  // np.float64(1.5): a 0-d array.
  Tensor s = read_npy(numpy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                                 {0, 0, 0, 0, 0, 0, 0xf8, 0x3f}));
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{1.5}));
  // np.zeros((0, 3), 'f4'): empty.
  Tensor e =
      read_npy(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", {}));
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{0, 3}));
  // np.array([True, False, True]); bytes other than 0 / 1 read as true.
  Tensor b =
      read_npy(numpy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", {1, 0, 7}));
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(raw(b), (Bytes{1, 0, 1}));
  // np.array([1.0, -2.0], 'f2') and a bf16 array saved through ml_dtypes ('<V2').
  Tensor h = read_npy(numpy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                                 {0x00, 0x3c, 0x00, 0xc0}));
  EXPECT_EQ(h.to_doubles(), (std::vector<double>{1.0, -2.0}));
  Tensor bf = read_npy(numpy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }",
                                  {0x80, 0x3f, 0x00, 0xc0}));
  EXPECT_EQ(bf.dtype(), DType::bf16);
  EXPECT_EQ(bf.to_doubles(), (std::vector<double>{1.0, -2.0}));
}

TEST(Npy, ReadsOtherVersionsOrdersAndSpellings) {
  for (int major : {2, 3}) {
    Tensor t = read_npy(numpy_file(kI4Dict, kI4Data, major));
    EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  }
  // np.asfortranarray(np.arange(6, dtype='<i4').reshape(2, 3)): column-major data,
  // transposed on load.
  Tensor f = read_npy(
      numpy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                 {0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0}));
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // np.arange(3, dtype='>i2'): big-endian, byte-swapped on load.
  Tensor be = read_npy(numpy_file("{'descr': '>i2', 'fortran_order': False, 'shape': (3,), }",
                                  {0, 1, 1, 0, 0xff, 0xfe}));
  EXPECT_EQ(be.to_vector<int16_t>(), (std::vector<int16_t>{1, 256, -2}));
  Tensor bf = read_npy(
      numpy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", {0x3f, 0xc0, 0, 0}));
  EXPECT_EQ(bf.to_vector<float>(), (std::vector<float>{1.5f}));
  // Python 2 era headers: longs, double quotes, keys in another order, no trailing comma.
  Tensor py2 = read_npy(
      numpy_file("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i4\"}", kI4Data));
  EXPECT_EQ(py2.shape(), (std::vector<int64_t>{2, 3}));
  // Single-byte types with any byte-order mark.
  EXPECT_EQ(read_npy(numpy_file("{'descr': '<u1', 'fortran_order': False, 'shape': (1,)}", {9}))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{9}));
}

TEST(Npy, RejectsMalformedInput) {
  auto file = [](const std::string& dict, const Bytes& data = {}) {
    return numpy_file(dict, data);
  };
  auto dict = [](const std::string& descr, const std::string& shape,
                 const std::string& fo = "False") {
    return "{'descr': '" + descr + "', 'fortran_order': " + fo + ", 'shape': " + shape + ", }";
  };
  Bytes good = file(kI4Dict, kI4Data);

  expect_io_error({}, "magic");
  expect_io_error(bytes_of("NOTNUMPY\x01"), "magic");
  Bytes v4 = good;
  v4[6] = 4;
  expect_io_error(v4, "version 1.0, 2.0 or 3.0, got 4.0");
  expect_io_error(Bytes(good.begin(), good.begin() + 9), "truncated header");
  expect_io_error(Bytes(good.begin(), good.begin() + 50), "truncated header");

  expect_io_error(file("[1, 2]"), "a dict literal");
  expect_io_error(file("'descr'"), "a dict literal");
  expect_io_error(file(kI4Dict + " junk"), "the end of the header");
  expect_io_error(file("{'descr': '<i4', 'fortran_order': False"), "',' or '}'");
  expect_io_error(file("{'descr': '<i4"), "closing quote");
  expect_io_error(file("{1: 2}"), "a string key");
  expect_io_error(file("{'descr': '<f4', 'shape': (1,)}"), "header keys");
  expect_io_error(file("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}"),
                  "header keys");
  expect_io_error(file(std::string(2000, '(')), "a dict literal");
  expect_io_error(file("{'descr': " + std::string(2000, '(')), "levels of nesting");
  expect_io_error(file("{'shape': (99999999999999999999,)}"), "fits int64");

  expect_io_error(file(dict("<u4", "(1,)")), "got '<u4'");
  expect_io_error(file(dict("<u2", "(1,)")), "got '<u2'");
  expect_io_error(file(dict("|O", "(1,)")), "got '|O'");
  expect_io_error(file(dict("<f3", "(1,)")), "got '<f3'");
  expect_io_error(file(dict("", "(1,)")), "got ''");
  expect_io_error(file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}"),
                  "structured dtype");
  expect_io_error(file(dict("<f4", "(1,)", "1")), "'fortran_order' to be True or False");
  expect_io_error(file(dict("<f4", "[1]")), "'shape' to be a tuple");
  expect_io_error(file(dict("<f4", "(-1,)")), "'shape' to be a tuple");
  expect_io_error(file(dict("<f4", "(1, 'a')")), "'shape' to be a tuple");
  expect_io_error(file(dict("<f4", "(4294967296, 4294967296)")), "fits int64");
  expect_io_error(file(dict("<f8", "(4611686018427387903,)")), "truncated data");

  expect_io_error(file(dict("<i4", "(2, 3)"), Bytes(kI4Data.begin(), kI4Data.end() - 1)),
                  "truncated data");
  Bytes longer = kI4Data;
  longer.push_back(0);
  expect_io_error(file(dict("<i4", "(2, 3)"), longer), "does not match");
  expect_io_error(file(dict("<i4", "(2, 2)"), kI4Data), "expected 16 bytes of data");
}

TEST(Npy, NeverCrashesOnTruncatedOrCorruptedFiles) {
  Bytes good = numpy_file(kI4Dict, kI4Data);
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_THROW(read_npy(Bytes(good.begin(), good.begin() + std::ptrdiff_t(n))), IoError) << n;
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    Bytes b = good;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = uint8_t(rng());
    try {
      read_npy(b);
    } catch (const IoError&) {
    }
  }
}

TEST(Npy, FileErrorsNameTheFile) {
  std::string missing = temp_path("does_not_exist.npy");
  try {
    load_npy(missing);
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_npy(std::filesystem::temp_directory_path().string()), IoError);
  std::string bad = temp_path("bad.npy");
  write_file(bad, bytes_of(std::string("\x93NUMPY\x01\x00\x05\x00{'des", 15)));
  try {
    load_npy(bad);
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  std::string truncated = temp_path("truncated.npy");
  Bytes good = numpy_file(kI4Dict, kI4Data);
  write_file(truncated, Bytes(good.begin(), good.end() - 3));
  EXPECT_THROW(load_npy(truncated), IoError);
  EXPECT_THROW(save_npy(temp_path("no_such_dir/x.npy"), Tensor::zeros(DType::f32, {1})), IoError);
}

}  // namespace
}  // namespace rlx
