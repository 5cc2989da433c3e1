// conv_fusion: conv -> add of a per-channel bias -> activation.
//
// The add is folded into conv's own bias input when its other operand holds one value per
// output channel ([1, M, 1, ...] or [M, 1, ...], M static); the activation (relu, gelu,
// silu, sigmoid, tanh) makes the conv a fused_conv, which oneDNN runs as a post-op. Each
// intermediate must have no other reader; float dtypes; a fused_conv only where the
// device runs it natively (a conv with the bias folded in needs nothing new).
#include <algorithm>
#include <cstring>

#include "ops/fused.h"
#include "passes/fusion.h"
#include "rlx/axes.h"

namespace rlx::passes {

namespace {

// Whether b broadcasts onto a [N, M, D...] conv output as one value per channel.
bool per_channel(Value b, const Shape& out) {
  const Shape& s = b.shape();
  size_t r = out.size();
  if (r < 3 || !out[1].is_static() || (s.size() != r && s.size() != r - 1)) return false;
  size_t c = s.size() == r ? 1 : 0;  // the channel axis of b
  for (size_t d = 0; d < s.size(); ++d)
    if (!(d == c ? s[d].is(out[1].value()) : s[d].is(1))) return false;
  return true;
}

std::unique_ptr<Graph> conv_fusion(const Graph& g, const PassContext& ctx) {
  if (!has_any_op(g, {"conv"})) return nullptr;
  UseInfo uses(g);
  FusionPlan plan(g);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op_name() != "conv" || plan.taken(int32_t(i)) || !is_float(n.outputs[0].dtype()))
      continue;
    Epilogue e = grow_epilogue(g, uses, plan, int32_t(i), [&](Value other) {
      return per_channel(other, n.outputs[0].shape());
    });
    const std::vector<int32_t>& chain = e.chain;
    const std::string& act = e.activation;
    Value cur = e.out, channel_bias = e.bias;
    if (chain.size() == 1) continue;
    Attrs attrs = n.attrs;
    std::string op = "conv";
    if (act != "none") {
      op = "fused_conv";
      attrs.set("activation", act);
      std::vector<TensorType> types{n.inputs[0].type(), n.inputs[1].type()};
      if (n.inputs.size() > 2 || channel_bias.valid())
        types.push_back({cur.dtype(), {cur.shape()[1]}});
      auto t = native_type(ctx, op, types, attrs);
      if (!t || *t != cur.type()) continue;
    }
    for (size_t k = 0; k + 1 < chain.size(); ++k) plan.claim(chain[k]);
    const Node* conv = &n;
    std::vector<Value> reads = n.inputs;
    if (channel_bias.valid()) reads.push_back(channel_bias);
    plan.root(chain.back(), reads, [conv, channel_bias, attrs, op](Rewriter& rw) {
      std::vector<Value> in = rw(conv->inputs);
      if (channel_bias.valid()) {
        int64_t m = conv->outputs[0].shape()[1].value();
        Value b = rw.dst().apply1("reshape", {rw(channel_bias)}, {{"shape", IntList{m}}});
        if (in.size() > 2) b = rw.dst().apply1("add", {in[2], b});
        if (in.size() > 2)
          in[2] = b;
        else
          in.push_back(b);
      }
      return std::vector<Value>{rw.dst().apply1(op, in, attrs)};
    });
  }
  return plan.apply(g);
}

// conv_taps: a dilated conv whose outer taps never meet the input, whatever the output
// position (DeepLabV3's ASPP: rates 24 and 36 on a 14 x 14 map read only the center of
// their 3 x 3 kernels), becomes the conv of the taps that do, with their weights and the
// padding that keeps every output where it was (9x less work for a 3 x 3 reduced to 1 x 1).
// The weight must be a constant (it is sliced now); explicit padding, static shapes.

// The taps [lo, hi] of one spatial dim that some output position reads inside the input:
// tap t reads o * stride - pad + t * dil for o in [0, out).
std::pair<int64_t, int64_t> live_taps(int64_t in, int64_t out, int64_t k, int64_t stride,
                                      int64_t dil, int64_t pad) {
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  int64_t lo = k, hi = -1;
  for (int64_t t = 0; t < k; ++t) {
    int64_t c = t * dil - pad;  // the index o = 0 reads
    int64_t first = std::max<int64_t>(0, -floor_div(c, stride)),
            last = std::min(out - 1, floor_div(in - 1 - c, stride));
    if (first <= last) lo = std::min(lo, t), hi = t;
  }
  return {lo, hi};
}

// w [M, C / groups, K...] with only the taps [lo[i], lo[i] + size[i]) of each spatial dim.
Literal slice_taps(const Literal& w, const std::vector<int64_t>& lo,
                   const std::vector<int64_t>& size) {
  const std::vector<int64_t>& s = w.shape();
  const size_t es = dtype_size(w.dtype());
  std::vector<int64_t> shape{s[0], s[1]};
  shape.insert(shape.end(), size.begin(), size.end());
  std::vector<uint8_t> out(size_t(dims_product(shape)) * es);
  const uint8_t* src = w.bytes().data();
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t o = 0; o < out.size() / es; ++o) {
    int64_t from = 0;  // row-major offset in w of idx (shifted by lo on the spatial dims)
    for (size_t d = 0; d < s.size(); ++d) from = from * s[d] + idx[d] + (d >= 2 ? lo[d - 2] : 0);
    std::memcpy(out.data() + o * es, src + size_t(from) * es, es);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return Literal(w.dtype(), shape, out);
}

std::unique_ptr<Graph> conv_taps(const Graph& g, const PassContext&) {
  if (!has_any_op(g, {"conv", "fused_conv"})) return nullptr;
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    if ((n.op_name() != "conv" && n.op_name() != "fused_conv") || n.inputs.size() < 2 ||
        n.attrs.get_string("auto_pad") != "explicit")
      return false;
    const Node* wn = producer_is(g, n.inputs[1], "constant");
    Value x = n.inputs[0], y = n.outputs[0];
    if (!wn || !x.type().is_static() || !y.type().is_static() || x.rank() < 3) return false;
    const size_t dims = size_t(x.rank() - 2);
    const Literal& w = wn->attrs.get_tensor("value");
    IntList strides = n.attrs.get_ints("strides"), dils = n.attrs.get_ints("dilations"),
            pads = n.attrs.get_ints("pads");
    if (pads.empty()) pads.assign(2 * dims, 0);
    std::vector<int64_t> lo(dims), size(dims);
    bool smaller = false;
    for (size_t d = 0; d < dims; ++d) {
      int64_t k = w.shape()[d + 2], stride = strides.empty() ? 1 : strides[d],
              dil = dils.empty() ? 1 : dils[d];
      auto [l, h] =
          live_taps(x.shape()[d + 2].value(), y.shape()[d + 2].value(), k, stride, dil, pads[d]);
      if (h < l) return false;  // no tap meets the input: the output is the bias alone
      int64_t begin = pads[d] - l * dil, end = pads[d + dims] - (k - 1 - h) * dil;
      if (begin < 0 || end < 0) return false;
      pads[d] = begin;
      pads[d + dims] = end;
      lo[d] = l;
      size[d] = h - l + 1;
      smaller = smaller || size[d] < k;
    }
    if (!smaller) return false;
    Attrs a = n.attrs;
    a.set("pads", pads);
    std::vector<Value> in = rw(n.inputs);
    in[1] = rw.dst().constant(slice_taps(w, lo, size));
    rw.replace(n, {rw.dst().apply1(n.op_name(), in, a)});
    return true;
  });
}

// A depthwise conv reads each input plane once into its own buffer (on the CPU), so the
// activation of a producing conv is cheaper applied there than as a pass of its own:
//   fused_conv{activation=a}(...) -> depthwise fused_conv  becomes
//   fused_conv{activation=none}(...) -> depthwise fused_conv{input_activation=a}
// where the depthwise conv is the producer's only reader.
bool is_depthwise(const Node& n) {
  if ((n.op_name() != "conv" && n.op_name() != "fused_conv") || n.inputs[0].rank() != 4)
    return false;
  const Shape& x = n.inputs[0].shape();
  return x[1].is_static() && n.attrs.get_int("groups") == x[1].value() &&
         n.outputs[0].shape()[1] == x[1] && n.inputs[0].dtype() == DType::f32;
}

std::unique_ptr<Graph> conv_prologue(const Graph& g, const PassContext& ctx) {
  if (!has_any_op(g, {"fused_conv"}) || !ctx.device.is_cpu()) return nullptr;
  UseInfo uses(g);
  const auto& nodes = g.nodes();
  std::vector<std::string> moved(nodes.size());  // per producer: the activation it hands on
  std::vector<int32_t> into(nodes.size(), -1);   // per depthwise conv: its producer
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (!is_depthwise(n) ||
        (n.op_name() == "fused_conv" && n.attrs.get_string("input_activation") != "none"))
      continue;
    Value x = n.inputs[0];
    const Node* p = producer_is(g, x, "fused_conv");
    if (!p || !uses.single_use(x)) continue;
    int32_t pi = int32_t(p - nodes.data());
    moved[size_t(pi)] = p->attrs.get_string("activation");
    if (moved[size_t(pi)] == "none") continue;
    into[i] = pi;
  }
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    size_t i = size_t(&n - nodes.data());
    bool gives = !moved[i].empty() && moved[i] != "none" &&
                 std::find(into.begin(), into.end(), int32_t(i)) != into.end();
    if (gives) {
      Attrs a = n.attrs;
      a.set("activation", std::string("none"));
      rw.replace(n, {rw.dst().apply1("fused_conv", rw(n.inputs), a)});
      return true;
    }
    if (into[i] < 0) return false;
    Attrs a = n.attrs;
    a.set("input_activation", moved[size_t(into[i])]);
    rw.replace(n, {rw.dst().apply1("fused_conv", rw(n.inputs), a)});
    return true;
  });
}

}  // namespace

void register_conv_fusion(PassRegistry& r) {
  r.add({"conv_taps", conv_taps,
         "a dilated conv's taps that never meet the input dropped (a smaller kernel, the same "
         "outputs)"});
  r.add({"conv_prologue", conv_prologue,
         "a conv's activation moved into the depthwise conv that alone reads it (CPU)"});
  r.add({"conv_fusion", conv_fusion,
         "conv (+ per-channel bias add, into conv's bias) (+ activation) -> fused_conv"});
}

}  // namespace rlx::passes
