// rlx run: compile a graph file on the CPU, bind inputs and params from .npy files or
// random values, run it, print the outputs and the timing.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "cli.h"
#include "rlx/npy.h"
#include "rlx/session.h"

namespace rlx::cli {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string time_str(double s) {
  char buf[32];
  if (s < 1e-3)
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

namespace {

std::vector<std::string> arg_names(const Graph& g, ArgKind kind) {
  std::vector<std::string> out;
  for (const Arg& a : g.args())
    if (a.kind == kind) out.push_back(a.name);
  return out;
}

// --input / --param assignments, checked against the graph's args of that kind.
std::map<std::string, std::string> assignments(const Graph& g, const std::vector<std::string>& list,
                                               ArgKind kind) {
  const char* flag = kind == ArgKind::input ? "--input" : "--param";
  const char* what = kind == ArgKind::input ? "input" : "param";
  std::map<std::string, std::string> out;
  for (const auto& text : list) {
    auto [name, file] = split_assignment(text, flag);
    const Arg* a = g.find_arg(name);
    if (a && a->kind != kind)
      throw ValueError(str_cat("'", name, "' is a ", kind == ArgKind::input ? "param" : "input",
                               " of the graph, not an ", what, "; use ",
                               kind == ArgKind::input ? "--param " : "--input ", name,
                               "=FILE.npy"));
    if (!a)
      throw ValueError(str_cat("unknown ", what, " '", name, "'; the graph's ", what, "s are ",
                               names_str(arg_names(g, kind))));
    if (!out.emplace(name, file).second)
      throw ValueError(str_cat(flag, " ", name, " given more than once"));
  }
  return out;
}

// Floats uniform in [-1, 1); integers in [0, 4) (small enough to index most dims); bools
// true half the time; strings "s0" to "s3".
Tensor random_tensor(const TensorType& type, const std::map<std::string, int64_t>& dims,
                     std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  for (const Dim& d : type.shape) shape.push_back(d.is_static() ? d.value() : dims.at(d.symbol()));
  std::vector<double> values(size_t(checked_numel(shape, "--random")));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3);
  for (double& v : values)
    v = is_float(type.dtype) ? real(rng) : is_bool(type.dtype) ? small(rng) % 2 : small(rng);
  if (is_string(type.dtype)) {
    std::vector<std::string> words;
    for (double v : values) words.push_back(str_cat("s", int(v)));
    return Tensor::from_strings(words, shape);
  }
  return Tensor::from_doubles(type.dtype, shape, values);
}

}  // namespace

// Loads the named files, or fills the args left over with random values.
TensorMap bind_args(const Graph& g, const RunOptions& o, std::vector<std::string>& sources) {
  auto inputs = assignments(g, o.inputs, ArgKind::input);
  auto params = assignments(g, o.params, ArgKind::param);
  TensorMap loaded;
  for (const auto* files : {&inputs, &params})
    for (const auto& [name, file] : *files) loaded[name] = load_npy(file);
  auto dims = bind_dims(g, o.dims, loaded);

  std::mt19937_64 rng(o.seed);
  std::vector<std::string> missing;
  for (const Arg& a : g.args()) {
    bool input = a.kind == ArgKind::input;
    const auto& files = input ? inputs : params;
    if (auto it = files.find(a.name); it != files.end()) {
      sources.push_back(it->second);
    } else if (o.random) {
      loaded[a.name] = random_tensor(a.value.type(), dims, rng);
      sources.push_back("random");
    } else {
      missing.push_back(str_cat(input ? "input '" : "param '", a.name, "' (", a.value.type().str(),
                                "): pass ", input ? "--input " : "--param ", a.name, "=FILE.npy"));
    }
  }
  if (!missing.empty()) {
    std::string msg =
        str_cat("expected a value for every input and param (or --random), got none for ",
                missing.size(), ":");
    for (const auto& m : missing) msg += "\n  " + m;
    throw ValueError(msg);
  }
  if (!dims.empty()) {
    std::string s;
    for (const auto& [name, size] : dims) s += str_cat(s.empty() ? "" : ", ", name, "=", size);
    std::printf("dims: %s\n", s.c_str());
  }
  return loaded;
}

void save_outputs(const TensorMap& outs, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(str_cat("cannot create directory '", dir, "': ", ec.message()));
  for (const auto& [name, t] : outs)
    save_npy((std::filesystem::path(dir) / (name + ".npy")).string(), t);
  std::printf("saved %zu output%s to %s\n", outs.size(), outs.size() == 1 ? "" : "s", dir.c_str());
}

int run_command(const RunOptions& o) {
  if (is_onnx_path(o.graph_path)) return run_onnx_command(o);
  std::unique_ptr<Graph> g = load_graph(o.graph_path);
  std::vector<std::string> sources;
  TensorMap args = bind_args(*g, o, sources);
  TensorMap outs = run_graph(*g, args, sources, o);
  if (!o.save_outputs.empty()) save_outputs(outs, o.save_outputs);
  return 0;
}

TensorMap run_graph(const Graph& graph, TensorMap args, const std::vector<std::string>& sources,
                    const RunOptions& o) {
  const Graph* g = &graph;
  for (size_t i = 0; i < g->args().size(); ++i) {
    const Arg& a = g->args()[i];
    std::printf("%-6s %-12s %-16s %s\n", a.kind == ArgKind::input ? "input" : "param",
                a.name.c_str(), args[a.name].type().str().c_str(), sources[i].c_str());
  }

  Device device = parse_device(o.device);
  Session session(device);
  CompileOptions copts;
  copts.threads = o.threads;
  CompiledGraph cg = session.compile(*g, copts);
  if (!device.is_cpu()) std::printf("%s", cg.report().str().c_str());
  // On a GPU the inputs and params are copied there once; the times are of the runs alone.
  TensorMap inputs;
  for (const Arg& a : g->args()) {
    if (a.kind == ArgKind::param)
      cg.set_param(a.name, args[a.name].to(device));
    else
      inputs[a.name] = args[a.name].to(device);
  }

  auto t0 = Clock::now();
  TensorMap outs = cg.run(inputs);
  synchronize(device);
  double first = seconds_since(t0);
  std::vector<double> times;
  for (int i = 0; i < o.runs; ++i) {
    auto t = Clock::now();
    cg.run(inputs);
    synchronize(device);
    times.push_back(seconds_since(t));
  }
  for (auto& [name, t] : outs) t = t.to(Device::cpu());

  std::printf("outputs:\n");
  for (const auto& name : cg.output_names()) {
    const Tensor& t = outs.at(name);
    std::printf("  %-12s %-16s %s\n", name.c_str(), t.type().str().c_str(),
                preview(t, o.show).c_str());
  }
  std::printf("time: first run %s", time_str(first).c_str());
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    std::printf(", then median %s (min %s) over %zu runs",
                time_str(times[times.size() / 2]).c_str(), time_str(times[0]).c_str(),
                times.size());
  }
  std::printf(" (threads: %s)\n", o.threads ? std::to_string(o.threads).c_str() : "all cores");
  return outs;
}

}  // namespace rlx::cli
