// Short-time Fourier transforms as torch.stft / torch.istft define them, built from core
// ops (pad, gather, mul, the FFTs, scatter_nd): every device that runs those runs these,
// and their vjp / jvp / vmap rules are those of the decomposition.
//
// stft(x[..., L], window?) -> [..., freqs, frames], complex
//   n_fft; hop_length (0: n_fft / 4); center (x padded by n_fft / 2 on both sides with
//   pad_mode "reflect", "constant" or "edge", PyTorch's "replicate"); normalized (frames
//   scaled by 1 / sqrt(n_fft)); onesided (real x: n_fft / 2 + 1 frequencies). The window
//   (default ones) has at most n_fft values and is zero-padded on both sides to n_fft.
//   frames = 1 + (L' - n_fft) / hop_length, L' the padded length.
// istft(X[..., freqs, frames], window?) -> [..., length], real
//   the inverse: each frame's inverse DFT times the window, overlap-added and divided by
//   the overlap-added squared window, the center padding cropped, then cut or zero-padded
//   to `length` (0: everything the frames cover).
#include "ops/families.h"
#include "ops/fused.h"
#include "ops/infer_util.h"
#include "ops/stft_frames.h"
#include "rlx/literal.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;

void expect_frames(const InferContext& ctx, const Frames& f) {
  if (f.n_fft < 1) ctx.fail("expected n_fft >= 1, got ", f.n_fft);
  if (ctx.attrs().get_int("hop_length") < 0)
    ctx.fail("expected hop_length >= 0 (0: n_fft / 4), got ", ctx.attrs().get_int("hop_length"));
}

// The optional window: 1-D, at most n_fft values, in the real dtype `real`.
void expect_window(const InferContext& ctx, const Frames& f, DType real) {
  if (ctx.num_inputs() < 2) return;
  expect_rank(ctx, 1, 1);
  expect_dtype(ctx, 1, ctx.dtype(1) == real, str_cat("an ", dtype_name(real), " window"));
  const Dim& w = ctx.shape(1)[0];
  if (!w.is_static() || w.value() < 1 || w.value() > f.n_fft)
    ctx.fail("expected a window of static length in [1, ", f.n_fft, "], got ", ctx.input(1).str());
}

int64_t static_last(const InferContext& ctx, const char* what) {
  expect_min_rank(ctx, 0, 1);
  const Dim& d = ctx.shape(0).back();
  if (!d.is_static()) ctx.fail("expected a static ", what, ", got ", ctx.input(0).str());
  return d.value();
}

Types infer_stft(const InferContext& ctx) {
  const DType t = ctx.dtype(0);
  expect_dtype(ctx, 0, t == DType::f32 || t == DType::f64 || is_complex(t),
               "an f32, f64 or complex signal");
  Frames f = frames_of(ctx.attrs());
  expect_frames(ctx, f);
  expect_window(ctx, f, is_complex(t) ? real_of(t) : t);
  const bool onesided = ctx.attrs().get_bool("onesided");
  if (onesided && is_complex(t)) ctx.fail("expected onesided false for a complex signal, got true");
  const int64_t len = static_last(ctx, "signal length");
  if (f.pad > 0 && ctx.attrs().get_string("pad_mode") == "reflect" && f.pad >= len)
    ctx.fail("expected a signal longer than n_fft / 2 = ", f.pad, " for reflect padding, got ",
             ctx.input(0).str());
  const int64_t padded = len + 2 * f.pad;
  if (padded < f.n_fft)
    ctx.fail("expected a signal of at least n_fft = ", f.n_fft, " values (after padding), got ",
             padded);
  Shape out = ctx.shape(0);
  out.back() = Dim(onesided ? f.n_fft / 2 + 1 : f.n_fft);
  out.push_back(Dim(1 + (padded - f.n_fft) / f.hop));
  return {{is_complex(t) ? t : complex_of(t), out}};
}

Types infer_istft(const InferContext& ctx) {
  const DType t = ctx.dtype(0);
  expect_dtype(ctx, 0, is_complex(t), "a complex spectrogram");
  expect_min_rank(ctx, 0, 2);
  Frames f = frames_of(ctx.attrs());
  expect_frames(ctx, f);
  expect_window(ctx, f, real_of(t));
  const Shape& in = ctx.shape(0);
  const Dim &freqs = in[in.size() - 2], &frames = in.back();
  const int64_t want = ctx.attrs().get_bool("onesided") ? f.n_fft / 2 + 1 : f.n_fft;
  if (!freqs.is(want))
    ctx.fail("expected ", want, " frequencies for n_fft ", f.n_fft, ", got ", ctx.input(0).str());
  if (!frames.is_static() || frames.value() < 1)
    ctx.fail("expected a static number of frames >= 1, got ", ctx.input(0).str());
  int64_t length = ctx.attrs().get_int("length");
  const int64_t covered = (frames.value() - 1) * f.hop + f.n_fft - 2 * f.pad;
  if (length < 0) ctx.fail("expected length >= 0 (0: all), got ", length);
  if (length == 0) length = covered;
  if (length < 1) ctx.fail("expected the frames to cover the center padding, got ", covered);
  Shape out(in.begin(), in.end() - 2);
  out.push_back(Dim(length));
  return {{real_of(t), out}};
}

// The window zero-padded on both sides to n_fft (ones without one), in dtype `real`.
Value full_window(const RuleArgs& a, const Frames& f, Value like_real) {
  if (a.inputs.size() < 2) return scalar_like(like_real, 1);
  Value w = a.inputs[1];
  const int64_t len = w.shape()[0].value(), left = f.window_left(len);
  return op("pad", {w}, {{"pads", IntList{left, f.n_fft - len - left}}});
}

// [frames, n_fft] positions t * hop + j of each frame's values.
Value frame_positions(Graph& g, const Frames& f, int64_t frames) {
  std::vector<int64_t> idx;
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t j = 0; j < f.n_fft; ++j) idx.push_back(t * f.hop + j);
  return g.constant(Literal::from(idx, {frames, f.n_fft}));
}

Value swap_last(Value x) {
  IntList perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return op("transpose", {x}, {{"perm", perm}});
}

std::vector<Value> stft_decomposed(const RuleArgs& a) {
  const Frames f = frames_of(a.attrs);
  Value x = a.inputs[0];
  const int64_t r = x.rank();
  if (f.pad > 0) {
    IntList pads(size_t(2 * r), 0);
    pads[size_t(r - 1)] = pads[size_t(2 * r - 1)] = f.pad;
    std::string mode = a.attrs.get_string("pad_mode");
    x = op("pad", {x}, {{"pads", pads}, {"mode", mode == "replicate" ? "edge" : mode}});
  }
  const int64_t frames = 1 + (x.shape().back().value() - f.n_fft) / f.hop;
  Value framed = op("gather", {x, frame_positions(a.g, f, frames)}, {{"axis", -1}});
  if (a.inputs.size() > 1) framed = framed * full_window(a, f, a.inputs[1]);
  Attrs fa{{"axes", IntList{-1}}, {"norm", a.attrs.get_bool("normalized") ? "ortho" : "backward"}};
  Value y = op(a.attrs.get_bool("onesided") ? "rfft" : "fft",
               {is_complex(framed.dtype()) || a.attrs.get_bool("onesided")
                    ? framed
                    : cast(framed, complex_of(framed.dtype()))},
               fa);
  return {swap_last(y)};
}

// Overlap-add of frames [..., T, n_fft] into [..., (T - 1) * hop + n_fft]: the transpose
// of stft's framing (gather's vjp: a scatter_nd that adds).
Value overlap_add(Value y, const Frames& f) {
  const int64_t r = y.rank(), frames = y.shape()[size_t(r - 2)].value();
  const int64_t out_len = (frames - 1) * f.hop + f.n_fft;
  IntList perm{r - 2, r - 1};
  for (int64_t i = 0; i < r - 2; ++i) perm.push_back(i);
  Value moved = op("transpose", {y}, {{"perm", perm}});  // [T, n_fft, ...]
  // zeros [out_len, ...]: one frame's zeros, padded along its first axis.
  Value first =
      op("slice", {moved}, {{"starts", IntList{0}}, {"stops", IntList{1}}, {"axes", IntList{0}}});
  Value zeros = rules::zeros_like(op("squeeze", {first}, {{"axes", IntList{0}}}));
  IntList pads(size_t(2 * (r - 1)), 0);
  pads[size_t(r - 1)] = out_len - f.n_fft;
  zeros = op("pad", {zeros}, {{"pads", pads}});
  Value idx = rules::expand_dims(frame_positions(*y.graph, f, frames), {2});
  Value sum = op("scatter_nd", {zeros, idx, moved}, {{"reduction", "add"}});
  return rules::moveaxis(sum, 0, r - 2);
}

std::vector<Value> istft_decomposed(const RuleArgs& a) {
  const Frames f = frames_of(a.attrs);
  Value spec = swap_last(a.inputs[0]);  // [..., T, freqs]
  Attrs fa{{"axes", IntList{-1}}, {"norm", a.attrs.get_bool("normalized") ? "ortho" : "backward"}};
  Value y;
  if (a.attrs.get_bool("onesided")) {
    fa.set("n", IntList{f.n_fft});
    y = op("irfft", {spec}, fa);
  } else {
    y = op("real", {op("ifft", {spec}, fa)});
  }
  const int64_t frames = y.shape()[size_t(y.rank() - 2)].value();
  Value w = full_window(a, f, y);
  Value out = overlap_add(y * w, f);
  // The envelope: the squared window overlap-added the same way ([out_len]).
  Value env_frames = op("broadcast_to", {w * w}, {{"shape", IntList{frames, f.n_fft}}});
  Value env = overlap_add(env_frames, f);
  const int64_t covered = (frames - 1) * f.hop + f.n_fft;
  int64_t length = a.attrs.get_int("length");
  if (length == 0) length = covered - 2 * f.pad;
  const int64_t end = std::min(covered, f.pad + length);
  auto crop = [&](Value v) {
    return op("slice", {v},
              {{"starts", IntList{f.pad}}, {"stops", IntList{end}}, {"axes", IntList{-1}}});
  };
  // Where no window value reaches (an envelope of ~0), the sum is left as it is (torch
  // refuses such a window instead).
  Value e = crop(env);
  Value tiny = op("lt", {e, scalar_like(e, 1e-11)});  // a sum of squares: never negative
  Value result = crop(out) / op("select", {tiny, scalar_like(e, 1), e});
  if (f.pad + length > end) {  // zero-padded to length
    IntList pads(size_t(2 * result.rank()), 0);
    pads.back() = f.pad + length - end;
    result = op("pad", {result}, {{"pads", pads}});
  }
  return {result};
}

void add_stft(OpRegistry& r, const char* name, InferFn infer, DecomposeFn decompose,
              const char* doc) {
  OpDef d;
  d.name = name;
  d.arity(1, 2)
      .attr("n_fft", AttrKind::Int)
      .attr("hop_length", AttrKind::Int, int64_t(0))
      .attr("center", AttrKind::Bool, true)
      .attr("normalized", AttrKind::Bool, false)
      .attr("onesided", AttrKind::Bool, true);
  if (std::string_view(name) == "stft")
    d.attr("pad_mode", AttrKind::String, "reflect", {"reflect", "constant", "edge", "replicate"});
  else
    d.attr("length", AttrKind::Int, int64_t(0));
  d.doc = doc;
  d.infer = std::move(infer);
  d.decompose = std::move(decompose);
  set_rules_by_decomposition(d);
  r.add(std::move(d));
}

}  // namespace

void register_stft_ops(OpRegistry& r) {
  add_stft(r, "stft", infer_stft, stft_decomposed,
           "Short-time Fourier transform (torch.stft): [..., L] -> [..., freqs, frames].");
  add_stft(r, "istft", infer_istft, istft_decomposed,
           "Inverse short-time Fourier transform (torch.istft): [..., freqs, frames] -> "
           "[..., length].");
}

}  // namespace rlx::detail
