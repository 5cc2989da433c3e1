// Consistency checks of the complex family (complex, real, imag, conj, angle), the
// elementwise ops, reductions, products and casts on complex numbers, and the FFTs
// against a naive DFT in double precision.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <tuple>

#include "op_tables/consistency.h"
#include "rlx/axes.h"

namespace rlx::test {

using Cx = std::complex<double>;

Tensor complex_of_pairs(DType dt, std::vector<int64_t> shape, const std::vector<double>& pairs) {
  Tensor t = Tensor::empty(dt, std::move(shape));
  const size_t es = dtype_size(dt);
  for (int64_t i = 0; i < t.numel(); ++i)
    store_complex(dt, static_cast<char*>(t.data()) + size_t(i) * es,
                  {pairs[2 * size_t(i)], pairs[2 * size_t(i) + 1]});
  return t;
}

Tensor random_complex(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo, double hi) {
  const DType r = real_of(dt);
  std::vector<double> re = values(random_tensor(r, shape, seed, lo, hi));
  std::vector<double> im = values(random_tensor(r, shape, seed + 7919, lo, hi));
  std::vector<double> pairs;
  for (size_t i = 0; i < re.size(); ++i) pairs.insert(pairs.end(), {re[i], im[i]});
  return complex_of_pairs(dt, std::move(shape), pairs);
}

namespace {

std::vector<Cx> cvalues(const Tensor& t) {
  std::vector<double> v = values(t);
  std::vector<Cx> out;
  if (is_complex(t.dtype()))
    for (size_t i = 0; i < v.size(); i += 2) out.emplace_back(v[i], v[i + 1]);
  else
    for (double x : v) out.emplace_back(x, 0.0);
  return out;
}

Tensor from_cx(DType dt, std::vector<int64_t> shape, const std::vector<Cx>& v) {
  if (!is_complex(dt)) {
    std::vector<double> re;
    for (const Cx& z : v) re.push_back(z.real());
    return Tensor::from_doubles(dt, std::move(shape), re);
  }
  std::vector<double> pairs;
  for (const Cx& z : v) pairs.insert(pairs.end(), {z.real(), z.imag()});
  return complex_of_pairs(dt, std::move(shape), pairs);
}

// Elementwise reference with broadcasting: f over the inputs' complex values.
template <class F>
RefFn elementwise(DType out, F f) {
  return [out, f](const Tensors& in, const Attrs&) {
    std::vector<int64_t> shape = in[0].shape();
    for (size_t i = 1; i < in.size(); ++i) shape = broadcast_shape(shape, in[i].shape());
    std::vector<std::vector<Cx>> v;
    for (const Tensor& t : in) v.push_back(cvalues(t));
    std::vector<Cx> y(size_t(numel(shape)));
    for (size_t i = 0; i < y.size(); ++i) {
      auto idx = unravel(int64_t(i), shape);
      std::vector<Cx> args;
      for (size_t k = 0; k < in.size(); ++k)
        args.push_back(v[k][size_t(broadcast_index(idx, in[k].shape()))]);
      y[i] = f(args);
    }
    return Tensors{from_cx(out, shape, y)};
  };
}

// x cropped / zero-padded to `lengths` on `axes`.
std::vector<Cx> resize(const std::vector<Cx>& x, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& axes, const std::vector<int64_t>& lengths,
                       std::vector<int64_t>& out_shape) {
  out_shape = shape;
  for (size_t i = 0; i < axes.size(); ++i) out_shape[size_t(axes[i])] = lengths[i];
  std::vector<Cx> y(size_t(numel(out_shape)));
  for (size_t i = 0; i < y.size(); ++i) {
    auto idx = unravel(int64_t(i), out_shape);
    bool inside = true;
    for (size_t d = 0; d < idx.size(); ++d) inside &= idx[d] < shape[d];
    if (inside) y[i] = x[size_t(ravel(idx, shape))];
  }
  return y;
}

// A naive 1-D DFT of x along axis (sign -1 forward, +1 inverse; unscaled).
std::vector<Cx> dft_axis(const std::vector<Cx>& x, const std::vector<int64_t>& shape, int64_t axis,
                         int sign) {
  std::vector<Cx> y(x.size());
  const int64_t n = shape[size_t(axis)];
  for (size_t i = 0; i < y.size(); ++i) {
    auto idx = unravel(int64_t(i), shape);
    const int64_t k = idx[size_t(axis)];
    Cx s = 0;
    for (int64_t j = 0; j < n; ++j) {
      idx[size_t(axis)] = j;
      const double th = sign * 2 * std::numbers::pi * double(j * k % n) / double(n);
      s += x[size_t(ravel(idx, shape))] * Cx(std::cos(th), std::sin(th));
    }
    y[i] = s;
  }
  return y;
}

std::vector<int64_t> axes_of(const Attrs& a, int64_t rank) {
  std::vector<int64_t> axes = a.get_ints("axes");
  for (int64_t& x : axes) x = x < 0 ? x + rank : x;
  return axes;
}

double norm_factor(const std::string& norm, double n, bool inverse) {
  if (norm == "ortho") return 1 / std::sqrt(n);
  return (norm == "forward") != inverse ? 1 / n : 1.0;
}

// fft / ifft / rfft / irfft as numpy.fft's n-dimensional forms define them.
RefFn fft_ref(const std::string& op) {
  return [op](const Tensors& in, const Attrs& a) {
    const int64_t rank = in[0].rank();
    const std::vector<int64_t> axes = axes_of(a, rank);
    std::vector<int64_t> n = a.get_ints("n");
    const bool r2c = op == "rfft", c2r = op == "irfft", inverse = op == "ifft" || c2r;
    if (n.empty())
      for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t len = in[0].shape()[size_t(axes[i])];
        n.push_back(c2r && i + 1 == axes.size() ? 2 * (len - 1) : len);
      }
    std::vector<Cx> x = cvalues(in[0]);
    std::vector<int64_t> shape = in[0].shape(), s2;
    std::vector<int64_t> take = n;
    if (c2r) take.back() = n.back() / 2 + 1;
    x = resize(x, shape, axes, take, s2);
    shape = s2;
    if (c2r) {
      // numpy's irfftn: the inverse DFT over the other axes, then the last axis completed
      // as c2r reads it (X[m - k] = conj X[k]; the imaginary parts of the DC and, for an
      // even m, the Nyquist frequency ignored) and transformed.
      for (size_t i = 0; i + 1 < axes.size(); ++i) x = dft_axis(x, shape, axes[i], 1);
      std::vector<int64_t> full_shape = shape;
      const int64_t last = axes.back(), m = n.back();
      full_shape[size_t(last)] = m;
      std::vector<Cx> full(size_t(numel(full_shape)));
      for (size_t i = 0; i < full.size(); ++i) {
        auto idx = unravel(int64_t(i), full_shape);
        const int64_t k = idx[size_t(last)];
        if (k < take.back()) {
          full[i] = x[size_t(ravel(idx, shape))];
          if (k == 0 || (m % 2 == 0 && k == m / 2)) full[i] = Cx(full[i].real(), 0);
        } else {
          idx[size_t(last)] = m - k;
          full[i] = std::conj(x[size_t(ravel(idx, shape))]);
        }
      }
      x = dft_axis(full, full_shape, last, 1);
      shape = full_shape;
    } else {
      for (int64_t ax : axes) x = dft_axis(x, shape, ax, inverse ? 1 : -1);
    }
    double total = 1;
    for (int64_t v : n) total *= double(v);
    const double f = norm_factor(a.get_string("norm"), total, inverse);
    for (Cx& z : x) z *= f;
    DType out = in[0].dtype();
    if (r2c) {
      out = complex_of(out);
      std::vector<int64_t> s3, lens;
      for (int64_t ax : axes) lens.push_back(shape[size_t(ax)]);
      lens.back() = n.back() / 2 + 1;
      x = resize(x, shape, axes, lens, s3);
      shape = s3;
    }
    if (c2r) out = real_of(out);
    return Tensors{from_cx(out, shape, x)};
  };
}

// sum (mean) over `axes` (keepdims false) of a complex or real input.
RefFn reduce_ref(bool mean, std::vector<int64_t> axes) {
  return [mean, axes](const Tensors& in, const Attrs&) {
    const std::vector<int64_t> shape = in[0].shape();
    std::vector<int64_t> out_shape;
    double count = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end())
        out_shape.push_back(shape[d]);
      else
        count *= double(shape[d]);
    }
    std::vector<Cx> x = cvalues(in[0]), y(size_t(numel(out_shape)));
    for (size_t i = 0; i < x.size(); ++i) {
      std::vector<int64_t> idx = unravel(int64_t(i), shape), kept;
      for (size_t d = 0; d < shape.size(); ++d)
        if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end()) kept.push_back(idx[d]);
      y[size_t(ravel(kept, out_shape))] += x[i];
    }
    if (mean)
      for (Cx& z : y) z /= count;
    return Tensors{from_cx(in[0].dtype(), out_shape, y)};
  };
}

// A [k, m] matrix as [m, k].
Tensor transpose2(const Tensor& t) {
  const int64_t k = t.shape()[0], m = t.shape()[1];
  std::vector<double> v = values(t), out(v.size());
  const size_t w = v.size() / size_t(k * m);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < m; ++j)
      for (size_t c = 0; c < w; ++c) out[size_t(j * k + i) * w + c] = v[size_t(i * m + j) * w + c];
  return tensor_of(t.dtype(), {m, k}, out);
}

// [batch..., m, k] @ [k, n].
Tensors matmul_ref(const Tensors& in, const Attrs&) {
  const std::vector<int64_t>& as = in[0].shape();
  const int64_t k = as.back(), m = as[as.size() - 2], n = in[1].shape()[1];
  const int64_t batch = in[0].numel() / (m * k);
  std::vector<Cx> a = cvalues(in[0]), b = cvalues(in[1]), c(size_t(batch * m * n));
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        Cx s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[size_t((t * m + i) * k + p)] * b[size_t(p * n + j)];
        c[size_t((t * m + i) * n + j)] = s;
      }
  std::vector<int64_t> shape = as;
  shape.back() = n;
  return Tensors{from_cx(in[0].dtype(), shape, c)};
}

// stft / istft as torch defines them, by the definition: frames of the (center-padded)
// signal times the window, each frame's DFT; the inverse overlap-adds each frame's
// inverse DFT times the window and divides by the overlap-added squared window.
struct StftAttrs {
  int64_t n, hop, pad;
  bool onesided, normalized;
  std::string mode;
  std::vector<double> window;  // n values (zero-padded from the input's), ones without one
};

StftAttrs stft_attrs(const Tensors& in, const Attrs& a) {
  StftAttrs s;
  s.n = a.get_int("n_fft");
  s.hop = a.get_int("hop_length") > 0 ? a.get_int("hop_length") : std::max<int64_t>(s.n / 4, 1);
  s.pad = a.get_bool("center") ? s.n / 2 : 0;
  s.onesided = a.get_bool("onesided");
  s.normalized = a.get_bool("normalized");
  s.mode = a.has("pad_mode") ? a.get_string("pad_mode") : "";
  s.window.assign(size_t(s.n), 1.0);
  if (in.size() > 1) {
    std::vector<double> w = values(in[1]);
    const int64_t left = (s.n - int64_t(w.size())) / 2;
    std::fill(s.window.begin(), s.window.end(), 0.0);
    for (size_t j = 0; j < w.size(); ++j) s.window[size_t(left) + j] = w[j];
  }
  return s;
}

Tensors stft_ref(const Tensors& in, const Attrs& a) {
  const StftAttrs s = stft_attrs(in, a);
  const std::vector<int64_t> shape = in[0].shape();
  const int64_t len = shape.back(), rows = dims_product(shape, 0, shape.size() - 1);
  const int64_t frames = 1 + (len + 2 * s.pad - s.n) / s.hop;
  const int64_t freqs = s.onesided ? s.n / 2 + 1 : s.n;
  const std::vector<Cx> x = cvalues(in[0]);
  auto at = [&](int64_t row, int64_t i) -> Cx {  // the padded signal (an empty one: zeros)
    if (i < 0 || i >= len) {
      if (s.mode == "constant" || len == 0) return 0;
      i = s.mode == "reflect" ? (i < 0 ? -i : 2 * (len - 1) - i)
                              : std::clamp<int64_t>(i, 0, len - 1);
    }
    return x[size_t(row * len + i)];
  };
  std::vector<int64_t> out_shape(shape.begin(), shape.end() - 1);
  out_shape.insert(out_shape.end(), {freqs, frames});
  std::vector<Cx> y(size_t(rows * freqs * frames));
  const double scale = s.normalized ? 1 / std::sqrt(double(s.n)) : 1.0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t k = 0; k < freqs; ++k) {
        Cx acc = 0;
        for (int64_t j = 0; j < s.n; ++j) {
          const double th = -2 * std::numbers::pi * double(j * k % s.n) / double(s.n);
          acc +=
              at(r, t * s.hop + j - s.pad) * s.window[size_t(j)] * Cx(std::cos(th), std::sin(th));
        }
        y[size_t((r * freqs + k) * frames + t)] = acc * scale;
      }
  DType dt = is_complex(in[0].dtype()) ? in[0].dtype() : complex_of(in[0].dtype());
  return Tensors{from_cx(dt, out_shape, y)};
}

Tensors istft_ref(const Tensors& in, const Attrs& a) {
  const StftAttrs s = stft_attrs(in, a);
  const std::vector<int64_t> shape = in[0].shape();
  const int64_t freqs = shape[shape.size() - 2], frames = shape.back();
  const int64_t rows = in[0].numel() / (freqs * frames);
  const int64_t covered = (frames - 1) * s.hop + s.n;
  const int64_t length = a.get_int("length") > 0 ? a.get_int("length") : covered - 2 * s.pad;
  const std::vector<Cx> x = cvalues(in[0]);
  const double scale = s.normalized ? std::sqrt(double(s.n)) / double(s.n) : 1 / double(s.n);
  std::vector<double> env(static_cast<size_t>(covered));
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t j = 0; j < s.n; ++j)
      env[size_t(t * s.hop + j)] += s.window[size_t(j)] * s.window[size_t(j)];
  std::vector<int64_t> out_shape(shape.begin(), shape.end() - 2);
  out_shape.push_back(length);
  std::vector<Cx> y(size_t(rows * length));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> sum(static_cast<size_t>(covered));
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t j = 0; j < s.n; ++j) {
        Cx acc = 0;
        for (int64_t k = 0; k < s.n; ++k) {
          Cx c;  // the full spectrum: a one-sided one mirrored (c2r ignores the odd parts)
          if (!s.onesided) {
            c = x[size_t((r * freqs + k) * frames + t)];
          } else if (k < freqs) {
            c = x[size_t((r * freqs + k) * frames + t)];
            if (k == 0 || (s.n % 2 == 0 && k == s.n / 2)) c = Cx(c.real(), 0);
          } else {
            c = std::conj(x[size_t((r * freqs + (s.n - k)) * frames + t)]);
          }
          const double th = 2 * std::numbers::pi * double(j * k % s.n) / double(s.n);
          acc += c * Cx(std::cos(th), std::sin(th));
        }
        sum[size_t(t * s.hop + j)] += acc.real() * scale * s.window[size_t(j)];
      }
    for (int64_t i = 0; i < length; ++i) {
      const int64_t p = i + s.pad;
      if (p >= covered) continue;
      const double e = env[size_t(p)];
      y[size_t(r * length + i)] = sum[size_t(p)] / (std::abs(e) < 1e-11 ? 1.0 : e);
    }
  }
  return Tensors{from_cx(real_of(in[0].dtype()), out_shape, y)};
}

}  // namespace

CheckTable checks_complex() {
  CheckTable t;
  uint64_t seed = 4200;
  for (DType dt : kComplexDTypes) {
    const DType r = real_of(dt);
    t.add(ref_check(
        "complex", r, {random_tensor(r, {2, 3}, seed++), random_tensor(r, {3}, seed++)}, {},
        elementwise(dt, [](const std::vector<Cx>& v) { return Cx(v[0].real(), v[1].real()); }),
        "broadcast"));
    t.add(ref_check("real", dt, {random_complex(dt, {2, 3}, seed++)}, {},
                    elementwise(r, [](const std::vector<Cx>& v) { return Cx(v[0].real(), 0); })));
    t.add(ref_check("imag", dt, {random_complex(dt, {2, 3}, seed++)}, {},
                    elementwise(r, [](const std::vector<Cx>& v) { return Cx(v[0].imag(), 0); })));
    t.add(ref_check("conj", dt, {random_complex(dt, {4}, seed++)}, {},
                    elementwise(dt, [](const std::vector<Cx>& v) { return std::conj(v[0]); })));
    t.add(ref_check("neg", dt, {random_complex(dt, {5}, seed++)}, {},
                    elementwise(dt, [](const std::vector<Cx>& v) { return -v[0]; })));
    using Bin = Cx (*)(Cx, Cx);
    const std::pair<const char*, Bin> kBinary[] = {
        {"add", [](Cx a, Cx b) { return a + b; }},
        {"sub", [](Cx a, Cx b) { return a - b; }},
        {"mul", [](Cx a, Cx b) { return a * b; }},
        {"div", [](Cx a, Cx b) { return a / b; }},
    };
    for (const auto& [name, f] : kBinary) {
      Bin fn = f;
      t.add(ref_check(
          name, dt,
          {random_complex(dt, {3, 4}, seed++, 0.5, 2), random_complex(dt, {4}, seed++, 0.5, 2)}, {},
          elementwise(dt, [fn](const std::vector<Cx>& v) { return fn(v[0], v[1]); }), "broadcast"));
    }

    using Un = Cx (*)(Cx);
    const std::pair<const char*, Un> kUnary[] = {
        {"exp", [](Cx z) { return std::exp(z); }},
        {"log", [](Cx z) { return std::log(z); }},
        {"sqrt", [](Cx z) { return std::sqrt(z); }},
        {"rsqrt", [](Cx z) { return 1.0 / std::sqrt(z); }},
        {"reciprocal", [](Cx z) { return 1.0 / z; }},
        {"sin", [](Cx z) { return std::sin(z); }},
        {"cos", [](Cx z) { return std::cos(z); }},
        {"tan", [](Cx z) { return std::tan(z); }},
        {"tanh", [](Cx z) { return std::tanh(z); }},
        {"square", [](Cx z) { return z * z; }},
    };
    for (const auto& [name, f] : kUnary) {
      Un fn = f;
      t.add(ref_check(name, dt, {random_complex(dt, {3, 5}, seed++)}, {},
                      elementwise(dt, [fn](const std::vector<Cx>& v) { return fn(v[0]); })));
    }
    // |z| and arg z, with the axes and zeros in: (0, 0), (-1, +0), (-1, -0), (0, -2).
    Tensor special = complex_of_pairs(dt, {4}, {0, 0, -1, 0, -1, -0.0, 0, -2});
    for (Tensor z : {random_complex(dt, {2, 5}, seed++), special}) {
      t.add(ref_check("abs", dt, {z}, {},
                      elementwise(r, [](const std::vector<Cx>& v) { return Cx(std::abs(v[0])); })));
      t.add(ref_check("angle", dt, {z}, {},
                      elementwise(r, [](const std::vector<Cx>& v) { return Cx(std::arg(v[0])); })));
    }
    t.add(ref_check("sum", dt, {random_complex(dt, {3, 4}, seed++)},
                    {{"axes", AttrValue(IntList{1})}}, reduce_ref(false, {1})));
    t.add(ref_check("mean", dt, {random_complex(dt, {2, 3, 4}, seed++)},
                    {{"axes", AttrValue(IntList{0, 2})}}, reduce_ref(true, {0, 2})));
    t.add(ref_check("sum", dt, {random_complex(dt, {5}, seed++)}, {}, reduce_ref(false, {0}),
                    "all axes"));
    // Small products run the loops, large ones cgemm / zgemm.
    // A tolerance of the sums' size: |a| |b| k with parts up to 2 (cancellation makes
    // elements far smaller than that).
    const double sum_tol = (dt == DType::c64 ? 3e-7 : 1e-15) * 8.0;
    for (auto [m, k, n] : {std::tuple{3, 4, 2}, std::tuple{40, 33, 30}}) {
      OpCheck mm = ref_check(
          "matmul", dt, {random_complex(dt, {2, m, k}, seed++), random_complex(dt, {k, n}, seed++)},
          {}, matmul_ref, str_cat(m, "x", k, "x", n));
      mm.atol = sum_tol * k;
      t.add(std::move(mm));
      Attrs dg{{"lhs_contracting", AttrValue(IntList{0})},
               {"rhs_contracting", AttrValue(IntList{0})}};
      OpCheck g = ref_check(
          "dot_general", dt,
          {random_complex(dt, {k, m}, seed++), random_complex(dt, {k, n}, seed++)}, dg,
          [](const Tensors& in, const Attrs&) {
            return matmul_ref({transpose2(in[0]), in[1]}, {});
          },
          str_cat("lhs transposed, ", m, "x", k, "x", n));
      g.atol = sum_tol * k;
      t.add(std::move(g));
    }
    // scatter_nd adding complex rows (gather's vjp on a complex signal), an index twice.
    {
      Tensor data = random_complex(dt, {4, 2}, seed++), upd = random_complex(dt, {3, 2}, seed++);
      Tensor idx = Tensor::from_vector(std::vector<int64_t>{2, 0, 2}, {3, 1});
      t.add(ref_check(
          "scatter_nd", dt, {data, idx, upd}, {{"reduction", AttrValue("add")}},
          [](const Tensors& in, const Attrs&) {
            std::vector<Cx> y = cvalues(in[0]), u = cvalues(in[2]);
            const int64_t rows[] = {2, 0, 2};
            for (size_t k = 0; k < 3; ++k)
              for (size_t j = 0; j < 2; ++j) y[size_t(rows[k]) * 2 + j] += u[k * 2 + j];
            return Tensors{from_cx(in[0].dtype(), {4, 2}, y)};
          },
          "add, a repeated index"));
    }
    const DType other = dt == DType::c64 ? DType::c128 : DType::c64;
    t.add(ref_check("cast", dt, {random_complex(dt, {5}, seed++)}, {{"dtype", AttrValue(other)}},
                    elementwise(other, [](const std::vector<Cx>& v) { return v[0]; })));
    t.add(ref_check("cast", r, {random_tensor(r, {5}, seed++)}, {{"dtype", AttrValue(dt)}},
                    elementwise(dt, [](const std::vector<Cx>& v) { return v[0]; }), "to complex"));

    // The FFTs: lengths with small and large prime factors, several axes, n, each norm.
    auto ints = [](std::vector<int64_t> v) { return AttrValue(IntList(std::move(v))); };
    struct Case {
      std::vector<int64_t> shape;
      IntList axes, n;
      const char* norm;
      const char* note;
    };
    const Case kCases[] = {
        {{3, 8}, {-1}, {}, "backward", "length 8"},
        {{2, 12}, {1}, {}, "ortho", "length 12"},
        {{2, 13}, {-1}, {}, "forward", "prime 13"},
        {{5, 6}, {0}, {}, "backward", "axis 0"},
        {{4, 6}, {0, 1}, {}, "backward", "two axes"},
        {{2, 7}, {-1}, {10}, "backward", "n pads"},
        {{2, 9}, {-1}, {5}, "ortho", "n crops"},
        {{1, 37}, {-1}, {}, "backward", "prime 37"},
        {{2, 4, 6}, {1, 2}, {}, "ortho", "two trailing axes, a batch"},
        {{3, 4, 5}, {2, 1}, {}, "backward", "two axes, the last first"},
        {{2, 3, 4, 5}, {1, 2, 3}, {4, 3, 6}, "forward", "three axes, n"},
    };
    for (const Case& c : kCases) {
      Attrs a{{"axes", ints(c.axes)}, {"n", ints(c.n)}, {"norm", AttrValue(std::string(c.norm))}};
      t.add(ref_check("fft", dt, {random_complex(dt, c.shape, seed++)}, a, fft_ref("fft"), c.note));
      t.add(
          ref_check("ifft", dt, {random_complex(dt, c.shape, seed++)}, a, fft_ref("ifft"), c.note));
      t.add(ref_check("rfft", r, {random_tensor(r, c.shape, seed++)}, a, fft_ref("rfft"), c.note));
      // irfft's input: an rfft's worth of frequencies (any values: the odd parts are
      // ignored or mirrored as c2r defines).
      std::vector<int64_t> half = c.shape;
      const int64_t last = c.axes.back() < 0 ? c.axes.back() + int64_t(half.size()) : c.axes.back();
      half[size_t(last)] = half[size_t(last)] / 2 + 1;
      t.add(
          ref_check("irfft", dt, {random_complex(dt, half, seed++)}, a, fft_ref("irfft"), c.note));
    }
  }
  // stft / istft: each real and complex precision, centering and its pad modes, windows
  // shorter than n_fft, hops that do and do not divide it, normalized, both sidednesses.
  auto stft_attrs_of = [](int64_t n, int64_t hop, bool center, const char* mode, bool onesided,
                          bool normalized) {
    return Attrs{{"n_fft", n},       {"hop_length", hop},    {"center", center},
                 {"pad_mode", mode}, {"onesided", onesided}, {"normalized", normalized}};
  };
  for (DType r : {DType::f32, DType::f64}) {
    const DType c = complex_of(r);
    t.add(ref_check(
        "stft", r, {random_tensor(r, {2, 40}, seed++), random_tensor(r, {12}, seed++, 0, 1)},
        stft_attrs_of(16, 5, true, "reflect", true, false), stft_ref, "window, reflect"));
    t.add(ref_check("stft", r, {random_tensor(r, {33}, seed++)},
                    stft_attrs_of(8, 0, false, "reflect", false, true), stft_ref,
                    "no window, no center, two-sided, normalized"));
    t.add(ref_check("stft", r, {random_tensor(r, {3, 20}, seed++)},
                    stft_attrs_of(9, 4, true, "edge", true, false), stft_ref, "edge"));
    t.add(ref_check("stft", r, {random_tensor(r, {37}, seed++), random_tensor(r, {12}, seed++)},
                    stft_attrs_of(12, 5, true, "constant", true, true), stft_ref,
                    "constant, normalized, a full-length window"));
    // Edge padding is the one mode that takes an empty signal: one frame of zeros.
    t.add(ref_check("stft", r, {random_tensor(r, {2, 0}, seed++)},
                    stft_attrs_of(8, 2, true, "edge", true, false), stft_ref, "an empty signal"));
    t.add(ref_check("stft", r, {random_tensor(r, {2, 2, 30}, seed++)},
                    stft_attrs_of(8, 3, true, "replicate", true, false), stft_ref,
                    "replicate, rank 3"));
    // The CPU kernel's tasks take 64 frames of a row: 138 frames, the last task short.
    t.add(ref_check(
        "stft", r, {random_tensor(r, {2, 1100}, seed++), random_tensor(r, {16}, seed++)},
        stft_attrs_of(16, 8, true, "reflect", true, false), stft_ref, "138 frames a row"));
    t.add(ref_check("stft", c,
                    {random_complex(c, {2, 30}, seed++), random_tensor(r, {10}, seed++, 0, 1)},
                    stft_attrs_of(10, 3, true, "constant", false, false), stft_ref, "complex"));
    Attrs ia{{"n_fft", int64_t(16)}, {"hop_length", int64_t(4)}, {"center", true},
             {"onesided", true},     {"normalized", false},      {"length", int64_t(0)}};
    t.add(ref_check("istft", c,
                    {random_complex(c, {2, 9, 7}, seed++), random_tensor(r, {16}, seed++, 0.5, 1)},
                    ia, istft_ref, "window"));
    Attrs ib{{"n_fft", int64_t(8)}, {"hop_length", int64_t(3)}, {"center", false},
             {"onesided", false},   {"normalized", true},       {"length", int64_t(30)}};
    t.add(ref_check("istft", c, {random_complex(c, {8, 6}, seed++)}, ib, istft_ref,
                    "two-sided, normalized, zero-padded to length"));
  }

  // angle of real numbers (NumPy's: 0, or pi below zero and at -0.0).
  for (DType r : {DType::f32, DType::f64, DType::f16, DType::bf16})
    t.add(ref_check(
        "angle", r, {tensor_of(r, {5}, {1.5, -2, 0, -0.0, 3})}, {},
        elementwise(r, [](const std::vector<Cx>& v) { return Cx(std::atan2(0.0, v[0].real())); }),
        "real"));
  return t;
}

}  // namespace rlx::test
