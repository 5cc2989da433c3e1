// rlx report: how every node of a graph file resolves on the CPU (native, decomposed,
// host, missing). A graph with missing kernels fails to compile: the error lists them.
#include <cstdio>

#include "cli.h"
#include "rlx/session.h"

namespace rlx::cli {

int report_command(const std::string& graph_path) {
  std::unique_ptr<Graph> g = load_graph(graph_path);
  CompiledGraph cg = Session(Device::cpu()).compile(*g);
  const DispatchReport& r = cg.report();
  std::printf("%s", r.str().c_str());
  std::printf("%d native, %d decomposed, %d host, %d missing\n", r.total(DispatchPath::native),
              r.total(DispatchPath::decomposed), r.total(DispatchPath::host),
              r.total(DispatchPath::missing));
  return 0;
}

}  // namespace rlx::cli
