// ONNX converters: matrix products, convolutions, normalisations, dropout. The pools,
// Resize and the sampling ops are in convert_pool.cpp.
#include <cmath>
#include <numeric>

#include "frontend/onnx/context.h"
#include "frontend/onnx/convert_nn_util.h"
#include "frontend/onnx/ops/nn.h"

namespace rlx::onnx_import {

void register_pool_converters();  // convert_pool.cpp

// ---- shared helpers (convert_nn_util.h) ---------------------------------------------

std::string core_auto_pad(const NodeContext& ctx) {
  std::string p = ctx.attr_string("auto_pad", "NOTSET");
  if (p == "NOTSET" || p.empty()) return "explicit";
  if (p == "SAME_UPPER") return "same_upper";
  if (p == "SAME_LOWER") return "same_lower";
  if (p == "VALID") return "valid";
  ctx.fail("expected auto_pad NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '", p, "'");
}

Attrs window_attrs(const NodeContext& ctx) {
  Attrs a;
  std::string auto_pad = core_auto_pad(ctx);
  a.set("auto_pad", auto_pad);
  a.set("strides", ctx.attr_ints("strides"));
  a.set("dilations", ctx.attr_ints("dilations"));
  // ONNX allows pads next to an auto_pad that overrides them; the core op does not.
  if (auto_pad == "explicit") a.set("pads", ctx.attr_ints("pads"));
  return a;
}

void expect_spatial(const NodeContext& ctx, Value x, int64_t max_k) {
  int64_t k = x.rank() - 2;
  if (k < 1 || k > max_k)
    ctx.unsupported("expected input X of rank 3 to ", max_k + 2, " ([N, C, D1..Dk]), got ",
                    x.type().str());
}

Value nn_reshape(NodeContext& ctx, Value x, const std::vector<int64_t>& shape) {
  return ctx.apply1("reshape", {x}, {{"shape", IntList(shape)}});
}

// v [C] as [C, 1, ..., 1] for broadcasting against [N, C, D...] of rank `rank`.
Value per_channel(NodeContext& ctx, Value v, int64_t rank) {
  IntList axes;
  for (int64_t i = 2; i < rank; ++i) axes.push_back(i - 1);
  if (axes.empty()) return v;
  return ctx.apply1("expand_dims", {v}, {{"axes", axes}});
}

IntList nn_range(int64_t lo, int64_t hi) {
  IntList v;
  for (int64_t i = lo; i < hi; ++i) v.push_back(i);
  return v;
}

namespace {

Value binary(NodeContext& ctx, const char* op, Value a, Value b) { return ctx.apply1(op, {a, b}); }

// ---- MatMul, Gemm --------------------------------------------------------------------

std::vector<Value> convert_matmul(NodeContext& ctx) {
  return {ctx.apply1("matmul", {ctx.input(0), ctx.input(1)})};
}

// Y = alpha * op(A) @ op(B) + beta * C. The transposes of a constant B fold at import
// time, so a Linear layer ends as one matmul against a pre-transposed weight.
std::vector<Value> convert_gemm(NodeContext& ctx) {
  Value a = ctx.input(0), b = ctx.input(1);
  for (Value v : {a, b})
    if (v.rank() != 2) ctx.fail("expected 2-D inputs A and B, got ", v.type().str());
  Attrs t{{"perm", IntList{1, 0}}};
  if (ctx.attr_int("transA", 0)) a = ctx.apply1("transpose", {a}, t);
  if (ctx.attr_int("transB", 0)) b = ctx.apply1("transpose", {b}, t);
  double alpha = ctx.attr_float("alpha", 1.0), beta = ctx.attr_float("beta", 1.0);
  DType dt = a.dtype();
  if (alpha != 1.0 && ctx.constant_of(b)) {  // scale the constant operand
    b = binary(ctx, "mul", b, ctx.scalar(dt, alpha));
    alpha = 1.0;
  }
  Value y = ctx.apply1("matmul", {a, b});
  if (alpha != 1.0) y = binary(ctx, "mul", y, ctx.scalar(dt, alpha));
  if (ctx.has_input(2) && beta != 0.0) {
    Value c = ctx.input(2);
    if (beta != 1.0) c = binary(ctx, "mul", c, ctx.scalar(dt, beta));
    y = binary(ctx, "add", y, c);
  }
  return {y};
}

// ---- Conv, ConvTranspose -------------------------------------------------------------

std::vector<Value> convert_conv(NodeContext& ctx) {
  Value x = ctx.input(0), w = ctx.input(1);
  expect_spatial(ctx, x, 3);
  Attrs a = window_attrs(ctx);
  a.set("groups", ctx.attr_int("group", 1));
  std::vector<Value> in{x, w};
  if (ctx.has_input(2)) in.push_back(ctx.input(2));
  return {ctx.apply1("conv", in, a)};
}

std::vector<Value> convert_conv_transpose(NodeContext& ctx) {
  Value x = ctx.input(0), w = ctx.input(1);
  expect_spatial(ctx, x, 3);
  int64_t k = x.rank() - 2;
  Attrs a = window_attrs(ctx);
  int64_t groups = ctx.attr_int("group", 1);
  a.set("groups", groups);
  IntList opad = ctx.attr_ints("output_padding");
  IntList out_shape = ctx.attr_ints("output_shape");
  if (!out_shape.empty()) {
    // output_shape fixes the padding: total = s * (in - 1) + opad + eff - out, split as
    // auto_pad says (SAME_UPPER: the larger half at the end). Outputs past the natural
    // size (total < 0) get no contribution: zeros, then the bias.
    if (int64_t(out_shape.size()) == k + 2)
      out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    if (int64_t(out_shape.size()) != k)
      ctx.fail("expected output_shape of length ", k, ", got ", ints_str(out_shape));
    IntList strides = ctx.attr_ints("strides", IntList(size_t(k), 1));
    IntList dils = ctx.attr_ints("dilations", IntList(size_t(k), 1));
    IntList pads(size_t(2 * k), 0), extra(size_t(2 * k), 0);
    bool upper = core_auto_pad(ctx) == "same_upper";
    for (size_t i = 0; i < size_t(k); ++i) {
      const Dim& d = x.shape()[i + 2];
      const Dim& kd = w.shape()[i + 2];
      if (!d.is_static() || !kd.is_static())
        ctx.unsupported("expected static spatial dims with output_shape, got ", x.type().str());
      int64_t total = strides[i] * (d.value() - 1) + (opad.empty() ? 0 : opad[i]) +
                      (kd.value() - 1) * dils[i] + 1 - out_shape[i];
      if (total < 0) {
        extra[i + size_t(k)] = -total;
        continue;
      }
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[i + size_t(k)] = total - pads[i];
    }
    a.set("auto_pad", "explicit");
    a.set("pads", pads);
    a.set("output_padding", opad);
    Value y = ctx.apply1("conv_transpose", {x, w}, a);
    if (std::any_of(extra.begin(), extra.end(), [](int64_t e) { return e != 0; })) {
      IntList full(size_t(2 * (k + 2)), 0);
      for (size_t i = 0; i < size_t(k); ++i) full[size_t(k + 2) + 2 + i] = extra[size_t(k) + i];
      y = ctx.apply1("pad", {y}, {{"pads", full}});
    }
    if (ctx.has_input(2)) y = binary(ctx, "add", y, per_channel(ctx, ctx.input(2), y.rank()));
    return {y};
  }
  a.set("output_padding", opad);
  std::vector<Value> in{x, w};
  if (ctx.has_input(2)) in.push_back(ctx.input(2));
  return {ctx.apply1("conv_transpose", in, a)};
}

// ---- normalisations ------------------------------------------------------------------

// Casts every per-channel input to x's dtype (ONNX lets scale / bias / stats differ).
std::vector<Value> same_dtype_inputs(NodeContext& ctx, size_t n) {
  std::vector<Value> v;
  DType dt = ctx.input(0).dtype();
  for (size_t i = 0; i < n; ++i) v.push_back(ctx.cast(ctx.input(i), dt));
  return v;
}

std::vector<Value> convert_batch_norm(NodeContext& ctx) {
  std::vector<Value> in = same_dtype_inputs(ctx, 5);
  Value x = in[0];
  if (x.rank() < 2) ctx.fail("expected X of rank >= 2, got ", x.type().str());
  double eps = ctx.attr_float("epsilon", 1e-5);
  bool training = ctx.attr_int("training_mode", 0) != 0;
  if (ctx.opset() < 7 && ctx.attr_int("is_test", 0) == 0 && ctx.num_outputs() > 1) training = true;
  bool per_element = false;  // opsets 7-8 with spatial = 0: stats of shape [C, D...]
  for (size_t i = 1; i < 5; ++i) per_element |= in[i].rank() > 1;
  if (!training && per_element) {
    DType dt = x.dtype();
    auto lead = [&](Value v) { return ctx.apply1("expand_dims", {v}, {{"axes", IntList{0}}}); };
    Value inv = ctx.apply1("rsqrt", {binary(ctx, "add", in[4], ctx.scalar(dt, eps))});
    Value y = binary(ctx, "mul", binary(ctx, "sub", x, lead(in[3])),
                     lead(binary(ctx, "mul", inv, in[1])));
    return {binary(ctx, "add", y, lead(in[2]))};
  }
  if (!training) {
    std::vector<Value> out{ctx.apply1("batch_norm", in, {{"epsilon", eps}})};
    // Older opsets may name the running stats as outputs: inference passes them through.
    for (size_t i = 1; i < ctx.num_outputs(); ++i) out.push_back(i < 3 ? in[i + 2] : Value{});
    return out;
  }
  // Training: normalise with the batch statistics (population variance) and update the
  // running ones by momentum.
  DType dt = x.dtype();
  IntList axes{0};
  for (int64_t i = 2; i < x.rank(); ++i) axes.push_back(i);
  Value mean = ctx.apply1("mean", {x}, {{"axes", axes}});
  Value centred = binary(ctx, "sub", x, per_channel(ctx, mean, x.rank()));
  Value var = ctx.apply1("mean", {ctx.apply1("square", {centred})}, {{"axes", axes}});
  Value inv = ctx.apply1("rsqrt", {binary(ctx, "add", var, ctx.scalar(dt, eps))});
  Value y = binary(ctx, "mul", centred, per_channel(ctx, binary(ctx, "mul", inv, in[1]), x.rank()));
  y = binary(ctx, "add", y, per_channel(ctx, in[2], x.rank()));
  double m = ctx.attr_float("momentum", 0.9);
  auto blend = [&](Value running, Value batch) {
    return binary(ctx, "add", binary(ctx, "mul", running, ctx.scalar(dt, m)),
                  binary(ctx, "mul", batch, ctx.scalar(dt, 1.0 - m)));
  };
  std::vector<Value> out{y};
  if (ctx.num_outputs() > 1) out.push_back(blend(in[3], mean));
  if (ctx.num_outputs() > 2) out.push_back(blend(in[4], var));
  for (size_t i = 3; i < ctx.num_outputs(); ++i) out.push_back(Value{});
  return out;
}

// Mean and variance of x over `axes` (kept), in x's dtype.
std::pair<Value, Value> moments(NodeContext& ctx, Value x, const IntList& axes) {
  Attrs a{{"axes", axes}, {"keepdims", true}};
  Value mean = ctx.apply1("mean", {x}, a);
  Value var = ctx.apply1("mean", {ctx.apply1("square", {binary(ctx, "sub", x, mean)})}, a);
  return {mean, var};
}

std::vector<Value> convert_instance_norm(NodeContext& ctx) {
  std::vector<Value> in = same_dtype_inputs(ctx, 3);
  Value x = in[0];
  if (x.rank() < 3) ctx.fail("expected input of rank >= 3, got ", x.type().str());
  double eps = ctx.attr_float("epsilon", 1e-5);
  const Dim& c = x.shape()[1];
  if (c.is_static())  // one group per channel
    return {ctx.apply1("group_norm", in, {{"num_groups", c.value()}, {"epsilon", eps}})};
  auto [mean, var] = moments(ctx, x, nn_range(2, x.rank()));
  Value inv = ctx.apply1("rsqrt", {binary(ctx, "add", var, ctx.scalar(x.dtype(), eps))});
  Value y = binary(ctx, "mul", binary(ctx, "sub", x, mean), inv);
  y = binary(ctx, "mul", y, per_channel(ctx, in[1], x.rank()));
  return {binary(ctx, "add", y, per_channel(ctx, in[2], x.rank()))};
}

std::vector<Value> convert_group_norm(NodeContext& ctx) {
  std::vector<Value> in = same_dtype_inputs(ctx, 3);
  Value x = in[0];
  int64_t g = ctx.need_attr_int("num_groups");
  double eps = ctx.attr_float("epsilon", 1e-5);
  if (x.rank() < 3) ctx.fail("expected input of rank >= 3, got ", x.type().str());
  const Dim& c = x.shape()[1];
  if (!c.is_static()) ctx.unsupported("expected a static channel count, got ", x.type().str());
  // Opset 18 gave scale and bias per group; repeat each over its channels.
  for (size_t i = 1; i < 3; ++i) {
    const Dim& n = in[i].shape().at(0);
    if (n.is(g) && g != c.value()) {
      Value v = ctx.apply1("expand_dims", {in[i]}, {{"axes", IntList{1}}});
      v = ctx.apply1("broadcast_to", {v}, {{"shape", IntList{g, c.value() / g}}});
      in[i] = nn_reshape(ctx, v, {c.value()});
    }
  }
  return {ctx.apply1("group_norm", in, {{"num_groups", g}, {"epsilon", eps}})};
}

std::vector<Value> convert_layer_norm(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  double eps = ctx.attr_float("epsilon", 1e-5);
  DType dt = x.dtype();
  Shape tail(x.shape().begin() + axis, x.shape().end());
  bool want_stats = ctx.has_output(1) || ctx.has_output(2);
  auto fits = [&](size_t i) { return ctx.has_input(i) && ctx.input(i).shape() == tail; };
  if (!want_stats && (!ctx.has_input(1) || fits(1)) && (!ctx.has_input(2) || fits(2))) {
    std::vector<Value> in{x};
    for (size_t i = 1; i < 3 && ctx.has_input(i); ++i) in.push_back(ctx.cast(ctx.input(i), dt));
    return {ctx.apply1("layer_norm", in, {{"axis", axis}, {"epsilon", eps}})};
  }
  // With the stash outputs, or a scale / bias that only broadcasts: spelled out, in the
  // stash type.
  std::optional<DType> st = dtype_from_onnx(int32_t(ctx.attr_int("stash_type", 1)));
  DType sdt = st ? *st : DType::f32;
  Value xs = ctx.cast(x, sdt);
  auto [mean, var] = moments(ctx, xs, nn_range(axis, x.rank()));
  Value inv = ctx.apply1("rsqrt", {binary(ctx, "add", var, ctx.scalar(sdt, eps))});
  Value y = ctx.cast(binary(ctx, "mul", binary(ctx, "sub", xs, mean), inv), dt);
  if (ctx.has_input(1)) y = binary(ctx, "mul", y, ctx.cast(ctx.input(1), dt));
  if (ctx.has_input(2)) y = binary(ctx, "add", y, ctx.cast(ctx.input(2), dt));
  return {y, mean, inv};
}

// ONNX's function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
std::vector<Value> convert_mvn(NodeContext& ctx) {
  Value x = ctx.input(0);
  IntList axes = ctx.attr_ints("axes", {0, 2, 3});
  Attrs a{{"axes", axes}, {"keepdims", true}};
  Value mean = ctx.apply1("mean", {x}, a);
  Value ex2 = ctx.apply1("mean", {ctx.apply1("square", {x})}, a);
  Value var = binary(ctx, "sub", ex2, ctx.apply1("square", {mean}));
  Value sd = binary(ctx, "add", ctx.apply1("sqrt", {var}), ctx.scalar(x.dtype(), 1e-9));
  return {binary(ctx, "div", binary(ctx, "sub", x, mean), sd)};
}

std::vector<Value> convert_lp_norm(NodeContext& ctx) {
  Value x = ctx.input(0);
  int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail("expected p 1 or 2, got ", p);
  Value n = ctx.apply1(p == 1 ? "l1_norm" : "l2_norm", {x},
                       {{"axes", IntList{axis}}, {"keepdims", true}});
  return {binary(ctx, "div", x, n)};
}

// y = x / (bias + alpha / size * sum of x^2 over a window of `size` channels)^beta; the
// window sum is an average pool over the channel axis, with the padding counted.
std::vector<Value> convert_lrn(NodeContext& ctx) {
  Value x = ctx.input(0);
  if (x.rank() < 3) ctx.fail("expected input of rank >= 3, got ", x.type().str());
  int64_t size = ctx.need_attr_int("size");
  if (size < 1) ctx.fail("expected size >= 1, got ", size);
  double alpha = ctx.attr_float("alpha", 1e-4), beta = ctx.attr_float("beta", 0.75),
         bias = ctx.attr_float("bias", 1.0);
  DType dt = x.dtype();
  // x^2 as [N, 1, C, rest...] with at most three pooled dims.
  Value sq = ctx.apply1("square", {x});
  if (x.rank() <= 4) {
    sq = ctx.apply1("expand_dims", {sq}, {{"axes", IntList{1}}});
  } else {
    const Dim& c = x.shape()[1];
    if (!c.is_static()) ctx.unsupported("expected a static channel count, got ", x.type().str());
    sq = nn_reshape(ctx, sq, {0, 1, c.value(), -1});
  }
  int64_t before = (size - 1) / 2, after = size - 1 - before, k = sq.rank() - 2;
  IntList kernel(size_t(k), 1), pads(size_t(2 * k), 0);
  kernel[0] = size;
  pads[0] = before;
  pads[size_t(k)] = after;
  Value sum = ctx.apply1("avg_pool", {sq},
                         {{"kernel_shape", kernel}, {"pads", pads}, {"count_include_pad", true}});
  sum = ctx.apply1("reshape_like", {sum, x});
  Value d =
      binary(ctx, "add", ctx.scalar(dt, bias), binary(ctx, "mul", sum, ctx.scalar(dt, alpha)));
  d = binary(ctx, "pow", d, ctx.scalar(dt, beta));
  return {binary(ctx, "div", x, d)};
}

// ---- Dropout -------------------------------------------------------------------------

// Inference (training_mode false or absent) is the identity with an all-true mask. In
// training, elements are kept where a uniform draw is >= ratio and scaled by
// 1 / (1 - ratio); ratio and training_mode may be values computed at run time.
std::vector<Value> convert_dropout(NodeContext& ctx) {
  Value x = ctx.input(0);
  DType dt = x.dtype();
  // Opsets before 10 typed the mask like the data.
  DType mdt = ctx.opset() < 10 ? dt : DType::boolean;
  bool want_mask = ctx.num_outputs() > 1 && ctx.has_output(1);
  std::optional<double> ratio = ctx.attr_float("ratio", 0.5);
  std::optional<bool> training = false;
  Value ratio_v, training_v;
  if (ctx.opset() >= 12) {
    if (ctx.has_input(1)) {
      if (auto r = ctx.constant_input(1)) {
        ratio = r->to_doubles().at(0);
      } else {
        ratio.reset();
        ratio_v = ctx.input(1);
      }
    }
    if (ctx.has_input(2)) {
      if (auto t = ctx.constant_input(2)) {
        training = t->to_doubles().at(0) != 0.0;
      } else {
        training.reset();
        training_v = ctx.cast(ctx.input(2), DType::boolean);
      }
    }
  }
  // Opsets before 7 had is_test, default 0 (training), which inference graphs of that era
  // leave unset: like ONNX Runtime, rlx runs those as the identity.
  auto all_true = [&] { return ctx.apply1("broadcast_like", {ctx.scalar(mdt, 1.0), x}); };
  if ((training && !*training) || (ratio && *ratio == 0.0))
    return {x, want_mask ? all_true() : Value{}};
  if (ratio && !(*ratio >= 0.0 && *ratio < 1.0)) ctx.fail("expected ratio in [0, 1), got ", *ratio);
  if (!x.type().is_static())
    ctx.unsupported("training-mode Dropout of a dynamic shape, got ", x.type().str());
  std::vector<int64_t> shape;
  for (const Dim& d : x.shape()) shape.push_back(d.value());
  DType ut = is_float(dt) ? dt : DType::f32;
  Value u = ctx.apply1(
      "uniform", {}, {{"shape", IntList(shape)}, {"dtype", ut}, {"seed", ctx.attr_int("seed", 0)}});
  Value r = ratio ? ctx.scalar(ut, *ratio) : ctx.cast(ratio_v, ut);
  Value keep = ctx.apply1("ge", {u, r});
  Value scale =
      ctx.apply1("div", {ctx.scalar(ut, 1.0), ctx.apply1("sub", {ctx.scalar(ut, 1.0), r})});
  Value y = ctx.apply1("mul", {ctx.cast(x, ut), ctx.cast(scale, ut)});
  y = ctx.cast(ctx.apply1("select", {keep, y, ctx.scalar(ut, 0.0)}), dt);
  Value mask = ctx.cast(keep, mdt);
  if (!training) {  // decided at run time
    y = ctx.apply1("select", {training_v, y, x});
    mask = ctx.apply1("select", {training_v, mask, all_true()});
  }
  return {y, want_mask ? mask : Value{}};
}

}  // namespace

void register_nn_converters() {
  register_nn_onnx_ops();
  add_converter("", "MatMul", convert_matmul);
  add_converter("", "Gemm", convert_gemm);
  add_converter("", "Conv", convert_conv);
  add_converter("", "ConvTranspose", convert_conv_transpose);
  add_converter("", "BatchNormalization", convert_batch_norm);
  add_converter("", "InstanceNormalization", convert_instance_norm);
  add_converter("", "GroupNormalization", convert_group_norm);
  add_converter("", "LayerNormalization", convert_layer_norm);
  add_converter("", "MeanVarianceNormalization", convert_mvn);
  add_converter("", "LpNormalization", convert_lp_norm);
  add_converter("", "LRN", convert_lrn);
  add_converter("", "Dropout", convert_dropout);
  register_pool_converters();
}

}  // namespace rlx::onnx_import
