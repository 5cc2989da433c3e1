// rlx: run and inspect rlx graphs from the command line.
//
//   rlx --version
//   rlx run GRAPH.rlx [--input NAME=FILE.npy …] [--param NAME=FILE.npy …] [--random]
//                     [--dim NAME=SIZE …] [--runs N] [--threads N] [--save-outputs DIR]
//   rlx report GRAPH.rlx [--dim NAME=SIZE …]
//   rlx run MODEL.onnx [--data DIR | --input NAME=FILE.npy … | --random] [--device cpu|cuda]
//                      [--rtol R] [--atol A] [--range-tol F] [--max-mismatch FRACTION]
//   rlx bench MODEL.onnx [--runs N] [--threads N] [--device cpu|cuda]
//   rlx ops MODEL.onnx
//   rlx convert MODEL.onnx -o MODEL.rlx
//   rlx onnx-test DIR… [--expected-failures FILE] [--rtol R] [--atol A]
//   rlx generate MODEL.gguf (-p TEXT | --prompt-tokens 1,2,3) [-n N] [--temp T …]
//   rlx bench-llm MODEL.gguf [-p 512] [-n 128] [--threads N] [--device cpu|cuda]
//   rlx quantize IN.gguf OUT.gguf TYPE
//
// Every error prints "rlx: error: <message>" to stderr and exits 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <set>
#include <string>

#include "cli.h"
#include "rlx/version.h"

namespace {

int error(const std::string& msg) {
  std::fprintf(stderr, "rlx: error: %s\n", msg.c_str());
  return 1;
}

// --rtol, --atol, --range-tol, --max-mismatch; rlx::cli::validate checks their values.
void add_tolerance_options(CLI::App* cmd, rlx::cli::Tolerance& tol) {
  cmd->add_option(
         "--rtol", tol.rtol,
         "relative tolerance: |got - want| <= max(atol, range-tol * range) + rtol * |want|")
      ->capture_default_str();
  cmd->add_option("--atol", tol.atol, "absolute tolerance")->capture_default_str();
  cmd->add_option("--range-tol", tol.range_tol,
                  "absolute tolerance as a fraction of the expected output's range (max - min), "
                  "where larger than --atol")
      ->capture_default_str();
  cmd->add_option("--max-mismatch", tol.max_mismatch,
                  "an output passes with at most this fraction of its elements out of "
                  "tolerance (for outputs decided by comparisons, e.g. NMS masks)")
      ->type_name("FRACTION")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("rlx: compile and run rlx graphs (text format) and ONNX models on the CPU or a GPU",
               "rlx");
  app.set_version_flag("--version", std::string("rlx ") + rlx::version());
  app.require_subcommand(1);

  rlx::cli::RunOptions run;
  CLI::App* run_cmd = app.add_subcommand("run",
                                         "compile a graph on a device (the CPU by default), "
                                         "run it, print its outputs and the timing");
  run_cmd
      ->add_option("graph", run.graph_path, "graph file in the rlx text format, or an ONNX model")
      ->required()
      ->type_name("GRAPH.rlx|MODEL.onnx");
  run_cmd
      ->add_option("--data", run.data_dir,
                   "ONNX models: inputs from DIR/input_N.pb; the outputs are checked "
                   "against DIR/output_N.pb, one line each (exit 1 when one fails "
                   "--rtol / --atol / --max-mismatch)")
      ->type_name("DIR");
  add_tolerance_options(run_cmd, run.tolerance);
  run_cmd->add_option("--device", run.device, "device to run on")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  run_cmd->add_option("--input,-i", run.inputs, "an input from a .npy file (repeatable)")
      ->type_name("NAME=FILE.npy")
      ->allow_extra_args(false);
  run_cmd->add_option("--param,-p", run.params, "a param from a .npy file (repeatable)")
      ->type_name("NAME=FILE.npy")
      ->allow_extra_args(false);
  run_cmd->add_flag("--random,-r", run.random,
                    "random values for the inputs and params not given (floats in [-1, 1), "
                    "integers in [0, 4), bools)");
  run_cmd
      ->add_option("--dim,-d", run.dims,
                   "size of a symbolic dim (repeatable; default: from the .npy inputs, "
                   "else 1)")
      ->type_name("NAME=SIZE")
      ->allow_extra_args(false);
  run_cmd->add_option("--seed", run.seed, "seed of --random")->capture_default_str();
  run_cmd->add_option("--runs", run.runs, "timed runs after the first (median and min)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  run_cmd->add_option("--threads", run.threads, "kernel threads (0: every core)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  run_cmd->add_option("--show", run.show, "values printed per output")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  run_cmd->add_option("--save-outputs", run.save_outputs, "write each output to DIR/NAME.npy")
      ->type_name("DIR");

  std::string report_path;
  CLI::App* report_cmd = app.add_subcommand("report",
                                            "print how each op of a graph resolves on the CPU "
                                            "(native, decomposed, host, missing) and the "
                                            "memory a run takes");
  report_cmd->add_option("graph", report_path, "graph file in the rlx text format")
      ->required()
      ->type_name("GRAPH.rlx");
  std::vector<std::string> report_dims;
  report_cmd
      ->add_option("--dim,-d", report_dims,
                   "size of a symbolic dim for the memory plan (repeatable; default 1)")
      ->type_name("NAME=SIZE")
      ->allow_extra_args(false);

  std::string bench_path;
  int bench_runs = 20, bench_threads = 0;
  std::string bench_device = "cpu";
  std::vector<std::string> bench_dims;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "load, compile and time an ONNX model on random inputs (median and min latency)");
  bench_cmd->add_option("model", bench_path, "ONNX model")->required()->type_name("MODEL.onnx");
  bench_cmd->add_option("--runs", bench_runs, "timed runs after the first")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  bench_cmd->add_option("--threads", bench_threads, "kernel threads (0: every core)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  bench_cmd->add_option("--device", bench_device, "device to run on")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  bench_cmd->add_option("--dim,-d", bench_dims, "size of a symbolic dim (default 1)")
      ->type_name("NAME=SIZE")
      ->allow_extra_args(false);

  std::string ops_path;
  CLI::App* ops_cmd =
      app.add_subcommand("ops",
                         "an ONNX model's op histogram, whether rlx converts each op, and how the "
                         "imported graph's ops run");
  ops_cmd->add_option("model", ops_path, "ONNX model")->required()->type_name("MODEL.onnx");

  std::string convert_in, convert_out;
  CLI::App* convert_cmd =
      app.add_subcommand("convert", "import an ONNX model and write the rlx text IR");
  convert_cmd->add_option("model", convert_in, "ONNX model")->required()->type_name("MODEL.onnx");
  convert_cmd->add_option("-o,--output", convert_out, "the graph file to write")
      ->required()
      ->type_name("MODEL.rlx");

  std::vector<std::string> test_dirs;
  std::string test_expected;
  int test_threads = 1;
  CLI::App* test_cmd =
      app.add_subcommand("onnx-test",
                         "run ONNX backend-test cases (DIR/model.onnx + test_data_set_N/) and "
                         "print each failure and a summary");
  test_cmd->add_option("dirs", test_dirs, "case directories, or directories of cases")
      ->required()
      ->type_name("DIR");
  test_cmd
      ->add_option("--expected-failures", test_expected,
                   "cases expected to fail (NAME  # reason per line): the exit status is "
                   "1 only for other failures and for listed cases that pass")
      ->type_name("FILE");
  test_cmd->add_option("--threads", test_threads, "kernel threads")->capture_default_str();
  rlx::cli::Tolerance test_tolerance;
  add_tolerance_options(test_cmd, test_tolerance);

  rlx::cli::LlmOptions llm;
  rlx::cli::add_llm_commands(app, llm);

  // CLI11 would only say that a subcommand is required.
  static const std::set<std::string> known{
      "run", "report", "bench", "ops", "convert", "onnx-test", "generate", "bench-llm", "quantize"};
  if (std::string a = argc > 1 ? argv[1] : "-"; a[0] != '-' && !known.count(a))
    return error("unknown subcommand '" + a +
                 "'; expected run, report, bench, ops, convert, onnx-test, generate, "
                 "bench-llm or quantize");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return error(std::string(e.what()) + " (see rlx --help)");
  }
  try {
    if (*run_cmd) {
      if (run.data_dir.empty())
        for (const char* flag : {"--rtol", "--atol", "--range-tol", "--max-mismatch"})
          if (run_cmd->count(flag))
            throw rlx::ValueError(std::string(flag) +
                                  " applies to the check of --data DIR; got no --data");
      return rlx::cli::run_command(run);
    }
    if (*bench_cmd)
      return rlx::cli::bench_command(bench_path, bench_runs, bench_threads, bench_dims,
                                     bench_device);
    if (*ops_cmd) return rlx::cli::ops_command(ops_path);
    if (*convert_cmd) return rlx::cli::convert_command(convert_in, convert_out);
    if (*test_cmd)
      return rlx::cli::onnx_test_command(test_dirs, test_expected, test_threads, test_tolerance);
    if (*llm.generate || *llm.bench || *llm.quantize) return rlx::cli::llm_command(llm);
    return rlx::cli::report_command(report_path, report_dims);
  } catch (const std::exception& e) {
    return error(e.what());
  }
}
