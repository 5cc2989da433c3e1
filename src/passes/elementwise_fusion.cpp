// elementwise_fusion: maximal regions of elementwise ops become one fused_elementwise node
// (ops/region.h), which the CPU runs as one tiled loop: each input read once, each output
// written once, no intermediate tensor in memory.
//
// Regions grow in one walk over the nodes in order. An elementwise node (Trait::
// elementwise, not random or side-effecting) whose output has a region's shape joins the
// region of an input's producer, and merges the other such regions it reads; a reduction
// (Trait::reduction over trailing axes) of a region-shaped member ends its region there. A
// join that would make a cycle (a value outside the region that depends on the region and
// feeds it) is refused: a backward search over the nodes (regions taken as one node) that
// stops at nodes older than the region and gives up, refusing, after kSearchBudget edges,
// which keeps the pass near-linear. Values read outside a region become extra outputs;
// scalar constants and broadcasts of inputs (broadcast_to / expand_dims / broadcast_like)
// are copied into the body, so a broadcast is read in place rather than materialised. A
// region of one op is left alone, and so is one the device's kernel declines. The new
// graph is emitted in the original order as far as dependencies allow (a region goes where
// its first member was, after what it needs).
#include <algorithm>
#include <map>
#include <tuple>

#include "ops/region.h"
#include "passes/families.h"
#include "passes/rewrite.h"
#include "rlx/kernel.h"
#include "rlx/session.h"

namespace rlx::passes {

namespace {

using detail::is_region_reduction;
using detail::is_region_view_op;
using detail::kRegionOp;
using detail::trailing_reduced;

// Edges a cycle search may look at before it gives up (and refuses the join).
constexpr int kSearchBudget = 2048;

bool has_unknown_dim(const Shape& s) {
  return std::any_of(s.begin(), s.end(), [](const Dim& d) { return d.is_unknown(); });
}

bool pure(const OpDef& op) {
  return !op.has(Trait::random) && !op.has(Trait::side_effect) && !op.has(Trait::control);
}

// Whether the device's fused kernel takes a node of this kind (asked once per op and
// dtypes, with a one-node body).
class Support {
 public:
  Support(const KernelRegistry& kernels, DeviceKind device) : kernels_(kernels), device_(device) {}

  bool node(const Node& n) {
    Key key{n.op, {}};
    for (Value v : n.inputs) key.second.push_back(v.dtype());
    for (Value v : n.outputs) key.second.push_back(v.dtype());
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    auto body = std::make_shared<Graph>("probe");
    std::vector<Value> args;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      args.push_back(body->input(str_cat("x", i), n.inputs[i].type()));
    bool ok = false;
    try {
      for (Value v : body->apply(*n.op, args, n.attrs)) body->output(v);
      ok = region(body);
    } catch (const Error&) {
      ok = false;
    }
    cache_.emplace(std::move(key), ok);
    return ok;
  }

  bool region(const SubgraphPtr& body) {
    std::vector<TensorType> in, out;
    for (const Arg& a : body->args()) in.push_back(a.value.type());
    for (const Output& o : body->outputs()) out.push_back(o.value.type());
    const OpDef& op = OpRegistry::global().get(kRegionOp);
    Attrs none;
    SubgraphPtr subs[] = {body};
    return kernels_.find(KernelQuery{op, none, in, out, subs}, device_) != nullptr;
  }

 private:
  using Key = std::pair<const OpDef*, std::vector<DType>>;
  const KernelRegistry& kernels_;
  DeviceKind device_;
  std::map<Key, bool> cache_;
};

struct Region {
  int parent;
  Shape shape;
  int lo, hi;            // first and last member (node indices)
  int64_t reduced = -1;  // trailing axes its reductions fold (-1: none yet)
  std::vector<int> members;
};

// A region that becomes a node: its body, the source values its args stand for, and the
// member values it outputs.
struct Fused {
  std::vector<int> members;
  SubgraphPtr body;
  std::vector<Value> sources, outputs;
};

class Fusion {
 public:
  Fusion(const Graph& g, Support& support)
      : g_(g),
        nodes_(g.nodes()),
        uses_(g),
        support_(support),
        reg_(nodes_.size(), -1),
        reduction_(nodes_.size(), 0),
        node_stamp_(nodes_.size(), 0) {}

  std::unique_ptr<Graph> run() {
    for (size_t i = 0; i < nodes_.size(); ++i) visit(int(i));
    build();
    if (fused_.empty()) return nullptr;
    return emit();
  }

 private:
  // ---- forming regions ---------------------------------------------------------------

  int find(int r) {
    while (regions_[size_t(r)].parent != r) {
      regions_[size_t(r)].parent = regions_[size_t(regions_[size_t(r)].parent)].parent;
      r = regions_[size_t(r)].parent;
    }
    return r;
  }
  int region_of(int node) { return reg_[size_t(node)] < 0 ? -1 : find(reg_[size_t(node)]); }
  int producer(Value v) const { return g_.info(v).node; }

  // Strings (cast to / from text, eq of handles) and complex numbers run in their own
  // kernels (the regions compute in real arithmetic).
  static bool has_strings(const Node& n) {
    auto own = [](Value v) { return is_string(v.dtype()) || is_complex(v.dtype()); };
    for (Value v : n.inputs)
      if (own(v)) return true;
    return own(n.outputs[0]);
  }

  bool fusible(const Node& n) {
    return n.op->has(Trait::elementwise) && pure(*n.op) && n.subgraphs.empty() &&
           n.outputs.size() == 1 && !n.inputs.empty() && !has_strings(n) &&
           !has_unknown_dim(n.outputs[0].shape()) && support_.node(n);
  }

  void visit(int i) {
    const Node& n = nodes_[size_t(i)];
    if (is_region_reduction(*n.op) && pure(*n.op)) return reduction(i);
    if (!fusible(n)) return;
    const Shape& shape = n.outputs[0].shape();
    std::vector<int> candidates;
    for (Value v : n.inputs) {
      int p = producer(v);
      if (p < 0 || reduction_[size_t(p)]) continue;
      int r = region_of(p);
      if (r >= 0 && regions_[size_t(r)].shape == shape &&
          std::find(candidates.begin(), candidates.end(), r) == candidates.end())
        candidates.push_back(r);
    }
    int target = -1;
    for (int r : candidates) {
      r = find(r);
      if (target < 0) {
        if (can_join(n, r)) target = r;
      } else if (r != target && can_merge(n, target, r)) {
        target = merge(target, r);
      }
    }
    if (target < 0) {
      target = int(regions_.size());
      regions_.push_back({target, shape, i, i, -1, {}});
      region_stamp_.push_back(0);
    }
    add(target, i);
  }

  // A reduction over trailing axes of a region member (of the region's shape) ends it.
  void reduction(int i) {
    const Node& n = nodes_[size_t(i)];
    if (n.outputs.size() != 1 || uses_.count(n.outputs[0]) == 0) return;
    int p = producer(n.inputs[0]);
    if (p < 0 || reduction_[size_t(p)]) return;
    int r = region_of(p);
    if (r < 0) return;
    Region& R = regions_[size_t(r)];
    std::optional<int64_t> k = trailing_reduced(n.attrs, n.inputs[0].rank());
    if (!k || R.shape != n.inputs[0].shape() || (R.reduced >= 0 && R.reduced != *k) ||
        !support_.node(n))
      return;
    R.reduced = *k;
    reduction_[size_t(i)] = 1;
    add(r, i);
  }

  void add(int r, int i) {
    Region& R = regions_[size_t(r)];
    R.members.push_back(i);
    R.hi = std::max(R.hi, i);
    R.lo = std::min(R.lo, i);
    reg_[size_t(i)] = r;
  }

  // Merges region b into a (the smaller list into the larger); returns the root.
  int merge(int a, int b) {
    if (regions_[size_t(a)].members.size() < regions_[size_t(b)].members.size()) std::swap(a, b);
    Region& A = regions_[size_t(a)];
    Region& B = regions_[size_t(b)];
    A.members.insert(A.members.end(), B.members.begin(), B.members.end());
    B.members.clear();
    A.lo = std::min(A.lo, B.lo);
    A.hi = std::max(A.hi, B.hi);
    A.reduced = std::max(A.reduced, B.reduced);
    B.parent = a;
    return a;
  }

  // Whether node n may join region r: none of its other inputs depends on r.
  bool can_join(const Node& n, int r) {
    for (Value v : n.inputs) {
      int p = producer(v);
      if (p < 0) continue;
      if (region_of(p) == r) {
        if (reduction_[size_t(p)]) return false;
        continue;
      }
      if (depends_on(p, r, -1)) return false;
    }
    return true;
  }

  // Whether node n may join region a and bring region b along: no path between a and b,
  // or from either to n, runs outside them; a reduced value of one is not read by the
  // other; and their reductions agree.
  bool can_merge(const Node& n, int a, int b) {
    const Region& A = regions_[size_t(a)];
    const Region& B = regions_[size_t(b)];
    if (A.reduced >= 0 && B.reduced >= 0 && A.reduced != B.reduced) return false;
    for (Value v : n.inputs) {
      int p = producer(v);
      if (p < 0) continue;
      int r = region_of(p);
      if (r == a || r == b) {
        if (reduction_[size_t(p)]) return false;
        continue;
      }
      if (depends_on(p, a, b)) return false;
    }
    return !reads_through(b, a) && !reads_through(a, b);
  }

  // Whether a member of `from` reads a reduced value of `other`, or a value outside both
  // that depends on `other`. Past the search budget (a very large region): "yes".
  bool reads_through(int from, int other) {
    int budget = kSearchBudget;
    for (int m : regions_[size_t(from)].members) {
      for (Value v : nodes_[size_t(m)].inputs) {
        if (--budget < 0) return true;
        int p = producer(v);
        if (p < 0) continue;
        int r = region_of(p);
        if (r == from) continue;
        if (r == other) {
          if (reduction_[size_t(p)]) return true;
          continue;
        }
        if (depends_on(p, other, -1)) return true;
      }
    }
    return false;
  }

  // Whether node p depends on region a (or b, when b >= 0), walking back over units (a
  // region counts as one node) and skipping units older than the targets. Gives up with
  // "yes" past the search budget.
  bool depends_on(int p, int a, int b) {
    int lo = regions_[size_t(a)].lo;
    if (b >= 0) lo = std::min(lo, regions_[size_t(b)].lo);
    ++stamp_;
    int budget = kSearchBudget;
    stack_.clear();
    stack_.push_back(p);
    node_stamp_[size_t(p)] = stamp_;
    while (!stack_.empty()) {
      int q = stack_.back();
      stack_.pop_back();
      int r = region_of(q);
      if (r >= 0 && (r == a || r == b)) return true;
      const int* members = &q;  // a node outside any region is a unit of one
      size_t count = 1;
      if (r >= 0) {
        if (region_stamp_[size_t(r)] == stamp_) continue;
        region_stamp_[size_t(r)] = stamp_;
        if (regions_[size_t(r)].hi < lo) continue;
        members = regions_[size_t(r)].members.data();
        count = regions_[size_t(r)].members.size();
      } else if (q < lo) {
        continue;
      }
      for (size_t k = 0; k < count; ++k)
        for (Value v : nodes_[size_t(members[k])].inputs) {
          if (--budget < 0) return true;
          int x = producer(v);
          if (x < 0 || node_stamp_[size_t(x)] == stamp_) continue;
          node_stamp_[size_t(x)] = stamp_;
          stack_.push_back(x);
        }
    }
    return false;
  }

  // ---- bodies ----------------------------------------------------------------------

  bool member_of(int node, int r) { return node >= 0 && region_of(node) == r; }

  // A body under construction for region r: source values become args, except scalar
  // constants and broadcasts of outside values, which are copied in.
  struct BodyBuilder {
    Fusion& f;
    int r;
    std::shared_ptr<Graph> body = std::make_shared<Graph>("body");
    std::map<int32_t, Value> inner;       // source value id -> body value
    std::map<int32_t, Value> data_inner;  // the same for data of copied broadcasts
    std::map<int32_t, Value> args;        // source value id -> body arg
    std::vector<Value> sources;
    std::vector<int> pulled;  // nodes copied into the body

    Value arg(Value v) {
      auto it = args.find(v.id);
      if (it != args.end()) return it->second;
      Value a = body->input(str_cat("x", sources.size()), v.type());
      sources.push_back(v);
      return args[v.id] = a;
    }

    // An outside value read by a member, or (as_data) as the data of a copied broadcast,
    // which must be an arg or another broadcast.
    Value read(Value v, bool as_data = false) {
      std::map<int32_t, Value>& cache = as_data ? data_inner : inner;
      auto it = cache.find(v.id);
      if (it != cache.end()) return it->second;
      int p = f.producer(v);
      if (p >= 0 && !f.member_of(p, r)) {
        const Node& n = f.nodes_[size_t(p)];
        const Literal* lit = constant_of(f.g_, v);
        if (lit && lit->numel() == 1 && !as_data) {
          pulled.push_back(p);
          return cache[v.id] = body->constant(*lit);
        }
        if (is_region_view_op(n.op_name()) && n.outputs.size() == 1 && outside_source(n)) {
          std::vector<Value> ins{read(n.inputs[0], true)};
          for (size_t i = 1; i < n.inputs.size(); ++i) {
            Value like = n.inputs[i];
            ins.push_back(f.member_of(f.producer(like), r) ? inner.at(like.id) : arg(like));
          }
          pulled.push_back(p);
          return cache[v.id] = body->apply(*n.op, ins, n.attrs)[0];
        }
      }
      return arg(v);
    }

    // A broadcast whose data (through any chain of broadcasts) comes from outside r.
    bool outside_source(const Node& n) {
      int p = f.producer(n.inputs[0]);
      if (p < 0) return true;
      if (f.member_of(p, r)) return false;
      const Node& src = f.nodes_[size_t(p)];
      return !is_region_view_op(src.op_name()) || outside_source(src);
    }
  };

  // Builds each region's body; regions the kernel declines are dropped.
  void build() {
    std::vector<int> roots;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      int r = region_of(int(i));
      if (r >= 0 && regions_[size_t(r)].lo == int(i) && regions_[size_t(r)].members.size() >= 2)
        roots.push_back(r);
    }
    fused_of_.assign(nodes_.size(), -1);
    std::vector<std::vector<int>> pulled;
    for (int r : roots) {
      std::vector<int> members = regions_[size_t(r)].members;
      std::sort(members.begin(), members.end());
      BodyBuilder b{*this, r};
      std::vector<Value> outs;
      for (int m : members) {
        const Node& n = nodes_[size_t(m)];
        std::vector<Value> ins;
        for (Value v : n.inputs)
          ins.push_back(member_of(producer(v), r) ? b.inner.at(v.id) : b.read(v));
        Value out = b.body->apply(*n.op, ins, n.attrs)[0];
        b.inner[n.outputs[0].id] = out;
        if (read_outside(n.outputs[0], r)) {
          b.body->output(out);
          outs.push_back(n.outputs[0]);
        }
      }
      if (outs.empty() || !support_.region(b.body)) continue;
      for (int m : members) fused_of_[size_t(m)] = int(fused_.size());
      fused_.push_back({std::move(members), b.body, std::move(b.sources), std::move(outs)});
      pulled.push_back(std::move(b.pulled));
    }
    // A copied-in node is dropped when every reader is a region that copied it (or a
    // dropped node), and it is no graph output and no region's source.
    std::vector<std::vector<int>> pulled_by(nodes_.size());
    for (size_t f = 0; f < pulled.size(); ++f)
      for (int p : pulled[f]) pulled_by[size_t(p)].push_back(int(f));
    std::vector<uint8_t> source(nodes_.size(), 0);
    for (const Fused& fu : fused_)
      for (Value v : fu.sources)
        if (int p = producer(v); p >= 0) source[size_t(p)] = 1;
    dropped_.assign(nodes_.size(), 0);
    for (size_t i = nodes_.size(); i-- > 0;) {
      Value out = nodes_[i].outputs.empty() ? Value{} : nodes_[i].outputs[0];
      if (pulled_by[i].empty() || source[i] || uses_.is_output[size_t(out.id)]) continue;
      bool drop = true;
      for (int u : uses_.users[size_t(out.id)])
        drop = drop && (fused_of_[size_t(u)] >= 0 || dropped_[size_t(u)]);
      dropped_[i] = drop;
    }
  }

  bool read_outside(Value v, int r) {
    if (uses_.is_output[size_t(v.id)]) return true;
    for (int u : uses_.users[size_t(v.id)])
      if (!member_of(u, r)) return true;
    return false;
  }

  // ---- emitting ----------------------------------------------------------------------

  // The nodes a unit (a node, or fused region f when f >= 0) needs first.
  std::vector<int> needs(int node, int f) const {
    std::vector<int> out;
    auto add_value = [&](Value v) {
      int p = g_.info(v).node;
      if (p >= 0) out.push_back(p);
    };
    if (f >= 0) {
      for (Value v : fused_[size_t(f)].sources) add_value(v);
    } else {
      for (Value v : nodes_[size_t(node)].inputs) add_value(v);
    }
    return out;
  }

  std::unique_ptr<Graph> emit() {
    Rewriter rw(g_);
    std::vector<uint8_t> done_node(nodes_.size(), 0), done_fused(fused_.size(), 0);
    auto done = [&](int node) {
      int f = fused_of_[size_t(node)];
      return f >= 0 ? done_fused[size_t(f)] != 0 : done_node[size_t(node)] != 0;
    };
    struct Frame {
      int node;
      std::vector<int> needs;
      size_t next = 0;
    };
    std::vector<Frame> stack;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (dropped_[i] || done(int(i))) continue;
      stack.push_back({int(i), needs(int(i), fused_of_[i])});
      while (!stack.empty()) {
        Frame& top = stack.back();
        if (top.next < top.needs.size()) {
          int d = top.needs[top.next++];
          if (!done(d) && !dropped_[size_t(d)])
            stack.push_back({d, needs(d, fused_of_[size_t(d)])});
          continue;
        }
        int node = top.node, f = fused_of_[size_t(node)];
        stack.pop_back();
        if (done(node)) continue;
        if (f < 0) {
          rw.copy(nodes_[size_t(node)]);
          done_node[size_t(node)] = 1;
        } else {
          const Fused& fu = fused_[size_t(f)];
          std::vector<Value> outs = rw.dst().apply(kRegionOp, rw(fu.sources), {}, {fu.body});
          for (size_t k = 0; k < outs.size(); ++k) rw.replace(fu.outputs[k], outs[k]);
          done_fused[size_t(f)] = 1;
        }
      }
    }
    rw.mark_changed();
    return rw.finish();
  }

  const Graph& g_;
  const std::vector<Node>& nodes_;
  UseInfo uses_;
  Support& support_;
  std::vector<int> reg_;            // per node: its region (before find), or -1
  std::vector<uint8_t> reduction_;  // per node: a reduction member
  std::vector<Region> regions_;
  std::vector<int> node_stamp_, region_stamp_, stack_;
  int stamp_ = 0;
  std::vector<Fused> fused_;
  std::vector<int> fused_of_;     // per node: its fused region, or -1
  std::vector<uint8_t> dropped_;  // per node: copied into every region that reads it
};

std::unique_ptr<Graph> elementwise_fusion(const Graph& g, const PassContext& ctx) {
  const KernelRegistry& kernels = ctx.kernels ? *ctx.kernels : KernelRegistry::global();
  if (!kernels.has(kRegionOp, ctx.device.kind)) return nullptr;
  Support support(kernels, ctx.device.kind);
  return Fusion(g, support).run();
}

}  // namespace

void register_elementwise_fusion(PassRegistry& r) {
  r.add({"elementwise_fusion", elementwise_fusion,
         "regions of elementwise ops (and a trailing reduction) become one fused_elementwise"});
}

}  // namespace rlx::passes
