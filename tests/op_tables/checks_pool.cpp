// max_pool, avg_pool, the global pools, resize and their backward ops (max_pool_grad,
// max_pool_gather, avg_pool_grad, resize_grad) against their definitions in double:
// every pooled output visits the kernel taps of its window one by one; resize samples
// each output point from the input (nearest: one index per dim; linear: the weighted 2^rank
// corners around the point).
#include <cmath>
#include <limits>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Shape = std::vector<int64_t>;

const DType kF32 = DType::f32, kF64 = DType::f64, kF16 = DType::f16, kBF16 = DType::bf16;
const DType kFloats[] = {kF32, kF64, kF16, kBF16};

// ---- pools -----------------------------------------------------------------------------

// NaN-propagating max and mean over each window; windows clipped to the input, the mean's
// divisor counting the padding taps too with count_include_pad (but not taps past the end
// padding, which only ceil mode reaches).
Tensors ref_pool(const Tensors& in, const Attrs& a, bool is_max) {
  const Tensor& x = in[0];
  size_t k = size_t(x.rank()) - 2;
  const IntList &ks = a.get_ints("kernel_shape"), &st = a.get_ints("strides"),
                &dl = a.get_ints("dilations"), &pads = a.get_ints("pads");
  const std::string& mode = a.get_string("auto_pad");
  bool ceil_mode = a.get_bool("ceil_mode");
  bool include_pad = !is_max && a.get_bool("count_include_pad");
  Shape ys{x.shape()[0], x.shape()[1]}, s(k), dil(k), pb(k), pe(k);
  for (size_t i = 0; i < k; ++i) {
    int64_t d = x.shape()[i + 2];
    s[i] = st.empty() ? 1 : st[i];
    dil[i] = dl.empty() ? 1 : dl[i];
    int64_t eff = dil[i] * (ks[i] - 1) + 1, o;
    if (mode == "same_upper" || mode == "same_lower") {
      o = (d + s[i] - 1) / s[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * s[i] + eff - d);
      pb[i] = mode == "same_upper" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else {
      pb[i] = mode == "explicit" && !pads.empty() ? pads[i] : 0;
      pe[i] = mode == "explicit" && !pads.empty() ? pads[i + k] : 0;
      double span = double(d + pb[i] + pe[i] - eff) / double(s[i]);
      o = int64_t(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
      if (ceil_mode && (o - 1) * s[i] >= d + pb[i]) --o;
    }
    ys.push_back(o);
  }
  auto xv = values(x);
  std::vector<double> y(size_t(numel(ys)));
  Shape kshape(ks.begin(), ks.end()), xi(k + 2);
  for (int64_t flat = 0; flat < numel(ys); ++flat) {
    Shape yi = unravel(flat, ys);
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    int64_t count = 0, padded = 0;
    for (int64_t t = 0; t < numel(kshape); ++t) {
      Shape ti = unravel(t, kshape);
      bool inside = true, in_pad = true;
      for (size_t i = 0; i < k; ++i) {
        int64_t p = yi[i + 2] * s[i] - pb[i] + ti[i] * dil[i];
        inside &= p >= 0 && p < x.shape()[i + 2];
        in_pad &= p >= -pb[i] && p < x.shape()[i + 2] + pe[i];
        xi[i + 2] = p;
      }
      padded += in_pad;
      if (!inside) continue;
      xi[0] = yi[0];
      xi[1] = yi[1];
      double v = xv[size_t(ravel(xi, x.shape()))];
      best = std::isnan(v) || std::isnan(best) ? NAN : std::max(best, v);
      sum += v;
      ++count;
    }
    y[size_t(flat)] = is_max ? best : sum / double(include_pad ? padded : count);
  }
  return {tensor_of(x.dtype(), ys, y)};
}

Tensors ref_avg_pool(const Tensors& in, const Attrs& a) { return ref_pool(in, a, false); }

Tensors ref_global(const Tensors& in, bool is_max) {
  const Tensor& x = in[0];
  Shape ys = x.shape();
  std::fill(ys.begin() + 2, ys.end(), 1);
  int64_t planes = ys[0] * ys[1], size = planes ? x.numel() / planes : 0;
  auto xv = values(x);
  std::vector<double> y(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t i = 0; i < size; ++i) {
      double v = xv[size_t(p * size + i)];
      best = std::isnan(v) || std::isnan(best) ? NAN : std::max(best, v);
      sum += v;
    }
    y[size_t(p)] = is_max ? best : sum / double(size);
  }
  return {tensor_of(x.dtype(), ys, y)};
}

void add_pool(CheckTable& t, const char* op, DType dt, Tensor x, Attrs attrs, std::string note) {
  bool is_max = std::string(op) == "max_pool";
  OpCheck c;
  c.op = op;
  c.dtype = dt;
  c.inputs = {std::move(x)};
  c.attrs = std::move(attrs);
  c.ref = is_max ? ref_max_pool : ref_avg_pool;
  c.note = std::move(note);
  t.add(std::move(c));
}

void pool_checks(CheckTable& t) {
  struct Case {
    Shape x;
    Attrs attrs;
    const char* note;
  };
  std::vector<Case> cases = {
      {{2, 3, 6, 6}, {{"kernel_shape", IntList{2, 2}}, {"strides", IntList{2, 2}}}, "2x2/2"},
      {{1, 2, 7, 7},
       {{"kernel_shape", IntList{3, 3}}, {"strides", IntList{2, 2}}, {"pads", IntList{1, 1, 1, 1}}},
       "3x3/2 padded"},
      {{1, 1, 7},
       {{"kernel_shape", IntList{2}}, {"strides", IntList{2}}, {"ceil_mode", true}},
       "1-D ceil"},
      {{1, 2, 6},
       {{"kernel_shape", IntList{3}},
        {"strides", IntList{2}},
        {"pads", IntList{1, 1}},
        {"ceil_mode", true}},
       "ceil past the padding"},
      {{1, 2, 5, 6},
       {{"kernel_shape", IntList{2, 3}}, {"pads", IntList{0, 1, 1, 0}}},
       "asymmetric pads"},
      {{1, 2, 7, 6},
       {{"kernel_shape", IntList{2, 2}}, {"dilations", IntList{2, 1}}, {"strides", IntList{1, 2}}},
       "dilations"},
      {{1, 2, 7, 6},
       {{"kernel_shape", IntList{3, 2}}, {"strides", IntList{2, 2}}, {"auto_pad", "same_upper"}},
       "same_upper"},
      {{1, 2, 7, 5},
       {{"kernel_shape", IntList{2, 3}}, {"strides", IntList{2, 2}}, {"auto_pad", "same_lower"}},
       "same_lower"},
      {{1, 2, 6, 5}, {{"kernel_shape", IntList{3, 3}}, {"auto_pad", "valid"}}, "valid"},
      {{1, 2, 4, 4, 5},
       {{"kernel_shape", IntList{2, 2, 3}},
        {"strides", IntList{2, 1, 2}},
        {"pads", IntList{0, 1, 1, 1, 0, 1}}},
       "3-D"},
      {{0, 2, 4, 4}, {{"kernel_shape", IntList{2, 2}}}, "empty batch"},
      {{1, 3, 1, 1}, {{"kernel_shape", IntList{1, 1}}}, "size-1"},
  };
  uint64_t seed = 500;
  for (const char* op : {"max_pool", "avg_pool"}) {
    for (DType dt : kFloats)
      add_pool(t, op, dt, random_tensor(dt, {2, 3, 5, 5}, ++seed),
               {{"kernel_shape", IntList{3, 3}}, {"pads", IntList{1, 1, 1, 1}}}, "");
    for (const Case& c : cases)
      add_pool(t, op, kF32, random_tensor(kF32, c.x, ++seed), c.attrs, c.note);
    add_pool(t, op, kF64, random_tensor(kF64, {1, 2, 6, 7}, ++seed),
             {{"kernel_shape", IntList{3, 2}}, {"strides", IntList{2, 2}}, {"ceil_mode", true}},
             "f64 ceil");
    // NaN propagates (max and mean); infinities are ordinary values.
    Tensor x = random_tensor(kF32, {1, 2, 4, 4}, ++seed);
    x.data_as<float>()[5] = NAN;
    x.data_as<float>()[16 + 2] = INFINITY;
    x.data_as<float>()[16 + 13] = -INFINITY;
    add_pool(t, op, kF32, x, {{"kernel_shape", IntList{2, 2}}}, "nan, inf");
  }
  // count_include_pad: padding taps count, ceil-mode overhang does not.
  for (bool ceil : {false, true})
    add_pool(t, "avg_pool", kF32, random_tensor(kF32, {1, 2, 6, 7}, ++seed),
             {{"kernel_shape", IntList{3, 3}},
              {"strides", IntList{2, 2}},
              {"pads", IntList{1, 0, 1, 1}},
              {"count_include_pad", true},
              {"ceil_mode", ceil}},
             "count_include_pad");
  add_pool(t, "avg_pool", kF32, random_tensor(kF32, {1, 2, 7}, ++seed),
           {{"kernel_shape", IntList{4}}, {"auto_pad", "same_lower"}, {"count_include_pad", true}},
           "count_include_pad, same");

  for (const char* op : {"global_max_pool", "global_avg_pool"}) {
    bool is_max = std::string(op) == "global_max_pool";
    RefFn ref = [is_max](const Tensors& in, const Attrs&) { return ref_global(in, is_max); };
    std::vector<Shape> shapes = {{2, 3, 4, 5}, {1, 2, 3},          {1, 2, 2, 2, 3},
                                 {0, 3, 4, 4}, {1, 2, 2, 1, 3, 2}, {2, 2, 123}};
    for (DType dt : kFloats) t.add({op, dt, {random_tensor(dt, {2, 3, 4, 5}, ++seed)}, {}, ref});
    for (const Shape& s : shapes) t.add({op, kF32, {random_tensor(kF32, s, ++seed)}, {}, ref});
    Tensor x = random_tensor(kF32, {1, 3, 9}, ++seed);
    x.data_as<float>()[4] = NAN;
    x.data_as<float>()[9 + 2] = INFINITY;
    x.data_as<float>()[18 + 3] = -INFINITY;
    t.add({op, kF32, {x}, {}, ref, {}, {}, -1, -1, "nan, inf"});
  }
}

// ---- resize ----------------------------------------------------------------------------

double source_coord(const std::string& transform, int64_t o, int64_t in, int64_t out,
                    double scale) {
  if (transform == "align_corners")
    return out == 1 ? 0.0 : double(o) * double(in - 1) / double(out - 1);
  if (transform == "asymmetric") return double(o) / scale;
  return (double(o) + 0.5) / scale - 0.5;
}

int64_t nearest_index(double x, const std::string& mode, int64_t in) {
  double f = std::floor(x), frac = x - f, r;
  if (mode == "floor")
    r = f;
  else if (mode == "ceil")
    r = std::ceil(x);
  else if (frac == 0.5)
    r = mode == "round_prefer_ceil" ? f + 1 : f;
  else
    r = frac < 0.5 ? f : f + 1;
  return std::clamp<int64_t>(int64_t(r), 0, in - 1);
}

Tensors ref_resize(const Tensors& in, const Attrs& a) {
  const Tensor& x = in[0];
  const Shape& xs = x.shape();
  size_t r = xs.size();
  const IntList& sizes = a.get_ints("sizes");
  FloatList scales = a.get_floats("scales");
  bool linear = a.get_string("mode") == "linear";
  const std::string &transform = a.get_string("coordinate_transformation"),
                    &nearest = a.get_string("nearest_mode");
  Shape ys(r);
  std::vector<double> scale(r);
  for (size_t d = 0; d < r; ++d) {
    ys[d] = sizes.empty() ? int64_t(std::floor(double(xs[d]) * scales[d])) : sizes[d];
    scale[d] = sizes.empty() ? scales[d] : double(ys[d]) / double(xs[d]);
  }
  auto xv = values(x);
  std::vector<double> y(size_t(numel(ys)));
  for (int64_t flat = 0; flat < numel(ys); ++flat) {
    Shape yi = unravel(flat, ys);
    Shape lo(r), hi(r);
    std::vector<double> w(r);  // weight of hi
    for (size_t d = 0; d < r; ++d) {
      double c = source_coord(transform, yi[d], xs[d], ys[d], scale[d]);
      if (linear) {
        c = std::clamp(c, 0.0, double(xs[d] - 1));
        lo[d] = int64_t(std::floor(c));
        hi[d] = std::min(lo[d] + 1, xs[d] - 1);
        w[d] = c - double(lo[d]);
      } else {
        lo[d] = nearest_index(c, nearest, xs[d]);
      }
    }
    if (!linear) {
      y[size_t(flat)] = xv[size_t(ravel(lo, xs))];
      continue;
    }
    double acc = 0;
    for (int64_t corner = 0; corner < (int64_t(1) << r); ++corner) {
      Shape idx(r);
      double weight = 1;
      for (size_t d = 0; d < r; ++d) {
        bool up = (corner >> d) & 1;
        idx[d] = up ? hi[d] : lo[d];
        weight *= up ? w[d] : 1.0 - w[d];
      }
      if (weight != 0) acc += weight * xv[size_t(ravel(idx, xs))];
    }
    y[size_t(flat)] = acc;
  }
  return {tensor_of(x.dtype(), ys, y)};
}

void resize_checks(CheckTable& t) {
  uint64_t seed = 900;
  auto add = [&](DType dt, Shape x, Attrs attrs, std::string note = "") {
    t.add({"resize",
           dt,
           {random_tensor(dt, std::move(x), ++seed)},
           std::move(attrs),
           ref_resize,
           {},
           {},
           -1,
           -1,
           std::move(note)});
  };
  // nearest takes every numeric dtype.
  for (DType dt : kAllDTypes)
    if (dt != DType::boolean) add(dt, {1, 2, 3, 4}, {{"sizes", IntList{1, 2, 5, 7}}});
  const char* transforms[] = {"half_pixel", "align_corners", "asymmetric"};
  // Up by 2 and down by 2 (ties in every transform) and by an odd ratio.
  for (const char* tr : transforms)
    for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      add(kF32, {1, 1, 4, 6},
          {{"scales", FloatList{1, 1, 2, 0.5}},
           {"coordinate_transformation", tr},
           {"nearest_mode", nm}},
          "nearest");
      add(kF32, {3, 5},
          {{"sizes", IntList{7, 3}}, {"coordinate_transformation", tr}, {"nearest_mode", nm}},
          "nearest");
    }
  for (const char* tr : transforms) {
    for (DType dt : kFloats)
      add(dt, {1, 2, 3, 4},
          {{"mode", "linear"}, {"sizes", IntList{1, 2, 7, 3}}, {"coordinate_transformation", tr}},
          "linear");
    add(kF32, {2, 3, 4, 5},
        {{"mode", "linear"},
         {"scales", FloatList{1, 1, 1.5, 0.6}},
         {"coordinate_transformation", tr}},
        "linear scales");
    add(kF32, {5}, {{"mode", "linear"}, {"sizes", IntList{9}}, {"coordinate_transformation", tr}},
        "linear 1-D");
    add(kF32, {3, 4, 2},
        {{"mode", "linear"}, {"sizes", IntList{5, 1, 3}}, {"coordinate_transformation", tr}},
        "linear 3 dims, to size 1");
  }
  add(kF64, {2, 6, 5}, {{"mode", "linear"}, {"scales", FloatList{2, 0.5, 1.2}}}, "every dim");
  add(kF32, {3}, {{"scales", FloatList{1.2}}}, "same size, scale 1.2");
  add(kF32, {3}, {{"mode", "linear"}, {"scales", FloatList{1.2}}}, "same size, scale 1.2");
  add(kF32, {0, 3, 4}, {{"scales", FloatList{1, 1, 2}}}, "empty input");
  add(kF32, {2, 3}, {{"mode", "linear"}, {"scales", FloatList{1, 0.2}}}, "empty output");
  add(DType::i32, {2, 3, 4},
      {{"sizes", IntList{3, 3, 9}},
       {"coordinate_transformation", "asymmetric"},
       {"nearest_mode", "floor"}},
      "integers");
}

// ---- backward ops: max_pool_grad, max_pool_gather, avg_pool_grad, resize_grad ----------

// The forward op's output shape for x, by rlx's shape inference.
Shape forward_shape(const std::string& op, const Tensor& x, const Attrs& attrs) {
  const OpDef& def = OpRegistry::global().get(op);
  std::vector<TensorType> in = {TensorType(x.dtype(), to_shape(x.shape()))};
  return static_sizes(infer_types(def, in, validate_attrs(def, attrs), {})[0].shape);
}

// The windows of a pool: for output index yi, f(flat input index, or -1 for a tap in the
// padding or past it, and whether the tap is inside the input or its padding), taps in
// row-major order.
struct PoolWindows {
  size_t k = 0;
  Shape xs, ks, s, dil, pb, pe;

  PoolWindows(const Shape& x, const Attrs& a) : xs(x) {
    k = x.size() - 2;
    const IntList &kernel = a.get_ints("kernel_shape"), &st = a.get_ints("strides"),
                  &dl = a.get_ints("dilations"), &pads = a.get_ints("pads");
    const std::string& mode = a.get_string("auto_pad");
    for (size_t i = 0; i < k; ++i) {
      ks.push_back(kernel[i]);
      s.push_back(st.empty() ? 1 : st[i]);
      dil.push_back(dl.empty() ? 1 : dl[i]);
      int64_t d = x[i + 2], eff = dil[i] * (ks[i] - 1) + 1, b = 0, e = 0;
      if (mode == "same_upper" || mode == "same_lower") {
        int64_t o = (d + s[i] - 1) / s[i];
        int64_t total = std::max<int64_t>(0, (o - 1) * s[i] + eff - d);
        b = mode == "same_upper" ? total / 2 : total - total / 2;
        e = total - b;
      } else if (mode == "explicit" && !pads.empty()) {
        b = pads[i];
        e = pads[i + k];
      }
      pb.push_back(b);
      pe.push_back(e);
    }
  }

  template <class F>
  void taps(const Shape& yi, F&& f) const {
    Shape xi = yi;
    for (int64_t t = 0; t < numel(ks); ++t) {
      Shape ti = unravel(t, ks);
      bool inside = true, in_pad = true;
      for (size_t i = 0; i < k; ++i) {
        int64_t p = yi[i + 2] * s[i] - pb[i] + ti[i] * dil[i];
        inside &= p >= 0 && p < xs[i + 2];
        in_pad &= p >= -pb[i] && p < xs[i + 2] + pe[i];
        xi[i + 2] = p;
      }
      f(inside ? ravel(xi, xs) : int64_t(-1), in_pad);
    }
  }

  // The first maximum of x's window at yi (NaN counts as the largest), or -1.
  int64_t argmax(const std::vector<double>& x, const Shape& yi) const {
    int64_t best = -1;
    double m = 0;
    taps(yi, [&](int64_t i, bool) {
      if (i < 0) return;
      double v = x[size_t(i)];
      if (best < 0 || (!std::isnan(m) && (v > m || std::isnan(v)))) {
        best = i;
        m = v;
      }
    });
    return best;
  }
};

// max_pool_grad(x, ct), avg_pool_grad(x, ct): ct added back over each window.
RefFn ref_pool_grad(bool is_max) {
  return [is_max](const Tensors& in, const Attrs& a) {
    const Tensor &x = in[0], &ct = in[1];
    PoolWindows pw(x.shape(), a);
    bool include_pad = !is_max && a.get_bool("count_include_pad");
    auto xv = values(x), cv = values(ct);
    std::vector<double> dx(size_t(x.numel()), 0.0);
    for (int64_t flat = 0; flat < ct.numel(); ++flat) {
      Shape yi = unravel(flat, ct.shape());
      double g = cv[size_t(flat)];
      if (is_max) {
        int64_t i = pw.argmax(xv, yi);
        if (i >= 0) dx[size_t(i)] += g;
        continue;
      }
      int64_t count = 0, padded = 0;
      pw.taps(yi, [&](int64_t i, bool in_pad) {
        count += i >= 0;
        padded += in_pad;
      });
      double v = g / double(std::max<int64_t>(include_pad ? padded : count, 1));
      pw.taps(yi, [&](int64_t i, bool) {
        if (i >= 0) dx[size_t(i)] += v;
      });
    }
    return Tensors{tensor_of(x.dtype(), x.shape(), dx)};
  };
}

// max_pool_gather(x, u): u at each window's first maximum of x.
Tensors ref_max_pool_gather(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &u = in[1];
  PoolWindows pw(x.shape(), a);
  Shape ys = forward_shape("max_pool", x, a);
  auto xv = values(x), uv = values(u);
  std::vector<double> y(size_t(numel(ys)));
  for (int64_t flat = 0; flat < numel(ys); ++flat) {
    int64_t i = pw.argmax(xv, unravel(flat, ys));
    y[size_t(flat)] = i >= 0 ? uv[size_t(i)] : 0.0;
  }
  return {tensor_of(x.dtype(), ys, y)};
}

// resize_grad(x, ct): each output's ct added to the input points it sampled, with the
// same weights (the transpose of ref_resize).
Tensors ref_resize_grad(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &ct = in[1];
  const Shape &xs = x.shape(), &ys = ct.shape();
  size_t r = xs.size();
  bool sized = !a.get_ints("sizes").empty();
  FloatList scales = a.get_floats("scales");
  bool linear = a.get_string("mode") == "linear";
  const std::string &transform = a.get_string("coordinate_transformation"),
                    &nearest = a.get_string("nearest_mode");
  auto cv = values(ct);
  std::vector<double> dx(size_t(x.numel()), 0.0);
  for (int64_t flat = 0; flat < numel(ys); ++flat) {
    Shape yi = unravel(flat, ys), lo(r), hi(r);
    std::vector<double> w(r, 0.0);
    for (size_t d = 0; d < r; ++d) {
      double scale = sized ? double(ys[d]) / double(xs[d]) : scales[d];
      double c = source_coord(transform, yi[d], xs[d], ys[d], scale);
      if (linear) {
        c = std::clamp(c, 0.0, double(xs[d] - 1));
        lo[d] = int64_t(std::floor(c));
        hi[d] = std::min(lo[d] + 1, xs[d] - 1);
        w[d] = c - double(lo[d]);
      } else {
        lo[d] = hi[d] = nearest_index(c, nearest, xs[d]);
      }
    }
    for (int64_t corner = 0; corner < (int64_t(1) << r); ++corner) {
      Shape idx(r);
      double weight = 1;
      for (size_t d = 0; d < r; ++d) {
        bool up = (corner >> d) & 1;
        idx[d] = up ? hi[d] : lo[d];
        weight *= up ? w[d] : 1.0 - w[d];
      }
      if (weight != 0) dx[size_t(ravel(idx, xs))] += weight * cv[size_t(flat)];
    }
  }
  return {tensor_of(x.dtype(), xs, dx)};
}

void window_grad_checks(CheckTable& t) {
  uint64_t seed = 1300;
  // x, and v in the shape the op expects: the forward output (grads) or x (gather).
  auto add = [&](const char* op, const char* fwd, RefFn ref, DType dt, Shape xs, Attrs attrs,
                 bool v_like_x, std::string note) {
    Tensor x = random_tensor(dt, xs, ++seed);
    Shape vs = v_like_x ? xs : forward_shape(fwd, x, attrs);
    Tensor v = random_tensor(dt, vs, ++seed);
    t.add(ref_check(op, dt, {x, v}, std::move(attrs), std::move(ref), std::move(note)));
  };
  struct Case {
    Shape x;
    Attrs attrs;
    const char* note;
  };
  std::vector<Case> pools = {
      {{2, 3, 5, 5}, {{"kernel_shape", IntList{3, 3}}, {"pads", IntList{1, 1, 1, 1}}}, ""},
      {{2, 3, 6, 6}, {{"kernel_shape", IntList{2, 2}}, {"strides", IntList{2, 2}}}, "2x2/2"},
      {{1, 2, 7, 7},
       {{"kernel_shape", IntList{3, 3}},
        {"strides", IntList{2, 2}},
        {"pads", IntList{1, 0, 1, 1}},
        {"ceil_mode", true}},
       "ceil, asymmetric pads"},
      {{1, 2, 7, 6},
       {{"kernel_shape", IntList{2, 2}}, {"dilations", IntList{2, 1}}, {"strides", IntList{1, 2}}},
       "dilations"},
      {{1, 2, 7, 5},
       {{"kernel_shape", IntList{2, 3}}, {"strides", IntList{2, 2}}, {"auto_pad", "same_lower"}},
       "same_lower"},
      {{2, 2, 9}, {{"kernel_shape", IntList{4}}, {"strides", IntList{3}}}, "1-D"},
      {{1, 2, 4, 4, 5},
       {{"kernel_shape", IntList{2, 2, 3}},
        {"strides", IntList{2, 1, 2}},
        {"pads", IntList{0, 1, 1, 1, 0, 1}}},
       "3-D"},
      {{0, 2, 4, 4}, {{"kernel_shape", IntList{2, 2}}}, "empty batch"},
  };
  for (const Case& c : pools) {
    bool base = c.note[0] == 0;
    for (DType dt : kFloats) {
      if (!base && dt != kF32) continue;
      add("max_pool_grad", "max_pool", ref_pool_grad(true), dt, c.x, c.attrs, false, c.note);
      add("max_pool_gather", "max_pool", ref_max_pool_gather, dt, c.x, c.attrs, true, c.note);
      add("avg_pool_grad", "avg_pool", ref_pool_grad(false), dt, c.x, c.attrs, false, c.note);
      Attrs inc = c.attrs;
      inc.set("count_include_pad", true);
      add("avg_pool_grad", "avg_pool", ref_pool_grad(false), dt, c.x, inc, false,
          c.note + std::string(" count_include_pad"));
    }
  }
  // Ties (argmax: the first in tap order) and NaN (the first NaN).
  Tensor x = tensor_of(kF32, {1, 1, 4, 4}, std::vector<double>(16, 1.0));
  x.data_as<float>()[5] = NAN;
  Attrs a22 = {{"kernel_shape", IntList{2, 2}}, {"strides", IntList{1, 1}}};
  Tensor ct = random_tensor(kF32, forward_shape("max_pool", x, a22), ++seed);
  t.add(ref_check("max_pool_grad", kF32, {x, ct}, a22, ref_pool_grad(true), "ties, nan"));
  t.add(ref_check("max_pool_gather", kF32, {x, random_tensor(kF32, {1, 1, 4, 4}, ++seed)}, a22,
                  ref_max_pool_gather, "ties, nan"));

  auto add_resize = [&](DType dt, Shape xs, Attrs attrs, std::string note) {
    add("resize_grad", "resize", ref_resize_grad, dt, std::move(xs), std::move(attrs), false,
        std::move(note));
  };
  for (DType dt : kFloats) {
    add_resize(dt, {1, 2, 3, 4}, {{"mode", "linear"}, {"sizes", IntList{1, 2, 7, 3}}}, "linear");
    add_resize(dt, {1, 2, 3, 4}, {{"sizes", IntList{2, 2, 5, 2}}}, "nearest");
  }
  for (const char* tr : {"half_pixel", "align_corners", "asymmetric"}) {
    add_resize(kF64, {2, 3, 4, 5},
               {{"mode", "linear"},
                {"scales", FloatList{1, 1, 1.5, 0.6}},
                {"coordinate_transformation", tr}},
               "linear scales");
    add_resize(kF32, {3, 4, 2},
               {{"mode", "linear"}, {"sizes", IntList{5, 1, 3}}, {"coordinate_transformation", tr}},
               "linear 3 dims, to size 1");
    for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
      add_resize(kF32, {1, 1, 4, 6},
                 {{"scales", FloatList{1, 1, 2, 0.5}},
                  {"coordinate_transformation", tr},
                  {"nearest_mode", nm}},
                 "nearest");
  }
  add_resize(kF64, {2, 6, 5}, {{"mode", "linear"}, {"scales", FloatList{2, 0.5, 1.2}}},
             "every dim");
  add_resize(kF32, {0, 3, 4}, {{"scales", FloatList{1, 1, 2}}}, "empty input");
  add_resize(kF32, {2, 3}, {{"mode", "linear"}, {"scales", FloatList{1, 0.2}}}, "empty output");
}

}  // namespace

Tensors ref_max_pool(const Tensors& in, const Attrs& a) { return ref_pool(in, a, true); }

CheckTable checks_pool() {
  CheckTable t;
  pool_checks(t);
  resize_checks(t);
  window_grad_checks(t);
  return t;
}

}  // namespace rlx::test
