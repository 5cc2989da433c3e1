// The rlx command-line tool: its subcommands and the pieces they share.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlx/graph.h"
#include "rlx/session.h"
#include "rlx/tensor.h"
#include "rlx_llm/llm.h"

namespace CLI {
class App;
}

namespace rlx::cli {

// How a model's outputs are checked against expected ones: element by element
// |got - want| <= max(atol, range_tol * range) + rtol * |want| (NaN matches NaN), where
// range is max - min of the expected output, and an output passes when at most
// `max_mismatch` of its elements (a fraction) are outside that. rtol and atol default to
// ONNX's backend test runner's (onnx/backend/test/loader/__init__.py and
// case/node/__init__.py: rtol 1e-3, atol 1e-7, which runner/__init__.py's
// assert_similar_outputs hands to numpy.testing.assert_allclose, the same formula).
struct Tolerance {
  double rtol = 1e-3, atol = 1e-7;
  // A fixed atol suits outputs of ONNX's node tests (values near 1), not real models: f32
  // sums leave ~1e-6 of an output's range on elements near 0 (1e-7 fails them), and
  // logits of range 1e-8 pass any answer near 0. `rlx run --data` adds 1e-5 of the range.
  double range_tol = 0;
  // For outputs decided by comparisons (an NMS `maxpool == x` mask flips on a one-ulp
  // difference): the rest of the elements still match.
  double max_mismatch = 0;
};
// Throws ValueError for a negative or non-finite tolerance or a fraction outside [0, 1].
void validate(const Tolerance& tol);

// One output against its expected value.
struct OutputCheck {
  bool ok = true;
  bool is_string = false;
  std::string type_error;  // dtype or shape differ: nothing else was compared
  double max_abs = 0;      // the largest |got - want|
  double range = 0;        // max - min of the expected (finite) values
  bool vacuous = false;    // every expected value within atol of 0: zeros would pass
  int64_t mismatched = 0, total = 0;
  std::string first;  // the first element out of tolerance
  // "max abs err E (R of range X), M of N out of tolerance (P%): PASS|FAIL…", and a note
  // when the check is vacuous.
  std::string str(const Tolerance& tol) const;
};
// Same dtype and shape, then numbers within `tol` (strings equal exactly).
OutputCheck compare(const Tensor& got, const Tensor& want, const Tolerance& tol);

struct RunOptions {
  std::string graph_path;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> params;  // NAME=FILE.npy
  std::vector<std::string> dims;    // NAME=SIZE
  bool random = false;
  uint64_t seed = 0;
  int runs = 10;
  int threads = 0;
  int show = 8;
  std::string save_outputs;
  std::string data_dir;                    // ONNX test layout: input_N.pb, output_N.pb
  Tolerance tolerance{.range_tol = 1e-5};  // of the --data check
  std::string device = "cpu";
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0);
std::string time_str(double seconds);  // "1.234 ms"
// "cpu" or "cuda" (device 0).
Device parse_device(const std::string& name);
// Waits for the work queued on the device (nothing to wait for on the CPU).
void synchronize(Device device);

int run_command(const RunOptions& o);
// `dims`: NAME=SIZE, the sizes the memory plan is made for (unnamed ones: 1).
int report_command(const std::string& graph_path, const std::vector<std::string>& dims);

// The pieces of `rlx run`: binding args from files or random values, then compiling,
// running (o.runs timed runs) and printing the outputs and timing.
TensorMap bind_args(const Graph& g, const RunOptions& o, std::vector<std::string>& sources);
TensorMap run_graph(const Graph& g, TensorMap args, const std::vector<std::string>& sources,
                    const RunOptions& o);
void save_outputs(const TensorMap& outs, const std::string& dir);

// ONNX models (onnx.cpp).
bool is_onnx_path(const std::string& path);
int run_onnx_command(const RunOptions& o);
int bench_command(const std::string& path, int runs, int threads,
                  const std::vector<std::string>& dims, const std::string& device);
int ops_command(const std::string& path);
int convert_command(const std::string& path, const std::string& out);
int onnx_test_command(const std::vector<std::string>& dirs, const std::string& expected_failures,
                      int threads, const Tolerance& tol);

// GGUF models (llm.cpp): generate, bench-llm, quantize.
struct LlmOptions {
  std::string model, device = "cpu", kv = "f16";
  int threads = 0;
  int64_t ctx = 0;
  int64_t ubatch = llm::LoadOptions{}.prefill_chunk;
  int fuse = -1;  // --fuse 1, --no-fuse 0, neither: LoadOptions' default
  std::string prompt, prompt_tokens, dump_logits;
  int64_t n = 128;
  llm::SamplerOptions sampler;
  bool print_tokens = false;
  int64_t bench_prompt = 512, bench_gen = 128;
  int bench_reps = 3;
  int64_t batch = 1;
  std::string out, type, output_type;
  CLI::App *generate = nullptr, *bench = nullptr, *quantize = nullptr;
};
void add_llm_commands(CLI::App& app, LlmOptions& o);
int llm_command(const LlmOptions& o);  // the one of o's subcommands that was parsed

// Reads and parses a graph file; parse errors become "FILE:LINE:COL: message".
std::unique_ptr<Graph> load_graph(const std::string& path);
// Splits "NAME=VALUE" (the first '='); `flag` names the option in errors.
std::pair<std::string, std::string> split_assignment(const std::string& text,
                                                     const std::string& flag);
// "[1, 2.5, …]": the first `count` elements in row-major order.
std::string preview(const Tensor& t, int count);
// "[a, b]".
std::string names_str(const std::vector<std::string>& names);
// A size >= 0 from text; `what` names it in the error.
int64_t parse_size(const std::string& text, const std::string& what);
// Sizes of the graph's symbolic dims: --dim (`dims`, NAME=SIZE) first, then the shapes of
// the tensors loaded from files, then 1. Throws ValueError for a dim the graph lacks.
std::map<std::string, int64_t> bind_dims(const Graph& g, const std::vector<std::string>& dims,
                                         const TensorMap& loaded);

}  // namespace rlx::cli
