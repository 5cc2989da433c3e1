// The sliding-window ops on [N, C, D1..Dk] tensors: conv, conv_transpose, the pools and
// resize, with their inference and rules (their backward ops are window_grad.cpp). conv's
// vjp is a conv_transpose and a conv of its operands (conv_transpose's the other way
// round); the pools and resize differentiate through the backward ops. vmap merges the
// batch into N — or, for batched weights, into the channels, with the groups multiplied by
// the batch size.
//
// Reshapes in the rules copy dims with spec entry 0, which copies the input dim at the SAME
// index; so merges and splits happen where no symbolic dim has to shift (merge_axes,
// split_axis).
#include <algorithm>
#include <cmath>
#include <optional>

#include "ops/families.h"
#include "ops/infer_util.h"
#include "ops/rule_util.h"
#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using rules::add_any;

const std::string& name_of(const RuleArgs& a) { return rules::rule_op_name(a); }

int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// ---- inference: the window -----------------------------------------------------------

const std::vector<std::string> kAutoPad = {"explicit", "same_upper", "same_lower", "valid"};

// An Ints attribute with n entries >= lo; an empty list means n copies of `fill`.
IntList spatial_list(const InferContext& ctx, std::string_view key, int64_t n, int64_t fill,
                     int64_t lo) {
  const IntList& v = ctx.attrs().get_ints(key);
  if (v.empty()) return IntList(size_t(n), fill);
  if (int64_t(v.size()) != n) ctx.fail("expected '", key, "' of length ", n, ", got ", list_str(v));
  for (int64_t x : v)
    if (x < lo) ctx.fail("expected '", key, "' entries >= ", lo, ", got ", list_str(v));
  return v;
}

// Input 0 is [N, C, D1..Dk] with k in 1..3 (any k >= 1 when any_k) and no empty spatial
// dim; returns k.
int64_t spatial_rank(const InferContext& ctx, bool any_k = false) {
  int64_t k = ctx.rank(0) - 2;
  if (k < 1 || (!any_k && k > 3))
    ctx.fail("expected input 0 of rank ", any_k ? ">= 3" : "3 to 5", " ([N, C, D1..Dk]), got ",
             ctx.input(0).str());
  for (int64_t i = 2; i < ctx.rank(0); ++i)
    if (ctx.shape(0)[size_t(i)].is(0))
      ctx.fail("expected non-empty spatial dims, got ", ctx.input(0).str());
  return k;
}

// Strides, dilations and padding of a sliding window, resolved from the attributes.
struct Window {
  int64_t k = 0;
  IntList strides, dilations, pads;  // pads: k begins, then k ends
  std::string auto_pad;

  bool same() const { return auto_pad == "same_upper" || auto_pad == "same_lower"; }
  int64_t pad_begin(size_t i) const { return auto_pad == "valid" ? 0 : pads[i]; }
  int64_t pad_end(size_t i) const { return auto_pad == "valid" ? 0 : pads[i + size_t(k)]; }
};

Window read_window(const InferContext& ctx, int64_t k) {
  Window w;
  w.k = k;
  w.strides = spatial_list(ctx, "strides", k, 1, 1);
  w.dilations = spatial_list(ctx, "dilations", k, 1, 1);
  w.pads = spatial_list(ctx, "pads", 2 * k, 0, 0);
  w.auto_pad = ctx.attrs().get_string("auto_pad");
  if (w.auto_pad != "explicit" && !ctx.attrs().get_ints("pads").empty())
    ctx.fail("expected no pads with auto_pad '", w.auto_pad, "', got ",
             list_str(ctx.attrs().get_ints("pads")));
  return w;
}

// Output size along spatial dim i of a window `kernel` wide sliding over d (conv, pools).
// Floor or ONNX ceil mode; in ceil mode the last window must start inside the input or
// the left padding.
Dim window_out(const InferContext& ctx, const Window& w, size_t i, const Dim& d, const Dim& kernel,
               bool ceil_mode) {
  int64_t s = w.strides[i];
  if (w.same()) {  // the padding is whatever makes the output ceil(d / s)
    if (d.is_static()) return Dim(ceil_div(d.value(), s));
    return s == 1 ? d : Dim::unknown();
  }
  if (!kernel.is_static()) return Dim::unknown();
  int64_t pb = w.pad_begin(i), pe = w.pad_end(i);
  int64_t eff = w.dilations[i] * (kernel.value() - 1) + 1;
  if (!d.is_static()) {  // with stride 1 the output is d plus a constant
    if (s != 1) return Dim::unknown();
    return dim_add(d, pb + pe - eff + 1 - (ceil_mode && pe >= eff ? 1 : 0));
  }
  int64_t span = d.value() + pb + pe - eff;
  int64_t o = (ceil_mode ? ceil_div(span, s) : floor_div(span, s)) + 1;
  if (ceil_mode && o > 1 && (o - 1) * s >= d.value() + pb) --o;
  if (o < 1)
    ctx.fail("expected an output size >= 1 along spatial dim ", i, ", got ", o, " (input ", d.str(),
             ", kernel ", kernel.str(), ", dilation ", w.dilations[i], ", pads ", pb, "+", pe,
             ", stride ", s, ")");
  return Dim(o);
}

void add_window_attrs(OpDef& d) {
  d.attr("strides", AttrKind::Ints, AttrValue(IntList{}))
      .attr("dilations", AttrKind::Ints, AttrValue(IntList{}))
      .attr("pads", AttrKind::Ints, AttrValue(IntList{}))
      .attr("auto_pad", AttrKind::String, AttrValue("explicit"), kAutoPad);
}

// ---- rules: shared pieces -------------------------------------------------------------

// n zeros: reshape entries that copy the input dim at the same index.
IntList copies(int64_t n) { return IntList(size_t(std::max<int64_t>(n, 0)), 0); }

IntList concat(IntList a, const IntList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The spatial axes of [N, C, D...], and those with N (what a bias gradient sums over).
IntList spatial_axes(int64_t rank) { return range(2, rank); }
IntList bias_axes(int64_t rank) { return concat({0}, range(2, rank)); }

// v with axes 0 and 1 swapped.
Value swap01(Value v) { return rlx::transpose(v, concat({1, 0}, range(2, v.rank()))); }

// True when dims [from, end) can be written into a reshape spec (static, and not 0,
// which would mean "copy").
bool writable(const Shape& s, size_t from) {
  for (size_t i = from; i < s.size(); ++i)
    if (!s[i].is_static() || s[i].value() == 0) return false;
  return true;
}

int64_t spec_entry(const Dim& d) { return d.is_static() && d.value() > 0 ? d.value() : -1; }

// Axes `axis` and `axis + 1` of v merged into one.
Value merge_axes(Value v, int64_t axis) {
  const Shape& s = v.shape();
  int64_t r = v.rank();
  const Dim &a = s[size_t(axis)], &b = s[size_t(axis + 1)];
  int64_t merged =
      a.is_static() && b.is_static() && a.value() * b.value() > 0 ? a.value() * b.value() : -1;
  IntList spec = concat(copies(axis), {merged});
  if (writable(s, size_t(axis + 2))) {
    for (size_t i = size_t(axis + 2); i < s.size(); ++i) spec.push_back(s[i].value());
    return rlx::reshape(v, spec);
  }
  // Symbolic trailing dims: merge at the end, then move the merged axis back.
  Value t = rlx::transpose(v, concat(concat(range(0, axis), range(axis + 2, r)), {axis, axis + 1}));
  Value m = rlx::reshape(t, concat(copies(r - 2), {merged}));
  return rlx::transpose(m, concat(concat(range(0, axis), {r - 2}), range(axis, r - 2)));
}

// Whether split_axis can split into (a, b): the reshape infers at most one of them.
bool can_split(const Dim& a, const Dim& b) { return spec_entry(a) > 0 || spec_entry(b) > 0; }

// Axis `axis` of v split into (a, b), a major.
Value split_axis(Value v, int64_t axis, const Dim& a, const Dim& b) {
  const Shape& s = v.shape();
  int64_t r = v.rank();
  int64_t ea = spec_entry(a), eb = ea > 0 ? spec_entry(b) : b.value();
  IntList spec = concat(copies(axis), {ea, eb});
  if (writable(s, size_t(axis + 1))) {
    for (size_t i = size_t(axis + 1); i < s.size(); ++i) spec.push_back(s[i].value());
    return rlx::reshape(v, spec);
  }
  Value t = rlx::transpose(v, concat(concat(range(0, axis), range(axis + 1, r)), {axis}));
  Value m = rlx::reshape(t, concat(copies(r - 1), {ea, eb}));
  return rlx::transpose(m, concat(concat(range(0, axis), {r - 1, r}), range(axis, r - 1)));
}

// v [A, B, S...] with B = groups * bg -> [bg, groups * A, S...], entry (j, a) of the new
// axis 1 at j * A + a: the per-group blocks of B become the groups of a grouped conv
// whose channels are A.
Value group_major(Value v, int64_t groups, int64_t bg) {
  if (groups == 1) return swap01(v);
  Value t = split_axis(v, 1, Dim(groups), Dim(bg));  // [A, g, bg, S...]
  t = rlx::transpose(t, concat({2, 1, 0}, range(3, t.rank())));
  return merge_axes(t, 1);
}

// v with like's type: inference may have lost a size that like's type still has.
Value fit(Value v, Value like) { return rules::reshape_like(v, like); }

// Drops the last extra[i] elements of spatial dim i.
Value crop_spatial(Value v, const IntList& extra) {
  IntList starts, stops, axes;
  for (size_t i = 0; i < extra.size(); ++i)
    if (extra[i] > 0) {
      starts.push_back(0);
      stops.push_back(-extra[i]);
      axes.push_back(int64_t(i) + 2);
    }
  if (axes.empty()) return v;
  return op("slice", {v}, {{"starts", starts}, {"stops", stops}, {"axes", axes}});
}

IntList ints_or(const Attrs& at, const char* key, size_t n, int64_t fill) {
  const IntList& v = at.get_ints(key);
  return v.empty() ? IntList(n, fill) : v;
}

Attrs window_attrs(const IntList& strides, const IntList& dilations, const IntList& pads,
                   int64_t groups) {
  return {{"strides", strides},
          {"dilations", dilations},
          {"pads", pads},
          {"auto_pad", "explicit"},
          {"groups", groups}};
}

// The window of a conv / conv_transpose node with its padding made explicit.
struct Geom {
  IntList s, dil, ker, pb, pe;
  // conv: (D + pads - eff) mod s, the input tail that no window reaches (0 for stride 1).
  IntList r;
  // conv_transpose: O + pads - s * (D - 1), how far the output reaches past the last
  // input position's stride.
  IntList span;

  int64_t eff(size_t i) const { return dil[i] * (ker[i] - 1) + 1; }
  IntList pads() const { return concat(pb, pe); }
};

Geom conv_geom(const RuleArgs& a, const char* transform, bool transpose) {
  Value x = a.inputs[0], w = a.inputs[1];
  size_t k = size_t(x.rank() - 2);
  Geom g;
  g.s = ints_or(a.attrs, "strides", k, 1);
  g.dil = ints_or(a.attrs, "dilations", k, 1);
  IntList pads = ints_or(a.attrs, "pads", 2 * k, 0);
  IntList opad = transpose ? ints_or(a.attrs, "output_padding", k, 0) : IntList(k, 0);
  const std::string& auto_pad = a.attrs.get_string("auto_pad");
  bool same = auto_pad == "same_upper" || auto_pad == "same_lower";
  for (size_t i = 0; i < k; ++i) {
    const Dim& kd = w.shape()[i + 2];
    if (!kd.is_static())
      fail<NotSupported>(name_of(a), transform, ": expected static kernel sizes, got ",
                         w.type().str());
    g.ker.push_back(kd.value());
    int64_t eff = g.eff(i), s = g.s[i];
    const Dim& d = x.shape()[i + 2];
    // conv's tail and "same" padding depend on D unless the stride is 1.
    bool need_d = !transpose && s > 1;
    if (need_d && !d.is_static())
      fail<NotSupported>(name_of(a), transform,
                         ": expected static spatial dims where strides > 1, got ", x.type().str());
    int64_t pb = 0, pe = 0;
    if (auto_pad == "explicit") {
      pb = pads[i];
      pe = pads[i + k];
    } else if (same) {  // as the CPU kernels resolve it (backend/cpu/window.h)
      int64_t total = transpose ? opad[i] + eff - s : s == 1 ? eff - 1 : 0;
      if (need_d) {
        int64_t o = (d.value() + s - 1) / s;
        total = (o - 1) * s + eff - d.value();
      }
      total = std::max<int64_t>(total, 0);
      pb = auto_pad == "same_upper" ? total / 2 : total - total / 2;
      pe = total - pb;
    }
    g.pb.push_back(pb);
    g.pe.push_back(pe);
    g.r.push_back(need_d ? (d.value() + pb + pe - eff) % s : 0);
    g.span.push_back(same ? std::max(s, opad[i] + eff) : opad[i] + eff);
  }
  return g;
}

// w.shape[1], the channels per group of the other side, which group_major needs static.
int64_t group_width(const RuleArgs& a, Value w, int64_t groups) {
  const Dim& d = w.shape()[1];
  if (groups == 1) return d.is_static() ? d.value() : 1;
  if (!d.is_static())
    fail<NotSupported>(name_of(a), "vjp: expected a static w.shape[1] with groups > 1, got ",
                       w.type().str());
  return d.value();
}

// ---- conv, conv_transpose ----------------------------------------------------------

// Shared checks of conv and conv_transpose: dtypes, ranks, groups, static kernel sizes.
int64_t check_conv(const InferContext& ctx) {
  expect_float(ctx, 0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) expect_same_dtype(ctx, 0, i);
  int64_t k = spatial_rank(ctx);
  expect_rank(ctx, 1, k + 2);
  if (ctx.num_inputs() == 3) expect_rank(ctx, 2, 1);
  int64_t groups = ctx.attrs().get_int("groups");
  if (groups < 1) ctx.fail("expected groups >= 1, got ", groups);
  for (size_t i = 2; i < ctx.shape(1).size(); ++i)
    if (ctx.shape(1)[i].is(0)) ctx.fail("expected kernel sizes >= 1, got ", ctx.input(1).str());
  return k;
}

void expect_divisible(const InferContext& ctx, const Dim& d, int64_t groups,
                      std::string_view what) {
  if (d.is_static() && d.value() % groups != 0)
    ctx.fail("expected ", what, " divisible by groups ", groups, ", got ", d.str());
}

// Output channels m, checked against the bias when there is one.
Dim with_bias(const InferContext& ctx, const Dim& m) {
  if (ctx.num_inputs() < 3) return m;
  return unify_dims(ctx, m, ctx.shape(2)[0], "output channels of w and bias");
}

std::vector<TensorType> infer_conv(const InferContext& ctx) {
  int64_t k = check_conv(ctx);
  int64_t groups = ctx.attrs().get_int("groups");
  Window win = read_window(ctx, k);
  const Shape &x = ctx.shape(0), &w = ctx.shape(1);
  unify_dims(ctx, x[1], dim_mul(w[1], Dim(groups)), "channels x.shape[1] and w.shape[1]*groups");
  expect_divisible(ctx, w[0], groups, "output channels w.shape[0]");
  Shape out{x[0], with_bias(ctx, w[0])};
  for (size_t i = 0; i < size_t(k); ++i)
    out.push_back(window_out(ctx, win, i, x[i + 2], w[i + 2], false));
  return one({ctx.dtype(0), out});
}

std::vector<TensorType> infer_conv_transpose(const InferContext& ctx) {
  int64_t k = check_conv(ctx);
  int64_t groups = ctx.attrs().get_int("groups");
  Window win = read_window(ctx, k);
  IntList opad = spatial_list(ctx, "output_padding", k, 0, 0);
  const Shape &x = ctx.shape(0), &w = ctx.shape(1);
  unify_dims(ctx, x[1], w[0], "channels x.shape[1] and w.shape[0]");
  expect_divisible(ctx, w[0], groups, "input channels w.shape[0]");
  Shape out{x[0], with_bias(ctx, dim_mul(w[1], Dim(groups)))};
  for (size_t i = 0; i < size_t(k); ++i) {
    int64_t s = win.strides[i], dil = win.dilations[i];
    if (opad[i] >= std::max(s, dil))
      ctx.fail("expected output_padding smaller than the stride or the dilation, got ",
               list_str(opad));
    const Dim &d = x[i + 2], &kern = w[i + 2];
    if (win.same()) {  // the output is d * s
      out.push_back(dim_mul(d, Dim(s)));
      continue;
    }
    if (!kern.is_static()) {
      out.push_back(Dim::unknown());
      continue;
    }
    int64_t grow = opad[i] + (kern.value() - 1) * dil - win.pad_begin(i) - win.pad_end(i);
    if (!d.is_static()) {
      out.push_back(s == 1 ? dim_add(d, grow) : Dim::unknown());
      continue;
    }
    int64_t o = s * (d.value() - 1) + grow + 1;
    if (o < 1)
      ctx.fail("expected an output size >= 1 along spatial dim ", i, ", got ", o, " (input ",
               d.str(), ", kernel ", kern.str(), ", pads ", win.pad_begin(i), "+", win.pad_end(i),
               ")");
    out.push_back(Dim(o));
  }
  return one({ctx.dtype(0), out});
}

std::vector<Value> conv_vjp(const RuleArgs& a, std::span<const Value> cts) {
  Value x = a.inputs[0], w = a.inputs[1], ct = cts[0];
  Geom g = conv_geom(a, "vjp", false);
  int64_t groups = a.attrs.get_int("groups");
  IntList pads = g.pads();
  // dx: the transposed conv, its output padding restoring the tail no window reached.
  Attrs ta = window_attrs(g.s, g.dil, pads, groups);
  ta.set("output_padding", g.r);
  Value dx = fit(op("conv_transpose", {ct, w}, ta), x);
  // dw[m, c, k] = sum over n, o of ct[n, m, o] * x[n, c, o * s - pb + k * dil]: a conv of x
  // with batch and channels swapped, ct as the kernel, strides and dilations swapped. The
  // tail r lets it reach r / dil taps past the kernel.
  IntList extra;
  for (size_t i = 0; i < g.s.size(); ++i) extra.push_back(g.r[i] / g.dil[i]);
  Value xg = group_major(x, groups, group_width(a, w, groups));
  Value dw = op("conv", {xg, swap01(ct)}, window_attrs(g.dil, g.s, pads, groups));
  dw = fit(swap01(crop_spatial(dw, extra)), w);
  std::vector<Value> out = {dx, dw};
  if (a.inputs.size() == 3) out.push_back(rules::sum(ct, bias_axes(ct.rank())));
  return out;
}

std::vector<Value> conv_transpose_vjp(const RuleArgs& a, std::span<const Value> cts) {
  Value x = a.inputs[0], w = a.inputs[1], ct = cts[0];
  Geom g = conv_geom(a, "vjp", true);
  int64_t groups = a.attrs.get_int("groups");
  IntList pads = g.pads(), extra_x, extra_w;
  for (size_t i = 0; i < g.s.size(); ++i) {
    extra_x.push_back(floor_div(g.span[i] - g.eff(i), g.s[i]));
    extra_w.push_back(floor_div(g.span[i] - 1, g.dil[i]) + 1 - g.ker[i]);
  }
  // dx: the conv with the same window (the transpose of the transpose).
  Value dx = op("conv", {ct, w}, window_attrs(g.s, g.dil, pads, groups));
  dx = fit(crop_spatial(dx, extra_x), x);
  // dw[c, m, k] = sum over n, d of x[n, c, d] * ct[n, m, d * s - pb + k * dil]: a conv of
  // ct (batch and channels swapped) with x as the kernel, strides and dilations swapped.
  Value ctg = group_major(ct, groups, group_width(a, w, groups));
  Value dw = op("conv", {ctg, swap01(x)}, window_attrs(g.dil, g.s, pads, groups));
  dw = fit(swap01(crop_spatial(dw, extra_w)), w);
  std::vector<Value> out = {dx, dw};
  if (a.inputs.size() == 3) out.push_back(rules::sum(ct, bias_axes(ct.rank())));
  return out;
}

// Bilinear in (x, w), plus the bias.
std::vector<Value> conv_jvp(const RuleArgs& a, std::span<const Value> t) {
  const std::string& name = name_of(a);
  Value x = a.inputs[0], w = a.inputs[1], out;
  if (t[0].valid()) out = op(name, {t[0], w}, a.attrs);
  if (t[1].valid()) out = add_any(out, op(name, {x, t[1]}, a.attrs));
  if (t.size() == 3 && t[2].valid()) {
    IntList spec(size_t(x.rank() - 1), 1);  // [M] as [M, 1...]
    spec[0] = -1;
    Value b = rlx::reshape(t[2], spec);
    out = out.valid() ? out + b : rules::broadcast_like(b, a.outputs[0]);
  }
  return {out};
}

VmapResult conv_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  const std::string& name = name_of(a);
  bool has_bias = a.inputs.size() == 3;
  bool xb = in_axes[0] >= 0, wb = in_axes[1] >= 0, bb = has_bias && in_axes[2] >= 0;
  std::vector<Value> in = rules::batch_to_front(a, in_axes);
  Dim batch = in[xb ? 0 : wb ? 1 : 2].shape()[0];
  if (wb) {
    // Per-example weights: the batch joins the channels, one set of groups per example.
    if (!batch.is_static()) return rules::vmap_by_scan(a, in_axes);
    Value x = xb ? in[0] : rules::materialize_batch(in[0], in[1], 0);
    std::vector<Value> ins = {merge_axes(rules::moveaxis(x, 0, 1), 1), merge_axes(in[1], 0)};
    if (has_bias)
      ins.push_back(merge_axes(bb ? in[2] : rules::materialize_batch(in[2], in[1], 0), 0));
    Attrs at = a.attrs;
    at.set("groups", a.attrs.get_int("groups") * batch.value());
    // [N, B * M, O...] split into [N, B, M, O...] (M inferred: vmap rules see no outputs).
    Value y = op(name, ins, at);
    return {{split_axis(y, 1, batch, Dim::unknown())}, {1}};
  }
  Value y;
  if (xb) {  // the batch joins N
    Dim n = in[0].shape()[1];
    if (!can_split(batch, n)) return rules::vmap_by_scan(a, in_axes);
    std::vector<Value> ins = {merge_axes(in[0], 0), in[1]};
    if (has_bias && !bb) ins.push_back(in[2]);
    y = split_axis(op(name, ins, a.attrs), 0, batch, n);
  } else {
    y = op(name, {in[0], in[1]}, a.attrs);
  }
  if (bb)  // bias [B, M] added as [B, 1, M, 1...]
    y = y + rules::expand_dims(in[2], concat({1}, range(3, in[0].rank() + (xb ? 0 : 1))));
  return {{y}, {0}};
}

void register_convs(OpRegistry& r) {
  OpDef c;
  c.name = "conv";
  c.amp = AmpRole::low;
  c.arity(2, 3);
  add_window_attrs(c);
  c.attr("groups", AttrKind::Int, AttrValue(1));
  c.doc =
      "Convolution (cross-correlation) of x [N, C, D...] with w [M, C/groups, K...], "
      "plus bias [M]: [N, M, O...].";
  c.infer = infer_conv;
  c.vjp = conv_vjp;
  c.jvp = conv_jvp;
  c.vmap = conv_vmap;
  r.add(std::move(c));

  OpDef t;
  t.name = "conv_transpose";
  t.amp = AmpRole::low;
  t.arity(2, 3);
  add_window_attrs(t);
  t.attr("output_padding", AttrKind::Ints, AttrValue(IntList{}))
      .attr("groups", AttrKind::Int, AttrValue(1));
  t.doc =
      "Transposed convolution of x [N, C, D...] with w [C, M/groups, K...], plus bias "
      "[M]: [N, M, O...].";
  t.infer = infer_conv_transpose;
  t.vjp = conv_transpose_vjp;
  t.jvp = conv_jvp;
  t.vmap = conv_vmap;
  r.add(std::move(t));
}

// ---- pools -------------------------------------------------------------------------

std::vector<TensorType> infer_pool(const InferContext& ctx) {
  expect_float(ctx, 0);
  int64_t k = spatial_rank(ctx);
  IntList kernel = ctx.attrs().get_ints("kernel_shape");
  if (kernel.empty()) ctx.fail("expected a non-empty kernel_shape, got []");
  kernel = spatial_list(ctx, "kernel_shape", k, 1, 1);
  Window win = read_window(ctx, k);
  bool ceil_mode = ctx.attrs().get_bool("ceil_mode");
  const Shape& x = ctx.shape(0);
  Shape out{x[0], x[1]};
  for (size_t i = 0; i < size_t(k); ++i)
    out.push_back(window_out(ctx, win, i, x[i + 2], Dim(kernel[i]), ceil_mode));
  return one({ctx.dtype(0), out});
}

// Where x attains the maximum y of its plane, as 0/1 in x's dtype, and how many times.
std::pair<Value, Value> max_mask(const RuleArgs& a) {
  Value x = a.inputs[0];
  Value m = rlx::cast(op("eq", {x, a.outputs[0]}), x.dtype());
  return {m, rules::sum(m, spatial_axes(x.rank()), true)};
}

std::vector<Value> max_pool_vjp(const RuleArgs& a, std::span<const Value> cts) {
  return {op("max_pool_grad", {a.inputs[0], cts[0]}, a.attrs)};
}

std::vector<Value> max_pool_jvp(const RuleArgs& a, std::span<const Value> t) {
  return {op("max_pool_gather", {a.inputs[0], t[0]}, a.attrs)};
}

std::vector<Value> avg_pool_vjp(const RuleArgs& a, std::span<const Value> cts) {
  return {op("avg_pool_grad", {a.inputs[0], cts[0]}, a.attrs)};
}

// The cotangent shared among the positions of the maximum (as JAX's reduce_max).
std::vector<Value> global_max_pool_vjp(const RuleArgs& a, std::span<const Value> cts) {
  auto [m, count] = max_mask(a);
  return {m * (cts[0] / count)};
}

std::vector<Value> global_max_pool_jvp(const RuleArgs& a, std::span<const Value> t) {
  auto [m, count] = max_mask(a);
  return {rules::sum(t[0] * m, spatial_axes(m.rank()), true) / count};
}

std::vector<Value> global_avg_pool_vjp(const RuleArgs& a, std::span<const Value> cts) {
  Value x = a.inputs[0];
  Value spread = rules::broadcast_like(cts[0], x);
  std::optional<int64_t> n = numel(Shape(x.shape().begin() + 2, x.shape().end()));
  if (n) return {spread * (1.0 / double(*n))};
  // A symbolic plane size: divide by a count that is computed at run time.
  return {spread / rules::sum(rules::ones_like(x), spatial_axes(x.rank()), true)};
}

VmapResult pool_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  std::vector<Value> in = rules::all_batched_front(a, in_axes);
  Dim batch = in[0].shape()[0], n = in[0].shape()[1];
  if (!can_split(batch, n)) return rules::vmap_by_scan(a, in_axes);
  for (Value& v : in) v = merge_axes(v, 0);
  Value y = op(name_of(a), in, a.attrs);
  return {{split_axis(y, 0, batch, n)}, {0}};
}

void register_pools(OpRegistry& r) {
  for (const char* name : {"max_pool", "avg_pool"}) {
    OpDef d;
    d.name = name;
    d.arity(1).attr("kernel_shape", AttrKind::Ints);
    add_window_attrs(d);
    d.attr("ceil_mode", AttrKind::Bool, AttrValue(false));
    bool avg = d.name == "avg_pool";
    if (avg) d.attr("count_include_pad", AttrKind::Bool, AttrValue(false));
    d.doc = str_cat(avg ? "Mean" : "Maximum", " over sliding windows of x [N, C, D...] ",
                    "(ONNX output-size rules, floor or ceil mode).");
    d.infer = infer_pool;
    d.vjp = avg ? avg_pool_vjp : max_pool_vjp;
    d.jvp = avg ? JvpFn(rules::linear_jvp) : JvpFn(max_pool_jvp);
    d.vmap = pool_vmap;
    r.add(std::move(d));
  }
  for (const char* name : {"global_max_pool", "global_avg_pool"}) {
    OpDef d;
    d.name = name;
    d.arity(1);
    d.doc = str_cat(d.name == "global_max_pool" ? "Maximum" : "Mean",
                    " over all spatial dims: [N, C, ...] -> [N, C, 1, ..., 1].");
    bool max = d.name == "global_max_pool";
    d.vjp = max ? global_max_pool_vjp : global_avg_pool_vjp;
    d.jvp = max ? JvpFn(global_max_pool_jvp) : JvpFn(rules::linear_jvp);
    d.vmap = pool_vmap;
    d.infer = [](const InferContext& ctx) {
      expect_float(ctx, 0);
      spatial_rank(ctx, true);
      Shape out = ctx.shape(0);
      std::fill(out.begin() + 2, out.end(), Dim(1));
      return one({ctx.dtype(0), out});
    };
    r.add(std::move(d));
  }
}

// ---- resize ------------------------------------------------------------------------

std::vector<TensorType> infer_resize(const InferContext& ctx) {
  const Attrs& a = ctx.attrs();
  if (a.get_string("mode") == "linear")
    expect_float(ctx, 0);
  else
    expect_numeric(ctx, 0);
  const IntList& sizes = a.get_ints("sizes");
  FloatList scales = a.get_floats("scales");
  if (sizes.empty() == scales.empty())
    ctx.fail("expected exactly one of sizes or scales, got sizes ", list_str(sizes), " and scales ",
             list_str(scales));
  size_t rank = size_t(ctx.rank(0));
  const char* key = sizes.empty() ? "scales" : "sizes";
  if ((sizes.empty() ? scales.size() : sizes.size()) != rank)
    ctx.fail("expected '", key, "' of length ", rank, " (the rank of ", ctx.input(0).str(),
             "), got ", sizes.empty() ? list_str(scales) : list_str(sizes));
  Shape out = ctx.shape(0);
  for (size_t i = 0; i < rank; ++i) {
    const Dim& d = ctx.shape(0)[i];
    if (!sizes.empty()) {
      if (sizes[i] < 0) ctx.fail("expected sizes >= 0, got ", list_str(sizes));
      out[i] = Dim(sizes[i]);
    } else {
      double sc = scales[i];
      if (!(sc > 0.0) || !std::isfinite(sc))
        ctx.fail("expected finite scales > 0, got ", list_str(scales));
      double o = std::floor(double(d.is_static() ? d.value() : 1) * sc);
      if (!(o < 9e18))
        ctx.fail("expected scales that keep sizes in int64 range, got ", list_str(scales));
      if (d.is_static())
        out[i] = Dim(int64_t(o));
      else
        out[i] = sc == 1.0 ? d : Dim::unknown();
    }
    if (d.is(0) && !out[i].is(0))
      ctx.fail("expected output dim ", i, " of 0 for an empty input dim, got ", out[i].str());
  }
  return one({ctx.dtype(0), out});
}

std::vector<Value> resize_vjp(const RuleArgs& a, std::span<const Value> cts) {
  Value x = a.inputs[0];
  if (!is_float(x.dtype())) return {Value{}};
  return {op("resize_grad", {x, cts[0]}, a.attrs)};
}

VmapResult resize_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  std::vector<Value> in = rules::all_batched_front(a, in_axes);
  Dim batch = in[0].shape()[0];
  Attrs at = a.attrs;
  IntList sizes = at.get_ints("sizes");
  if (!sizes.empty()) {  // the batch keeps its size, which must be known then
    if (!batch.is_static()) return rules::vmap_by_scan(a, in_axes);
    sizes.insert(sizes.begin(), batch.value());
    at.set("sizes", sizes);
  } else {
    FloatList scales = at.get_floats("scales");
    scales.insert(scales.begin(), 1.0);
    at.set("scales", scales);
  }
  return {{op(name_of(a), in, at)}, {0}};
}

void register_resize(OpRegistry& r) {
  OpDef d;
  d.name = "resize";
  d.arity(1)
      .attr("sizes", AttrKind::Ints, AttrValue(IntList{}))
      .attr("scales", AttrKind::Floats, AttrValue(FloatList{}))
      .attr("mode", AttrKind::String, AttrValue("nearest"), {"nearest", "linear"})
      .attr("coordinate_transformation", AttrKind::String, AttrValue("half_pixel"),
            {"half_pixel", "align_corners", "asymmetric"})
      .attr("nearest_mode", AttrKind::String, AttrValue("round_prefer_floor"),
            {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  d.doc =
      "Resamples every dim of x to sizes[i] or floor(dim * scales[i]) by nearest or "
      "(multi)linear interpolation.";
  d.infer = infer_resize;
  d.vjp = resize_vjp;
  d.jvp = rules::linear_jvp;
  d.vmap = resize_vmap;
  r.add(std::move(d));
}

}  // namespace

void register_window_ops(OpRegistry& r) {
  register_convs(r);
  register_pools(r);
  register_resize(r);
}

}  // namespace rlx::detail
