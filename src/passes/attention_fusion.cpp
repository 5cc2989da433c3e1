// attention_fusion: scaled dot-product attention written out in core ops becomes one
// `attention` node, whose CPU kernel computes it tile by tile without materialising the
// scores.
//
//   s = q @ k^T            matmul(q, transpose(k)), the same with the transpose folded
//                          into a fused_matmul (transpose_b), a dot_general contracting
//                          the last dims of both, or matmul(q, kT) with any kT [.., D, Sk]
//   s = s * c | s / c      scale by a positive constant (also q * c before the product)
//   s = s + m              m a constant causal mask (0 where key j <= query i, a large
//                          negative, <= -1e4, or -inf elsewhere) -> mask "causal";
//                          any other m (broadcasting onto s) -> the bias input
//   s = select(tril, s, -big)  the same mask as a condition
//   p = softmax(s, last axis);  out = p @ v
//
// Masks align bottom-right (query i sees keys j <= i + Sk - Sq) as the kernel's do, and
// only Sq <= Sk is recognised (else the first rows see no key, where the kernel gives 0
// and the unfused graph does not). Scales go below every mask or bias add (an add below a
// scale would scale the bias too). Every intermediate must have no other reader (so
// training graphs, whose backward reads the probabilities, stay unfused); float dtypes,
// and only where the device's attention kernel accepts the result.
#include <cmath>

#include "passes/fusion.h"
#include "rlx/axes.h"

namespace rlx::passes {

namespace {

constexpr double kMasked = -1e4;  // additive mask entries at or below this hide a key

bool swaps_last2(const Node& n) {
  if (n.op_name() != "transpose" || n.inputs[0].rank() < 2) return false;
  int64_t r = n.inputs[0].rank();
  const IntList p = full_perm(n.attrs.get_ints("perm"), r);
  for (int64_t i = 0; i < r; ++i) {
    int64_t want = i < r - 2 ? i : (i == r - 2 ? r - 1 : r - 2);
    if (p[size_t(i)] != want) return false;
  }
  return true;
}

TensorType swapped(TensorType t) {
  std::swap(t.shape[t.shape.size() - 2], t.shape[t.shape.size() - 1]);
  return t;
}

// A positive finite constant c with `other` the operand it scales (c does not broadcast
// it to a larger type).
std::optional<double> scale_of(const Graph& g, Value c, Value other, const TensorType& out) {
  auto v = splat_value(g, c);
  if (!v || !(*v > 0) || !std::isfinite(*v) || other.type() != out) return std::nullopt;
  return v;
}

struct Match {
  Value q, k, v, bias;
  bool k_t = false, v_t = false;  // k / v arrive as [.., D, Sk] / [.., Dv, Sk]: transpose
  bool causal = false;
  double scale = 1;
  std::vector<int32_t> claimed;
};

class AttentionFusion {
 public:
  AttentionFusion(const Graph& g, const PassContext& ctx) : g_(g), ctx_(ctx), uses_(g), plan_(g) {}

  std::unique_ptr<Graph> run() {
    const auto& nodes = g_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if ((n.op_name() != "matmul" && n.op_name() != "fused_matmul") || plan_.taken(int32_t(i)))
        continue;
      auto m = match(n);
      if (!m) continue;
      for (int32_t a : m->claimed) plan_.claim(a);
      std::vector<Value> reads{m->q, m->k, m->v};
      if (m->bias.valid()) reads.push_back(m->bias);
      plan_.root(int32_t(i), reads, [m = *m](Rewriter& rw) {
        Graph& d = rw.dst();
        auto t = [&](Value v, bool swap) {
          Value x = rw(v);
          if (!swap) return x;
          IntList perm;
          for (int64_t j = 0; j < x.rank(); ++j) perm.push_back(j);
          std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
          return d.apply1("transpose", {x}, {{"perm", perm}});
        };
        std::vector<Value> in{rw(m.q), t(m.k, m.k_t), t(m.v, m.v_t)};
        if (m.bias.valid()) in.push_back(rw(m.bias));
        return std::vector<Value>{d.apply1("attention", in, attrs_of(m))};
      });
    }
    return plan_.apply(g_);
  }

 private:
  static Attrs attrs_of(const Match& m) {
    return {{"mask", m.causal ? "causal" : "none"}, {"scale", m.scale}};
  }

  const Node* free_producer(Value v) const {
    const Node* p = g_.producer(v);
    return p && !plan_.taken(producer_index(g_, v)) ? p : nullptr;
  }

  // Whether a constant over the scores [.., Sq, Sk] (leading dims 1) holds `hit(i, j, x)`
  // at every entry, where visible(i, j) says whether query i sees key j causally.
  template <class F>
  bool causal_constant(Value c, const Shape& scores, F hit) const {
    const Literal* lit = constant_of(g_, c);
    const Shape& s = c.shape();
    if (!lit || s.size() < 2 || s.size() > scores.size()) return false;
    const Dim &sq = scores[scores.size() - 2], &sk = scores.back();
    if (!sq.is_static() || !sk.is_static() || sq.value() > sk.value()) return false;
    int64_t nq = sq.value(), nk = sk.value();
    if (!s[s.size() - 2].is(nq) || !s.back().is(nk)) return false;
    for (size_t d = 0; d + 2 < s.size(); ++d)
      if (!s[d].is(1)) return false;
    std::vector<double> x = lit->to_doubles();
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < nk; ++j)
        if (!hit(j <= i + nk - nq, x[size_t(i * nk + j)])) return false;
    return true;
  }

  // A constant bias with a row of -inf only: the unfused softmax gives NaN there, the
  // kernel 0.
  bool hides_a_row(Value bias) const {
    const Literal* lit = constant_of(g_, bias);
    if (!lit || bias.rank() == 0) return false;
    int64_t n = lit->shape().back();
    std::vector<double> x = lit->to_doubles();
    for (size_t r = 0; n > 0 && r < x.size(); r += size_t(n)) {
      bool hidden = true;
      for (size_t j = r; hidden && j < r + size_t(n); ++j) hidden = x[j] == -INFINITY;
      if (hidden) return true;
    }
    return false;
  }

  // The operand of a binary node that carries the scores (the other is the mask / bias /
  // scale): the one of the node's own type; both are: the one made by a scores op.
  Value chain_operand(const Node& n) const {
    Value a = n.inputs[0], b = n.inputs[1];
    const TensorType& t = n.outputs[0].type();
    if (a.type() != t) return b;
    if (b.type() != t) return a;
    for (Value v : {a, b}) {
      const Node* p = g_.producer(v);
      if (!p) continue;
      for (const char* op :
           {"mul", "div", "add", "select", "matmul", "fused_matmul", "dot_general"})
        if (p->op_name() == op) return v;
    }
    return a;
  }

  // q @ k^T in one of its forms; fills q, k, k_t.
  bool product(const Node& n, Match& m) {
    const std::string& op = n.op_name();
    Value kt;  // the operand holding k^T [.., D, Sk]
    if (op == "matmul") {
      kt = n.inputs[1];
    } else if (op == "fused_matmul") {
      if (n.inputs.size() > 2 || n.attrs.get_string("activation") != "none" ||
          n.attrs.get_bool("transpose_a"))
        return false;
      if (n.attrs.get_bool("transpose_b"))
        m.k = n.inputs[1];
      else
        kt = n.inputs[1];
    } else if (op == "dot_general") {
      int64_t r = n.inputs[0].rank();
      IntList batch;
      for (int64_t i = 0; i + 2 < r; ++i) batch.push_back(i);
      const Attrs& a = n.attrs;
      auto last = [&](const char* key) {
        const IntList& v = a.get_ints(key);
        return v.size() == 1 && (v[0] == r - 1 || v[0] == -1);
      };
      if (r < 2 || n.inputs[1].rank() != r || a.get_ints("lhs_batch") != batch ||
          a.get_ints("rhs_batch") != batch || !last("lhs_contracting") || !last("rhs_contracting"))
        return false;
      m.k = n.inputs[1];
    } else {
      return false;
    }
    m.q = n.inputs[0];
    if (kt.valid()) {
      const Node* t = free_producer(kt);
      if (t && swaps_last2(*t)) {
        m.k = t->inputs[0];
        if (uses_.single_use(kt)) m.claimed.push_back(producer_index(g_, kt));
      } else {
        m.k = kt;
        m.k_t = true;
      }
    }
    return m.q.rank() >= 2 && m.k.rank() >= 2;
  }

  std::optional<Match> match(const Node& pv) {
    Match m;
    Value probs = pv.inputs[0];
    if (pv.op_name() == "fused_matmul") {
      if (pv.inputs.size() > 2 || pv.attrs.get_string("activation") != "none" ||
          pv.attrs.get_bool("transpose_a"))
        return std::nullopt;
      m.v_t = pv.attrs.get_bool("transpose_b");
    }
    m.v = pv.inputs[1];
    if (!is_float(probs.dtype()) || probs.rank() < 2 || m.v.rank() < 2) return std::nullopt;
    const Node* sm = free_producer(probs);
    if (!sm || sm->op_name() != "softmax" || !uses_.single_use(probs)) return std::nullopt;
    int64_t axis = sm->attrs.get_int("axis");
    if (axis != -1 && axis != probs.rank() - 1) return std::nullopt;
    m.claimed.push_back(producer_index(g_, probs));
    Value cur = sm->inputs[0];
    const Shape scores = cur.shape();
    bool scaled = false;  // a scale was seen: no mask or bias may sit below it
    for (;;) {
      const Node* n = free_producer(cur);
      if (!n || !uses_.single_use(cur)) return std::nullopt;
      m.claimed.push_back(producer_index(g_, cur));
      const std::string& op = n->op_name();
      const TensorType& t = n->outputs[0].type();
      if (op == "add" && !scaled) {
        Value c = chain_operand(*n), other = n->inputs[0] == c ? n->inputs[1] : n->inputs[0];
        if (c.type() != t) return std::nullopt;
        bool causal = causal_constant(
            other, scores, [](bool vis, double x) { return vis ? x == 0 : x <= kMasked; });
        if (causal) {
          m.causal = true;
        } else if (!m.bias.valid() && !hides_a_row(other)) {
          m.bias = other;
        } else {
          return std::nullopt;
        }
        cur = c;
      } else if (op == "select" && !scaled) {
        Value cond = n->inputs[0];
        auto masked = [&](Value v) {
          auto x = splat_value(g_, v);
          return x && *x <= kMasked;
        };
        auto is_tril = [&](bool want) {
          return causal_constant(cond, scores,
                                 [want](bool vis, double x) { return (x != 0) == (vis == want); });
        };
        if (masked(n->inputs[2]) && is_tril(true))
          cur = n->inputs[1];
        else if (masked(n->inputs[1]) && is_tril(false))
          cur = n->inputs[2];
        else
          return std::nullopt;
        if (cur.type() != t) return std::nullopt;
        m.causal = true;
      } else if (op == "mul" || op == "div") {
        Value c = chain_operand(*n), other = n->inputs[0] == c ? n->inputs[1] : n->inputs[0];
        if (op == "div" && !(c == n->inputs[0])) return std::nullopt;
        auto s = scale_of(g_, other, c, t);
        if (!s) return std::nullopt;
        m.scale = op == "mul" ? m.scale * *s : m.scale / *s;
        scaled = true;
        cur = c;
      } else if (product(*n, m)) {
        break;
      } else {
        return std::nullopt;
      }
    }
    // q * c before the product.
    if (const Node* qs = free_producer(m.q);
        qs && qs->op_name() == "mul" && uses_.single_use(m.q)) {
      Value c = chain_operand(*qs), other = qs->inputs[0] == c ? qs->inputs[1] : qs->inputs[0];
      if (auto s = scale_of(g_, other, c, qs->outputs[0].type())) {
        m.claimed.push_back(producer_index(g_, m.q));
        m.q = c;
        m.scale *= *s;
      }
    }
    if (!std::isfinite(m.scale) || !(m.scale > 0)) return std::nullopt;
    std::vector<TensorType> types{m.q.type(), m.k.type(), m.v.type()};
    if (m.k_t) types[1] = swapped(types[1]);
    if (m.v_t) types[2] = swapped(types[2]);
    if (m.bias.valid()) types.push_back(m.bias.type());
    auto out = native_type(ctx_, "attention", types, attrs_of(m));
    if (!out || *out != pv.outputs[0].type()) return std::nullopt;
    return m;
  }

  const Graph& g_;
  const PassContext& ctx_;
  UseInfo uses_;
  FusionPlan plan_;
};

}  // namespace

void register_attention_fusion(PassRegistry& r) {
  r.add({"attention_fusion",
         [](const Graph& g, const PassContext& ctx) -> std::unique_ptr<Graph> {
           if (!has_any_op(g, {"softmax"})) return nullptr;
           return AttentionFusion(g, ctx).run();
         },
         "softmax(q k^T * scale [+ mask / bias]) v -> attention"});
}

}  // namespace rlx::passes
