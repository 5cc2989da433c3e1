// softmax, log_softmax, the norms, attention, embedding, dropout and cross_entropy against
// their definitions as naive loops in double. Every float op runs in all four float
// dtypes over a few shapes (size-1, empty and negative-axis cases among them); a wider
// case per op also exercises the vectorised and multi-threaded paths. Dropout in training
// draws a random mask, so those checks verify properties instead (see dropout_verify).
#include <cmath>
#include <limits>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

using Shape = std::vector<int64_t>;

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

size_t axis_of(const Attrs& a, size_t rank) {
  int64_t ax = a.get_int("axis");
  return size_t(ax < 0 ? ax + int64_t(rank) : ax);
}

Tensors one(DType dt, Shape s, const std::vector<double>& v) {
  return {Tensor::from_doubles(dt, std::move(s), v)};
}

// ---- softmax, log_softmax ----------------------------------------------------------

// Along the axis: m = max (NaN is skipped by std::max but poisons the sum), then
// exp(x - m) / sum or (x - m) - log(sum).
RefFn softmax_ref(bool log) {
  return [log](const Tensors& in, const Attrs& a) {
    const Shape& s = in[0].shape();
    auto x = values(in[0]);
    size_t ax = axis_of(a, s.size());
    int64_t outer = prod(s, 0, ax), n = s[ax], inner = prod(s, ax + 1, s.size());
    std::vector<double> y(x.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        auto at = [&](int64_t i) { return size_t((o * n + i) * inner + j); };
        double m = -kInf, sum = 0;
        for (int64_t i = 0; i < n; ++i) m = std::max(m, x[at(i)]);
        for (int64_t i = 0; i < n; ++i) sum += std::exp(x[at(i)] - m);
        for (int64_t i = 0; i < n; ++i)
          y[at(i)] = log ? (x[at(i)] - m) - std::log(sum) : std::exp(x[at(i)] - m) / sum;
      }
    return one(in[0].dtype(), s, y);
  };
}

void softmax_checks(CheckTable& t) {
  struct Case {
    Shape shape;
    int64_t axis;
    const char* note;
  };
  const Case cases[] = {
      {{2, 5}, -1, "last axis"}, {{3, 4, 5}, 1, "middle axis"},   {{3, 4, 5}, -3, "first axis"},
      {{7}, 0, "rank 1"},        {{4, 1}, -1, "size-1 axis"},     {{2, 0}, -1, "empty axis"},
      {{0, 3}, 0, "empty rows"}, {{2, 1, 3}, 1, "size-1 middle"},
  };
  for (const char* op : {"softmax", "log_softmax"}) {
    bool log = std::string(op) == "log_softmax";
    uint64_t seed = log ? 100 : 0;
    for (DType dt : kFloats) {
      for (const Case& c : cases)
        t.add(ref_check(op, dt, {random_tensor(dt, c.shape, ++seed, -4, 4)}, {{"axis", c.axis}},
                        softmax_ref(log), c.note));
      // -inf entries, an all -inf row (NaN), NaN and +inf (NaN rows), large values.
      Tensor special =
          tensor_of(dt, {5, 4}, {1, -kInf, 2,    0.5, -kInf, -kInf, -kInf, -kInf, kNaN,  1,
                                 2, 3,     kInf, 1,   2,     3,     1000,  999,   -1000, 0});
      t.add(ref_check(op, dt, {special}, {{"axis", 1}}, softmax_ref(log), "inf, nan, large"));
      t.add(ref_check(op, dt, {special}, {{"axis", 0}}, softmax_ref(log), "inf, nan columns"));
    }
    // Wide rows and columns: vector loops with tails, two column chunks, several threads.
    t.add(ref_check(op, DType::f32, {random_tensor(DType::f32, {130, 517}, seed + 1, -8, 8)},
                    {{"axis", -1}}, softmax_ref(log), "wide rows"));
    t.add(ref_check(op, DType::f32, {random_tensor(DType::f32, {3, 37, 300}, seed + 2, -8, 8)},
                    {{"axis", 1}}, softmax_ref(log), "wide columns"));
    t.add(ref_check(op, DType::bf16, {random_tensor(DType::bf16, {64, 300}, seed + 3, -8, 8)},
                    {{"axis", -1}}, softmax_ref(log), "wide rows"));
  }
}

// ---- layer_norm, rms_norm ----------------------------------------------------------

}  // namespace

// Over [axis, rank): (x - mean) / sqrt(var + eps) * scale + bias (biased variance), or
// x / sqrt(mean(x^2) + eps) * scale.
RefFn trailing_norm_ref(bool rms) {
  return [rms](const Tensors& in, const Attrs& a) {
    const Shape& s = in[0].shape();
    auto x = values(in[0]);
    size_t ax = axis_of(a, s.size());
    int64_t rows = prod(s, 0, ax), n = prod(s, ax, s.size());
    std::vector<double> sc = in.size() > 1 ? values(in[1]) : std::vector<double>(size_t(n), 1.0);
    std::vector<double> bi = in.size() > 2 ? values(in[2]) : std::vector<double>(size_t(n), 0.0);
    double eps = a.get_float("epsilon");
    std::vector<double> y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = x.data() + r * n;
      double mean = 0, var = 0;
      if (!rms) {
        for (int64_t i = 0; i < n; ++i) mean += row[i];
        mean /= double(n);
      }
      for (int64_t i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
      double inv = 1 / std::sqrt(var / double(n) + eps);
      for (int64_t i = 0; i < n; ++i)
        y[size_t(r * n + i)] = (row[i] - mean) * inv * sc[size_t(i)] + bi[size_t(i)];
    }
    return one(in[0].dtype(), s, y);
  };
}

namespace {

void trailing_norm_checks(CheckTable& t) {
  struct Case {
    Shape shape;
    int64_t axis;
    int params;  // 0: x only, 1: + scale, 2: + scale and bias
    double eps;
    const char* note;
  };
  const Case cases[] = {
      {{2, 3, 4}, -1, 2, 1e-5, "last axis, scale, bias"},
      {{2, 3, 4}, -1, 0, 1e-5, "no params"},
      {{2, 3, 4}, 1, 1, 1e-5, "two axes, scale"},
      {{2, 3, 4}, -3, 2, 0.5, "all axes, large epsilon"},
      {{6}, 0, 2, 1e-5, "rank 1"},
      {{3, 1}, -1, 2, 1e-2, "size-1 rows"},
      {{0, 4}, 1, 2, 1e-5, "no rows"},
      {{4, 0}, 1, 2, 1e-5, "empty rows"},
  };
  for (const char* op : {"layer_norm", "rms_norm"}) {
    bool rms = std::string(op) == "rms_norm";
    uint64_t seed = rms ? 300 : 200;
    for (DType dt : kFloats) {
      for (const Case& c : cases) {
        Shape tail(c.shape.begin() + int64_t(axis_of({{"axis", c.axis}}, c.shape.size())),
                   c.shape.end());
        Tensors in{random_tensor(dt, c.shape, ++seed, -3, 5)};
        int params = rms ? std::min(c.params, 1) : c.params;
        for (int p = 0; p < params; ++p) in.push_back(random_tensor(dt, tail, ++seed, -2, 2));
        t.add(ref_check(op, dt, in, {{"axis", c.axis}, {"epsilon", c.eps}}, trailing_norm_ref(rms),
                        c.note));
      }
    }
    Shape wide{70, 1030};
    Tensors in{random_tensor(DType::f32, wide, seed + 1, -3, 5),
               random_tensor(DType::f32, {1030}, seed + 2)};
    if (!rms) in.push_back(random_tensor(DType::f32, {1030}, seed + 3));
    t.add(ref_check(op, DType::f32, in, {}, trailing_norm_ref(rms), "wide rows"));
  }
}

// layer_norm_grad: (dx, dscale, dbias) for x, dy and the optional scale over [axis, rank):
// dx = inv (g - mean(g) - xhat mean(g xhat)) with g = dy scale (no mean(g) for rms);
// dscale = sum over rows of dy xhat, dbias of dy.
Tensors norm_grad_ref(const Tensors& in, const Attrs& a) {
  const Shape& s = in[0].shape();
  auto x = values(in[0]), dy = values(in[1]);
  size_t ax = axis_of(a, s.size());
  int64_t rows = prod(s, 0, ax), n = prod(s, ax, s.size());
  std::vector<double> sc = in.size() > 2 ? values(in[2]) : std::vector<double>(size_t(n), 1.0);
  bool center = a.get_bool("center");
  double eps = a.get_float("epsilon");
  std::vector<double> dx(x.size()), ds(static_cast<size_t>(n)), db(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * n;
    const double* d = dy.data() + r * n;
    double mean = 0, var = 0, mg = 0, mgx = 0;
    if (center) {
      for (int64_t i = 0; i < n; ++i) mean += row[i];
      mean /= double(n);
    }
    for (int64_t i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
    double inv = 1 / std::sqrt(var / double(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      double xh = (row[i] - mean) * inv, g = d[i] * sc[size_t(i)];
      mg += g / double(n);
      mgx += g * xh / double(n);
      ds[size_t(i)] += d[i] * xh;
      db[size_t(i)] += d[i];
    }
    for (int64_t i = 0; i < n; ++i) {
      double xh = (row[i] - mean) * inv, g = d[i] * sc[size_t(i)];
      dx[size_t(r * n + i)] = inv * (g - (center ? mg : 0) - xh * mgx);
    }
  }
  Shape tail(s.begin() + int64_t(ax), s.end());
  DType dt = in[0].dtype();
  return {Tensor::from_doubles(dt, s, dx), Tensor::from_doubles(dt, tail, ds),
          Tensor::from_doubles(dt, tail, db)};
}

void norm_grad_checks(CheckTable& t) {
  uint64_t seed = 400;
  struct Case {
    Shape shape;
    int64_t axis;
    bool scale;
    const char* note;
  };
  const Case cases[] = {
      {{2, 3, 4}, -1, true, "last axis, scale"},
      {{5, 6}, -1, false, "no scale"},
      {{2, 3, 4}, 1, true, "two axes"},
      {{3, 4}, 0, true, "all axes"},
      {{0, 4}, 1, true, "no rows"},
      {{37, 768}, -1, true, "rows of 768, blocks"},
      {{9, 1000}, -1, true, "rows of 1000"},
      {{3, 1030}, -1, true, "rows past the kernel's (decomposed on cuda)"},
  };
  for (bool center : {true, false})
    for (DType dt : kFloats)
      for (const Case& c : cases) {
        Shape tail(c.shape.begin() + int64_t(axis_of({{"axis", c.axis}}, c.shape.size())),
                   c.shape.end());
        Tensors in{random_tensor(dt, c.shape, ++seed, -3, 5), random_tensor(dt, c.shape, ++seed)};
        if (c.scale) in.push_back(random_tensor(dt, tail, ++seed, -2, 2));
        OpCheck check = ref_check("layer_norm_grad", dt, in,
                                  {{"axis", c.axis}, {"epsilon", 1e-5}, {"center", center}},
                                  norm_grad_ref, c.note);
        // dscale sums dy xhat over rows (terms up to ~10, cancelling): f32 sums in another
        // order differ by a few ulps of the terms (seen on the H200: 1.7e-6 of 0.0384).
        if (dt == DType::f32) check.rtol = 1e-4, check.atol = 2e-5;
        t.add(std::move(check));
      }
}

// ---- group_norm, batch_norm --------------------------------------------------------

// x [N, C, S...]; statistics per (n, group of C/G channels), affine per channel.
Tensors group_norm_ref(const Tensors& in, const Attrs& a) {
  const Shape& s = in[0].shape();
  auto x = values(in[0]), sc = values(in[1]), bi = values(in[2]);
  int64_t n = s[0], ch = s[1], sp = prod(s, 2, s.size()), g = a.get_int("num_groups");
  int64_t m = ch / g * sp;
  double eps = a.get_float("epsilon");
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < n * g; ++b) {
    const double* blk = x.data() + b * m;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < m; ++i) mean += blk[i];
    mean /= double(m);
    for (int64_t i = 0; i < m; ++i) var += (blk[i] - mean) * (blk[i] - mean);
    double inv = 1 / std::sqrt(var / double(m) + eps);
    for (int64_t i = 0; i < m; ++i) {
      size_t c = size_t((b % g) * (ch / g) + i / sp);
      y[size_t(b * m + i)] = (blk[i] - mean) * inv * sc[c] + bi[c];
    }
  }
  return one(in[0].dtype(), s, y);
}

// Inference form with given statistics: (x - mean) / sqrt(var + eps) * scale + bias.
Tensors batch_norm_ref(const Tensors& in, const Attrs& a) {
  const Shape& s = in[0].shape();
  auto x = values(in[0]), sc = values(in[1]), bi = values(in[2]), mu = values(in[3]),
       var = values(in[4]);
  int64_t ch = s[1], sp = prod(s, 2, s.size());
  double eps = a.get_float("epsilon");
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = size_t((int64_t(i) / sp) % ch);
    y[i] = (x[i] - mu[c]) / std::sqrt(var[c] + eps) * sc[c] + bi[c];
  }
  return one(in[0].dtype(), s, y);
}

void channel_norm_checks(CheckTable& t) {
  struct Case {
    Shape shape;
    int64_t groups;
    double eps;
    const char* note;
  };
  const Case cases[] = {
      {{2, 6, 4}, 3, 1e-5, "1-D"},           {{2, 4, 3, 3}, 2, 1e-5, "2-D"},
      {{1, 4, 5}, 4, 1e-5, "instance norm"}, {{3, 4}, 1, 0.1, "rank 2, one group"},
      {{0, 4, 2}, 2, 1e-5, "empty batch"},   {{2, 4, 0}, 2, 1e-5, "empty spatial"},
  };
  uint64_t seed = 400;
  for (DType dt : kFloats)
    for (const Case& c : cases) {
      Shape cs{c.shape[1]};
      Tensors gn{random_tensor(dt, c.shape, ++seed, -3, 5), random_tensor(dt, cs, ++seed),
                 random_tensor(dt, cs, ++seed)};
      t.add(ref_check("group_norm", dt, gn, {{"num_groups", c.groups}, {"epsilon", c.eps}},
                      group_norm_ref, c.note));
      Tensors bn = gn;
      bn.push_back(random_tensor(dt, cs, ++seed, -1, 1));
      bn.push_back(random_tensor(dt, cs, ++seed, 0.1, 3));
      t.add(ref_check("batch_norm", dt, bn, {{"epsilon", c.eps}}, batch_norm_ref, c.note));
    }
  Shape wide{2, 64, 40, 40};
  t.add(ref_check("group_norm", DType::f32,
                  {random_tensor(DType::f32, wide, 450, -3, 5),
                   random_tensor(DType::f32, {64}, 451), random_tensor(DType::f32, {64}, 452)},
                  {{"num_groups", 8}}, group_norm_ref, "wide"));
  t.add(
      ref_check("batch_norm", DType::f32,
                {random_tensor(DType::f32, wide, 453, -3, 5), random_tensor(DType::f32, {64}, 454),
                 random_tensor(DType::f32, {64}, 455), random_tensor(DType::f32, {64}, 456),
                 random_tensor(DType::f32, {64}, 457, 0.1, 3)},
                {}, batch_norm_ref, "wide"));
}

// ---- attention ---------------------------------------------------------------------

// Flat index of a tensor of shape s at batch index bi and matrix position (r, c), with
// broadcasting.
size_t matrix_at(const Shape& s, const Shape& bi, int64_t r, int64_t c) {
  Shape idx = bi;
  idx.push_back(r);
  idx.push_back(c);
  return size_t(broadcast_index(idx, s));
}

// attention's scale and mask as the references read them. Masks align bottom-right: query
// i sits at key position i + Sk - Sq.
struct AttentionMask {
  double scale;
  std::string mask;
  int64_t window;
  AttentionMask(const Attrs& a, int64_t d)
      : scale(a.get_float("scale")), mask(a.get_string("mask")), window(a.get_int("window")) {
    if (scale == 0) scale = d > 0 ? 1 / std::sqrt(double(d)) : 1;
  }
  bool sees(int64_t i, int64_t j, int64_t nq, int64_t nk) const {
    int64_t pos = i + nk - nq;
    return mask == "none" || (j <= pos && (window == 0 || pos - j < window));
  }
};

// softmax(q k^T * scale + bias) v per broadcast batch index, with bottom-right aligned
// masks (query i sits at key position i + Sk - Sq). A row whose visible scores are all
// -inf (or that sees no key) gives 0; the weighted sum runs over every key (masked ones
// with weight 0). With `lse`, also each row's log-sum-exp (f32; +inf for such a row), as
// attention_lse returns it.
Tensors attention_rows_ref(const Tensors& in, const Attrs& a, bool lse) {
  const Shape &qs = in[0].shape(), &ks = in[1].shape(), &vs = in[2].shape();
  auto q = values(in[0]), k = values(in[1]), v = values(in[2]);
  std::vector<double> bias = in.size() > 3 ? values(in[3]) : std::vector<double>{};
  Shape batch = broadcast_shape(
      broadcast_shape(Shape(qs.begin(), qs.end() - 2), Shape(ks.begin(), ks.end() - 2)),
      Shape(vs.begin(), vs.end() - 2));
  int64_t nq = qs[qs.size() - 2], nk = ks[ks.size() - 2], d = qs.back(), dv = vs.back();
  const AttentionMask mask(a, d);
  Shape os = batch;
  os.push_back(nq);
  os.push_back(dv);
  std::vector<double> out(size_t(numel(os))), row_lse(size_t(numel(batch) * nq), kInf);
  const auto& at = matrix_at;
  for (int64_t b = 0; b < numel(batch); ++b) {
    Shape bi = unravel(b, batch);
    for (int64_t i = 0; i < nq; ++i) {
      std::vector<double> s(size_t(nk), 0.0), p(size_t(nk), 0.0);
      std::vector<bool> visible(size_t(nk), true);
      double m = -kInf;
      bool nan = false;
      for (int64_t j = 0; j < nk; ++j) {
        visible[size_t(j)] = mask.sees(i, j, nq, nk);
        if (!visible[size_t(j)]) continue;
        double acc = 0;
        for (int64_t e = 0; e < d; ++e) acc += q[at(qs, bi, i, e)] * k[at(ks, bi, j, e)];
        s[size_t(j)] = acc * mask.scale + (bias.empty() ? 0 : bias[at(in[3].shape(), bi, i, j)]);
        nan |= std::isnan(s[size_t(j)]);
        m = std::max(m, s[size_t(j)]);
      }
      if (nan || m > -kInf) {
        double sum = 0;
        for (int64_t j = 0; j < nk; ++j)
          if (visible[size_t(j)]) sum += p[size_t(j)] = std::exp(s[size_t(j)] - m);
        for (double& x : p) x /= sum;
        row_lse[size_t(b * nq + i)] = m + std::log(sum);
      }
      for (int64_t e = 0; e < dv; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < nk; ++j) acc += p[size_t(j)] * v[at(vs, bi, j, e)];
        out[size_t((b * nq + i) * dv + e)] = acc;
      }
    }
  }
  Tensors y = one(in[0].dtype(), os, out);
  DType lse_dt = in[0].dtype() == DType::f64 ? DType::f64 : DType::f32;
  if (lse) y.push_back(one(lse_dt, Shape(os.begin(), os.end() - 1), row_lse)[0]);
  return y;
}

Tensors attention_ref(const Tensors& in, const Attrs& a) {
  return attention_rows_ref(in, a, false);
}
Tensors attention_lse_ref(const Tensors& in, const Attrs& a) {
  return attention_rows_ref(in, a, true);
}

// attention_grad(q, k, v, dy): the probabilities as attention_ref makes them, then
// dv = P^T dy, dS = P (dy v^T - rowsum(P dy v^T)), dq = scale dS k, dk = scale dS^T q.
Tensors attention_grad_ref(const Tensors& in, const Attrs& a) {
  const Shape &qs = in[0].shape(), &ks = in[1].shape(), &vs = in[2].shape(), &ys = in[3].shape();
  auto q = values(in[0]), k = values(in[1]), v = values(in[2]), dy = values(in[3]);
  Shape batch(ys.begin(), ys.end() - 2);
  int64_t nq = qs[qs.size() - 2], nk = ks[ks.size() - 2], d = qs.back(), dv = vs.back();
  const AttentionMask mask(a, d);
  const double scale = mask.scale;
  auto with = [&](int64_t r, int64_t c) {
    Shape s = batch;
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  Shape qo = with(nq, d), ko = with(nk, d), vo = with(nk, dv);
  std::vector<double> gq(size_t(numel(qo))), gk(size_t(numel(ko))), gv(size_t(numel(vo)));
  const auto& at = matrix_at;
  for (int64_t b = 0; b < numel(batch); ++b) {
    Shape bi = unravel(b, batch);
    for (int64_t i = 0; i < nq; ++i) {
      std::vector<double> p(size_t(nk), 0.0), dp(size_t(nk), 0.0);
      double m = -kInf, sum = 0;
      auto visible = [&](int64_t j) { return mask.sees(i, j, nq, nk); };
      for (int64_t j = 0; j < nk; ++j) {
        if (!visible(j)) continue;
        double acc = 0;
        for (int64_t e = 0; e < d; ++e) acc += q[at(qs, bi, i, e)] * k[at(ks, bi, j, e)];
        p[size_t(j)] = acc * scale;
        m = std::max(m, p[size_t(j)]);
      }
      for (int64_t j = 0; j < nk; ++j)
        if (visible(j)) sum += p[size_t(j)] = std::exp(p[size_t(j)] - m);
      double dot = 0;
      for (int64_t j = 0; j < nk; ++j) {
        if (!visible(j)) continue;
        p[size_t(j)] /= sum;
        for (int64_t e = 0; e < dv; ++e)
          dp[size_t(j)] += dy[at(ys, bi, i, e)] * v[at(vs, bi, j, e)];
        dot += p[size_t(j)] * dp[size_t(j)];
      }
      for (int64_t j = 0; j < nk; ++j) {
        double ds = p[size_t(j)] * (dp[size_t(j)] - dot) * scale;
        for (int64_t e = 0; e < d; ++e) {
          gq[size_t((b * nq + i) * d + e)] += ds * k[at(ks, bi, j, e)];
          gk[size_t((b * nk + j) * d + e)] += ds * q[at(qs, bi, i, e)];
        }
        for (int64_t e = 0; e < dv; ++e)
          gv[size_t((b * nk + j) * dv + e)] += p[size_t(j)] * dy[at(ys, bi, i, e)];
      }
    }
  }
  DType dt = in[0].dtype();
  return {one(dt, qo, gq)[0], one(dt, ko, gk)[0], one(dt, vo, gv)[0]};
}

// Layout bshd: `ref` on inputs with the sequence and head axes swapped (the first
// `swapped`: q, k, v, and dy; a bias stays), its first `swapped_out` results swapped back
// (attention_lse's statistics are [..., H, Sq] in both layouts).
RefFn bshd_ref(RefFn ref, size_t swapped, size_t swapped_out = 3) {
  auto swap_sh = [](const Tensor& x) {
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < x.rank(); ++d) perm.push_back(d);
    std::swap(perm[perm.size() - 3], perm[perm.size() - 2]);
    return x.permute(perm).contiguous();
  };
  return [ref, swapped, swapped_out, swap_sh](const Tensors& in, const Attrs& a) {
    Tensors b = in;
    for (size_t i = 0; i < swapped && i < b.size(); ++i) b[i] = swap_sh(b[i]);
    Tensors out = ref(b, a);
    for (size_t i = 0; i < swapped_out && i < out.size(); ++i) out[i] = swap_sh(out[i]);
    return out;
  };
}

// An attention_grad / attention_lse check's operand shapes, attributes and note.
struct QkvCase {
  Shape q, k, v;
  Attrs attrs;
  const char* note;
};

// attention_lse, and attention_grad given its outputs (y, lse) as a train step's
// attention_stats pass wires them: the statistics must belong to q, k, v, so they come
// from the reference.
void attention_stats_checks(CheckTable& t) {
  const std::vector<QkvCase> cases = {
      {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, {}, "Sq != Sk, Dv != D"},
      {{2, 5, 4}, {2, 3, 4}, {2, 3, 4}, {{"mask", "causal"}}, "causal, masked rows"},
      {{2, 6, 4}, {2, 6, 4}, {2, 6, 4}, {{"mask", "sliding_window"}, {"window", 2}}, "window"},
      {{2, 2, 3, 4}, {2, 1, 5, 4}, {1, 5, 4}, {{"scale", 0.3}}, "broadcast batch, scale"},
      {{1, 2, 70, 64}, {1, 2, 70, 64}, {1, 2, 70, 64}, {{"mask", "causal"}}, "head dim 64, tiles"},
      {{1, 70, 2, 64},
       {1, 70, 2, 64},
       {1, 70, 2, 64},
       {{"mask", "causal"}, {"layout", "bshd"}},
       "bshd, tiles"},
      {{1, 5, 2, 4},
       {1, 6, 2, 4},
       {1, 6, 2, 4},
       {{"mask", "causal"}, {"layout", "bshd"}},
       "bshd, masked rows"},
  };
  uint64_t seed = 800;
  for (DType dt : kFloats)
    for (const QkvCase& c : cases) {
      const bool bshd = c.attrs.has("layout");  // only the bshd cases set it
      Tensors qkv{random_tensor(dt, c.q, ++seed), random_tensor(dt, c.k, ++seed),
                  random_tensor(dt, c.v, ++seed)};
      RefFn lse_ref = bshd ? bshd_ref(attention_lse_ref, 3, 1) : RefFn(attention_lse_ref);
      OpCheck forward = ref_check("attention_lse", dt, qkv, c.attrs, lse_ref, c.note);
      // cuda's f32 attention (3xTF32 on tensor cores) is ~1e-6 off at head dim 64.
      if (dt == DType::f32) forward.atol = 1e-5, forward.rtol = 1e-4;
      t.add(std::move(forward));
      Tensors saved =
          lse_ref(qkv, validate_attrs(*OpRegistry::global().find("attention_lse"), c.attrs));
      Tensors in = qkv;
      in.push_back(random_tensor(dt, saved[0].shape(), ++seed));  // dy
      in.push_back(saved[0]);
      in.push_back(saved[1]);
      RefFn grad_ref = bshd ? bshd_ref(attention_grad_ref, 4) : RefFn(attention_grad_ref);
      OpCheck check = ref_check("attention_grad", dt, in, c.attrs, grad_ref,
                                str_cat(c.note, ", forward's statistics given"));
      if (dt == DType::bf16) check.atol = 3e-2, check.rtol = 5e-2;
      if (dt == DType::f16) check.atol = 4e-3, check.rtol = 2e-2;
      t.add(std::move(check));
    }
}

void attention_grad_checks(CheckTable& t) {
  const std::vector<QkvCase> cases = {
      {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, {}, "Sq != Sk, Dv != D"},
      {{1, 2, 6, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}, {{"mask", "causal"}}, "causal"},
      {{2, 5, 4}, {2, 3, 4}, {2, 3, 2}, {{"mask", "causal"}}, "causal, masked rows"},
      {{2, 6, 4}, {2, 6, 4}, {2, 6, 3}, {{"mask", "sliding_window"}, {"window", 2}}, "window"},
      {{2, 2, 3, 4}, {2, 1, 5, 4}, {1, 5, 4}, {{"scale", 0.3}}, "broadcast batch, scale"},
      {{1, 2, 70, 32}, {1, 2, 70, 32}, {1, 2, 70, 32}, {{"mask", "causal"}}, "rows past a warp"},
      {{1, 0, 8}, {1, 3, 8}, {1, 3, 8}, {}, "no queries"},
      {{2, 3, 4}, {2, 0, 4}, {2, 0, 3}, {}, "no keys"},
  };
  uint64_t seed = 700;
  for (DType dt : kFloats)
    for (const QkvCase& c : cases) {
      Shape y = c.q;  // q carries the batch in every case
      y[y.size() - 2] = c.q[c.q.size() - 2];
      y.back() = c.v.back();
      OpCheck check = ref_check("attention_grad", dt,
                                {random_tensor(dt, c.q, ++seed), random_tensor(dt, c.k, ++seed),
                                 random_tensor(dt, c.v, ++seed), random_tensor(dt, y, ++seed)},
                                c.attrs, attention_grad_ref, c.note);
      // In 16 bits P, dP and dS are each rounded and dS cancels (dP - rowsum): the
      // error grows with the keys summed, beyond one op's default tolerance.
      if (dt == DType::bf16) check.atol = 3e-2, check.rtol = 5e-2;
      if (dt == DType::f16) check.atol = 4e-3, check.rtol = 2e-2;
      t.add(std::move(check));
    }
  // Layout bshd ([b, s, h, d]): dense (the tensor-core path on cuda for 16 bits), and k / v
  // shared by the heads (broadcast: through bhsd copies).
  const std::vector<QkvCase> bshd = {
      {{1, 70, 2, 64}, {1, 70, 2, 64}, {1, 70, 2, 64}, {{"mask", "causal"}}, "bshd, tiles"},
      {{2, 5, 3, 4}, {2, 6, 1, 4}, {2, 6, 1, 4}, {{"mask", "causal"}}, "bshd, shared k v"},
  };
  for (DType dt : kFloats)
    for (QkvCase c : bshd) {
      c.attrs.set("layout", std::string("bshd"));
      Shape y = c.q;
      y.back() = c.v.back();
      OpCheck check = ref_check("attention_grad", dt,
                                {random_tensor(dt, c.q, ++seed), random_tensor(dt, c.k, ++seed),
                                 random_tensor(dt, c.v, ++seed), random_tensor(dt, y, ++seed)},
                                c.attrs, bshd_ref(attention_grad_ref, 4), c.note);
      if (dt == DType::bf16) check.atol = 3e-2, check.rtol = 5e-2;
      if (dt == DType::f16) check.atol = 4e-3, check.rtol = 2e-2;
      t.add(std::move(check));
    }
}

void attention_checks(CheckTable& t) {
  struct Case {
    Shape q, k, v, bias;  // bias empty: none
    Attrs attrs;
    const char* note;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, {}, {}, "Sq != Sk, Dv != D"},
      {{1, 2, 4, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, {}, {{"mask", "causal"}}, "causal"},
      {{2, 3, 4}, {2, 5, 4}, {2, 5, 4}, {}, {{"mask", "causal"}}, "causal, Sq < Sk"},
      {{2, 5, 4}, {2, 3, 4}, {2, 3, 2}, {}, {{"mask", "causal"}}, "causal, masked rows"},
      {{2, 6, 4},
       {2, 6, 4},
       {2, 6, 3},
       {6, 6},
       {{"mask", "sliding_window"}, {"window", 2}},
       "sliding window, bias"},
      {{2, 2, 3, 4}, {2, 1, 5, 4}, {1, 5, 4}, {2, 1, 3, 5}, {}, "broadcast batch and bias"},
      {{3, 4}, {5, 4}, {5, 2}, {5}, {{"scale", 0.3}}, "rank 2, row bias, scale"},
      {{4, 2, 4}, {2, 4}, {2, 4}, {1, 2}, {{"mask", "sliding_window"}, {"window", 1}}, "window 1"},
      {{1, 0, 8}, {1, 3, 8}, {1, 3, 8}, {}, {}, "no queries"},
      {{2, 3, 4}, {2, 0, 4}, {2, 0, 3}, {}, {}, "no keys"},
      {{2, 3, 0}, {2, 4, 0}, {2, 4, 5}, {}, {}, "empty head dim"},
      {{2, 3, 4}, {2, 4, 4}, {2, 4, 0}, {}, {}, "empty value dim"},
  };
  uint64_t seed = 500;
  for (DType dt : kFloats) {
    for (const Case& c : cases) {
      Tensors in{random_tensor(dt, c.q, ++seed), random_tensor(dt, c.k, ++seed),
                 random_tensor(dt, c.v, ++seed)};
      if (!c.bias.empty()) in.push_back(random_tensor(dt, c.bias, ++seed));
      t.add(ref_check("attention", dt, in, c.attrs, attention_ref, c.note));
    }
    // -inf bias: row 0 sees nothing (0), row 1 one key; NaN in q poisons its row only.
    Tensors in{random_tensor(dt, {3, 4}, ++seed), random_tensor(dt, {3, 4}, ++seed),
               random_tensor(dt, {3, 2}, ++seed),
               tensor_of(dt, {3, 3}, {-kInf, -kInf, -kInf, 0.5, -kInf, -kInf, 0, 1, 2})};
    t.add(ref_check("attention", dt, in, {}, attention_ref, "-inf bias rows"));
    Tensor qn = random_tensor(dt, {2, 3, 4}, ++seed);
    qn = tensor_of(dt, {2, 3, 4}, [&] {
      auto v = values(qn);
      v[5] = kNaN;
      return v;
    }());
    t.add(
        ref_check("attention", dt,
                  {qn, random_tensor(dt, {2, 3, 4}, ++seed), random_tensor(dt, {2, 3, 4}, ++seed)},
                  {{"mask", "causal"}}, attention_ref, "nan in q"));
  }
  // Several query tiles with causal key ranges, several threads.
  for (const char* mask : {"causal", "none"}) {
    Shape s{1, 2, 150, 16};
    t.add(ref_check("attention", DType::f32,
                    {random_tensor(DType::f32, s, 590), random_tensor(DType::f32, s, 591),
                     random_tensor(DType::f32, s, 592)},
                    {{"mask", mask}}, attention_ref, "tiles"));
  }
  // Register blocks and their edges in both GEMMs (D and Dv past one block of columns).
  for (DType dt : {DType::f32, DType::f64}) {
    Shape s{2, 70, 40};
    t.add(
        ref_check("attention", dt,
                  {random_tensor(dt, s, 596), random_tensor(dt, s, 597), random_tensor(dt, s, 598)},
                  {{"mask", "causal"}}, attention_ref, "register blocks"));
  }
  // Layout bshd ([..., s, h, d]): with a bias [h, sq, sk], k / v shared by the heads, and
  // the tensor-core path's sizes (its output rows h * d apart).
  for (DType dt : kFloats) {
    const std::vector<Case> bshd = {
        {{2, 5, 3, 4}, {2, 6, 3, 4}, {2, 6, 3, 2}, {3, 5, 6}, {{"mask", "causal"}}, "bshd, bias"},
        {{1, 4, 3, 4}, {1, 4, 1, 4}, {1, 4, 1, 4}, {}, {}, "bshd, shared k v"},
        {{1, 70, 2, 64}, {1, 70, 2, 64}, {1, 70, 2, 64}, {}, {{"mask", "causal"}}, "bshd, tiles"},
    };
    for (Case c : bshd) {
      c.attrs.set("layout", std::string("bshd"));
      Tensors in{random_tensor(dt, c.q, ++seed), random_tensor(dt, c.k, ++seed),
                 random_tensor(dt, c.v, ++seed)};
      if (!c.bias.empty()) in.push_back(random_tensor(dt, c.bias, ++seed));
      t.add(ref_check("attention", dt, in, c.attrs, bshd_ref(attention_ref, 3), c.note));
    }
  }
  Shape s{1, 200, 8};
  t.add(ref_check("attention", DType::f16,
                  {random_tensor(DType::f16, s, 593), random_tensor(DType::f16, s, 594),
                   random_tensor(DType::f16, s, 595)},
                  {{"mask", "sliding_window"}, {"window", 17}}, attention_ref, "tiles"));
}

// ---- embedding ---------------------------------------------------------------------

Tensors embedding_ref(const Tensors& in, const Attrs&) {
  auto table = values(in[0]), idx = values(in[1]);
  int64_t d = in[0].shape()[1];
  Shape os = in[1].shape();
  os.push_back(d);
  std::vector<double> y;
  for (double i : idx)
    for (int64_t j = 0; j < d; ++j) y.push_back(table[size_t(int64_t(i) * d + j)]);
  return one(in[0].dtype(), os, y);
}

void embedding_checks(CheckTable& t) {
  uint64_t seed = 600;
  for (DType dt : kAllDTypes) {
    t.add(ref_check(
        "embedding", dt,
        {random_tensor(dt, {6, 3}, ++seed), tensor_of(DType::i64, {2, 3}, {0, 5, 2, 2, 1, 4})}, {},
        embedding_ref, "table dtype"));
  }
  const DType table = DType::f32;
  for (DType it : {DType::i8, DType::i16, DType::i32, DType::u8})
    t.add(ref_check("embedding", table,
                    {random_tensor(table, {5, 4}, ++seed), tensor_of(it, {4}, {4, 0, 3, 3})}, {},
                    embedding_ref, "index dtype"));
  t.add(ref_check("embedding", table,
                  {random_tensor(table, {5, 4}, ++seed), tensor_of(DType::i32, {}, {2})}, {},
                  embedding_ref, "scalar index"));
  t.add(ref_check("embedding", table,
                  {random_tensor(table, {5, 4}, ++seed), tensor_of(DType::i64, {0}, {})}, {},
                  embedding_ref, "no indices"));
  t.add(ref_check("embedding", table,
                  {random_tensor(table, {5, 0}, ++seed), tensor_of(DType::i64, {2}, {1, 4})}, {},
                  embedding_ref, "empty rows"));
  t.add(ref_check("embedding", table,
                  {random_tensor(table, {1000, 64}, ++seed),
                   random_tensor(DType::i32, {40, 50}, ++seed, 0, 999)},
                  {}, embedding_ref, "wide"));
  OpCheck bad = ref_check("embedding", table,
                          {random_tensor(table, {5, 4}, 9510), tensor_of(DType::i64, {2}, {1, 5})},
                          {}, nullptr, "index out of range");
  bad.error = "expected indices in [0, 5), got 5";
  t.add(std::move(bad));
}

// ---- dropout -----------------------------------------------------------------------

// The identity outside training or at rate 0.
Tensors identity_ref(const Tensors& in, const Attrs&) { return {in[0].clone()}; }

// In training every output is 0 or x / (1 - rate); the dropped fraction lies within 5
// sigma of rate; a second compile and run gives the same mask; another seed another mask.
std::string dropout_verify(const Tensors& in, const Tensors& out, const Attrs& a) {
  if (out.size() != 1 || out[0].type().str() != in[0].type().str())
    return str_cat("expected one output of type ", in[0].type().str());
  double rate = a.get_float("rate");
  auto [rtol, atol] = default_tolerance(in[0].dtype());
  auto x = values(in[0]), y = values(out[0]);
  int64_t dropped = 0, n = int64_t(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double want = x[i] / (1 - rate);
    if (y[i] == 0 && x[i] != 0) {
      ++dropped;
    } else if (std::fabs(y[i] - want) > atol + rtol * std::fabs(want)) {
      return str_cat("expected 0 or x/(1-rate) = ", want, " at ", i, ", got ", y[i]);
    }
  }
  double sigma = std::sqrt(rate * (1 - rate) / double(std::max<int64_t>(n, 1)));
  if (n >= 1000 && std::fabs(double(dropped) / double(n) - rate) > 5 * sigma)
    return str_cat("expected a dropped fraction near ", rate, ", got ",
                   double(dropped) / double(n));
  if (values(run_graph("dropout", in, a, out[0].device())[0]) != y)
    return "expected the same mask from a second run with the same seed";
  if (n >= 64) {
    Attrs other = a;
    other.set("seed", a.get_int("seed") + 1);
    if (values(run_graph("dropout", in, other, out[0].device())[0]) == y)
      return "expected another mask from another seed";
  }
  return "";
}

void dropout_checks(CheckTable& t) {
  uint64_t seed = 700;
  for (DType dt : kFloats) {
    t.add(ref_check("dropout", dt, {random_tensor(dt, {3, 4}, ++seed)}, {}, identity_ref,
                    "inference"));
    t.add(ref_check("dropout", dt, {random_tensor(dt, {3, 4}, ++seed)},
                    {{"rate", 0.0}, {"training", true}}, identity_ref, "rate 0"));
    struct Case {
      Shape shape;
      double rate;
      int64_t seed;
    };
    for (const Case& c :
         {Case{{256, 256}, 0.5, 0}, Case{{256, 257}, 0.1, 42}, Case{{64, 1024}, 0.9, -7},
          Case{{5}, 0.5, 1}, Case{{}, 0.3, 2}, Case{{0, 4}, 0.5, 3}}) {
      OpCheck ck =
          ref_check("dropout", dt, {random_tensor(dt, c.shape, ++seed, 0.5, 2)},
                    {{"rate", c.rate}, {"training", true}, {"seed", c.seed}}, {}, "training");
      ck.verify = dropout_verify;  // the mask is random: properties, not values
      t.add(std::move(ck));
    }
  }
}

// ---- cross_entropy -----------------------------------------------------------------

// Per row: lse - x[y] smoothed toward the mean over classes, or the cross entropy with
// (smoothed) probabilities; ignored rows give 0 and leave the mean's count.
Tensors cross_entropy_ref(const Tensors& in, const Attrs& a) {
  const Shape& s = in[0].shape();
  auto x = values(in[0]), lab = values(in[1]);
  bool probs = is_float(in[1].dtype());
  int64_t classes = s.back(), rows = prod(s, 0, s.size() - 1);
  double eps = a.get_float("label_smoothing");
  int64_t ignore = a.get_int("ignore_index");
  std::vector<double> loss(static_cast<size_t>(rows));
  double total = 0, count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * classes;
    double m = -kInf, sum = 0, mean = 0;
    for (int64_t c = 0; c < classes; ++c) m = std::max(m, row[c]);
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - m), mean += row[c];
    double lse = m + std::log(sum), l = 0;
    mean /= double(classes);
    if (probs) {
      for (int64_t c = 0; c < classes; ++c)
        l -= ((1 - eps) * lab[size_t(r * classes + c)] + eps / double(classes)) * (row[c] - lse);
    } else if (int64_t(lab[size_t(r)]) == ignore) {
      count -= 1;
    } else {
      l = (1 - eps) * (lse - row[int64_t(lab[size_t(r)])]);
      if (eps > 0) l += eps * (lse - mean);
    }
    loss[size_t(r)] = l;
    total += l;
    count += 1;
  }
  const std::string& red = a.get_string("reduction");
  DType out = a.get_bool("f32_loss") && dtype_size(in[0].dtype()) == 2 ? DType::f32 : in[0].dtype();
  if (red == "none") return one(out, Shape(s.begin(), s.end() - 1), loss);
  return one(out, {}, {red == "sum" ? total : total / count});
}

void cross_entropy_checks(CheckTable& t) {
  uint64_t seed = 800;
  for (DType dt : kFloats) {
    auto add = [&](Tensors in, Attrs attrs, const char* note) {
      t.add(
          ref_check("cross_entropy", dt, std::move(in), std::move(attrs), cross_entropy_ref, note));
    };
    auto logits = [&](Shape s) { return random_tensor(dt, std::move(s), ++seed, -4, 4); };
    add({logits({4, 5}), tensor_of(DType::i64, {4}, {1, 0, 4, 2})}, {}, "mean");
    add({logits({4, 5}), tensor_of(DType::i32, {4}, {1, 2, 4, 2})},
        {{"reduction", "none"}, {"ignore_index", 2}}, "none, ignored rows");
    add({logits({4, 5}), tensor_of(DType::i64, {4}, {3, -100, 0, 1})},
        {{"reduction", "sum"}, {"label_smoothing", 0.1}}, "sum, smoothing, default ignore");
    add({logits({4, 5}), tensor_of(DType::i64, {4}, {3, -1, 0, -1})},
        {{"label_smoothing", 0.25}, {"ignore_index", -1}}, "mean over kept rows");
    add({logits({6}), tensor_of(DType::i64, {}, {5})}, {{"reduction", "none"}}, "rank 1");
    add({logits({2, 3, 4}), tensor_of(DType::u8, {2, 3}, {0, 1, 2, 3, 3, 0})}, {}, "rank 3, u8");
    add({logits({0, 5}), tensor_of(DType::i64, {0}, {})}, {}, "no rows: mean is nan");
    add({logits({0, 5}), tensor_of(DType::i64, {0}, {})}, {{"reduction", "sum"}}, "no rows, sum");
    add({logits({2, 3}), tensor_of(DType::i8, {2}, {-100, -100})}, {}, "all ignored: nan");
    add({tensor_of(dt, {2, 3}, {-kInf, 1, 2, 0.5, -kInf, 3}), tensor_of(DType::i64, {2}, {1, 2})},
        {}, "-inf logit");
    // Probabilities: rows of a softmax-like random table.
    Tensor p = random_tensor(dt, {3, 5}, ++seed, 0, 1);
    add({logits({3, 5}), p}, {{"label_smoothing", 0.2}}, "probabilities");
    add({logits({3, 5}), p}, {{"reduction", "none"}}, "probabilities, none");
    // An f32 loss (16-bit logits read as they are; no change for f32 / f64).
    add({logits({4, 5}), tensor_of(DType::i64, {4}, {1, 0, 4, 2})},
        {{"f32_loss", true}, {"label_smoothing", 0.1}}, "f32 loss");
    add({logits({4, 5}), tensor_of(DType::i32, {4}, {1, 2, 4, 2})},
        {{"f32_loss", true}, {"reduction", "none"}}, "f32 loss, none");
  }
  t.add(ref_check("cross_entropy", DType::f32,
                  {random_tensor(DType::f32, {300, 1000}, 890, -6, 6),
                   random_tensor(DType::i64, {300}, 891, 0, 999)},
                  {}, cross_entropy_ref, "wide"));
  OpCheck bad =
      ref_check("cross_entropy", DType::f32,
                {random_tensor(DType::f32, {2, 5}, 9511), tensor_of(DType::i64, {2}, {1, 7})}, {},
                nullptr, "label out of range");
  bad.error = "expected class labels in [0, 5)";
  t.add(std::move(bad));
}

// w[row] * (softmax(x) - (1 - eps) onehot(y) - eps / C), 0 on ignored rows.
Tensors cross_entropy_grad_ref(const Tensors& in, const Attrs& a) {
  const Shape& s = in[0].shape();
  auto x = values(in[0]), lab = values(in[1]);
  Shape rows_shape(s.begin(), s.end() - 1);
  auto w = values(in[2].broadcast_to(rows_shape).contiguous());
  int64_t classes = s.back(), rows = prod(s, 0, s.size() - 1);
  double eps = a.get_float("label_smoothing");
  int64_t ignore = a.get_int("ignore_index");
  std::vector<double> dx(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t y = int64_t(lab[size_t(r)]);
    if (y == ignore) continue;
    const double* row = x.data() + r * classes;
    double m = -kInf, sum = 0;
    for (int64_t c = 0; c < classes; ++c) m = std::max(m, row[c]);
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - m);
    for (int64_t c = 0; c < classes; ++c)
      dx[size_t(r * classes + c)] = w[size_t(r)] * (std::exp(row[c] - m) / sum -
                                                    eps / double(classes) - (c == y ? 1 - eps : 0));
  }
  return one(in[0].dtype(), s, dx);
}

void cross_entropy_grad_checks(CheckTable& t) {
  uint64_t seed = 900;
  for (DType dt : kFloats) {
    auto add = [&](Tensors in, Attrs attrs, const char* note) {
      t.add(ref_check("cross_entropy_grad", dt, std::move(in), std::move(attrs),
                      cross_entropy_grad_ref, note));
    };
    auto logits = [&](Shape s) { return random_tensor(dt, std::move(s), ++seed, -4, 4); };
    add({logits({4, 5}), tensor_of(DType::i64, {4}, {1, 0, 4, 2}), tensor_of(dt, {}, {0.25})}, {},
        "one weight");
    add({logits({4, 5}), tensor_of(DType::i32, {4}, {1, 2, 4, 2}), random_tensor(dt, {4}, ++seed)},
        {{"ignore_index", 2}, {"label_smoothing", 0.1}}, "row weights, ignored rows, smoothing");
    add({logits({2, 3, 4}), tensor_of(DType::u8, {2, 3}, {0, 1, 2, 3, 3, 0}),
         random_tensor(dt, {2, 1}, ++seed)},
        {}, "rank 3, broadcast weights");
    add({logits({0, 5}), tensor_of(DType::i64, {0}, {}), tensor_of(dt, {}, {1})}, {}, "no rows");
    // An f32 loss's cotangent (any float w), one value and per row.
    add({logits({4, 5}), tensor_of(DType::i64, {4}, {1, 0, 4, 2}),
         tensor_of(DType::f32, {}, {0.125})},
        {}, "f32 weight");
    add({logits({3, 6}), tensor_of(DType::i64, {3}, {5, 0, 2}),
         random_tensor(DType::f64, {3}, ++seed)},
        {{"label_smoothing", 0.2}}, "f64 row weights");
  }
  t.add(ref_check("cross_entropy_grad", DType::f32,
                  {random_tensor(DType::f32, {64, 3000}, 990, -6, 6),
                   random_tensor(DType::i64, {64}, 991, 0, 2999), tensor_of(DType::f32, {}, {0.5})},
                  {}, cross_entropy_grad_ref, "wide rows"));
}

}  // namespace

CheckTable checks_nn() {
  CheckTable t;
  softmax_checks(t);
  trailing_norm_checks(t);
  norm_grad_checks(t);
  channel_norm_checks(t);
  attention_checks(t);
  attention_grad_checks(t);
  attention_stats_checks(t);
  embedding_checks(t);
  dropout_checks(t);
  cross_entropy_checks(t);
  cross_entropy_grad_checks(t);
  return t;
}

}  // namespace rlx::test
