// Machine code for runs of f32 region steps (region.cpp), generated with Xbyak.
//
// The tiled interpreter runs each step as its own loop over L1-resident tile buffers, so
// every step pays a load and a store per element, and each output is copied from its tile
// once more. A run of consecutive f32 steps whose ops are below becomes one loop that keeps
// its values in vector registers: each input is loaded once a vector, and only the values
// read after the run are stored, an output of the region straight to its tensor (streaming
// stores for large ones). The code is for the level the CPU kernels run at (rlx/cpu_isa.h):
// AVX-512 (16 lanes, a masked last vector) or AVX2 (8 lanes, a last vector through a lane
// mask); at the baseline level, with an op not listed, or with more live values than
// registers, the interpreter's steps run as before.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace rlx::cpu::jit {

// y = op(x...) over the run's slots (the runner's per-tile pointer table p[slot]); `params`:
// the op's attributes() as f32, in that order.
struct Op {
  std::string_view name;
  int out;
  std::vector<int> in;
  std::vector<float> params = {};
};

// The ops of a run in order, and the slots it writes (the values read after it).
struct Run {
  std::vector<Op> ops;
  std::vector<int> outputs;
};

// Runs elements [begin, end) of every slot.
using RunFn = void (*)(void* const* p, int64_t begin, int64_t end);

// A run's code: `plain` stores every written value with normal stores; `stream` stores
// those of `Run::outputs` marked in the mask given to compile() with streaming stores
// (their p[slot] + begin must then be 64-byte aligned, and the caller fences).
struct Code {
  RunFn plain = nullptr, stream = nullptr;
  std::shared_ptr<const void> holder;  // the code's memory
};

// Whether op `name` (f32) has generated code.
bool supports(std::string_view name);

// The float attributes op `name` reads (hard_sigmoid: alpha, beta), which Op::params holds.
std::vector<std::string_view> attributes(std::string_view name);

// The run as loops over p[slot] buffers; null functions at the baseline level (or where the
// CPU lacks the level's instructions), where the run needs more registers than there are,
// or with RLX_REGION_JIT=0.
Code compile(const Run& run, const std::vector<bool>& stream_outputs);

}  // namespace rlx::cpu::jit
