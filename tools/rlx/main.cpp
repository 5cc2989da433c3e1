// rlx: run and inspect rlx graphs from the command line.
//
//   rlx --version
//   rlx run GRAPH.rlx [--input NAME=FILE.npy …] [--param NAME=FILE.npy …] [--random]
//                     [--dim NAME=SIZE …] [--runs N] [--threads N] [--save-outputs DIR]
//   rlx report GRAPH.rlx [--dim NAME=SIZE …]
//
// Every error prints "rlx: error: <message>" to stderr and exits 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "cli.h"

namespace {

int error(const std::string& msg) {
  std::fprintf(stderr, "rlx: error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("rlx: compile and run rlx graphs (text format) on the CPU", "rlx");
  app.set_version_flag("--version", std::string("rlx ") + RLX_VERSION);
  app.require_subcommand(1);

  rlx::cli::RunOptions run;
  CLI::App* run_cmd = app.add_subcommand("run",
                                         "compile a graph on the CPU, run it, print "
                                         "its outputs and the timing");
  run_cmd->add_option("graph", run.graph_path, "graph file in the rlx text format")
      ->required()
      ->type_name("GRAPH.rlx");
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

  // CLI11 would only say that a subcommand is required.
  if (std::string a = argc > 1 ? argv[1] : "-"; a[0] != '-' && a != "run" && a != "report")
    return error("unknown subcommand '" + a + "'; expected run or report");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return error(std::string(e.what()) + " (see rlx --help)");
  }
  try {
    if (*run_cmd) return rlx::cli::run_command(run);
    return rlx::cli::report_command(report_path, report_dims);
  } catch (const std::exception& e) {
    return error(e.what());
  }
}
