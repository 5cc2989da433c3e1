// Consistency checks of the complex family (complex, real, imag, conj), arithmetic on
// complex numbers, and the FFTs against a naive DFT in double precision.
#include <cmath>
#include <complex>
#include <numbers>

#include "op_tables/consistency.h"

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

    // The FFTs: lengths with small and large prime factors, several axes, n, each norm.
    auto ints = [](std::vector<int64_t> v) { return AttrValue(IntList(std::move(v))); };
    struct Case {
      std::vector<int64_t> shape;
      IntList axes, n;
      const char* norm;
      const char* note;
    };
    const Case kCases[] = {
        {{3, 8}, {-1}, {}, "backward", "length 8"},   {{2, 12}, {1}, {}, "ortho", "length 12"},
        {{2, 13}, {-1}, {}, "forward", "prime 13"},   {{5, 6}, {0}, {}, "backward", "axis 0"},
        {{4, 6}, {0, 1}, {}, "backward", "two axes"}, {{2, 7}, {-1}, {10}, "backward", "n pads"},
        {{2, 9}, {-1}, {5}, "ortho", "n crops"},      {{1, 37}, {-1}, {}, "backward", "prime 37"},
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
  return t;
}

}  // namespace rlx::test
