// Decompositions and rules of rope, kv_cache_write, attention_cached and sample
// (llm_rules.h). Run-time sizes (a symbolic S in a prefill graph) are counted with cumsum
// over ones rather than iota, so no decomposition needs static sequence lengths.
#include "ops/llm_rules.h"

#include <cmath>
#include <limits>

#include "ops/nn_rules.h"
#include "rlx/error.h"
#include "rlx/rules.h"
#include "rlx/tensor.h"

namespace rlx::detail {

namespace {

using Values = std::vector<Value>;
using rules::expand_dims;
using rules::moveaxis;

Value to(Value x, DType dt) { return x.dtype() == dt ? x : cast(x, dt); }
DType math_of(DType dt) { return dt == DType::f64 ? DType::f64 : DType::f32; }

Value slice_axes(Value x, IntList starts, IntList stops, IntList axes) {
  return op("slice", {x}, {{"starts", starts}, {"stops", stops}, {"axes", axes}});
}
Value slice_last(Value x, int64_t lo, int64_t hi) {
  return slice_axes(x, {lo}, {hi}, {x.rank() - 1});
}

// 0, 1, … along `axis` of a tensor shaped like x, in i64 (sizes read at run time).
Value count_along(Value x, int64_t axis) {
  Value ones = cast(rules::ones_like(x), DType::i64);
  return op("cumsum", {ones}, {{"axis", axis}}) - 1.0;
}

IntList range(int64_t lo, int64_t hi) {
  IntList r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

}  // namespace

// ---- rope ----------------------------------------------------------------------------

Values rope_decomposed(const RuleArgs& a) {
  Value x = a.inputs[0], pos = a.inputs[1];
  const Dim& d = x.shape().back();
  int64_t n = a.attrs.get_int("n_rot");
  if (n == 0) {
    if (!d.is_static())
      fail<NotSupported>("rope",
                         "expected a static head dim for the decomposition with n_rot 0, got ",
                         x.type().str());
    n = d.value();
  }
  const bool whole = d.is_static() && d.value() == n;
  const int64_t half = n / 2;
  const DType cd = math_of(x.dtype());
  // theta_i = pos * freq_scale * base^(-2i / n) / freq_factors[i]; inverse negates it.
  double base = a.attrs.get_float("base"), fs = a.attrs.get_float("freq_scale");
  if (a.attrs.get_bool("inverse")) fs = -fs;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = std::pow(base, -2.0 * double(i) / double(n));
  Value freq = a.g.constant(Tensor::from_doubles(cd, {half}, inv).to_literal());
  if (a.inputs.size() > 2) freq = freq / to(a.inputs[2], cd);
  Value p = to(pos, cd) * fs;
  Value theta = expand_dims(p, {p.rank()}) * freq;  // [..., S, half]
  theta = expand_dims(theta, {theta.rank() - 1});   // [..., S, 1, half]: every head
  Value c = op("cos", {theta}), s = op("sin", {theta});
  Value xc = to(x, cd);
  Value xr = whole ? xc : slice_last(xc, 0, n);
  Value y;
  if (a.attrs.get_string("mode") == "neox") {
    Value x0 = slice_last(xr, 0, half), x1 = slice_last(xr, half, n);
    y = op("concat", {x0 * c - x1 * s, x0 * s + x1 * c}, {{"axis", xr.rank() - 1}});
  } else {  // pairs: [..., n] as [..., half, 2]
    int64_t r = xr.rank();
    IntList pairs(size_t(r - 1), 0);
    pairs.push_back(half);
    pairs.push_back(2);
    Value xp = reshape(xr, pairs);
    auto part = [&](int64_t i) {
      return op("squeeze", {slice_last(xp, i, i + 1)}, {{"axes", IntList{r}}});
    };
    Value x0 = part(0), x1 = part(1);
    Value y0 = expand_dims(x0 * c - x1 * s, {r}), y1 = expand_dims(x0 * s + x1 * c, {r});
    IntList back(size_t(r - 1), 0);
    back.push_back(n);
    y = reshape(op("concat", {y0, y1}, {{"axis", r}}), back);
  }
  if (!whole)
    y = op("concat", {y, slice_last(xc, n, std::numeric_limits<int64_t>::max())},
           {{"axis", xc.rank() - 1}});
  return {to(y, x.dtype())};
}

// A rotation: its transpose is the rotation by -theta.
Values rope_vjp(const RuleArgs& a, std::span<const Value> ct) {
  Attrs at = a.attrs;
  at.set("inverse", !a.attrs.get_bool("inverse"));
  Values in(a.inputs.begin(), a.inputs.end());
  in[0] = ct[0];
  Values out(a.inputs.size());  // pos and freq_factors: no gradient (constants of the model)
  out[0] = op("rope", in, at);
  return out;
}

Values rope_jvp(const RuleArgs& a, std::span<const Value> t) {
  if (!t[0].valid()) return {Value{}};  // freq_factors' tangent is not followed (a constant)
  Values in(a.inputs.begin(), a.inputs.end());
  in[0] = t[0];
  return {op("rope", in, a.attrs)};
}

// The batch goes in front of x; a batched pos in front too, padded with size-1 axes so that
// it lines up under x's lead dims ([N, ..., S]). Batched freq_factors: a loop.
VmapResult rope_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  if (a.inputs.size() > 2 && in_axes[2] >= 0) return rules::vmap_by_scan(a, in_axes);
  Value x = a.inputs[0], pos = a.inputs[1];
  x = in_axes[0] >= 0 ? moveaxis(x, in_axes[0], 0) : rules::materialize_batch(x, pos, in_axes[1]);
  if (in_axes[1] >= 0) {
    pos = moveaxis(pos, in_axes[1], 0);
    int64_t pad = (x.rank() - 2) - pos.rank();
    if (pad > 0) pos = expand_dims(pos, range(1, 1 + pad));
  }
  Values in{x, pos};
  if (a.inputs.size() > 2) in.push_back(a.inputs[2]);
  return {{op("rope", in, a.attrs)}, {0}};
}

// ---- kv_cache_write ------------------------------------------------------------------

Values kv_cache_write_decomposed(const RuleArgs& a) {
  Value cache = a.inputs[0], nw = a.inputs[1], pos = a.inputs[2];
  Value upd = transpose(to(nw, cache.dtype()), {0, 2, 1, 3});  // [B, KVH, S, D]
  Value rows = count_along(upd, 2) + expand_dims(to(pos, DType::i64), {1, 2, 3});
  return {op("scatter_elements", {cache, rows, upd}, {{"axis", 2}})};
}

// ---- rope_attention_cached -----------------------------------------------------------

Values rope_attention_cached_decomposed(const RuleArgs& a) {
  std::span<const Value> in = a.inputs;
  const Attrs rope_attrs{{"mode", a.attrs.get_string("mode")},
                         {"n_rot", a.attrs.get_int("n_rot")},
                         {"base", a.attrs.get_float("base")},
                         {"freq_scale", a.attrs.get_float("freq_scale")}};
  auto rope = [&](Value x) {
    Values r{x, in[5]};
    if (in.size() > 7) r.push_back(in[7]);
    return op("rope", r, rope_attrs);
  };
  Value kc = op("kv_cache_write", {in[3], rope(in[1]), in[6]});
  Value vc = op("kv_cache_write", {in[4], in[2], in[6]});
  return {
      op("attention_cached", {rope(in[0]), kc, vc, in[6]}, {{"scale", a.attrs.get_float("scale")}}),
      kc, vc};
}

// ---- attention_cached ----------------------------------------------------------------

Values attention_cached_decomposed(const RuleArgs& a) {
  Value q = a.inputs[0], k = a.inputs[1], v = a.inputs[2], pos = a.inputs[3];
  const Dim &hd = q.shape()[2], &kvd = k.shape()[1];
  if (!hd.is_static() || !kvd.is_static())
    fail<NotSupported>("attention_cached",
                       "expected static head counts for the decomposition, got ", q.type().str(),
                       " and ", k.type().str());
  const int64_t h = hd.value(), kvh = kvd.value();
  // No KV head (then no query head either) or no query: nothing to attend with.
  if (kvh == 0 || q.shape()[1].is(0)) return {rules::zeros_like(q)};
  const DType dt = q.dtype();
  // Queries grouped by the KV head they read: [B, KVH, G, S, D] against [B, KVH, 1, C, D].
  Value qg = transpose(reshape(q, {0, 0, kvh, h / kvh, -1}), {0, 2, 3, 1, 4});
  Value p = expand_dims(to(pos, DType::i64), {1, 2, 3, 4});  // [B,1,1,1,1]
  Value row = transpose(count_along(slice_axes(q, {0, 0}, {1, 1}, {2, 3}), 1), {0, 2, 3, 1});
  row = expand_dims(row, {4});                                        // [B,1,1,S,1]
  Value col = count_along(slice_axes(k, {0, 0}, {1, 1}, {1, 3}), 2);  // [B,1,C,1]
  Value last = op("reduce_max", {row}, {{"axes", IntList{3}}, {"keepdims", true}}) + p;
  // Rows past the last query's position hold anything: zero them before any product.
  Value seen = op("le", {expand_dims(col, {1}), last});  // [B,1,1,C,1]
  auto kv = [&](Value x) {
    return op("select", {seen, expand_dims(to(x, dt), {2}), scalar_like(qg, 0)});
  };
  Value vis = op("le", {expand_dims(transpose(col, {0, 1, 3, 2}), {1}), row + p});  // [B,1,1,S,C]
  Value bias = op("select", {vis, scalar_like(qg, 0), scalar_like(qg, lowest_finite(dt))});
  Value y;
  const DType ct = k.dtype();
  if (is_float(ct) && dtype_size(ct) < dtype_size(dt)) {
    // A narrower cache: the queries and the probabilities are rounded to its dtype, so that
    // both products are cache-dtype x cache-dtype with sums in dt (the kernels' contract).
    auto round = [&](Value x) { return to(to(x, ct), dt); };
    double scale = a.attrs.get_float("scale");
    if (scale == 0) {
      const Dim& d = q.shape().back();
      if (!d.is_static())
        fail<NotSupported>("attention_cached", "expected a static head dim or a scale, got ",
                           q.type().str());
      scale = d.value() > 0 ? 1.0 / std::sqrt(double(d.value())) : 1.0;
    }
    Value s = matmul(round(qg), moveaxis(kv(k), -1, -2)) * scalar_like(qg, scale) + bias;
    y = matmul(round(softmax(s, -1)), kv(v));
  } else {
    y = op("attention", {qg, kv(k), kv(v), bias}, {{"scale", a.attrs.get_float("scale")}});
  }
  return {reshape(transpose(y, {0, 3, 1, 2, 4}), {0, 0, h, -1})};
}

// ---- sample --------------------------------------------------------------------------

// Every input carries the leading dims: batch them all in front and sample each row.
VmapResult sample_vmap(const RuleArgs& a, std::span<const int> in_axes) {
  return {{op("sample", rules::all_batched_front(a, in_axes), a.attrs)}, {0}};
}

}  // namespace rlx::detail
