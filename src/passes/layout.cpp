// layout_sinking: transposes that only feed something able to read the data in place of
// the copy.
//
// 1. A transpose of the last two dims feeding a matmul / fused_matmul operand becomes the
//    op's transpose_a / transpose_b: the GEMM reads the operand through its transpose
//    flag instead of a copy (float dtypes; the transpose goes when nothing else reads it).
// 1b. The same through a chain of single-use elementwise ops between the transpose and
//    the operand (whose other inputs are scalars): the chain runs on the data as it is.
// 2. transpose(transpose(x, p), q) becomes one transpose, or x when the two cancel.
//    Also through a cast (cast(transpose(w)) -> cast(w), as mixed precision leaves a
//    transposed weight's copy): the cast then matches the weight's other cast for cse.
// 2b. A transpose swapping the free dims of a dot_general without batch dims (lhs free
//    first, then rhs free: the weight gradient of x W^T is transpose(x^T dy)) becomes the
//    dot_general with its operands swapped.
// 3. transpose(f(transpose(x, p)), q) where p and q cancel and f is a chain of
//    single-user elementwise ops whose other inputs are scalars (rank 0) becomes f(x):
//    both copies go (the pattern of layout conversions around activations in imported
//    models). Elementwise ops with full-size second operands are left alone: sinking the
//    transpose into them would move, not remove, a copy.
// 4. An elementwise op whose full-size inputs are all transpose(x_i, p), one p (the others
//    scalars), runs on the x_i and its result is transposed once; a reduction of
//    transpose(x, p) reduces x over p's axes (transposed back where it keeps its dims).
//    Where an input's transpose has no other reader than this op and transposes that undo
//    it, a copy goes, and the moved transpose meets the ones below it: an NHWC graph as
//    tf2onnx writes it (a transpose to NCHW before every conv and back after it, the
//    activations and residual adds in NHWC between) runs in NCHW from end to end.
//
// attention_layout: an attention / attention_grad whose q, k, v (and dy) are each
// transpose(x) swapping the sequence and head axes ([b, s, h, d] -> [b, h, s, d], as
// multi-head projections are split) reads the x's with layout bshd where the device has a
// kernel for it; its results come back through the same transpose, which simplify then
// cancels against the transposes that read them. The head transposes go, forward and
// backward.
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ops/attention_layout.h"
#include "passes/cleanup.h"
#include "passes/families.h"
#include "passes/fusion.h"
#include "rlx/axes.h"

namespace rlx::passes {

namespace {

// The normalised permutation of a transpose node (empty perm: the reversal).
IntList perm_of(const Node& n) { return full_perm(n.attrs.get_ints("perm"), n.inputs[0].rank()); }

bool is_identity(const IntList& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

// transpose(transpose(x, p), q) == transpose(x, r) with r[i] = p[q[i]].
IntList compose(const IntList& p, const IntList& q) {
  IntList r;
  for (int64_t i : q) r.push_back(p[size_t(i)]);
  return r;
}

// A transpose that swaps only the last two dims.
bool swaps_last2(const Node& n) {
  if (n.op_name() != "transpose" || n.inputs[0].rank() < 2) return false;
  IntList p = perm_of(n);
  std::swap(p[p.size() - 2], p[p.size() - 1]);
  return is_identity(p);
}

// An elementwise op that only maps its first input (the others are scalars), so that it
// commutes with any transpose of it.
bool maps_elementwise(const Node& n) {
  if (!n.op->has(Trait::elementwise) || n.op->has(Trait::random) || n.op->has(Trait::side_effect) ||
      n.outputs.size() != 1 || !n.subgraphs.empty())
    return false;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.inputs[i].rank() != 0) return false;
  return true;
}

class LayoutSinking {
 public:
  LayoutSinking(const Graph& g, const PassContext& ctx) : g_(g), ctx_(ctx), uses_(g), plan_(g) {}

  std::unique_ptr<Graph> run() {
    const auto& nodes = g_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (n.op_name() == "matmul" || n.op_name() == "fused_matmul")
        fold_into_matmul(int32_t(i));
      else if (n.op_name() == "transpose" && !swap_dot_operands(int32_t(i)))
        cancel(int32_t(i));
    }
    return plan_.apply(g_);
  }

 private:
  const Node* producer(Value v) const { return g_.producer(v); }
  int32_t index(const Node* n) const { return int32_t(n - g_.nodes().data()); }

  void fold_into_matmul(int32_t i) {
    const Node& n = g_.nodes()[size_t(i)];
    if (!is_float(n.outputs[0].dtype()) || plan_.taken(i)) return;
    Attrs attrs = n.attrs;
    if (n.op_name() == "matmul") attrs = {{"transpose_a", false}, {"transpose_b", false}};
    std::vector<Value> in = n.inputs;  // source values
    bool any = false;
    std::vector<std::optional<DType>> cast_to(2);     // operands read through a cast
    std::vector<std::vector<const Node*>> chains(2);  // rule 1b: bottom up
    for (size_t k = 0; k < 2; ++k) {
      if (auto chain = elementwise_over_transpose(in[k])) {
        chains[k] = *chain;
        const Node* t = producer(chains[k].front()->inputs[0]);
        const char* flag = k == 0 ? "transpose_a" : "transpose_b";
        attrs.set(flag, !attrs.get_bool(flag));
        in[k] = t->inputs[0];
        any = true;
        continue;
      }
      const Node* t = producer(in[k]);
      if (t && t->op_name() == "cast" && uses_.single_use(in[k]) && !plan_.taken(index(t)) &&
          is_float(t->inputs[0].dtype())) {
        const Node* under = producer(t->inputs[0]);
        if (under && swaps_last2(*under) && uses_.single_use(t->inputs[0]) &&
            !plan_.taken(index(under))) {
          cast_to[k] = t->outputs[0].dtype();
          plan_.claim(index(t));
          t = under;
        }
      }
      if (!t || !swaps_last2(*t) || plan_.taken(index(t))) continue;
      const char* flag = k == 0 ? "transpose_a" : "transpose_b";
      attrs.set(flag, !attrs.get_bool(flag));
      in[k] = t->inputs[0];
      any = true;
    }
    if (!any) return;
    std::vector<TensorType> types;
    for (size_t k = 0; k < in.size(); ++k) {
      if (k < 2 && !chains[k].empty())
        types.push_back({chains[k].back()->outputs[0].dtype(), in[k].shape()});
      else
        types.push_back(k < 2 && cast_to[k] ? TensorType{*cast_to[k], in[k].shape()}
                                            : in[k].type());
    }
    // Flags that cancel out with nothing else fused leave a plain matmul.
    bool plain = in.size() == 2 && !attrs.get_bool("transpose_a") &&
                 !attrs.get_bool("transpose_b") &&
                 (!attrs.has("activation") || attrs.get_string("activation") == "none") &&
                 (!attrs.has("out_dtype") || attrs.get_string("out_dtype") == "same");
    std::string op = plain ? "matmul" : "fused_matmul";
    if (plain) attrs = {};
    auto t = native_type(ctx_, op, types, attrs);
    if (!t || *t != n.outputs[0].type()) return;
    // A transpose goes with its last reader (FusionPlan drops what nothing reads).
    std::vector<Value> reads = in;  // the chains' scalar operands too
    for (const auto& chain : chains)
      for (const Node* c : chain) {
        plan_.claim(index(c));
        reads.insert(reads.end(), c->inputs.begin() + 1, c->inputs.end());
      }
    plan_.root(i, reads, [in, attrs, op, cast_to, chains](Rewriter& rw) {
      std::vector<Value> args = rw(in);
      for (size_t k = 0; k < 2; ++k) {
        if (cast_to[k]) args[k] = rw.dst().apply1("cast", {args[k]}, {{"dtype", *cast_to[k]}});
        for (const Node* c : chains[k]) {
          std::vector<Value> cin = rw(c->inputs);
          cin[0] = args[k];
          args[k] = rw.dst().apply(*c->op, cin, c->attrs)[0];
        }
      }
      return std::vector<Value>{rw.dst().apply1(op, args, attrs)};
    });
  }

  // Rule 1b: operand = f(transpose(x)) with f a chain of single-use elementwise maps (the
  // power spectrum |stft|^2 read by a mel matmul): f runs on x as it is and the GEMM reads
  // its result through the transpose flag. The chain bottom up, or none.
  std::optional<std::vector<const Node*>> elementwise_over_transpose(Value v) {
    std::vector<const Node*> chain;
    const Node* p = producer(v);
    while (p && maps_elementwise(*p) && uses_.single_use(v) && !plan_.taken(index(p))) {
      chain.insert(chain.begin(), p);
      v = p->inputs[0];
      p = producer(v);
    }
    if (chain.empty() || !p || !swaps_last2(*p) || !uses_.single_use(v) || plan_.taken(index(p)))
      return std::nullopt;
    return chain;
  }

  // Rule 2b, rooted at the transpose `i`: true when it applied.
  bool swap_dot_operands(int32_t i) {
    const Node& t = g_.nodes()[size_t(i)];
    const Node* d = producer(t.inputs[0]);
    if (!d || d->op_name() != "dot_general" || plan_.taken(index(d)) ||
        !uses_.single_use(t.inputs[0]) || !d->attrs.get_ints("lhs_batch").empty())
      return false;
    int64_t lf = d->inputs[0].rank() - int64_t(d->attrs.get_ints("lhs_contracting").size());
    int64_t rank = t.inputs[0].rank();
    IntList want;  // rhs free dims, then lhs free dims
    for (int64_t k = lf; k < rank; ++k) want.push_back(k);
    for (int64_t k = 0; k < lf; ++k) want.push_back(k);
    if (perm_of(t) != want) return false;
    Attrs attrs = d->attrs;
    attrs.set("lhs_contracting", d->attrs.get_ints("rhs_contracting"));
    attrs.set("rhs_contracting", d->attrs.get_ints("lhs_contracting"));
    std::vector<Value> in{d->inputs[1], d->inputs[0]};
    plan_.claim(index(d));
    plan_.root(i, in, [in, attrs](Rewriter& rw) {
      return std::vector<Value>{rw.dst().apply1("dot_general", rw(in), attrs)};
    });
    return true;
  }

  // Rules 2 and 3, rooted at the outer transpose `i`.
  void cancel(int32_t i) {
    const Node& outer = g_.nodes()[size_t(i)];
    if (plan_.taken(i)) return;
    IntList q = perm_of(outer);
    std::vector<int32_t> chain;  // the elementwise ops between the transposes, top down
    Value v = outer.inputs[0];
    const Node* p = producer(v);
    while (p && maps_elementwise(*p) && uses_.single_use(v) && !plan_.taken(index(p))) {
      chain.push_back(index(p));
      v = p->inputs[0];
      p = producer(v);
    }
    if (!p || p->op_name() != "transpose" || plan_.taken(index(p))) return;
    IntList r = compose(perm_of(*p), q);
    if (!chain.empty() && !is_identity(r)) return;
    Value x = p->inputs[0];
    for (int32_t c : chain) plan_.claim(c);
    if (uses_.single_use(v)) plan_.claim(index(p));
    std::vector<const Node*> ops;  // bottom up, as they are re-applied
    std::vector<Value> reads{x};
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      ops.push_back(&g_.nodes()[size_t(*it)]);
      reads.insert(reads.end(), ops.back()->inputs.begin() + 1, ops.back()->inputs.end());
    }
    plan_.root(i, reads, [x, r, ops](Rewriter& rw) {
      Value y = rw(x);
      if (!is_identity(r))
        return std::vector<Value>{rw.dst().apply1("transpose", {y}, {{"perm", r}})};
      for (const Node* n : ops) {
        std::vector<Value> in = rw(n->inputs);
        in[0] = y;
        y = rw.dst().apply(*n->op, in, n->attrs)[0];
      }
      return std::vector<Value>{y};
    });
  }

  const Graph& g_;
  const PassContext& ctx_;
  UseInfo uses_;
  FusionPlan plan_;
};

// Rule 4, one forward walk: each value of the new graph that is a transpose is known with
// its source and perm, so a chain of sinkings and the cancellations they meet resolve at once.
class TransposeSinking {
 public:
  explicit TransposeSinking(const Graph& g) : g_(g), uses_(g) {}

  std::unique_ptr<Graph> run() {
    std::unique_ptr<Graph> out =
        rewrite_nodes(g_, [&](const Node& n, Rewriter& rw) { return visit(n, rw); });
    if (!out || !sunk_) return nullptr;
    // The transposes left without readers would keep a conv's output read twice.
    if (std::unique_ptr<Graph> clean = dce(*out, {})) out = std::move(clean);
    // Kept where fewer elements are copied than before: a transpose moved below an op
    // that nothing cancels is the same copy elsewhere.
    return copied(*out) < copied(g_) ? std::move(out) : nullptr;
  }

  // The elements a graph's transposes copy (a symbolic shape counts as large).
  static int64_t copied(const Graph& g) {
    int64_t total = 0;
    for (const Node& n : g.nodes()) {
      if (n.op_name() != "transpose") continue;
      const TensorType t = n.outputs[0].type();
      total +=
          t.is_static() ? checked_numel(static_sizes(t.shape), "layout_sinking") : int64_t(1) << 30;
    }
    return total;
  }

 private:
  struct Transposed {
    Value x;  // in the new graph
    IntList perm;
  };

  const Transposed* transposed(Value src, const Rewriter& rw) const {
    auto it = known_.find(rw(src).id);
    return it == known_.end() ? nullptr : &it->second;
  }

  // Whether the source value v, a transpose by p, is read by n alone besides transposes that
  // undo p (those cancel against the one sunk below n).
  bool goes(Value v, const IntList& p, const Node& n) const {
    if (uses_.is_output[size_t(v.id)]) return false;
    for (int32_t u : uses_.users[size_t(v.id)]) {
      const Node& r = g_.nodes()[size_t(u)];
      if (&r != &n && !(r.op_name() == "transpose" && is_identity(compose(p, perm_of(r)))))
        return false;
    }
    return true;
  }

  bool visit(const Node& n, Rewriter& rw) {
    if (n.op_name() == "transpose") {  // rule 2 over what this walk moved: one copy or none
      IntList q = perm_of(n);
      Value x = rw(n.inputs[0]);
      if (const Transposed* t = transposed(n.inputs[0], rw)) {
        q = compose(t->perm, q);
        x = t->x;
        if (is_identity(q)) {
          rw.replace(n.outputs[0], x);
          return true;
        }
        Value y = rw.dst().apply1("transpose", {x}, {{"perm", q}});
        known_[y.id] = {x, q};
        rw.replace(n.outputs[0], y);
        return true;
      }
      Value y = rw.copy(n)[0];
      known_[y.id] = {x, q};
      return true;
    }
    if (n.outputs.size() != 1 || !n.subgraphs.empty() || n.op->has(Trait::random) ||
        n.op->has(Trait::side_effect))
      return false;
    if (n.op->has(Trait::elementwise)) return elementwise(n, rw);
    if (n.op->has(Trait::reduction) && n.inputs.size() == 1 && n.attrs.has("axes") &&
        n.attrs.has("keepdims"))
      return reduction(n, rw);
    return false;
  }

  bool elementwise(const Node& n, Rewriter& rw) {
    const Shape& shape = n.outputs[0].shape();
    const IntList* p = nullptr;
    bool removes = false;
    std::vector<Value> in;
    for (Value v : n.inputs) {
      if (v.rank() == 0) {
        in.push_back(rw(v));
        continue;
      }
      const Transposed* t = transposed(v, rw);
      if (!t || v.shape() != shape || (p && t->perm != *p)) return false;
      p = &t->perm;
      removes = removes || goes(v, *p, n);
      in.push_back(t->x);
    }
    if (!p || !removes) return false;
    const IntList perm = *p;
    Value y = rw.dst().apply(*n.op, in, n.attrs)[0];
    emit_transpose(n, rw, y, perm);
    return true;
  }

  bool reduction(const Node& n, Rewriter& rw) {
    const Transposed* t = transposed(n.inputs[0], rw);
    if (!t || !goes(n.inputs[0], t->perm, n)) return false;
    const IntList perm = t->perm;
    const int64_t rank = n.inputs[0].rank();
    IntList axes;
    for (int64_t a : n.attrs.get_ints("axes")) axes.push_back(perm[size_t(norm_axis(a, rank))]);
    std::sort(axes.begin(), axes.end());
    const bool keep = n.attrs.get_bool("keepdims");
    if (!keep && !n.attrs.get_ints("axes").empty()) {
      // The kept dims must come out in the order they had (no transpose after).
      int64_t last = -1;
      const IntList& a0 = n.attrs.get_ints("axes");
      for (int64_t d = 0; d < rank; ++d) {
        bool reduced = false;
        for (int64_t a : a0) reduced = reduced || norm_axis(a, rank) == d;
        if (reduced) continue;
        if (perm[size_t(d)] < last) return false;
        last = perm[size_t(d)];
      }
    }
    Attrs attrs = n.attrs;
    attrs.set("axes", axes);
    Value y = rw.dst().apply(*n.op, {t->x}, attrs)[0];
    if (keep && rank > 0)
      emit_transpose(n, rw, y, perm);
    else
      rw.replace(n.outputs[0], y);
    sunk_ = true;
    return true;
  }

  void emit_transpose(const Node& n, Rewriter& rw, Value y, const IntList& perm) {
    Value t = rw.dst().apply1("transpose", {y}, {{"perm", perm}});
    known_[t.id] = {y, perm};
    rw.replace(n.outputs[0], t);
    sunk_ = true;
  }

  const Graph& g_;
  UseInfo uses_;
  std::unordered_map<int32_t, Transposed> known_;
  bool sunk_ = false;
};

using detail::seq_head_swap;

std::unique_ptr<Graph> attention_layout(const Graph& g, const PassContext& ctx) {
  FusionPlan plan(g);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    bool grad = n.op_name() == "attention_grad";
    if ((n.op_name() != "attention" && !grad) || detail::is_bshd(n.attrs)) continue;
    size_t swapped = grad ? 4 : 3;  // q, k, v (, dy); a bias stays
    std::vector<Value> in = n.inputs;
    std::vector<TensorType> types;
    bool all = true;
    for (size_t k = 0; k < in.size(); ++k) {
      if (k < swapped) {
        const Node* t = g.producer(in[k]);
        all = all && t && t->op_name() == "transpose" && in[k].rank() >= 3 &&
              perm_of(*t) == seq_head_swap(in[k].rank());
        if (!all) break;
        in[k] = t->inputs[0];
      }
      types.push_back(in[k].type());
    }
    if (!all) continue;
    Attrs attrs = n.attrs;
    attrs.set("layout", std::string("bshd"));
    if (!native_types(ctx, n.op_name(), types, attrs)) continue;
    plan.root(int32_t(i), in, [&n, in, attrs](Rewriter& rw) {
      std::vector<Value> out = rw.dst().apply(*n.op, rw(in), attrs), back;
      for (Value y : out)
        back.push_back(rw.dst().apply1("transpose", {y}, {{"perm", seq_head_swap(y.rank())}}));
      return back;
    });
  }
  return plan.apply(g);
}

}  // namespace

void register_layout_passes(PassRegistry& r) {
  r.add({"attention_layout",
         [](const Graph& g, const PassContext& ctx) -> std::unique_ptr<Graph> {
           if (!has_any_op(g, {"attention", "attention_grad"})) return nullptr;
           return attention_layout(g, ctx);
         },
         "attention reads [b, s, h, d] (layout bshd) instead of head transposes"});
  r.add({"layout_sinking",
         [](const Graph& g, const PassContext& ctx) -> std::unique_ptr<Graph> {
           if (!has_any_op(g, {"transpose"})) return nullptr;
           std::unique_ptr<Graph> a = LayoutSinking(g, ctx).run();
           std::unique_ptr<Graph> b = TransposeSinking(a ? *a : g).run();
           return b ? std::move(b) : std::move(a);
         },
         "folds last-two-dim transposes into matmul operands; cancels transpose pairs; moves "
         "transposes below elementwise ops and reductions"});
}

}  // namespace rlx::passes
