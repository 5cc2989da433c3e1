// The reference block codecs (rlx/quant.h) against independent references: a NumPy
// decoder / round-to-nearest encoder written from the format description
// (quant_ref.py), and, where llama.cpp's library is present, ggml's own reference
// quantizers and decoders.
#include "rlx/quant.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "rlx/error.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

// Byte offsets of each block's f16 scale fields (d, dmin / m).
std::vector<int> f16_fields(DType t) {
  switch (t) {
    case DType::q4_0:
    case DType::q5_0:
    case DType::q8_0:
      return {0};
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
      return {0, 2};
    case DType::q2_k:
      return {80, 82};
    case DType::q3_k:
      return {108};
    case DType::q6_k:
      return {208};
    default:
      return {};
  }
}

// Random blocks: random bytes everywhere, with finite f16 scales (random bits there could
// be NaN or Inf, which compare badly and which no encoder writes).
std::vector<uint8_t> random_blocks(DType t, int64_t nb, std::mt19937& g) {
  std::vector<uint8_t> b(dtype_size(t) * size_t(nb));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-2.f, 2.f);
  for (auto& v : b) v = uint8_t(byte(g));
  for (int64_t i = 0; i < nb; ++i)
    for (int off : f16_fields(t)) {
      uint16_t h = f32_to_f16(scale(g));
      std::memcpy(b.data() + size_t(i) * dtype_size(t) + size_t(off), &h, 2);
    }
  return b;
}

std::vector<float> gaussian(int64_t n, std::mt19937& g, float sigma = 1.f) {
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(g);
  return x;
}

template <class T>
void write_file(const fs::path& p, const std::vector<T>& v) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
}
template <class T>
std::vector<T> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary | std::ios::ate);
  EXPECT_TRUE(in.good()) << p;
  if (!in) return {};
  std::vector<T> v(size_t(in.tellg()) / sizeof(T));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
  return v;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("rlx_quant_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void run_numpy_reference(const fs::path& dir) {
  const fs::path script = fs::path(RLX_TEST_DIR) / "quant_ref.py";
  // Debian's python3 (make deps installs its NumPy); RLX_PYTHON names another, as for
  // tests/train (the GPU machine's: tools/gpu/cpu_levels.sh).
  const char* py = std::getenv("RLX_PYTHON");
  const std::string cmd = std::string(py ? py : "/usr/bin/python3") + " '" + script.string() +
                          "' '" + dir.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << " failed (python3-numpy: make deps)";
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& blocks, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  quant::dequantize_row(t, blocks.data(), out.data(), n);
  return out;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> out(dtype_nbytes(t, int64_t(x.size())));
  quant::quantize_row(t, x.data(), out.data(), int64_t(x.size()));
  return out;
}

TEST(Quant, DequantizeEveryTypeMatchesNumpyReference) {
  TempDir dir;
  std::mt19937 g(7);
  const int64_t nb = 200;
  for (DType t : kQuantDTypes)
    write_file(dir.path / (std::string(dtype_name(t)) + ".blocks"), random_blocks(t, nb, g));
  run_numpy_reference(dir.path);
  for (DType t : kQuantDTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const std::string name(dtype_name(t));
    auto blocks = read_file<uint8_t>(dir.path / (name + ".blocks"));
    const int64_t n = nb * dtype_block(t);
    auto mine = dequantize(t, blocks, n);
    auto ref = read_file<float>(dir.path / (name + ".deq"));
    ASSERT_EQ(ref.size(), mine.size());
    int64_t exact = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      // Same float operations in the same order: equal but for association differences.
      ASSERT_NEAR(mine[i], ref[i], 1e-6f * (1.f + std::fabs(ref[i]))) << "value " << i;
      exact += mine[i] == ref[i];
    }
    EXPECT_GT(double(exact) / double(n), 0.99);
  }
}

TEST(Quant, RoundToNearestEncodersBitExactWithNumpyReference) {
  TempDir dir;
  std::mt19937 g(11);
  const DType types[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1};
  // Gaussian rows at several scales, plus blocks that stress the edge cases: all zero,
  // constant, one large value, ties between +max and -max.
  std::vector<float> x = gaussian(32 * 300, g, 0.05f);
  auto big = gaussian(32 * 50, g, 30.f);
  x.insert(x.end(), big.begin(), big.end());
  x.insert(x.end(), 32, 0.f);
  x.insert(x.end(), 32, 0.75f);
  for (int i = 0; i < 32; ++i) x.push_back(i == 5 ? -3.f : 0.01f * float(i));
  for (int i = 0; i < 32; ++i) x.push_back(i % 2 ? 2.f : -2.f);
  for (DType t : types) write_file(dir.path / (std::string(dtype_name(t)) + ".x"), x);
  run_numpy_reference(dir.path);
  for (DType t : types) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    auto ref = read_file<uint8_t>(dir.path / (std::string(dtype_name(t)) + ".q"));
    auto mine = quantize(t, x);
    ASSERT_EQ(ref.size(), mine.size());
    const size_t bs = dtype_size(t);
    for (size_t b = 0; b < mine.size() / bs; ++b)
      ASSERT_EQ(0, std::memcmp(mine.data() + b * bs, ref.data() + b * bs, bs)) << "block " << b;
  }
}

// Round trips: the relative RMS error of quantize -> dequantize on Gaussian data, within
// what each format gets (measured: q8_0 0.53 %, q6_k 1.8 %, q5_k 3.6 %, q5_1 3.8 %,
// q5_0 4.3 %, q4_k 7.1 %, q4_1 7.8 %, q4_0 8.6 %, q3_k 15 %, q2_k 30 %; the bounds leave
// ~25 %, and the encoders are bit-exact with ggml's elsewhere in this file).
TEST(Quant, RoundTripErrorWithinFormatBounds) {
  std::mt19937 g(3);
  const auto x = gaussian(256 * 256, g, 0.02f);
  struct Bound {
    DType t;
    double max_rel_rmse;
  };
  const Bound bounds[] = {{DType::q8_0, 0.007}, {DType::q6_k, 0.025}, {DType::q5_k, 0.045},
                          {DType::q5_1, 0.045}, {DType::q5_0, 0.05},  {DType::q4_k, 0.09},
                          {DType::q4_1, 0.09},  {DType::q4_0, 0.11},  {DType::q3_k, 0.19},
                          {DType::q2_k, 0.36}};
  double rms = 0;
  for (float v : x) rms += double(v) * v;
  rms = std::sqrt(rms / double(x.size()));
  for (auto [t, bound] : bounds) {
    auto y = dequantize(t, quantize(t, x), int64_t(x.size()));
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i) err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    const double rel = std::sqrt(err / double(x.size())) / rms;
    EXPECT_LT(rel, bound) << dtype_name(t);
    // ... and not suspiciously good either (a codec that stored f32 would pass above).
    EXPECT_GT(rel, bound / 20) << dtype_name(t);
    RecordProperty(std::string("rel_rmse_") + std::string(dtype_name(t)), std::to_string(rel));
  }
}

TEST(Quant, ZeroAndConstantBlocksDecodeExactly) {
  for (DType t : kQuantDTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t n = dtype_block(t) * 2;
    std::vector<float> zeros(size_t(n), 0.f);
    for (float v : dequantize(t, quantize(t, zeros), n)) ASSERT_EQ(v, 0.f);
    std::vector<float> c(size_t(n), -0.5f);  // representable in every format
    for (float v : dequantize(t, quantize(t, c), n)) ASSERT_NEAR(v, -0.5f, 0.5f * 0.07f);
  }
}

TEST(Quant, FloatRowsConvert) {
  std::vector<float> x = {1.f, -2.5f, 3.14159f, 65504.f, 1e-8f};
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    std::vector<uint8_t> enc(dtype_nbytes(t, 5));
    quant::quantize_row(t, x.data(), enc.data(), 5);
    std::vector<float> y(5);
    quant::dequantize_row(t, enc.data(), y.data(), 5);
    for (int i = 0; i < 5; ++i) {
      float want = t == DType::f32   ? x[size_t(i)]
                   : t == DType::f16 ? f16_to_f32(f32_to_f16(x[size_t(i)]))
                                     : bf16_to_f32(f32_to_bf16(x[size_t(i)]));
      EXPECT_EQ(y[size_t(i)], want) << dtype_name(t) << " " << i;
    }
  }
}

TEST(Quant, BadArgumentsAreTypedErrors) {
  std::vector<float> x(64);
  std::vector<uint8_t> b(1024);
  EXPECT_THROW(quant::quantize_row(DType::q4_k, x.data(), b.data(), 64), ValueError);
  EXPECT_THROW(quant::dequantize_row(DType::q8_0, b.data(), x.data(), 33), ValueError);
  EXPECT_THROW(quant::dequantize_row(DType::i32, b.data(), x.data(), 32), TypeError);
  EXPECT_THROW(quant::quantize_row(DType::string, x.data(), b.data(), 32), TypeError);
  quant::BlockQ8_K q8k[1];
  EXPECT_THROW(quant::quantize_row_q8_k(x.data(), q8k, 64), ValueError);
}

// Tiles a [32, k] pattern of t's bytes (tiles16, rlx/quant.h) and checks that byte v of each
// row's block lands at where(i, half, v) in the tiled block of its 16 rows (i: the row's pair,
// half: 0 for row i, 1 for i + 8), then that untile gives the plain bytes back.
void expect_tiled(DType t, int64_t k,
                  const std::function<int64_t(int64_t, int64_t, int64_t)>& where) {
  const int64_t n = 32, nb = k / dtype_block(t), bb = int64_t(dtype_size(t));
  std::vector<uint8_t> plain(size_t(n * nb * bb));
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = uint8_t(i * 131 + 7);
  std::vector<uint8_t> tiles(plain.size()), back(plain.size());
  quant::tile(t, plain.data(), tiles.data(), n, k);
  int bad = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = plain.data() + (r * nb + b) * bb;
      const uint8_t* u = tiles.data() + (r / 16 * nb + b) * 16 * bb;
      for (int64_t v = 0; v < bb; ++v) bad += u[where(r % 8, r % 16 / 8, v)] != p[v];
    }
  EXPECT_EQ(bad, 0) << dtype_name(t);
  quant::untile(t, tiles.data(), back.data(), n, k);
  EXPECT_EQ(back, plain) << dtype_name(t);
}

// q8_0: the pairs' f16 scales, then 32 runs of 16 bytes, run 4 i + j holding values 8 j ..
// 8 j + 7 of row i, then of row i + 8. q4_k: d / dmin of the pairs, their packed scales, then
// per 64-value chunk 32 runs, run 4 i + j holding chunk bytes 8 j .. 8 j + 7 of row i, then of
// row i + 8.
TEST(Quant, TilesPlaceEveryByteAsSpecified) {
  expect_tiled(DType::q8_0, 96, [](int64_t i, int64_t half, int64_t v) {
    return v < 2 ? 4 * i + 2 * half + v : 32 + 16 * (4 * i + (v - 2) / 8) + 8 * half + (v - 2) % 8;
  });
  expect_tiled(DType::q4_k, 512, [](int64_t i, int64_t half, int64_t v) {
    if (v < 4) return 8 * i + 4 * half + v;
    if (v < 16) return 64 + 24 * i + 12 * half + v - 4;
    const int64_t c = (v - 16) / 32, j = (v - 16) % 32 / 8;
    return 256 + 512 * c + 16 * (4 * i + j) + 8 * half + (v - 16) % 8;
  });
  EXPECT_TRUE(quant::tileable(DType::q8_0));
  EXPECT_FALSE(quant::tileable(DType::q6_k));
  std::vector<uint8_t> buf(16 * 2 * 144);
  EXPECT_THROW(quant::tile(DType::q4_0, buf.data(), buf.data() + 8, 16, 64), TypeError);
  EXPECT_THROW(quant::tile(DType::q8_0, buf.data(), buf.data() + 8, 8, 64), ValueError);
  EXPECT_THROW(quant::untile(DType::q8_0, buf.data(), buf.data() + 8, 16, 40), ValueError);
  EXPECT_THROW(quant::tile(DType::q4_k, buf.data(), buf.data() + 8, 16, 128), ValueError);
}

TEST(Quant, Q8KActivations) {
  std::mt19937 g(5);
  auto x = gaussian(512, g, 3.f);
  x[300] = -20.f;  // the block's largest magnitude, negative
  std::vector<quant::BlockQ8_K> y(2);
  quant::quantize_row_q8_k(x.data(), y.data(), 512);
  for (int b = 0; b < 2; ++b) {
    float amax = 0;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[size_t(256 * b + j)]));
    EXPECT_NEAR(std::fabs(y[size_t(b)].d), amax / 127, 1e-6f * amax);
    for (int j = 0; j < 256; ++j) {
      const float v = x[size_t(256 * b + j)];
      EXPECT_LE(std::fabs(y[size_t(b)].d * float(y[size_t(b)].qs[j]) - v),
                0.5f * std::fabs(y[size_t(b)].d) * 1.0001f);
    }
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[size_t(b)].qs[16 * s + j];
      EXPECT_EQ(y[size_t(b)].bsums[s], sum);
    }
  }
  EXPECT_EQ(y[1].qs[300 - 256], -127);  // -max maps to -127, never -128
}

// ---- against llama.cpp's own library, where it is installed ----------------------------

std::string ggml_base_path() {
  if (const char* p = std::getenv("RLX_GGML_BASE_LIB")) return p;
  const char* home = std::getenv("HOME");
  if (!home) return {};
  fs::path bins = fs::path(home) / ".cache/rlx-llm/node_modules/@node-llama-cpp/linux-x64/bins";
  std::error_code ec;
  for (auto& d : fs::directory_iterator(bins, ec))
    if (fs::exists(d.path() / "libggml-base.so")) return (d.path() / "libggml-base.so").string();
  return {};
}

std::string ggml_suffix(DType t) {
  std::string s(dtype_name(t));
  if (s.back() == 'k') s.back() = 'K';  // q4_k -> q4_K
  return s;
}

TEST(Quant, BitExactWithLlamaCppLibrary) {
  const std::string lib = ggml_base_path();
  if (lib.empty()) GTEST_SKIP() << "llama.cpp's libggml-base.so not found (RLX_GGML_BASE_LIB)";
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) GTEST_SKIP() << "cannot load " << lib << ": " << dlerror();
  std::mt19937 g(13);
  std::vector<float> x;
  for (float sigma : {1e-3f, 0.02f, 1.f, 50.f}) {
    auto v = gaussian(256 * 64, g, sigma);
    x.insert(x.end(), v.begin(), v.end());
  }
  // Heavy-tailed rows and degenerate blocks.
  std::student_t_distribution<float> st(2.f);
  for (int i = 0; i < 256 * 16; ++i) x.push_back(0.01f * st(g));
  x.insert(x.end(), 256, 0.f);
  x.insert(x.end(), 256, 0.3f);
  for (int i = 0; i < 256; ++i) x.push_back(i == 77 ? 5.f : 0.f);
  const int64_t n = int64_t(x.size());
  for (DType t : kQuantDTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    using Q = void (*)(const float*, void*, int64_t);
    using D = void (*)(const void*, float*, int64_t);
    auto q = reinterpret_cast<Q>(dlsym(h, ("quantize_row_" + ggml_suffix(t) + "_ref").c_str()));
    auto d = reinterpret_cast<D>(dlsym(h, ("dequantize_row_" + ggml_suffix(t)).c_str()));
    ASSERT_TRUE(q && d);
    std::vector<uint8_t> ref(dtype_nbytes(t, n));
    q(x.data(), ref.data(), n);
    auto mine = quantize(t, x);
    const size_t bs = dtype_size(t);
    int64_t bad = 0;
    for (size_t b = 0; b < ref.size() / bs; ++b)
      bad += std::memcmp(ref.data() + b * bs, mine.data() + b * bs, bs) != 0;
    EXPECT_EQ(bad, 0) << "of " << ref.size() / bs << " blocks";
    // Decoding random blocks.
    const int64_t nb = 100;
    auto blocks = random_blocks(t, nb, g);
    std::vector<float> want(size_t(nb * dtype_block(t)));
    d(blocks.data(), want.data(), int64_t(want.size()));
    auto got = dequantize(t, blocks, int64_t(want.size()));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "value " << i;
  }
  // The Q8_K activation quantizer (zero blocks excluded: ggml leaves their bsums unset).
  using Q8K = void (*)(const float*, quant::BlockQ8_K*, int64_t);
  auto q8k = reinterpret_cast<Q8K>(dlsym(h, "quantize_row_q8_K_ref"));
  ASSERT_TRUE(q8k);
  const int64_t n8 = 256 * 64 * 4;  // the Gaussian rows at four scales
  std::vector<quant::BlockQ8_K> want(size_t(n8 / 256)), got(size_t(n8 / 256));
  q8k(x.data(), want.data(), n8);
  quant::quantize_row_q8_k(x.data(), got.data(), n8);
  for (size_t b = 0; b < want.size(); ++b) {
    ASSERT_EQ(want[b].d, got[b].d) << "block " << b;
    ASSERT_EQ(0, std::memcmp(want[b].qs, got[b].qs, 256)) << "block " << b;
    ASSERT_EQ(0, std::memcmp(want[b].bsums, got[b].bsums, 32)) << "block " << b;
  }
  dlclose(h);
}

}  // namespace
}  // namespace rlx
