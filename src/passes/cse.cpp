// Common-subexpression elimination: one forward walk keeps a table of the nodes emitted so
// far, keyed by (op, mapped inputs, attributes, subgraph pointers); a node whose key is
// already there is not emitted, its outputs map to the earlier node's. Constants are
// nodes like any other, so equal literals (dtype, shape, bytes) merge too. Attributes
// compare bitwise, so 0.0 and -0.0 stay apart (and a NaN matches the same NaN); a
// literal's hash samples its bytes, so big weights are cheap to key.
//
// Never merged: random draws and side effects (also inside subgraphs), and checkpoints.
//
// Rematerialisation. grad with Remat::checkpoints copies each forward segment (the nodes
// between two `checkpoint` nodes) again after the whole forward, just before that
// segment's backward, so that the forward's activations can die early. The copies have
// the same ops and inputs as the originals, so plain CSE would merge them straight back
// and undo the memory saving. The rule here: CSE never merges across a checkpoint. Each
// node's epoch is the number of checkpoint nodes before it in the node order, and it is
// part of the key. The recomputed segments all come after the last checkpoint, so they
// never share an epoch with the forward values they recompute (segment s < last); merges
// within a segment, and within the backward, still happen. Without checkpoints every
// node is in epoch 0 and nothing is lost.
#include <cstring>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include "passes/cleanup.h"
#include "passes/rewrite.h"

namespace rlx::passes {

namespace {

uint64_t mix(uint64_t h, const void* p, size_t n) { return fnv1a64(p, n, h); }

template <class T>
uint64_t mix(uint64_t h, const T& v) {
  return mix(h, &v, sizeof v);
}

// A literal's hash reads its type and a sample of its bytes, so that big weights cost
// little; equal hashes are confirmed by comparing every byte.
uint64_t literal_hash(uint64_t h, const Literal& lit) {
  h = mix(h, lit.dtype());
  for (int64_t d : lit.shape()) h = mix(h, d);
  std::span<const uint8_t> b = lit.bytes();
  constexpr size_t kSample = 64;
  if (b.size() <= 4 * kSample) return mix(h, b.data(), b.size());
  size_t step = b.size() / kSample;
  for (size_t off = 0; off < b.size(); off += step) h = mix(h, b[off]);
  return mix(mix(h, b.data(), kSample), b.data() + b.size() - kSample, kSample);
}

uint64_t attrs_hash(const Attrs& attrs) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& [key, value] : attrs) {
    h = mix(h, key.data(), key.size());
    h = mix(h, value.kind());
    std::visit(
        [&h](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            h = mix(h, v.data(), v.size());
          } else if constexpr (std::is_same_v<T, IntList> || std::is_same_v<T, FloatList>) {
            h = mix(h, v.data(), v.size() * sizeof(v[0]));
          } else if constexpr (std::is_same_v<T, Literal>) {
            h = literal_hash(h, v);
          } else {
            h = mix(h, v);
          }
        },
        value.variant());
  }
  return h;
}

// Bitwise equality: 0.0 and -0.0 differ, a NaN equals the same NaN.
bool same_value(const AttrValue& a, const AttrValue& b) {
  if (a.kind() != b.kind()) return false;
  return std::visit(
      [&b](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = *b.get_if<T>();
        if constexpr (std::is_same_v<T, double>) {
          return std::memcmp(&x, &y, sizeof x) == 0;
        } else if constexpr (std::is_same_v<T, FloatList>) {
          return x.size() == y.size() &&
                 (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
        } else {
          return x == y;  // Literal compares dtype, shape and bytes
        }
      },
      a.variant());
}

bool same_attrs(const Attrs& a, const Attrs& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || !same_value(i->second, j->second)) return false;
  return true;
}

struct Key {
  const OpDef* op;
  int32_t epoch;
  uint64_t attrs_hash;
  std::vector<int32_t> inputs;  // ids in the graph being built
  std::vector<const Graph*> subgraphs;
  const Attrs* attrs;  // the source node's, compared exactly on a hash match

  bool operator==(const Key& o) const {
    return op == o.op && epoch == o.epoch && attrs_hash == o.attrs_hash && inputs == o.inputs &&
           subgraphs == o.subgraphs && same_attrs(*attrs, *o.attrs);
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = mix(mix(k.attrs_hash, k.op), k.epoch);
    if (!k.inputs.empty()) h = mix(h, k.inputs.data(), k.inputs.size() * sizeof(int32_t));
    for (const Graph* g : k.subgraphs) h = mix(h, g);
    return size_t(h);
  }
};

bool mergeable(const Node& n) {
  return !n.outputs.empty() && !n.op->has(Trait::checkpoint) && !has_trait_deep(n, Trait::random) &&
         !has_trait_deep(n, Trait::side_effect);
}

}  // namespace

std::unique_ptr<Graph> cse(const Graph& g, const PassContext&) {
  Rewriter rw(g);
  std::unordered_map<Key, const Node*, KeyHash> seen;
  seen.reserve(g.nodes().size());
  int32_t epoch = 0;
  for (const Node& n : g.nodes()) {
    if (!mergeable(n)) {
      rw.copy(n);
      if (n.op->has(Trait::checkpoint)) ++epoch;
      continue;
    }
    Key key{n.op, epoch, attrs_hash(n.attrs), {}, {}, &n.attrs};
    key.inputs.reserve(n.inputs.size());
    for (Value v : n.inputs) key.inputs.push_back(rw(v).id);
    if (key.inputs.size() == 2 && n.op->has(Trait::commutative) && key.inputs[0] > key.inputs[1])
      std::swap(key.inputs[0], key.inputs[1]);
    for (const SubgraphPtr& s : n.subgraphs) key.subgraphs.push_back(s.get());
    auto [it, added] = seen.try_emplace(std::move(key), &n);
    if (added) {
      rw.copy(n);
    } else {
      rw.replace(n, rw(it->second->outputs));
    }
  }
  if (!rw.changed()) return nullptr;
  return rw.finish();
}

}  // namespace rlx::passes
