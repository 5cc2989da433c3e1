// Kernels, per (op, device). A backend registers its kernels with an explicit call
// (register_cpu_kernels(), …): static initialisers are dropped by linkers from static
// libraries, so nothing registers itself.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/device.h"
#include "rlx/graph.h"
#include "rlx/op.h"
#include "rlx/tensor.h"

namespace rlx {

// The node a kernel is asked to run, described by types only (no graph needed), so that
// `supports` can be asked before the node is emitted anywhere.
struct KernelQuery {
  const OpDef& op;
  const Attrs& attrs;
  std::span<const TensorType> inputs;
  std::span<const TensorType> outputs;
  // The node's subgraphs (a fused region's body), for kernels that compile them.
  std::span<const SubgraphPtr> subgraphs = {};
};

// Runs a node's subgraphs (the branches of cond, the body of while and scan), compiled
// for the same device as the node.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual std::vector<Tensor> run(size_t index, std::span<const Tensor> args) const = 0;
};

// What a kernel sees when it runs, besides its tensors.
struct KernelContext {
  const OpDef& op;
  const Attrs& attrs;
  Device device;
  void* stream = nullptr;                     // the CUDA stream on GPU backends
  const SubgraphRunner* subgraphs = nullptr;  // set for nodes with subgraphs
  // The output shapes the runtime worked out, which a kernel with
  // KernelFlags::makes_outputs gives its outputs. An output whose shape depends on the
  // input values has an empty entry here and arrives undefined.
  std::span<const std::vector<int64_t>> output_shapes = {};
  // The node's subgraphs as graphs (a fused region's body), for kernels that compile
  // them rather than run them.
  std::span<const SubgraphPtr> graphs = {};
};

// Inputs are read-only. Outputs are allocated (contiguous) by the runtime with the
// inferred shapes; an output whose shape depends on input values (a dim still unknown
// once the input shapes are known, as for nonzero) arrives undefined and the kernel
// assigns it.
using KernelFn = std::function<void(const KernelContext&, std::span<const Tensor> inputs,
                                    std::span<Tensor> outputs)>;
// Optional: whether the kernel handles this node (dtype, rank, layout, attributes).
using SupportsFn = std::function<bool(const KernelQuery&)>;

struct KernelFlags {
  // The kernel reads inputs through their strides. Without it the runtime hands the
  // kernel contiguous inputs (copying the views that are not).
  bool strided_inputs = false;
  // The kernel assigns its outputs itself (views of its inputs, a subgraph's results), so
  // the runtime does not allocate them first.
  bool makes_outputs = false;
  // The kernel reads element i of every input of the output's shape before it writes
  // element i of the output, so the memory planner may hand it an output that shares the
  // storage of such an input dying at this node (same bytes, contiguous). Inputs of other
  // shapes (broadcast) never share the output's storage.
  bool inplace = false;
  // The kernel reads no element, only shapes and strides (reshape, a stride-0 broadcast):
  // registered for the CPU, it serves every device as a native kernel.
  bool any_device = false;
};

struct Kernel {
  std::string op;
  DeviceKind device;
  KernelFn fn;
  SupportsFn supports;  // empty: supports every node of the op
  KernelFlags flags;
  // A composite kernel has no fn: on its device the node becomes the ops this emits (as
  // a decomposition does, but chosen per device), each resolved in turn.
  DecomposeFn composite;

  bool accepts(const KernelQuery& q) const { return !supports || supports(q); }
};

class KernelRegistry {
 public:
  static KernelRegistry& global();

  // Several kernels may serve one (op, device): the first whose supports() accepts wins,
  // so register specialised kernels before general ones.
  void add(std::string op, DeviceKind device, KernelFn fn, SupportsFn supports = {},
           KernelFlags flags = {});
  // A composite kernel: on `device`, nodes of `op` that `supports` accepts are built from
  // other ops (those the device runs best) rather than run by one kernel.
  void add_composite(std::string op, DeviceKind device, DecomposeFn fn, SupportsFn supports = {});
  const Kernel* find(const KernelQuery& q, DeviceKind device) const;
  bool has(std::string_view op, DeviceKind device) const;

  KernelRegistry();
  ~KernelRegistry();
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
