#include "passes/rewrite.h"

#include <cstring>

namespace rlx::passes {

UseInfo::UseInfo(const Graph& g) : users(g.num_values()), is_output(g.num_values(), 0) {
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (Value v : nodes[i].inputs) users[size_t(v.id)].push_back(int32_t(i));
  for (const Output& o : g.outputs()) is_output[size_t(o.value.id)] = 1;
}

const Node* producer_is(const Graph& g, Value v, std::string_view name) {
  const Node* n = g.producer(v);
  return n && n->op_name() == name ? n : nullptr;
}

const Literal* constant_of(const Graph& g, Value v) {
  const Node* n = producer_is(g, v, "constant");
  return n ? &n->attrs.get_tensor("value") : nullptr;
}

std::optional<double> splat_value(const Graph& g, Value v) {
  const Literal* lit = constant_of(g, v);
  if (!lit || lit->numel() == 0) return std::nullopt;
  // Compare bytes, so a splat of NaN or -0.0 is recognised exactly.
  std::span<const uint8_t> b = lit->bytes();
  size_t es = dtype_size(lit->dtype());
  for (size_t off = es; off < b.size(); off += es)
    if (std::memcmp(b.data(), b.data() + off, es) != 0) return std::nullopt;
  if (is_complex(lit->dtype())) {  // a real number re + 0i, or none
    ComplexValue z = load_complex(lit->dtype(), b.data());
    return z.im == 0 ? std::optional<double>(z.re) : std::nullopt;
  }
  return lit->to_doubles()[0];
}

bool has_trait_deep(const Node& n, Trait t) {
  if (n.op->has(t)) return true;
  for (const SubgraphPtr& sub : n.subgraphs)
    for (const Node& m : sub->nodes())
      if (has_trait_deep(m, t)) return true;
  return false;
}

Rewriter::Rewriter(const Graph& src) : src_(src), dst_(std::make_unique<Graph>(src.name())) {
  map_ = detail::copy_args(src, *dst_);
}

std::vector<Value> Rewriter::operator()(const std::vector<Value>& src_values) const {
  return detail::mapped_all(map_, src_values);
}

std::vector<Value> Rewriter::copy(const Node& n) { return detail::copy_node(n, *dst_, map_); }

void Rewriter::replace(const Node& n, const std::vector<Value>& with) {
  for (size_t i = 0; i < n.outputs.size() && i < with.size(); ++i) replace(n.outputs[i], with[i]);
}

std::unique_ptr<Graph> Rewriter::finish() {
  for (const Output& o : src_.outputs()) dst_->output((*this)(o.value), o.name);
  return std::move(dst_);
}

std::unique_ptr<Graph> rewrite_nodes(const Graph& src, const NodeRewrite& fn) {
  Rewriter rw(src);
  for (const Node& n : src.nodes())
    if (!fn(n, rw)) rw.copy(n);
  if (!rw.changed()) return nullptr;
  return rw.finish();
}

}  // namespace rlx::passes
