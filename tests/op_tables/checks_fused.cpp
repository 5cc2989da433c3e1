// fused_matmul and fused_conv against references. fused_matmul: naive loops in long
// double over the operands as the transpose flags read them (batch dims broadcast), the
// bias added by broadcasting, then the activation in double. fused_conv: the conv op
// (itself checked against nested loops in checks_conv.cpp), then the activation in
// double. Sizes reach the loops, the GEMM libraries and oneDNN's matmul primitive.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "op_tables/consistency.h"

namespace rlx::test {

namespace {

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

double activate(const std::string& a, double x) {
  if (a == "relu") return x < 0 ? 0 : x;
  if (a == "relu6") return x < 0 ? 0 : x > 6 ? 6 : x;
  if (a == "gelu") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  if (a == "gelu_tanh")
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  if (a == "silu") return x / (1 + std::exp(-x));
  if (a == "sigmoid") return 1 / (1 + std::exp(-x));
  if (a == "tanh") return std::tanh(x);
  if (a == "hard_swish") return x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
  return x;
}

// An operand's values as a row-major matrix batch, its last two dims swapped if `t`.
Tensor as_read(const Tensor& x, bool t) {
  if (!t) return x;
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  return x.permute(perm);
}

Tensors fused_matmul_ref(const Tensors& in, const Attrs& attrs) {
  Tensor a = as_read(in[0], attrs.get_bool("transpose_a"));
  Tensor b = as_read(in[1], attrs.get_bool("transpose_b"));
  auto as = a.shape(), bs = b.shape();
  bool av = as.size() == 1, bv = bs.size() == 1;
  if (av) as.insert(as.begin(), 1);
  if (bv) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  auto batch = broadcast_shape(ab, bb);
  auto full = joined(batch, {m, n});
  std::vector<int64_t> shape = batch;
  if (!av) shape.push_back(m);
  if (!bv) shape.push_back(n);
  auto x = values(a), y = values(b);
  std::vector<double> bias = in.size() > 2 ? values(in[2]) : std::vector<double>();
  const std::string& act = attrs.get_string("activation");
  std::vector<double> out;
  for (int64_t f = 0; f < numel(full); ++f) {
    auto idx = unravel(f, full);
    std::vector<int64_t> bi(idx.begin(), idx.end() - 2);
    int64_t i = idx[idx.size() - 2], j = idx.back();
    int64_t abase = broadcast_index(bi, ab) * m * k, bbase = broadcast_index(bi, bb) * k * n;
    long double s = 0;
    for (int64_t p = 0; p < k; ++p)
      s += (long double)x[size_t(abase + i * k + p)] * y[size_t(bbase + p * n + j)];
    double v = double(s);
    if (in.size() > 2)
      v += bias[size_t(broadcast_index(unravel(int64_t(out.size()), shape), in[2].shape()))];
    out.push_back(activate(act, v));
  }
  return {tensor_of(a.dtype(), shape, out)};
}

Tensors fused_conv_ref(const Tensors& in, const Attrs& attrs) {
  Attrs conv;
  for (const auto& [key, v] : attrs)
    if (key != "activation" && key != "input_activation") conv.set(key, v);
  Tensors args = in;
  if (attrs.has("input_activation")) {
    std::vector<double> x = values(in[0]);
    for (double& e : x) e = activate(attrs.get_string("input_activation"), e);
    args[0] = tensor_of(in[0].dtype(), in[0].shape(), x);
  }
  Tensor y = run_graph("conv", args, conv, Device::cpu())[0];
  std::vector<double> v = values(y);
  for (double& e : v) e = activate(attrs.get_string("activation"), e);
  return {tensor_of(y.dtype(), y.shape(), v)};
}

// The channel-blocked layout [N, ceil(C/L), H, W, L], lanes past C zero.
Tensor block_ref(const Tensor& x, int64_t l = 16) {
  auto s = x.shape();
  int64_t n = s[0], c = s[1], hw = s[2] * s[3], cb = (c + l - 1) / l;
  std::vector<double> v = values(x), out(size_t(n * cb * hw * l), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        out[size_t(((i * cb + ch / l) * hw + p) * l + ch % l)] = v[size_t((i * c + ch) * hw + p)];
  return tensor_of(x.dtype(), {n, cb, s[2], s[3], l}, out);
}

Tensor unblock_ref(const Tensor& x, int64_t c) {
  auto s = x.shape();
  int64_t n = s[0], cb = s[1], hw = s[2] * s[3], l = s[4];
  std::vector<double> v = values(x), out(size_t(n * c * hw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        out[size_t((i * c + ch) * hw + p)] = v[size_t(((i * cb + ch / l) * hw + p) * l + ch % l)];
  return tensor_of(x.dtype(), {n, c, s[2], s[3]}, out);
}

Tensors conv_blocked_ref(const Tensors& in, const Attrs& attrs) {
  Tensors args = in;
  if (in[0].rank() == 5) args[0] = unblock_ref(in[0], in[1].shape()[1] * attrs.get_int("groups"));
  Attrs conv;
  for (const auto& [k, v] : attrs)
    if (k != "lanes") conv.set(k, v);
  return {block_ref(fused_conv_ref(args, conv)[0], attrs.get_int("lanes"))};
}

// A check of fused_matmul; f32 tolerances grow with the contraction length (as matmul's).
OpCheck mm(Tensors in, Attrs attrs, std::string note) {
  DType dt = in[0].dtype();
  if (!attrs.has("activation")) attrs.set("activation", "none");
  for (const char* f : {"transpose_a", "transpose_b"})
    if (!attrs.has(f)) attrs.set(f, false);
  int64_t k = in[0].rank() == 1 || !attrs.get_bool("transpose_a")
                  ? in[0].shape().back()
                  : in[0].shape()[size_t(in[0].rank() - 2)];
  OpCheck c = ref_check("fused_matmul", dt, std::move(in), std::move(attrs), fused_matmul_ref,
                        std::move(note));
  if (dt == DType::f32) {
    c.rtol = 1e-5;
    c.atol = 1e-6 + double(k) * 4 * 0x1p-23;
  }
  return c;
}

// fused_layer_norm: the sum rounded to the inputs' dtype (as the add stores it), then
// layer_norm's reference, stored as out_dtype.
Tensors fused_norm_ref(const Tensors& in, const Attrs& a) {
  const bool res = a.get_bool("residual");
  Tensors args(in.begin() + (res ? 1 : 0), in.end());
  if (res) {
    std::vector<double> x = values(in[0]), r = values(in[1]);
    for (size_t i = 0; i < x.size(); ++i) x[i] += r[i];
    args[0] = tensor_of(in[0].dtype(), in[0].shape(), x);
  }
  Tensor y = trailing_norm_ref(false)(args, a)[0];
  const std::string& od = a.get_string("out_dtype");
  if (od != "same") y = tensor_of(*dtype_from_name(od), y.shape(), values(y));
  if (res) return {y, args[0]};
  return {y};
}

}  // namespace

CheckTable checks_fused() {
  CheckTable t;
  uint64_t seed = 4200;
  auto r = [&](DType dt, std::vector<int64_t> shape) { return random_tensor(dt, shape, ++seed); };
  using A = Attrs;
  for (DType dt : kFloats) {
    t.add(mm({r(dt, {3, 5}), r(dt, {5, 4}), r(dt, {4})}, A{{"activation", "relu"}}, "bias, relu"));
    t.add(mm({r(dt, {5, 3}), r(dt, {5, 4})}, A{{"transpose_a", true}, {"activation", "gelu"}},
             "transpose_a, gelu"));
    t.add(mm({r(dt, {2, 3, 5}), r(dt, {4, 5}), r(dt, {3, 1})},
             A{{"transpose_b", true}, {"activation", "gelu_tanh"}},
             "batched, transpose_b, column bias, gelu_tanh"));
    t.add(mm({r(dt, {2, 1, 3, 6}), r(dt, {4, 6, 5}), r(dt, {4, 1, 5})},
             A{{"activation", "sigmoid"}}, "broadcast batch and bias, sigmoid"));
    t.add(mm({r(dt, {6}), r(dt, {6, 5}), r(dt, {5})}, A{{"activation", "tanh"}}, "1-D lhs, tanh"));
    t.add(mm({r(dt, {4, 7}), r(dt, {7, 3}), r(dt, {3})}, A{{"activation", "relu6"}}, "relu6"));
    t.add(mm({r(dt, {3, 9}), r(dt, {9, 4}), r(dt, {4})}, A{{"activation", "hard_swish"}},
             "hard_swish"));
    t.add(mm({r(dt, {3, 0}), r(dt, {0, 4}), r(dt, {4})}, A{{"activation", "silu"}},
             "empty contraction: the bias alone"));
    // Sizes that reach the GEMM libraries.
    t.add(mm({r(dt, {96, 64}), r(dt, {40, 96}), r(dt, {40})},
             A{{"transpose_a", true}, {"transpose_b", true}, {"activation", "silu"}},
             "library, both transposed"));
    t.add(mm({r(dt, {3, 70, 80}), r(dt, {80, 90}), r(dt, {90})}, A{{"activation", "gelu"}},
             "library, folded batch"));
    t.add(mm({r(dt, {2, 40, 50}), r(dt, {2, 60, 50})}, A{{"transpose_b", true}},
             "library, batched transpose_b, no epilogue"));
  }
  // Products of at least 256^3 take oneDNN's matmul primitive for f32.
  t.add(mm({r(DType::f32, {256, 260}), r(DType::f32, {272, 260}), r(DType::f32, {272})},
           A{{"transpose_b", true}, {"activation", "gelu"}},
           "matmul primitive, transpose_b, post-ops"));
  t.add(mm({r(DType::f32, {2, 256, 260}), r(DType::f32, {260, 272}), r(DType::f32, {256, 1})},
           A{{"activation", "tanh"}}, "matmul primitive, a row bias: no post-ops"));
  t.add(mm({r(DType::f32, {260, 256}), r(DType::f32, {260, 272})},
           A{{"transpose_a", true}, {"activation", "silu"}},
           "matmul primitive, transpose_a, activation post-op only"));
  t.add(
      mm({tensor_of(DType::f32, {2, 2}, {NAN, 1, 1, 1}),
          tensor_of(DType::f32, {2, 2}, {1, 2, 3, 4}), tensor_of(DType::f32, {2}, {-INFINITY, 0})},
         A{{"activation", "relu"}}, "NaN and -inf pass through"));

  // fused_layer_norm: with and without a residual, stored as itself or in 16 bits, rows
  // the CUDA kernel keeps in registers and one it does not (the decomposition).
  for (DType dt : kFloats) {
    using Dims = std::vector<int64_t>;
    auto ln = [&](Dims shape, int64_t axis, bool res, int params, std::string od,
                  std::string note) {
      Dims tail(shape.begin() + int64_t(axis < 0 ? axis + int64_t(shape.size()) : axis),
                shape.end());
      Tensors in{r(dt, shape)};
      if (res) in.push_back(r(dt, shape));
      for (int p = 0; p < params; ++p) in.push_back(r(dt, tail));
      OpCheck c =
          ref_check("fused_layer_norm", dt, std::move(in),
                    A{{"axis", axis}, {"epsilon", 1e-5}, {"residual", res}, {"out_dtype", od}},
                    fused_norm_ref, std::move(note));
      if (od == "bf16" || od == "f16") c.rtol = c.atol = 1e-2;
      t.add(std::move(c));
    };
    ln({4, 6}, -1, true, 2, "same", "residual, scale, bias");
    ln({2, 3, 5}, 1, false, 1, "same", "two axes, scale, no residual");
    ln({3, 40}, -1, true, 0, "same", "residual, no params");
    ln({0, 8}, -1, true, 2, "same", "no rows");
    if (dt == DType::f32) {
      ln({5, 768}, -1, true, 2, "bf16", "a GPT-2 row, stored as bf16");
      ln({3, 33}, -1, false, 2, "f16", "stored as f16");
      ln({2, 1100}, -1, true, 2, "same", "rows past the kernel's registers");
    }
  }

  // fused_cast: every float pair, tensors of many sizes (the CUDA kernel's blocks span
  // several), and more tensors than one launch takes.
  for (DType from : kFloats)
    for (DType to : kFloats) {
      if (from == to) continue;
      Tensors in{r(from, {3, 5}), r(from, {0}), r(from, {9000}), r(from, {}), r(from, {2, 70})};
      t.add(ref_check(
          "fused_cast", from, std::move(in), A{{"dtype", to}},
          [](const Tensors& in, const Attrs& a) {
            Tensors out;
            for (const Tensor& x : in)
              out.push_back(tensor_of(a.get_dtype("dtype"), x.shape(), values(x)));
            return out;
          },
          std::string("to ") + std::string(dtype_name(to))));
    }
  {
    Tensors many;
    for (int i = 0; i < 130; ++i) many.push_back(r(DType::f32, {i % 7 + 1, 3}));
    t.add(ref_check(
        "fused_cast", DType::f32, std::move(many), A{{"dtype", DType::bf16}},
        [](const Tensors& in, const Attrs&) {
          Tensors out;
          for (const Tensor& x : in) out.push_back(tensor_of(DType::bf16, x.shape(), values(x)));
          return out;
        },
        "130 tensors: two launches"));
  }

  // fused_conv: conv's paths (oneDNN with a post-op for f32 / bf16, widened f16, the
  // im2col / direct loops for f64) with each activation.
  const char* acts[] = {"relu",    "gelu", "gelu_tanh", "silu",
                        "sigmoid", "tanh", "relu6",     "hard_swish"};
  size_t a = 0;
  for (DType dt : kFloats) {
    auto conv = [&](Tensors in, Attrs attrs, std::string note) {
      attrs.set("activation", acts[a++ % std::size(acts)]);
      OpCheck c = ref_check("fused_conv", dt, std::move(in), std::move(attrs), fused_conv_ref,
                            std::move(note));
      if (dt == DType::f32) c.atol = 1e-5;  // oneDNN's post-op math, not the core ops'
      t.add(std::move(c));
    };
    conv({r(dt, {2, 3, 6, 6}), r(dt, {4, 3, 3, 3}), r(dt, {4})}, A{{"pads", IntList{1, 1, 1, 1}}},
         "2-D, bias, pads");
    conv({r(dt, {1, 4, 9}), r(dt, {6, 2, 3})}, A{{"groups", 2}, {"strides", IntList{2}}},
         "1-D, groups, strides");
    conv({r(dt, {1, 3, 8, 8}), r(dt, {3, 1, 3, 3}), r(dt, {3})},
         A{{"groups", 3}, {"auto_pad", "same_upper"}}, "depthwise, same_upper");
    conv({r(dt, {1, 2, 4, 4, 4}), r(dt, {2, 2, 2, 2, 2})}, A{}, "3-D");
    // An input activation (conv_prologue): the depthwise kernels' wide rows (stride 1 and
    // the split stride-2 rows) and narrow channel-last blocks, and a dense conv.
    auto pre = [&](Tensors in, Attrs attrs, std::string note) {
      OpCheck c = ref_check("fused_conv", dt, std::move(in), std::move(attrs), fused_conv_ref,
                            std::move(note));
      if (dt == DType::f32) c.atol = 1e-5;
      t.add(std::move(c));
    };
    for (int64_t stride : {1, 2})
      pre({r(dt, {1, 5, 60, 61}), r(dt, {5, 1, 3, 3}), r(dt, {5})},
          A{{"groups", 5},
            {"pads", IntList{1, 1, 1, 1}},
            {"strides", IntList{stride, stride}},
            {"activation", "relu6"},
            {"input_activation", "relu6"}},
          "depthwise, wide rows, input relu6");
    pre({r(dt, {2, 40, 7, 9}), r(dt, {40, 1, 3, 3})},
        A{{"groups", 40},
          {"pads", IntList{1, 1, 1, 1}},
          {"strides", IntList{2, 2}},
          {"input_activation", "sigmoid"}},
        "depthwise, channel-last blocks, input sigmoid (padding stays zero)");
    pre({r(dt, {1, 3, 6, 6}), r(dt, {4, 3, 3, 3})},
        A{{"pads", IntList{1, 1, 1, 1}}, {"input_activation", "relu6"}}, "dense, input relu6");
  }
  // The blocked layout (nchwc_layout's ops), f32, in 16 lanes (AVX-512's nChw16c) and 8
  // (AVX2's nChw8c): channel counts with and without padded lanes; conv_blocked on plain
  // and blocked inputs, dense and depthwise, with activations and bias (oneDNN's direct
  // kernels, the weights reordered once and cached).
  for (DType f : kFloats)
    for (int64_t l : {int64_t(16), int64_t(8)}) {
      std::string in_lanes = " (" + std::to_string(l) + " lanes)";
      auto block = [l](const Tensors& in, const Attrs&) { return Tensors{block_ref(in[0], l)}; };
      t.add(ref_check("to_blocked", f, {r(f, {2, 20, 5, 3})}, A{{"lanes", l}}, block,
                      "20 channels: padded lanes" + in_lanes));
      t.add(ref_check("to_blocked", f, {r(f, {1, 32, 4, 4})}, A{{"lanes", l}}, block,
                      "whole blocks" + in_lanes));
      for (int64_t c : {int64_t(3), int64_t(32)})
        t.add(ref_check(
            "from_blocked", f, {r(f, {2, (c + l - 1) / l, 3, 5, l})}, A{{"channels", c}},
            [](const Tensors& in, const Attrs& a) {
              return Tensors{unblock_ref(in[0], a.get_int("channels"))};
            },
            "channels " + std::to_string(c) + in_lanes));
      auto cb = [&](Tensors in, Attrs attrs, std::string note) {
        if (!attrs.has("activation")) attrs.set("activation", "none");
        attrs.set("lanes", l);
        OpCheck c = ref_check("conv_blocked", f, std::move(in), std::move(attrs), conv_blocked_ref,
                              note + in_lanes);
        if (f == DType::f32) c.atol = 1e-5;  // oneDNN's summation order and post-op math
        t.add(std::move(c));
      };
      auto blk = [&](std::vector<int64_t> shape) { return block_ref(r(f, shape), l); };
      cb({r(f, {1, 3, 9, 9}), r(f, {20, 3, 3, 3}), r(f, {20})},
         A{{"pads", IntList{1, 1, 1, 1}}, {"strides", IntList{2, 2}}, {"activation", "relu6"}},
         "plain 3-channel input, 20 outputs (padded lanes), stride 2");
      cb({blk({2, 20, 6, 6}), r(f, {36, 20, 1, 1}), r(f, {36})}, A{{"activation", "sigmoid"}},
         "1x1, blocked input with padded lanes, sigmoid (lanes past 36 stay zero)");
      cb({blk({1, 32, 7, 7}), r(f, {32, 1, 3, 3}), r(f, {32})},
         A{{"groups", 32}, {"pads", IntList{1, 1, 1, 1}}, {"activation", "relu"}}, "depthwise 3x3");
      cb({blk({1, 16, 8, 8}), r(f, {16, 16, 3, 3})},
         A{{"dilations", IntList{2, 2}}, {"auto_pad", "same_upper"}},
         "dilated, same_upper, no bias");
      cb({blk({1, 32, 7, 7}), r(f, {32, 16, 3, 3}), r(f, {32})},
         A{{"groups", 2}, {"pads", IntList{1, 1, 1, 1}}, {"activation", "relu"}},
         "groups of 16 channels (whole blocks)");
      // max_pool_blocked: max_pool of the logical tensor, blocked again (zero lanes included).
      auto mp = [&](std::vector<int64_t> shape, Attrs attrs, std::string note) {
        attrs.set("lanes", l);
        t.add(ref_check(
            "max_pool_blocked", f, {blk(shape)}, std::move(attrs),
            [](const Tensors& in, const Attrs& a) {
              const Tensor& x = in[0];
              const int64_t lanes = a.get_int("lanes");
              Attrs pool;
              for (const auto& [k, v] : a)
                if (k != "lanes") pool.set(k, v);
              Tensor y = ref_max_pool({unblock_ref(x, x.shape()[1] * lanes)}, pool)[0];
              return Tensors{block_ref(y, lanes)};
            },
            note + in_lanes));
      };
      mp({1, 20, 9, 9}, A{{"kernel_shape", IntList{3, 3}}, {"strides", IntList{2, 2}}},
         "3x3/2, padded lanes");
      mp({2, 16, 7, 6},
         A{{"kernel_shape", IntList{3, 3}},
           {"strides", IntList{2, 2}},
           {"pads", IntList{1, 0, 1, 1}},
           {"ceil_mode", true}},
         "asymmetric pads, ceil mode");
      mp({1, 8, 7, 7}, A{{"kernel_shape", IntList{2, 2}}, {"dilations", IntList{2, 2}}}, "dilated");
      mp({1, 16, 5, 6}, A{{"kernel_shape", IntList{3, 2}}, {"auto_pad", "same_upper"}},
         "same_upper");
    }
  return t;
}

}  // namespace rlx::test
