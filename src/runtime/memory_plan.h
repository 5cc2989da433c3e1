// The memory planner behind Program: liveness of every value of a lowered graph, in-place
// reuse of inputs that die at an elementwise node, and offsets in one arena per run.
//
// A value's storage is one of: none (a graph argument, or an output its kernel makes,
// usually a view of an input), the arena (an intermediate whose size is known once the
// dims are bound), or fresh memory (outputs, what views of outputs alias, sizes known
// only at run time). Views are not copies, so the storage they alias stays live until
// their own last use; a kernel that makes its outputs may alias any of its inputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rlx/graph.h"
#include "rlx/kernel.h"
#include "rlx/session.h"

namespace rlx::detail {

// What liveness needs of a lowered graph, independent of the sizes of its dims.
struct Liveness {
  std::vector<int32_t> def;   // per value: the producing node (-1: an argument)
  std::vector<int32_t> end;   // per value: the last node reading it or a view of it
                              // (the node count for outputs and what they alias)
  std::vector<bool> escapes;  // per value: returned to the caller, itself or through a view
  std::vector<bool> made;     // per value: made by its kernel (no storage planned)
  // Per value: the value whose storage it is or views (itself for the values that own
  // storage; -1 when a kernel-made output may alias several).
  std::vector<int32_t> root;
};

Liveness analyze_liveness(const Graph& g, std::span<const Kernel* const> kernels);

// How intervals are packed into the arena. by_size is the one used: on the demo GPT's
// train step it reaches the largest live set, where by_time needs a few percent more;
// by_time plans faster, but a plan is made once per binding (bench/RESULTS.md, "Arena
// packing"). RLX_ARENA_PACKING=time selects by_time, for comparison (rlx-bench-memory
// prints both).
enum class Packing : uint8_t {
  by_size,  // largest first, each at the best-fitting gap among the blocks live with it
  by_time,  // in order of definition, best fit on a free list (a malloc simulation)
};

// A block of arena memory needed from node `start` through node `end` (inclusive).
struct Block {
  int32_t start = 0, end = 0;
  size_t bytes = 0;
  size_t offset = 0;  // set by pack_blocks
};

// Sets every block's offset (64-byte aligned) so that blocks whose intervals intersect
// do not overlap in memory; returns the arena size.
size_t pack_blocks(std::vector<Block>& blocks, Packing packing);

// Where each value lives for one binding of the dims.
struct MemoryPlan {
  std::vector<int64_t> offset;   // per value: byte offset in the arena (-1: not there)
  std::vector<int32_t> inplace;  // per value: the input index whose storage it takes (-1)
  size_t arena_bytes = 0;
  MemoryStats stats;
};

// `shapes` and `dynamic` are the per-node output shapes of the binding (Plan's); a
// dynamic node's outputs are sized at run time. `args` are the arguments' types.
// `outputs_in_arena` places the values that escape the run (its outputs) in the arena
// too, in blocks of their own that nothing reuses (for a CUDA Graph, whose addresses are
// fixed when it is captured).
MemoryPlan plan_memory(const Graph& g, std::span<const Kernel* const> kernels, const Liveness& live,
                       std::span<const TensorType> args,
                       const std::vector<std::vector<std::vector<int64_t>>>& shapes,
                       const std::vector<bool>& dynamic, Packing packing = Packing::by_size,
                       bool outputs_in_arena = false);

}  // namespace rlx::detail
