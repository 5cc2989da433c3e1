// fused_matmul and fused_conv on the CPU.
//
// fused_matmul runs the matmul kernel's path once (oneDNN / OpenBLAS GEMM, or the loops
// for small products) on operand views: a transposed operand is a permuted view, which
// the GEMM reads through its transpose flag instead of copying. Bias and activation:
// - where the product runs as oneDNN's matmul primitive (f32, >= 256^3 multiply-adds)
//   they go in as post-ops, applied to each tile while it is in cache: about the GEMM's
//   own time, where a separate pass adds to it (bench/RESULTS.md, "GEMM post-ops").
//   oneDNN's activation math differs from the core ops' by ~1e-6 relative;
// - elsewhere (smaller products, whose output is still in cache, f64, f16, bf16, a bias
//   that is not one value per column) one vectorised pass over the output applies them
//   with the core ops' own math, so fused and unfused results agree to the bit.
//
// fused_conv is the conv kernel with the activation as a oneDNN eltwise post-op where
// oneDNN runs the conv, else applied in place afterwards (conv.cpp).
#include "backend/cpu/fused.h"

#include <array>

#include "backend/cpu/elementwise_loops.h"
#include "backend/cpu/families.h"
#include "backend/cpu/isa.h"

namespace rlx::cpu {
inline namespace RLX_ISA_NS {

Act parse_act(std::string_view name) {
  static constexpr std::pair<std::string_view, Act> kActs[] = {
      {"none", Act::none},       {"relu", Act::relu},           {"relu6", Act::relu6},
      {"gelu", Act::gelu},       {"gelu_tanh", Act::gelu_tanh}, {"silu", Act::silu},
      {"sigmoid", Act::sigmoid}, {"tanh", Act::tanh},           {"hard_swish", Act::hard_swish}};
  for (const auto& [n, a] : kActs)
    if (n == name) return a;
  fail<NotSupported>("fused kernels", "expected a known activation, got '", name, "'");
}

#ifdef RLX_HAVE_DNNL
void append_eltwise(dnnl::post_ops& po, Act act) {
  using A = dnnl::algorithm;
  if (act == Act::relu6) return po.append_eltwise(1.f, A::eltwise_bounded_relu, 6.f, 0.f);
  // x * relu6(x + 3) / 6 (oneDNN 2.x fixes alpha and beta; 3.x reads them).
  if (act == Act::hard_swish) return po.append_eltwise(1.f, A::eltwise_hardswish, 1.f / 6, 0.5f);
  A alg = act == Act::relu        ? A::eltwise_relu
          : act == Act::gelu      ? A::eltwise_gelu_erf
          : act == Act::gelu_tanh ? A::eltwise_gelu_tanh
          : act == Act::silu      ? A::eltwise_swish
          : act == Act::sigmoid   ? A::eltwise_logistic
                                  : A::eltwise_tanh;
  if (act != Act::none) po.append_eltwise(1.f, alg, act == Act::silu ? 1.f : 0.f, 0.f);
}
#endif

namespace {

// y[i] = f(y[i] + b[i * sb]) over n values, in place.
template <class T, class F>
void bias_run(T* y, const T* b, int64_t sb, int64_t n, const F& f) {
  using C = compute_t<T>;
  if constexpr (!is_half_v<T>) {
    if (sb == 1) {
      for (int64_t i = 0; i < n; ++i) y[i] = f(y[i] + b[i]);
    } else if (sb == 0) {
      C bv = b[0];
      for (int64_t i = 0; i < n; ++i) y[i] = f(y[i] + bv);
    } else {
      for (int64_t i = 0; i < n; ++i) y[i] = f(y[i] + b[i * sb]);
    }
  } else {
    C yb[ew::kBlock], bb[ew::kBlock];
    for (int64_t j = 0; j < n; j += ew::kBlock) {
      int64_t m = std::min(ew::kBlock, n - j);
      ew::load_block(y + j, 1, yb, m);
      ew::load_block(b + j * sb, sb, bb, m);
      for (int64_t i = 0; i < m; ++i) yb[i] = f(yb[i] + bb[i]);
      ew::store_block(yb, y + j, m);
    }
  }
}

// y[i] = f(y[i]) over n values, in place.
template <class T, class F>
void act_run(T* y, int64_t n, const F& f) {
  if constexpr (!is_half_v<T>) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(y[i]);
  } else {
    compute_t<T> yb[ew::kBlock];
    for (int64_t j = 0; j < n; j += ew::kBlock) {
      int64_t m = std::min(ew::kBlock, n - j);
      ew::load_block(y + j, 1, yb, m);
      for (int64_t i = 0; i < m; ++i) yb[i] = f(yb[i]);
      ew::store_block(yb, y + j, m);
    }
  }
}

template <class T, class F>
void epilogue_typed(Tensor& y, const Tensor* bias, const F& f) {
  T* yp = y.data_as<T>();
  if (!bias) {
    parallel_for(y.numel(), ew::kGrain, [&](int64_t b, int64_t e) { act_run(yp + b, e - b, f); });
    return;
  }
  const T* bp = bias->data_as<T>();
  ew::Space<1> s = ew::make_space<1>({bias}, y.shape());
  ew::for_each_run(s, [&](int64_t o, const std::array<int64_t, 1>& off, int64_t n) {
    bias_run(yp + o, bp + off[0], s.inner()[0], n, f);
  });
}

void fused_matmul_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                         std::span<Tensor> out) {
  Tensor a = in[0], b = in[1];
  if (ctx.attrs.get_bool("transpose_a")) a = a.swap_last2();
  if (ctx.attrs.get_bool("transpose_b")) b = b.swap_last2();
  Act act = parse_act(ctx.attrs.get_string("activation"));
  const Tensor* bias = in.size() > 2 ? &in[2] : nullptr;
  if (!bias && act == Act::none) {
    matmul_into(a, b, out[0]);
    return;
  }
  // oneDNN's post-ops take an f32 bias of one value per column.
  MatmulEpilogue post{nullptr, act};
  bool per_column = !bias || (bias->dtype() == DType::f32 && bias->is_contiguous() &&
                              out[0].rank() > 0 && bias->numel() == out[0].shape().back());
  if (bias && per_column) post.bias = bias->data_as<float>();
  if (!matmul_into(a, b, out[0], per_column ? &post : nullptr)) epilogue(out[0], bias, act);
}

void fused_conv_kernel(const KernelContext& ctx, std::span<const Tensor> in,
                       std::span<Tensor> out) {
  conv_forward(ctx, in, out, false, parse_act(ctx.attrs.get_string("activation")),
               parse_act(ctx.attrs.get_string("input_activation")));
}

}  // namespace

void epilogue(Tensor& y, const Tensor* bias, Act a) {
  if (y.numel() == 0) return;
  visit_float(y.dtype(), "epilogue", [&](auto tag) {
    using T = typename decltype(tag)::type;
    act::visit(a, [&](auto f) { epilogue_typed<T>(y, bias, f); });
  });
}

void register_fused(KernelRegistry& r) {
  // The product's dtype is the operands' (out_dtype "same", or f32 operands).
  SupportsFn same = [float_in = dtype_in(kFloat)](const KernelQuery& q) {
    return float_in(q) && q.outputs[0].dtype == q.inputs[0].dtype;
  };
  add_kernel(r, "fused_matmul", fused_matmul_kernel, same, {.strided_inputs = true});
  add_kernel(r, "fused_conv", fused_conv_kernel, dtype_in(kFloat));
}

}  // namespace RLX_ISA_NS
}  // namespace rlx::cpu
