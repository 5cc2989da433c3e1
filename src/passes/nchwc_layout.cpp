// nchwc_layout (CPU, f32): keeps chains of 2-D convs, and the adds / relus between them,
// in the channel-blocked layout [N, ceil(C/L), H, W, L] (oneDNN's nChw16c, or nChw8c where
// the CPU lacks AVX-512) instead of converting NCHW <-> blocked inside every conv:
//   conv / fused_conv(x, w, [b])  ->  conv_blocked(xb, w, [b]) {activation}
//   add / mul(a, b), relu(a), …    ->  the same op on the blocked tensors; an operand of one
//                                      value per channel ([N, C, 1, 1]: squeeze-excitation's
//                                      scale) is blocked as [N, Cb, 1, 1, L] and broadcasts
//   global_avg_pool(a)             ->  mean over the blocked tensor's H and W
//   concat(a, b, …) {axis=1}        ->  concat along the blocks, where every input's channels
//                                      fill whole blocks
//   max_pool(a)                    ->  max_pool_blocked(a)
// The lanes past C start as zeros and stay finite: the unary ops taken are finite wherever
// their input is (Trait::finite; hard_sigmoid(0) = 0.5: hard-swish is x * hard_sigmoid(x)),
// and every reader ignores them (from_blocked drops them, oneDNN's blocked weights are zero
// for them).
// xb is the plain x for a dense conv of at most 4 channels (oneDNN reads it as nchw: a
// first conv's image), else the producer's blocked value inside a chain, else to_blocked(x)
// made once per value. A conv is taken only where oneDNN has a direct kernel for it (not
// its reference one, 100x slower). A value of the chain that anything else reads (a pool,
// a reshape, a graph output, a plain x) gets one from_blocked. Only chains (connected groups of
// these nodes) with at least two convs are taken: a lone conv gains nothing over conv's own path.
//
// conv_blocked's CPU kernel caches its weights reordered, keyed by their address; that is
// sound only for immutable weights, so a conv is taken only where its weight is made by a
// `constant` node (asserted again where the node is built).
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "passes/fusion.h"

namespace rlx::passes {

namespace {

bool static_f32(Value v, int64_t rank) {
  if (v.dtype() != DType::f32 || v.rank() != rank) return false;
  for (const Dim& d : v.shape())
    if (!d.is_static()) return false;
  return true;
}

bool is_conv(const Node& n) { return n.op_name() == "conv" || n.op_name() == "fused_conv"; }

Attrs blocked_attrs(const Node& n) {
  Attrs a;
  for (const auto& [k, v] : n.attrs)
    if (k != "input_activation") a.set(k, v);
  if (!a.has("activation")) a.set("activation", std::string("none"));
  a.set("lanes", nchwc_lanes());
  return a;
}

TensorType blocked_type(const TensorType& t) {
  const Shape& s = t.shape;
  const int64_t lanes = nchwc_lanes();
  return {t.dtype, {s[0], Dim((s[1].value() + lanes - 1) / lanes), s[2], s[3], Dim(lanes)}};
}

// A dense conv of at most 4 input channels reads x plain (oneDNN reads it as nchw; a
// first conv's image), every other one blocked.
bool reads_plain(const Node& conv) {
  return conv.attrs.get_int("groups") == 1 && conv.inputs[0].shape()[1].value() <= 4;
}

// A conv conv_blocked can take: 2-D, f32, static shapes, constant weights, groups 1,
// depthwise or of whole channel blocks, no input activation, run natively.
bool takes_conv(const Graph& g, const Node& n, const PassContext& ctx) {
  if (!is_conv(n) || n.inputs.size() < 2 || !static_f32(n.inputs[0], 4) ||
      !static_f32(n.inputs[1], 4) || !static_f32(n.outputs[0], 4))
    return false;
  if (n.inputs.size() > 2 && n.inputs[2].dtype() != DType::f32) return false;
  if (!producer_is(g, n.inputs[1], "constant")) return false;
  if (n.op_name() == "fused_conv" && n.attrs.get_string("input_activation") != "none") return false;
  int64_t groups = n.attrs.get_int("groups"), c = n.inputs[0].shape()[1].value();
  int64_t m = n.outputs[0].shape()[1].value();
  // Groups of whole channel blocks (RegNet's 8-channel groups on 8 lanes) stay blocked too.
  const int64_t lanes = nchwc_lanes();
  const bool block_groups = groups > 1 && (c / groups) % lanes == 0 && (m / groups) % lanes == 0;
  if (groups != 1 && !(groups == c && m == c) && !block_groups) return false;
  // oneDNN must have a direct kernel for the x the conv will read (reads_plain).
  std::vector<TensorType> types;
  for (Value v : n.inputs) types.push_back(v.type());
  if (!reads_plain(n)) types[0] = blocked_type(types[0]);
  auto t = native_type(ctx, "conv_blocked", types, blocked_attrs(n));
  return t && *t == blocked_type(n.outputs[0].type());
}

// An operand of one value per channel of a [N, C, H, W] output: [N, C, 1, 1].
bool per_channel(Value v, Value out) {
  if (!static_f32(v, 4) || v.shape() == out.shape()) return false;
  const Shape &s = v.shape(), &o = out.shape();
  return s[0] == o[0] && s[1] == o[1] && s[2].is(1) && s[3].is(1);
}

// Unary elementwise ops finite wherever their input is (Trait::finite: so on the zero lanes
// too), and global_avg_pool; add or mul of two [N, C, H, W] operands, or of one and a
// per-channel operand.
bool takes_elementwise(const Node& n) {
  if (n.outputs.size() != 1 || !static_f32(n.outputs[0], 4)) return false;
  const std::string& op = n.op_name();
  const bool unary = n.op->has(Trait::elementwise) && n.op->has(Trait::finite);
  if (unary || op == "global_avg_pool") return n.inputs.size() == 1 && static_f32(n.inputs[0], 4);
  if ((op != "add" && op != "mul") || n.inputs.size() != 2) return false;
  Value out = n.outputs[0];
  int full = 0;
  for (Value v : n.inputs) {
    if (v.type() == out.type())
      ++full;
    else if (!per_channel(v, out))
      return false;
  }
  return full >= 1;
}

// concat along the channels of [N, C, H, W] inputs whose channels fill whole blocks: the
// blocked tensors concatenate along their block axis, with no lanes of zeros in between
// (SqueezeNet's fire modules, DenseNet's dense blocks).
bool takes_concat(const Node& n) {
  if (n.op_name() != "concat" || n.outputs.size() != 1 || !static_f32(n.outputs[0], 4))
    return false;
  int64_t axis = n.attrs.get_int("axis");
  if (axis != 1 && axis != -3) return false;
  for (Value v : n.inputs)
    if (!static_f32(v, 4) || v.shape()[1].value() % nchwc_lanes() != 0) return false;
  return true;
}

// A 2-D max_pool: max_pool_blocked pools the blocked tensor (the zero lanes stay zeros).
bool takes_max_pool(const Node& n) {
  return n.op_name() == "max_pool" && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         static_f32(n.inputs[0], 4) && static_f32(n.outputs[0], 4);
}

struct Sets {  // union-find over node indices
  std::vector<int32_t> up;
  explicit Sets(size_t n) : up(n) { std::iota(up.begin(), up.end(), 0); }
  int32_t find(int32_t i) { return up[size_t(i)] == i ? i : up[size_t(i)] = find(up[size_t(i)]); }
  void join(int32_t a, int32_t b) { up[size_t(find(a))] = find(b); }
};

std::unique_ptr<Graph> nchwc_layout(const Graph& g, const PassContext& ctx) {
  if (!ctx.device.is_cpu() || ctx.opt_level < 2 || ctx.precision != Precision::f32 ||
      !has_any_op(g, {"conv", "fused_conv"}))
    return nullptr;
  const auto& nodes = g.nodes();
  const size_t count = nodes.size();
  std::unordered_map<int32_t, int32_t> made_by;  // value id -> producing node
  for (size_t i = 0; i < count; ++i)
    for (Value v : nodes[i].outputs) made_by[v.id] = int32_t(i);
  auto producer = [&](Value v) {
    auto it = made_by.find(v.id);
    return it == made_by.end() ? -1 : it->second;
  };
  // The chain inputs of a node: conv's x, the [N, C, H, W] inputs of an elementwise op (a
  // per-channel operand is blocked where it is read, whoever made it).
  auto chain_inputs = [&](const Node& n) {
    if (is_conv(n)) return std::vector<Value>{n.inputs[0]};
    std::vector<Value> in;
    for (Value v : n.inputs)
      if (!per_channel(v, n.outputs[0])) in.push_back(v);
    return in;
  };

  std::vector<uint8_t> cand(count), in(count);
  for (size_t i = 0; i < count; ++i)
    cand[i] = takes_conv(g, nodes[i], ctx) || takes_elementwise(nodes[i]) ||
              takes_concat(nodes[i]) || takes_max_pool(nodes[i]);
  Sets sets(count);
  for (size_t i = 0; i < count; ++i) {
    if (!cand[i]) continue;
    for (Value v : chain_inputs(nodes[i]))
      if (int32_t p = producer(v); p >= 0 && cand[size_t(p)]) sets.join(int32_t(i), p);
  }
  std::vector<int> convs(count);
  for (size_t i = 0; i < count; ++i)
    if (cand[i] && is_conv(nodes[i])) ++convs[size_t(sets.find(int32_t(i)))];
  // In topological order: an elementwise op only where all its inputs are blocked.
  for (size_t i = 0; i < count; ++i) {
    if (!cand[i] || convs[size_t(sets.find(int32_t(i)))] < 2) continue;
    bool ok = true;
    if (!is_conv(nodes[i]))
      for (Value v : chain_inputs(nodes[i])) {
        int32_t p = producer(v);
        ok = ok && p >= 0 && in[size_t(p)];
      }
    in[i] = ok;
  }
  if (std::find(in.begin(), in.end(), 1) == in.end()) return nullptr;

  // Which blocked values something outside the chain reads.
  UseInfo uses(g);
  std::vector<uint8_t> plain_read(g.num_values());
  for (size_t i = 0; i < count; ++i) {
    if (!in[i]) continue;
    Value v = nodes[i].outputs[0];
    bool outside = uses.is_output[size_t(v.id)];
    for (int32_t u : uses.users[size_t(v.id)]) {
      const Node& r = nodes[size_t(u)];
      if (!in[size_t(u)]) {
        outside = true;
        continue;
      }
      if (is_conv(r)) {  // read as the weight or the bias of a chain conv, or as a plain x
        for (size_t k = 1; k < r.inputs.size(); ++k) outside = outside || r.inputs[k] == v;
        outside = outside || (reads_plain(r) && r.inputs[0] == v);
      }
    }
    plain_read[size_t(v.id)] = outside;
  }

  std::unordered_map<int32_t, Value> blocked;  // source value id -> its blocked value in dst
  return rewrite_nodes(g, [&](const Node& n, Rewriter& rw) {
    size_t i = size_t(&n - nodes.data());
    if (!in[i]) return false;
    Graph& dst = rw.dst();
    auto blocked_of = [&](Value v) {
      if (auto it = blocked.find(v.id); it != blocked.end()) return it->second;
      Value b = dst.apply1("to_blocked", {rw(v)}, {{"lanes", nchwc_lanes()}});
      blocked.emplace(v.id, b);
      return b;
    };
    Value out;
    if (is_conv(n)) {
      if (!producer_is(g, n.inputs[1], "constant"))
        throw std::logic_error("nchwc_layout: conv_blocked needs a constant weight");
      std::vector<Value> args = rw(n.inputs);
      if (!reads_plain(n)) args[0] = blocked_of(n.inputs[0]);
      out = dst.apply1("conv_blocked", args, blocked_attrs(n));
    } else {
      std::vector<Value> args;
      for (Value v : n.inputs) args.push_back(blocked_of(v));
      if (n.op_name() == "global_avg_pool")  // the lanes past C average to 0
        out = dst.apply1("mean", args, {{"axes", IntList{2, 3}}, {"keepdims", true}});
      else if (n.op_name() == "concat")  // along the blocks
        out = dst.apply1("concat", args, {{"axis", int64_t(1)}});
      else if (n.op_name() == "max_pool") {
        Attrs pool = n.attrs;
        pool.set("lanes", nchwc_lanes());
        out = dst.apply1("max_pool_blocked", args, pool);
      } else
        out = dst.apply1(n.op_name(), args, n.attrs);
    }
    Value v = n.outputs[0];
    blocked.emplace(v.id, out);
    if (plain_read[size_t(v.id)])
      rw.replace(v, dst.apply1("from_blocked", {out}, {{"channels", v.shape()[1].value()}}));
    else
      rw.replace(v, out);  // read only through `blocked`
    return true;
  });
}

}  // namespace

// The lanes of oneDNN's direct f32 conv kernels on this CPU: 16 with AVX-512, else 8
// (AVX2). A 16-lane layout on an AVX2 CPU falls to oneDNN's reference kernels, two orders
// of magnitude slower (bench/RESULTS.md, "Blocked convs").
int64_t nchwc_lanes() {
  static const int64_t lanes = __builtin_cpu_supports("avx512f") ? 16 : 8;
  return lanes;
}

void register_nchwc_layout(PassRegistry& r) {
  r.add({"nchwc_layout", nchwc_layout,
         "chains of 2-D convs (and the adds, muls, relus, channel concats, max pools and global "
         "pools "
         "between them) kept in "
         "oneDNN's channel-blocked "
         "layout, nChw16c or nChw8c as the CPU's vectors (CPU, f32)"});
}

}  // namespace rlx::passes
