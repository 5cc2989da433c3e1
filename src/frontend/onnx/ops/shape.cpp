// onnx.* ops of the shape family, whose output sizes depend on input values (so their
// kernels make their outputs):
//   onnx.unique  the distinct slices of x along an axis (ONNX Unique; the converter
//                flattens x when the node has no axis);
//   onnx.range   start, start + delta, … up to limit (ONNX Range).
#include "frontend/onnx/ops/shape.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "rlx/kernel.h"
#include "rlx/op.h"
#include "rlx/tensor.h"

namespace rlx::onnx_import {

namespace {

std::vector<TensorType> infer_unique(const InferContext& ctx) {
  int64_t r = ctx.rank(0), axis = ctx.attrs().get_int("axis");
  if (r < 1) ctx.fail("expected an input of rank >= 1, got ", ctx.input(0).str());
  if (axis < 0 || axis >= r) ctx.fail("expected axis in [0, ", r, "), got ", axis);
  Shape y = ctx.shape(0);
  y[size_t(axis)] = Dim::unknown();
  Shape count{Dim::unknown()};
  return {{ctx.dtype(0), y},
          {DType::i64, count},
          {DType::i64, {ctx.shape(0)[size_t(axis)]}},
          {DType::i64, count}};
}

// Element e of slice j (x viewed as [outer, n, inner]) as a comparable value.
template <class T>
struct Slices {
  const T* p;
  int64_t n, inner, len;  // len = outer * inner elements per slice
  T at(int64_t j, int64_t e) const { return p[((e / inner) * n + j) * inner + e % inner]; }
  // NaN after every number and equal to NaN, -0 equal to +0 (a strict weak order).
  static bool less(T u, T v) { return v != v ? u == u : u < v; }
  // Lexicographic order of slices a and b (< 0, 0, > 0).
  int compare(int64_t a, int64_t b) const {
    for (int64_t e = 0; e < len; ++e) {
      T u = at(a, e), v = at(b, e);
      if (less(u, v)) return -1;
      if (less(v, u)) return 1;
    }
    return 0;
  }
};

float widen(uint16_t h, DType dt) { return dt == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h); }

// Runs f with a typed pointer to x's elements (16-bit floats widened to f32 first).
template <class F>
void with_values(const Tensor& x, F&& f) {
  switch (x.dtype()) {
    case DType::f32:
      return f(x.data_as<const float>());
    case DType::f64:
      return f(x.data_as<const double>());
    case DType::i8:
      return f(x.data_as<const int8_t>());
    case DType::i16:
      return f(x.data_as<const int16_t>());
    case DType::i32:
      return f(x.data_as<const int32_t>());
    case DType::i64:
      return f(x.data_as<const int64_t>());
    case DType::u8:
    case DType::boolean:
      return f(x.data_as<const uint8_t>());
    case DType::f16:
    case DType::bf16: {
      std::vector<float> w(size_t(x.numel()));
      const auto* h = x.data_as<const uint16_t>();
      for (size_t i = 0; i < w.size(); ++i) w[i] = widen(h[i], x.dtype());
      return f(static_cast<const float*>(w.data()));
    }
    default:
      break;
  }
  fail<NotSupported>("onnx.unique", "expected a numeric or bool tensor, got ",
                     dtype_name(x.dtype()));
}

void unique_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  Tensor x = in[0].contiguous();
  const auto& shape = x.shape();
  size_t axis = size_t(ctx.attrs.get_int("axis"));
  bool sorted = ctx.attrs.get_bool("sorted");
  int64_t n = shape[axis], inner = 1, outer = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  // Slices in sorted order, ties by position: each group's first member is its first
  // occurrence.
  std::vector<int64_t> order(static_cast<size_t>(n)), group_of(static_cast<size_t>(n));
  std::vector<int64_t> firsts, counts;
  std::iota(order.begin(), order.end(), 0);
  with_values(x, [&](auto* p) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(p)>>;
    Slices<T> s{p, n, inner, outer * inner};
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return s.compare(a, b) < 0; });
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || s.compare(order[i - 1], order[i]) != 0) {
        firsts.push_back(order[i]);
        counts.push_back(0);
      }
      group_of[size_t(order[i])] = int64_t(firsts.size()) - 1;
      ++counts.back();
    }
  });
  // Unsorted: groups in order of first occurrence.
  size_t u = firsts.size();
  std::vector<int64_t> rank(u);
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(u);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return firsts[size_t(a)] < firsts[size_t(b)]; });
    for (size_t i = 0; i < u; ++i) rank[size_t(by_first[i])] = int64_t(i);
  }
  std::vector<int64_t> first_out(u), count_out(u), inverse(static_cast<size_t>(n));
  for (size_t g = 0; g < u; ++g) {
    first_out[size_t(rank[g])] = firsts[g];
    count_out[size_t(rank[g])] = counts[g];
  }
  for (size_t j = 0; j < size_t(n); ++j) inverse[j] = rank[size_t(group_of[j])];

  std::vector<int64_t> yshape = shape;
  yshape[axis] = int64_t(u);
  Tensor y = Tensor::empty(x.dtype(), yshape);
  size_t es = dtype_size(x.dtype()), row = size_t(inner) * es;
  const auto* src = static_cast<const uint8_t*>(x.data());
  auto* dst = static_cast<uint8_t*>(y.data());
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < u; ++i)
      if (row)
        std::memcpy(dst + (size_t(o) * u + i) * row, src + size_t(o * n + first_out[i]) * row, row);
  out[0] = y;
  out[1] = Tensor::from_vector(first_out, {int64_t(u)});
  out[2] = Tensor::from_vector(inverse, {n});
  out[3] = Tensor::from_vector(count_out, {int64_t(u)});
}

// ---------------------------------------------------------------------------------------
// onnx.range

std::vector<TensorType> infer_range(const InferContext& ctx) {
  DType dt = ctx.dtype(0);
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.dtype(i) != dt)
      ctx.fail_type("expected start, limit and delta of one dtype, got ", ctx.input(0).str(), ", ",
                    ctx.input(1).str(), " and ", ctx.input(2).str());
    if (auto n = ctx.input(i).numel(); ctx.rank(i) > 1 || (n && *n != 1))
      ctx.fail("expected scalar start, limit and delta, got ", ctx.input(i).str());
  }
  if (dt != DType::f32 && dt != DType::f64 && dt != DType::i16 && dt != DType::i32 &&
      dt != DType::i64)
    ctx.fail_type("expected f32, f64, i16, i32 or i64 inputs, got ", dt);
  return {{dt, {Dim::unknown()}}};
}

// ceil((limit - start) / delta) elements, at least 0; element i is start + i * delta
// computed in T (as ONNX's reference loop does).
template <class T>
Tensor range_of(T start, T limit, T delta) {
  int64_t n;
  if constexpr (std::is_floating_point_v<T>) {
    double s = start, l = limit, d = delta;
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      fail<ValueError>("onnx.range",
                       "expected finite start and limit and a finite nonzero delta, got ", s, ", ",
                       l, ", ", d);
    n = int64_t(std::max(std::ceil((l - s) / d), 0.0));
  } else {
    if (delta == 0) fail<ValueError>("onnx.range", "expected a nonzero delta, got 0");
    int64_t num = int64_t(limit) - int64_t(start), d = int64_t(delta);
    n = std::max<int64_t>(num / d + (num % d != 0 && (num < 0) == (d < 0) ? 1 : 0), 0);
  }
  Tensor y = Tensor::empty(dtype_of<T>(), {n});
  T* p = y.data_as<T>();
  for (int64_t i = 0; i < n; ++i) p[i] = T(start + T(i) * delta);
  return y;
}

template <class T>
Tensor range_from(std::span<const Tensor> in) {
  return range_of(*in[0].data_as<const T>(), *in[1].data_as<const T>(), *in[2].data_as<const T>());
}

void range_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  switch (in[0].dtype()) {
    case DType::f32:
      out[0] = range_from<float>(in);
      break;
    case DType::f64:
      out[0] = range_from<double>(in);
      break;
    case DType::i16:
      out[0] = range_from<int16_t>(in);
      break;
    case DType::i32:
      out[0] = range_from<int32_t>(in);
      break;
    default:
      out[0] = range_from<int64_t>(in);
      break;
  }
}

}  // namespace

void register_shape_onnx_ops() {
  if (OpRegistry::global().contains("onnx.unique")) return;
  OpDef d;
  d.name = "onnx.unique";
  d.traits = Trait::shape_op | Trait::nondifferentiable;
  d.arity(1).attr("axis", AttrKind::Int, int64_t{0}).attr("sorted", AttrKind::Bool, true);
  d.infer = infer_unique;
  d.doc =
      "The distinct slices of x along axis (sorted, or in order of first occurrence), the "
      "index of each one's first occurrence, each slice's position among them, and their "
      "counts (ONNX Unique).";
  OpRegistry::global().add(std::move(d));
  KernelRegistry::global().add("onnx.unique", DeviceKind::cpu, unique_kernel, {},
                               {.makes_outputs = true});

  OpDef r;
  r.name = "onnx.range";
  r.traits = Trait::nondifferentiable;
  r.arity(3);
  r.infer = infer_range;
  r.doc = "start, start + delta, … while short of limit (ONNX Range); scalar inputs of one dtype.";
  OpRegistry::global().add(std::move(r));
  KernelRegistry::global().add("onnx.range", DeviceKind::cpu, range_kernel, {},
                               {.makes_outputs = true});
}

}  // namespace rlx::onnx_import
