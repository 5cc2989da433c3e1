// ONNX converters: pools, Resize / Upsample, GridSample, RoiAlign, MaxUnpool.
#include <algorithm>
#include <cmath>

#include "frontend/onnx/context.h"
#include "frontend/onnx/convert_nn_util.h"

namespace rlx::onnx_import {

namespace {

Value binary(NodeContext& ctx, const char* op, Value a, Value b) { return ctx.apply1(op, {a, b}); }

// ---- pools ---------------------------------------------------------------------------

// The attributes of the core max_pool / avg_pool for this node.
Attrs pool_attrs(const NodeContext& ctx, Value x) {
  Attrs a = window_attrs(ctx);
  IntList kernel = ctx.attr_ints("kernel_shape");
  if (int64_t(kernel.size()) != x.rank() - 2)
    ctx.fail("expected kernel_shape of length ", x.rank() - 2, " for ", x.type().str(), ", got ",
             ints_str(kernel));
  a.set("kernel_shape", kernel);
  a.set("ceil_mode", ctx.attr_int("ceil_mode", 0) != 0);
  return a;
}

std::vector<Value> convert_max_pool(NodeContext& ctx) {
  Value x = ctx.input(0);
  expect_spatial(ctx, x, 3);
  Attrs a = pool_attrs(ctx, x);
  DType dt = x.dtype();
  // 8-bit integers pool exactly in f32.
  bool widen = dt == DType::i8 || dt == DType::u8;
  if (!is_float(dt) && !widen)
    ctx.fail_type("expected a float or 8-bit input, got ", x.type().str());
  if (widen) x = ctx.cast(x, DType::f32);
  Value y = ctx.apply1("max_pool", {x}, a);
  std::vector<Value> out{ctx.cast(y, dt)};
  if (ctx.has_output(1)) {
    a.set("storage_order", ctx.attr_int("storage_order", 0));
    out.push_back(ctx.apply1("onnx.max_pool_indices", {x}, a));
  }
  return out;
}

std::vector<Value> convert_avg_pool(NodeContext& ctx) {
  Value x = ctx.input(0);
  expect_spatial(ctx, x, 3);
  Attrs a = pool_attrs(ctx, x);
  a.set("count_include_pad", ctx.attr_int("count_include_pad", 0) != 0);
  return {ctx.apply1("avg_pool", {x}, a)};
}

std::vector<Value> convert_global_pool(NodeContext& ctx, const char* op) {
  Value x = ctx.input(0);
  if (x.rank() < 3) ctx.fail("expected input of rank >= 3, got ", x.type().str());
  return {ctx.apply1(op, {x})};
}

// |x|^p; p = 1 and 2 without pow.
Value abs_pow(NodeContext& ctx, Value x, int64_t p) {
  if (p == 2) return ctx.apply1("square", {x});
  Value a = ctx.apply1("abs", {x});
  return p == 1 ? a : binary(ctx, "pow", a, ctx.scalar(x.dtype(), double(p)));
}

Value root(NodeContext& ctx, Value x, int64_t p) {
  if (p == 1) return x;
  if (p == 2) return ctx.apply1("sqrt", {x});
  return binary(ctx, "pow", x, ctx.scalar(x.dtype(), 1.0 / double(p)));
}

// (sum over the window of |x|^p)^(1/p): the sum is an average pool counting the padding,
// times the window size.
std::vector<Value> convert_lp_pool(NodeContext& ctx) {
  Value x = ctx.input(0);
  expect_spatial(ctx, x, 3);
  int64_t p = ctx.attr_int("p", 2);
  if (p < 1) ctx.fail("expected p >= 1, got ", p);
  Attrs a = pool_attrs(ctx, x);
  const IntList kernel = a.get_ints("kernel_shape");
  if (a.get_bool("ceil_mode") && a.get_string("auto_pad") != "same_upper" &&
      a.get_string("auto_pad") != "same_lower") {
    // The windows past the end in ceil mode cover zeros: padding that makes floor mode
    // give the same windows keeps every window whole.
    size_t k = kernel.size();
    IntList strides = ctx.attr_ints("strides", IntList(k, 1));
    IntList dils = ctx.attr_ints("dilations", IntList(k, 1));
    IntList pads = a.get_string("auto_pad") == "valid" ? IntList(2 * k, 0)
                                                       : ctx.attr_ints("pads", IntList(2 * k, 0));
    for (size_t i = 0; i < k; ++i) {
      const Dim& d = x.shape()[i + 2];
      if (!d.is_static()) ctx.unsupported("LpPool in ceil mode over a symbolic dim");
      int64_t eff = dils[i] * (kernel[i] - 1) + 1, st = strides[i];
      int64_t span = d.value() + pads[i] + pads[i + k] - eff;
      int64_t o = (span + st - 1) / st + 1;  // ceil; span >= 0 for a valid window
      if (o > 1 && (o - 1) * st >= d.value() + pads[i]) --o;
      pads[i + k] += std::max<int64_t>(0, (o - 1) * st + eff - (d.value() + pads[i] + pads[i + k]));
    }
    a.set("auto_pad", "explicit");
    a.set("pads", pads);
    a.set("ceil_mode", false);
  }
  a.set("count_include_pad", true);
  int64_t n = 1;
  for (int64_t k : kernel) n *= k;
  Value s = ctx.apply1("avg_pool", {abs_pow(ctx, x, p)}, a);
  s = binary(ctx, "mul", s, ctx.scalar(x.dtype(), double(n)));
  return {root(ctx, s, p)};
}

std::vector<Value> convert_global_lp_pool(NodeContext& ctx) {
  Value x = ctx.input(0);
  if (x.rank() < 3) ctx.fail("expected input of rank >= 3, got ", x.type().str());
  int64_t p = ctx.attr_int("p", 2);
  Value s = ctx.apply1("sum", {abs_pow(ctx, x, p)},
                       {{"axes", nn_range(2, x.rank())}, {"keepdims", true}});
  return {root(ctx, s, p)};
}

// ---- MaxUnpool -----------------------------------------------------------------------

// Scatters X into zeros of the shape the window implies, at the flat positions I
// (MaxPool's Indices); an output_shape only pads that with zeros at the ends, as the
// ONNX reference does.
std::vector<Value> convert_max_unpool(NodeContext& ctx) {
  Value x = ctx.input(0), idx = ctx.input(1);
  expect_spatial(ctx, x, 3);
  size_t k = size_t(x.rank() - 2);
  if (!x.type().is_static()) ctx.unsupported("expected a static input shape, got ", x.type().str());
  IntList kernel = ctx.attr_ints("kernel_shape");
  IntList strides = ctx.attr_ints("strides", IntList(k, 1));
  IntList pads = ctx.attr_ints("pads", IntList(2 * k, 0));
  if (kernel.size() != k || strides.size() != k || pads.size() != 2 * k)
    ctx.fail("expected kernel_shape and strides of length ", k, " and pads of ", 2 * k);
  std::vector<int64_t> shape{x.shape()[0].value(), x.shape()[1].value()};
  for (size_t i = 0; i < k; ++i)
    shape.push_back((x.shape()[i + 2].value() - 1) * strides[i] + kernel[i] - pads[i] -
                    pads[i + k]);
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  Value zeros = ctx.constant(Tensor::zeros(x.dtype(), {total}));
  Value flat_i = nn_reshape(ctx, ctx.cast(idx, DType::i64), {-1});
  Value y = ctx.apply1("scatter_elements", {zeros, flat_i, nn_reshape(ctx, x, {-1})},
                       {{"axis", int64_t(0)}});
  y = nn_reshape(ctx, y, shape);
  if (!ctx.has_input(2)) return {y};
  if (auto out = ctx.constant_input(2)) {
    std::vector<double> o = out->to_doubles();
    if (o.size() != shape.size())
      ctx.fail("expected output_shape of length ", shape.size(), ", got ", o.size());
    IntList p(2 * shape.size(), 0);
    for (size_t i = 0; i < shape.size(); ++i) {
      p[shape.size() + i] = int64_t(o[i]) - shape[i];
      if (p[shape.size() + i] < 0)
        ctx.fail("expected output_shape no smaller than ", ints_str(shape));
    }
    return {ctx.apply1("pad", {y}, {{"pads", p}})};
  }
  return {ctx.apply1("onnx.zero_extend", {y, ctx.cast(ctx.input(2), DType::i64)})};
}

// ---- Resize, Upsample ----------------------------------------------------------------

struct ResizeSpec {
  std::string mode = "nearest", transform = "half_pixel", nearest = "round_prefer_floor";
  std::vector<double> scales;  // per dim, used for the coordinates
  std::vector<int64_t> sizes;  // per dim; empty: floor(dim * scale)
  std::vector<double> roi;     // starts then ends, per dim
};

// Emits a resize: the core op when it covers the modes, onnx.resize otherwise.
Value emit_resize(NodeContext& ctx, Value x, const ResizeSpec& s) {
  size_t r = size_t(x.rank());
  std::string transform = s.transform;
  // pytorch_half_pixel is half_pixel unless a dim resizes to one element.
  if (transform == "pytorch_half_pixel") {
    bool any_one = false;
    for (size_t i = 0; i < r; ++i) {
      int64_t o = s.sizes.empty()
                      ? (x.shape()[i].is_static()
                             ? int64_t(std::floor(double(x.shape()[i].value()) * s.scales[i]))
                             : -1)
                      : s.sizes[i];
      any_one |= o == 1 && !x.shape()[i].is(1);
      any_one |= o < 0;
    }
    if (!any_one) transform = "half_pixel";
  }
  // align_corners divides by in * scale - 1, which the core takes as out - 1: equal
  // when in * scale is a whole number.
  if (transform == "align_corners" && s.sizes.empty())
    for (size_t i = 0; i < r; ++i) {
      const Dim& d = x.shape()[i];
      double o = d.is_static() ? double(d.value()) * s.scales[i] : 0.5;
      if (o != std::floor(o)) transform = "generic";
    }
  // Opset 10 and Upsample round as ONNX Runtime's "simple" mode: up when the dim shrinks,
  // down otherwise (a dim of scale 1 maps to whole coordinates either way).
  std::string nearest = s.nearest;
  if (nearest == "simple" && s.mode != "nearest") nearest = "floor";  // unused
  if (nearest == "simple") {
    bool down = std::any_of(s.scales.begin(), s.scales.end(), [](double v) { return v < 1.0; });
    bool up = std::any_of(s.scales.begin(), s.scales.end(), [](double v) { return v > 1.0; });
    nearest = down ? (up ? "simple" : "ceil") : "floor";
  }
  bool exclude = ctx.attr_int("exclude_outside", 0) != 0;
  bool antialias = ctx.attr_int("antialias", 0) != 0 &&
                   std::any_of(s.scales.begin(), s.scales.end(), [](double v) { return v < 1.0; });
  bool core =
      (s.mode == "nearest" || s.mode == "linear") && !antialias && nearest != "simple" &&
      (transform == "half_pixel" || transform == "align_corners" || transform == "asymmetric") &&
      (s.mode == "nearest" || is_float(x.dtype()));
  // keep_aspect_ratio_policy's scale is not out / in: the core takes it as `scales`
  // when its floor(in * scale) gives the same sizes.
  bool by_scales = s.sizes.empty();
  for (size_t i = 0; i < r && !by_scales; ++i) {
    const Dim& d = x.shape()[i];
    if (d.is_static() && s.scales[i] != double(s.sizes[i]) / double(d.value())) by_scales = true;
  }
  if (by_scales && !s.sizes.empty())
    for (size_t i = 0; i < r; ++i) {
      const Dim& d = x.shape()[i];
      if (!d.is_static() || int64_t(std::floor(double(d.value()) * s.scales[i])) != s.sizes[i])
        core = false;
    }
  if (core) {
    Attrs a{{"mode", s.mode}, {"coordinate_transformation", transform}, {"nearest_mode", nearest}};
    if (by_scales)
      a.set("scales", FloatList(s.scales));
    else
      a.set("sizes", IntList(s.sizes));
    return ctx.apply1("resize", {x}, a);
  }
  if (std::find(s.scales.begin(), s.scales.end(), 0.0) != s.scales.end())
    ctx.unsupported("Resize mode '", s.mode, "' with coordinates '", s.transform,
                    "' by sizes of a symbolic dim, got ", x.type().str());
  Attrs a{{"mode", s.mode},
          {"coordinate_transformation_mode", s.transform},
          {"nearest_mode", nearest},
          {"scales", FloatList(s.scales)},
          {"sizes", IntList(s.sizes)},
          {"roi", FloatList(s.roi)},
          {"cubic_coeff_a", ctx.attr_float("cubic_coeff_a", -0.75)},
          {"exclude_outside", exclude},
          {"extrapolation_value", ctx.attr_float("extrapolation_value", 0.0)},
          {"antialias", antialias}};
  return ctx.apply1("onnx.resize", {x}, a);
}

std::vector<Value> convert_resize(NodeContext& ctx) {
  Value x = ctx.input(0);
  size_t r = size_t(x.rank());
  ResizeSpec s;
  s.mode = ctx.attr_string("mode", "nearest");
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic")
    ctx.fail("expected mode nearest, linear or cubic, got '", s.mode, "'");
  bool v10 = ctx.opset() < 11;
  s.transform =
      v10 ? "asymmetric" : ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  s.nearest = v10 ? "simple" : ctx.attr_string("nearest_mode", "round_prefer_floor");
  IntList axes = ctx.attr_ints("axes");
  if (axes.empty()) axes = nn_range(0, int64_t(r));
  for (int64_t& a : axes) a = normalize_axis(ctx, a, int64_t(r));

  std::optional<std::vector<double>> scales, roi;
  std::optional<std::vector<int64_t>> sizes;
  if (v10) {
    scales = ctx.floats_input(1);
  } else {
    if (ctx.has_input(1) && s.transform == "tf_crop_and_resize") roi = ctx.floats_input(1);
    if (ctx.has_input(2)) scales = ctx.floats_input(2);
    if (ctx.has_input(3)) sizes = ctx.ints_input(3);
  }
  if (scales && scales->empty()) scales.reset();
  if (sizes && sizes->empty()) sizes.reset();
  if (scales.has_value() == sizes.has_value())
    ctx.fail("expected exactly one of the scales and sizes inputs");
  size_t na = axes.size();
  if ((scales ? scales->size() : sizes->size()) != na)
    ctx.fail("expected ", na, " scales or sizes (one per axis), got ",
             scales ? scales->size() : sizes->size());
  s.scales.assign(r, 1.0);
  if (scales) {
    for (size_t j = 0; j < na; ++j) s.scales[size_t(axes[j])] = (*scales)[j];
  } else {
    std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
    // A symbolic dim keeps its size and gets scale 0 ("unknown"), which only the core
    // resize (reading out / in at run time) handles.
    std::vector<int64_t> in(r, 0);
    for (size_t i = 0; i < r; ++i)
      if (x.shape()[i].is_static()) in[i] = x.shape()[i].value();
    s.sizes = in;
    for (size_t i = 0; i < r; ++i) {
      bool resized = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
      if (!x.shape()[i].is_static() && (!resized || policy != "stretch"))
        ctx.unsupported("Resize by sizes of a symbolic dim, got ", x.type().str());
    }
    if (policy == "stretch") {
      for (size_t j = 0; j < na; ++j) {
        size_t d = size_t(axes[j]);
        s.sizes[d] = (*sizes)[j];
        s.scales[d] = in[d] == 0 ? 0.0 : double((*sizes)[j]) / double(in[d]);
      }
    } else {
      if (policy != "not_larger" && policy != "not_smaller")
        ctx.fail("expected keep_aspect_ratio_policy stretch, not_larger or not_smaller, got '",
                 policy, "'");
      double sc = policy == "not_larger" ? 1e300 : 0.0;
      for (size_t j = 0; j < na; ++j) {
        double v = double((*sizes)[j]) / double(in[size_t(axes[j])]);
        sc = policy == "not_larger" ? std::min(sc, v) : std::max(sc, v);
      }
      for (size_t j = 0; j < na; ++j) {
        size_t d = size_t(axes[j]);
        s.sizes[d] = int64_t(std::floor(sc * double(in[d]) + 0.5));
        s.scales[d] = sc;
      }
    }
  }
  if (s.transform == "tf_crop_and_resize") {
    if (!roi || roi->size() != 2 * na)
      ctx.fail("expected a roi of ", 2 * na, " values for tf_crop_and_resize");
    s.roi.assign(r, 0.0);
    s.roi.resize(2 * r, 1.0);
    for (size_t j = 0; j < na; ++j) {
      s.roi[size_t(axes[j])] = (*roi)[j];
      s.roi[r + size_t(axes[j])] = (*roi)[na + j];
    }
  }
  return {emit_resize(ctx, x, s)};
}

// Upsample (opsets 7 - 9): Resize by scales with asymmetric coordinates.
std::vector<Value> convert_upsample(NodeContext& ctx) {
  Value x = ctx.input(0);
  ResizeSpec s;
  s.mode = ctx.attr_string("mode", "nearest");
  if (s.mode == "bilinear") s.mode = "linear";
  s.transform = "asymmetric";
  s.nearest = "simple";
  if (ctx.has_input(1))
    s.scales = *ctx.floats_input(1);
  else
    s.scales = ctx.attr_floats("scales");
  if (int64_t(s.scales.size()) != x.rank())
    ctx.fail("expected ", x.rank(), " scales, got ", s.scales.size());
  return {emit_resize(ctx, x, s)};
}

// ---- GridSample, RoiAlign ------------------------------------------------------------

std::vector<Value> convert_grid_sample(NodeContext& ctx) {
  Attrs a{{"mode", ctx.attr_string("mode", ctx.opset() < 20 ? "bilinear" : "linear")},
          {"padding_mode", ctx.attr_string("padding_mode", "zeros")},
          {"align_corners", ctx.attr_int("align_corners", 0) != 0}};
  return {ctx.apply1("onnx.grid_sample", {ctx.input(0), ctx.input(1)}, a)};
}

std::vector<Value> convert_roi_align(NodeContext& ctx) {
  Attrs a{{"mode", ctx.attr_string("mode", "avg")},
          {"output_height", ctx.attr_int("output_height", 1)},
          {"output_width", ctx.attr_int("output_width", 1)},
          {"sampling_ratio", ctx.attr_int("sampling_ratio", 0)},
          {"spatial_scale", ctx.attr_float("spatial_scale", 1.0)},
          {"coordinate_transformation_mode",
           ctx.attr_string("coordinate_transformation_mode",
                           ctx.opset() < 16 ? "output_half_pixel" : "half_pixel")}};
  return {ctx.apply1("onnx.roi_align", {ctx.input(0), ctx.input(1), ctx.input(2)}, a)};
}

}  // namespace

void register_pool_converters() {
  add_converter("", "MaxPool", convert_max_pool);
  add_converter("", "AveragePool", convert_avg_pool);
  add_converter("", "GlobalMaxPool",
                [](NodeContext& ctx) { return convert_global_pool(ctx, "global_max_pool"); });
  add_converter("", "GlobalAveragePool",
                [](NodeContext& ctx) { return convert_global_pool(ctx, "global_avg_pool"); });
  add_converter("", "LpPool", convert_lp_pool);
  add_converter("", "GlobalLpPool", convert_global_lp_pool);
  add_converter("", "MaxUnpool", convert_max_unpool);
  add_converter("", "Resize", convert_resize);
  add_converter("", "Upsample", convert_upsample);
  add_converter("", "GridSample", convert_grid_sample);
  add_converter("", "RoiAlign", convert_roi_align);
}

}  // namespace rlx::onnx_import
