// Unit tests of passes as text-format before / after pairs:
//
//   expect_pass("cse", R"(graph main(%x: f32[4]) { … })", R"(graph main(%x: f32[4]) { … })");
//
// parses `before`, runs the pass, and checks that the result prints exactly as `after`
// parsed and printed (so value numbering and spacing in the test text do not matter).
// An empty `after` means the pass must change nothing (return null). The before and
// after graphs are then both run (no passes) on the same pseudo-random inputs and their
// outputs compared, so a pair that prints right but computes something else still fails.
#pragma once

#include <string_view>

#include "rlx/kernel.h"
#include "rlx/passes.h"
#include "rlx/session.h"

namespace rlx::test {

struct PassCheckOptions {
  PassContext ctx = {};
  bool compare_outputs = true;  // run both graphs and compare (static shapes only)
  double rtol = 1e-5, atol = 1e-6;
  double lo = -2, hi = 2;  // range of the random float inputs
};

void expect_pass(std::string_view pass, std::string_view before, std::string_view after,
                 const PassCheckOptions& options = {});

// ctx as a Session completes it: the CPU kernels registered (where ctx names no registry)
// and constant folding's evaluator set.
inline PassContext session_like(PassContext ctx) {
  if (!ctx.kernels) register_cpu_kernels();
  if (!ctx.evaluate) ctx.evaluate = cpu_evaluator();
  return ctx;
}

// Options for a pass on `device` that asks `kernels` which kernels it has (cuda's
// registry, filled without a GPU: register_cuda_kernels(kernels)).
inline PassCheckOptions on_device(Device device, const KernelRegistry& kernels) {
  PassCheckOptions o;
  o.ctx.device = device;
  o.ctx.kernels = &kernels;
  return o;
}

// Runs g with opt_level 0 and with `options` on the same pseudo-random inputs (static
// shapes) and checks the outputs agree: bitwise for integer and bool outputs, within
// rtol / atol for floats.
void expect_same_outputs(const Graph& g, const CompileOptions& options, uint64_t seed = 1,
                         double rtol = 1e-5, double atol = 1e-6, double lo = -2, double hi = 2);
// The same for two graphs with the same args and outputs, both run without passes.
void expect_same_outputs(const Graph& a, const Graph& b, uint64_t seed = 1, double rtol = 1e-5,
                         double atol = 1e-6, double lo = -2, double hi = 2);

}  // namespace rlx::test
