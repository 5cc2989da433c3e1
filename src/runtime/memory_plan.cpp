#include "runtime/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>

#include "rlx/error.h"
#include "rlx/op.h"
#include "rlx/shape.h"

namespace rlx::detail {

namespace {

constexpr size_t kAlign = 64;  // as Buffer::allocate_host: every slot suits any vector load

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

bool makes_outputs(const Kernel* k) { return k && k->flags.makes_outputs; }

bool overlap(const Block& a, const Block& b) { return a.start <= b.end && b.start <= a.end; }

// Largest first: each block goes to the smallest gap that fits it between the blocks
// already placed whose intervals meet its own, else above them all.
size_t pack_by_size(std::vector<Block>& blocks) {
  std::vector<int32_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return blocks[a].bytes != blocks[b].bytes ? blocks[a].bytes > blocks[b].bytes
                                              : blocks[a].start < blocks[b].start;
  });
  std::vector<int32_t> placed;  // by offset
  size_t top = 0;
  for (int32_t i : order) {
    Block& x = blocks[size_t(i)];
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, low = 0;
    for (int32_t p : placed) {
      const Block& y = blocks[size_t(p)];
      if (!overlap(x, y)) continue;
      if (y.offset >= low && y.offset - low >= x.bytes && y.offset - low < best_gap) {
        best = low;
        best_gap = y.offset - low;
      }
      low = std::max(low, y.offset + y.bytes);
    }
    x.offset = best != SIZE_MAX ? best : low;
    top = std::max(top, x.offset + x.bytes);
    auto at = std::upper_bound(placed.begin(), placed.end(), x.offset, [&](size_t off, int32_t p) {
      return off < blocks[size_t(p)].offset;
    });
    placed.insert(at, i);
  }
  return top;
}

// In order of definition, as an allocator would see them: blocks whose interval has
// ended go back to a free list (merged with free neighbours); each new block takes the
// smallest free range that fits, else grows the arena (from a free range at its top).
size_t pack_by_time(std::vector<Block>& blocks) {
  std::vector<int32_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return blocks[a].start < blocks[b].start; });
  std::map<size_t, size_t> free_at;            // offset -> bytes
  std::set<std::pair<size_t, size_t>> by_fit;  // (bytes, offset)
  auto take = [&](std::map<size_t, size_t>::iterator it) {
    by_fit.erase({it->second, it->first});
    free_at.erase(it);
  };
  auto give = [&](size_t off, size_t bytes) {
    auto next = free_at.lower_bound(off);
    if (next != free_at.end() && off + bytes == next->first) {
      bytes += next->second;
      take(next);
    }
    auto prev = free_at.lower_bound(off);
    if (prev != free_at.begin() && std::prev(prev)->first + std::prev(prev)->second == off) {
      --prev;
      off = prev->first;
      bytes += prev->second;
      take(prev);
    }
    free_at.emplace(off, bytes);
    by_fit.emplace(bytes, off);
  };
  using Live = std::pair<int32_t, int32_t>;  // (end, block)
  std::priority_queue<Live, std::vector<Live>, std::greater<>> live;
  size_t top = 0;
  for (int32_t i : order) {
    Block& x = blocks[size_t(i)];
    while (!live.empty() && live.top().first < x.start) {
      const Block& done = blocks[size_t(live.top().second)];
      give(done.offset, done.bytes);
      live.pop();
    }
    if (auto fit = by_fit.lower_bound({x.bytes, 0}); fit != by_fit.end()) {
      auto [bytes, off] = *fit;
      take(free_at.find(off));
      if (bytes > x.bytes) give(off + x.bytes, bytes - x.bytes);
      x.offset = off;
    } else if (!free_at.empty() &&
               std::prev(free_at.end())->first + std::prev(free_at.end())->second == top) {
      x.offset = std::prev(free_at.end())->first;
      take(std::prev(free_at.end()));
      top = x.offset + x.bytes;
    } else {
      x.offset = top;
      top += x.bytes;
    }
    live.emplace(x.end, i);
  }
  return top;
}

// Shapes a file makes up can claim more than any machine has: past 2^60 bytes in all, the
// plan is a ValueError, so that no size, sum or offset below can wrap.
constexpr uint64_t kMaxPlanBytes = uint64_t{1} << 60;

// A value's bytes, added to `total`.
size_t bytes_of(DType dtype, const std::vector<int64_t>& shape, uint64_t& total) {
  int64_t n = checked_numel(shape, "memory plan");
  if (uint64_t(n) <= kMaxPlanBytes) {
    size_t b = dtype_nbytes(dtype, n);  // at most 8 * 2^60
    if (b <= kMaxPlanBytes - total) {
      total += b;
      return b;
    }
  }
  fail<ValueError>("memory plan", "expected at most 2^60 bytes of values in all, got ",
                   dtype_name(dtype), ints_str(shape), " after ", total, " bytes");
}

}  // namespace

Liveness analyze_liveness(const Graph& g, std::span<const Kernel* const> kernels) {
  const auto& nodes = g.nodes();
  size_t nv = g.num_values();
  auto last = int32_t(nodes.size());
  Liveness l;
  l.def.assign(nv, -1);
  l.end.assign(nv, -1);
  l.escapes.assign(nv, false);
  l.made.assign(nv, false);
  l.root.resize(nv);
  std::iota(l.root.begin(), l.root.end(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (Value v : nodes[i].inputs) l.end[size_t(v.id)] = int32_t(i);
    for (Value v : nodes[i].outputs) {
      l.def[size_t(v.id)] = l.end[size_t(v.id)] = int32_t(i);
      l.made[size_t(v.id)] = makes_outputs(kernels[i]);
    }
  }
  for (const Output& o : g.outputs()) {
    l.end[size_t(o.value.id)] = last;
    l.escapes[size_t(o.value.id)] = true;
  }
  // A kernel that makes its outputs may return views of any input: those inputs stay
  // live (and are returned) as long as the outputs are. Backwards, so chains of views
  // carry through.
  for (size_t i = nodes.size(); i-- > 0;) {
    if (!makes_outputs(kernels[i])) continue;
    for (Value o : nodes[i].outputs)
      for (Value v : nodes[i].inputs) {
        l.end[size_t(v.id)] = std::max(l.end[size_t(v.id)], l.end[size_t(o.id)]);
        if (l.escapes[size_t(o.id)]) l.escapes[size_t(v.id)] = true;
      }
  }
  // Roots: a made output views the one storage its inputs share, not counting arguments
  // (never in the arena); -1 when they have several.
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!makes_outputs(kernels[i])) continue;
    int32_t root = -2, arg_root = -2;
    for (Value v : nodes[i].inputs) {
      int32_t r = l.root[size_t(v.id)];
      if (r >= 0 && l.def[size_t(r)] < 0) {
        arg_root = r;
      } else if (root == -2 || root == r) {
        root = r;
      } else {
        root = -1;
      }
    }
    if (root == -2) root = arg_root == -2 ? -1 : arg_root;
    for (Value o : nodes[i].outputs) l.root[size_t(o.id)] = root;
  }
  return l;
}

size_t pack_blocks(std::vector<Block>& blocks, Packing packing) {
  return packing == Packing::by_size ? pack_by_size(blocks) : pack_by_time(blocks);
}

MemoryPlan plan_memory(const Graph& g, std::span<const Kernel* const> kernels, const Liveness& live,
                       std::span<const TensorType> args,
                       const std::vector<std::vector<std::vector<int64_t>>>& shapes,
                       const std::vector<bool>& dynamic, Packing packing, bool outputs_in_arena) {
  const auto& nodes = g.nodes();
  size_t nv = g.num_values();
  MemoryPlan p;
  MemoryStats& s = p.stats;
  p.offset.assign(nv, -1);
  p.inplace.assign(nv, -1);

  // Sizes under this binding (unknown for the outputs of dynamic nodes).
  std::vector<const std::vector<int64_t>*> shape(nv, nullptr);
  std::vector<std::vector<int64_t>> arg_shapes(args.size());
  std::vector<size_t> bytes(nv, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = g.args()[i];
    arg_shapes[i] = static_sizes(args[i].shape, "memory plan");
    size_t v = size_t(a.value.id);
    shape[v] = &arg_shapes[i];
    bytes[v] = bytes_of(args[i].dtype, arg_shapes[i], total);
    (a.kind == ArgKind::input ? s.input_bytes : s.param_bytes) += bytes[v];
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (dynamic[i]) {
      s.dynamic += int64_t(nodes[i].outputs.size());
      continue;
    }
    for (size_t j = 0; j < nodes[i].outputs.size(); ++j) {
      Value v = nodes[i].outputs[j];
      shape[size_t(v.id)] = &shapes[i][j];
      bytes[size_t(v.id)] = bytes_of(v.dtype(), shapes[i][j], total);
    }
  }
  std::vector<bool> counted(nv, false);
  for (const Output& o : g.outputs()) {
    size_t v = size_t(o.value.id);
    if (counted[v] || !shape[v]) continue;
    counted[v] = true;
    s.output_bytes += bytes[v];
  }

  // Storage groups: a value that owns arena memory opens one; an output written over a
  // dying input joins that input's group. A group's interval ends with its last member.
  std::vector<Block> blocks;
  std::vector<int32_t> group(nv, -1);
  auto group_of = [&](Value v) {
    int32_t r = live.root[size_t(v.id)];
    return r < 0 ? -2 : group[size_t(r)];  // -2: may alias anything
  };
  // The input whose storage output o may take over at node i, or -1.
  auto reusable_input = [&](size_t i, Value o, const std::vector<int32_t>& taken) {
    const Node& n = nodes[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      Value v = n.inputs[k];
      int32_t gv = group_of(v);
      if (gv < 0 || blocks[size_t(gv)].end != int32_t(i) || !shape[size_t(v.id)]) continue;
      if (std::find(taken.begin(), taken.end(), gv) != taken.end()) continue;
      if (*shape[size_t(v.id)] != *shape[size_t(o.id)] ||
          dtype_size(v.dtype()) != dtype_size(o.dtype()) ||
          aligned(bytes[size_t(o.id)]) > blocks[size_t(gv)].bytes)
        continue;
      // Another input reading the same storage (a broadcast view of it, say) would see
      // the output's writes.
      bool clash = false;
      for (Value u : n.inputs)
        if (u.id != v.id && (group_of(u) == gv || group_of(u) == -2)) clash = true;
      if (!clash) return int32_t(k);
    }
    return -1;
  };
  std::vector<int32_t> taken;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    taken.clear();
    for (Value o : n.outputs) {
      size_t v = size_t(o.id);
      if (live.made[v]) {
        if (!n.op->has(Trait::control)) ++s.views;
        continue;
      }
      // Escaping values live to the end of the run (their liveness says so).
      if (!shape[v] || (live.escapes[v] && !outputs_in_arena)) continue;
      s.intermediate_bytes += bytes[v];
      if (bytes[v] == 0) continue;
      ++s.intermediates;
      int32_t k = kernels[i] && kernels[i]->flags.inplace ? reusable_input(i, o, taken) : -1;
      if (k >= 0) {
        int32_t gk = group_of(n.inputs[size_t(k)]);
        group[v] = gk;
        blocks[size_t(gk)].end = live.end[v];
        taken.push_back(gk);
        p.inplace[v] = k;
        ++s.inplace;
      } else {
        group[v] = int32_t(blocks.size());
        blocks.push_back({int32_t(i), live.end[v], aligned(bytes[v]), 0});
      }
    }
  }
  p.arena_bytes = pack_blocks(blocks, packing);
  s.arena_bytes = p.arena_bytes;
  // The largest live set, what a perfect packing would need.
  std::vector<int64_t> delta(nodes.size() + 2, 0);
  for (const Block& b : blocks) {
    delta[size_t(b.start)] += int64_t(b.bytes);
    delta[size_t(b.end) + 1] -= int64_t(b.bytes);
  }
  int64_t live_now = 0;
  for (int64_t d : delta) s.live_bytes = std::max(s.live_bytes, size_t(live_now += d));
  for (size_t v = 0; v < nv; ++v)
    if (group[v] >= 0) p.offset[v] = int64_t(blocks[size_t(group[v])].offset);
  return p;
}

}  // namespace rlx::detail
