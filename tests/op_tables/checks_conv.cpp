// conv and conv_transpose against their definitions as nested loops in double: every
// output sums x * w over the taps its window reaches (conv), or every input scatters
// x * w through the kernel (conv_transpose). Each geometry runs in f32 (oneDNN when built
// in) and f64 (the im2col / col2im / direct path); a few also in f16 and bf16.
#include <cmath>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Shape = std::vector<int64_t>;

// Every multi-index of a shape, in row-major order.
std::vector<Shape> indices(const Shape& s) {
  std::vector<Shape> out;
  for (int64_t t = 0; t < numel(s); ++t) out.push_back(unravel(t, s));
  return out;
}

// The window attributes of a [N, C, D...] op, resolved per spatial dim i; the output size
// and the padding before each dim follow ONNX (conv_transpose "same" as ONNX Runtime:
// total padding clamped at 0).
struct Geometry {
  size_t k;
  Shape in, ker, out, stride, dil, pad;
};

Geometry geometry(const Attrs& a, const Shape& x, const Shape& w, bool transpose) {
  Geometry g;
  g.k = x.size() - 2;
  const IntList &st = a.get_ints("strides"), &dl = a.get_ints("dilations"),
                &pads = a.get_ints("pads");
  const std::string& mode = a.get_string("auto_pad");
  for (size_t i = 0; i < g.k; ++i) {
    int64_t d = x[i + 2], kk = w[i + 2], s = st.empty() ? 1 : st[i], dil = dl.empty() ? 1 : dl[i];
    int64_t eff = dil * (kk - 1) + 1, opad = 0;
    if (transpose && !a.get_ints("output_padding").empty()) opad = a.get_ints("output_padding")[i];
    int64_t pb = 0, pe = 0, o;
    if (mode == "same_upper" || mode == "same_lower") {
      o = transpose ? d * s : (d + s - 1) / s;
      int64_t total = transpose ? s * (d - 1) + opad + eff - o : (o - 1) * s + eff - d;
      total = std::max<int64_t>(total, 0);
      pb = mode == "same_upper" ? total / 2 : total - total / 2;
    } else {
      if (mode == "explicit" && !pads.empty()) {
        pb = pads[i];
        pe = pads[i + g.k];
      }
      o = transpose ? s * (d - 1) + opad + eff - pb - pe : (d + pb + pe - eff) / s + 1;
    }
    g.in.push_back(d);
    g.ker.push_back(kk);
    g.out.push_back(o);
    g.stride.push_back(s);
    g.dil.push_back(dil);
    g.pad.push_back(pb);
  }
  return g;
}

// Conv as its definition: y[n, m, o] = b[m] + sum over c < C/groups and kernel taps t of
// x[n, g * C/groups + c, o * s - pad + t * dil] * w[m, c, t], g = m / (M/groups).
Tensors ref_conv(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &w = in[1];
  Geometry g = geometry(a, x.shape(), w.shape(), false);
  int64_t groups = a.get_int("groups"), n = x.shape()[0], c = x.shape()[1], m = w.shape()[0];
  int64_t cg = c / groups, mg = m / groups;
  Shape ys{n, m}, ks(w.shape().begin() + 2, w.shape().end());
  ys.insert(ys.end(), g.out.begin(), g.out.end());
  auto xv = values(x), wv = values(w);
  std::vector<double> bv = in.size() > 2 ? values(in[2]) : std::vector<double>(size_t(m), 0.0);
  std::vector<double> y(size_t(numel(ys)));
  Shape xi(x.shape().size()), wi(w.shape().size());
  std::vector<Shape> taps = indices(ks);
  for (int64_t flat = 0; flat < numel(ys); ++flat) {
    Shape yi = unravel(flat, ys);
    int64_t oc = yi[1], grp = oc / mg;
    double acc = bv[size_t(oc)];
    for (int64_t ic = 0; ic < cg; ++ic)
      for (const Shape& ti : taps) {
        bool inside = true;
        for (size_t i = 0; i < g.k; ++i) {
          xi[i + 2] = yi[i + 2] * g.stride[i] - g.pad[i] + ti[i] * g.dil[i];
          inside &= xi[i + 2] >= 0 && xi[i + 2] < g.in[i];
          wi[i + 2] = ti[i];
        }
        if (!inside) continue;
        xi[0] = yi[0];
        xi[1] = grp * cg + ic;
        wi[0] = oc;
        wi[1] = ic;
        acc += xv[size_t(ravel(xi, x.shape()))] * wv[size_t(ravel(wi, w.shape()))];
      }
    y[size_t(flat)] = acc;
  }
  return {tensor_of(x.dtype(), ys, y)};
}

// conv_transpose as its definition: every x[n, c, i] adds x * w[c, mo, t] to
// y[n, g * M/groups + mo, i * s - pad + t * dil] (g = c / (C/groups)), plus b.
Tensors ref_conv_transpose(const Tensors& in, const Attrs& a) {
  const Tensor &x = in[0], &w = in[1];
  Geometry g = geometry(a, x.shape(), w.shape(), true);
  int64_t groups = a.get_int("groups"), n = x.shape()[0], c = x.shape()[1];
  int64_t cg = c / groups, mg = w.shape()[1], m = mg * groups;
  Shape ys{n, m}, ks(w.shape().begin() + 2, w.shape().end());
  ys.insert(ys.end(), g.out.begin(), g.out.end());
  auto xv = values(x), wv = values(w);
  std::vector<double> bv = in.size() > 2 ? values(in[2]) : std::vector<double>(size_t(m), 0.0);
  std::vector<double> y(size_t(numel(ys)));
  for (int64_t flat = 0; flat < numel(ys); ++flat)
    y[size_t(flat)] = bv[size_t(unravel(flat, ys)[1])];
  Shape yi(ys.size()), wi(w.shape().size());
  std::vector<Shape> taps = indices(ks);
  for (int64_t flat = 0; flat < x.numel(); ++flat) {
    Shape xi = unravel(flat, x.shape());
    int64_t grp = xi[1] / cg;
    for (int64_t mo = 0; mo < mg; ++mo)
      for (const Shape& ti : taps) {
        bool inside = true;
        for (size_t i = 0; i < g.k; ++i) {
          yi[i + 2] = xi[i + 2] * g.stride[i] - g.pad[i] + ti[i] * g.dil[i];
          inside &= yi[i + 2] >= 0 && yi[i + 2] < g.out[i];
          wi[i + 2] = ti[i];
        }
        if (!inside) continue;
        yi[0] = xi[0];
        yi[1] = grp * mg + mo;
        wi[0] = xi[1];
        wi[1] = mo;
        y[size_t(ravel(yi, ys))] += xv[size_t(flat)] * wv[size_t(ravel(wi, w.shape()))];
      }
  }
  return {tensor_of(x.dtype(), ys, y)};
}

struct Case {
  Shape x, w;
  bool bias;
  Attrs attrs;
  std::string note;
};

// Sums of `reduce` products of values up to 2 in size: the rounding of the f32 / f64 sums
// grows with the length; f16 / bf16 are computed in f32 and rounded once, but oneDNN's
// bf16 path rounds its inputs' products in its own order.
void add_cases(CheckTable& t, const std::string& op, const std::vector<Case>& cases,
               std::initializer_list<DType> dtypes, uint64_t seed) {
  bool transpose = op == "conv_transpose";
  for (const Case& c : cases)
    for (DType dt : dtypes) {
      OpCheck k;
      k.op = op;
      k.dtype = dt;
      k.inputs = {random_tensor(dt, c.x, ++seed), random_tensor(dt, c.w, ++seed)};
      if (c.bias) {
        int64_t groups = c.attrs.has("groups") ? c.attrs.get_int("groups") : 1;
        int64_t m = transpose ? c.w[1] * groups : c.w[0];
        k.inputs.push_back(random_tensor(dt, {m}, ++seed));
      }
      k.attrs = c.attrs;
      k.ref = transpose ? ref_conv_transpose : ref_conv;
      int64_t reduce = numel(Shape(c.w.begin() + 1, c.w.end()));
      if (transpose) reduce = c.w[0] * numel(Shape(c.w.begin() + 2, c.w.end()));
      auto [rtol, atol] = default_tolerance(dt);
      k.rtol = rtol;
      k.atol = atol * 2 * std::sqrt(double(std::max<int64_t>(reduce, 1)));
      k.note = c.note;
      t.add(std::move(k));
    }
}

const DType kF32 = DType::f32, kF64 = DType::f64, kF16 = DType::f16, kBF16 = DType::bf16;

}  // namespace

CheckTable checks_conv() {
  CheckTable t;
  Attrs none{{"groups", 1}};
  // conv: w [M, C/groups, K...].
  std::vector<Case> conv_all = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, true, {{"pads", IntList{1, 1, 1, 1}}}, "2-D, bias"},
      {{1, 2, 7, 8},
       {3, 2, 2, 3},
       false,
       {{"strides", IntList{2, 1}}, {"pads", IntList{0, 1, 2, 0}}, {"dilations", IntList{1, 2}}},
       "asymmetric pads, stride, dilation"},
      {{2, 4, 9}, {6, 4, 3}, true, {{"strides", IntList{2}}, {"pads", IntList{1, 2}}}, "1-D"},
  };
  std::vector<Case> conv_more = {
      {{1, 2, 10}, {2, 2, 3}, false, {{"dilations", IntList{3}}}, "1-D dilation"},
      {{1, 2, 4, 5, 3},
       {3, 2, 2, 3, 2},
       true,
       {{"strides", IntList{1, 2, 1}}, {"pads", IntList{1, 0, 1, 0, 1, 1}}},
       "3-D"},
      {{1, 2, 5, 4, 4},
       {2, 2, 3, 1, 2},
       false,
       {{"dilations", IntList{2, 1, 2}}, {"auto_pad", "same_lower"}},
       "3-D same_lower dilated"},
      {{1, 4, 5, 5}, {6, 2, 3, 3}, true, {{"groups", 2}}, "groups 2"},
      {{2, 3, 6, 6},
       {3, 1, 3, 3},
       true,
       {{"groups", 3}, {"pads", IntList{1, 1, 1, 1}}, {"strides", IntList{2, 2}}},
       "depthwise"},
      {{1, 3, 5, 6}, {6, 1, 3, 3}, false, {{"groups", 3}}, "depthwise, multiplier 2"},
      {{1, 4, 9}, {4, 1, 3}, true, {{"groups", 4}, {"dilations", IntList{2}}}, "1-D depthwise"},
      {{1, 2, 7, 6},
       {3, 2, 3, 3},
       true,
       {{"strides", IntList{2, 2}}, {"dilations", IntList{1, 2}}, {"auto_pad", "same_upper"}},
       "same_upper"},
      {{1, 2, 5, 6},
       {2, 2, 2, 3},
       false,
       {{"strides", IntList{2, 2}}, {"auto_pad", "same_lower"}},
       "same_lower"},
      {{1, 2, 5, 5}, {2, 2, 3, 3}, false, {{"auto_pad", "valid"}}, "valid"},
      {{2, 8, 3, 4}, {5, 8, 1, 1}, true, none, "pointwise"},
      {{1, 4, 6, 6}, {4, 4, 1, 1}, false, {{"strides", IntList{2, 2}}}, "1x1 stride 2"},
      {{1, 3, 1, 1}, {4, 3, 1, 1}, false, none, "size-1 spatial"},
      {{1, 1, 2, 2}, {1, 1, 3, 3}, true, {{"pads", IntList{1, 1, 1, 1}}}, "kernel over input"},
      {{0, 3, 4, 4}, {2, 3, 3, 3}, true, none, "empty batch"},
      {{1, 0, 4, 4}, {2, 0, 3, 3}, true, none, "no input channels"},
      {{3, 16, 10, 10},
       {32, 16, 3, 3},
       true,
       {{"pads", IntList{1, 1, 1, 1}}},
       "wider (blocked layouts)"},
      // Taps that mostly read padding (the CPU's conv_by_taps): an ASPP-like dilation on a
      // small map, two images; a 3-D one with a stride.
      {{2, 6, 6, 6},
       {5, 6, 3, 3},
       true,
       {{"pads", IntList{4, 4, 4, 4}}, {"dilations", IntList{4, 4}}},
       "dilation 4 on 6 x 6"},
      {{1, 3, 4, 5, 5},
       {4, 3, 3, 3, 3},
       false,
       {{"pads", IntList{3, 3, 3, 3, 3, 3}},
        {"dilations", IntList{3, 3, 3}},
        {"strides", IntList{1, 2, 1}}},
       "3-D dilation 3, stride"},
  };
  add_cases(t, "conv", conv_all, {kF32, kF64, kF16, kBF16}, 100);
  add_cases(t, "conv", conv_more, {kF32, kF64}, 200);

  // NaN and infinity reach exactly the outputs whose windows hold them.
  {
    Tensor x = random_tensor(kF32, {1, 2, 5, 5}, 7);
    x.data_as<float>()[6] = NAN;
    x.data_as<float>()[25 + 18] = INFINITY;
    t.add({"conv",
           kF32,
           {x, random_tensor(kF32, {3, 2, 3, 3}, 8, 0.1, 2)},
           none,
           ref_conv,
           {},
           {},
           -1,
           1e-5,
           "nan, inf"});
  }

  // conv_transpose: w [C, M/groups, K...].
  std::vector<Case> ct_all = {
      {{1, 4, 3, 3}, {4, 2, 3, 3}, true, none, "2-D, bias"},
      {{2, 3, 3, 4},
       {3, 2, 3, 3},
       false,
       {{"strides", IntList{2, 2}},
        {"pads", IntList{1, 1, 1, 1}},
        {"output_padding", IntList{1, 1}}},
       "stride, output_padding"},
  };
  std::vector<Case> ct_more = {
      {{1, 4, 5},
       {4, 3, 3},
       true,
       {{"groups", 2}, {"strides", IntList{2}}, {"dilations", IntList{2}}},
       "1-D groups, dilation"},
      {{1, 2, 2, 3, 2},
       {2, 3, 2, 2, 2},
       false,
       {{"strides", IntList{2, 2, 2}}, {"auto_pad", "valid"}},
       "3-D"},
      {{1, 2, 3, 4},
       {2, 2, 3, 3},
       true,
       {{"strides", IntList{2, 2}}, {"auto_pad", "same_upper"}},
       "same_upper"},
      {{1, 2, 3, 4},
       {2, 2, 3, 3},
       false,
       {{"strides", IntList{2, 1}}, {"auto_pad", "same_lower"}},
       "same_lower"},
      {{1, 2, 4},
       {2, 1, 2},
       true,
       {{"strides", IntList{3}}, {"auto_pad", "same_lower"}},
       "same, stride over kernel"},
      {{1, 2, 4},
       {2, 3, 2},
       false,
       {{"strides", IntList{2}}, {"output_padding", IntList{1}}},
       "output_padding past the pads"},
      {{1, 2, 3, 3},
       {2, 2, 3, 2},
       true,
       {{"pads", IntList{0, 1, 2, 0}}, {"strides", IntList{1, 2}}},
       "asymmetric pads"},
      {{1, 3, 4, 4}, {3, 1, 3, 3}, true, {{"groups", 3}, {"strides", IntList{2, 2}}}, "depthwise"},
      {{0, 4, 3}, {4, 2, 3}, true, none, "empty batch"},
      {{2, 16, 5, 6},
       {16, 1, 2, 2},
       true,
       {{"strides", IntList{2, 2}}},
       "upsampling (stride = kernel: a GEMM and a scatter), one output channel"},
      {{1, 3, 7}, {3, 4, 3}, true, {{"strides", IntList{3}}}, "1-D upsampling by 3"},
      {{1, 16, 16, 16},
       {16, 4, 4, 4},
       true,
       {{"strides", IntList{2, 2}}, {"pads", IntList{1, 1, 1, 1}}},
       "wider (blocked layouts)"},
  };
  add_cases(t, "conv_transpose", ct_all, {kF32, kF64, kF16, kBF16}, 300);
  add_cases(t, "conv_transpose", ct_more, {kF32, kF64}, 400);
  return t;
}

}  // namespace rlx::test
