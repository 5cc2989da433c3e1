// The ONNX side of the CLI: rlx run MODEL.onnx (with --data checks), bench, ops,
// convert and onnx-test (ONNX's backend test layout: model.onnx + test_data_set_N/).
#include "rlx/onnx.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "cli.h"
#include "rlx/npy.h"
#include "rlx/text.h"

namespace rlx::cli {

namespace fs = std::filesystem;

namespace {

// A test-data folder's inputs (input_N.pb, one per graph input, read by the input's
// kind) as the rlx graph's inputs, with the import options that bind their shapes.
struct CaseInputs {
  onnx::ImportOptions options;
  std::vector<Tensor> tensors;
};

CaseInputs read_case_inputs(const onnx::Signature& sig, const std::string& dir) {
  CaseInputs c;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const onnx::ValueSlot& slot = sig.inputs[i];
    fs::path file = fs::path(dir) / str_cat("input_", i, ".pb");
    bool optional = slot.kind == onnx::ValueKind::optional_tensor ||
                    slot.kind == onnx::ValueKind::optional_sequence;
    std::vector<Tensor> vals;
    if (fs::exists(file))
      vals = onnx::read_values(file.string(), slot.kind);
    else if (!optional)
      throw IoError(str_cat("expected ", file.string(), " for input '", slot.name, "'"));
    if (optional && vals.empty()) {
      c.options.absent_inputs.insert(slot.name);
      continue;
    }
    if (slot.kind == onnx::ValueKind::sequence || slot.kind == onnx::ValueKind::optional_sequence) {
      auto& shapes = c.options.sequence_shapes[slot.name];
      for (const Tensor& t : vals) shapes.push_back(t.shape());
    } else {
      c.options.input_shapes[slot.name] = vals.at(0).shape();
    }
    c.tensors.insert(c.tensors.end(), vals.begin(), vals.end());
  }
  return c;
}

// The expected outputs (output_N.pb), flattened as the rlx graph's outputs are.
std::vector<Tensor> read_case_outputs(const onnx::Signature& sig, const std::string& dir) {
  std::vector<Tensor> out;
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    fs::path file = fs::path(dir) / str_cat("output_", j, ".pb");
    if (!fs::exists(file)) throw IoError(str_cat("expected ", file.string()));
    std::vector<Tensor> vals = onnx::read_values(file.string(), sig.outputs[j].kind);
    out.insert(out.end(), vals.begin(), vals.end());
  }
  return out;
}

// Prints one line per output (run_onnx_command's --data check); true when all pass.
bool check_outputs(const Graph& g, const TensorMap& outs, const std::vector<Tensor>& want,
                   const RunOptions& o) {
  const Tolerance& tol = o.tolerance;
  std::printf("check against %s (rtol %g, atol %g, range tol %g, max mismatch %g):\n",
              o.data_dir.c_str(), tol.rtol, tol.atol, tol.range_tol, tol.max_mismatch);
  bool ok = want.size() == g.outputs().size();
  if (!ok)
    std::printf("expected %zu outputs, the data holds %zu\n", g.outputs().size(), want.size());
  for (size_t j = 0; j < g.outputs().size() && j < want.size(); ++j) {
    const std::string& name = g.outputs()[j].name;
    OutputCheck c = compare(outs.at(name), want[j], tol);
    std::printf("  %-12s %s\n", name.c_str(), c.str(tol).c_str());
    ok &= c.ok;
  }
  return ok;
}

}  // namespace

bool is_onnx_path(const std::string& path) { return fs::path(path).extension() == ".onnx"; }

int run_onnx_command(const RunOptions& o) {
  validate(o.tolerance);
  onnx::Signature sig = onnx::signature(o.graph_path);
  std::vector<std::string> names;
  for (const auto& slot : sig.inputs) names.push_back(slot.name);
  onnx::ImportOptions io;
  for (const auto& d : o.dims) {
    auto [name, size] = split_assignment(d, "--dim");
    io.dims[name] = parse_size(size, "--dim " + name);
  }
  std::vector<Tensor> data_in, data_out;
  std::map<std::string, std::string> files;  // ONNX name -> .npy
  if (!o.data_dir.empty()) {
    CaseInputs c = read_case_inputs(sig, o.data_dir);
    c.options.dims = io.dims;
    io = c.options;
    data_in = c.tensors;
    data_out = read_case_outputs(sig, o.data_dir);
  }
  for (const auto& text : o.inputs) {
    auto [name, file] = split_assignment(text, "--input");
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw ValueError(
          str_cat("unknown input '", name, "'; the model's inputs are ", names_str(names)));
    files[name] = file;
  }
  TensorMap loaded;
  for (const auto& [name, file] : files) {
    loaded[name] = load_npy(file);
    io.input_shapes[name] = loaded[name].shape();
  }
  if (o.random) io.default_dim = 1;

  auto t0 = Clock::now();
  onnx::Model m = onnx::load(o.graph_path, io);
  std::printf("model: %s (ir %lld, opset %lld, %s): imported in %s, %zu nodes\n",
              o.graph_path.c_str(), (long long)m.ir_version, (long long)m.opset,
              m.producer.empty() ? "unknown producer" : m.producer.c_str(),
              time_str(seconds_since(t0)).c_str(), m.graph->nodes().size());
  const Graph& g = *m.graph;
  std::vector<Value> gin = g.inputs();
  if (!data_in.empty() && data_in.size() != m.inputs.size())
    throw ValueError(str_cat("expected ", m.inputs.size(), " input tensors in '", o.data_dir,
                             "', got ", data_in.size()));
  TensorMap args;
  std::vector<std::string> sources;
  std::vector<std::string> missing;
  RunOptions rest = o;
  rest.inputs.clear();
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const std::string& rlx_name = g.args()[i].name;
    if (!data_in.empty()) {
      args[rlx_name] = data_in[i];
    } else if (auto it = loaded.find(m.inputs[i]); it != loaded.end()) {
      args[rlx_name] = it->second;
    } else {
      continue;
    }
    if (args[rlx_name].dtype() != gin[i].dtype())
      throw TypeError(str_cat("expected input '", m.inputs[i], "' of dtype ",
                              dtype_name(gin[i].dtype()), ", got ", args[rlx_name].type().str()));
  }
  // Inputs not given: random values (--random) or an error naming them.
  std::vector<std::string> sources_unused;
  TensorMap filled;
  if (args.size() < m.inputs.size()) {
    if (!o.random) {
      std::string msg =
          "expected a value for every input (--data DIR, --input NAME=FILE.npy "
          "or --random), got none for:";
      for (size_t i = 0; i < m.inputs.size(); ++i)
        if (!args.count(g.args()[i].name))
          msg += str_cat("\n  '", m.inputs[i], "' (", gin[i].type().str(), ")");
      throw ValueError(msg);
    }
    filled = bind_args(g, rest, sources_unused);
  }
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const std::string& rlx_name = g.args()[i].name;
    if (args.count(rlx_name)) {
      sources.push_back(!data_in.empty() ? "data" : files[m.inputs[i]]);
    } else {
      args[rlx_name] = filled.at(rlx_name);
      sources.push_back("random");
    }
  }
  TensorMap outs = run_graph(g, args, sources, o);
  if (!o.save_outputs.empty()) save_outputs(outs, o.save_outputs);
  if (data_out.empty()) return 0;
  return check_outputs(g, outs, data_out, o) ? 0 : 1;
}

int bench_command(const std::string& path, int runs, int threads,
                  const std::vector<std::string>& dims, const std::string& device_name) {
  Device device = parse_device(device_name);
  onnx::ImportOptions io;
  io.default_dim = 1;
  for (const auto& d : dims) {
    auto [name, size] = split_assignment(d, "--dim");
    io.dims[name] = parse_size(size, "--dim " + name);
  }
  auto t0 = Clock::now();
  onnx::Model m = onnx::load(path, io);
  double load = seconds_since(t0);
  RunOptions o;
  o.random = true;
  std::vector<std::string> sources;
  TensorMap args = bind_args(*m.graph, o, sources);
  for (auto& [name, t] : args) t = t.to(device);
  CompileOptions copts;
  copts.threads = threads;
  t0 = Clock::now();
  CompiledGraph cg = Session(device).compile(*m.graph, copts);
  double compile = seconds_since(t0);
  if (!device.is_cpu()) std::printf("%s", cg.report().str().c_str());
  t0 = Clock::now();
  cg.run(args);
  synchronize(device);
  double first = seconds_since(t0);
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    auto t = Clock::now();
    cg.run(args);
    synchronize(device);
    times.push_back(seconds_since(t));
  }
  std::sort(times.begin(), times.end());
  std::printf("%s: load %s, compile %s, first run %s", path.c_str(), time_str(load).c_str(),
              time_str(compile).c_str(), time_str(first).c_str());
  if (!times.empty())
    std::printf(", median %s, min %s over %zu runs", time_str(times[times.size() / 2]).c_str(),
                time_str(times[0]).c_str(), times.size());
  std::printf(" (%s, threads: %s)\n", device.str().c_str(),
              threads ? std::to_string(threads).c_str() : "all cores");
  return 0;
}

int ops_command(const std::string& path) {
  std::vector<onnx::OpUse> ops = onnx::op_histogram(path);
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
  int missing = 0;
  for (const auto& u : ops) {
    std::string name = u.domain.empty() ? u.op_type : u.domain + "." + u.op_type;
    std::printf("%6lld  %-28s %s\n", (long long)u.count, name.c_str(),
                u.supported ? "converted" : "MISSING (no converter)");
    missing += !u.supported;
  }
  if (missing) {
    std::printf("%d op type%s cannot be imported\n", missing, missing == 1 ? "" : "s");
    return 1;
  }
  // How the imported graph's ops run on the CPU.
  onnx::ImportOptions io;
  io.default_dim = 1;
  onnx::Model m = onnx::load(path, io);
  CompiledGraph cg = Session(Device::cpu()).compile(*m.graph);
  const DispatchReport& r = cg.report();
  std::printf("after import and compilation (rlx ops):\n%s", r.str().c_str());
  std::printf("%d native, %d decomposed, %d host, %d missing\n", r.total(DispatchPath::native),
              r.total(DispatchPath::decomposed), r.total(DispatchPath::host),
              r.total(DispatchPath::missing));
  return 0;
}

int convert_command(const std::string& path, const std::string& out) {
  onnx::Model m = onnx::load(path);
  std::string text = print_graph(*m.graph);
  std::ofstream f(out, std::ios::binary);
  if (!f) throw IoError(str_cat("cannot write '", out, "'"));
  f << text;
  if (!f) throw IoError(str_cat("cannot write '", out, "'"));
  std::printf("wrote %s: %zu nodes, %zu inputs, %zu outputs\n", out.c_str(),
              m.graph->nodes().size(), m.inputs.size(), m.outputs.size());
  return 0;
}

// ---- onnx-test

namespace {

enum class Verdict { pass, fail, skip };

// ONNX 1.12's test data stores bfloat16 tensors as UINT16 (NumPy has no bfloat16), which
// rlx reads as i32: such a tensor, where bf16 is declared, is reinterpreted bit for bit.
Tensor as_dtype_of_file(const Tensor& t, DType declared) {
  if (declared != DType::bf16 || t.dtype() != DType::i32) return t;
  std::vector<int32_t> bits = t.to_vector<int32_t>();
  std::vector<uint16_t> raw(bits.begin(), bits.end());
  return Tensor::from_data(DType::bf16, t.shape(), raw.data());
}

struct CaseResult {
  Verdict verdict;
  std::string why;
};

// Ops whose outputs come from a random generator: their expected outputs cannot be
// reproduced by another generator, so the case is skipped (and says so).
bool draws_random(const std::vector<onnx::OpUse>& ops) {
  static const std::set<std::string> random{"Bernoulli",         "RandomUniform",    "RandomNormal",
                                            "RandomUniformLike", "RandomNormalLike", "Multinomial"};
  for (const auto& u : ops)
    if (random.count(u.op_type)) return true;
  return false;
}

CaseResult run_case(const std::string& dir, int threads, const Tolerance& tol) {
  std::string model = (fs::path(dir) / "model.onnx").string();
  try {
    if (draws_random(onnx::op_histogram(model)))
      return {Verdict::skip, "draws random numbers (expected outputs are another generator's)"};
    onnx::Signature sig = onnx::signature(model);
    std::vector<std::string> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
        sets.push_back(e.path().string());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) return {Verdict::skip, "no test_data_set_N"};
    for (const auto& set : sets) {
      CaseInputs c = read_case_inputs(sig, set);
      std::vector<Tensor>& in = c.tensors;
      std::vector<Tensor> want = read_case_outputs(sig, set);
      onnx::Model m = onnx::load(model, c.options);
      if (in.size() != m.inputs.size())
        return {Verdict::fail,
                str_cat("expected ", m.inputs.size(), " inputs, the data holds ", in.size())};
      CompileOptions copts;
      copts.threads = threads;
      CompiledGraph cg = Session(Device::cpu()).compile(*m.graph, copts);
      TensorMap args;
      for (size_t i = 0; i < in.size(); ++i)
        args[m.graph->args()[i].name] = as_dtype_of_file(in[i], m.graph->args()[i].value.dtype());
      TensorMap outs = cg.run(args);
      if (want.size() != m.graph->outputs().size())
        return {Verdict::fail, str_cat("expected ", want.size(), " outputs, the model has ",
                                       m.graph->outputs().size())};
      for (size_t j = 0; j < want.size(); ++j) {
        const Tensor& got = outs.at(m.graph->outputs()[j].name);
        OutputCheck c = compare(got, as_dtype_of_file(want[j], got.dtype()), tol);
        if (!c.ok)
          return {Verdict::fail, str_cat(fs::path(set).filename().string(), " output ", j, " ('",
                                         m.outputs[j], "'): ", c.str(tol))};
      }
    }
    return {Verdict::pass, ""};
  } catch (const std::exception& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    return {Verdict::fail, msg};
  }
}

// `name  # reason` per line; blank lines and lines starting with '#' are ignored.
std::map<std::string, std::string> read_expected(const std::string& path) {
  std::map<std::string, std::string> out;
  if (path.empty()) return out;
  std::ifstream f(path);
  if (!f) throw IoError(str_cat("cannot read '", path, "'"));
  std::string line;
  while (std::getline(f, line)) {
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') continue;
    size_t e = line.find_first_of(" \t#", b);
    std::string name = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
    size_t h = line.find('#', b);
    out[name] = h == std::string::npos ? "" : line.substr(h + 1);
  }
  return out;
}

}  // namespace

int onnx_test_command(const std::vector<std::string>& dirs, const std::string& expected_path,
                      int threads, const Tolerance& tol) {
  validate(tol);
  std::map<std::string, std::string> expected = read_expected(expected_path);
  std::vector<std::string> cases;
  for (const auto& d : dirs) {
    if (fs::exists(fs::path(d) / "model.onnx")) {
      cases.push_back(d);
      continue;
    }
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (fs::exists(e.path() / "model.onnx")) found.push_back(e.path().string());
    if (ec) throw IoError(str_cat("cannot read directory '", d, "': ", ec.message()));
    if (found.empty())
      throw ValueError(str_cat("no ONNX test cases (DIR/model.onnx) under '", d, "'"));
    std::sort(found.begin(), found.end());
    cases.insert(cases.end(), found.begin(), found.end());
  }
  int passed = 0, failed = 0, skipped = 0, unexpected = 0;
  for (const auto& c : cases) {
    std::string name = fs::path(c).filename().string();
    CaseResult r = run_case(c, threads, tol);
    bool listed = expected.count(name) > 0;
    if (r.verdict == Verdict::pass) {
      ++passed;
      if (listed) {
        ++unexpected;
        std::printf("UNEXPECTED PASS %s (listed as an expected failure: remove it)\n",
                    name.c_str());
      }
    } else if (r.verdict == Verdict::skip) {
      ++skipped;
      std::printf("SKIP %s: %s\n", name.c_str(), r.why.c_str());
    } else {
      ++failed;
      if (!listed) ++unexpected;
      std::printf("%s %s: %s\n", listed ? "xfail" : "FAIL", name.c_str(), r.why.c_str());
    }
    std::fflush(stdout);
  }
  int total = passed + failed + skipped;
  std::printf("%d passed, %d failed, %d skipped (%.1f%% of %d passed)\n", passed, failed, skipped,
              total ? 100.0 * passed / total : 0.0, total);
  if (!expected_path.empty())
    std::printf("%d unexpected (failures not in %s, or passes listed there)\n", unexpected,
                expected_path.c_str());
  return (expected_path.empty() ? failed : unexpected) ? 1 : 0;
}

}  // namespace rlx::cli
