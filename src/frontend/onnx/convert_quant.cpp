// ONNX converters: quantization. Everything decomposes into core ops: QuantizeLinear is
// round(x / scale) + zero_point clamped to the integer range, DequantizeLinear
// (x - zero_point) * scale with the subtraction in i32. The integer products (MatMulInteger,
// ConvInteger, QLinearMatMul, QLinearConv) run as float GEMMs / convolutions on the
// zero-point-shifted operands: every term is an integer of magnitude <= 255 * 255, so the
// sums are exact in f32 while the reduction length keeps them below 2^24, and in f64 beyond.
#include <cmath>
#include <functional>
#include <optional>

#include "frontend/onnx/context.h"

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
  range_of(ctx, out);
  Value scale = along_axis(ctx, f32(ctx, ctx.input(1)), axis, rank);
  Value q = ctx.apply1("round", {ctx.apply1("div", {f32(ctx, x), scale})});
  if (ctx.has_input(2))
    q = ctx.apply1("add", {q, along_axis(ctx, f32(ctx, ctx.input(2)), axis, rank)});
  return {saturate(ctx, q, out)};
}

std::vector<Value> dequantize_linear(NodeContext& ctx) {
  no_blocks(ctx);
  Value x = ctx.input(0);
  if (!is_integer(x.dtype())) ctx.fail_type("expected an integer x, got ", x.type().str());
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

// The float dtype in which a sum of n products of zero-point-shifted 8-bit values (and an
// optional bias of magnitude <= bias_max) is exact: f32 up to 2^24, else f64.
DType exact_dtype(std::optional<int64_t> n, double bias_max = 0) {
  if (n && double(*n) * 65025.0 + bias_max <= 16777216.0) return DType::f32;
  return DType::f64;
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

// matmul of (a - a_zp) and (b - b_zp) in an exact float dtype; a_zp may be per row of a.
Value integer_matmul(NodeContext& ctx, size_t a, size_t azp, size_t b, size_t bzp) {
  Value av = ctx.input(a);
  std::optional<int64_t> k;
  if (av.rank() >= 1 && av.shape().back().is_static()) k = av.shape().back().value();
  DType cd = exact_dtype(k);
  auto per_row = [&](Value zp) {
    return zp.rank() == 1 && av.rank() >= 2
               ? ctx.apply1("expand_dims", {zp}, {{"axes", IntList{1}}})
               : zp;
  };
  return ctx.apply1("matmul", {shifted(ctx, a, azp, cd, per_row), shifted(ctx, b, bzp, cd)});
}

std::vector<Value> matmul_integer(NodeContext& ctx) {
  return {ctx.cast(integer_matmul(ctx, 0, 2, 1, 3), DType::i32)};
}

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

// conv of (x - x_zp) and (w - w_zp) (w_zp per output channel or one) in an exact dtype.
Value integer_conv(NodeContext& ctx, size_t x, size_t xzp, size_t w, size_t wzp,
                   double bias_max = 0) {
  Value wv = ctx.input(w);
  std::optional<int64_t> n = 1;
  for (size_t i = 1; i < wv.shape().size(); ++i)
    n = n && wv.shape()[i].is_static() ? std::optional(*n * wv.shape()[i].value()) : std::nullopt;
  DType cd = exact_dtype(n, bias_max);
  int64_t rank = wv.rank();
  auto per_channel = [&](Value zp) { return along_axis(ctx, zp, 0, rank); };
  return ctx.apply1("conv", {shifted(ctx, x, xzp, cd), shifted(ctx, w, wzp, cd, per_channel)},
                    conv_attrs(ctx));
}

std::vector<Value> conv_integer(NodeContext& ctx) {
  return {ctx.cast(integer_conv(ctx, 0, 2, 1, 3), DType::i32)};
}

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
  double bias_max = 0;
  if (ctx.has_input(8)) {
    if (auto b = ctx.constant_input(8))
      for (double v : b->to_doubles()) bias_max = std::max(bias_max, std::abs(v));
    else
      bias_max = 2147483648.0;  // unknown: any i32
  }
  Value acc = integer_conv(ctx, 0, 2, 3, 5, bias_max);
  int64_t rank = ctx.input(3).rank();
  if (ctx.has_input(8)) {
    Value b = along_axis(ctx, ctx.cast(ctx.input(8), acc.dtype()), 1, rank);
    acc = ctx.apply1("add", {acc, b});
  }
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
