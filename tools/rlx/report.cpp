// rlx report: how every node of a graph file resolves on the CPU (native, decomposed,
// host, missing), and the memory one run takes. A graph with missing kernels fails to
// compile: the error lists them.
#include <cstdio>

#include "cli.h"
#include "rlx/session.h"

namespace rlx::cli {

namespace {

std::string bytes_str(size_t bytes) {
  char buf[32];
  if (bytes < (size_t(1) << 10))
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  else if (bytes < (size_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1024 * 1024));
  return buf;
}

}  // namespace

int report_command(const std::string& graph_path, const std::vector<std::string>& dims) {
  std::unique_ptr<Graph> g = load_graph(graph_path);
  std::map<std::string, int64_t> sizes = bind_dims(*g, dims, {});
  CompiledGraph cg = Session(Device::cpu()).compile(*g);
  const DispatchReport& r = cg.report();
  std::printf("%s", r.str().c_str());
  std::printf("%d native, %d decomposed, %d host, %d missing\n", r.total(DispatchPath::native),
              r.total(DispatchPath::decomposed), r.total(DispatchPath::host),
              r.total(DispatchPath::missing));
  std::string bound;
  for (const auto& [name, size] : sizes)
    bound += str_cat(bound.empty() ? "" : ", ", name, "=", size);
  if (sizes.contains("?")) {
    std::printf("memory: not planned (an argument has an unnamed dim '?')\n");
    return 0;
  }
  MemoryStats m = cg.memory_stats(sizes);
  std::printf(
      "memory%s: peak %s (the arena of a run), intermediates %s summed (%lld values, "
      "%lld in place, %lld views), outputs %s, inputs %s, params %s\n",
      bound.empty() ? "" : (" (" + bound + ")").c_str(), bytes_str(m.arena_bytes).c_str(),
      bytes_str(m.intermediate_bytes).c_str(), (long long)m.intermediates, (long long)m.inplace,
      (long long)m.views, bytes_str(m.output_bytes).c_str(), bytes_str(m.input_bytes).c_str(),
      bytes_str(m.param_bytes).c_str());
  return 0;
}

}  // namespace rlx::cli
