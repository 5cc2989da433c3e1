// Compiling a graph for a device and running it.
//
//   rlx::Session s(rlx::Device::cpu());
//   rlx::CompiledGraph cg = s.compile(graph);
//   cg.set_param("w", w);
//   auto out = cg.run({{"x", x}});        // named inputs -> named outputs
//
// Symbolic dims are bound from the input shapes on every run; the per-node shapes and the
// memory plan worked out for one binding are cached, so a second run with the same sizes
// does no shape inference. A run puts every intermediate of known size in one arena,
// allocated once per run at the plan's offsets (memory_stats; RLX_ARENA=0 allocates each
// on its own instead). run() is const and may be called from several threads at once:
// each run has its own arena.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/device.h"
#include "rlx/dispatch.h"
#include "rlx/graph.h"
#include "rlx/kernel.h"
#include "rlx/passes.h"
#include "rlx/tensor.h"

namespace rlx {

struct CompileOptions {
  // Threads for the kernels of one run (0: every core). Several runs in parallel each
  // use this many.
  int threads = 0;
  // Print the dispatch report to stderr (RLX_DISPATCH_REPORT=1 does the same).
  bool print_report = false;
  // The kernels to resolve against (default: the global registry).
  const KernelRegistry* kernels = nullptr;
  // Optimisation level: 0 runs no pass, 1 the clean-ups, 2 also fusion. -1: the
  // RLX_OPT_LEVEL environment variable, else 2.
  int opt_level = -1;
  // The pass pipeline to run instead of default_pipeline(device, opt_level, precision).
  std::optional<std::vector<std::string>> passes;
  // Passes left out of the pipeline (by name).
  std::vector<std::string> disable_passes;
  Precision precision = Precision::f32;
  // Symbolic dims fixed at compile time (bind_dims): the compiled graph then takes only
  // these sizes, and shape arithmetic on them folds away.
  std::map<std::string, int64_t> dims;
  // Reuse an earlier compile of an equal graph with equal options (RLX_COMPILE_CACHE=0
  // turns it off everywhere). The program is shared; params are per CompiledGraph.
  bool cache = true;
  // On a GPU, capture runs with static shapes as CUDA Graphs and replay them (one launch
  // per run). A capture belongs to the storage of its arguments: runs over the same
  // tensors (weights set once, a training loop feeding each step the last one's outputs)
  // replay it. RLX_CUDA_GRAPHS=0 turns it off everywhere, RLX_CUDA_GRAPHS=1 on.
  bool cuda_graphs = true;
};

// The pipeline compile() runs for these options on a device.
std::vector<std::string> compile_pipeline(Device device, const CompileOptions& options);

using TensorMap = std::map<std::string, Tensor, std::less<>>;

// The memory one run of a compiled graph takes under one binding of its dims. Every
// intermediate whose size is known once the dims are bound lives in one arena per run, at
// an offset planned from liveness; outputs (and what views of them alias) are allocated
// on their own, as they are handed to the caller. Bytes of the values whose size depends
// on input data are counted nowhere (`dynamic` counts them).
struct MemoryStats {
  size_t arena_bytes = 0;         // the arena of one run: the peak of the intermediates
  size_t live_bytes = 0;          // the most bytes live at one node (arena_bytes >= this)
  size_t intermediate_bytes = 0;  // all intermediates' sizes summed (no reuse at all)
  size_t output_bytes = 0;        // the outputs' storage (returned to the caller)
  size_t input_bytes = 0;
  size_t param_bytes = 0;
  int64_t intermediates = 0;  // values in the arena
  int64_t inplace = 0;        // outputs written over an input that dies at their node
  int64_t views = 0;          // outputs that alias an input (reshape, contiguous slice, …)
  int64_t dynamic = 0;        // outputs whose size is known only at run time
};

class CompiledGraph {
 public:
  CompiledGraph();  // empty: run() throws
  ~CompiledGraph();
  CompiledGraph(CompiledGraph&&) noexcept;
  CompiledGraph& operator=(CompiledGraph&&) noexcept;

  Device device() const;
  const DispatchReport& report() const;
  const Graph& lowered() const;  // the graph as it runs: passes run, decompositions inlined
  // The passes compile() ran, with node counts and times.
  const std::vector<PassStat>& pass_stats() const;
  // Whether compile() reused an earlier compile of an equal graph (CompileOptions::cache).
  bool from_cache() const;

  std::vector<std::string> input_names() const;
  std::vector<std::string> param_names() const;
  std::vector<std::string> output_names() const;

  // Binds a parameter (checked against its declared type). The tensor is shared, not
  // copied: writes into it are seen by later runs.
  void set_param(std::string_view name, Tensor value);
  Tensor param(std::string_view name) const;  // undefined when not set

  // Runs with every input given by name; returns every output by name. Throws
  // ValueError / TypeError naming the input, param or dim that does not fit.
  TensorMap run(const TensorMap& inputs) const;
  // The same with inputs in declaration order and outputs in declaration order.
  std::vector<Tensor> run(std::span<const Tensor> inputs) const;

  // Number of distinct symbol bindings whose plans are cached.
  size_t cached_plans() const;
  // Runs that were launches of a captured CUDA Graph (CompileOptions::cuda_graphs), and
  // the captures made; 0 on the CPU.
  size_t graph_launches() const;
  size_t graph_captures() const;

  // The memory plan for a binding of every symbolic dim of the inputs (and params), by
  // name; a ValueError names a symbol left unbound. The plan is cached as a run's is.
  MemoryStats memory_stats(const std::map<std::string, int64_t>& dims = {}) const;

 private:
  friend class Session;
  struct Impl;
  const Impl& impl() const;  // throws on an empty CompiledGraph
  std::unique_ptr<Impl> impl_;
};

class Session {
 public:
  // A session registers its device's kernels (once) in the global registry: the CPU's,
  // and for a GPU its own as well. Throws NotSupported for a device that is not there.
  explicit Session(Device device = Device::cpu());
  Device device() const { return device_; }
  CompiledGraph compile(const Graph& g, const CompileOptions& options = {}) const;

 private:
  Device device_;
};

// Evaluates an op on known inputs with the CPU kernels: PassContext::evaluate of a Session's
// compiles, for code that runs constant_folding alone.
Evaluator cpu_evaluator();

// Registers rlx's CPU kernels in `registry`; calling it again does nothing.
void register_cpu_kernels(KernelRegistry& registry = KernelRegistry::global());
// Registers rlx's CUDA kernels (none in a build without the CUDA backend). No GPU is
// needed: lower_for_device can resolve a graph for cuda on any machine.
void register_cuda_kernels(KernelRegistry& registry = KernelRegistry::global());

}  // namespace rlx
