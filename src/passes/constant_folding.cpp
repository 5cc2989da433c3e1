// Constant folding: a node whose inputs are all known (constants) is evaluated once, at
// compile time, by the context's evaluator (a Session's: the CPU kernels), and replaced by
// `constant` nodes. One forward walk folds whole chains, since each folded node is a
// constant by the time its users are met.
//
// - Not folded: random draws, side effects, control flow, checkpoints, nodes with
//   subgraphs, and anything whose kernel fails (the error then happens at run time, as
//   before). Outputs must have static shapes of at most kMaxFoldElements elements, or
//   of no more than their known inputs hold (a literal is held in the graph: folding
//   must not blow a small constant up into a big one).
// - Splats stay cheap: an elementwise op whose inputs all hold one repeated value is
//   evaluated on one element. A splat too big to spell out stays lazy, as broadcast_to of
//   a one-element constant, which later folds read as known too.
// - Shape arithmetic (what importers emit): shape_of of a value of static shape is a
//   constant (and so is a gather of its static dims when others are symbolic), and
//   dynamic_reshape with a constant shape becomes a reshape, so a chain
//   shape_of -> gather -> concat -> dynamic_reshape ends as one reshape.
#include <algorithm>
#include <cstring>

#include "passes/cleanup.h"
#include "passes/rewrite.h"
#include "rlx/axes.h"

namespace rlx::passes {

namespace {

constexpr int64_t kMaxFoldElements = int64_t{1} << 20;   // per output
constexpr int64_t kMaxInputElements = int64_t{1} << 24;  // bounds the work of one fold

// A value whose contents are known at compile time: a constant's literal, or (lazy)
// broadcast_to of a one-element constant.
struct Known {
  const Literal* lit;
  std::vector<int64_t> shape;
  bool lazy;
};

std::optional<Known> known(const Graph& g, Value v) {
  if (const Literal* lit = constant_of(g, v)) return Known{lit, lit->shape(), false};
  if (const Node* b = producer_is(g, v, "broadcast_to")) {
    const Literal* lit = constant_of(g, b->inputs[0]);
    if (lit && lit->numel() == 1) return Known{lit, b->attrs.get_ints("shape"), true};
  }
  return std::nullopt;
}

// The one element every position of k holds, as a rank-0 literal (compared as bytes).
std::optional<Literal> splat_of(const Known& k) {
  if (k.lit->numel() == 0) return std::nullopt;
  std::span<const uint8_t> b = k.lit->bytes();
  size_t es = dtype_size(k.lit->dtype());
  if (!k.lazy)
    for (size_t off = es; off < b.size(); off += es)
      if (std::memcmp(b.data(), b.data() + off, es) != 0) return std::nullopt;
  return Literal(k.lit->dtype(), {}, b.subspan(0, es));
}

// `one` (a single element) repeated over shape.
Literal repeat(const Literal& one, const std::vector<int64_t>& shape) {
  size_t es = dtype_size(one.dtype()), n = size_t(checked_numel(shape, "constant_folding"));
  std::vector<uint8_t> bytes(n * es);
  for (size_t i = 0; i < n; ++i) std::memcpy(bytes.data() + i * es, one.data(), es);
  return Literal(one.dtype(), shape, bytes);
}

class Folder {
 public:
  Folder(Rewriter& rw, const Evaluator& evaluate) : rw_(rw), dst_(rw.dst()), evaluate_(evaluate) {}

  bool fold(const Node& n) {
    try {
      return try_fold(n);
    } catch (const Error&) {
      return false;  // sizes that overflow and the like: leave the node to the run
    }
  }

 private:
  bool try_fold(const Node& n) {
    const OpDef& op = *n.op;
    if (n.outputs.empty() || !n.subgraphs.empty() || op.name == "constant" ||
        op.has(Trait::random) || op.has(Trait::side_effect) || op.has(Trait::control) ||
        op.has(Trait::checkpoint))
      return false;
    std::vector<Value> in = rw_(n.inputs);
    if (op.name == "shape_of") return fold_shape_of(n, in[0]);
    if (op.name == "dynamic_reshape") return fold_dynamic_reshape(n, in);
    if (op.name == "gather" && fold_static_dims(n, in)) return true;
    std::vector<Known> ks;
    for (Value v : in) {
      std::optional<Known> k = known(dst_, v);
      if (!k) return false;
      ks.push_back(std::move(*k));
    }
    std::optional<std::vector<Value>> out = fold_known(op, in, ks, n.attrs);
    if (!out) return false;
    rw_.replace(n, *out);
    return true;
  }

  bool fold_shape_of(const Node& n, Value x) {
    if (!is_static(x.shape())) return false;
    rw_.replace(n.outputs[0], dst_.constant(Literal::from<int64_t>(static_sizes(x.shape()))));
    return true;
  }

  // gather(shape_of(x), constant) picking only static dims of x is a constant, even
  // when other dims of x are symbolic (the batch, say).
  bool fold_static_dims(const Node& n, const std::vector<Value>& in) {
    const Node* s = producer_is(dst_, in[0], "shape_of");
    const Literal* idx = constant_of(dst_, in[1]);
    if (!s || !idx) return false;
    const Shape& dims = s->inputs[0].shape();
    const int64_t rank = int64_t(dims.size());
    std::vector<int64_t> picked;
    for (int64_t i : idx->to_ints()) {
      if (i < -rank || i >= rank) return false;
      const Dim& d = dims[size_t(norm_axis(i, rank))];
      if (!d.is_static()) return false;
      picked.push_back(d.value());
    }
    rw_.replace(n.outputs[0], dst_.constant(Literal::from<int64_t>(picked, idx->shape())));
    return true;
  }

  // dynamic_reshape(x, constant) is reshape(x) with that shape (same 0 / -1 rules).
  bool fold_dynamic_reshape(const Node& n, const std::vector<Value>& in) {
    const Literal* spec = constant_of(dst_, in[1]);
    if (!spec) return false;
    static const OpDef& reshape = OpRegistry::global().get("reshape");
    Attrs attrs{{"shape", spec->to_ints()}};
    try {
      attrs = validate_attrs(reshape, attrs);
      std::vector<TensorType> types{in[0].type()};
      infer_types(reshape, types, attrs, {});
    } catch (const Error&) {
      return false;  // a bad shape: the run reports it
    }
    std::optional<Known> k = known(dst_, in[0]);
    std::optional<std::vector<Value>> folded;
    if (k) folded = fold_known(reshape, {in[0]}, {*k}, attrs);
    rw_.replace(n.outputs[0], folded ? (*folded)[0] : dst_.apply1(reshape.name, {in[0]}, attrs));
    return true;
  }

  // The values op computes from known inputs, as constants (or lazy splats); null when
  // it is not worth it or not possible.
  std::optional<std::vector<Value>> fold_known(const OpDef& op, const std::vector<Value>& in,
                                               const std::vector<Known>& ks, const Attrs& attrs) {
    std::vector<TensorType> in_types, out_types;
    for (Value v : in) in_types.push_back(v.type());
    try {
      out_types = infer_types(op, in_types, attrs, {});
    } catch (const Error&) {
      return std::nullopt;
    }
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorType& t : out_types) {
      if (!t.is_static()) return std::nullopt;
      shapes.push_back(static_sizes(t.shape));
    }
    if (std::optional<std::vector<Value>> s = fold_splats(op, ks, attrs, out_types, shapes))
      return s;

    // Outputs up to kMaxFoldElements, or no larger than the known inputs they come from (a
    // transposed or cast weight: the literal it replaces was as big, and runs stop
    // recomputing it).
    int64_t work = 0;
    for (const Known& k : ks) work += checked_numel(k.shape, "constant_folding");
    if (work > kMaxInputElements) return std::nullopt;
    for (const auto& s : shapes)
      if (checked_numel(s, "constant_folding") > std::max(kMaxFoldElements, work))
        return std::nullopt;
    if (!evaluate_) return std::nullopt;
    std::vector<FoldInput> inputs;
    for (const Known& k : ks) inputs.push_back({k.lit, k.shape});
    std::optional<std::vector<Literal>> lits = evaluate_(op, inputs, attrs);
    if (!lits) return std::nullopt;
    std::vector<Value> out;
    for (size_t i = 0; i < lits->size(); ++i) {
      if ((*lits)[i].type() != out_types[i]) return std::nullopt;
      out.push_back(dst_.constant((*lits)[i]));
    }
    return out;
  }

  // An elementwise op of splats is a splat: evaluate one element.
  std::optional<std::vector<Value>> fold_splats(const OpDef& op, const std::vector<Known>& ks,
                                                const Attrs& attrs,
                                                const std::vector<TensorType>& out_types,
                                                const std::vector<std::vector<int64_t>>& shapes) {
    if (!op.has(Trait::elementwise) || ks.empty() || !evaluate_) return std::nullopt;
    std::vector<Literal> one;
    bool all_one = true;  // nothing to save when every input is one element already
    for (const Known& k : ks) {
      std::optional<Literal> s = splat_of(k);
      if (!s) return std::nullopt;
      all_one = all_one && checked_numel(k.shape, "constant_folding") == 1;
      one.push_back(std::move(*s));
    }
    if (all_one) return std::nullopt;
    std::vector<FoldInput> inputs;
    for (const Literal& s : one) inputs.push_back({&s, {}});
    std::optional<std::vector<Literal>> lits = evaluate_(op, inputs, attrs);
    if (!lits) return std::nullopt;
    std::vector<Value> out;
    for (size_t i = 0; i < lits->size(); ++i) {
      const Literal& e = (*lits)[i];
      if (e.dtype() != out_types[i].dtype || e.numel() != 1) return std::nullopt;
      if (checked_numel(shapes[i], "constant_folding") <= kMaxFoldElements) {
        out.push_back(dst_.constant(repeat(e, shapes[i])));
      } else {
        out.push_back(dst_.apply1("broadcast_to", {dst_.constant(e)}, {{"shape", shapes[i]}}));
      }
    }
    return out;
  }

  Rewriter& rw_;
  Graph& dst_;
  const Evaluator& evaluate_;
};

}  // namespace

std::unique_ptr<Graph> constant_folding(const Graph& g, const PassContext& ctx) {
  Rewriter rw(g);
  Folder folder(rw, ctx.evaluate);
  for (const Node& n : g.nodes())
    if (!folder.fold(n)) rw.copy(n);
  if (!rw.changed()) return nullptr;
  return rw.finish();
}

}  // namespace rlx::passes
