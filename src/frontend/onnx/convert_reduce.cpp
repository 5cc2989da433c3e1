// ONNX converters: reductions (Reduce*, ArgMax/ArgMin, CumSum), softmax-like ops
// (Softmax, LogSoftmax, Hardmax, LpNormalization), the losses NegativeLogLikelihoodLoss
// and SoftmaxCrossEntropyLoss, Einsum (convert_einsum.cpp) and Det (onnx.det).
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/onnx/context.h"
#include "frontend/onnx/ops/reduce.h"

namespace rlx::onnx_import {

namespace {

// ---- helpers ------------------------------------------------------------------------

// Normalised, sorted, duplicate-free axes.
std::vector<int64_t> normalize_axes(const NodeContext& ctx, std::vector<int64_t> axes,
                                    int64_t rank) {
  for (int64_t& a : axes) a = normalize_axis(ctx, a, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    ctx.fail("expected distinct axes, got ", ints_str(axes));
  return axes;
}

std::vector<int64_t> iota_axes(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

Value reduce(NodeContext& ctx, const char* op, Value x, const std::vector<int64_t>& axes,
             bool keepdims) {
  return ctx.apply1(op, {x}, {{"axes", IntList(axes)}, {"keepdims", keepdims}});
}

// ---- Reduce* ------------------------------------------------------------------------

enum class Red { sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square };

struct ReduceEntry {
  const char* onnx;
  Red kind;
  int64_t axes_input_since;  // the opset from which axes is an input, not an attribute
};

const ReduceEntry kReduces[] = {
    {"ReduceSum", Red::sum, 13},
    {"ReduceMean", Red::mean, 18},
    {"ReduceMax", Red::max, 18},
    {"ReduceMin", Red::min, 18},
    {"ReduceProd", Red::prod, 18},
    {"ReduceL1", Red::l1, 18},
    {"ReduceL2", Red::l2, 18},
    {"ReduceLogSum", Red::log_sum, 18},
    {"ReduceLogSumExp", Red::log_sum_exp, 18},
    {"ReduceSumSquare", Red::sum_square, 18},
};

// The value of a reduction over an empty set (ONNX 18: the identity of the fold, or
// -inf / +inf, the lowest / highest value for max / min; NaN for the mean).
double empty_reduction(Red kind, DType dt) {
  const double inf = std::numeric_limits<double>::infinity();
  auto lowest = [&] {
    switch (dt) {
      case DType::i8:
        return -128.0;
      case DType::i16:
        return -32768.0;
      case DType::i32:
        return double(std::numeric_limits<int32_t>::min());
      case DType::i64:
        return double(std::numeric_limits<int64_t>::min());
      case DType::u8:
      case DType::boolean:
        return 0.0;
      default:
        return -inf;
    }
  };
  auto highest = [&] {
    switch (dt) {
      case DType::i8:
        return 127.0;
      case DType::i16:
        return 32767.0;
      case DType::i32:
        return double(std::numeric_limits<int32_t>::max());
      case DType::i64:
        return double(std::numeric_limits<int64_t>::max());
      case DType::u8:
        return 255.0;
      case DType::boolean:
        return 1.0;
      default:
        return inf;
    }
  };
  switch (kind) {
    case Red::prod:
      return 1.0;
    case Red::mean:
      return std::nan("");
    case Red::max:
      return lowest();
    case Red::min:
      return highest();
    case Red::log_sum:
    case Red::log_sum_exp:
      return -inf;
    default:
      return 0.0;
  }
}

// The reduction proper, on a dtype the core op takes (floats for mean, l2, the logs).
Value reduce_kind(NodeContext& ctx, Red kind, Value x, const std::vector<int64_t>& axes,
                  bool keep) {
  switch (kind) {
    case Red::sum:
      return reduce(ctx, "sum", x, axes, keep);
    case Red::mean:
      return reduce(ctx, "mean", x, axes, keep);
    case Red::max:
      return reduce(ctx, "reduce_max", x, axes, keep);
    case Red::min:
      return reduce(ctx, "reduce_min", x, axes, keep);
    case Red::prod:
      return reduce(ctx, "prod", x, axes, keep);
    case Red::l1:
      return is_float(x.dtype()) ? reduce(ctx, "l1_norm", x, axes, keep)
                                 : reduce(ctx, "sum", ctx.apply1("abs", {x}), axes, keep);
    case Red::l2:
      return reduce(ctx, "l2_norm", x, axes, keep);
    case Red::log_sum:
      return ctx.apply1("log", {reduce(ctx, "sum", x, axes, keep)});
    case Red::log_sum_exp:
      return reduce(ctx, "logsumexp", x, axes, keep);
    case Red::sum_square:
      return reduce(ctx, "sum", ctx.apply1("square", {x}), axes, keep);
  }
  return x;
}

std::vector<Value> convert_reduce(NodeContext& ctx, const ReduceEntry& e) {
  Value x = ctx.input(0);
  int64_t rank = x.rank();
  bool keep = ctx.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  bool noop = false;
  if (ctx.opset() >= e.axes_input_since) {
    if (ctx.num_inputs() > 1 && ctx.has_input(1)) axes = *ctx.ints_input(1);
    noop = ctx.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    axes = ctx.attr_ints("axes");
  }
  // noop_with_empty_axes: the input unchanged (the spec's words, for every Reduce op).
  if (axes.empty() && noop) return {x};
  axes = axes.empty() ? iota_axes(0, rank) : normalize_axes(ctx, axes, rank);
  DType dt = x.dtype();

  // A statically empty reduced set: the fold's identity, broadcast to the output shape.
  bool empty = false;
  for (int64_t a : axes) empty = empty || x.shape()[size_t(a)].is(0);
  if (empty) {
    Shape out;
    for (int64_t i = 0; i < rank; ++i) {
      bool reduced = std::binary_search(axes.begin(), axes.end(), i);
      if (!reduced) out.push_back(x.shape()[size_t(i)]);
      if (reduced && keep) out.push_back(Dim(1));
    }
    if (is_static(out)) {
      double v = empty_reduction(e.kind, dt);
      // int64's highest value is not a double: build it as an integer.
      Value fill = dt == DType::i64 && v > 9e18 ? ctx.constant(Tensor::from_vector<int64_t>(
                                                      {std::numeric_limits<int64_t>::max()}, {}))
                                                : ctx.scalar(dt, v);
      return {ctx.apply1("broadcast_to", {fill}, {{"shape", IntList(static_sizes(out))}})};
    }
  }

  // Kinds the core ops take on floats only: integers go through f64 and back (the
  // reference computes in the input type's numpy promotion and truncates likewise).
  bool float_only = e.kind == Red::mean || e.kind == Red::l2 || e.kind == Red::log_sum ||
                    e.kind == Red::log_sum_exp;
  if (float_only && !is_float(dt))
    return {ctx.cast(reduce_kind(ctx, e.kind, ctx.cast(x, DType::f64), axes, keep), dt)};
  // max / min of booleans (opset 20): any / all.
  if (dt == DType::boolean && (e.kind == Red::max || e.kind == Red::min))
    return {ctx.cast(reduce_kind(ctx, e.kind, ctx.cast(x, DType::u8), axes, keep), dt)};
  return {reduce_kind(ctx, e.kind, x, axes, keep)};
}

// ---- ArgMax, ArgMin, CumSum ---------------------------------------------------------

Converter arg_reduce(const char* op) {
  return [op](NodeContext& ctx) -> std::vector<Value> {
    Value x = ctx.input(0);
    int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
    Attrs attrs{{"axis", axis},
                {"keepdims", ctx.attr_int("keepdims", 1) != 0},
                {"select_last_index", ctx.attr_int("select_last_index", 0) != 0}};
    if (x.dtype() == DType::boolean) x = ctx.cast(x, DType::u8);
    return {ctx.apply1(op, {x}, attrs)};
  };
}

std::vector<Value> convert_cumsum(NodeContext& ctx) {
  Value x = ctx.input(0);
  std::vector<int64_t> axis = *ctx.ints_input(1);
  if (axis.size() != 1) ctx.fail("expected a scalar axis, got ", axis.size(), " values");
  Attrs attrs{{"axis", normalize_axis(ctx, axis[0], x.rank())},
              {"exclusive", ctx.attr_int("exclusive", 0) != 0},
              {"reverse", ctx.attr_int("reverse", 0) != 0}};
  return {ctx.apply1("cumsum", {x}, attrs)};
}

// ---- Softmax, LogSoftmax, Hardmax, LpNormalization ----------------------------------

enum class Soft { softmax, log_softmax, hardmax };

// The op on one axis of x.
Value soft_on_axis(NodeContext& ctx, Soft kind, Value x, int64_t axis) {
  if (kind == Soft::softmax) return ctx.apply1("softmax", {x}, {{"axis", axis}});
  if (kind == Soft::log_softmax) return ctx.apply1("log_softmax", {x}, {{"axis", axis}});
  // Hardmax: one-hot of the first maximum's index.
  const Dim& n = x.shape()[size_t(axis)];
  if (!n.is_static())
    ctx.unsupported("Hardmax needs a static size on axis ", axis, ", got ", shape_str(x.shape()));
  if (n.value() == 0) return x;
  Value idx = ctx.apply1("argmax", {x}, {{"axis", axis}, {"keepdims", false}});
  return ctx.apply1("one_hot", {idx}, {{"depth", n.value()}, {"axis", axis}, {"dtype", x.dtype()}});
}

// Before opset 13 these ops see x as 2-D [prod(dims[:axis]), prod(dims[axis:])] (axis
// default 1); from 13 they act on one axis (default -1).
Converter soft_converter(Soft kind) {
  return [kind](NodeContext& ctx) -> std::vector<Value> {
    Value x = ctx.input(0);
    int64_t rank = x.rank();
    if (ctx.opset() >= 13 || rank == 0)
      return {soft_on_axis(ctx, kind, x, normalize_axis(ctx, ctx.attr_int("axis", -1), rank))};
    int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 1), rank);
    if (axis == rank - 1) return {soft_on_axis(ctx, kind, x, axis)};
    // Static trailing dims: merge them into one axis (0 keeps a leading dim as it is).
    Shape tail(x.shape().begin() + axis, x.shape().end());
    if (is_static(tail)) {
      IntList flat(size_t(axis), 0), back(size_t(axis), 0);
      int64_t inner = 1;
      for (const Dim& d : tail) inner *= d.value(), back.push_back(d.value());
      if (inner == 0) return {x};  // nothing to normalise (and 0 would mean "copy")
      flat.push_back(inner);
      Value y = soft_on_axis(ctx, kind, ctx.apply1("reshape", {x}, {{"shape", flat}}), axis);
      return {ctx.apply1("reshape", {y}, {{"shape", back}})};
    }
    if (kind == Soft::hardmax)
      ctx.unsupported("Hardmax before opset 13 needs static dims from axis on, got ",
                      shape_str(x.shape()));
    // Symbolic dims: the same over the trailing axes, through logsumexp.
    Value lse = reduce(ctx, "logsumexp", x, iota_axes(axis, rank), true);
    Value logp = ctx.apply1("sub", {x, lse});
    return {kind == Soft::log_softmax ? logp : ctx.apply1("exp", {logp})};
  };
}

std::vector<Value> convert_lp_normalization(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail("expected p of 1 or 2, got ", p);
  Value norm = reduce(ctx, p == 1 ? "l1_norm" : "l2_norm", x, {axis}, true);
  return {ctx.apply1("div", {x, norm})};
}

// ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss -----------------------------

// loss[n, d…] = -logp[n, t, d…] * weight[t] with t = target[n, d…]; 0 where t is
// ignore_index. mean divides by the sum of the weights taken (their count unweighted).
Value nll_loss(NodeContext& ctx, Value logp, Value target, size_t weight_input) {
  if (!is_float(logp.dtype()))
    ctx.fail_type("expected float scores, got ", dtype_name(logp.dtype()));
  if (logp.rank() < 2 || target.rank() != logp.rank() - 1)
    ctx.fail("expected input [N, C, d...] and target [N, d...], got ", shape_str(logp.shape()),
             " and ", shape_str(target.shape()));
  std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail("expected reduction none, sum or mean, got '", reduction, "'");
  DType dt = logp.dtype();
  Value t = ctx.cast(target, DType::i64);
  Value keep;  // bool: target != ignore_index
  if (ctx.has_attr("ignore_index")) {
    keep = ctx.apply1("ne", {t, ctx.scalar(DType::i64, double(ctx.attr_int("ignore_index", 0)))});
    t = ctx.apply1("select", {keep, t, ctx.scalar(DType::i64, 0)});
  }
  Value picked =
      ctx.apply1("gather_elements", {logp, ctx.apply1("expand_dims", {t}, {{"axes", IntList{1}}})},
                 {{"axis", 1}});
  Value loss = ctx.apply1("neg", {ctx.apply1("squeeze", {picked}, {{"axes", IntList{1}}})});
  Value w;  // the weight of each target, or invalid for all ones
  if (ctx.num_inputs() > weight_input && ctx.has_input(weight_input))
    w = ctx.apply1("gather", {ctx.input(weight_input), t}, {{"axis", 0}});
  if (keep.valid())
    w = w.valid() ? ctx.apply1("select", {keep, w, ctx.scalar(dt, 0)}) : ctx.cast(keep, dt);
  if (w.valid()) loss = ctx.apply1("mul", {loss, w});
  if (reduction == "none") return loss;
  std::vector<int64_t> all = iota_axes(0, loss.rank());
  Value total = reduce(ctx, "sum", loss, all, false);
  if (reduction == "sum") return total;
  if (!w.valid()) return reduce(ctx, "mean", loss, all, false);
  return ctx.apply1("div", {total, reduce(ctx, "sum", w, all, false)});
}

std::vector<Value> convert_nll_loss(NodeContext& ctx) {
  return {nll_loss(ctx, ctx.input(0), ctx.input(1), 2)};
}

std::vector<Value> convert_sce_loss(NodeContext& ctx) {
  Value x = ctx.input(0);
  if (x.rank() < 2) ctx.fail("expected scores [N, C, d...], got ", shape_str(x.shape()));
  Value logp = ctx.apply1("log_softmax", {x}, {{"axis", 1}});
  Value loss = nll_loss(ctx, logp, ctx.input(1), 2);
  return {loss, ctx.num_outputs() > 1 && ctx.has_output(1) ? logp : Value{}};
}

// ---- Det ------------------------------------------------------------------------------

// f16 / bf16 go through f32 (the kernel accumulates in double anyway).
std::vector<Value> convert_det(NodeContext& ctx) {
  Value x = ctx.input(0);
  DType dt = x.dtype();
  if (dt != DType::f16 && dt != DType::bf16) return {ctx.apply1("onnx.det", {x})};
  return {ctx.cast(ctx.apply1("onnx.det", {ctx.cast(x, DType::f32)}), dt)};
}

}  // namespace

void register_reduce_converters() {
  register_reduce_onnx_ops();
  for (const ReduceEntry& e : kReduces)
    add_converter("", e.onnx, [&e](NodeContext& ctx) { return convert_reduce(ctx, e); });
  add_converter("", "ArgMax", arg_reduce("argmax"));
  add_converter("", "ArgMin", arg_reduce("argmin"));
  add_converter("", "CumSum", convert_cumsum);
  add_converter("", "Softmax", soft_converter(Soft::softmax));
  add_converter("", "LogSoftmax", soft_converter(Soft::log_softmax));
  add_converter("", "Hardmax", soft_converter(Soft::hardmax));
  add_converter("", "LpNormalization", convert_lp_normalization);
  add_converter("", "NegativeLogLikelihoodLoss", convert_nll_loss);
  add_converter("", "SoftmaxCrossEntropyLoss", convert_sce_loss);
  add_converter("", "Einsum", convert_einsum);
  add_converter("", "Det", convert_det);
}

}  // namespace rlx::onnx_import
