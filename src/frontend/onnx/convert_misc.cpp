// ONNX converters: signal processing (DFT, STFT, window functions, MelWeightMatrix),
// detection (NonMaxSuppression), text (TfIdfVectorizer), random draws and the training
// optimizers of ai.onnx.preview.training. Windows and mel matrices depend only on constant
// sizes, so they are computed here; DFT and STFT become the core FFT / stft ops; NMS, TfIdf
// and an STFT with run-time frame sizes run as onnx.* ops (ops/misc.cpp).
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <numbers>

#include "frontend/onnx/context.h"
#include "frontend/onnx/ops/misc.h"
#include "frontend/onnx/ops/text.h"

namespace rlx::onnx_import {

namespace {

DType output_datatype(const NodeContext& ctx, int64_t def) {
  int64_t code = ctx.attr_int("output_datatype", def);
  auto t = dtype_from_onnx(int32_t(code));
  if (!t || !is_float(*t)) ctx.fail_type("expected a float output_datatype, got ", code);
  return *t;
}

int64_t one_int(const NodeContext& ctx, size_t i, const char* what) {
  auto v = ctx.ints_input(i);
  if (!v || v->size() != 1) ctx.fail("expected ", what, " to hold one integer");
  return (*v)[0];
}

// ---- windows, mel matrix -----------------------------------------------------------------
// Constants when their sizes are; onnx.cosine_window / onnx.mel_weight_matrix otherwise.

bool all_constant(const NodeContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !ctx.constant_input(i)) return false;
  return true;
}

std::vector<Value> cosine_window_op(NodeContext& ctx, double a0, double a1, double a2) {
  DType dt = output_datatype(ctx, 1);
  bool periodic = ctx.attr_int("periodic", 1) != 0;
  if (!all_constant(ctx))
    return {
        ctx.apply1("onnx.cosine_window", {ctx.input(0)},
                   {{"a0", a0}, {"a1", a1}, {"a2", a2}, {"periodic", periodic}, {"dtype", dt}})};
  int64_t size = one_int(ctx, 0, "size");
  if (size < 0) ctx.fail("expected size >= 0, got ", size);
  return {
      ctx.constant(Tensor::from_doubles(dt, {size}, cosine_window(size, periodic, a0, a1, a2)))};
}

std::vector<Value> mel_weight_matrix_op(NodeContext& ctx) {
  DType dt = output_datatype(ctx, 1);
  if (!all_constant(ctx)) {
    std::vector<Value> in;
    for (size_t i = 0; i < 5; ++i) in.push_back(ctx.input(i));
    return {ctx.apply1("onnx.mel_weight_matrix", in, {{"dtype", dt}})};
  }
  int64_t bins = one_int(ctx, 0, "num_mel_bins"), dft = one_int(ctx, 1, "dft_length"),
          rate = one_int(ctx, 2, "sample_rate");
  auto lo = ctx.floats_input(3), hi = ctx.floats_input(4);
  if (!lo || !hi || lo->size() != 1 || hi->size() != 1)
    ctx.fail("expected lower_edge_hertz and upper_edge_hertz to hold one value each");
  std::vector<double> m = mel_weight_matrix(bins, dft, rate, (*lo)[0], (*hi)[0]);
  return {ctx.constant(Tensor::from_doubles(dt, {dft / 2 + 1, bins}, m))};
}

// ---- DFT, STFT ---------------------------------------------------------------------------
// Through the core FFT ops (pocketfft on the CPU): ONNX holds complex numbers as (re, im)
// pairs in a last axis of 2 (a real signal has 1 there).

// The pairs [..., 2] of a complex z, cast to dt.
Value as_pairs(NodeContext& ctx, Value z, DType dt) {
  Value re = ctx.apply1("expand_dims", {ctx.apply1("real", {z})}, {{"axes", IntList{-1}}});
  Value im = ctx.apply1("expand_dims", {ctx.apply1("imag", {z})}, {{"axes", IntList{-1}}});
  return ctx.cast(ctx.apply1("concat", {re, im}, {{"axis", -1}}), dt);
}

// x [..., 1 or 2] as a real (f32, or `wide`: f64) or complex value without the last axis.
Value from_pairs(NodeContext& ctx, Value x, bool wide = false) {
  DType dt = x.dtype();
  if (!is_float(dt)) ctx.fail_type("expected a float signal, got ", x.type().str());
  const Dim& last = x.shape().back();
  if (!last.is(1) && !last.is(2))
    ctx.fail("expected a signal [..., 1 or 2] (real, or complex pairs), got ", x.type().str());
  x = ctx.cast(x, dt == DType::f64 || wide ? DType::f64 : DType::f32);
  auto part = [&](int64_t i) {
    Value p = ctx.apply1(
        "slice", {x}, {{"starts", IntList{i}}, {"stops", IntList{i + 1}}, {"axes", IntList{-1}}});
    return ctx.apply1("squeeze", {p}, {{"axes", IntList{-1}}});
  };
  return last.is(1) ? part(0) : ctx.apply1("complex", {part(0), part(1)});
}

// The DFT of `length` points along `axis` of the signal without its pairs axis: rfft for a
// real signal's one-sided forward transform, else fft / ifft (onesided: the first
// length / 2 + 1 frequencies). Computed in f64 (rounded to the signal's dtype after), as
// ONNX's reference does: bins that are exactly 0 stay 0 to 1e-14, not 1e-6 of the range.
Value dft(NodeContext& ctx, Value x, int64_t axis, int64_t length, bool inverse, bool onesided) {
  DType dt = x.dtype();
  Value z = from_pairs(ctx, x, true);
  Attrs a{{"axes", IntList{axis}}, {"n", IntList{length}}};
  if (!is_complex(z.dtype()) && onesided && !inverse)
    return as_pairs(ctx, ctx.apply1("rfft", {z}, a), dt);
  if (!is_complex(z.dtype())) z = ctx.cast(z, complex_of(z.dtype()));
  Value y = ctx.apply1(inverse ? "ifft" : "fft", {z}, a);
  if (onesided)
    y = ctx.apply1(
        "slice", {y},
        {{"starts", IntList{0}}, {"stops", IntList{length / 2 + 1}}, {"axes", IntList{axis}}});
  return as_pairs(ctx, y, dt);
}

std::vector<Value> convert_dft(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t rank = x.rank();
  int64_t axis = ctx.opset() >= 20 ? (ctx.has_input(2) ? one_int(ctx, 2, "axis") : -2)
                                   : ctx.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1)
    ctx.fail("expected a signal axis in [0, ", rank - 2, "] of ", x.type().str());
  int64_t length;
  if (ctx.has_input(1)) {
    length = one_int(ctx, 1, "dft_length");
    if (length < 1) ctx.fail("expected dft_length >= 1, got ", length);
  } else {
    const Dim& d = x.shape()[size_t(axis)];
    if (!d.is_static()) ctx.unsupported("expected a static signal length, got ", x.type().str());
    length = d.value();
  }
  return {
      dft(ctx, x, axis, length, ctx.attr_int("inverse", 0) != 0, ctx.attr_int("onesided", 0) != 0)};
}

// The core stft op (no centering, the window as given) with constant frame sizes; a frame
// step or length known only at run time (the output's shape then depends on data) runs as
// onnx.stft on the host.
std::vector<Value> convert_stft(NodeContext& ctx) {
  Value signal = ctx.input(0);
  if (signal.rank() != 3)
    ctx.fail("expected a signal [batch, length, 1 or 2], got ", signal.type().str());
  bool onesided = ctx.attr_int("onesided", 1) != 0;
  bool runtime = !ctx.constant_input(1) || (ctx.has_input(3) && !ctx.constant_input(3));
  if (runtime || !signal.shape()[1].is_static()) {
    DType dt = signal.dtype();
    std::vector<Value> in{ctx.cast(signal, dt == DType::f64 ? dt : DType::f32), ctx.input(1)};
    if (ctx.has_input(2)) in.push_back(ctx.cast(ctx.input(2), in[0].dtype()));
    if (ctx.has_input(3)) in.push_back(ctx.input(3));
    Value y = ctx.apply1("onnx.stft", in,
                         {{"onesided", onesided},
                          {"has_window", ctx.has_input(2)},
                          {"has_length", ctx.has_input(3)}});
    return {ctx.cast(y, dt)};
  }
  int64_t step = one_int(ctx, 1, "frame_step");
  int64_t frame;
  if (ctx.has_input(3)) {
    frame = one_int(ctx, 3, "frame_length");
  } else if (ctx.has_input(2) && ctx.input(2).rank() == 1 && ctx.input(2).shape()[0].is_static()) {
    frame = ctx.input(2).shape()[0].value();
  } else {
    ctx.fail("expected frame_length or a window of static length");
  }
  const Dim& len = signal.shape()[1];
  if (step < 1 || frame < 1 || frame > len.value())
    ctx.fail("expected frame_step >= 1 and 1 <= frame_length <= ", len.value(), ", got ", step,
             " and ", frame);
  Value z = from_pairs(ctx, signal);  // [batch, length]
  std::vector<Value> in{z};
  if (ctx.has_input(2)) {
    Value w = ctx.input(2);
    if (w.rank() != 1 || !w.shape()[0].is(frame))
      ctx.fail("expected a window of frame_length = ", frame, " values, got ", w.type().str());
    in.push_back(ctx.cast(w, is_complex(z.dtype()) ? real_of(z.dtype()) : z.dtype()));
  }
  Value y = ctx.apply1("stft", in,
                       {{"n_fft", frame},
                        {"hop_length", step},
                        {"center", false},
                        {"onesided", onesided && !is_complex(z.dtype())}});
  y = ctx.apply1("transpose", {y}, {{"perm", IntList{0, 2, 1}}});  // [batch, frames, bins]
  if (onesided && is_complex(z.dtype()))
    y = ctx.apply1(
        "slice", {y},
        {{"starts", IntList{0}}, {"stops", IntList{frame / 2 + 1}}, {"axes", IntList{2}}});
  return {as_pairs(ctx, y, signal.dtype())};
}

// ---- NonMaxSuppression, TfIdfVectorizer ------------------------------------------------

std::vector<Value> convert_nms(NodeContext& ctx) {
  std::vector<Value> in{ctx.cast(ctx.input(0), DType::f32), ctx.cast(ctx.input(1), DType::f32)};
  size_t last = 1;
  for (size_t i = 2; i < std::min<size_t>(ctx.num_inputs(), 5); ++i)
    if (ctx.has_input(i)) last = i;
  for (size_t i = 2; i <= last; ++i) {
    if (ctx.has_input(i))
      in.push_back(ctx.cast(ctx.input(i), i == 2 ? DType::i64 : DType::f32));
    else  // defaults: no boxes per class, IoU threshold 0
      in.push_back(i == 2 ? ctx.ints({0}) : ctx.scalar(DType::f32, 0.0));
  }
  return {ctx.apply1("onnx.non_max_suppression", in,
                     {{"center_point_box", ctx.attr_int("center_point_box", 0)}})};
}

// String pools are coded: each pool string becomes the index of its first occurrence in
// `vocabulary` (the distinct strings), and the kernel codes string tokens the same way.
std::vector<Value> convert_tfidf(NodeContext& ctx) {
  std::vector<std::string> strings = ctx.attr_strings("pool_strings");
  std::vector<int64_t> pool = ctx.attr_ints("pool_int64s");
  std::vector<std::string> vocab;
  if (!strings.empty()) {
    std::map<std::string, int64_t> code;
    pool.clear();
    for (const std::string& s : strings) {
      auto [it, fresh] = code.emplace(s, int64_t(vocab.size()));
      if (fresh) vocab.push_back(s);
      pool.push_back(it->second);
    }
  }
  Value x = ctx.input(0);
  if (is_string(x.dtype()) != !strings.empty())
    ctx.fail_type("expected ", strings.empty() ? "integer" : "string", " tokens for pool_",
                  strings.empty() ? "int64s" : "strings", ", got ", x.type().str());
  if (!is_string(x.dtype()) && x.dtype() != DType::i64) x = ctx.cast(x, DType::i64);
  Attrs a{{"min_gram_length", ctx.need_attr_int("min_gram_length")},
          {"max_gram_length", ctx.need_attr_int("max_gram_length")},
          {"max_skip_count", ctx.need_attr_int("max_skip_count")},
          {"mode", ctx.attr_string("mode", "")},
          {"ngram_counts", ctx.attr_ints("ngram_counts")},
          {"ngram_indexes", ctx.attr_ints("ngram_indexes")},
          {"pool_int64s", IntList(pool)},
          {"weights", FloatList(ctx.attr_floats("weights"))},
          {"vocabulary", Literal::from_strings(vocab, {int64_t(vocab.size())})}};
  return {ctx.apply1("onnx.tfidf_vectorizer", {x}, a)};
}

// StringNormalizer: the stopwords travel as a 1-D string tensor attribute.
std::vector<Value> convert_string_normalizer(NodeContext& ctx) {
  std::vector<std::string> stop = ctx.attr_strings("stopwords");
  Attrs a{{"case_change_action", ctx.attr_string("case_change_action", "NONE")},
          {"is_case_sensitive", ctx.attr_int("is_case_sensitive", 0)},
          {"stopwords", Literal::from_strings(stop, {int64_t(stop.size())})},
          {"locale", ctx.attr_string("locale", "")}};
  return {ctx.apply1("onnx.string_normalizer", {ctx.input(0)}, a)};
}

// ---- random ------------------------------------------------------------------------------
// The core generators are counter-based (Philox keyed by seed): the draws are valid but
// cannot equal another runtime's, and a node draws the same values on every run. Without
// a seed attribute the node's name picks one.

int64_t seed_of(const NodeContext& ctx) {
  if (ctx.has_attr("seed")) return int64_t(std::bit_cast<uint64_t>(ctx.attr_float("seed", 0.0)));
  return int64_t(std::hash<std::string>{}(ctx.name()) >> 1);
}

std::vector<int64_t> static_shape(const NodeContext& ctx, Value v) {
  if (!v.type().is_static())
    ctx.unsupported("expected an input of static shape, got ", v.type().str());
  return static_sizes(v.shape());
}

Value draw(NodeContext& ctx, bool normal, const std::vector<int64_t>& shape, DType dt) {
  if (!is_float(dt)) ctx.fail_type("expected a float dtype, got ", dtype_name(dt));
  Attrs a{{"shape", IntList(shape)}, {"dtype", dt}, {"seed", seed_of(ctx)}};
  if (normal) {
    a.set("mean", ctx.attr_float("mean", 0.0));
    a.set("std", ctx.attr_float("scale", 1.0));
  } else {
    a.set("low", ctx.attr_float("low", 0.0));
    a.set("high", ctx.attr_float("high", 1.0));
  }
  return ctx.apply1(normal ? "normal" : "uniform", {}, a);
}

DType dtype_attr(const NodeContext& ctx, DType def) {
  if (!ctx.has_attr("dtype")) return def;
  auto t = dtype_from_onnx(int32_t(ctx.attr_int("dtype", 0)));
  if (!t) ctx.fail_type("expected a dtype rlx can hold, got ", ctx.attr_int("dtype", 0));
  return *t;
}

std::vector<Value> random_like(NodeContext& ctx, bool normal) {
  Value x = ctx.input(0);
  return {draw(ctx, normal, static_shape(ctx, x), dtype_attr(ctx, x.dtype()))};
}

std::vector<Value> random_op(NodeContext& ctx, bool normal) {
  return {draw(ctx, normal, ctx.attr_ints("shape"), dtype_attr(ctx, DType::f32))};
}

// 1 where a uniform draw in [0, 1) is below p.
std::vector<Value> bernoulli(NodeContext& ctx) {
  Value p = ctx.input(0);
  Value u = draw(ctx, false, static_shape(ctx, p), p.dtype());
  return {ctx.cast(ctx.apply1("lt", {u, p}), dtype_attr(ctx, p.dtype()))};
}

// Inverse-CDF sampling: the class is the number of cumulative probabilities <= u.
std::vector<Value> multinomial(NodeContext& ctx) {
  Value x = ctx.input(0);
  if (x.rank() != 2 || !x.type().is_static())
    ctx.unsupported("expected a static [batch, classes] input, got ", x.type().str());
  int64_t b = x.shape()[0].value(), c = x.shape()[1].value(), n = ctx.attr_int("sample_size", 1);
  Value p = ctx.apply1("softmax", {ctx.cast(x, DType::f32)}, {{"axis", -1}});
  Value cdf =
      ctx.apply1("expand_dims", {ctx.apply1("cumsum", {p}, {{"axis", 1}})}, {{"axes", IntList{1}}});
  Value u = draw(ctx, false, {b, n, 1}, DType::f32);
  Value k =
      ctx.apply1("sum", {ctx.cast(ctx.apply1("ge", {u, cdf}), DType::i64)}, {{"axes", IntList{2}}});
  k = ctx.apply1("min", {k, ctx.scalar(DType::i64, double(c - 1))});
  return {ctx.cast(k, dtype_attr(ctx, DType::i32))};
}

// ---- training optimizers (ai.onnx.preview.training) --------------------------------------

struct Math {
  NodeContext& ctx;
  DType dt;
  Value k(double v) const { return ctx.scalar(dt, v); }
  Value add(Value a, Value b) const { return ctx.apply1("add", {a, b}); }
  Value sub(Value a, Value b) const { return ctx.apply1("sub", {a, b}); }
  Value mul(Value a, Value b) const { return ctx.apply1("mul", {a, b}); }
  Value div(Value a, Value b) const { return ctx.apply1("div", {a, b}); }
  Value sqrt(Value a) const { return ctx.apply1("sqrt", {a}); }
};

// The number of tensors per group: (inputs - 2) / groups.
int64_t tensors(const NodeContext& ctx, int64_t groups) {
  int64_t n = int64_t(ctx.num_inputs()) - 2;
  if (n < groups || n % groups) ctx.fail("expected R, T and ", groups, " equal groups of tensors");
  return n / groups;
}

std::vector<Value> adagrad(NodeContext& ctx) {
  int64_t n = tensors(ctx, 3);
  double decay = ctx.attr_float("decay_factor", 0.0), eps = ctx.attr_float("epsilon", 1e-6),
         norm = ctx.attr_float("norm_coefficient", 0.0);
  std::vector<Value> xs, hs;
  for (int64_t i = 0; i < n; ++i) {
    Value x = ctx.input(size_t(2 + i)), g = ctx.input(size_t(2 + n + i)),
          h = ctx.input(size_t(2 + 2 * n + i));
    Math m{ctx, x.dtype()};
    Value t = ctx.cast(ctx.input(1), m.dt);
    Value r = m.div(ctx.cast(ctx.input(0), m.dt), m.add(m.k(1), m.mul(t, m.k(decay))));
    Value gr = m.add(m.mul(m.k(norm), x), g);
    Value hn = m.add(h, m.mul(gr, gr));
    xs.push_back(m.sub(x, m.div(m.mul(r, gr), m.add(m.sqrt(hn), m.k(eps)))));
    hs.push_back(hn);
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Value> momentum(NodeContext& ctx) {
  int64_t n = tensors(ctx, 3);
  double alpha = ctx.attr_float("alpha", 0.0), beta = ctx.attr_float("beta", 0.0),
         norm = ctx.attr_float("norm_coefficient", 0.0);
  std::string mode = ctx.attr_string("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    ctx.fail("expected mode standard or nesterov, got '", mode, "'");
  Value started = ctx.apply1("gt", {ctx.input(1), ctx.scalar(ctx.input(1).dtype(), 0.0)});
  std::vector<Value> xs, vs;
  for (int64_t i = 0; i < n; ++i) {
    Value x = ctx.input(size_t(2 + i)), g = ctx.input(size_t(2 + n + i)),
          v = ctx.input(size_t(2 + 2 * n + i));
    Math m{ctx, x.dtype()};
    Value r = ctx.cast(ctx.input(0), m.dt);
    Value gr = m.add(m.mul(m.k(norm), x), g);
    // The gradient's coefficient is 1 at the first step.
    Value b = ctx.apply1("select", {started, m.k(beta), m.k(1.0)});
    Value vn = m.add(m.mul(m.k(alpha), v), m.mul(b, gr));
    Value dir = mode == "standard" ? vn : m.add(gr, m.mul(m.k(alpha), vn));
    xs.push_back(m.sub(x, m.mul(r, dir)));
    vs.push_back(vn);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

std::vector<Value> adam(NodeContext& ctx) {
  int64_t n = tensors(ctx, 4);
  double alpha = ctx.attr_float("alpha", 0.9), beta = ctx.attr_float("beta", 0.999),
         eps = ctx.attr_float("epsilon", 1e-6), norm = ctx.attr_float("norm_coefficient", 0.0),
         post = ctx.attr_float("norm_coefficient_post", 0.0);
  Value started = ctx.apply1("gt", {ctx.input(1), ctx.scalar(ctx.input(1).dtype(), 0.0)});
  std::vector<Value> xs, vs, hs;
  for (int64_t i = 0; i < n; ++i) {
    Value x = ctx.input(size_t(2 + i)), g = ctx.input(size_t(2 + n + i)),
          v = ctx.input(size_t(2 + 2 * n + i)), h = ctx.input(size_t(2 + 3 * n + i));
    Math m{ctx, x.dtype()};
    Value r = ctx.cast(ctx.input(0), m.dt), t = ctx.cast(ctx.input(1), m.dt);
    Value gr = m.add(m.mul(m.k(norm), x), g);
    Value vn = m.add(m.mul(m.k(alpha), v), m.mul(m.k(1 - alpha), gr));
    Value hn = m.add(m.mul(m.k(beta), h), m.mul(m.k(1 - beta), m.mul(gr, gr)));
    Value hs_ = m.add(m.sqrt(hn), m.k(eps));
    // Bias correction from the second step on (T > 0).
    Value pb = ctx.apply1("pow", {m.k(beta), t}), pa = ctx.apply1("pow", {m.k(alpha), t});
    Value corrected = m.div(m.mul(r, m.sqrt(m.sub(m.k(1), pb))), m.sub(m.k(1), pa));
    Value ra = ctx.apply1("select", {started, corrected, r});
    Value xn = m.sub(x, m.mul(ra, m.div(vn, hs_)));
    xs.push_back(m.mul(m.k(1 - post), xn));
    vs.push_back(vn);
    hs.push_back(hn);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

}  // namespace

void register_misc_converters() {
  register_misc_onnx_ops();
  register_text_onnx_ops();
  add_converter("", "HannWindow",
                [](NodeContext& c) { return cosine_window_op(c, 0.5, 0.5, 0.0); });
  add_converter("", "HammingWindow",
                [](NodeContext& c) { return cosine_window_op(c, 25.0 / 46.0, 21.0 / 46.0, 0.0); });
  add_converter("", "BlackmanWindow",
                [](NodeContext& c) { return cosine_window_op(c, 0.42, 0.5, 0.08); });
  add_converter("", "MelWeightMatrix", mel_weight_matrix_op);
  add_converter("", "DFT", convert_dft);
  add_converter("", "STFT", convert_stft);
  add_converter("", "NonMaxSuppression", convert_nms);
  add_converter("", "TfIdfVectorizer", convert_tfidf);
  add_converter("", "StringNormalizer", convert_string_normalizer);
  add_converter("", "RandomUniform", [](NodeContext& c) { return random_op(c, false); });
  add_converter("", "RandomNormal", [](NodeContext& c) { return random_op(c, true); });
  add_converter("", "RandomUniformLike", [](NodeContext& c) { return random_like(c, false); });
  add_converter("", "RandomNormalLike", [](NodeContext& c) { return random_like(c, true); });
  add_converter("", "Bernoulli", bernoulli);
  add_converter("", "Multinomial", multinomial);
  const std::string training = "ai.onnx.preview.training";
  add_converter(training, "Adagrad", adagrad);
  add_converter(training, "Momentum", momentum);
  add_converter(training, "Adam", adam);
}

}  // namespace rlx::onnx_import
