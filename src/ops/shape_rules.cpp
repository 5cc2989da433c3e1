// vjp / jvp / vmap rules of the shape ops. Most ops are linear: their jvp is the op again
// on the tangents and their vjp the transposed data movement. Shapes may be symbolic, so
// static attributes are built only from the op's own attributes or from static dims, and
// anything else takes its shape from a value (reshape_like, zeros_like, cumsum of ones).
#include "ops/shape_rules.h"

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "rlx/axes.h"
#include "rlx/ops.h"
#include "rlx/rules.h"

namespace rlx::detail {

namespace {

using Values = std::vector<Value>;
using Cts = std::span<const Value>;
using Axes = std::span<const int>;

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();  // a slice stop: "to the end"
constexpr const char* kAxis[] = {"axis"};
constexpr const char* kAxes[] = {"axes"};

Attrs with(Attrs at, const std::string& key, AttrValue v) {
  at.set(key, std::move(v));
  return at;
}

// The rule's own op applied again (to tangents, or with changed attributes).
Value again(const RuleArgs& a, std::vector<Value> inputs, const Attrs& attrs) {
  return op(rules::rule_op_name(a), std::move(inputs), attrs);
}

// v with like's shape, where inference lost a symbolic dim (a slice of `n` is "?").
Value fit(Value v, Value like) {
  return v.shape() == like.shape() ? v : rules::reshape_like(v, like);
}

Value or_zeros(Value t, Value like) { return t.valid() ? t : rules::zeros_like(like); }

Value as_i64(Value v) { return v.dtype() == DType::i64 ? v : cast(v, DType::i64); }

Value select(Value cond, Value a, Value b) { return op("select", {cond, a, b}); }

Value eq(Value a, Value b) { return op("eq", {a, b}); }

Value permute(Value v, const IntList& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return op("transpose", {v}, {{"perm", perm}});
  return v;
}

Value move_axis(Value v, int64_t from, int64_t to) {
  return norm_axis(from, v.rank()) == norm_axis(to, v.rank()) ? v : rules::moveaxis(v, from, to);
}

// Constant-mode pad (zeros; negative pads crop) of one axis.
Value pad1(Value x, int64_t axis, int64_t lo, int64_t hi) {
  IntList pads(2 * size_t(x.rank()), 0);
  pads[size_t(axis)] = lo;
  pads[size_t(x.rank() + axis)] = hi;
  return op("pad", {x}, {{"pads", pads}});
}

Value slice1(Value x, int64_t axis, int64_t start, int64_t stop) {
  return op("slice", {x},
            {{"starts", IntList{start}}, {"stops", IntList{stop}}, {"axes", IntList{axis}}});
}

Value flip1(Value x, int64_t axis) { return op("flip", {x}, {{"axes", IntList{axis}}}); }

// 0, 1, 2, … along `axis`, as i64 in like's (run-time) shape.
Value positions(Value like, int64_t axis) {
  Value ones = as_i64(rules::ones_like(like));
  return op("cumsum", {ones}, {{"axis", axis}, {"exclusive", true}});
}

Value front(const RuleArgs& a, Axes in_axes) { return rules::batch_to_front(a, in_axes)[0]; }

VmapResult at0(Value v) { return {{v}, {0}}; }

Values same_vjp(const RuleArgs& a, Cts ct) { return {again(a, {ct[0]}, a.attrs)}; }

// ---------------------------------------------------------------------------------------
// reshape, transpose, broadcast_to, expand_dims, squeeze

Values reshape_like_vjp(const RuleArgs& a, Cts ct) {
  return {rules::reshape_like(ct[0], a.inputs[0])};
}

VmapResult reshape_vmap(const RuleArgs& a, Axes in_axes) {
  IntList spec = a.attrs.get_ints("shape");
  spec.insert(spec.begin(), 0);  // 0 copies the batch dim; the other 0s still line up
  return at0(again(a, {front(a, in_axes)}, with(a.attrs, "shape", spec)));
}

IntList transpose_perm(const Attrs& at, int64_t rank) {
  IntList perm = at.get_ints("perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  for (int64_t& p : perm) p = norm_axis(p, rank);
  return perm;
}

Values transpose_vjp(const RuleArgs& a, Cts ct) {
  IntList perm = transpose_perm(a.attrs, a.inputs[0].rank()), inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
  return {permute(ct[0], inv)};
}

VmapResult transpose_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  IntList perm{0};
  for (int64_t p : transpose_perm(a.attrs, x.rank() - 1)) perm.push_back(p + 1);
  return at0(op("transpose", {x}, {{"perm", perm}}));
}

Values broadcast_to_vjp(const RuleArgs& a, Cts ct) {
  return {rules::unbroadcast(ct[0], a.inputs[0])};
}

// The batch size may be symbolic, so the static target cannot take it: broadcast to a
// value of shape [batch, target…] instead.
VmapResult broadcast_to_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  const IntList& target = a.attrs.get_ints("shape");
  IntList lead;  // size-1 axes after the batch that line x up with the target
  for (int64_t i = 1; i <= int64_t(target.size()) - (x.rank() - 1); ++i) lead.push_back(i);
  if (!lead.empty()) x = rules::expand_dims(x, lead);
  Value like = op("broadcast_to", {scalar_like(x, 0)}, {{"shape", target}});
  return at0(rules::broadcast_like(x, rules::materialize_batch(like, x, 0)));
}

VmapResult expand_dims_vmap(const RuleArgs& a, Axes in_axes) {
  return rules::vmap_shift_axes(a, in_axes, kAxes);
}

VmapResult squeeze_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  const IntList& axes = a.attrs.get_ints("axes");
  int64_t r = x.rank() - 1;
  IntList shifted;
  // Spelled out when empty: "every size-1 axis" would take a batch of size 1 too.
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i)
      if (x.shape()[size_t(i + 1)].is(1)) shifted.push_back(i + 1);
  } else {
    for (int64_t ax : axes) shifted.push_back(norm_axis(ax, r) + 1);
  }
  if (shifted.empty()) return at0(x);
  return at0(again(a, {x}, with(a.attrs, "axes", shifted)));
}

// ---------------------------------------------------------------------------------------
// slice

struct SliceAxis {
  int64_t axis, start, stop, step;
};

std::vector<SliceAxis> slice_axes(const Attrs& at, int64_t rank) {
  const IntList &starts = at.get_ints("starts"), &stops = at.get_ints("stops");
  const IntList &steps = at.get_ints("steps"), &axes = at.get_ints("axes");
  std::vector<SliceAxis> out;
  for (size_t i = 0; i < starts.size(); ++i)
    out.push_back({axes.empty() ? int64_t(i) : norm_axis(axes[i], rank), starts[i], stops[i],
                   steps.empty() ? 1 : steps[i]});
  return out;
}

Value slice_of(Value x, std::span<const SliceAxis> s) {
  if (s.empty()) return x;
  IntList starts, stops, steps, axes;
  for (const SliceAxis& e : s) {
    starts.push_back(e.start);
    stops.push_back(e.stop);
    steps.push_back(e.step);
    axes.push_back(e.axis);
  }
  return op("slice", {x}, {{"starts", starts}, {"stops", stops}, {"steps", steps}, {"axes", axes}});
}

// On a static axis of size n: the first index taken and how many (as the kernel clamps).
struct Taken {
  int64_t first, count;
};

Taken taken(const SliceAxis& s, int64_t n) {
  if (n == 0) return {0, 0};
  int64_t start = s.start < 0 ? s.start + n : s.start;
  int64_t stop = s.stop < 0 ? s.stop + n : s.stop;
  if (s.step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    stop = std::clamp<int64_t>(stop, 0, n);
    return {start, stop <= start ? 0 : 1 + (stop - start - 1) / s.step};
  }
  start = std::clamp<int64_t>(start, 0, n - 1);
  stop = std::clamp<int64_t>(stop, -1, n - 1);
  int64_t mag = s.step == std::numeric_limits<int64_t>::min() ? kEnd : -s.step;
  return {start, start <= stop ? 0 : 1 + (start - stop - 1) / mag};
}

// The transpose of a one-axis slice of a static axis: zeros around (and, for steps, in
// between) the taken elements, by pads.
Value unslice_static(Value ct, const SliceAxis& s, int64_t n) {
  Taken t = taken(s, n);
  if (t.count == 0) return pad1(ct, s.axis, n, 0);  // ct is empty along the axis
  int64_t step = t.count == 1 ? 1 : s.step, first = t.first;
  if (step < 0) {
    ct = flip1(ct, s.axis);
    first += step * (t.count - 1);
    step = -step;
  }
  if (step == 1) return pad1(ct, s.axis, first, n - first - t.count);
  // step - 1 zeros after each element: on a trailing axis [.., m] -> [.., m, step] ->
  // [.., m * step] (0s copy the other dims, which may be symbolic).
  int64_t r = ct.rank();
  Value g = pad1(rules::expand_dims(move_axis(ct, s.axis, -1), {r}), r, 0, step - 1);
  IntList spec(size_t(r), 0);
  spec.back() = -1;
  g = pad1(op("reshape", {g}, {{"shape", spec}}), r - 1, first, n - first - t.count * step);
  return move_axis(g, -1, s.axis);
}

// A symbolic axis: scatter ct into zeros at the positions the slice took, found by
// slicing the positions themselves. The input of slice i is x sliced along the axes
// before it.
Value unslice_symbolic(Value x, Value ct, std::span<const SliceAxis> axes, size_t i) {
  Value xi = slice_of(x, axes.first(i));
  const SliceAxis& s = axes[i];
  Value idx = slice_of(positions(xi, s.axis), axes.subspan(i, 1));
  return op("scatter_elements", {rules::zeros_like(xi), idx, ct},
            {{"axis", s.axis}, {"reduction", "add"}});
}

// A slice is one slice per axis; its transpose undoes them in reverse order.
Values slice_vjp(const RuleArgs& a, Cts ct) {
  Value x = a.inputs[0], g = ct[0];
  std::vector<SliceAxis> axes = slice_axes(a.attrs, x.rank());
  for (size_t i = axes.size(); i-- > 0;) {
    const Dim& n = x.shape()[size_t(axes[i].axis)];
    g = n.is_static() ? unslice_static(g, axes[i], n.value()) : unslice_symbolic(x, g, axes, i);
  }
  return {fit(g, x)};
}

VmapResult slice_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  IntList shifted;
  for (const SliceAxis& s : slice_axes(a.attrs, x.rank() - 1)) shifted.push_back(s.axis + 1);
  return at0(again(a, {x}, with(a.attrs, "axes", shifted)));
}

// ---------------------------------------------------------------------------------------
// concat, split, pad

// Each input's part of ct is a slice: offsets count from the front up to the input with
// a symbolic size and from the back after it, so one symbolic size is fine, two are not.
Values concat_vjp(const RuleArgs& a, Cts ct) {
  size_t k = a.inputs.size();
  if (!is_float(a.inputs[0].dtype())) return Values(k);
  int64_t axis = norm_axis(a.attrs.get_int("axis"), a.inputs[0].rank());
  std::vector<int64_t> size(k, -1);
  int64_t sym = -1, total = 0;
  for (size_t i = 0; i < k; ++i) {
    const Dim& d = a.inputs[i].shape()[size_t(axis)];
    if (d.is_static()) {
      size[i] = d.value();
      total += d.value();
    } else if (sym >= 0) {
      fail<NotSupported>(rules::rule_op_name(a), "vjp: more than one input with a symbolic size ",
                         "along the concat axis ", axis);
    } else {
      sym = int64_t(i);
    }
  }
  Values out;
  int64_t head = 0, tail = total;  // static sizes before input i / from input i on
  for (size_t i = 0; i < k; ++i) {
    int64_t start, stop;
    tail -= std::max<int64_t>(size[i], 0);
    if (sym < 0 || int64_t(i) <= sym) {
      start = head;
      stop = int64_t(i) == sym ? (tail == 0 ? kEnd : -tail) : head + size[i];
      head += std::max<int64_t>(size[i], 0);
    } else {
      start = -(tail + size[i]);
      stop = tail == 0 ? kEnd : -tail;
    }
    out.push_back(fit(slice1(ct[0], axis, start, stop), a.inputs[i]));
  }
  return out;
}

VmapResult shift_axis_vmap(const RuleArgs& a, Axes in_axes) {
  return rules::vmap_shift_axes(a, in_axes, kAxis);
}

VmapResult shift_axis_all_vmap(const RuleArgs& a, Axes in_axes) {
  return rules::vmap_shift_axes(a, in_axes, kAxis, true);
}

Values split_vjp(const RuleArgs& a, Cts ct) {
  Values parts(ct.begin(), ct.end());
  return {fit(op("concat", parts, {{"axis", a.attrs.get_int("axis")}}), a.inputs[0])};
}

// The transpose of edge / reflect padding of one static axis of size n: the interior
// crops back (as for constant padding); the border elements add onto the x elements they
// copied: x[0] / x[n-1] for edge, reversed runs next to the ends for reflect.
Value unpad_axis(Value ct, int64_t d, int64_t n, int64_t lo, int64_t hi, bool edge) {
  int64_t out = n + lo + hi;
  Value g = pad1(ct, d, -lo, -hi);
  int64_t left = std::min(lo, out);  // ct[j] for j < lo read x[0] (edge) or x[lo - j]
  if (left > 0) {
    Value part = slice1(ct, d, 0, left);
    g = g + (edge ? pad1(rules::sum(part, {d}, true), d, 0, n - 1)
                  : pad1(flip1(part, d), d, lo - left + 1, n - 1 - lo));
  }
  int64_t j0 = std::max<int64_t>(lo + n, 0);  // ct[j] for j >= lo + n read past x's end:
  if (out > j0) {                             // x[n-1] or x[2(n-1) - (j - lo)]
    Value part = slice1(ct, d, j0, out);
    int64_t s_first = 2 * (n - 1) - (j0 - lo), s_last = 2 * (n - 1) - (out - 1 - lo);
    g = g + (edge ? pad1(rules::sum(part, {d}, true), d, n - 1, 0)
                  : pad1(flip1(part, d), d, s_last, n - 1 - s_first));
  }
  return g;
}

Values pad_vjp(const RuleArgs& a, Cts ct) {
  Value x = a.inputs[0], g = ct[0];
  const IntList& pads = a.attrs.get_ints("pads");
  const std::string& mode = a.attrs.get_string("mode");
  int64_t r = x.rank();
  if (mode == "constant") {
    IntList neg;
    for (int64_t p : pads) neg.push_back(-p);
    return {fit(op("pad", {g}, {{"pads", neg}}), x)};
  }
  for (int64_t d = 0; d < r; ++d) {
    int64_t lo = pads[size_t(d)], hi = pads[size_t(r + d)];
    if (lo == 0 && hi == 0) continue;
    const Dim& n = x.shape()[size_t(d)];
    if (!n.is_static())
      fail<NotSupported>(rules::rule_op_name(a), "vjp: ", mode, " padding of axis ", d,
                         " whose size is symbolic (", n.str(), ")");
    g = unpad_axis(g, d, n.value(), lo, hi, mode == "edge");
  }
  return {fit(g, x)};
}

// The padding value is a constant: tangents pad with zeros.
Values pad_jvp(const RuleArgs& a, Cts t) { return {again(a, {t[0]}, with(a.attrs, "value", 0.0))}; }

VmapResult pad_vmap(const RuleArgs& a, Axes in_axes) {
  const IntList& pads = a.attrs.get_ints("pads");
  auto mid = pads.begin() + std::ptrdiff_t(pads.size() / 2);
  IntList p{0};
  p.insert(p.end(), pads.begin(), mid);
  p.push_back(0);
  p.insert(p.end(), mid, pads.end());
  return at0(again(a, {front(a, in_axes)}, with(a.attrs, "pads", p)));
}

// ---------------------------------------------------------------------------------------
// gather, gather_elements, gather_nd

// Index ops are linear in data with the indices fixed.
Values index_jvp(const RuleArgs& a, Cts t) { return {again(a, {t[0], a.inputs[1]}, a.attrs)}; }

// scatter_nd writes along leading dims: the gathered axis of data and the index dims of
// ct move to the front.
Values gather_vjp(const RuleArgs& a, Cts ct) {
  Value data = a.inputs[0], idx = a.inputs[1];
  int64_t ax = norm_axis(a.attrs.get_int("axis"), data.rank()), q = idx.rank();
  IntList perm;
  for (int64_t i = ax; i < ax + q; ++i) perm.push_back(i);
  for (int64_t i = 0; i < ax; ++i) perm.push_back(i);
  for (int64_t i = ax + q; i < ct[0].rank(); ++i) perm.push_back(i);
  Value zeros = move_axis(rules::zeros_like(data), ax, 0);
  Value g = op("scatter_nd", {zeros, rules::expand_dims(idx, {q}), permute(ct[0], perm)},
               {{"reduction", "add"}});
  return {move_axis(g, 0, ax), Value{}};
}

VmapResult gather_vmap(const RuleArgs& a, Axes in_axes) {
  int bd = in_axes[0], bi = in_axes[1];
  int64_t r = a.inputs[0].rank() - (bd >= 0), ax = norm_axis(a.attrs.get_int("axis"), r);
  if (bi < 0)  // the batch is one more axis of data
    return at0(again(a, {front(a, in_axes), a.inputs[1]}, with(a.attrs, "axis", ax + 1)));
  if (bd < 0)  // the batch is one more index dim; its place in the output follows
    return {{again(a, {a.inputs[0], a.inputs[1]}, with(a.attrs, "axis", ax))}, {int(ax) + bi}};
  // Both: a gather_nd with the batch as its batch dim, on data [B, n, rest…]. Its output
  // [B, idx…, outer…, inner…] goes back to gather's order [B, outer…, idx…, inner…].
  Values v = rules::all_batched_front(a, in_axes);
  int64_t q = v[1].rank() - 1;
  Value g = op("gather_nd", {move_axis(v[0], ax + 1, 1), rules::expand_dims(v[1], {q + 1})},
               {{"batch_dims", 1}});
  IntList perm{0};
  for (int64_t i = 0; i < ax; ++i) perm.push_back(1 + q + i);
  for (int64_t i = 0; i < q; ++i) perm.push_back(1 + i);
  for (int64_t i = 1 + q + ax; i < g.rank(); ++i) perm.push_back(i);
  return at0(permute(g, perm));
}

Values gather_elements_vjp(const RuleArgs& a, Cts ct) {
  Value g = op("scatter_elements", {rules::zeros_like(a.inputs[0]), a.inputs[1], ct[0]},
               {{"axis", a.attrs.get_int("axis")}, {"reduction", "add"}});
  return {g, Value{}};
}

// Index tuples with their batch coordinates in front: batch_dims b becomes 0.
Value with_batch_coords(Value idx, int64_t b) {
  if (b == 0) return idx;
  Value ix = as_i64(idx);
  Value first = slice1(ix, ix.rank() - 1, 0, 1);
  Values parts;
  for (int64_t k = 0; k < b; ++k) parts.push_back(positions(first, k));
  parts.push_back(ix);
  return op("concat", parts, {{"axis", -1}});
}

Values gather_nd_vjp(const RuleArgs& a, Cts ct) {
  Value idx = with_batch_coords(a.inputs[1], a.attrs.get_int("batch_dims"));
  Value g = op("scatter_nd", {rules::zeros_like(a.inputs[0]), idx, ct[0]}, {{"reduction", "add"}});
  return {g, Value{}};
}

VmapResult gather_nd_vmap(const RuleArgs& a, Axes in_axes) {
  int bd = in_axes[0], bi = in_axes[1];
  int64_t b = a.attrs.get_int("batch_dims");
  Value data = a.inputs[0], idx = a.inputs[1];
  if (bd >= 0 && bi >= 0) {  // one more batch dim
    Values v = rules::all_batched_front(a, in_axes);
    return at0(again(a, v, with(a.attrs, "batch_dims", b + 1)));
  }
  if (bd < 0) {  // the batch is one more index dim, after the batch dims
    Value g = again(a, {data, move_axis(idx, bi, b)}, a.attrs);
    return {{g}, {int(b)}};
  }
  // Data only: the batch goes right after the indexed dims, a dim of every slice taken.
  int64_t m = idx.shape().back().value();
  Value g = again(a, {move_axis(data, bd, b + m), idx}, a.attrs);
  return {{g}, {int(idx.rank() - 1)}};
}

// ---------------------------------------------------------------------------------------
// scatter_elements, scatter_nd

// How the scatter rules read values at the op's indices.
struct ScatterKind {
  const char* gather;
  bool has_axis;
};

Value gather_at(const RuleArgs& a, const ScatterKind& k, Value v) {
  Attrs at;
  if (k.has_axis) at.set("axis", a.attrs.get_int("axis"));
  return op(k.gather, {v, a.inputs[1]}, at);
}

// True for the updates that land: with duplicate indices the last one written wins, which
// a scatter of the updates' own ids finds.
Value landed(const RuleArgs& a, const ScatterKind& k) {
  Value data = a.inputs[0], upd = a.inputs[2];
  Value flat = op("reshape", {as_i64(rules::ones_like(upd))}, {{"shape", IntList{-1}}});
  Value ids = rules::reshape_like(op("cumsum", {flat}, {{"exclusive", true}}), upd);
  Value none = cast(rules::full_like(data, -1), DType::i64);
  Value winner = again(a, {none, a.inputs[1], ids}, with(a.attrs, "reduction", "none"));
  return eq(gather_at(a, k, winner), ids);
}

[[noreturn]] void no_mul(const RuleArgs& a, const char* transform) {
  fail<NotSupported>(rules::rule_op_name(a), transform,
                     ": reduction 'mul' (the product of the other updates at an index needs a "
                     "division, wrong at zeros)");
}

// For max / min the result at each index is data or one update: masks of which.
std::pair<Value, Value> selected(const RuleArgs& a, const ScatterKind& k) {
  Value y = a.outputs[0];
  return {eq(y, a.inputs[0]), eq(a.inputs[2], gather_at(a, k, y))};
}

Values scatter_vjp(const RuleArgs& a, Cts ct, const ScatterKind& k) {
  const std::string& red = a.attrs.get_string("reduction");
  Value upd = a.inputs[2], g = ct[0];
  Value taken = gather_at(a, k, g);
  if (red == "add") return {g, Value{}, taken};
  if (red == "mul") no_mul(a, "vjp");
  Value zu = rules::zeros_like(upd);
  if (red == "none") {  // overwritten data gets nothing; so do updates that did not land
    Value kept = again(a, {g, a.inputs[1], zu}, a.attrs);
    return {kept, Value{}, select(landed(a, k), taken, zu)};
  }
  auto [from_data, from_upd] = selected(a, k);
  return {select(from_data, g, rules::zeros_like(g)), Value{}, select(from_upd, taken, zu)};
}

Values scatter_jvp(const RuleArgs& a, Cts t, const ScatterKind& k) {
  const std::string& red = a.attrs.get_string("reduction");
  Value td = or_zeros(t[0], a.inputs[0]), tu = or_zeros(t[2], a.inputs[2]);
  if (red == "none" || red == "add") return {again(a, {td, a.inputs[1], tu}, a.attrs)};
  if (red == "mul") no_mul(a, "jvp");
  auto [from_data, from_upd] = selected(a, k);
  td = select(from_data, td, rules::zeros_like(td));
  tu = select(from_upd, tu, rules::zeros_like(tu));
  return {again(a, {td, a.inputs[1], tu}, with(a.attrs, "reduction", "add"))};
}

ShapeRules scatter_rules(ScatterKind k, VmapFn vmap) {
  return {[k](const RuleArgs& a, Cts ct) { return scatter_vjp(a, ct, k); },
          [k](const RuleArgs& a, Cts t) { return scatter_jvp(a, t, k); }, std::move(vmap)};
}

// All batched at 0; each index tuple gets its batch coordinate in front.
VmapResult scatter_nd_vmap(const RuleArgs& a, Axes in_axes) {
  Values v = rules::all_batched_front(a, in_axes);
  return at0(again(a, {v[0], with_batch_coords(v[1], 1), v[2]}, a.attrs));
}

// ---------------------------------------------------------------------------------------
// tile, flip, sort / top_k, one_hot, nonzero

// ct viewed as [r0, d0, r1, d1, …] (repeats of 1 left out) and summed over the r's. The
// d's come from x: static, copied (0) while no repeat precedes them, or one inferred (-1).
Values tile_vjp(const RuleArgs& a, Cts ct) {
  Value x = a.inputs[0];
  const IntList& reps = a.attrs.get_ints("repeats");
  IntList spec, summed;
  bool aligned = true, inferred = false;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] != 1) {
      summed.push_back(int64_t(spec.size()));
      spec.push_back(reps[i]);
      aligned = false;
    }
    const Dim& d = x.shape()[i];
    if (d.is_static()) {
      spec.push_back(d.value());
    } else if (aligned) {
      spec.push_back(0);
    } else if (!inferred) {
      spec.push_back(-1);
      inferred = true;
    } else {
      fail<NotSupported>(rules::rule_op_name(a), "vjp: two symbolic dims after a repeated axis in ",
                         shape_str(x.shape()));
    }
  }
  Value g = op("reshape", {ct[0]}, {{"shape", spec}});
  if (!summed.empty()) g = rules::sum(g, summed);
  return {fit(g, x)};
}

VmapResult tile_vmap(const RuleArgs& a, Axes in_axes) {
  IntList reps = a.attrs.get_ints("repeats");
  reps.insert(reps.begin(), 1);
  return at0(again(a, {front(a, in_axes)}, with(a.attrs, "repeats", reps)));
}

VmapResult flip_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = front(a, in_axes);
  const IntList& axes = a.attrs.get_ints("axes");
  int64_t r = x.rank() - 1;
  IntList shifted;  // spelled out when empty ("all"), which would flip the batch too
  for (int64_t i = 0; i < r; ++i)
    if (axes.empty()) shifted.push_back(i + 1);
  for (int64_t ax : axes) shifted.push_back(norm_axis(ax, r) + 1);
  if (shifted.empty()) return at0(x);
  return at0(again(a, {x}, with(a.attrs, "axes", shifted)));
}

// sort / top_k: the values are x gathered at the indices output (distinct along axis).
Values sort_vjp(const RuleArgs& a, Cts ct) {
  Value g = op("scatter_elements", {rules::zeros_like(a.inputs[0]), a.outputs[1], ct[0]},
               {{"axis", a.attrs.get_int("axis")}, {"reduction", "add"}});
  return {g};
}

Values sort_jvp(const RuleArgs& a, Cts t) {
  return {op("gather_elements", {t[0], a.outputs[1]}, {{"axis", a.attrs.get_int("axis")}}),
          Value{}};
}

VmapResult nonzero_vmap(const RuleArgs& a, Axes) {
  fail<NotSupported>(rules::rule_op_name(a),
                     "vmap: the number of nonzeros, and so the output's shape, differs between "
                     "batch elements");
}

// shape_of: the unbatched x's shape is x's with the batch entry left out.
VmapResult shape_of_vmap(const RuleArgs& a, Axes in_axes) {
  Value s = op("shape_of", {a.inputs[0]});
  int64_t b = in_axes[0], r = a.inputs[0].rank();
  Values parts;
  if (b > 0) parts.push_back(slice1(s, 0, 0, b));
  if (b + 1 < r) parts.push_back(slice1(s, 0, b + 1, r));
  if (parts.empty()) return {{a.g.constant(Literal::from<int64_t>({}, {0}))}, {-1}};
  return {{parts.size() == 1 ? parts[0] : op("concat", parts)}, {-1}};
}

Values dynamic_reshape_vjp(const RuleArgs& a, Cts ct) {
  return {rules::reshape_like(ct[0], a.inputs[0]), Value{}};
}

// The batch dim leads x, and a 0 in front of the shape copies it. Batched outputs stack
// only when every element's target shape agrees, so a batched shape gives its first row.
VmapResult dynamic_reshape_vmap(const RuleArgs& a, Axes in_axes) {
  Value x = a.inputs[0], shape = a.inputs[1];
  if (in_axes[1] >= 0) {
    Value rows = move_axis(shape, in_axes[1], 0);
    shape = op("reshape", {slice1(rows, 0, 0, 1)}, {{"shape", IntList{-1}}});
    if (in_axes[0] < 0) {
      // Only the shape is batched: the result is batched along the shape's batch dim. A
      // sum over the rows keeps that dim even when the rows are empty (a rank-0 target).
      Value y = again(a, {x, shape}, a.attrs);
      IntList spec(size_t(y.rank()) + 1, 1);
      spec[0] = 0;
      Value ref = op("reshape", {op("sum", {rows}, {{"axes", IntList{1}}})}, {{"shape", spec}});
      return at0(op("broadcast_like", {rules::expand_dims(y, {0}), ref}));
    }
  }
  Value zero = a.g.constant(Literal::from<int64_t>({0}));
  return at0(again(a, {move_axis(x, in_axes[0], 0), op("concat", {zero, shape})}, a.attrs));
}

}  // namespace

ShapeRules reshape_rules() { return {reshape_like_vjp, rules::linear_jvp, reshape_vmap}; }
ShapeRules transpose_rules() { return {transpose_vjp, rules::linear_jvp, transpose_vmap}; }
ShapeRules broadcast_to_rules() { return {broadcast_to_vjp, rules::linear_jvp, broadcast_to_vmap}; }
ShapeRules expand_dims_rules() { return {reshape_like_vjp, rules::linear_jvp, expand_dims_vmap}; }
ShapeRules squeeze_rules() { return {reshape_like_vjp, rules::linear_jvp, squeeze_vmap}; }
ShapeRules slice_rules() { return {slice_vjp, rules::linear_jvp, slice_vmap}; }
ShapeRules concat_rules() { return {concat_vjp, rules::linear_jvp, shift_axis_all_vmap}; }
ShapeRules split_rules() { return {split_vjp, rules::linear_jvp, shift_axis_vmap}; }
ShapeRules pad_rules() { return {pad_vjp, pad_jvp, pad_vmap}; }
ShapeRules gather_rules() { return {gather_vjp, index_jvp, gather_vmap}; }
ShapeRules gather_elements_rules() { return {gather_elements_vjp, index_jvp, shift_axis_all_vmap}; }
ShapeRules gather_nd_rules() { return {gather_nd_vjp, index_jvp, gather_nd_vmap}; }
ShapeRules scatter_elements_rules() {
  return scatter_rules({"gather_elements", true}, shift_axis_all_vmap);
}
ShapeRules scatter_nd_rules() { return scatter_rules({"gather_nd", false}, scatter_nd_vmap); }
ShapeRules tile_rules() { return {tile_vjp, rules::linear_jvp, tile_vmap}; }
ShapeRules flip_rules() { return {same_vjp, rules::linear_jvp, flip_vmap}; }
ShapeRules sort_rules() { return {sort_vjp, sort_jvp, shift_axis_vmap}; }
ShapeRules one_hot_rules() { return {{}, {}, shift_axis_vmap}; }
ShapeRules nonzero_rules() { return {{}, {}, nonzero_vmap}; }
ShapeRules shape_of_rules() { return {{}, {}, shape_of_vmap}; }
ShapeRules dynamic_reshape_rules() {
  return {dynamic_reshape_vjp, rules::linear_jvp, dynamic_reshape_vmap};
}

}  // namespace rlx::detail
