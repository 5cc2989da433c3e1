// bench/onnx_vs_ort: every model under a models folder (default ../shared/models) in rlx
// and in ONNX Runtime 1.30 (npm's onnxruntime-node, run by ort_bench.js), 2 threads
// each, on the inputs of the model's test_data_set_0. Prints per model the median
// latency of both (best of alternating rounds) and rlx/ORT, then the geometric mean.
//
//   rlx-bench-onnx [MODELS_DIR] [--runs N] [--threads N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rlx/cpu_isa.h"
#include "rlx/onnx.h"
#include "rlx/session.h"

namespace fs = std::filesystem;
using namespace rlx;

namespace {

constexpr int kRounds = 3;

const char* ort_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i64:
      return "int64";
    case DType::i32:
      return "int32";
    case DType::i8:
      return "int8";
    case DType::u8:
      return "uint8";
    case DType::boolean:
      return "bool";
    default:
      return nullptr;
  }
}

std::vector<std::string> input_files(const fs::path& set) {
  std::vector<std::string> out;
  for (int i = 0;; ++i) {
    fs::path p = set / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p.string());
  }
  return out;
}

struct Timing {
  double median_ms = NAN, min_ms = NAN;
};

// rlx's side: the model imported and compiled once; run() times `runs` runs.
struct RlxModel {
  CompiledGraph compiled;
  TensorMap args;

  RlxModel(const std::string& model, const std::vector<std::string>& names,
           const std::vector<Tensor>& in, int threads) {
    onnx::ImportOptions io;
    for (size_t i = 0; i < names.size(); ++i) io.input_shapes[names[i]] = in[i].shape();
    onnx::Model m = onnx::load(model, io);
    CompileOptions copts;
    copts.threads = threads;
    compiled = Session(Device::cpu()).compile(*m.graph, copts);
    for (size_t i = 0; i < in.size(); ++i) args[m.graph->args()[i].name] = in[i];
    for (int i = 0; i < 5; ++i) compiled.run(args);
  }

  Timing run(int runs) const {
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      compiled.run(args);
      t.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t[0]};
  }
};

// Writes the inputs and job.json, runs node, reads "median min".
Timing time_ort(const std::string& model, const std::vector<std::string>& names,
                const std::vector<Tensor>& in, int runs, int threads, const fs::path& work) {
  fs::create_directories(work);
  std::string json = "{\"model\": \"" + fs::absolute(model).string() +
                     "\", \"threads\": " + std::to_string(threads) +
                     ", \"warmup\": 5, \"runs\": " + std::to_string(runs) + ", \"inputs\": [";
  for (size_t i = 0; i < in.size(); ++i) {
    const char* dt = ort_dtype(in[i].dtype());
    if (!dt) return {};
    std::string file = "input_" + std::to_string(i) + ".bin";
    std::ofstream f(work / file, std::ios::binary);
    Tensor c = in[i].contiguous();
    f.write(static_cast<const char*>(c.data()), std::streamsize(c.nbytes()));
    std::string shape;
    for (int64_t d : c.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    json += std::string(i ? ", " : "") + "{\"name\": \"" + names[i] + "\", \"dtype\": \"" + dt +
            "\", \"shape\": [" + shape + "], \"file\": \"" + file + "\"}";
  }
  json += "]}";
  std::ofstream(work / "job.json") << json;
  std::string cmd = "node " RLX_ORT_BENCH_JS " " + (work / "job.json").string();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  Timing t;
  if (std::fscanf(p, "%lf %lf", &t.median_ms, &t.min_ms) != 2) t = {};
  if (pclose(p) != 0) t = {};
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string root = "../shared/models";
  int runs = 50, threads = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--quick")
      runs = 10;
    else if (a.rfind("-", 0) == 0) {
      std::fprintf(stderr,
                   "usage: rlx-bench-onnx [MODELS_DIR] [--runs N] [--threads N] [--quick]\n"
                   "  MODELS_DIR holds one folder per model with model.onnx (default "
                   "../shared/models)\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    } else
      root = a;
  }
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    std::fprintf(stderr, "rlx-bench-onnx: expected a folder of models, got '%s'\n", root.c_str());
    return 2;
  }
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx")) models.push_back(e.path());
  std::sort(models.begin(), models.end());
  if (models.empty()) {
    std::fprintf(stderr, "no DIR/model.onnx under %s\n", root.c_str());
    return 1;
  }
  fs::path work = fs::temp_directory_path() / ("rlx-onnx-bench-" + std::to_string(::getpid()));
  std::printf(
      "rlx vs ONNX Runtime 1.30 (onnxruntime-node), %d threads each: the best of %d alternating "
      "rounds of the median of %d runs; rlx's CPU kernels: %s\n",
      threads, kRounds, runs, std::string(rlx::cpu_isa_name(rlx::cpu_isa())).c_str());
  std::printf("%-14s %12s %12s %10s\n", "model", "rlx ms", "ORT ms", "rlx/ORT");
  double log_sum = 0;
  int counted = 0;
  for (const fs::path& dir : models) {
    std::string model = (dir / "model.onnx").string();
    std::string name = dir.filename().string();
    try {
      std::vector<std::string> names = onnx::graph_inputs(model);
      std::vector<Tensor> in;
      for (const auto& f : input_files(dir / "test_data_set_0")) in.push_back(onnx::read_tensor(f));
      // Rounds alternate between the two, and each side keeps its best round: the
      // machine's speed drifts (shared hosts), and both should meet its best moments.
      RlxModel rlx_model(model, names, in, threads);
      Timing r{INFINITY, INFINITY}, o{INFINITY, INFINITY};
      for (int round = 0; round < kRounds; ++round) {
        Timing a = rlx_model.run(runs), b = time_ort(model, names, in, runs, threads, work / name);
        r = {std::min(r.median_ms, a.median_ms), std::min(r.min_ms, a.min_ms)};
        o = {std::min(o.median_ms, b.median_ms), std::min(o.min_ms, b.min_ms)};
      }
      double ratio = r.median_ms / o.median_ms;
      std::printf("%-14s %12.3f %12.3f %10.2f\n", name.c_str(), r.median_ms, o.median_ms, ratio);
      if (std::isfinite(ratio)) {
        log_sum += std::log(ratio);
        ++counted;
      }
    } catch (const std::exception& e) {
      std::printf("%-14s failed: %s\n", name.c_str(), e.what());
    }
    std::fflush(stdout);
  }
  fs::remove_all(work);
  if (counted)
    std::printf("geometric mean rlx/ORT over %d models: %.2f\n", counted,
                std::exp(log_sum / counted));
  return 0;
}
