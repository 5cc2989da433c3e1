// The FFT family, as numpy.fft's n-dimensional forms: fft / ifft (complex to complex),
// rfft (real to complex: the last of `axes` keeps n / 2 + 1 frequencies) and irfft (its
// inverse, complex to real). Attributes: `axes` (default the last), `n` (the transform's
// length on each of `axes`: the input is cropped or zero-padded to it first; irfft's
// default on the last axis is 2 (m - 1)), `norm` ("backward": 1 on the forward transform,
// 1 / N on the inverse; "ortho": 1 / sqrt N on both; "forward": the reverse of backward),
// N the product of the lengths.
//
// Rules in JAX's convention (complex.cpp): each op is linear, and the transpose of the DFT
// matrix is itself, so fft's vjp is fft, ifft's ifft, rfft's the real part of an fft of the
// cotangent padded to the full length, irfft's conj(mask * rfft(ct)) with the mask 1, 2, …,
// 2 (1 last for an even n) counting each stored frequency's mirror; crops and pads in the
// forward direction become pads and crops back.
#include <cmath>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "rlx/axes.h"
#include "rlx/literal.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Types = std::vector<TensorType>;

enum class Kind { c2c, r2c, c2r };

// The axes (normalised, distinct) and each one's transform length; the last of c2r's is the
// real length.
struct Plan {
  IntList axes, n;
};

Plan plan_of(const InferContext& ctx, Kind kind) {
  const int64_t r = ctx.rank(0);
  Plan p{ctx.attrs().get_ints("axes"), ctx.attrs().get_ints("n")};
  if (p.axes.empty()) ctx.fail("expected at least one axis in 'axes', got none");
  normalize_axes(ctx, p.axes, r, "axes");  // in range and distinct; the order is kept
  for (int64_t& a : p.axes) a = normalize_axis(ctx, a, r, "axes");
  if (!p.n.empty() && p.n.size() != p.axes.size())
    ctx.fail("expected 'n' empty or of one length per axis (", p.axes.size(), "), got ",
             list_str(p.n));
  const Shape& in = ctx.shape(0);
  if (p.n.empty())
    for (size_t i = 0; i < p.axes.size(); ++i) {
      const Dim& d = in[size_t(p.axes[i])];
      if (!d.is_static())
        ctx.fail("expected a static length on axis ", p.axes[i], " or an explicit 'n', got ",
                 ctx.input(0).str());
      const bool last = i + 1 == p.axes.size();
      p.n.push_back(kind == Kind::c2r && last ? 2 * (d.value() - 1) : d.value());
    }
  for (int64_t v : p.n)
    if (v < 1) ctx.fail("expected transform lengths of at least 1, got ", list_str(p.n));
  return p;
}

Types infer_fft(const InferContext& ctx, Kind kind) {
  const DType t = ctx.dtype(0);
  if (kind == Kind::r2c)
    expect_dtype(ctx, 0, t == DType::f32 || t == DType::f64, "f32 or f64");
  else
    expect_dtype(ctx, 0, is_complex(t), "a complex dtype (c64, c128)");
  const Plan p = plan_of(ctx, kind);
  Shape out = ctx.shape(0);
  for (size_t i = 0; i < p.axes.size(); ++i) out[size_t(p.axes[i])] = Dim(p.n[i]);
  if (kind == Kind::r2c) out[size_t(p.axes.back())] = Dim(p.n.back() / 2 + 1);
  const DType o = kind == Kind::r2c ? complex_of(t) : kind == Kind::c2r ? real_of(t) : t;
  return {{o, out}};
}

// x cropped or zero-padded on `axes` to `lengths` (x's lengths there static).
Value resize(Value x, const IntList& axes, const IntList& lengths) {
  IntList pads(2 * size_t(x.rank()), 0);
  bool any = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t have = x.shape()[size_t(axes[i])].value();
    pads[size_t(x.rank() + axes[i])] = lengths[i] - have;
    any |= lengths[i] != have;
  }
  return any ? op("pad", {x}, {{"pads", pads}}) : x;
}

IntList lengths_of(Value x, const IntList& axes) {
  IntList out;
  for (int64_t a : axes) out.push_back(x.shape()[size_t(a)].value());
  return out;
}

IntList norm_axes(const RuleArgs& a) {
  IntList axes = a.attrs.get_ints("axes");
  for (int64_t& x : axes) x = norm_axis(x, a.inputs[0].rank());
  return axes;
}

// The rule's transform of ct: `name` over the same axes and norm, no resizing.
Value transform(const char* name, Value ct, const IntList& axes, const std::string& norm) {
  return op(name, {ct}, {{"axes", axes}, {"norm", norm}});
}

// The norm that scales a transform as `norm` scales its inverse: irfft's transpose is an
// rfft with irfft's factor.
std::string mirrored(const std::string& norm) {
  return norm == "backward" ? "forward" : norm == "forward" ? "backward" : norm;
}

std::vector<Value> c2c_vjp(const RuleArgs& a, std::span<const Value> ct, const char* name) {
  const IntList axes = norm_axes(a);
  Value g = transform(name, ct[0], axes, a.attrs.get_string("norm"));
  return {resize(g, axes, lengths_of(a.inputs[0], axes))};
}

std::vector<Value> rfft_vjp(const RuleArgs& a, std::span<const Value> ct) {
  const IntList axes = norm_axes(a);
  IntList full = lengths_of(ct[0], axes);
  const int64_t last = axes.back();
  // The transform's real length on the last axis (the output keeps n / 2 + 1 of it).
  const IntList n = a.attrs.get_ints("n");
  full.back() = n.empty() ? a.inputs[0].shape()[size_t(last)].value() : n.back();
  Value g = resize(ct[0], axes, full);  // the dropped frequencies' cotangents are zero
  g = op("real", {transform("fft", g, axes, a.attrs.get_string("norm"))});
  return {resize(g, axes, lengths_of(a.inputs[0], axes))};
}

std::vector<Value> irfft_vjp(const RuleArgs& a, std::span<const Value> ct) {
  const IntList axes = norm_axes(a);
  Value g = transform("rfft", ct[0], axes, mirrored(a.attrs.get_string("norm")));
  // Each stored frequency but the first (and the last of an even length) stands for itself
  // and its mirror.
  const int64_t len = ct[0].shape()[size_t(axes.back())].value(), m = len / 2 + 1;
  std::vector<double> w(size_t(m), 2.0);
  w[0] = 1.0;
  if (len % 2 == 0) w.back() = 1.0;
  IntList shape(size_t(g.rank()), 1);
  shape[size_t(axes.back())] = m;
  Value mask = a.g.constant(real_of(g.dtype()) == DType::f64
                                ? Literal::from(w, shape)
                                : Literal::from(std::vector<float>(w.begin(), w.end()), shape));
  mask = op("complex", {mask, rules::zeros_like(mask)});
  g = op("conj", {g * mask});
  return {resize(g, axes, lengths_of(a.inputs[0], axes))};
}

void add(OpRegistry& r, const char* name, Kind kind, const char* doc,
         std::vector<Value> (*vjp)(const RuleArgs&, std::span<const Value>)) {
  OpDef d;
  d.name = name;
  d.arity(1)
      .attr("axes", AttrKind::Ints, IntList{-1})
      .attr("n", AttrKind::Ints, IntList{})
      .attr("norm", AttrKind::String, "backward", {"backward", "ortho", "forward"});
  d.doc = doc;
  d.infer = [kind](const InferContext& ctx) { return infer_fft(ctx, kind); };
  d.vjp = vjp;
  d.jvp = rules::linear_jvp;
  d.vmap = [](const RuleArgs& a, std::span<const int> in_axes) {
    static const char* const kAxes[] = {"axes"};
    return rules::vmap_shift_axes(a, in_axes, kAxes);
  };
  r.add(std::move(d));
}

}  // namespace

void register_fft_ops(OpRegistry& r) {
  add(r, "fft", Kind::c2c, "The discrete Fourier transform of a complex x over axes.",
      [](const RuleArgs& a, std::span<const Value> ct) { return c2c_vjp(a, ct, "fft"); });
  add(r, "ifft", Kind::c2c, "The inverse discrete Fourier transform of a complex x over axes.",
      [](const RuleArgs& a, std::span<const Value> ct) { return c2c_vjp(a, ct, "ifft"); });
  add(r, "rfft", Kind::r2c,
      "The DFT of a real x over axes; the last axis keeps the n / 2 + 1 non-negative "
      "frequencies.",
      rfft_vjp);
  add(r, "irfft", Kind::c2r,
      "The inverse of rfft: a real x of length n on the last axis (default 2 (m - 1)) from "
      "its non-negative frequencies.",
      irfft_vjp);
}

}  // namespace rlx::detail
