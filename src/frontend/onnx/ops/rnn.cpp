// onnx.rnn, onnx.gru, onnx.lstm: ONNX's RNN / GRU / LSTM layers (layout 0: X is
// [seq, batch, input], Y is [seq, dirs, batch, hidden]; the converter transposes layout 1).
//
// The CPU kernel projects the input of every step with one GEMM per direction (biases
// folded in), then runs the recurrence: one GEMM (a GEMV for batch 1) of the hidden state
// with R per step, and the gate arithmetic on rows of the batch. A batch row whose
// sequence_lens entry is reached stops: its state is kept and its Y rows stay zero; the
// reverse direction starts each row at its own last step.
#include "frontend/onnx/ops/rnn.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "rlx/kernel.h"
#include "rlx/op.h"
#include "rlx/parallel.h"

namespace rlx::onnx_import {

namespace {

enum class Cell { rnn, gru, lstm };

// Gates per cell: RNN 1 (i), GRU 3 (z r h), LSTM 4 (i o f c).
int64_t gate_count(Cell c) { return c == Cell::rnn ? 1 : c == Cell::gru ? 3 : 4; }

// ONNX input slots: X W R B sequence_lens initial_h initial_c P.
enum Slot { kX, kW, kR, kB, kLens, kH0, kC0, kP, kSlots };

// ---- activations ------------------------------------------------------------------------

enum class Act {
  relu,
  tanh,
  sigmoid,
  affine,
  leaky_relu,
  thresholded_relu,
  scaled_tanh,
  hard_sigmoid,
  elu,
  softsign,
  softplus
};

struct ActName {
  const char* name;  // lower case
  Act act;
  bool uses_alpha, uses_beta;
  double alpha, beta;  // defaults
};

constexpr ActName kActs[] = {
    {"relu", Act::relu, false, false, 0, 0},
    {"tanh", Act::tanh, false, false, 0, 0},
    {"sigmoid", Act::sigmoid, false, false, 0, 0},
    {"affine", Act::affine, true, true, 1.0, 0.0},
    {"leakyrelu", Act::leaky_relu, true, false, 0.01, 0},
    {"thresholdedrelu", Act::thresholded_relu, true, false, 1.0, 0},
    {"scaledtanh", Act::scaled_tanh, true, true, 1.0, 1.0},
    {"hardsigmoid", Act::hard_sigmoid, true, true, 0.2, 0.5},
    {"elu", Act::elu, true, false, 1.0, 0},
    {"softsign", Act::softsign, false, false, 0, 0},
    {"softplus", Act::softplus, false, false, 0, 0},
};

const ActName* find_act(std::string name) {
  for (char& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  for (const ActName& a : kActs)
    if (name == a.name) return &a;
  return nullptr;
}

// f32 sigmoid and tanh in loops that vectorise (libm's expf / tanhf calls do not): Cephes'
// expf (range reduction by ln 2, degree-6 polynomial) and its tanhf (an odd polynomial below
// |x| = 0.625, 1 - 2 / (e^2|x| + 1) above); max relative error ~1.5e-7 over [-30, 30]. The
// gates of a recurrent step are a few hundred values, so these loops are a large share of a
// small model's time. No float-to-int conversion (it keeps GCC from vectorising): the
// rounding to an integer multiple of ln 2 adds 1.5 * 2^23, whose low mantissa bits then
// hold the integer.
[[gnu::always_inline]] inline float exp_f32(float x) {
  // Builtins and plain comparisons, not std::max / std::bit_cast: those are functions of
  // the default target, which GCC will not inline into the target clones below.
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  float t = x * 1.44269504088896341f + kRound;
  float fx = t - kRound;
  int32_t n = __builtin_bit_cast(int32_t, t) - __builtin_bit_cast(int32_t, kRound);
  x = x - fx * 0.693359375f + fx * 2.12194440e-4f;
  float z = x * x;
  float y =
      ((((1.9875691500e-4f * x + 1.3981999507e-3f) * x + 8.3334519073e-3f) * x + 4.1665795894e-2f) *
           x +
       1.6666665459e-1f) *
          x +
      5.0000001201e-1f;
  y = y * z + x + 1.0f;
  return y * __builtin_bit_cast(float, (n + 127) << 23);
}

// The activations are a small step's largest share (twice BLAS's GEMV in a 64-wide LSTM:
// bench/RESULTS.md, "ONNX corpus against ORT"); the library builds at x86-64-v2, so each is
// also compiled for AVX2 and AVX-512, picked by the CPU's features at load time (GCC's
// target_clones; exp_f32 is inlined into each).
#define RLX_RNN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

RLX_RNN_CLONES void sigmoid_f32(float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + exp_f32(-x[i]));
}

RLX_RNN_CLONES void tanh_f32(float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i], a = v < 0.0f ? -v : v, z = v * v;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) *
                       z -
                   3.33332819422e-1f) *
                      z * v +
                  v;
    float big = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);
    x[i] = a < 0.625f ? small : (v < 0.0f ? -big : big);
  }
}

struct ActFn {
  Act act = Act::tanh;
  double alpha = 0, beta = 0;

  // In place over n values; the switch is outside the loops so that they vectorise.
  template <class T>
  void operator()(T* x, int64_t n) const {
    const T a = T(alpha), b = T(beta);
    switch (act) {
      case Act::relu:
        for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], T(0));
        return;
      case Act::tanh:
        if constexpr (std::is_same_v<T, float>)
          tanh_f32(x, n);
        else
          for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
        return;
      case Act::sigmoid:
        if constexpr (std::is_same_v<T, float>)
          sigmoid_f32(x, n);
        else
          for (int64_t i = 0; i < n; ++i) x[i] = T(1) / (T(1) + std::exp(-x[i]));
        return;
      case Act::affine:
        for (int64_t i = 0; i < n; ++i) x[i] = a * x[i] + b;
        return;
      case Act::leaky_relu:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : a * x[i];
        return;
      case Act::thresholded_relu:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] > a ? x[i] : T(0);
        return;
      case Act::scaled_tanh:
        for (int64_t i = 0; i < n; ++i) x[i] = a * std::tanh(b * x[i]);
        return;
      case Act::hard_sigmoid:
        for (int64_t i = 0; i < n; ++i) x[i] = std::clamp(a * x[i] + b, T(0), T(1));
        return;
      case Act::elu:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : a * (std::exp(x[i]) - T(1));
        return;
      case Act::softsign:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (T(1) + std::abs(x[i]));
        return;
      case Act::softplus:
        for (int64_t i = 0; i < n; ++i) x[i] = std::log1p(std::exp(x[i]));
        return;
    }
  }
};

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

// ---- BLAS -------------------------------------------------------------------------------

// C[M, N] = A[M, K] · B[N, K]^T + beta * C (row-major); a GEMV when M is 1.
void gemm_nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (m == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, int(n), int(k), 1.0f, b, int(ldb), a, 1, beta, c, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, a, int(lda),
                b, int(ldb), beta, c, int(ldc));
}
void gemm_nt(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
             int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (m == 1)
    cblas_dgemv(CblasRowMajor, CblasNoTrans, int(n), int(k), 1.0, b, int(ldb), a, 1, beta, c, 1);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0, a, int(lda),
                b, int(ldb), beta, c, int(ldc));
}

// The recurrent product a[B, H] · R[col0, col0 + n)^T for one step. For f32 batches of 2
// to 64 rows R is transposed once per direction into rt [H, GH + 32] (zero padded) and
// multiplied by register-blocked loops here (4 rows x 32 columns): BLAS's GEMM repacks R at
// every step, which made it 1.2x (16 rows) to 3.5x (2 rows) slower. One row stays a GEMV.
template <int MR>
void small_m_block(const float* a, int64_t lda, const float* rt, int64_t ld, int64_t k_size,
                   int64_t j, int64_t n_left, float beta, float* c, int64_t ldc) {
  constexpr int NR = 32;
  float acc[MR][NR] = {};
  for (int64_t k = 0; k < k_size; ++k) {
    const float* b = rt + k * ld + j;
    for (int r = 0; r < MR; ++r) {
      float av = a[r * lda + k];
#pragma omp simd
      for (int q = 0; q < NR; ++q) acc[r][q] += av * b[q];
    }
  }
  int64_t n = std::min<int64_t>(NR, n_left);
  for (int r = 0; r < MR; ++r)
    for (int64_t q = 0; q < n; ++q) {
      float& o = c[r * ldc + q];
      o = (beta == 0.0f ? 0.0f : o) + acc[r][q];
    }
}

template <class T>
class RecurrentGemm {
 public:
  RecurrentGemm(const T* R, int64_t gh, int64_t h, int64_t b, int64_t steps) : R_(R), H_(h), B_(b) {
    if constexpr (std::is_same_v<T, float>) {
      // One row: BLAS's GEMV is as fast. Few steps: the transposition would not pay off.
      if (b < 2 || b > 64 || steps < 4) return;
      ld_ = gh + 32;
      rt_.assign(size_t(h * ld_), 0.0f);
      for (int64_t j = 0; j < gh; ++j)
        for (int64_t k = 0; k < h; ++k) rt_[size_t(k * ld_ + j)] = R[j * h + k];
    }
  }
  // c[B, n] (row stride ldc) = beta * c + a[B, H] (row stride lda) · R[col0, col0 + n)^T.
  void operator()(const T* a, int64_t lda, int64_t col0, int64_t n, T beta, T* c,
                  int64_t ldc) const {
    if constexpr (std::is_same_v<T, float>) {
      if (ld_) {
        for (int64_t j = 0; j < n; j += 32) {
          const float* rt = rt_.data();
          int64_t i = 0;
          for (; i + 4 <= B_; i += 4)
            small_m_block<4>(a + i * lda, lda, rt, ld_, H_, col0 + j, n - j, beta, c + i * ldc + j,
                             ldc);
          for (; i < B_; ++i)
            small_m_block<1>(a + i * lda, lda, rt, ld_, H_, col0 + j, n - j, beta, c + i * ldc + j,
                             ldc);
        }
        return;
      }
    }
    gemm_nt(B_, n, H_, a, lda, R_ + col0 * H_, H_, beta, c, ldc);
  }

 private:
  const T* R_;
  int64_t H_, B_, ld_ = 0;
  std::vector<float> rt_;
};

// ---- the kernel -------------------------------------------------------------------------

struct Config {
  Cell cell;
  int64_t S, B, I, H, G, dirs;
  bool reverse_only, lbr, input_forget;
  double clip;                // <= 0: none
  std::vector<ActFn> acts;    // per direction: 1 (RNN), 2 (GRU) or 3 (LSTM) functions
  std::vector<int64_t> lens;  // per batch row
};

template <class T>
struct Ptrs {
  const T *X = nullptr, *W = nullptr, *R = nullptr, *B = nullptr, *h0 = nullptr, *c0 = nullptr,
          *P = nullptr;
  T *Y = nullptr, *Yh = nullptr, *Yc = nullptr;
};

template <class T>
void clip_values(T* x, int64_t n, double clip) {
  if (clip <= 0) return;
  const T c = T(clip);
  for (int64_t i = 0; i < n; ++i) x[i] = std::clamp(x[i], -c, c);
}

// Keeps BLAS on the calling thread while alive when `single` (OpenBLAS's OpenMP build
// follows omp_get_max_threads()). Per-step products below ~1M multiply-adds are cheaper
// than waking the BLAS threads at every step.
struct SingleThread {
  int restore = 0;
  explicit SingleThread(bool single) {
    if (single && omp_get_max_threads() > 1) {
      restore = omp_get_max_threads();
      omp_set_num_threads(1);
    }
  }
  ~SingleThread() {
    if (restore) omp_set_num_threads(restore);
  }
  SingleThread(const SingleThread&) = delete;
  SingleThread& operator=(const SingleThread&) = delete;
};

template <class T>
void run_direction(const Config& c, int64_t d, const Ptrs<T>& p) {
  const int64_t S = c.S, B = c.B, I = c.I, H = c.H, GH = c.G * c.H;
  const bool reverse = c.reverse_only || d == 1;
  const T* W = p.W + d * GH * I;
  const T* R = p.R + d * GH * H;
  const ActFn* act = c.acts.data() + d * (c.cell == Cell::rnn ? 1 : c.cell == Cell::gru ? 2 : 3);

  // Input projection of all steps at once, with the biases that add to it.
  std::vector<T> xw(size_t(S * B * GH));
  gemm_nt(S * B, GH, I, p.X, I, W, I, T(0), xw.data(), GH);
  std::vector<T> rbh(size_t(H), T(0));  // GRU linear_before_reset: R's bias of the h gate
  if (p.B) {
    const T* wb = p.B + d * 2 * GH;
    const T* rb = wb + GH;
    std::vector<T> bias(static_cast<size_t>(GH));
    for (int64_t j = 0; j < GH; ++j) {
      bool separate = c.cell == Cell::gru && c.lbr && j >= 2 * H;
      bias[size_t(j)] = wb[j] + (separate ? T(0) : rb[j]);
      if (separate) rbh[size_t(j - 2 * H)] = rb[j];
    }
    for (int64_t r = 0; r < S * B; ++r) {
      T* row = xw.data() + r * GH;
      for (int64_t j = 0; j < GH; ++j) row[j] += bias[size_t(j)];
    }
  }

  std::vector<T> h(size_t(B * H), T(0)), cs(size_t(B * H), T(0));
  if (p.h0) std::memcpy(h.data(), p.h0 + d * B * H, sizeof(T) * size_t(B * H));
  if (p.c0) std::memcpy(cs.data(), p.c0 + d * B * H, sizeof(T) * size_t(B * H));
  std::vector<T> gates(size_t(B * GH)), tmp(size_t(B * H));
  const T* Pd = p.P ? p.P + d * 3 * H : nullptr;

  SingleThread single(B * GH * H < (1 << 20));
  RecurrentGemm<T> rgemm(R, GH, H, B, S);
  auto step_of = [&](int64_t s, int64_t b) { return reverse ? c.lens[size_t(b)] - 1 - s : s; };
  auto y_row = [&](int64_t t, int64_t b) { return p.Y + ((t * c.dirs + d) * B + b) * H; };

  for (int64_t s = 0; s < S; ++s) {
    for (int64_t b = 0; b < B; ++b)
      if (s < c.lens[size_t(b)])
        std::memcpy(gates.data() + b * GH, xw.data() + (step_of(s, b) * B + b) * GH,
                    sizeof(T) * size_t(GH));
    // The recurrent term of the gates that take H unchanged (GRU's h gate comes after).
    int64_t n_first = c.cell == Cell::gru ? 2 * H : GH;
    rgemm(h.data(), H, 0, n_first, T(1), gates.data(), GH);
    if (c.cell == Cell::gru) {
      for (int64_t b = 0; b < B; ++b) {
        T* g = gates.data() + b * GH;
        clip_values(g, 2 * H, c.clip);
        act[0](g, 2 * H);  // z, r
      }
      if (c.lbr) {
        rgemm(h.data(), H, 2 * H, H, T(0), tmp.data(), H);
        for (int64_t b = 0; b < B; ++b) {
          T *g = gates.data() + b * GH, *hr = tmp.data() + b * H;
          for (int64_t k = 0; k < H; ++k) g[2 * H + k] += g[H + k] * (hr[k] + rbh[size_t(k)]);
        }
      } else {
        for (int64_t b = 0; b < B; ++b) {
          const T *g = gates.data() + b * GH, *hb = h.data() + b * H;
          T* rh = tmp.data() + b * H;
          for (int64_t k = 0; k < H; ++k) rh[k] = g[H + k] * hb[k];
        }
        rgemm(tmp.data(), H, 2 * H, H, T(1), gates.data() + 2 * H, GH);
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      if (s >= c.lens[size_t(b)]) continue;
      T *g = gates.data() + b * GH, *hb = h.data() + b * H;
      switch (c.cell) {
        case Cell::rnn:
          clip_values(g, H, c.clip);
          act[0](g, H);
          std::memcpy(hb, g, sizeof(T) * size_t(H));
          break;
        case Cell::gru: {
          T *z = g, *hh = g + 2 * H;
          clip_values(hh, H, c.clip);
          act[1](hh, H);
          for (int64_t k = 0; k < H; ++k) hb[k] = (T(1) - z[k]) * hh[k] + z[k] * hb[k];
          break;
        }
        case Cell::lstm: {
          T *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H, *cb = cs.data() + b * H;
          if (Pd)
            for (int64_t k = 0; k < H; ++k) {
              gi[k] += Pd[k] * cb[k];
              gf[k] += Pd[2 * H + k] * cb[k];
            }
          // o is clipped after its peephole term, which needs the new cell state.
          clip_values(gi, H, c.clip);
          clip_values(gf, 2 * H, c.clip);  // f and c
          act[0](gi, H);
          if (c.input_forget)
            for (int64_t k = 0; k < H; ++k) gf[k] = T(1) - gi[k];
          else
            act[0](gf, H);
          act[1](gc, H);
          for (int64_t k = 0; k < H; ++k) cb[k] = gf[k] * cb[k] + gi[k] * gc[k];
          if (Pd)
            for (int64_t k = 0; k < H; ++k) go[k] += Pd[H + k] * cb[k];
          clip_values(go, H, c.clip);
          act[0](go, H);
          T* hc = tmp.data() + b * H;
          std::memcpy(hc, cb, sizeof(T) * size_t(H));
          act[2](hc, H);
          for (int64_t k = 0; k < H; ++k) hb[k] = go[k] * hc[k];
          break;
        }
      }
      std::memcpy(y_row(step_of(s, b), b), hb, sizeof(T) * size_t(H));
    }
  }
  std::memcpy(p.Yh + d * B * H, h.data(), sizeof(T) * size_t(B * H));
  if (p.Yc) std::memcpy(p.Yc + d * B * H, cs.data(), sizeof(T) * size_t(B * H));
}

Config read_config(Cell cell, const KernelContext& ctx, const Tensor& x,
                   const std::vector<const Tensor*>& slot) {
  const Attrs& a = ctx.attrs;
  Config c;
  c.cell = cell;
  c.S = x.shape()[0];
  c.B = x.shape()[1];
  c.I = x.shape()[2];
  c.H = a.get_int("hidden_size");
  c.G = gate_count(cell);
  const std::string& dir = a.get_string("direction");
  c.dirs = dir == "bidirectional" ? 2 : 1;
  c.reverse_only = dir == "reverse";
  c.lbr = cell == Cell::gru && a.get_bool("linear_before_reset");
  c.input_forget = cell == Cell::lstm && a.get_bool("input_forget");
  c.clip = a.get_float("clip");
  std::vector<std::string> names = split_names(a.get_string("activations"));
  FloatList alpha = a.get_floats("activation_alpha"), beta = a.get_floats("activation_beta");
  for (size_t i = 0; i < names.size(); ++i) {
    const ActName* n = find_act(names[i]);
    if (!n) fail<ValueError>(ctx.op.name, "expected a known activation, got '", names[i], "'");
    c.acts.push_back(
        {n->act, i < alpha.size() ? alpha[i] : n->alpha, i < beta.size() ? beta[i] : n->beta});
  }
  c.lens.assign(size_t(c.B), c.S);
  if (const Tensor* lens = slot[kLens]) {
    std::vector<double> v = lens->to_doubles();
    for (int64_t b = 0; b < c.B; ++b) {
      int64_t n = int64_t(v[size_t(b)]);
      if (n < 0 || n > c.S)
        fail<ValueError>(ctx.op.name, "expected sequence_lens in [0, ", c.S, "], got ", n,
                         " for batch row ", b);
      c.lens[size_t(b)] = n;
    }
  }
  return c;
}

template <class T>
void recurrent_kernel(Cell cell, const KernelContext& ctx, std::span<const Tensor> in,
                      std::span<Tensor> out) {
  const IntList& slots = ctx.attrs.get_ints("slots");
  std::vector<const Tensor*> slot(kSlots, nullptr);
  for (size_t i = 0; i < in.size(); ++i) slot[size_t(slots[i])] = &in[i];
  Config c = read_config(cell, ctx, in[0], slot);
  auto ptr = [&](Slot s) { return slot[s] ? slot[s]->data_as<const T>() : nullptr; };
  Ptrs<T> p;
  p.X = ptr(kX);
  p.W = ptr(kW);
  p.R = ptr(kR);
  p.B = ptr(kB);
  p.h0 = ptr(kH0);
  p.c0 = ptr(kC0);
  p.P = ptr(kP);
  p.Y = out[0].data_as<T>();
  p.Yh = out[1].data_as<T>();
  p.Yc = out.size() > 2 ? out[2].data_as<T>() : nullptr;
  // Rows past their sequence length keep zeros.
  if (std::any_of(c.lens.begin(), c.lens.end(), [&](int64_t n) { return n < c.S; }))
    std::memset(p.Y, 0, out[0].nbytes());
  // The two directions of a small bidirectional layer run on two threads (each keeps its
  // BLAS calls on its own thread); large ones leave the threads to BLAS.
  bool small = c.B * c.G * c.H * c.H < (1 << 20);
  if (c.dirs == 2 && small && parallel_threads() > 1) {
    parallel_for(2, 1, [&](int64_t d0, int64_t d1) {
      for (int64_t d = d0; d < d1; ++d) run_direction(c, d, p);
    });
    return;
  }
  for (int64_t d = 0; d < c.dirs; ++d) run_direction(c, d, p);
}

// ---- the ops ----------------------------------------------------------------------------
// Inputs are ONNX's present inputs (X W R [B] [sequence_lens] [initial_h] [initial_c] [P]);
// 'slots' lists the ONNX index of each. 'activations' names every function of every
// direction (comma-separated), with one alpha and beta per function.

std::vector<TensorType> infer_recurrent(Cell cell, const InferContext& ctx) {
  const Attrs& a = ctx.attrs();
  const IntList& slots = a.get_ints("slots");
  if (slots.size() != ctx.num_inputs() || slots.size() < 3 || slots[0] != kX || slots[1] != kW ||
      slots[2] != kR)
    ctx.fail("expected 'slots' naming the ONNX slot of each of the ", ctx.num_inputs(),
             " inputs (X, W, R first), got ", ints_str(slots));
  for (size_t i = 1; i < slots.size(); ++i)
    if (slots[i] <= slots[i - 1] || slots[i] >= kSlots || (cell != Cell::lstm && slots[i] >= kC0))
      ctx.fail("expected increasing ONNX input slots, got ", ints_str(slots));
  DType dt = ctx.dtype(0);
  if (dt != DType::f32 && dt != DType::f64)
    ctx.fail_type("expected X of dtype f32 or f64, got ", ctx.input(0).str());
  if (ctx.rank(0) != 3)
    ctx.fail("expected X of rank 3 [seq, batch, input], got ", ctx.input(0).str());
  int64_t H = a.get_int("hidden_size");
  if (H < 1) ctx.fail("expected hidden_size >= 1, got ", H);
  int64_t dirs = a.get_string("direction") == "bidirectional" ? 2 : 1;
  int64_t GH = gate_count(cell) * H;
  const Dim &S = ctx.shape(0)[0], &B = ctx.shape(0)[1], &I = ctx.shape(0)[2];
  // Expected shapes per slot, as far as they are known.
  auto check = [&](size_t i, const Shape& want, const char* what) {
    const Shape& got = ctx.shape(i);
    bool ok = got.size() == want.size();
    for (size_t k = 0; ok && k < want.size(); ++k)
      ok = !(want[k].is_static() && got[k].is_static() && want[k].value() != got[k].value());
    if (!ok)
      ctx.fail("expected ", what, " of shape ", shape_str(want), ", got ", ctx.input(i).str());
  };
  for (size_t i = 1; i < slots.size(); ++i) {
    if (slots[i] == kLens) {
      if (ctx.dtype(i) != DType::i32 && ctx.dtype(i) != DType::i64)
        ctx.fail_type("expected sequence_lens of dtype i32, got ", ctx.input(i).str());
      check(i, {B}, "sequence_lens");
      continue;
    }
    if (ctx.dtype(i) != dt)
      ctx.fail_type("expected input ", i, " of dtype ", dtype_name(dt), " like X, got ",
                    ctx.input(i).str());
    switch (slots[i]) {
      case kW:
        check(i, {Dim(dirs), Dim(GH), I}, "W");
        break;
      case kR:
        check(i, {Dim(dirs), Dim(GH), Dim(H)}, "R");
        break;
      case kB:
        check(i, {Dim(dirs), Dim(2 * GH)}, "B");
        break;
      case kH0:
      case kC0:
        check(i, {Dim(dirs), B, Dim(H)}, "initial_h / initial_c");
        break;
      case kP:
        check(i, {Dim(dirs), Dim(3 * H)}, "P");
        break;
      default:
        break;
    }
  }
  size_t per_dir = cell == Cell::rnn ? 1 : cell == Cell::gru ? 2 : 3;
  std::vector<std::string> names = split_names(a.get_string("activations"));
  if (names.size() != per_dir * size_t(dirs))
    ctx.fail("expected ", per_dir * size_t(dirs), " activations, got '",
             a.get_string("activations"), "'");
  for (const auto& n : names)
    if (!find_act(n)) ctx.fail("expected a known activation, got '", n, "'");
  std::vector<TensorType> out{{dt, {S, Dim(dirs), B, Dim(H)}}, {dt, {Dim(dirs), B, Dim(H)}}};
  if (cell == Cell::lstm) out.push_back(out[1]);
  return out;
}

void add_recurrent_op(Cell cell, const char* name, const char* doc) {
  OpDef d;
  d.name = name;
  d.arity(3, cell == Cell::lstm ? 8 : 6)
      .attr("hidden_size", AttrKind::Int)
      .attr("direction", AttrKind::String, AttrValue("forward"),
            {"forward", "reverse", "bidirectional"})
      .attr("activations", AttrKind::String)
      .attr("activation_alpha", AttrKind::Floats, FloatList{})
      .attr("activation_beta", AttrKind::Floats, FloatList{})
      .attr("clip", AttrKind::Float, AttrValue(0.0))
      .attr("slots", AttrKind::Ints);
  if (cell == Cell::gru) d.attr("linear_before_reset", AttrKind::Bool, AttrValue(false));
  if (cell == Cell::lstm) d.attr("input_forget", AttrKind::Bool, AttrValue(false));
  d.doc = doc;
  d.infer = [cell](const InferContext& ctx) { return infer_recurrent(cell, ctx); };
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add(
      name, DeviceKind::cpu,
      [cell](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        if (in[0].dtype() == DType::f64)
          recurrent_kernel<double>(cell, ctx, in, out);
        else
          recurrent_kernel<float>(cell, ctx, in, out);
      },
      [](const KernelQuery& q) {
        return q.inputs[0].dtype == DType::f32 || q.inputs[0].dtype == DType::f64;
      });
}

}  // namespace

void register_rnn_onnx_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    add_recurrent_op(Cell::rnn, "onnx.rnn",
                     "ONNX RNN (layout 0): H = f(X W^T + H R^T + Wb + Rb). Outputs Y "
                     "[seq, dirs, batch, hidden] and Y_h.");
    add_recurrent_op(Cell::gru, "onnx.gru",
                     "ONNX GRU (layout 0, gates z r h, linear_before_reset). Outputs Y and Y_h.");
    add_recurrent_op(Cell::lstm, "onnx.lstm",
                     "ONNX LSTM (layout 0, gates i o f c, peepholes P, input_forget). Outputs Y, "
                     "Y_h and Y_c.");
  });
}

}  // namespace rlx::onnx_import
