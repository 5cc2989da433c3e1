// The ONNX-only ops of the misc and rnn families against direct references: onnx.stft
// (radix-2 and Bluestein lengths), onnx.non_max_suppression, and
// onnx.gru / onnx.lstm with per-row sequence lengths in both directions.
#include "frontend/onnx/ops/misc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>

#include "frontend/onnx/ops/rnn.h"
#include "rlx/graph.h"
#include "rlx/session.h"

namespace rlx {
namespace {

std::vector<Tensor> run(Graph& g, std::vector<Tensor> inputs) {
  return Session(Device::cpu()).compile(g).run(inputs);
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// x [1, n, 2] (complex) -> its DFT along axis 1.
std::vector<std::complex<double>> naive_dft(const std::vector<float>& x, int64_t n) {
  std::vector<std::complex<double>> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    std::complex<double> acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      double a = -2.0 * std::numbers::pi * double(j * k % n) / double(n);
      acc += std::complex<double>(x[size_t(2 * j)], x[size_t(2 * j + 1)]) *
             std::complex<double>(std::cos(a), std::sin(a));
    }
    out[size_t(k)] = acc;
  }
  return out;
}

// onnx.stft (run-time frame sizes) with one frame of the whole signal: its DFT.
TEST(OnnxMiscOps, StftOfOneFrameIsTheDft) {
  onnx_import::register_misc_onnx_ops();
  for (int64_t n : {1, 2, 7, 8, 12, 17, 64, 100}) {
    Graph g;
    Value x = g.input("x", {DType::f32, {1, n, 2}});
    Value step = g.input("step", {DType::i64, {1}});
    Value len = g.input("len", {DType::i64, {1}});
    g.output(g.apply1("onnx.stft", {x, step, len},
                      {{"onesided", false}, {"has_window", false}, {"has_length", true}}));
    std::vector<float> xv = random_floats(size_t(2 * n), unsigned(n));
    auto n1 = Tensor::from_vector(std::vector<int64_t>{n}, {1});
    Tensor y = run(g, {Tensor::from_vector(xv, {1, n, 2}), n1, n1})[0];
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 1, n, 2}));
    std::vector<float> yv = y.to_vector<float>();
    auto want = naive_dft(xv, n);
    for (int64_t k = 0; k < n; ++k) {
      EXPECT_NEAR(yv[size_t(2 * k)], want[size_t(k)].real(), 1e-4) << "n " << n << " k " << k;
      EXPECT_NEAR(yv[size_t(2 * k + 1)], want[size_t(k)].imag(), 1e-4) << "n " << n << " k " << k;
    }
  }
}

TEST(OnnxMiscOps, NonMaxSuppressionKeepsTheBestBoxes) {
  onnx_import::register_misc_onnx_ops();
  Graph g;
  Value boxes = g.input("boxes", {DType::f32, {1, 4, 4}});
  Value scores = g.input("scores", {DType::f32, {1, 1, 4}});
  Value max_out = g.input("max", {DType::i64, {1}});
  Value iou = g.input("iou", {DType::f32, {}});
  Value score = g.input("score", {DType::f32, {}});
  g.output(g.apply1("onnx.non_max_suppression", {boxes, scores, max_out, iou, score}));
  // Boxes 0 and 1 overlap (IoU 0.81), box 2 is apart, box 3 is below the score threshold.
  std::vector<float> b{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 5, 5, 6, 6, 10, 10, 11, 11};
  std::vector<float> s{0.8f, 0.9f, 0.7f, 0.1f};
  auto out = run(g, {Tensor::from_vector(b, {1, 4, 4}), Tensor::from_vector(s, {1, 1, 4}),
                     Tensor::from_vector(std::vector<int64_t>{10}, {1}),
                     Tensor::from_vector(std::vector<float>{0.5f}, {}),
                     Tensor::from_vector(std::vector<float>{0.2f}, {})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out[0].to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
  // INT64_MAX boxes per class is "no limit" (torchvision's batched_nms writes it), not 0.
  out = run(g, {Tensor::from_vector(b, {1, 4, 4}), Tensor::from_vector(s, {1, 1, 4}),
                Tensor::from_vector(std::vector<int64_t>{INT64_MAX}, {1}),
                Tensor::from_vector(std::vector<float>{0.5f}, {}),
                Tensor::from_vector(std::vector<float>{0.2f}, {})});
  EXPECT_EQ(out[0].to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
}

// One-row scalar reference of an LSTM / GRU direction (default activations).
double sigm(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(OnnxRnnOps, SequenceLengthsPerRowInBothDirections) {
  onnx_import::register_rnn_onnx_ops();
  const int64_t S = 4, B = 6, I = 2, H = 3;
  for (const char* op : {"onnx.lstm", "onnx.gru"}) {
    bool lstm = std::string(op) == "onnx.lstm";
    int64_t G = lstm ? 4 : 3;
    Graph g;
    Value x = g.input("x", {DType::f32, {S, B, I}});
    Value w = g.input("w", {DType::f32, {2, G * H, I}});
    Value r = g.input("r", {DType::f32, {2, G * H, H}});
    Value lens = g.input("lens", {DType::i32, {B}});
    Attrs a{
        {"hidden_size", H},
        {"direction", "bidirectional"},
        {"activations", lstm ? "Sigmoid,Tanh,Tanh,Sigmoid,Tanh,Tanh" : "Sigmoid,Tanh,Sigmoid,Tanh"},
        {"slots", IntList{0, 1, 2, 4}}};
    auto outs = g.apply(op, {x, w, r, lens}, a);
    g.output(outs[0]);
    g.output(outs[1]);
    std::vector<float> xv = random_floats(size_t(S * B * I), 1),
                       wv = random_floats(size_t(2 * G * H * I), 2),
                       rv = random_floats(size_t(2 * G * H * H), 3);
    std::vector<int32_t> lv{4, 2, 1, 3, 4, 0};
    auto res = run(g, {Tensor::from_vector(xv, {S, B, I}), Tensor::from_vector(wv, {2, G * H, I}),
                       Tensor::from_vector(rv, {2, G * H, H}), Tensor::from_vector(lv, {B})});
    std::vector<float> y = res[0].to_vector<float>(), yh = res[1].to_vector<float>();
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> h(size_t(H), 0.0), c(size_t(H), 0.0);
        for (int64_t s = 0; s < S; ++s) {
          int64_t t = d == 0 ? s : lv[size_t(b)] - 1 - s;
          if (s >= lv[size_t(b)]) {
            for (int64_t k = 0; k < H; ++k)  // past the row's length: zeros
              EXPECT_EQ(y[size_t(((s * 2 + d) * B + b) * H + k)], 0.0f);
            continue;
          }
          // Gate pre-activations from x and h.
          auto pre = [&](int64_t row, const std::vector<double>& hin) {
            double v = 0;
            for (int64_t i = 0; i < I; ++i)
              v += xv[size_t((t * B + b) * I + i)] * wv[size_t((d * G * H + row) * I + i)];
            for (int64_t k = 0; k < H; ++k)
              v += hin[size_t(k)] * rv[size_t((d * G * H + row) * H + k)];
            return v;
          };
          std::vector<double> hn(static_cast<size_t>(H));
          for (int64_t k = 0; k < H; ++k) {
            if (lstm) {
              double ig = sigm(pre(k, h)), og = sigm(pre(H + k, h)), fg = sigm(pre(2 * H + k, h)),
                     cg = std::tanh(pre(3 * H + k, h));
              c[size_t(k)] = fg * c[size_t(k)] + ig * cg;
              hn[size_t(k)] = og * std::tanh(c[size_t(k)]);
            } else {
              double z = sigm(pre(k, h)), rr = sigm(pre(H + k, h));
              std::vector<double> rh(static_cast<size_t>(H));
              for (int64_t j = 0; j < H; ++j) rh[size_t(j)] = sigm(pre(H + j, h)) * h[size_t(j)];
              double hh = std::tanh(pre(2 * H + k, rh));
              (void)rr;
              hn[size_t(k)] = (1 - z) * hh + z * h[size_t(k)];
            }
          }
          h = hn;
          for (int64_t k = 0; k < H; ++k)
            EXPECT_NEAR(y[size_t(((t * 2 + d) * B + b) * H + k)], h[size_t(k)], 1e-5)
                << op << " d " << d << " b " << b << " t " << t;
        }
        for (int64_t k = 0; k < H; ++k)
          EXPECT_NEAR(yh[size_t((d * B + b) * H + k)], h[size_t(k)], 1e-5) << op;
      }
  }
}

}  // namespace
}  // namespace rlx
