// Resolving a graph's nodes to kernels on a device, and the dispatch report.
//
// Each node resolves, in order, to:
//   native      the device has a kernel whose supports() accepts the node;
//   decomposed  the device has a composite kernel for the node, or else the op has a
//               decompose rule: the ops it emits are resolved in turn;
//   host        (devices other than the CPU) the CPU has a kernel: inputs are staged to
//               host memory, the CPU kernel runs, the results are copied back;
//   missing     none of the above: compilation fails with one error listing every
//               unresolved (op, dtypes, device).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "rlx/device.h"
#include "rlx/graph.h"
#include "rlx/kernel.h"

namespace rlx {

enum class DispatchPath : uint8_t { native, decomposed, host, missing };
std::string_view dispatch_path_name(DispatchPath p);

// Per op: how many nodes took each path. A decomposed node counts once under its own op;
// the sub-ops it became count under theirs.
struct DispatchReport {
  struct Row {
    std::string op;
    std::array<int, 4> count{};  // indexed by DispatchPath
  };
  Device device;
  std::vector<Row> rows;  // sorted by op name

  int count(std::string_view op, DispatchPath p) const;
  int total(DispatchPath p) const;
  std::string str() const;  // a table, one row per op
};

// A graph whose every node has a kernel on the device.
struct LoweredGraph {
  std::unique_ptr<Graph> graph;        // decompositions inlined; same args and outputs
  std::vector<const Kernel*> kernels;  // per node of `graph`
  std::vector<DispatchPath> paths;     // per node: native or host
  DispatchReport report;
};

// Resolves every node of g for `device` through `kernels`. Throws NotSupported naming
// every unresolved (op, dtypes, device) at once. With RLX_DISPATCH_REPORT=1 in the
// environment the report is printed to stderr.
// `earlier`: the nodes inline_decompositions already decomposed, counted in the report.
LoweredGraph lower_for_device(const Graph& g, Device device,
                              const KernelRegistry& kernels = KernelRegistry::global(),
                              const DispatchReport* earlier = nullptr);

// g with every node that lower_for_device would decompose on `device` replaced by its
// decomposition (recursively); nodes with a kernel (native or on the host) or none stay as
// they are. A compile runs its passes on this graph, so that they see what decompositions
// are made of (stft's closing transpose, a complex product's real matmuls). `report`
// counts the decomposed nodes.
std::unique_ptr<Graph> inline_decompositions(const Graph& g, Device device,
                                             const KernelRegistry& kernels, DispatchReport& report);

}  // namespace rlx
