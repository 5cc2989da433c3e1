// Elementwise kernels: unary math, binary arithmetic / logic / comparison, select, clamp
// and cast, all with NumPy broadcasting and strided inputs read in place
// (elementwise_loops.h). The ops themselves are the functors of elementwise_ops.h, where
// their semantics are described.
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/elementwise_loops.h"
#include "backend/cpu/elementwise_ops.h"
#include "backend/cpu/families.h"

namespace rlx::cpu {

namespace {

using namespace ewop;

template <class Op, bool ToBool = false>
void unary_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  Op op = make_op<Op>(ctx.attrs);
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

void cast_kernel(const KernelContext& ctx, std::span<const Tensor> in, std::span<Tensor> out) {
  DType from = in[0].dtype(), to = out[0].dtype();
  if (from == to) {  // a copy that keeps every bit (NaN payloads included)
    visit_bytes(dtype_size(from), [&](auto tag) {
      using T = typename decltype(tag)::type;
      ew::unary_loop<T, T>(in[0], out[0], [](T x) { return x; });
    });
    return;
  }
  const char* where = ctx.op.name.c_str();
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
  const Entry entries[] = {
      {"neg", unary_kernel<Neg>, Neg::set},
      {"abs", unary_kernel<Abs>, Abs::set},
      {"sign", unary_kernel<Sign>, Sign::set},
      {"square", unary_kernel<Square>, Square::set},
      {"relu", unary_kernel<Relu>, Relu::set},
      {"exp", unary_kernel<Exp>, kFloat},
      {"expm1", unary_kernel<Expm1>, kFloat},
      {"log", unary_kernel<Log>, kFloat},
      {"log1p", unary_kernel<Log1p>, kFloat},
      {"sqrt", unary_kernel<Sqrt>, kFloat},
      {"rsqrt", unary_kernel<Rsqrt>, kFloat},
      {"reciprocal", unary_kernel<Reciprocal>, kFloat},
      {"sin", unary_kernel<Sin>, kFloat},
      {"cos", unary_kernel<Cos>, kFloat},
      {"tan", unary_kernel<Tan>, kFloat},
      {"tanh", unary_kernel<Tanh>, kFloat},
      {"sigmoid", unary_kernel<Sigmoid>, kFloat},
      {"erf", unary_kernel<Erf>, kFloat},
      {"floor", unary_kernel<Floor>, kFloat},
      {"ceil", unary_kernel<Ceil>, kFloat},
      {"round", unary_kernel<Round>, kFloat},
      {"softplus", unary_kernel<Softplus>, kFloat},
      {"silu", unary_kernel<Silu>, kFloat},
      {"gelu", gelu_kernel, kFloat},
      {"elu", unary_kernel<Elu>, kFloat},
      {"leaky_relu", unary_kernel<LeakyRelu>, kFloat},
      {"hard_sigmoid", unary_kernel<HardSigmoid>, kFloat},
      {"logical_not", unary_kernel<LogicalNot, true>, kBool},
      {"isnan", unary_kernel<IsNan, true>, kFloat},
      {"isinf", unary_kernel<IsInf, true>, kFloat},

      {"add", binary_kernel<Add>, Add::set},
      {"sub", binary_kernel<Sub>, Sub::set},
      {"mul", binary_kernel<Mul>, Mul::set},
      {"div", binary_kernel<Div>, Div::set},
      {"pow", binary_kernel<Pow>, Pow::set},
      {"max", binary_kernel<Max>, Max::set},
      {"min", binary_kernel<Min>, Min::set},
      {"mod", binary_kernel<Mod>, Mod::set},
      {"fmod", binary_kernel<Fmod>, Fmod::set},
      {"atan2", binary_kernel<Atan2>, Atan2::set},
      {"logical_and", binary_kernel<LogicalAnd, true>, kBool},
      {"logical_or", binary_kernel<LogicalOr, true>, kBool},
      {"logical_xor", binary_kernel<LogicalXor, true>, kBool},
      {"bitwise_and", binary_kernel<BitAnd>, kInt | kBool},
      {"bitwise_or", binary_kernel<BitOr>, kInt | kBool},
      {"bitwise_xor", binary_kernel<BitXor>, kInt | kBool},
      {"eq", binary_kernel<Eq, true>, kAll},
      {"ne", binary_kernel<Ne, true>, kAll},
      {"lt", binary_kernel<Lt, true>, kAll},
      {"le", binary_kernel<Le, true>, kAll},
      {"gt", binary_kernel<Gt, true>, kAll},
      {"ge", binary_kernel<Ge, true>, kAll},

      {"clamp", clamp_kernel, kNumeric},
      {"cast", cast_kernel, kAll},
  };
  // Every loop reads element i of each same-shaped input before it writes output element
  // i (whole blocks are loaded before they are stored), so outputs may take over the
  // storage of such an input.
  KernelFlags flags{.strided_inputs = true, .inplace = true};
  for (const Entry& e : entries) add_kernel(r, e.name, e.fn, dtype_in(e.set), flags);
  add_kernel(r, "select", select_kernel, dtype_in(kAll, 1), flags);
}

}  // namespace rlx::cpu
