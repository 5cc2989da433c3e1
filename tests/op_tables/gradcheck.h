// The gradient-check harness: one table per op family of (op, inputs, attrs) cases, run
// through the transforms on the CPU in f64 and compared with finite differences:
//   vjp  — grad of a random projection of the outputs vs central differences;
//   jvp  — the tangent outputs for a random tangent vs central differences;
//   hvp  — the Hessian-vector product vs central differences of grad;
//   vmap — the op vmapped over a batch of 3 (several in_axes / out_axes) vs a loop of
//          unbatched runs (every op, differentiable or not).
#pragma once

#include <string>
#include <vector>

#include "op_tables/consistency.h"

namespace rlx::test {

struct GradCheck {
  std::string op;
  Tensors inputs;  // float inputs in f64; integer inputs (indices, labels) as they are
  Attrs attrs;
  std::vector<SubgraphPtr> subgraphs;
  std::string note;
  // Inputs to differentiate (default: every float input).
  std::vector<int> wrt;
  // Which checks apply. vjp/jvp/hvp need a differentiable op; hvp also a twice
  // differentiable one (off for piecewise-linear ops: relu, max, abs…, whose second
  // derivative is 0 where defined — it still runs, and must give 0, unless off).
  bool vjp = true, jvp = true, hvp = true, vmap = true;
  double rtol = 1e-6;  // relative to max(1, max |finite difference|)
  double eps = 1e-6;   // finite-difference step (f64)
};

struct GradTable {
  std::vector<GradCheck> checks;
  // Ops that are exempt from the coverage test, with the reason (nondifferentiable ops
  // need only vmap checks; an exemption here means no check at all).
  std::vector<std::pair<std::string, std::string>> exempt;
  void add(GradCheck c) { checks.push_back(std::move(c)); }
  void append(GradTable other);
};

// One table per family (tests/op_tables/grads_<family>.cpp).
GradTable grads_elementwise();
GradTable grads_reduce();  // reductions, cumsum, matmul, dot_general
GradTable grads_shape();
GradTable grads_nn();    // softmax, norms, attention, embedding, dropout, cross_entropy
GradTable grads_conv();  // conv, conv_transpose, pools, resize
GradTable grads_control();
GradTable grads_autodiff();  // reshape_like, broadcast_like, stop_gradient, checkpoint
GradTable grads_fused();     // fused_matmul, fused_conv
GradTable grads_quant();     // quant_matmul (through x)
GradTable grads_llm();       // rope, kv_cache_write, attention_cached
GradTable grads_region();    // fused_elementwise
GradTable grads_complex();   // complex, real, imag, conj, the FFTs (exemptions)
GradTable all_grads();

// A check of every input in f64 (random values in [lo, hi]) — the common case.
GradCheck grad_check(std::string op, std::vector<std::vector<int64_t>> shapes, Attrs attrs = {},
                     double lo = -1, double hi = 1, std::string note = {});
// A check of the given inputs.
GradCheck with_inputs(std::string op, Tensors inputs, Attrs attrs = {}, std::string note = {});
// Random f64 values in [lo, hi] whose magnitude is at least `gap` (away from kinks at 0).
Tensor away_from_zero(std::vector<int64_t> shape, uint64_t seed, double gap = 0.1, double hi = 1);

// The device the checks compile for (default the CPU); inputs and outputs stay on the host.
void set_grad_check_device(Device d);

// Runs the enabled checks; returns the failures (empty: passed).
std::vector<std::string> run_grad_check(const GradCheck& c);
std::string grad_label(const GradCheck& c);

}  // namespace rlx::test
