// Algebraic simplification in one forward walk. Rules look at the graph being built, where
// a node's inputs are already simplified, so chains collapse in one run: neg(neg(neg(neg
// x))) is x. A rule replaces a node only by a value of exactly the node's type (dtype and
// dims), so an identity that would broadcast x to a bigger shape, or promote it, is left.
// Nodes a rule bypasses stay in the graph for dce.
//
//   x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1  -> x   (any splat constant; for floats
//       x + 0 may turn a -0.0 into +0.0, as in XLA; x * 0 and x - x are left alone: NaN
//       and infinity make them depend on x). Where the constant makes the result bigger
//       than x, and its shape is static, -> broadcast_to(x)
//   neg(neg x) -> x;  x - neg(y) -> x + y;  x + neg(y), neg(y) + x -> x - y
//   transpose(transpose x) -> one transpose, or x;  a transpose that permutes nothing -> x
//   reshape / squeeze / expand_dims / reshape_like of one of them -> one reshape, or x; to
//       x's shape -> x; reshape_like to a static shape -> reshape (its `like` may then die)
//   cast to x's dtype -> x;  cast(cast(x, a), b) -> cast(x, b) when a holds every value of
//       x's dtype exactly (so cast(cast(x: bf16, f32), bf16) is x)
//   x / c (float constant) -> x * (1 / c) where that is exact: c a power of two whose
//       reciprocal is a normal number. Any other c stays a division, as ONNX Runtime, NumPy
//       and PyTorch's eager ops compute it (a reciprocal's 1 ulp moves a quantizer's
//       rounding: a QuantizeLinear of x / 0.1 or a DynamicQuantizeLinear's range / 255).
//   x * sigmoid(x), sigmoid(x) * x -> silu(x) (how ONNX exporters write SiLU / swish; the
//       fusion passes then take it as a conv's or a matmul's activation)
//   an elementwise op's input broadcast_to(y) or broadcast_like(y, …), or a splat
//       constant, that the op would broadcast anyway -> y, or a scalar constant
#include <cmath>
#include <limits>

#include "passes/cleanup.h"
#include "passes/rewrite.h"
#include "rlx/axes.h"

namespace rlx::passes {

namespace {

constexpr int64_t kMaxReciprocal = int64_t{1} << 20;  // elements of a divisor made a factor

// The ops the rules are about, resolved once.
struct Ops {
  const OpDef *add, *sub, *mul, *div, *neg, *cast, *transpose, *reshape, *squeeze, *expand_dims,
      *reshape_like, *broadcast_to, *broadcast_like, *sigmoid, *silu;

  static const Ops& get() {
    static const Ops ops = [] {
      const OpRegistry& r = OpRegistry::global();
      return Ops{&r.get("add"),
                 &r.get("sub"),
                 &r.get("mul"),
                 &r.get("div"),
                 &r.get("neg"),
                 &r.get("cast"),
                 &r.get("transpose"),
                 &r.get("reshape"),
                 &r.get("squeeze"),
                 &r.get("expand_dims"),
                 &r.get("reshape_like"),
                 &r.get("broadcast_to"),
                 &r.get("broadcast_like"),
                 &r.get("sigmoid"),
                 &r.get("silu")};
    }();
    return ops;
  }
  // Ops whose output is the input's elements, in row-major order, under a new shape.
  bool reshapes(const OpDef* op) const {
    return op == reshape || op == squeeze || op == expand_dims || op == reshape_like;
  }
  // Ops whose output is input 0 broadcast (NumPy rules) to a bigger shape.
  bool broadcasts(const OpDef* op) const { return op == broadcast_to || op == broadcast_like; }
};

// Same dtype and dims that are provably equal (no anonymous "?").
bool known_same(const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype || a.rank() != b.rank()) return false;
  for (size_t i = 0; i < a.shape.size(); ++i)
    if (!a.shape[i].known_equal(b.shape[i])) return false;
  return true;
}

// Broadcasting a value of shape c against x leaves x's shape as it is.
bool absorbed(const Shape& c, const Shape& x) {
  if (c.size() > x.size()) return false;
  size_t off = x.size() - c.size();
  for (size_t i = 0; i < c.size(); ++i)
    if (!c[i].is(1) && !c[i].known_equal(x[off + i])) return false;
  return true;
}

// Significand digits of a float dtype; value bits of an integer one.
int digits(DType t) {
  switch (t) {
    case DType::f16:
      return 11;
    case DType::bf16:
      return 8;
    case DType::f32:
      return 24;
    case DType::f64:
      return 53;
    case DType::i8:
      return 7;
    case DType::u8:
      return 8;
    case DType::i16:
      return 15;
    case DType::i32:
      return 31;
    case DType::i64:
      return 63;
    case DType::boolean:
      return 1;
    default:  // string, quantized
      return 0;
  }
}

// Whether `to` holds every value of `from` exactly (a widening cast).
bool exact_cast(DType from, DType to) {
  if (from == to || from == DType::boolean) return true;
  if (to == DType::boolean || (is_float(from) && !is_float(to))) return false;
  if (is_float(from))  // f16 and bf16 each miss values of the other; both fit f32
    return to == DType::f64 || (to == DType::f32 && (from == DType::f16 || from == DType::bf16));
  if (is_float(to)) return digits(from) <= digits(to);
  if (is_signed_integer(from) && !is_signed_integer(to)) return false;
  return dtype_size(to) > dtype_size(from);
}

// The smallest and largest normal magnitudes of a float dtype.
std::pair<double, double> normal_range(DType t) {
  switch (t) {
    case DType::f16:
      return {std::ldexp(1.0, -14), 65504.0};
    case DType::f64:
      return {std::numeric_limits<double>::min(), std::numeric_limits<double>::max()};
    default:  // f32 and bf16 share the exponent range
      return {double(std::numeric_limits<float>::min()),
              t == DType::bf16 ? 3.3895313892515355e38 : double(std::numeric_limits<float>::max())};
  }
}

bool is_identity(const IntList& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

class Simplifier {
 public:
  explicit Simplifier(Rewriter& rw) : rw_(rw), g_(rw.dst()), ops_(Ops::get()) {}

  // The value that replaces n's output, or an invalid Value to copy n as it is.
  Value simplify(const Node& n) {
    if (n.outputs.size() != 1 || !n.subgraphs.empty() || n.op->has(Trait::side_effect)) return {};
    const OpDef* op = n.op;
    std::vector<Value> in = rw_(n.inputs);
    const TensorType& want = n.outputs[0].type();
    if (op == ops_.add || op == ops_.sub || op == ops_.mul || op == ops_.div) {
      if (Value v = arithmetic(op, in, want); v.valid()) return v;
    }
    if (op == ops_.neg) {
      if (const Node* p = made_by(in[0], ops_.neg)) return p->inputs[0];
    }
    if (op == ops_.transpose) return transpose(n, in[0], want);
    if (ops_.reshapes(op)) return reshape(n, in[0], want);
    if (op == ops_.cast) return cast(in[0], n.attrs.get_dtype("dtype"), want);
    if (op->has(Trait::elementwise) && in.size() >= 2) return unbroadcast(n, in, want);
    return {};
  }

 private:
  // op(in) when its type is `want`; otherwise nothing is emitted and the result is invalid.
  Value emit(const OpDef& op, const std::vector<Value>& in, const Attrs& attrs,
             const TensorType& want) {
    std::vector<TensorType> types;
    for (Value v : in) types.push_back(v.type());
    try {
      Attrs full = validate_attrs(op, attrs);
      std::vector<TensorType> out = infer_types(op, types, full, {});
      if (out.size() != 1 || !(out[0] == want)) return {};
      return g_.apply(op, in, full)[0];
    } catch (const Error&) {
      return {};
    }
  }

  // The node that makes v, when it runs op.
  const Node* made_by(Value v, const OpDef* op) const {
    const Node* p = g_.producer(v);
    return p && p->op == op ? p : nullptr;
  }

  // The one value of a splat constant, or of a broadcast of one (zeros_like…).
  std::optional<double> splat(Value v) {
    if (const Node* b = g_.producer(v); b && ops_.broadcasts(b->op)) v = b->inputs[0];
    return splat_value(g_, v);
  }

  Value arithmetic(const OpDef* op, const std::vector<Value>& in, const TensorType& want) {
    const bool additive = op == ops_.add || op == ops_.sub;
    const double unit = additive ? 0.0 : 1.0;
    const bool commutes = op->has(Trait::commutative);
    for (size_t i : {size_t(1), size_t(0)}) {
      if (i == 0 && !commutes) break;
      Value c = in[i], x = in[1 - i];
      std::optional<double> s = splat(c);
      if (!s || *s != unit) continue;
      if (absorbed(c.shape(), x.shape()) && x.type() == want) return x;
      // The constant only broadcasts x: say so (cheaper, and elementwise users absorb it).
      if (x.dtype() == want.dtype && is_static(want.shape))
        if (Value v = emit(*ops_.broadcast_to, {x}, {{"shape", static_sizes(want.shape)}}, want);
            v.valid())
          return v;
    }
    if (op == ops_.sub) {
      if (const Node* p = made_by(in[1], ops_.neg))
        return emit(*ops_.add, {in[0], p->inputs[0]}, {}, want);
    }
    if (op == ops_.add) {
      for (size_t i : {size_t(1), size_t(0)}) {
        const Node* p = made_by(in[i], ops_.neg);
        if (Value v = p ? emit(*ops_.sub, {in[1 - i], p->inputs[0]}, {}, want) : Value{}; v.valid())
          return v;
      }
    }
    if (op == ops_.div) return reciprocal(in, want);
    if (op == ops_.mul) {  // x * sigmoid(x), either order: SiLU as ONNX exporters write it
      for (size_t i : {size_t(1), size_t(0)}) {
        const Node* p = made_by(in[i], ops_.sigmoid);
        if (p && p->inputs[0] == in[1 - i]) return emit(*ops_.silu, {in[1 - i]}, {}, want);
      }
    }
    return {};
  }

  // x / c -> x * (1 / c) for a float constant c of powers of two with normal reciprocals
  // (the product then equals the quotient bit for bit).
  Value reciprocal(const std::vector<Value>& in, const TensorType& want) {
    const Literal* c = constant_of(g_, in[1]);
    if (!c || !is_float(c->dtype()) || c->numel() > kMaxReciprocal) return {};
    auto [lo, hi] = normal_range(c->dtype());
    std::vector<double> r = c->to_doubles();
    for (double& v : r) {
      int e = 0;
      if (!std::isfinite(v) || std::abs(std::frexp(v, &e)) != 0.5) return {};
      v = 1.0 / v;
      if (std::abs(v) < lo || std::abs(v) > hi) return {};
    }
    Literal lit = Literal::from_doubles(c->dtype(), c->shape(), r);
    std::vector<TensorType> types{in[0].type(), lit.type()};
    try {
      std::vector<TensorType> out = infer_types(*ops_.mul, types, {}, {});
      if (out.size() != 1 || !(out[0] == want)) return {};
    } catch (const Error&) {
      return {};
    }
    return g_.apply(*ops_.mul, {in[0], g_.constant(lit)})[0];
  }

  Value transpose(const Node& n, Value x, const TensorType& want) {
    IntList perm = full_perm(n.attrs.get_ints("perm"), x.rank());
    if (is_identity(perm)) return x.type() == want ? x : Value{};
    const Node* p = made_by(x, ops_.transpose);
    if (!p) return {};
    Value inner = p->inputs[0];
    IntList first = full_perm(p->attrs.get_ints("perm"), inner.rank()), both(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) both[i] = first[size_t(perm[i])];
    if (is_identity(both)) return inner.type() == want ? inner : Value{};
    return emit(*ops_.transpose, {inner}, {{"perm", both}}, want);
  }

  Value reshape(const Node& n, Value y, const TensorType& want) {
    if (known_same(y.type(), want)) return y;
    const Node* p = g_.producer(y);
    if (!p || !ops_.reshapes(p->op)) {
      // reshape_like to a static shape no longer needs its `like` (which may then die).
      if (n.op != ops_.reshape_like || !is_static(want.shape)) return {};
      return emit(*ops_.reshape, {y}, {{"shape", static_sizes(want.shape)}}, want);
    }
    Value x = p->inputs[0];
    if (known_same(x.type(), want)) return x;
    if (is_static(want.shape))
      return emit(*ops_.reshape, {x}, {{"shape", static_sizes(want.shape)}}, want);
    if (n.op != ops_.reshape || p->op != ops_.reshape) return {};
    // The outer spec's 0s copy the middle value's dims: say them in terms of x.
    const IntList &inner = p->attrs.get_ints("shape"), &outer = n.attrs.get_ints("shape");
    IntList spec = outer;
    for (size_t i = 0; i < spec.size(); ++i) {
      if (spec[i] != 0) continue;
      if (i < inner.size() && inner[i] == 0) continue;  // still x's dim i
      const Dim& d = y.shape()[i];
      if (!d.is_static() || d.value() == 0) return {};
      spec[i] = d.value();
    }
    return emit(*ops_.reshape, {x}, {{"shape", spec}}, want);
  }

  Value cast(Value x, DType to, const TensorType& want) {
    if (x.dtype() == to) return x.type() == want ? x : Value{};
    const Node* p = made_by(x, ops_.cast);
    if (!p) return {};
    Value inner = p->inputs[0];
    if (!exact_cast(inner.dtype(), x.dtype())) return {};
    if (inner.dtype() == to) return inner.type() == want ? inner : Value{};
    return emit(*ops_.cast, {inner}, {{"dtype", to}}, want);
  }

  // Inputs the op broadcasts anyway need not be broadcast first: broadcast_to(y) -> y, a
  // splat constant -> a scalar one, as long as the output keeps its type.
  Value unbroadcast(const Node& n, std::vector<Value> in, const TensorType& want) {
    std::vector<TensorType> types;
    for (Value v : in) types.push_back(v.type());
    std::vector<std::optional<Literal>> scalars(in.size());
    bool changed = false;
    for (size_t i = 0; i < in.size(); ++i) {
      Value y;
      std::optional<Literal> scalar;
      if (const Node* b = g_.producer(in[i]); b && ops_.broadcasts(b->op)) {
        y = b->inputs[0];
      } else if (const Literal* lit = constant_of(g_, in[i]);
                 lit && lit->numel() > 1 && splat_value(g_, in[i])) {
        scalar = Literal(lit->dtype(), {}, lit->bytes().subspan(0, dtype_size(lit->dtype())));
      } else {
        continue;
      }
      TensorType was = types[i];
      types[i] = y.valid() ? y.type() : scalar->type();
      if (!fits(n, types, want)) {
        types[i] = was;
        continue;
      }
      if (y.valid()) in[i] = y;
      scalars[i] = std::move(scalar);
      changed = true;
    }
    if (!changed) return {};
    for (size_t i = 0; i < in.size(); ++i)
      if (scalars[i]) in[i] = g_.constant(*scalars[i]);
    return g_.apply(*n.op, in, n.attrs)[0];
  }

  bool fits(const Node& n, const std::vector<TensorType>& types, const TensorType& want) {
    try {
      std::vector<TensorType> out = infer_types(*n.op, types, n.attrs, {});
      return out.size() == 1 && out[0] == want;
    } catch (const Error&) {
      return false;
    }
  }

  Rewriter& rw_;
  Graph& g_;
  const Ops& ops_;
};

}  // namespace

std::unique_ptr<Graph> simplify(const Graph& g, const PassContext&) {
  Rewriter rw(g);
  Simplifier s(rw);
  for (const Node& n : g.nodes()) {
    if (Value v = s.simplify(n); v.valid()) {
      rw.replace(n.outputs[0], v);
    } else {
      rw.copy(n);
    }
  }
  if (!rw.changed()) return nullptr;
  return rw.finish();
}

}  // namespace rlx::passes
