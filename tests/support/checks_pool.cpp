// max_pool, avg_pool, the global pools and resize against their definitions in double:
// every pooled output visits the kernel taps of its window one by one; resize samples
// each output point from the input (nearest: one index per dim; linear: the weighted 2^rank
// corners around the point).
#include <cmath>
#include <limits>

#include "support/consistency.h"

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

Tensors ref_max_pool(const Tensors& in, const Attrs& a) { return ref_pool(in, a, true); }
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

}  // namespace

CheckTable checks_pool() {
  CheckTable t;
  pool_checks(t);
  resize_checks(t);
  return t;
}

}  // namespace rlx::test
