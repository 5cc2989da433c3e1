// A lowered graph ready to run on one device: the executor behind CompiledGraph, also
// used for the subgraphs of control ops.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <vector>

#include "rlx/dispatch.h"
#include "rlx/kernel.h"
#include "rlx/tensor.h"
#include "runtime/memory_plan.h"

namespace rlx::detail {

class DeviceBackend;

class Program;
struct GraphRuns;  // program_graphs.cpp

// Held by a run on a device (once per thread, however deeply runs nest): a CUDA Graph
// capture waits for the runs in flight and holds the others off.
class DeviceRunGuard {
 public:
  explicit DeviceRunGuard(bool device);
  ~DeviceRunGuard();
  DeviceRunGuard(const DeviceRunGuard&) = delete;
  DeviceRunGuard& operator=(const DeviceRunGuard&) = delete;

 private:
  std::shared_lock<std::shared_mutex> lock_;
  bool counted_ = false;
};

// The concrete output shapes of every node for one binding of the symbolic dims, and
// where each value lives.
struct Plan {
  std::vector<std::vector<std::vector<int64_t>>> shapes;  // per node, per output
  std::vector<bool> dynamic;  // per node: shapes known only once its inputs exist
  MemoryPlan memory;
  // Set when runs of this binding may be captured as CUDA Graphs and replayed.
  std::shared_ptr<GraphRuns> graphs;
};

// Runs a node's subgraphs through their own Programs.
class SubgraphPrograms final : public SubgraphRunner {
 public:
  std::vector<std::unique_ptr<Program>> programs;
  std::vector<Tensor> run(size_t index, std::span<const Tensor> args) const override;
};

class Program {
 public:
  // `graphs`: capture runs as CUDA Graphs where the device and the graph allow.
  // `earlier`: what inline_decompositions did before the passes, for the dispatch report.
  Program(const Graph& g, Device device, const KernelRegistry& kernels, int threads,
          bool graphs = false, const DispatchReport* earlier = nullptr);
  ~Program();

  const LoweredGraph& lowered() const { return lowered_; }
  const Graph& graph() const { return *lowered_.graph; }

  // `args` in the graph's argument order (inputs and params as declared); returns the
  // outputs in order. `arg_names` says what to call an argument in errors.
  std::vector<Tensor> run(std::span<const Tensor> args) const;
  size_t cached_plans() const;
  size_t graph_launches() const { return graph_launches_; }
  size_t graph_captures() const { return graph_captures_; }
  // The memory plan's numbers with every symbolic dim bound by name.
  MemoryStats memory_stats(const std::map<std::string, int64_t>& dims) const;

 private:
  std::vector<int64_t> bind(std::span<const Tensor> args) const;
  // The plan for a binding (`key`: bind's), made from the arguments' types on a miss.
  std::shared_ptr<const Plan> plan_for(
      const std::vector<int64_t>& key,
      const std::function<std::vector<TensorType>()>& arg_types) const;
  // Runs the nodes over `vals` (the arguments set), intermediates in `arena` as `memory`
  // places them; `release` drops each value after its last use.
  void execute(const Plan& plan, const MemoryPlan& memory, const std::shared_ptr<Buffer>& arena,
               std::vector<Tensor>& vals, bool release) const;
  // The graph's outputs from `vals` (copies of the ones the program keeps).
  std::vector<Tensor> collect(const std::vector<Tensor>& vals) const;
  // The run as a CUDA Graph (program_graphs.cpp): a replay of an earlier capture with the
  // same argument storage, else a new capture; nothing when it cannot be captured.
  std::optional<std::vector<Tensor>> run_graph(const Plan& plan,
                                               std::span<const Tensor> args) const;
  std::shared_ptr<GraphRuns> make_graph_runs(const Plan& plan,
                                             std::span<const TensorType> args) const;
  Tensor output_storage(const Plan& plan, const MemoryPlan& memory, size_t node, size_t j,
                        std::span<const Tensor> ins, const std::shared_ptr<Buffer>& arena) const;
  // A node on the host path of a device program: its inputs staged to the host, the CPU
  // kernel run there, its results copied into `outs` (device storage, or undefined).
  void run_on_host(size_t node, const Kernel& k, std::span<const Tensor> ins,
                   std::span<const std::vector<int64_t>> shapes, std::span<Tensor> outs) const;
  // Whether node i's outputs are worked out once and kept on the device: a node with no
  // inputs, nothing random and static outputs (a constant's upload, an iota).
  bool kept_on_device(size_t node) const;

  LoweredGraph lowered_;
  Device device_;
  DeviceBackend* backend_ = nullptr;  // null on the CPU
  int threads_;
  std::vector<std::unique_ptr<SubgraphPrograms>> subgraphs_;  // per node (null: none)
  std::vector<std::vector<int32_t>> release_after_;           // per node: values last used there
  std::vector<bool> is_output_;                               // per value
  Liveness liveness_;
  bool use_arena_ = true;  // RLX_ARENA=0: every output from Tensor::empty
  bool graphs_ = false;    // runs may be captured as CUDA Graphs
  mutable std::atomic<size_t> graph_launches_{0}, graph_captures_{0};

  mutable std::mutex kept_mu_;
  mutable std::vector<std::vector<Tensor>> kept_;  // per node, for kept_on_device nodes

  mutable std::shared_mutex cache_mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> cache_;
};

}  // namespace rlx::detail
