// ONNX converters: quantization. Everything decomposes into core ops: QuantizeLinear is
// round(x / scale) + zero_point clamped to the integer range, DequantizeLinear
// (x - zero_point) * scale with the subtraction in i32. The integer products (MatMulInteger,
// ConvInteger, QLinearMatMul, QLinearConv) run as f32 GEMMs / convolutions on the
// zero-point-shifted operands over runs of the reduced axis short enough to be exact, added
// in i32 (integer_matmul, integer_conv).
#include <cmath>
#include <functional>
#include <optional>

#include "frontend/onnx/context.h"
#include "frontend/onnx/scope.h"

namespace rlx::onnx_import {

namespace {

struct IntRange {
  double lo, hi;
};

IntRange range_of(const NodeContext& ctx, DType t) {
  switch (t) {
    case DType::u8:
      return {0, 255};
    case DType::i8:
      return {-128, 127};
    case DType::i16:
      return {-32768, 32767};
    case DType::i32:  // ONNX UINT16 arrives as i32
      return {0, 65535};
    default:
      ctx.fail_type("expected a quantized dtype (u8, i8, i16, u16), got ", dtype_name(t));
  }
}

// A per-axis parameter [C] shaped to broadcast along `axis` of a rank-`rank` tensor; a
// parameter of one element becomes a scalar.
Value along_axis(NodeContext& ctx, Value v, int64_t axis, int64_t rank) {
  if (v.rank() != 1) return v;
  if (v.shape()[0].is(1)) return ctx.apply1("reshape", {v}, {{"shape", IntList{}}});
  IntList axes;
  for (int64_t a = 1; a < rank - axis; ++a) axes.push_back(a);
  if (axes.empty()) return v;
  return ctx.apply1("expand_dims", {v}, {{"axes", axes}});
}

// Clamps v (f32, already rounded) to the range of `t` and casts.
Value saturate(NodeContext& ctx, Value v, DType t) {
  IntRange r = range_of(ctx, t);
  v = ctx.apply1("clamp", {v, ctx.scalar(DType::f32, r.lo), ctx.scalar(DType::f32, r.hi)});
  return ctx.cast(v, t);
}

Value f32(NodeContext& ctx, Value v) { return ctx.cast(v, DType::f32); }

void no_blocks(const NodeContext& ctx) {
  if (ctx.attr_int("block_size", 0) != 0)
    ctx.unsupported("expected block_size 0 (blocked quantization is not supported), got ",
                    ctx.attr_int("block_size", 0));
}

// The axis of per-axis parameters (a 1-D scale of more than one value); unused (0) for a
// per-tensor scale.
int64_t quant_axis(const NodeContext& ctx, int64_t rank) {
  Value scale = ctx.input(1);
  if (scale.rank() != 1 || scale.shape()[0].is(1)) return 0;
  return normalize_axis(ctx, ctx.attr_int("axis", 1), rank);
}

// A per-tensor f32 scale and zero point known at import (inputs 1 and 2): (scale, zero
// point), else nullopt.
std::optional<std::pair<double, double>> per_tensor(const NodeContext& ctx) {
  auto s = ctx.constant_input(1);
  if (!s || s->dtype() != DType::f32 || s->numel() != 1) return std::nullopt;
  double zp = 0;
  if (ctx.has_input(2)) {
    auto z = ctx.constant_input(2);
    if (!z || z->numel() != 1) return std::nullopt;
    zp = z->to_doubles()[0];
  }
  return std::pair{s->to_doubles()[0], zp};
}

std::vector<Value> quantize_linear(NodeContext& ctx) {
  no_blocks(ctx);
  Value x = ctx.input(0);
  int64_t rank = x.rank();
  int64_t axis = quant_axis(ctx, rank);
  DType out = DType::u8;
  if (ctx.has_input(2))
    out = ctx.input(2).dtype();
  else if (ctx.has_attr("output_dtype") && ctx.attr_int("output_dtype", 0) != 0) {
    auto t = dtype_from_onnx(int32_t(ctx.attr_int("output_dtype", 0)));
    if (!t)
      ctx.unsupported("expected an output_dtype rlx can hold, got ",
                      ctx.attr_int("output_dtype", 0));
    out = *t;
  }
  IntRange range = range_of(ctx, out);
  Value scale = along_axis(ctx, f32(ctx, ctx.input(1)), axis, rank);
  Value q = ctx.apply1("round", {ctx.apply1("div", {f32(ctx, x), scale})});
  if (ctx.has_input(2))
    q = ctx.apply1("add", {q, along_axis(ctx, f32(ctx, ctx.input(2)), axis, rank)});
  Value y = saturate(ctx, q, out);
  if (auto p = per_tensor(ctx); p && x.dtype() == DType::f32)
    ctx.scope().state().quantized[{y.graph, y.id}] = {x, p->first, p->second, range.lo, range.hi};
  return {y};
}

std::vector<Value> dequantize_linear(NodeContext& ctx) {
  no_blocks(ctx);
  Value x = ctx.input(0);
  if (!is_integer(x.dtype())) ctx.fail_type("expected an integer x, got ", x.type().str());
  // A QuantizeLinear's output at the same f32 scale and zero point: one elementwise op, which
  // the layout and fusion passes take between convs (the integer round trip is not).
  const auto& quantized = ctx.scope().state().quantized;
  if (auto it = quantized.find({x.graph, x.id}); it != quantized.end()) {
    auto p = per_tensor(ctx);
    if (p && p->first == it->second.scale && p->second == it->second.zero_point &&
        ctx.input(1).dtype() == DType::f32)
      return {ctx.apply1("fake_quantize", {it->second.x},
                         {{"scale", p->first},
                          {"zero_point", p->second},
                          {"qmin", it->second.qmin},
                          {"qmax", it->second.qmax}})};
  }
  int64_t rank = x.rank();
  int64_t axis = quant_axis(ctx, rank);
  DType wide = x.dtype() == DType::i64 ? DType::i64 : DType::i32;
  Value xi = ctx.cast(x, wide);
  if (ctx.has_input(2))
    xi = ctx.apply1("sub", {xi, along_axis(ctx, ctx.cast(ctx.input(2), wide), axis, rank)});
  Value scale = ctx.input(1);
  Value y = ctx.apply1("mul", {f32(ctx, xi), along_axis(ctx, f32(ctx, scale), axis, rank)});
  return {ctx.cast(y, is_float(scale.dtype()) ? scale.dtype() : DType::f32)};
}

std::vector<Value> dynamic_quantize_linear(NodeContext& ctx) {
  Value x = f32(ctx, ctx.input(0));
  Value zero = ctx.scalar(DType::f32, 0.0);
  Value lo = ctx.apply1("min", {ctx.apply1("reduce_min", {x}), zero});
  Value hi = ctx.apply1("max", {ctx.apply1("reduce_max", {x}), zero});
  Value scale = ctx.apply1("div", {ctx.apply1("sub", {hi, lo}), ctx.scalar(DType::f32, 255.0)});
  Value zp = ctx.apply1("round", {ctx.apply1("div", {ctx.apply1("neg", {lo}), scale})});
  zp = ctx.apply1("clamp", {zp, zero, ctx.scalar(DType::f32, 255.0)});
  Value y = ctx.apply1("add", {ctx.apply1("round", {ctx.apply1("div", {x, scale})}), zp});
  return {saturate(ctx, y, DType::u8), scale, ctx.cast(zp, DType::u8)};
}

// ---- integer products --------------------------------------------------------------------

// The products run in f32 on zero-point-shifted operands. (x - x_zp) is an integer of
// magnitude <= 255, so a sum over a run of the reduced axis is exact in f32, in any order,
// while 255 times the sum of |w - w_zp| over the run stays <= 2^24. The reduced axis is cut
// into runs of `units` (rows of b; a conv's input channels with their taps) short enough for
// that, each run's product cast to i32 and the runs added in i32: exact, as ORT's integer
// GEMMs are, with the speed of f32 GEMMs (one run where the weights allow). Weights known at
// import give their own sums; weights computed at run time the worst case, 255 an element.
constexpr double kExactF32 = 16777216.0;         // 2^24
constexpr int64_t kMassMost = int64_t{1} << 26;  // weights past this take the worst case

struct Runs {
  int64_t units = 0, len = 0;  // len 0: one unit alone may not be exact (f64)
};

// |w - w_zp| summed per (unit, output) of weights w laid out as [outer, units, inner]:
// a matmul's b [K, N] is outer 1, inner N (outputs n); a conv's w [O, C, taps...] outer O
// (outputs o), inner taps. Null where w or its zero point is not a constant.
std::optional<std::vector<double>> weight_mass(NodeContext& ctx, size_t w, size_t wzp,
                                               int64_t outer, int64_t units, int64_t inner,
                                               bool outputs_inner) {
  auto wt = ctx.constant_input(w);
  std::optional<Tensor> zt;
  if (ctx.has_input(wzp) && !(zt = ctx.constant_input(wzp))) return std::nullopt;
  if (!wt || outer * units * inner > kMassMost) return std::nullopt;
  std::vector<double> wv = wt->to_doubles(), zv = zt ? zt->to_doubles() : std::vector<double>{0};
  int64_t outputs = outputs_inner ? inner : outer;
  std::vector<double> mass(size_t(units * outputs), 0.0);
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t u = 0; u < units; ++u)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t o = outputs_inner ? i : a;
        double z = zv.size() == 1 ? zv[0] : zv[size_t(o)];
        mass[size_t(u * outputs + o)] += std::abs(wv[size_t((a * units + u) * inner + i)] - z);
      }
  return mass;
}

// The longest run (in units, of equal lengths but the last) whose sums stay exact in f32;
// per_unit is the elements a unit holds, for the worst case.
Runs exact_runs(const std::optional<std::vector<double>>& mass, int64_t units, int64_t per_unit) {
  int64_t worst = int64_t(kExactF32 / (255.0 * 255.0 * double(per_unit)));
  if (!mass || worst >= units) return {units, std::max<int64_t>(std::min(worst, units), 0)};
  int64_t outputs = int64_t(mass->size()) / units;
  for (int64_t runs = 1, last = 0;; ++runs) {
    int64_t len = (units + runs - 1) / runs;
    if (len <= worst) return {units, len};
    if (len == last) continue;
    last = len;
    bool ok = true;
    for (int64_t u0 = 0; ok && u0 < units; u0 += len)
      for (int64_t o = 0; ok && o < outputs; ++o) {
        double sum = 0;
        for (int64_t u = u0; u < std::min(units, u0 + len); ++u)
          sum += (*mass)[size_t(u * outputs + o)];
        ok = 255.0 * sum <= kExactF32;
      }
    if (ok) return {units, len};
    if (len == 1) return {units, 0};  // one unit alone may not be exact: f64
  }
}

// x - zero_point in dtype `cd` (the zero point shaped by `shape_zp`).
Value shifted(NodeContext& ctx, size_t xi, size_t zpi, DType cd,
              const std::function<Value(Value)>& shape_zp = {}) {
  Value x = ctx.input(xi);
  if (x.dtype() != DType::u8 && x.dtype() != DType::i8)
    ctx.fail_type("expected input ", xi, " of dtype u8 or i8, got ", x.type().str());
  Value v = ctx.cast(x, cd);
  if (!ctx.has_input(zpi)) return v;
  Value zp = ctx.cast(ctx.input(zpi), cd);
  if (shape_zp) zp = shape_zp(zp);
  return ctx.apply1("sub", {v, zp});
}

// op(a, b) over the runs of the reduced axis (a's axis_a, b's axis_b), each in f32 and cast
// to i32, added in i32; in f64 where one unit alone may not be exact. shift(dtype) gives the
// shifted operands.
Value run_products(NodeContext& ctx, const Runs& r, int64_t axis_a, int64_t axis_b,
                   const std::function<std::pair<Value, Value>(DType)>& shift,
                   const std::function<Value(Value, Value)>& product) {
  if (r.len == 0) {
    auto [a, b] = shift(DType::f64);
    return ctx.cast(product(a, b), DType::i32);
  }
  auto [a, b] = shift(DType::f32);
  Value total;
  for (int64_t u0 = 0; u0 < r.units; u0 += r.len) {
    int64_t u1 = std::min(r.units, u0 + r.len);
    auto cut = [&](Value v, int64_t axis) {
      if (u0 == 0 && u1 == r.units) return v;
      return ctx.apply1("slice", {v},
                        {{"starts", IntList{u0}}, {"stops", IntList{u1}}, {"axes", IntList{axis}}});
    };
    Value part = ctx.cast(product(cut(a, axis_a), cut(b, axis_b)), DType::i32);
    total = total.valid() ? ctx.apply1("add", {total, part}) : part;
  }
  // One run: its f32 is exact, so a Cast back to float (ConvInteger -> Cast -> Mul) reads it
  // and the product can fuse with what follows.
  if (r.len >= r.units) ctx.scope().state().exact_ints.insert({total.graph, total.id});
  return total;
}

// (a - a_zp) times (b - b_zp) as i32, exactly; a_zp may be per row of a.
Value integer_matmul(NodeContext& ctx, size_t a, size_t azp, size_t b, size_t bzp) {
  Value av = ctx.input(a), bv = ctx.input(b);
  Runs r;
  if (av.rank() >= 1 && av.shape().back().is_static()) {
    int64_t k = av.shape().back().value(), n = 0;
    bool plain_b = bv.rank() == 2 && bv.shape()[1].is_static();
    if (plain_b) n = bv.shape()[1].value();
    auto mass = plain_b ? weight_mass(ctx, b, bzp, 1, k, n, true) : std::nullopt;
    r = exact_runs(mass, k, 1);
  }
  auto per_row = [&](Value zp) {
    return zp.rank() == 1 && av.rank() >= 2
               ? ctx.apply1("expand_dims", {zp}, {{"axes", IntList{1}}})
               : zp;
  };
  auto shift = [&](DType cd) {
    return std::pair{shifted(ctx, a, azp, cd, per_row), shifted(ctx, b, bzp, cd)};
  };
  auto product = [&](Value x, Value y) { return ctx.apply1("matmul", {x, y}); };
  if (r.units == 0) {  // the reduced length is known only at run time: f64
    auto [x, y] = shift(DType::f64);
    return ctx.cast(product(x, y), DType::i32);
  }
  return run_products(ctx, r, -1, bv.rank() >= 2 ? -2 : 0, shift, product);
}

std::vector<Value> matmul_integer(NodeContext& ctx) { return {integer_matmul(ctx, 0, 2, 1, 3)}; }

Attrs conv_attrs(const NodeContext& ctx) {
  std::string pad = ctx.attr_string("auto_pad", "NOTSET");
  std::string mode = pad == "NOTSET"       ? "explicit"
                     : pad == "SAME_UPPER" ? "same_upper"
                     : pad == "SAME_LOWER" ? "same_lower"
                     : pad == "VALID"      ? "valid"
                                           : "";
  if (mode.empty())
    ctx.fail("expected auto_pad NOTSET, SAME_UPPER, SAME_LOWER or VALID, got ", pad);
  return {{"strides", ctx.attr_ints("strides")},
          {"dilations", ctx.attr_ints("dilations")},
          {"pads", ctx.attr_ints("pads")},
          {"auto_pad", mode},
          {"groups", ctx.attr_int("group", 1)}};
}

// conv of (x - x_zp) and (w - w_zp) (w_zp per output channel or one) as i32, exactly; the
// runs go over input channels, one run where groups > 1.
Value integer_conv(NodeContext& ctx, size_t x, size_t xzp, size_t w, size_t wzp) {
  Value wv = ctx.input(w);
  int64_t rank = wv.rank();
  bool known = rank >= 2;
  for (const auto& d : wv.shape()) known = known && d.is_static();
  Runs r;
  if (known) {
    int64_t o = wv.shape()[0].value(), c = wv.shape()[1].value(), taps = 1;
    for (int64_t i = 2; i < rank; ++i) taps *= wv.shape()[i].value();
    auto mass = weight_mass(ctx, w, wzp, o, c, taps, false);
    r = exact_runs(mass, c, taps);
    if (r.len < c && ctx.attr_int("group", 1) != 1) r.len = 0;  // groups: one run or f64
  }
  auto per_channel = [&](Value zp) { return along_axis(ctx, zp, 0, rank); };
  auto shift = [&](DType cd) {
    return std::pair{shifted(ctx, x, xzp, cd), shifted(ctx, w, wzp, cd, per_channel)};
  };
  Attrs attrs = conv_attrs(ctx);
  auto product = [&](Value a, Value b) { return ctx.apply1("conv", {a, b}, attrs); };
  if (r.units == 0) {
    auto [a, b] = shift(DType::f64);
    return ctx.cast(product(a, b), DType::i32);
  }
  return run_products(ctx, r, 1, 1, shift, product);
}

std::vector<Value> conv_integer(NodeContext& ctx) { return {integer_conv(ctx, 0, 2, 1, 3)}; }

// round(acc * multiplier + y_zp), saturated to y_zp's dtype.
Value requantize(NodeContext& ctx, Value acc, Value mult, size_t yzp) {
  Value y = ctx.apply1("mul", {f32(ctx, acc), mult});
  DType out = ctx.has_input(yzp) ? ctx.input(yzp).dtype() : DType::u8;
  // The zero point is added before rounding (ties to even), as the ONNX reference does.
  if (ctx.has_input(yzp)) y = ctx.apply1("add", {y, f32(ctx, ctx.input(yzp))});
  return saturate(ctx, ctx.apply1("round", {y}), out);
}

std::vector<Value> qlinear_matmul(NodeContext& ctx) {
  Value acc = integer_matmul(ctx, 0, 2, 3, 5);
  Value a_scale = f32(ctx, ctx.input(1));
  if (a_scale.rank() == 1 && ctx.input(0).rank() >= 2)  // per row of a
    a_scale = ctx.apply1("expand_dims", {a_scale}, {{"axes", IntList{1}}});
  Value mult = ctx.apply1(
      "div", {ctx.apply1("mul", {a_scale, f32(ctx, ctx.input(4))}), f32(ctx, ctx.input(6))});
  return {requantize(ctx, acc, mult, 7)};
}

std::vector<Value> qlinear_conv(NodeContext& ctx) {
  Value acc = integer_conv(ctx, 0, 2, 3, 5);
  int64_t rank = ctx.input(3).rank();
  if (ctx.has_input(8))  // i32, added to the i32 sums as ORT adds it
    acc = ctx.apply1("add", {acc, along_axis(ctx, ctx.cast(ctx.input(8), DType::i32), 1, rank)});
  Value w_scale = along_axis(ctx, f32(ctx, ctx.input(4)), 1, rank);  // per output channel
  Value mult = ctx.apply1(
      "div", {ctx.apply1("mul", {f32(ctx, ctx.input(1)), w_scale}), f32(ctx, ctx.input(6))});
  return {requantize(ctx, acc, mult, 7)};
}

}  // namespace

void register_quant_converters() {
  add_converter("", "QuantizeLinear", quantize_linear);
  add_converter("", "DequantizeLinear", dequantize_linear);
  add_converter("", "DynamicQuantizeLinear", dynamic_quantize_linear);
  add_converter("", "MatMulInteger", matmul_integer);
  add_converter("", "ConvInteger", conv_integer);
  add_converter("", "QLinearMatMul", qlinear_matmul);
  add_converter("", "QLinearConv", qlinear_conv);
}

}  // namespace rlx::onnx_import
