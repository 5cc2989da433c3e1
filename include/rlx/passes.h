// Compiler passes and the pipeline that runs them.
//
// A pass maps a graph to an equivalent, better one. Graphs are SSA and every Value points
// into its graph, so a pass builds a new graph (as the transforms do) rather than editing
// one in place; it returns null when it has nothing to change, which keeps an idle pass
// free. The pipeline is data: a list of pass names, per device and optimisation level,
// that CompileOptions can replace or thin out.
//
//   RLX_VERIFY=1      verifies the graph after every pass; a failure names the pass.
//   RLX_DEBUG=passes  prints each pass with node counts before / after and its time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/device.h"
#include "rlx/graph.h"

namespace rlx {

class KernelRegistry;

// Compute precision of the heavy ops. auto_bf16 / auto_f16: matmul, conv and attention
// in the 16-bit type with f32 accumulation; reductions, softmax and norms in f32; graph
// inputs and outputs stay as declared. bf16 / f16: every float op in the 16-bit type,
// with f32 boundaries.
enum class Precision : uint8_t { f32, bf16, f16, auto_bf16, auto_f16 };
std::string_view precision_name(Precision p);

// A known input of a compile-time evaluation: `value` as `shape` (its own shape, or its one
// element broadcast to it).
struct FoldInput {
  const Literal* value;
  std::vector<int64_t> shape;
};
// Runs op once on known inputs and returns its outputs; nullopt when it cannot (no kernel, a
// bad index in the data…): the node is then left to run time.
using Evaluator = std::function<std::optional<std::vector<Literal>>(
    const OpDef& op, std::span<const FoldInput> inputs, const Attrs& attrs)>;

// What a pass may ask about the compilation it is part of.
struct PassContext {
  Device device = Device::cpu();
  int opt_level = 2;
  Precision precision = Precision::f32;
  // The kernels the graph will be resolved against (null: the global registry, as it
  // stands: a Session registers its backends there; code that runs passes alone calls
  // register_cpu_kernels() first). A pass that creates a fused op checks that the device
  // can run it.
  const KernelRegistry* kernels = nullptr;
  // How constant_folding computes a node of known inputs (a Session runs it on the CPU
  // kernels, rlx::cpu_evaluator()); without one it folds only what needs no kernel (shapes).
  Evaluator evaluate;
};

// Returns the rewritten graph, or null when the pass changes nothing.
using PassFn = std::function<std::unique_ptr<Graph>(const Graph&, const PassContext&)>;

struct PassInfo {
  std::string name;  // "cse", "elementwise_fusion", …
  PassFn run;
  std::string doc;  // one line
};

class PassRegistry {
 public:
  // The process-wide registry, with rlx's passes registered on first use.
  static PassRegistry& global();

  // Throws ValueError when the name is taken or the pass has no function.
  void add(PassInfo pass);
  const PassInfo* find(std::string_view name) const;
  const PassInfo& get(std::string_view name) const;  // ValueError naming the known passes
  std::vector<const PassInfo*> all() const;          // sorted by name

  PassRegistry();
  ~PassRegistry();
  PassRegistry(const PassRegistry&) = delete;
  PassRegistry& operator=(const PassRegistry&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The pipeline rlx runs for a device at an optimisation level (0: none, 1: clean-ups,
// 2: clean-ups and fusion). A precision other than f32 adds the mixed-precision pass.
std::vector<std::string> default_pipeline(Device device, int opt_level,
                                          Precision precision = Precision::f32);

struct PassStat {
  std::string name;
  size_t nodes_before = 0, nodes_after = 0;
  double ms = 0;
  bool changed = false;
};

struct PipelineResult {
  std::unique_ptr<Graph> graph;  // always set (a clone when nothing changed)
  std::vector<PassStat> stats;   // one per pass run, in order
  std::string str() const;       // the table RLX_DEBUG=passes prints
};

// Runs the named passes in order (unknown names are a ValueError listing the known ones).
PipelineResult run_pipeline(const Graph& g, std::span<const std::string> passes,
                            const PassContext& ctx = {});
// g with the named symbolic dims of its args replaced by static sizes, every node
// re-inferred (so shape arithmetic that depended on them can fold). ValueError for a name
// that no arg uses or a negative size.
std::unique_ptr<Graph> bind_dims(const Graph& g, const std::map<std::string, int64_t>& dims);

// One pass by name; null when it changed nothing.
std::unique_ptr<Graph> run_pass(std::string_view name, const Graph& g, const PassContext& ctx = {});

}  // namespace rlx
