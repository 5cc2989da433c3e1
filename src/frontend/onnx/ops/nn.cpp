// ONNX-only nn ops, registered through the public op and kernel registries:
//   onnx.resize            Resize in the modes the core resize lacks (cubic, antialias,
//                          tf_crop_and_resize, half_pixel_symmetric, exclude_outside)
//   onnx.grid_sample       GridSample (N-D, linear / nearest / cubic, three paddings)
//   onnx.roi_align         RoiAlign (avg / max, both coordinate modes)
//   onnx.max_pool_indices  the Indices output of MaxPool (flat, row or column major)
//   onnx.zero_extend       zero padding at the end up to a shape given at run time
// The kernels compute in double: these are rare ops, kept simple and exact to the spec.
#include "frontend/onnx/ops/nn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "rlx/axes.h"
#include "rlx/kernel.h"
#include "rlx/op.h"
#include "rlx/parallel.h"

namespace rlx::onnx_import {

namespace {

using Types = std::vector<TensorType>;

std::vector<double> read(const Tensor& t) { return t.to_doubles(); }

void write(Tensor& t, const std::vector<double>& v) {
  auto* p = static_cast<char*>(t.data());
  size_t sz = dtype_size(t.dtype());
  for (size_t i = 0; i < v.size(); ++i) store_double(t.dtype(), p + i * sz, v[i]);
}

void expect_float_input(const InferContext& ctx, size_t i, std::string_view role) {
  if (!is_float(ctx.dtype(i)))
    ctx.fail_type("expected a float ", role, " (input ", i, "), got ", ctx.input(i).str());
}

// ---- onnx.resize ----------------------------------------------------------------------

// One output index of one axis: the taps it reads and whether it lies outside the input
// (tf_crop_and_resize's extrapolation).
struct Taps {
  std::vector<int64_t> idx;
  std::vector<double> w;
  bool outside = false;
};

double source_coord(const Attrs& a, size_t d, int64_t j, int64_t in, int64_t out, double s,
                    bool& outside) {
  const std::string& m = a.get_string("coordinate_transformation_mode");
  double x = double(j);
  if (m == "align_corners") {  // over the fractional output width in * s, as the reference
    double ow = s * double(in);
    return ow == 1.0 ? 0.0 : x * double(in - 1) / (ow - 1.0);
  }
  if (m == "asymmetric") return x / s;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / s;
  if (m == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / s - 0.5 : 0.0;
  if (m == "half_pixel_symmetric") {
    double adjust = double(out) / (s * double(in));
    double offset = double(in) / 2.0 * (1.0 - adjust);
    return offset + (x + 0.5) / s - 0.5;
  }
  if (m == "tf_crop_and_resize") {
    FloatList roi = a.get_floats("roi");
    size_t r = roi.size() / 2;
    double lo = roi[d], hi = roi[d + r];
    double v = out == 1 ? (hi - lo) * double(in - 1) / 2.0
                        : x * (hi - lo) * double(in - 1) / double(out - 1);
    v += lo * double(in - 1);
    outside = v < 0.0 || v > double(in - 1);
    return v;
  }
  return (x + 0.5) / s - 0.5;  // half_pixel
}

double cubic_weight(double x, double A) {
  x = std::abs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0.0;
}

// The taps of one output index, as the ONNX reference picks them: the n input indices
// nearest x (edge-padded: clamped), with weights of the filter at their distances.
Taps resize_taps(const Attrs& a, size_t d, int64_t j, int64_t in, int64_t out, double s) {
  Taps t;
  double x = source_coord(a, d, j, in, out, s, t.outside);
  const std::string& mode = a.get_string("mode");
  double fl = std::floor(x);
  int64_t base = int64_t(fl);
  double ratio = x - fl;
  if (ratio == 0.0) {  // an integer coordinate reads its left neighbour with ratio 1
    base -= 1;
    ratio = 1.0;
  }
  std::vector<int64_t> pos;
  if (mode == "nearest") {
    const std::string& nm = a.get_string("nearest_mode");
    bool up = ratio == 1.0 || nm == "ceil" || (nm == "simple" && s < 1.0) ||
              (nm == "round_prefer_floor" && ratio > 0.5) ||
              (nm == "round_prefer_ceil" && ratio >= 0.5);
    pos.push_back(base + (up ? 1 : 0));
    t.w.push_back(1.0);
  } else {
    bool cubic = mode == "cubic";
    double se = a.get_bool("antialias") ? std::min(s, 1.0) : 1.0;
    int64_t start = int64_t(std::floor((cubic ? -2.0 : -1.0) / se)) + 1;
    int64_t n = 2 - 2 * start;
    double A = a.get_float("cubic_coeff_a");
    double sum = 0.0;
    for (int64_t k = start; k < start + n; ++k) {
      double arg = (double(k) - ratio) * se;
      double w = cubic ? cubic_weight(arg, A) : std::max(0.0, 1.0 - std::abs(arg));
      pos.push_back(base + k);
      t.w.push_back(w);
    }
    if (a.get_bool("exclude_outside"))
      for (size_t i = 0; i < pos.size(); ++i)
        if (pos[i] < 0 || pos[i] >= in) t.w[i] = 0.0;
    for (double w : t.w) sum += w;
    bool normalise = a.get_bool("antialias") || a.get_bool("exclude_outside");
    if (normalise && sum != 0.0)
      for (double& w : t.w) w /= sum;
  }
  for (int64_t p : pos) t.idx.push_back(std::clamp<int64_t>(p, 0, in - 1));
  return t;
}

Types infer_resize(const InferContext& ctx) {
  const Attrs& a = ctx.attrs();
  const IntList& sizes = a.get_ints("sizes");
  FloatList scales = a.get_floats("scales");
  size_t r = size_t(ctx.rank(0));
  if (scales.size() != r || (!sizes.empty() && sizes.size() != r))
    ctx.fail("expected scales (and sizes, when given) of length ", r, ", got ", scales.size(),
             " and ", sizes.size());
  if (a.get_string("mode") != "nearest") expect_float_input(ctx, 0, "X");
  if (a.get_string("coordinate_transformation_mode") == "tf_crop_and_resize" &&
      a.get_floats("roi").size() != 2 * r)
    ctx.fail("expected a roi of ", 2 * r, " values for tf_crop_and_resize, got ",
             a.get_floats("roi").size());
  Shape out = ctx.shape(0);
  for (size_t i = 0; i < r; ++i) {
    if (!(scales[i] > 0.0) || !std::isfinite(scales[i]))
      ctx.fail("expected finite scales > 0, got ", scales[i]);
    if (!sizes.empty() && sizes[i] < 0) ctx.fail("expected sizes >= 0, got ", sizes[i]);
    if (!sizes.empty())
      out[i] = Dim(sizes[i]);
    else if (out[i].is_static())
      out[i] = Dim(int64_t(std::floor(double(out[i].value()) * scales[i])));
    else
      out[i] = Dim::unknown();
  }
  return {{ctx.dtype(0), out}};
}

void resize_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Tensor& x = in[0];
  const Attrs& a = ctx.attrs;
  FloatList scales = a.get_floats("scales");
  std::vector<int64_t> shape = x.shape(), oshape = a.get_ints("sizes");
  if (oshape.empty())
    for (size_t i = 0; i < shape.size(); ++i)
      oshape.push_back(int64_t(std::floor(double(shape[i]) * scales[i])));
  if (!out[0].defined()) out[0] = Tensor::empty(x.dtype(), oshape);
  size_t r = shape.size();
  std::vector<double> cur = read(x);
  std::vector<std::vector<bool>> outside(r);
  for (size_t d = r; d-- > 0;) {  // innermost first, as the reference recurses
    int64_t n_in = shape[d], n_out = oshape[d];
    outside[d].assign(size_t(n_out), false);
    if (n_out == 0 || n_in == 0) {
      shape[d] = n_out;
      cur.assign(size_t(dims_product(shape)), 0.0);
      continue;
    }
    std::vector<Taps> taps;
    for (int64_t j = 0; j < n_out; ++j) {
      taps.push_back(resize_taps(a, d, j, n_in, n_out, scales[d]));
      outside[d][size_t(j)] = taps.back().outside;
    }
    int64_t outer = dims_product(shape, 0, d), inner = dims_product(shape, d + 1);
    std::vector<double> next(size_t(outer * n_out * inner), 0.0);
    parallel_for(outer * n_out, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        int64_t o = row / n_out;
        const Taps& t = taps[size_t(row % n_out)];
        double* q = next.data() + row * inner;
        for (size_t k = 0; k < t.idx.size(); ++k) {
          const double* p = cur.data() + (o * n_in + t.idx[k]) * inner;
          for (int64_t i = 0; i < inner; ++i) q[i] += t.w[k] * p[i];
        }
      }
    });
    shape[d] = n_out;
    cur = std::move(next);
  }
  if (a.get_string("coordinate_transformation_mode") == "tf_crop_and_resize") {
    double e = a.get_float("extrapolation_value");
    std::vector<int64_t> idx(r, 0);
    for (size_t i = 0; i < cur.size(); ++i) {
      bool out_of = false;
      for (size_t d = 0; d < r; ++d) out_of |= outside[d][size_t(idx[d])];
      if (out_of) cur[i] = e;
      for (size_t d = r; d-- > 0;)
        if (++idx[d] < shape[d])
          break;
        else
          idx[d] = 0;
    }
  }
  bool integer = !is_float(x.dtype());
  if (integer)  // as the reference's astype: truncation
    for (double& v : cur) v = std::trunc(v);
  write(out[0], cur);
}

void register_resize() {
  OpDef d;
  d.name = "onnx.resize";
  d.arity(1)
      .attr("sizes", AttrKind::Ints, AttrValue(IntList{}))
      .attr("scales", AttrKind::Floats)
      .attr("roi", AttrKind::Floats, AttrValue(FloatList{}))
      .attr("mode", AttrKind::String, AttrValue("nearest"), {"nearest", "linear", "cubic"})
      .attr("coordinate_transformation_mode", AttrKind::String, AttrValue("half_pixel"),
            {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
             "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn"})
      .attr("nearest_mode", AttrKind::String, AttrValue("round_prefer_floor"),
            {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
      .attr("cubic_coeff_a", AttrKind::Float, AttrValue(-0.75))
      .attr("exclude_outside", AttrKind::Bool, AttrValue(false))
      .attr("extrapolation_value", AttrKind::Float, AttrValue(0.0))
      .attr("antialias", AttrKind::Bool, AttrValue(false));
  d.doc =
      "ONNX Resize, every mode: output dim i is sizes[i] or floor(dim * scales[i]); "
      "coordinates use scales[i]. nearest_mode 'simple' (Resize-10, Upsample): ceil "
      "along dims that shrink, floor elsewhere.";
  d.infer = infer_resize;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.resize", DeviceKind::cpu, resize_kernel);
}

// ---- onnx.grid_sample -------------------------------------------------------------------

double reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = int64_t(dx / rng);
    double r = dx - double(n) * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = int64_t(dx / rng);
    double r = dx - double(n) * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

Types infer_grid_sample(const InferContext& ctx) {
  expect_float_input(ctx, 0, "X");
  expect_float_input(ctx, 1, "grid");
  int64_t k = ctx.rank(0) - 2;
  if (k < 1 || ctx.rank(1) != k + 2)
    ctx.fail("expected X [N, C, D1..Dk] and grid [N, O1..Ok, k], got ", ctx.input(0).str(), " and ",
             ctx.input(1).str());
  const Shape &x = ctx.shape(0), &g = ctx.shape(1);
  if (g.back().is_static() && g.back().value() != k)
    ctx.fail("expected grid's last dim ", k, ", got ", ctx.input(1).str());
  if (x[0].is_static() && g[0].is_static() && x[0].value() != g[0].value())
    ctx.fail("expected X and grid of one batch size, got ", ctx.input(0).str(), " and ",
             ctx.input(1).str());
  Shape out{x[0], x[1]};
  out.insert(out.end(), g.begin() + 1, g.end() - 1);
  return {{ctx.dtype(0), out}};
}

void grid_sample_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                        std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  std::string mode = a.get_string("mode");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  const std::string& pad = a.get_string("padding_mode");
  bool corners = a.get_bool("align_corners");
  const std::vector<int64_t>& xs = in[0].shape();
  size_t k = xs.size() - 2;
  std::vector<int64_t> dims(xs.begin() + 2, xs.end());
  int64_t N = xs[0], C = xs[1], plane = dims_product(dims);
  int64_t points = dims_product(in[1].shape(), 1, 1 + k);
  if (in[1].shape()[0] != N)
    rlx::fail<ValueError>("onnx.grid_sample", "expected X and grid of one batch size, got ", N,
                          " and ", in[1].shape()[0]);
  std::vector<double> x = read(in[0]), g = read(in[1]), y(size_t(N * C * points));
  std::vector<double> lo(k), hi(k);
  for (size_t i = 0; i < k; ++i) {
    lo[i] = corners ? 0.0 : -0.5;
    hi[i] = corners ? double(dims[i] - 1) : double(dims[i]) - 0.5;
  }
  // The input index a tap reads along dim i, or -1 for a zero (padding "zeros").
  auto tap_index = [&](int64_t t, size_t i) -> int64_t {
    int64_t d = dims[i];
    if (pad == "zeros") return t >= 0 && t < d ? t : -1;
    if (pad == "border") return std::clamp<int64_t>(t, 0, d - 1);
    return std::clamp<int64_t>(int64_t(reflect(double(t), lo[i], hi[i])), 0, d - 1);
  };
  parallel_for(N * points, 1, [&](int64_t np0, int64_t np1) {
    std::vector<std::vector<int64_t>> idx(k);
    std::vector<std::vector<double>> wt(k);
    std::vector<size_t> it(k, 0);
    for (int64_t np = np0; np < np1; ++np) {
      int64_t n = np / points, p = np % points;
      const double* gp = g.data() + (n * points + p) * int64_t(k);
      for (size_t i = 0; i < k; ++i) {
        double nx = gp[k - 1 - i];  // the grid lists coordinates innermost first
        double c =
            corners ? (nx + 1) / 2.0 * double(dims[i] - 1) : ((nx + 1) * double(dims[i]) - 1) / 2.0;
        if (mode == "nearest") c = k == 3 ? std::round(c) : std::nearbyint(c);
        if (c < lo[i] || c > hi[i]) {
          if (pad == "border") c = std::clamp(c, 0.0, double(dims[i] - 1));
          if (pad == "reflection") c = reflect(c, lo[i], hi[i]);
        }
        idx[i].clear();
        wt[i].clear();
        if (mode == "nearest") {
          idx[i].push_back(tap_index(int64_t(c), i));
          wt[i].push_back(1.0);
          continue;
        }
        double f = std::floor(c), r = c - f;
        if (mode == "linear") {
          idx[i] = {tap_index(int64_t(f), i), tap_index(int64_t(f) + 1, i)};
          wt[i] = {1 - r, r};
        } else {
          for (int64_t t = -1; t <= 2; ++t) {
            idx[i].push_back(tap_index(int64_t(f) + t, i));
            wt[i].push_back(cubic_weight(double(t) - r, -0.75));
          }
        }
      }
      // The tensor product of the taps of every dim.
      for (int64_t c = 0; c < C; ++c) {
        const double* xp = x.data() + (n * C + c) * plane;
        double acc = 0.0;
        std::fill(it.begin(), it.end(), 0);
        while (true) {
          double w = 1.0;
          int64_t off = 0;
          bool zero = false;
          for (size_t i = 0; i < k; ++i) {
            int64_t t = idx[i][it[i]];
            zero |= t < 0;
            off = off * dims[i] + t;
            w *= wt[i][it[i]];
          }
          if (!zero) acc += w * xp[off];
          size_t i = k;
          while (i-- > 0 && ++it[i] == idx[i].size()) it[i] = 0;
          if (i == size_t(-1)) break;
        }
        y[size_t((n * C + c) * points + p)] = acc;
      }
    }
  });
  write(out[0], y);
}

void register_grid_sample() {
  OpDef d;
  d.name = "onnx.grid_sample";
  d.arity(2)
      .attr("mode", AttrKind::String, AttrValue("linear"),
            {"linear", "nearest", "cubic", "bilinear", "bicubic"})
      .attr("padding_mode", AttrKind::String, AttrValue("zeros"), {"zeros", "border", "reflection"})
      .attr("align_corners", AttrKind::Bool, AttrValue(false));
  d.doc = "ONNX GridSample: X [N, C, D...] sampled at grid [N, O..., k] in [-1, 1].";
  d.infer = infer_grid_sample;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.grid_sample", DeviceKind::cpu, grid_sample_kernel);
}

// ---- onnx.roi_align -----------------------------------------------------------------

Types infer_roi_align(const InferContext& ctx) {
  expect_float_input(ctx, 0, "X");
  expect_float_input(ctx, 1, "rois");
  if (is_float(ctx.dtype(2)) || ctx.dtype(2) == DType::boolean)
    ctx.fail_type("expected integer batch_indices, got ", ctx.input(2).str());
  if (ctx.rank(0) != 4 || ctx.rank(1) != 2 || ctx.rank(2) != 1)
    ctx.fail("expected X [N, C, H, W], rois [R, 4], batch_indices [R], got ", ctx.input(0).str(),
             ", ", ctx.input(1).str(), ", ", ctx.input(2).str());
  if (ctx.shape(1)[1].is_static() && ctx.shape(1)[1].value() != 4)
    ctx.fail("expected rois [R, 4], got ", ctx.input(1).str());
  const Dim &r1 = ctx.shape(1)[0], &r2 = ctx.shape(2)[0];
  if (r1.is_static() && r2.is_static() && r1.value() != r2.value())
    ctx.fail("expected one batch index per roi, got ", ctx.input(1).str(), " and ",
             ctx.input(2).str());
  const Attrs& a = ctx.attrs();
  if (a.get_int("output_height") < 1 || a.get_int("output_width") < 1)
    ctx.fail("expected output_height and output_width >= 1");
  return {{ctx.dtype(0), Shape{ctx.shape(1)[0], ctx.shape(0)[1], Dim(a.get_int("output_height")),
                               Dim(a.get_int("output_width"))}}};
}

void roi_align_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  const std::vector<int64_t>& xs = in[0].shape();
  int64_t C = xs[1], H = xs[2], W = xs[3];
  int64_t ph_n = a.get_int("output_height"), pw_n = a.get_int("output_width");
  int64_t sampling = a.get_int("sampling_ratio");
  double scale = a.get_float("spatial_scale");
  bool half = a.get_string("coordinate_transformation_mode") == "half_pixel";
  bool avg = a.get_string("mode") == "avg";
  std::vector<double> x = read(in[0]), rois = read(in[1]), batch = read(in[2]);
  int64_t R = in[1].shape()[0];
  if (int64_t(batch.size()) != R)
    rlx::fail<ValueError>("onnx.roi_align", "expected one batch index per roi, got ", batch.size(),
                          " for ", R);
  std::vector<double> y(size_t(R * C * ph_n * pw_n));
  for (double b : batch)
    if (b < 0 || b >= double(xs[0]))
      rlx::fail<ValueError>("onnx.roi_align", "expected batch_indices in [0, ", xs[0], "), got ",
                            b);
  parallel_for(R, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t b = int64_t(batch[size_t(r)]);
      double off = half ? 0.5 : 0.0;
      const double* box = rois.data() + r * 4;
      double x0 = box[0] * scale - off, y0 = box[1] * scale - off;
      double rw = box[2] * scale - off - x0, rh = box[3] * scale - off - y0;
      if (!half) {
        rw = std::max(rw, 1.0);
        rh = std::max(rh, 1.0);
      }
      double bh = rh / double(ph_n), bw = rw / double(pw_n);
      int64_t gh = sampling > 0 ? sampling : int64_t(std::ceil(rh / double(ph_n)));
      int64_t gw = sampling > 0 ? sampling : int64_t(std::ceil(rw / double(pw_n)));
      double count = double(std::max<int64_t>(gh * gw, 1));
      for (int64_t c = 0; c < C; ++c) {
        const double* xp = x.data() + (b * C + c) * H * W;
        for (int64_t ph = 0; ph < ph_n; ++ph)
          for (int64_t pw = 0; pw < pw_n; ++pw) {
            double acc = 0.0;
            bool first = true;
            for (int64_t iy = 0; iy < gh; ++iy)
              for (int64_t ix = 0; ix < gw; ++ix) {
                double yy = y0 + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
                double xx = x0 + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
                double v[4] = {0, 0, 0, 0}, w[4] = {0, 0, 0, 0};
                if (!(yy < -1.0 || yy > double(H) || xx < -1.0 || xx > double(W))) {
                  yy = std::max(yy, 0.0);
                  xx = std::max(xx, 0.0);
                  int64_t yl = int64_t(yy), xl = int64_t(xx), yh, xh;
                  if (yl >= H - 1) {
                    yh = yl = H - 1;
                    yy = double(yl);
                  } else {
                    yh = yl + 1;
                  }
                  if (xl >= W - 1) {
                    xh = xl = W - 1;
                    xx = double(xl);
                  } else {
                    xh = xl + 1;
                  }
                  double ly = yy - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
                  w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
                  v[0] = xp[yl * W + xl], v[1] = xp[yl * W + xh], v[2] = xp[yh * W + xl],
                  v[3] = xp[yh * W + xh];
                }
                if (avg) {
                  for (int i = 0; i < 4; ++i) acc += w[i] * v[i];
                } else {
                  double m = std::max({w[0] * v[0], w[1] * v[1], w[2] * v[2], w[3] * v[3]});
                  acc = first ? m : std::max(acc, m);
                  first = false;
                }
              }
            y[size_t(((r * C + c) * ph_n + ph) * pw_n + pw)] = avg ? acc / count : acc;
          }
      }
    }
  });
  write(out[0], y);
}

void register_roi_align() {
  OpDef d;
  d.name = "onnx.roi_align";
  d.arity(3)
      .attr("mode", AttrKind::String, AttrValue("avg"), {"avg", "max"})
      .attr("output_height", AttrKind::Int, AttrValue(1))
      .attr("output_width", AttrKind::Int, AttrValue(1))
      .attr("sampling_ratio", AttrKind::Int, AttrValue(0))
      .attr("spatial_scale", AttrKind::Float, AttrValue(1.0))
      .attr("coordinate_transformation_mode", AttrKind::String, AttrValue("half_pixel"),
            {"half_pixel", "output_half_pixel"});
  d.doc = "ONNX RoiAlign: X [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, oh, ow].";
  d.infer = infer_roi_align;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.roi_align", DeviceKind::cpu, roi_align_kernel);
}

// ---- onnx.max_pool_indices ------------------------------------------------------------

// The core max_pool's shape rules, with i64 elements.
Types infer_max_pool_indices(const InferContext& ctx) {
  const OpDef& core = OpRegistry::global().get("max_pool");
  Attrs a;
  for (const AttrSpec& s : core.attrs) a.set(s.name, *ctx.attrs().find(s.name));
  InferContext c(core, ctx.inputs(), a, {});
  Types t = core.infer(c);
  t[0].dtype = DType::i64;
  return t;
}

void max_pool_indices_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                             std::span<Tensor> out) {
  const Attrs& a = ctx.attrs;
  const std::vector<int64_t>& xs = in[0].shape();
  const std::vector<int64_t>& ys = out[0].shape();
  size_t k = xs.size() - 2;
  const IntList& ker = a.get_ints("kernel_shape");
  IntList st = a.get_ints("strides"), dil = a.get_ints("dilations"), pads = a.get_ints("pads");
  if (st.empty()) st.assign(k, 1);
  if (dil.empty()) dil.assign(k, 1);
  if (pads.empty()) pads.assign(2 * k, 0);
  const std::string& auto_pad = a.get_string("auto_pad");
  std::vector<int64_t> pb(k);
  for (size_t i = 0; i < k; ++i) {
    int64_t eff = dil[i] * (ker[i] - 1) + 1;
    if (auto_pad == "explicit") {
      pb[i] = pads[i];
    } else if (auto_pad == "valid") {
      pb[i] = 0;
    } else {
      int64_t total = std::max<int64_t>((ys[i + 2] - 1) * st[i] + eff - xs[i + 2], 0);
      pb[i] = auto_pad == "same_upper" ? total / 2 : total - total / 2;
    }
  }
  bool col = a.get_int("storage_order") == 1;
  std::vector<int64_t> in_dims(xs.begin() + 2, xs.end()), out_dims(ys.begin() + 2, ys.end());
  int64_t plane = dims_product(in_dims), oplane = dims_product(out_dims);
  std::vector<double> x = read(in[0]);
  auto* y = out[0].data_as<int64_t>();
  parallel_for(xs[0] * xs[1], 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      std::vector<int64_t> o(k), t(k);
      const double* xp = x.data() + p * plane;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t q = 0; q < oplane; ++q) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t best_at = -1;
        std::fill(t.begin(), t.end(), 0);
        while (true) {
          int64_t off = 0, coff = 0, cstride = 1;
          bool inside = true;
          for (size_t i = 0; i < k; ++i) {
            int64_t pos = o[i] * st[i] - pb[i] + t[i] * dil[i];
            inside &= pos >= 0 && pos < in_dims[i];
            off = off * in_dims[i] + pos;
            coff += pos * cstride;
            cstride *= in_dims[i];
          }
          if (inside && (xp[off] > best || best_at < 0)) {
            best = xp[off];
            best_at = col ? coff : off;
          }
          size_t i = k;
          while (i-- > 0 && ++t[i] == ker[i]) t[i] = 0;
          if (i == size_t(-1)) break;
        }
        y[p * oplane + q] = p * plane + std::max<int64_t>(best_at, 0);
        for (size_t i = k; i-- > 0;)
          if (++o[i] < out_dims[i])
            break;
          else
            o[i] = 0;
      }
    }
  });
}

void register_max_pool_indices() {
  OpDef d;
  d.name = "onnx.max_pool_indices";
  d.traits = Trait::nondifferentiable;
  d.arity(1);
  d.attrs = OpRegistry::global().get("max_pool").attrs;
  d.attr("storage_order", AttrKind::Int, AttrValue(0));
  d.doc =
      "The flat index into x of each max_pool maximum (storage_order 1: spatial dims "
      "column-major), as ONNX MaxPool's Indices.";
  d.infer = infer_max_pool_indices;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.max_pool_indices", DeviceKind::cpu, max_pool_indices_kernel);
}

// ---- onnx.zero_extend -------------------------------------------------------------------

// The output shape is input 1's value, so every dim is unknown here.
Types infer_zero_extend(const InferContext& ctx) {
  if (ctx.dtype(1) != DType::i64 || ctx.rank(1) != 1)
    ctx.fail_type("expected an i64[rank] shape, got ", ctx.input(1).str());
  return {{ctx.dtype(0), Shape(size_t(ctx.rank(0)), Dim::unknown())}};
}

void zero_extend_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  std::vector<int64_t> shape = in[1].contiguous().to_vector<int64_t>();
  const std::vector<int64_t>& xs = in[0].shape();
  if (shape.size() != xs.size())
    rlx::fail<ValueError>("onnx.zero_extend", "expected a shape of length ", xs.size(), ", got ",
                          shape.size());
  for (size_t i = 0; i < xs.size(); ++i)
    if (shape[i] < xs[i])
      rlx::fail<ValueError>("onnx.zero_extend", "expected a shape no smaller than ", ints_str(xs),
                            ", got ", ints_str(shape));
  std::vector<double> x = read(in[0]), y(size_t(dims_product(shape)), 0.0);
  size_t r = xs.size();
  std::vector<int64_t> idx(r, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off = off * shape[d] + idx[d];
    y[size_t(off)] = x[i];
    for (size_t d = r; d-- > 0;)
      if (++idx[d] < xs[d])
        break;
      else
        idx[d] = 0;
  }
  out[0] = Tensor::empty(in[0].dtype(), shape);
  write(out[0], y);
}

void register_zero_extend() {
  OpDef d;
  d.name = "onnx.zero_extend";
  d.arity(2);
  d.doc =
      "x placed at the origin of zeros whose shape is input 1's value (MaxUnpool's output_shape).";
  d.infer = infer_zero_extend;
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.zero_extend", DeviceKind::cpu, zero_extend_kernel, {},
                               KernelFlags{.makes_outputs = true});
}

}  // namespace

void register_nn_onnx_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_resize();
    register_grid_sample();
    register_roi_align();
    register_max_pool_indices();
    register_zero_extend();
  });
}

}  // namespace rlx::onnx_import
