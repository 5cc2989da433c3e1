// ONNX-only ops: onnx.stft (run-time frame sizes), onnx.non_max_suppression,
// onnx.tfidf_vectorizer, with CPU kernels.
#include "frontend/onnx/ops/misc.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <mutex>
#include <numbers>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "rlx/kernel.h"
#include "rlx/op.h"
#include "rlx/parallel.h"

namespace rlx::onnx_import {

namespace {

using cd = std::complex<double>;

bool is_f32_or_f64(DType t) { return t == DType::f32 || t == DType::f64; }

// ---- the DFT of onnx.stft -------------------------------------------------------------
// Computed in double: a radix-2 FFT for powers of two, Bluestein's chirp-z (three
// power-of-two FFTs) for other lengths. (ONNX's DFT, and STFTs of constant frame sizes,
// run as the core FFT ops.)

class Fft {
 public:
  // The transform of n points; sign -1 forward, +1 inverse (unscaled).
  Fft(int64_t n, int sign) : n_(n) {
    if (n <= 1) return;
    if ((n & (n - 1)) == 0) {
      tw_.resize(size_t(n / 2));
      for (int64_t k = 0; k < n / 2; ++k) tw_[size_t(k)] = root(k, n, sign);
      return;
    }
    // Bluestein: X[k] = conj(c_k) * sum_j (x_j conj(c_j)) c_{k-j}, c_j = exp(-sign i pi j^2/n).
    m_ = 1;
    while (m_ < 2 * n - 1) m_ <<= 1;
    sub_ = std::make_unique<Fft>(m_, -1);
    inv_ = std::make_unique<Fft>(m_, 1);
    chirp_.resize(size_t(n));
    for (int64_t j = 0; j < n; ++j) {
      // j^2 mod 2n keeps the angle small (exact in integers).
      int64_t q = (j * j) % (2 * n);
      double a = std::numbers::pi * double(q) / double(n);
      chirp_[size_t(j)] = cd(std::cos(a), -sign * std::sin(a));
    }
    kernel_.assign(size_t(m_), cd(0));
    for (int64_t j = 0; j < n; ++j) {
      kernel_[size_t(j)] = chirp_[size_t(j)];
      if (j) kernel_[size_t(m_ - j)] = chirp_[size_t(j)];
    }
    sub_->run(kernel_.data(), nullptr);
  }

  // In place; `work` holds 2 * m points for Bluestein (unused otherwise).
  void run(cd* a, cd* work) const {
    if (n_ <= 1) return;
    if (!sub_) return radix2(a);
    cd* b = work;
    for (int64_t j = 0; j < m_; ++j) b[j] = j < n_ ? a[j] * std::conj(chirp_[size_t(j)]) : cd(0);
    sub_->run(b, nullptr);
    for (int64_t j = 0; j < m_; ++j) b[j] *= kernel_[size_t(j)];
    inv_->run(b, nullptr);
    double s = 1.0 / double(m_);
    for (int64_t k = 0; k < n_; ++k) a[k] = b[k] * s * std::conj(chirp_[size_t(k)]);
  }
  int64_t work_size() const { return sub_ ? m_ : 0; }

 private:
  static cd root(int64_t k, int64_t n, int sign) {
    double a = 2.0 * std::numbers::pi * double(k) / double(n);
    return cd(std::cos(a), sign * std::sin(a));
  }
  void radix2(cd* a) const {
    const int64_t n = n_;
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      int64_t step = n / len, half = len / 2;
      for (int64_t i = 0; i < n; i += len)
        for (int64_t k = 0; k < half; ++k) {
          cd u = a[i + k], v = a[i + k + half] * tw_[size_t(k * step)];
          a[i + k] = u + v;
          a[i + k + half] = u - v;
        }
    }
  }

  int64_t n_, m_ = 0;
  std::vector<cd> tw_, chirp_, kernel_;
  std::unique_ptr<Fft> sub_, inv_;
};

// ---- onnx.stft ----------------------------------------------------------------------------
// For frame_step / frame_length known only at run time (the converter uses the core stft
// op when they are constants): signal [B, L, 1 or 2], frame_step, optional
// window [frame_length], optional frame_length -> [B, frames, bins, 2].

std::vector<TensorType> infer_stft(const InferContext& ctx) {
  if (!is_f32_or_f64(ctx.dtype(0)))
    ctx.fail_type("expected a signal of dtype f32 or f64, got ", ctx.input(0).str());
  if (ctx.rank(0) != 3 || !(ctx.shape(0)[2].is(1) || ctx.shape(0)[2].is(2)))
    ctx.fail("expected a signal [batch, length, 1 or 2], got ", ctx.input(0).str());
  bool window = ctx.attrs().get_bool("has_window");
  if (ctx.num_inputs() != size_t(window ? 3 : 2) + (ctx.attrs().get_bool("has_length") ? 1 : 0))
    ctx.fail("expected inputs matching has_window / has_length, got ", ctx.num_inputs());
  if (window && ctx.dtype(2) != ctx.dtype(0))
    ctx.fail_type("expected a window of the signal's dtype, got ", ctx.input(2).str());
  return {{ctx.dtype(0), {ctx.shape(0)[0], Dim::unknown(), Dim::unknown(), Dim(2)}}};
}

template <class T>
void stft_frames(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  bool has_window = a.get_bool("has_window"), onesided = a.get_bool("onesided");
  const Tensor& x = in[0];
  int64_t step = int64_t(in[1].to_doubles().at(0));
  const Tensor* window = has_window ? &in[2] : nullptr;
  int64_t frame = a.get_bool("has_length") ? int64_t(in.back().to_doubles().at(0))
                  : window                 ? window->numel()
                                           : -1;
  int64_t B = x.shape()[0], L = x.shape()[1], c = x.shape()[2];
  if (step < 1 || frame < 1 || frame > L || (window && window->numel() != frame))
    fail<ValueError>("onnx.stft", "expected frame_step >= 1, 1 <= frame_length <= ", L,
                     " and a window of frame_length values, got step ", step, ", length ", frame);
  int64_t frames = (L - frame) / step + 1, bins = onesided ? frame / 2 + 1 : frame;
  out[0] = Tensor::empty(x.dtype(), {B, frames, bins, 2});
  const T* xp = x.data_as<const T>();
  const T* wp = window ? window->data_as<const T>() : nullptr;
  T* yp = out[0].data_as<T>();
  Fft fft(frame, -1);
  int64_t lines = B * frames;
  // Per chunk: its own buffers; lines of under 4096 values in all run inline.
  parallel_for(lines, std::max<int64_t>(1, 4096 / std::max<int64_t>(frame, 1)),
               [&](int64_t l0, int64_t l1) {
                 std::vector<cd> buf(static_cast<size_t>(frame)),
                     work(static_cast<size_t>(2 * fft.work_size()));
                 for (int64_t l = l0; l < l1; ++l) {
                   int64_t b = l / frames, f = l % frames;
                   for (int64_t k = 0; k < frame; ++k) {
                     const T* p = xp + (b * L + f * step + k) * c;
                     double w = wp ? double(wp[k]) : 1.0;
                     buf[size_t(k)] = cd(double(p[0]) * w, c == 2 ? double(p[1]) * w : 0.0);
                   }
                   fft.run(buf.data(), work.data());
                   T* q = yp + (b * frames + f) * bins * 2;
                   for (int64_t k = 0; k < bins; ++k) {
                     q[2 * k] = T(buf[size_t(k)].real());
                     q[2 * k + 1] = T(buf[size_t(k)].imag());
                   }
                 }
               });
}

void register_stft() {
  OpDef d;
  d.name = "onnx.stft";
  d.arity(2, 4)
      .attr("onesided", AttrKind::Bool, AttrValue(true))
      .attr("has_window", AttrKind::Bool, AttrValue(false))
      .attr("has_length", AttrKind::Bool, AttrValue(false));
  d.doc =
      "ONNX STFT with run-time frame parameters: signal [B, L, 1 or 2], frame_step, "
      "[window], [frame_length] -> [B, frames, bins, 2].";
  d.infer = infer_stft;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add(
      "onnx.stft", DeviceKind::cpu,
      [](const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
        if (in[0].dtype() == DType::f64)
          stft_frames<double>(ctx, in, out);
        else
          stft_frames<float>(ctx, in, out);
      },
      {}, KernelFlags{.makes_outputs = true});
}

// ---- onnx.cosine_window, onnx.mel_weight_matrix -------------------------------------------
// Tensors of a size given by input values (often graph inputs).

int64_t int_scalar(const Tensor& t, const char* op, const char* what) {
  if (t.numel() != 1)
    fail<ValueError>(op, "expected ", what, " to hold one value, got ", t.type().str());
  return int64_t(t.to_doubles()[0]);
}

void cosine_window_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                          std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  int64_t size = int_scalar(in[0], "onnx.cosine_window", "size");
  if (size < 0) fail<ValueError>("onnx.cosine_window", "expected size >= 0, got ", size);
  std::vector<double> w = cosine_window(size, a.get_bool("periodic"), a.get_float("a0"),
                                        a.get_float("a1"), a.get_float("a2"));
  out[0] = Tensor::from_doubles(a.get_dtype("dtype"), {size}, w);
}

void mel_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const char* op = "onnx.mel_weight_matrix";
  int64_t bins = int_scalar(in[0], op, "num_mel_bins"), dft = int_scalar(in[1], op, "dft_length"),
          rate = int_scalar(in[2], op, "sample_rate");
  if (in[3].numel() != 1 || in[4].numel() != 1)
    fail<ValueError>(op, "expected lower_edge_hertz and upper_edge_hertz to hold one value each");
  std::vector<double> m =
      mel_weight_matrix(bins, dft, rate, in[3].to_doubles()[0], in[4].to_doubles()[0]);
  out[0] = Tensor::from_doubles(ctx.attrs.get_dtype("dtype"), {dft / 2 + 1, bins}, m);
}

void register_windows() {
  OpDef w;
  w.name = "onnx.cosine_window";
  w.traits = Trait::nondifferentiable;
  w.arity(1)
      .attr("a0", AttrKind::Float)
      .attr("a1", AttrKind::Float)
      .attr("a2", AttrKind::Float, AttrValue(0.0))
      .attr("periodic", AttrKind::Bool, AttrValue(true))
      .attr("dtype", AttrKind::DType, AttrValue(DType::f32));
  w.doc = "a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n < size (N = size or size - 1).";
  w.infer = [](const InferContext& ctx) {
    if (!is_integer(ctx.dtype(0)) || ctx.rank(0) > 1)
      ctx.fail_type("expected an integer size, got ", ctx.input(0).str());
    return std::vector<TensorType>{{ctx.attrs().get_dtype("dtype"), {Dim::unknown()}}};
  };
  OpRegistry::global().add(std::move(w));
  KernelRegistry::global().add("onnx.cosine_window", DeviceKind::cpu, cosine_window_kernel, {},
                               KernelFlags{.makes_outputs = true});

  OpDef m;
  m.name = "onnx.mel_weight_matrix";
  m.traits = Trait::nondifferentiable;
  m.arity(5).attr("dtype", AttrKind::DType, AttrValue(DType::f32));
  m.doc =
      "ONNX MelWeightMatrix: num_mel_bins, dft_length, sample_rate, lower_edge_hertz, "
      "upper_edge_hertz -> [dft_length/2 + 1, num_mel_bins] triangular mel filters.";
  m.infer = [](const InferContext& ctx) {
    for (size_t i = 0; i < 5; ++i)
      if (ctx.rank(i) > 1)
        ctx.fail("expected input ", i, " to be a scalar, got ", ctx.input(i).str());
    return std::vector<TensorType>{
        {ctx.attrs().get_dtype("dtype"), {Dim::unknown(), Dim::unknown()}}};
  };
  OpRegistry::global().add(std::move(m));
  KernelRegistry::global().add("onnx.mel_weight_matrix", DeviceKind::cpu, mel_kernel, {},
                               KernelFlags{.makes_outputs = true});
}

// ---- onnx.non_max_suppression -----------------------------------------------------------
// boxes [B, N, 4], scores [B, C, N], then optional max_output_boxes_per_class (i64, one
// value), iou_threshold, score_threshold (one value each) -> i64 [selected, 3] of (batch,
// class, box), greedy per (batch, class) in descending score order (ties: lower index
// first); a box is dropped when its IoU with a kept one exceeds iou_threshold, or when its
// score is not above score_threshold.

struct Box {
  float y1, x1, y2, x2;
};

Box read_box(const float* p, bool center) {
  if (center) {
    float xc = p[0], yc = p[1], w = p[2], h = p[3];
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}

bool suppresses(const Box& a, const Box& b, float threshold) {
  float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  float ih = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  float iw = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  float inter = ih * iw;
  return inter / (area_a + area_b - inter) > threshold;
}

double scalar_of(const Tensor& t) {
  if (t.numel() < 1) return 0.0;
  return t.to_doubles()[0];
}

// max_output_boxes_per_class read as an integer: exporters write INT64_MAX for "no limit"
// (torchvision's batched_nms), which through a double becomes 2^63, past int64's range.
int64_t count_of(const Tensor& t) {
  if (t.numel() < 1) return 0;
  if (t.dtype() == DType::i64) return t.contiguous().to_vector<int64_t>()[0];
  double v = t.to_doubles()[0];
  return v >= 0x1p63 ? INT64_MAX : int64_t(v);
}

void nms_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor &boxes = in[0], &scores = in[1];
  bool center = ctx.attrs.get_int("center_point_box") != 0;
  int64_t max_out = in.size() > 2 ? count_of(in[2]) : 0;
  float iou = in.size() > 3 ? float(scalar_of(in[3])) : 0.0f;
  bool has_score = in.size() > 4;
  float score_min = has_score ? float(scalar_of(in[4])) : 0.0f;
  int64_t B = scores.shape()[0], C = scores.shape()[1], N = scores.shape()[2];
  const float* bp = boxes.data_as<const float>();
  const float* sp = scores.data_as<const float>();
  std::vector<int64_t> sel;
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < B && max_out > 0; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const float* s = sp + (b * C + c) * N;
      order.clear();
      for (int64_t i = 0; i < N; ++i)
        if (!has_score || s[i] > score_min) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      kept.clear();
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_out) break;
        Box bx = read_box(bp + (b * N + i) * 4, center);
        bool drop = std::any_of(kept.begin(), kept.end(),
                                [&](const Box& k) { return suppresses(k, bx, iou); });
        if (drop) continue;
        kept.push_back(bx);
        sel.insert(sel.end(), {b, c, i});
      }
    }
  int64_t count = int64_t(sel.size() / 3);
  out[0] = Tensor::from_data(DType::i64, {count, 3}, sel.data());
}

std::vector<TensorType> infer_nms(const InferContext& ctx) {
  if (ctx.dtype(0) != DType::f32 || ctx.dtype(1) != DType::f32)
    ctx.fail_type("expected f32 boxes and scores, got ", ctx.input(0).str(), " and ",
                  ctx.input(1).str());
  if (ctx.rank(0) != 3 || ctx.rank(1) != 3 || !ctx.shape(0)[2].is(4))
    ctx.fail("expected boxes [B, N, 4] and scores [B, C, N], got ", ctx.input(0).str(), " and ",
             ctx.input(1).str());
  for (size_t i = 2; i < ctx.num_inputs(); ++i) {
    auto n = ctx.input(i).numel();
    if (ctx.rank(i) > 1 || (n && *n != 1))
      ctx.fail("expected input ", i, " to hold one value, got ", ctx.input(i).str());
  }
  return {{DType::i64, {Dim::unknown(), Dim(3)}}};
}

void register_nms() {
  OpDef d;
  d.name = "onnx.non_max_suppression";
  d.traits = Trait::nondifferentiable;
  d.arity(2, 5).attr("center_point_box", AttrKind::Int, AttrValue(0));
  d.doc =
      "ONNX NonMaxSuppression: boxes [B, N, 4], scores [B, C, N], optional "
      "max_output_boxes_per_class, iou_threshold, score_threshold -> i64 [selected, 3].";
  d.infer = infer_nms;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.non_max_suppression", DeviceKind::cpu, nms_kernel, {},
                               KernelFlags{.makes_outputs = true});
}

// ---- onnx.tfidf_vectorizer --------------------------------------------------------------
// ONNX TfIdfVectorizer over integer or string tokens X [N] or [B, N] -> f32 [num_outputs] or
// [B, num_outputs]. String tokens are coded by their index in `vocabulary` (the distinct
// pool strings, which pool_int64s then holds as codes; a token outside it codes as -1 and
// matches nothing). For each start position the n-grams of length min..max with gaps of
// 0..max_skip_count tokens between items are looked up in the pool (a unigram counts once,
// whatever the gap); counts become TF, IDF (weight where seen) or TFIDF (count * weight).

struct Pool {
  std::vector<std::map<std::vector<int64_t>, int64_t>> grams;  // per length-1: gram -> output
};

Pool read_pool(const Attrs& a) {
  const IntList &counts = a.get_ints("ngram_counts"), &indexes = a.get_ints("ngram_indexes"),
                &pool = a.get_ints("pool_int64s");
  Pool p;
  size_t next = 0;
  for (size_t n = 0; n < counts.size(); ++n) {
    size_t begin = size_t(counts[n]);
    size_t end = n + 1 < counts.size() ? size_t(counts[n + 1]) : pool.size();
    p.grams.emplace_back();
    for (size_t i = begin; i + n < end; i += n + 1, ++next)
      p.grams.back()[std::vector<int64_t>(pool.begin() + std::ptrdiff_t(i),
                                          pool.begin() + std::ptrdiff_t(i + n + 1))] =
          indexes[next];
  }
  return p;
}

std::vector<TensorType> infer_tfidf(const InferContext& ctx) {
  const Attrs& a = ctx.attrs();
  DType t = ctx.dtype(0);
  if (t != DType::i32 && t != DType::i64 && t != DType::string)
    ctx.fail_type("expected integer or string tokens (i32, i64 or string), got ",
                  ctx.input(0).str());
  if (t == DType::string && (!a.has("vocabulary") || a.get_tensor("vocabulary").dtype() != t))
    ctx.fail_type("expected a string vocabulary attribute for string tokens");
  if (ctx.rank(0) != 1 && ctx.rank(0) != 2)
    ctx.fail("expected X of rank 1 or 2, got ", ctx.input(0).str());
  const IntList &counts = a.get_ints("ngram_counts"), &indexes = a.get_ints("ngram_indexes");
  const IntList& pool = a.get_ints("pool_int64s");
  int64_t lo = a.get_int("min_gram_length"), hi = a.get_int("max_gram_length");
  if (lo < 1 || hi < lo)
    ctx.fail("expected 1 <= min_gram_length <= max_gram_length, got ", lo, ", ", hi);
  if (a.get_int("max_skip_count") < 0) ctx.fail("expected max_skip_count >= 0");
  size_t grams = 0;
  for (size_t n = 0; n < counts.size(); ++n) {
    int64_t begin = counts[n], end = n + 1 < counts.size() ? counts[n + 1] : int64_t(pool.size());
    if (begin < 0 || end < begin || end > int64_t(pool.size()) || (end - begin) % int64_t(n + 1))
      ctx.fail("expected ngram_counts that split pool_int64s into whole n-grams, got ",
               ints_str(counts));
    grams += size_t((end - begin) / int64_t(n + 1));
  }
  if (indexes.size() != grams)
    ctx.fail("expected ", grams, " ngram_indexes (one per n-gram of the pool), got ",
             indexes.size());
  const FloatList w = a.get_floats("weights");
  if (!w.empty() && w.size() != grams) ctx.fail("expected ", grams, " weights, got ", w.size());
  int64_t width = 0;
  for (int64_t i : indexes) {
    if (i < 0) ctx.fail("expected ngram_indexes >= 0, got ", i);
    width = std::max(width, i + 1);
  }
  Shape out{Dim(width)};
  if (ctx.rank(0) == 2) out.insert(out.begin(), ctx.shape(0)[0]);
  return {{DType::f32, out}};
}

void tfidf_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  Pool pool = read_pool(a);
  int64_t lo = a.get_int("min_gram_length"), hi = a.get_int("max_gram_length");
  int64_t skips = a.get_int("max_skip_count");
  const std::string& mode = a.get_string("mode");
  FloatList weights = a.get_floats("weights");
  // Output index -> weight (the pool's order maps n-gram j to ngram_indexes[j]).
  const IntList& indexes = a.get_ints("ngram_indexes");
  int64_t width = out[0].shape().back();
  std::vector<double> wt(size_t(width), 1.0);
  if (!weights.empty())
    for (size_t j = 0; j < indexes.size(); ++j) wt[size_t(indexes[j])] = weights[j];
  std::vector<double> x;
  if (is_string(in[0].dtype())) {
    const Literal& vocab = a.get_tensor("vocabulary");
    std::unordered_map<std::string_view, double> code;
    for (int64_t i = 0; i < vocab.numel(); ++i) code.emplace(vocab.string_at(i), double(i));
    for (const std::string& s : in[0].to_strings()) {
      auto it = code.find(s);
      x.push_back(it == code.end() ? -1.0 : it->second);
    }
  } else {
    x = in[0].to_doubles();
  }
  int64_t rows = in[0].rank() == 2 ? in[0].shape()[0] : 1, len = in[0].shape().back();
  float* y = out[0].data_as<float>();
  std::fill(y, y + out[0].numel(), 0.0f);
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> count(size_t(width), 0.0);
    const double* row = x.data() + r * len;
    for (int64_t s = 0; s < len; ++s)
      for (int64_t skip = 0; skip <= skips; ++skip) {
        gram.clear();
        for (int64_t n = 1; n <= hi && n <= int64_t(pool.grams.size()); ++n) {
          int64_t pos = s + (n - 1) * (skip + 1);
          if (pos >= len) break;
          gram.push_back(int64_t(row[pos]));
          if (n < lo || (n == 1 && skip > 0)) continue;
          auto it = pool.grams[size_t(n - 1)].find(gram);
          if (it != pool.grams[size_t(n - 1)].end()) count[size_t(it->second)] += 1;
        }
      }
    for (int64_t j = 0; j < width; ++j) {
      double c = count[size_t(j)];
      double v = mode == "TF"    ? c
                 : mode == "IDF" ? (c > 0 ? wt[size_t(j)] : 0.0)
                                 : c * wt[size_t(j)];
      y[r * width + j] = float(v);
    }
  }
}

void register_tfidf() {
  OpDef d;
  d.name = "onnx.tfidf_vectorizer";
  d.traits = Trait::nondifferentiable;
  d.arity(1)
      .attr("min_gram_length", AttrKind::Int)
      .attr("max_gram_length", AttrKind::Int)
      .attr("max_skip_count", AttrKind::Int)
      .attr("mode", AttrKind::String, std::nullopt, {"TF", "IDF", "TFIDF"})
      .attr("ngram_counts", AttrKind::Ints)
      .attr("ngram_indexes", AttrKind::Ints)
      .attr("pool_int64s", AttrKind::Ints)
      .attr("weights", AttrKind::Floats, FloatList{})
      .attr("vocabulary", AttrKind::Tensor, Literal::from_strings({}, {0}));
  d.doc =
      "ONNX TfIdfVectorizer over integer or string tokens: n-gram counts (TF, IDF or TFIDF) "
      "as f32.";
  d.infer = infer_tfidf;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.tfidf_vectorizer", DeviceKind::cpu, tfidf_kernel);
}

}  // namespace

std::vector<double> cosine_window(int64_t size, bool periodic, double a0, double a1, double a2) {
  double den = double(periodic ? size : size - 1);
  std::vector<double> w(static_cast<size_t>(std::max<int64_t>(size, 0)));
  for (int64_t n = 0; n < size; ++n) {
    double t = 2.0 * std::numbers::pi * double(n) / den;
    w[size_t(n)] = a0 - a1 * std::cos(t) + a2 * std::cos(2.0 * t);
  }
  return w;
}

// As the ONNX spec's reference: band edges are the spectrogram bins
// floor((dft_length + 1) * hz / sample_rate) of num_mel_bins + 2 points equally spaced in mel.
std::vector<double> mel_weight_matrix(int64_t bins, int64_t dft, int64_t rate, double lo_hz,
                                      double hi_hz) {
  const char* op = "onnx.mel_weight_matrix";
  if (bins < 1 || dft < 1 || rate < 1)
    fail<ValueError>(op, "expected num_mel_bins, dft_length and sample_rate >= 1, got ", bins, ", ",
                     dft, ", ", rate);
  int64_t spec = dft / 2 + 1;
  auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  double m0 = mel(lo_hz), step = (mel(hi_hz) - m0) / double(bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    double hz = 700.0 * (std::pow(10.0, (double(i) * step + m0) / 2595.0) - 1.0);
    edge[size_t(i)] = int64_t(std::floor(double(dft + 1) * hz / double(rate)));
  }
  std::vector<double> out(static_cast<size_t>(spec * bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    if (j < 0 || j >= spec)
      fail<ValueError>(op, "expected mel band edges within the ", spec, " spectrum bins, got bin ",
                       j);
    return out[size_t(j * bins + i)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    int64_t l = edge[size_t(i)], c = edge[size_t(i + 1)], h = edge[size_t(i + 2)];
    if (c == l)
      at(c, i) = 1.0;
    else
      for (int64_t j = l; j <= c; ++j) at(j, i) = double(j - l) / double(c - l);
    for (int64_t j = c; j < h; ++j) at(j, i) = double(h - j) / double(h - c);
  }
  return out;
}

void register_misc_onnx_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_stft();
    register_windows();
    register_nms();
    register_tfidf();
  });
}

}  // namespace rlx::onnx_import
