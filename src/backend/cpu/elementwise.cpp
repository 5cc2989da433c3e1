// Elementwise kernels: unary math, binary arithmetic / logic / comparison, select, clamp
// and cast, all with NumPy broadcasting and strided inputs read in place
// (elementwise_loops.h). The ops themselves are the functors of elementwise_ops.h, where
// their semantics are described.
#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>

#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_loops.h"
#include "backend/cpu/elementwise_ops.h"
#include "backend/cpu/elementwise_table.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"
#include "rlx/strings.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

namespace {

using namespace ewop;

// The ops whose set has kComplex take c64 / c128 too (visit_complex: std::complex).
template <class Op, class F>
bool complex_path(DType t, const char* where, F&& f) {
  if constexpr ((Op::set & kComplex) != 0)
    if (is_complex(t)) {
      visit_complex(t, where, f);
      return true;
    }
  return false;
}

template <class Op, bool ToBool = false>
void unary_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  Op op = make_op<Op>(ctx.attrs);
  auto run_complex = [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!ToBool) ew::unary_loop<T, std::invoke_result_t<Op, T>>(in[0], out[0], op);
  };
  if (complex_path<Op>(in[0].dtype(), ctx.op.name.c_str(), run_complex)) return;
  visit(in[0].dtype(), Op::set, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = std::conditional_t<ToBool, uint8_t, T>;
    if constexpr (takes<T>(Op::set)) ew::unary_loop<T, U>(in[0], out[0], op);
  });
}

void gelu_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  if (ctx.attrs.get_string("approximate") == "tanh")
    unary_kernel<GeluTanh>(ctx, in, out);
  else
    unary_kernel<GeluErf>(ctx, in, out);
}

template <class Op, bool ToBool = false>
void binary_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  auto run_complex = [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!ToBool) ew::binary_loop<T, T>(in[0], in[1], out[0], Op{});
  };
  if (complex_path<Op>(in[0].dtype(), ctx.op.name.c_str(), run_complex)) return;
  visit(in[0].dtype(), Op::set, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = std::conditional_t<ToBool, uint8_t, T>;
    if constexpr (takes<T>(Op::set)) ew::binary_loop<T, U>(in[0], in[1], out[0], Op{});
  });
}

// --- select, clamp, cast --------------------------------------------------------------

void select_kernel(const KernelContext&, std::span<const Tensor> in, std::span<Tensor> out) {
  visit_bytes(dtype_size(in[1].dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ew::ternary_loop<uint8_t, T, T, T>(in, out[0], [](uint8_t c, T a, T b) { return c ? a : b; });
  });
}

void clamp_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  visit(in[0].dtype(), kNumeric, ctx.op.name.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    ew::ternary_loop<T, T, T, T>(in, out[0],
                                 [](C x, C lo, C hi) { return Min{}(Max{}(x, lo), hi); });
  });
}

// eq / ne of strings compare their handles: interning makes equal strings equal handles.
template <class Op>
void compare_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  if (!is_string(in[0].dtype())) return binary_kernel<Op, true>(ctx, in, out);
  ew::binary_loop<uint64_t, uint8_t>(in[0], in[1], out[0], Op{});
}

// Casts to and from strings, as ONNX defines them: numbers print in their shortest
// round-trip form, plain unless scientific is shorter ("0.1", "123456792", "1e-05"),
// infinities and NaN as "INF", "-INF" and "NaN"; strings parse as numbers (those words in
// any case, a leading '+' and exponents included; "100.5" to an integer gives 100), where a
// string that is no number throws ValueError.
template <class T>
std::string number_text(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v < 0 ? "-INF" : "INF";
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

// F: float for f32 targets (parsed straight to the nearest float, no double rounding).
template <class F>
F text_number(std::string_view s, const char* where) {
  std::string_view t = s;
  if (!t.empty() && t[0] == '+') t.remove_prefix(1);
  F v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || t.empty())
    fail<ValueError>(where, "expected a string that is a number, got \"", s, "\"");
  return v;
}

void cast_strings(const KernelContext& ctx, const Tensor& x, Tensor& y) {
  const char* where = ctx.op.name.c_str();
  Tensor c = x.contiguous();
  const int64_t n = c.numel();
  if (is_string(y.dtype())) {
    auto* dst = y.data_as<StringHandle>();
    if (is_bool(x.dtype())) {
      const auto* b = c.data_as<const uint8_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = intern(b[i] ? "1" : "0");
      return;
    }
    visit(x.dtype(), kNumeric, where, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = c.data_as<const T>();
      for (int64_t i = 0; i < n; ++i) dst[i] = intern(number_text(compute_t<T>(load(src[i]))));
    });
    return;
  }
  const auto* src = c.data_as<const StringHandle>();
  auto* dst = static_cast<uint8_t*>(y.data());
  const size_t es = dtype_size(y.dtype());
  for (int64_t i = 0; i < n; ++i) {
    std::string_view s = string_of(src[i]);
    if (y.dtype() == DType::f32)
      reinterpret_cast<float*>(dst)[i] = text_number<float>(s, where);
    else
      store_double(y.dtype(), dst + size_t(i) * es, text_number<double>(s, where));
  }
}

// Real numbers become re + 0i; c64 <-> c128 converts both parts (inference refuses
// complex -> real: real() and abs() say which real number is meant).
void cast_to_complex(const Tensor& x, Tensor& y, const char* where) {
  visit_complex(y.dtype(), where, [&](auto out_tag) {
    using U = typename decltype(out_tag)::type;
    using R = typename U::value_type;
    if (is_complex(x.dtype())) {
      visit_complex(x.dtype(), where, [&](auto in_tag) {
        using T = typename decltype(in_tag)::type;
        ew::unary_loop<T, U>(x, y, [](T z) { return U(R(z.real()), R(z.imag())); });
      });
      return;
    }
    visit(x.dtype(), kAll, where, [&](auto in_tag) {
      using T = typename decltype(in_tag)::type;
      ew::unary_loop<T, U>(x, y, [](compute_t<T> v) { return U(R(v), R(0)); });
    });
  });
}

void cast_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  DType from = in[0].dtype(), to = out[0].dtype();
  if (from != to && (is_string(from) || is_string(to))) return cast_strings(ctx, in[0], out[0]);
  if (from == to) {  // a copy that keeps every bit (NaN payloads included)
    visit_bytes(dtype_size(from), [&](auto tag) {
      using T = typename decltype(tag)::type;
      ew::unary_loop<T, T>(in[0], out[0], [](T x) { return x; });
    });
    return;
  }
  const char* where = ctx.op.name.c_str();
  if (is_complex(to)) return cast_to_complex(in[0], out[0], where);
  visit(from, kAll, where, [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    visit(to, kAll, where, [&](auto out_tag) {
      using U = typename decltype(out_tag)::type;
      if (is_bool(to))
        ew::unary_loop<T, U>(in[0], out[0], [](compute_t<T> x) { return convert<U, true>(x); });
      else
        ew::unary_loop<T, U>(in[0], out[0], [](compute_t<T> x) { return convert<U, false>(x); });
    });
  });
}

struct Entry {
  const char* name;
  KernelFn fn;
  unsigned set;
};

}  // namespace

void register_elementwise(KernelRegistry& r) {
  // The rows of elementwise_table.h.
#define RLX_UNARY_ROW(op, F) {#op, unary_kernel<F>, F::set},
#define RLX_UNARY_BOOL_ROW(op, F) {#op, unary_kernel<F, true>, F::set},
#define RLX_BINARY_ROW(op, F) {#op, binary_kernel<F>, F::set},
#define RLX_BINARY_BOOL_ROW(op, F) {#op, binary_kernel<F, true>, F::set},
#define RLX_COMPARE_ROW(op, F) {#op, compare_kernel<F>, F::set | kString},
  const Entry entries[] = {
      RLX_CPU_UNARY_OPS(RLX_UNARY_ROW)              //
      RLX_CPU_UNARY_BOOL_OPS(RLX_UNARY_BOOL_ROW)    //
      RLX_CPU_BINARY_OPS(RLX_BINARY_ROW)            //
      RLX_CPU_BINARY_BOOL_OPS(RLX_BINARY_BOOL_ROW)  //
      RLX_CPU_COMPARE_OPS(RLX_COMPARE_ROW)          //
      {"gelu", gelu_kernel, kFloat},
      {"clamp", clamp_kernel, kNumeric},
      {"cast", cast_kernel, kAll | kString | kComplex},
  };
#undef RLX_UNARY_ROW
#undef RLX_UNARY_BOOL_ROW
#undef RLX_BINARY_ROW
#undef RLX_BINARY_BOOL_ROW
#undef RLX_COMPARE_ROW
  // Every loop reads element i of each same-shaped input before it writes output element
  // i (whole blocks are loaded before they are stored), so outputs may take over the
  // storage of such an input.
  KernelFlags flags{.strided_inputs = true, .inplace = true};
  for (const Entry& e : entries) add_kernel(r, e.name, e.fn, dtype_in(e.set), flags);
  add_kernel(r, "select", select_kernel, dtype_in(kAll | kString, 1), flags);
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
