// mixed_precision: runs float ops in a 16-bit type (PassContext::precision), each as its
// OpDef::amp says (the op's own policy: a downstream package declares its ops' roles).
//
//   auto_bf16 / auto_f16  the compute-bound ops (matmul, conv, attention, their fused forms)
//                         run in 16 bits; the ops that need range or accuracy (reductions,
//                         softmax, norms, exp / log, losses) stay f32; every other op follows
//                         its inputs: 16 bits when its float inputs already are (constants
//                         adapt), f32 when any is f32 (the widest wins, as in PyTorch's
//                         autocast, so a bias or a residual add stays f32). A loss whose
//                         kernels compute in f32 anyway (cross_entropy) reads 16-bit
//                         logits as they are and still returns an f32 loss.
//   bf16 / f16            every f32 op runs in 16 bits except the keep-f32 ones.
//
// Args and outputs keep their declared dtypes: casts sit at the boundaries. Each value has
// up to two forms, its declared one and a 16-bit one, each made at most once (a cast shared
// by all users, or a constant converted in place), so the pass emits no duplicate or
// cancelling casts: cast(cast(x: bf16 -> f32) -> bf16) is x, and a 16-bit result feeding a
// 16-bit op is used directly. f64, integer and bool values, nodes with subgraphs, random
// and side-effect ops are left as they are. The CPU kernels accumulate 16-bit inputs in
// f32 (matmul, conv, attention) or f64 (reductions).
#include <optional>
#include <set>
#include <unordered_map>

#include "passes/families.h"
#include "passes/rewrite.h"
#include "rlx/kernel.h"

namespace rlx::passes {

namespace {

DType half_of(Precision p) {
  return p == Precision::f16 || p == Precision::auto_f16 ? DType::f16 : DType::bf16;
}

// Constants up to this many elements are converted when the pass needs them in 16 bits;
// larger ones get a cast like any other value (and their f32 bytes are not doubled here).
constexpr int64_t kFoldConstantMax = int64_t(1) << 20;

class MixedPrecision {
 public:
  MixedPrecision(const Graph& src, const PassContext& ctx)
      : src_(src),
        ctx_(ctx),
        kernels_(ctx.kernels ? *ctx.kernels : KernelRegistry::global()),
        half_(half_of(ctx.precision)),
        auto_(ctx.precision == Precision::auto_bf16 || ctx.precision == Precision::auto_f16),
        rw_(src),
        low_(src.num_values()),
        native_(src.num_values(), 0) {}

  std::unique_ptr<Graph> run() {
    for (const Node& n : src_.nodes()) {
      if (n.op_name() == "constant" && is_f32(n.outputs[0]))
        continue;  // emitted by full() or low() when first needed, in the form needed
      if (n.op_name() == "cast")
        cast_node(n);
      else if (!(eligible(n) && emit_low(n)))
        keep(n);
    }
    for (const Output& o : src_.outputs()) full(o.value);  // outputs keep their dtypes
    if (!changed_) return nullptr;
    return rw_.finish();
  }

 private:
  static bool is_f32(Value v) { return v.dtype() == DType::f32; }
  size_t id(Value v) const { return size_t(v.id); }

  // v in its declared dtype. Only f32 values made in 16 bits, and f32 constants, lack it.
  Value full(Value v) {
    Value f = rw_(v);
    if (f.valid()) return f;
    if (!low_[id(v)].valid()) return rw_.copy(*src_.producer(v))[0];  // a constant
    f = rw_.dst().apply1("cast", {low_[id(v)]}, {{"dtype", v.dtype()}});
    rw_.replace(v, f);
    return f;
  }

  // v (an f32 value) in the 16-bit type, made once and shared by every 16-bit user.
  Value low(Value v) {
    Value& l = low_[id(v)];
    if (l.valid()) return l;
    const Literal* lit = constant_of(src_, v);
    if (lit && lit->numel() <= kFoldConstantMax) {
      l = rw_.dst().constant(Literal::from_doubles(half_, lit->shape(), lit->to_doubles()));
      changed_ = true;
    } else {
      l = rw_.dst().apply1("cast", {full(v)}, {{"dtype", half_}});
    }
    return l;
  }

  // Nodes the pass may move to 16 bits: plain ops whose float inputs and outputs are all
  // f32, with at least one f32 input.
  static bool eligible(const Node& n) {
    const OpDef& op = *n.op;
    if (!n.subgraphs.empty() || op.has(Trait::control) || op.has(Trait::side_effect) ||
        op.has(Trait::random))
      return false;
    bool any = false;
    for (Value v : n.inputs) {
      if (!is_float(v.dtype())) continue;
      if (!is_f32(v)) return false;
      any = true;
    }
    for (Value v : n.outputs)
      if (is_float(v.dtype()) && !is_f32(v)) return false;
    return any;
  }

  // Emits n with its f32 inputs in 16 bits when the policy asks for it and the op's
  // inference and the device's kernels take them; false (nothing emitted) otherwise.
  //
  // Follow ops (auto_*) go to 16 bits when some float input was computed in 16 bits and
  // every other one was too or is a constant: an f32 input (an arg, an f32 result) keeps
  // the op in f32. An input whose dtype the op ignores (the shape donor of reshape_like or
  // broadcast_like) neither blocks the op nor gets a cast of its own.
  bool emit_low(const Node& n) {
    const AmpRole role = n.op->amp;  // the op's own policy (OpDef::amp)
    if (role == AmpRole::wide) return emit_wide(n, n.op->amp_attr);
    if (role == AmpRole::keep_f32) return false;
    const bool follow = auto_ && role == AmpRole::follow;
    if (follow && !may_follow(n)) return false;

    std::vector<TensorType> in;
    for (Value v : n.inputs) {
      in.push_back(v.type());
      if (is_f32(v)) in.back().dtype = half_;
    }
    std::optional<std::vector<TensorType>> out = infer(n, in);
    if (!out) return false;
    for (size_t i = 0; i < out->size(); ++i) {
      DType was = n.outputs[i].dtype(), now = (*out)[i].dtype;
      if (!(was == now && was != DType::f32) && !(was == DType::f32 && now == half_)) return false;
    }

    std::vector<uint8_t> stay(n.inputs.size(), 0);  // f32 inputs left in f32
    bool any_native = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value v = n.inputs[i];
      if (!is_f32(v)) continue;
      bool native = native_[id(v)], constant = constant_of(src_, v) != nullptr;
      bool blocks = follow && !native && !constant;
      if (blocks || !(native || constant || low_[id(v)].valid())) {
        // It would block the op or need a new cast: does the op care about its dtype? (Slots
        // that did are remembered: a failed inference costs an exception.)
        std::pair<const OpDef*, size_t> slot{n.op, i};
        if (!typed_slots_.count(slot)) {
          in[i].dtype = DType::f32;
          std::optional<std::vector<TensorType>> again = infer(n, in);
          in[i].dtype = half_;
          if (again && same_dtypes(*again, *out)) {
            in[i].dtype = DType::f32;
            stay[i] = 1;
            continue;
          }
          typed_slots_.insert(slot);
        }
        if (blocks) return false;
      }
      any_native |= native;
    }
    if (follow && !any_native) return false;
    // An op the device has kernels for must have one for these dtypes; an op it has none
    // for is decomposed or staged by the runtime, whatever the dtype.
    DeviceKind dev = ctx_.device.kind;
    if (kernels_.has(n.op->name, dev) && !kernels_.find({*n.op, n.attrs, in, *out}, dev))
      return false;

    std::vector<Value> inputs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value v = n.inputs[i];
      inputs.push_back(!is_f32(v) ? rw_(v) : stay[i] ? full(v) : low(v));
    }
    std::vector<Value> res = rw_.dst().apply(*n.op, std::move(inputs), n.attrs);
    for (size_t i = 0; i < res.size(); ++i) {
      Value v = n.outputs[i];
      if (is_f32(v)) {
        low_[id(v)] = res[i];
        native_[id(v)] = 1;
      } else {
        rw_.replace(v, res[i]);
      }
    }
    changed_ = true;
    return true;
  }

  // A wide op whose f32 inputs were computed in 16 bits reads those as they are; its other
  // inputs and its outputs keep their dtypes (the inference must agree).
  bool emit_wide(const Node& n, std::string_view attr) {
    std::vector<TensorType> in;
    bool any = false;
    for (Value v : n.inputs) {
      in.push_back(v.type());
      if (is_f32(v) && native_[id(v)]) in.back().dtype = half_, any = true;
    }
    if (!any) return false;
    Attrs attrs = n.attrs;
    attrs.set(std::string(attr), true);
    std::optional<std::vector<TensorType>> out;
    try {
      out = infer_types(*n.op, in, attrs, n.subgraphs);
    } catch (const Error&) {
      return false;
    }
    for (size_t i = 0; i < out->size(); ++i)
      if ((*out)[i].dtype != n.outputs[i].dtype()) return false;
    DeviceKind dev = ctx_.device.kind;
    if (kernels_.has(n.op->name, dev) && !kernels_.find({*n.op, attrs, in, *out}, dev))
      return false;
    std::vector<Value> inputs;
    for (Value v : n.inputs)
      inputs.push_back(!is_f32(v) ? rw_(v) : native_[id(v)] ? low(v) : full(v));
    std::vector<Value> res = rw_.dst().apply(*n.op, std::move(inputs), std::move(attrs));
    for (size_t i = 0; i < res.size(); ++i) rw_.replace(n.outputs[i], res[i]);
    changed_ = true;
    return true;
  }

  // The cheap part of the follow rule, before any inference: some input was computed in
  // 16 bits, and no other one is known to keep the op in f32.
  bool may_follow(const Node& n) const {
    bool any_native = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Value v = n.inputs[i];
      if (!is_f32(v)) continue;
      if (native_[id(v)])
        any_native = true;
      else if (!constant_of(src_, v) && typed_slots_.count({n.op, i}))
        return false;
    }
    return any_native;
  }

  static std::optional<std::vector<TensorType>> infer(const Node& n,
                                                      const std::vector<TensorType>& in) {
    try {
      return infer_types(*n.op, in, n.attrs, n.subgraphs);
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  static bool same_dtypes(const std::vector<TensorType>& a, const std::vector<TensorType>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].dtype != b[i].dtype) return false;
    return true;
  }

  // Copies n with its inputs in their declared dtypes.
  void keep(const Node& n) {
    for (Value v : n.inputs) full(v);
    rw_.copy(n);
  }

  // A cast between f32 and the 16-bit type reuses the form the pass keeps anyway.
  void cast_node(const Node& n) {
    Value x = n.inputs[0], y = n.outputs[0];
    DType from = x.dtype(), to = y.dtype();
    if (from == half_ && to == DType::f32) {
      // y's 16-bit form is x itself, exactly; its f32 form is made when something needs it.
      low_[id(y)] = rw_(x);
      return;
    }
    if (from == DType::f32 && to == half_) {
      if (low_[id(x)].valid()) changed_ = true;  // an existing form, not a second cast
      rw_.replace(y, low(x));
      return;
    }
    keep(n);
  }

  const Graph& src_;
  const PassContext& ctx_;
  const KernelRegistry& kernels_;
  const DType half_;
  const bool auto_;
  Rewriter rw_;
  std::vector<Value> low_;       // per source value id: its 16-bit form, or invalid
  std::vector<uint8_t> native_;  // per source value id: computed in 16 bits by an op
  std::set<std::pair<const OpDef*, size_t>> typed_slots_;  // inputs whose dtype matters
  bool changed_ = false;
};

std::unique_ptr<Graph> mixed_precision(const Graph& g, const PassContext& ctx) {
  if (ctx.precision == Precision::f32) return nullptr;
  return MixedPrecision(g, ctx).run();
}

}  // namespace

void register_precision_passes(PassRegistry& r) {
  r.add({"mixed_precision", mixed_precision,
         "runs matmul / conv / attention (auto_*) or every float op (bf16, f16) in 16 bits"});
}

}  // namespace rlx::passes
