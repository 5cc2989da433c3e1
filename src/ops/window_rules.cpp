// Rules of the sliding-window ops. conv's vjp is a conv_transpose and a conv of its
// operands (conv_transpose's the other way round); the pools and resize differentiate
// through the backward ops of window_grad.cpp. vmap merges the batch into N — or, for
// batched weights, into the channels, with the groups multiplied by the batch size.
//
// Reshapes here copy dims with spec entry 0, which copies the input dim at the SAME index;
// so merges and splits happen where no symbolic dim has to shift (merge_axes, split_axis).
#include "ops/window_rules.h"

#include <algorithm>
#include <optional>

#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using rules::add_any;

const std::string& name_of(const RuleArgs& a) { return rules::rule_op_name(a); }

int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

IntList range(int64_t from, int64_t to) {
  IntList v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

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

// Where x attains the maximum y of its plane, as 0/1 in x's dtype, and how many times.
std::pair<Value, Value> max_mask(const RuleArgs& a) {
  Value x = a.inputs[0];
  Value m = rlx::cast(op("eq", {x, a.outputs[0]}), x.dtype());
  return {m, rules::sum(m, spatial_axes(x.rank()), true)};
}

}  // namespace

// ---- conv, conv_transpose ------------------------------------------------------------

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

// ---- pools ---------------------------------------------------------------------------

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

// ---- resize ----------------------------------------------------------------------------

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

// ---- the backward ops ------------------------------------------------------------------

VjpFn window_grad_vjp(std::string transposed, bool with_x) {
  return [transposed, with_x](const RuleArgs& a, std::span<const Value> cts) {
    Value x = a.inputs[0], ct = cts[0];
    Value v = with_x ? op(transposed, {x, ct}, a.attrs) : op(transposed, {ct}, a.attrs);
    return std::vector<Value>{Value{}, fit(v, a.inputs[1])};
  };
}

std::vector<Value> window_grad_jvp(const RuleArgs& a, std::span<const Value> t) {
  if (!t[1].valid()) return {Value{}};
  return {op(name_of(a), {a.inputs[0], t[1]}, a.attrs)};
}

}  // namespace rlx::detail
