#include "rlx/dispatch.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "rlx/settings.h"

namespace rlx {

std::string_view dispatch_path_name(DispatchPath p) {
  static constexpr std::string_view kNames[] = {"native", "decomposed", "host", "missing"};
  return kNames[static_cast<int>(p)];
}

int DispatchReport::count(std::string_view op, DispatchPath p) const {
  for (const auto& r : rows)
    if (r.op == op) return r.count[size_t(p)];
  return 0;
}

int DispatchReport::total(DispatchPath p) const {
  int n = 0;
  for (const auto& r : rows) n += r.count[size_t(p)];
  return n;
}

std::string DispatchReport::str() const {
  size_t w = 2;
  for (const auto& r : rows) w = std::max(w, r.op.size());
  std::string out = str_cat("dispatch report (", device.str(), ")\n");
  char line[256];
  std::snprintf(line, sizeof line, "  %-*s %7s %11s %5s %8s\n", int(w), "op", "native",
                "decomposed", "host", "missing");
  out += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "  %-*s %7d %11d %5d %8d\n", int(w), r.op.c_str(), r.count[0],
                  r.count[1], r.count[2], r.count[3]);
    out += line;
  }
  return out;
}

namespace {

// A decomposition that (directly or not) uses its own op would never end.
constexpr int kMaxDecomposeDepth = 16;

std::string dtypes_str(std::span<const TensorType> types) {
  std::string s;
  for (const auto& t : types) {
    if (!s.empty()) s += ",";
    s += dtype_name(t.dtype);
  }
  return s.empty() ? "-" : s;
}

struct Lowerer {
  Device device;
  const KernelRegistry& kernels;
  LoweredGraph out;
  std::map<std::string, std::array<int, 4>> counts;
  std::set<std::string> missing;
  bool decompose_only = false;  // inline_decompositions: place nodes without kernels

  std::vector<Value> place(const OpDef& op, const std::vector<Value>& inputs, const Attrs& attrs,
                           const std::vector<SubgraphPtr>& subgraphs, const Kernel* k,
                           DispatchPath path) {
    auto outs = out.graph->apply(op, inputs, attrs, subgraphs);
    if (decompose_only) return outs;
    out.kernels.push_back(k);
    out.paths.push_back(path);
    counts[op.name][size_t(path)]++;
    return outs;
  }

  // Emits `op` over `inputs` (values of out.graph) by the first path that resolves it.
  std::vector<Value> emit(const OpDef& op, const std::vector<Value>& inputs, const Attrs& attrs,
                          const std::vector<SubgraphPtr>& subgraphs, int depth) {
    std::vector<TensorType> in_types;
    for (Value v : inputs) in_types.push_back(v.type());
    std::vector<TensorType> out_types = infer_types(op, in_types, attrs, subgraphs);
    KernelQuery q{op, attrs, in_types, out_types, subgraphs};
    const Kernel* k = kernels.find(q, device.kind);
    if (k && k->composite && depth < kMaxDecomposeDepth) {
      if (auto r = inline_decomposition(op, k->composite, inputs, in_types, out_types, attrs,
                                        subgraphs, depth, false)) {
        counts[op.name][size_t(DispatchPath::decomposed)]++;
        return *r;
      }
      return place(op, inputs, attrs, subgraphs, nullptr, DispatchPath::missing);  // kept
    }
    if (k && !k->composite) return place(op, inputs, attrs, subgraphs, k, DispatchPath::native);
    const Kernel* cpu = device.is_cpu() ? nullptr : kernels.find(q, DeviceKind::cpu);
    if (cpu && cpu->composite) cpu = nullptr;  // the host path needs a kernel that runs
    if (cpu && cpu->flags.any_device)
      return place(op, inputs, attrs, subgraphs, cpu, DispatchPath::native);
    if (op.decompose && depth < kMaxDecomposeDepth) {
      if (auto r = inline_decomposition(op, op.decompose, inputs, in_types, out_types, attrs,
                                        subgraphs, depth, cpu != nullptr)) {
        counts[op.name][size_t(DispatchPath::decomposed)]++;
        return *r;
      }
    }
    if (cpu) return place(op, inputs, attrs, subgraphs, cpu, DispatchPath::host);
    if (decompose_only) return place(op, inputs, attrs, subgraphs, nullptr, DispatchPath::missing);
    missing.insert(str_cat("(", op.name, ", ", dtypes_str(in_types.empty() ? out_types : in_types),
                           ", ", device.str(), ")"));
    return place(op, inputs, attrs, subgraphs, nullptr, DispatchPath::missing);
  }

  // Builds the decomposition in a scratch graph, then emits its nodes one by one, so
  // each sub-op is resolved in turn. A decomposition that does not cover these attributes
  // says NotSupported before anything is emitted: with `host_instead` the node then takes
  // the host path (nullopt), otherwise the error stands. Before the passes
  // (decompose_only) a decomposition that cannot be built yet (symbolic sizes the passes
  // may settle) leaves the node as it is (nullopt) for lowering to decide.
  std::optional<std::vector<Value>> inline_decomposition(
      const OpDef& op, const DecomposeFn& decompose, const std::vector<Value>& inputs,
      const std::vector<TensorType>& in_types, const std::vector<TensorType>& out_types,
      const Attrs& attrs, const std::vector<SubgraphPtr>& subgraphs, int depth, bool host_instead) {
    Graph scratch("decompose");
    std::vector<Value> args;
    for (size_t i = 0; i < in_types.size(); ++i)
      args.push_back(scratch.input(str_cat("x", i), in_types[i]));
    std::vector<Value> results;
    try {
      results = decompose(RuleArgs{scratch, attrs, args, {}, subgraphs, &op});
    } catch (const NotSupported&) {
      if (!host_instead && !decompose_only) throw;
      return std::nullopt;
    } catch (const Error&) {
      if (!decompose_only) throw;
      return std::nullopt;
    }
    if (results.size() != out_types.size())
      fail<ValueError>(op.name, "expected the decomposition to return ", out_types.size(),
                       " values, got ", results.size());
    std::vector<Value> map(scratch.num_values());
    for (size_t i = 0; i < args.size(); ++i) map[size_t(args[i].id)] = inputs[i];
    for (const Node& n : scratch.nodes()) {
      std::vector<Value> ins;
      for (Value v : n.inputs) ins.push_back(map[size_t(v.id)]);
      auto outs = emit(*n.op, ins, n.attrs, n.subgraphs, depth + 1);
      for (size_t j = 0; j < outs.size(); ++j) map[size_t(n.outputs[j].id)] = outs[j];
    }
    std::vector<Value> mapped;
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].graph != &scratch || results[i].type() != out_types[i])
        fail<ValueError>(
            op.name, "expected decomposition result ", i, " of type ", out_types[i].str(), ", got ",
            results[i].graph == &scratch ? results[i].type().str() : "a foreign value");
      mapped.push_back(map[size_t(results[i].id)]);
    }
    return mapped;
  }
};

// Emits every node of g into l's new graph, which keeps g's arguments and outputs.
void emit_graph(Lowerer& l, const Graph& g) {
  l.out.graph = std::make_unique<Graph>(g.name());
  Graph& out = *l.out.graph;
  std::vector<Value> map(g.num_values());
  for (const Arg& a : g.args())
    map[size_t(a.value.id)] = a.kind == ArgKind::input ? out.input(a.name, a.value.type())
                                                       : out.param(a.name, a.value.type());
  for (const Node& n : g.nodes()) {
    std::vector<Value> ins;
    for (Value v : n.inputs) ins.push_back(map[size_t(v.id)]);
    auto outs = l.emit(*n.op, ins, n.attrs, n.subgraphs, 0);
    for (size_t j = 0; j < outs.size(); ++j) map[size_t(n.outputs[j].id)] = outs[j];
  }
  for (const Output& o : g.outputs()) out.output(map[size_t(o.value.id)], o.name);
}

}  // namespace

std::unique_ptr<Graph> inline_decompositions(const Graph& g, Device device,
                                             const KernelRegistry& kernels,
                                             DispatchReport& report) {
  Lowerer l{device, kernels, {}, {}, {}, true};
  emit_graph(l, g);
  report.device = device;
  report.rows.clear();
  for (const auto& [op, c] : l.counts) report.rows.push_back({op, c});
  return std::move(l.out.graph);
}

LoweredGraph lower_for_device(const Graph& g, Device device, const KernelRegistry& kernels,
                              const DispatchReport* earlier) {
  Lowerer l{device, kernels, {}, {}, {}};
  emit_graph(l, g);
  if (earlier)
    for (const DispatchReport::Row& r : earlier->rows)
      for (size_t p = 0; p < r.count.size(); ++p) l.counts[r.op][p] += r.count[p];
  l.out.report.device = device;
  for (const auto& [op, c] : l.counts) l.out.report.rows.push_back({op, c});
  if (settings().dispatch_report) std::fprintf(stderr, "%s", l.out.report.str().c_str());
  if (!l.missing.empty()) {
    std::string list;
    for (const auto& m : l.missing) {
      if (!list.empty()) list += ", ";
      list += m;
    }
    fail<NotSupported>("compile", "expected a kernel or a decomposition for every op on ",
                       device.str(), ", got none for ", l.missing.size(), ": ", list);
  }
  return std::move(l.out);
}

}  // namespace rlx
